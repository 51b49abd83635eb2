package server

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// --- rooms -----------------------------------------------------------------

// CreateRoom creates a room (POST /v1/rooms, scope rooms:write). params may
// be nil. Accepts WithIdempotencyKey.
func (c *Client) CreateRoom(ctx context.Context, params *CreateRoomParams, opts ...RequestOption) (*Room, error) {
	var out Room
	if err := c.do(ctx, request{method: http.MethodPost, path: "/rooms", body: params, idemOK: true}, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListRooms lists the project's rooms, newest first, all statuses (GET
// /v1/rooms, rooms:read). limit is 1 to 100; 0 means the server's default (50).
func (c *Client) ListRooms(ctx context.Context, limit int, opts ...RequestOption) (*Page[Room], error) {
	return list[Room](ctx, c, "/rooms", limit, opts)
}

// GetRoom returns one room (GET /v1/rooms/{room_id}, rooms:read).
func (c *Client) GetRoom(ctx context.Context, roomID string, opts ...RequestOption) (*Room, error) {
	return get[Room](ctx, c, opts, "/rooms/", "roomID", roomID)
}

// DeleteRoom ends a room (DELETE /v1/rooms/{room_id}, rooms:write) and
// returns it in its new state (ending, or ended). Idempotent.
func (c *Client) DeleteRoom(ctx context.Context, roomID string, opts ...RequestOption) (*Room, error) {
	return del[Room](ctx, c, opts, "/rooms/", "roomID", roomID)
}

// --- participants ----------------------------------------------------------

// CreateParticipant creates a participant session in a room and returns it
// with its token (POST /v1/rooms/{room_id}/participants,
// participants:write). params may be nil. Accepts WithIdempotencyKey. While
// the workspace is out of credit it fails with 402 insufficient_credit.
func (c *Client) CreateParticipant(ctx context.Context, roomID string, params *CreateParticipantParams, opts ...RequestOption) (*ParticipantSession, error) {
	room, err := pathID("roomID", roomID)
	if err != nil {
		return nil, err
	}
	var out ParticipantSession
	if err := c.do(ctx, request{method: http.MethodPost, path: "/rooms/" + room + "/participants", body: params, idemOK: true}, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListParticipants lists a room's participants, newest first (GET
// /v1/rooms/{room_id}/participants, participants:read).
func (c *Client) ListParticipants(ctx context.Context, roomID string, limit int, opts ...RequestOption) (*Page[Participant], error) {
	room, err := pathID("roomID", roomID)
	if err != nil {
		return nil, err
	}
	return list[Participant](ctx, c, "/rooms/"+room+"/participants", limit, opts)
}

// GetParticipant returns one participant (GET
// /v1/rooms/{room_id}/participants/{participant_id}, participants:read).
func (c *Client) GetParticipant(ctx context.Context, roomID, participantID string, opts ...RequestOption) (*Participant, error) {
	room, err := pathID("roomID", roomID)
	if err != nil {
		return nil, err
	}
	return get[Participant](ctx, c, opts, "/rooms/"+room+"/participants/", "participantID", participantID)
}

// DeleteParticipant removes a participant: its token is refused from then on
// (DELETE /v1/rooms/{room_id}/participants/{participant_id},
// participants:write). Returns it in its new state. Idempotent.
func (c *Client) DeleteParticipant(ctx context.Context, roomID, participantID string, opts ...RequestOption) (*Participant, error) {
	room, err := pathID("roomID", roomID)
	if err != nil {
		return nil, err
	}
	return del[Participant](ctx, c, opts, "/rooms/"+room+"/participants/", "participantID", participantID)
}

// --- API keys --------------------------------------------------------------

// CreateAPIKey creates a secret API key (POST /v1/api-keys,
// api_keys:write); the secret is in the response only. Accepts
// WithIdempotencyKey.
func (c *Client) CreateAPIKey(ctx context.Context, params *CreateAPIKeyParams, opts ...RequestOption) (*CreatedAPIKey, error) {
	var out CreatedAPIKey
	if err := c.do(ctx, request{method: http.MethodPost, path: "/api-keys", body: params, idemOK: true}, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListAPIKeys lists the project's keys, active and revoked, newest first
// (GET /v1/api-keys, api_keys:read).
func (c *Client) ListAPIKeys(ctx context.Context, limit int, opts ...RequestOption) (*Page[APIKey], error) {
	return list[APIKey](ctx, c, "/api-keys", limit, opts)
}

// RevokeAPIKey revokes a key (DELETE /v1/api-keys/{key_id},
// api_keys:write). Idempotent. The key the client authenticates with cannot
// revoke itself (409 conflict, details reason cannot_revoke_current_key).
func (c *Client) RevokeAPIKey(ctx context.Context, keyID string, opts ...RequestOption) (*APIKey, error) {
	return del[APIKey](ctx, c, opts, "/api-keys/", "keyID", keyID)
}

// --- project and system ----------------------------------------------------

// GetProjectLimits returns the project's effective limits (GET
// /v1/project/limits, project:read).
func (c *Client) GetProjectLimits(ctx context.Context, opts ...RequestOption) (*ProjectLimits, error) {
	return get[ProjectLimits](ctx, c, opts, "/project/limits", "", "")
}

// ListAuditLogs lists the project's audit log, newest first (GET
// /v1/audit-logs, audit_logs:read).
func (c *Client) ListAuditLogs(ctx context.Context, limit int, opts ...RequestOption) (*Page[AuditLogEntry], error) {
	return list[AuditLogEntry](ctx, c, "/audit-logs", limit, opts)
}

// GetSystemInfo identifies the deployment (GET /v1/system/info; any valid key).
func (c *Client) GetSystemInfo(ctx context.Context, opts ...RequestOption) (*SystemInfo, error) {
	return get[SystemInfo](ctx, c, opts, "/system/info", "", "")
}

// --- usage -----------------------------------------------------------------

// Day formats t's UTC calendar day as YYYY-MM-DD, the format of the usage
// calls' from and to.
func Day(t time.Time) string { return t.UTC().Format("2006-01-02") }

// GetUsageSummary returns the project's finalized usage from day from to day
// to, both included (YYYY-MM-DD, UTC; at most 366 days) (GET
// /v1/usage/summary, usage:read).
func (c *Client) GetUsageSummary(ctx context.Context, from, to string, opts ...RequestOption) (*UsageSummary, error) {
	var out UsageSummary
	q := url.Values{"from": {from}, "to": {to}}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/usage/summary", query: q}, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetUsageDaily returns the project's finalized usage per day from day from
// to day to, both included (GET /v1/usage/daily, usage:read).
func (c *Client) GetUsageDaily(ctx context.Context, from, to string, opts ...RequestOption) (*UsageDaily, error) {
	var out UsageDaily
	q := url.Values{"from": {from}, "to": {to}}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/usage/daily", query: q}, &out, opts); err != nil {
		return nil, err
	}
	if out.Data == nil {
		out.Data = []UsageDay{}
	}
	return &out, nil
}

// --- billing ---------------------------------------------------------------

// GetBalance returns the workspace's balance (GET /v1/billing/balance,
// billing:read).
func (c *Client) GetBalance(ctx context.Context, opts ...RequestOption) (*Balance, error) {
	return get[Balance](ctx, c, opts, "/billing/balance", "", "")
}

// GetPricing returns the price, the credit policy and the workspace's
// credit state (GET /v1/billing/pricing, billing:read).
func (c *Client) GetPricing(ctx context.Context, opts ...RequestOption) (*Pricing, error) {
	return get[Pricing](ctx, c, opts, "/billing/pricing", "", "")
}

// ListLedgerEntries lists the workspace's ledger, newest first (GET
// /v1/billing/ledger, billing:read).
func (c *Client) ListLedgerEntries(ctx context.Context, limit int, opts ...RequestOption) (*Page[LedgerEntry], error) {
	return list[LedgerEntry](ctx, c, "/billing/ledger", limit, opts)
}

// CreateTopup starts a top-up; send the payer to its AuthorizeURL (POST
// /v1/billing/topups, billing:write). The route takes no Idempotency-Key,
// so this call is never retried automatically: a repeated call creates a
// second top-up (an unpaid one simply expires).
func (c *Client) CreateTopup(ctx context.Context, params *CreateTopupParams, opts ...RequestOption) (*Topup, error) {
	var out Topup
	if err := c.do(ctx, request{method: http.MethodPost, path: "/billing/topups", body: params}, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListTopups lists the workspace's top-ups, newest first (GET
// /v1/billing/topups, billing:read).
func (c *Client) ListTopups(ctx context.Context, limit int, opts ...RequestOption) (*Page[Topup], error) {
	return list[Topup](ctx, c, "/billing/topups", limit, opts)
}

// GetTopup returns one top-up (GET /v1/billing/topups/{payment_id},
// billing:read). An unknown id is a 404 with code invalid_request.
func (c *Client) GetTopup(ctx context.Context, paymentID string, opts ...RequestOption) (*Topup, error) {
	return get[Topup](ctx, c, opts, "/billing/topups/", "paymentID", paymentID)
}

// --- webhook endpoints -----------------------------------------------------

// CreateWebhookEndpoint registers a webhook endpoint and returns it with its
// signing secret, shown only here (POST /v1/webhook-endpoints,
// webhooks:write). Accepts WithIdempotencyKey.
func (c *Client) CreateWebhookEndpoint(ctx context.Context, params *CreateWebhookEndpointParams, opts ...RequestOption) (*CreatedWebhookEndpoint, error) {
	var out CreatedWebhookEndpoint
	if err := c.do(ctx, request{method: http.MethodPost, path: "/webhook-endpoints", body: params, idemOK: true}, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListWebhookEndpoints lists the project's endpoints, enabled and disabled,
// newest first (GET /v1/webhook-endpoints, webhooks:read).
func (c *Client) ListWebhookEndpoints(ctx context.Context, limit int, opts ...RequestOption) (*Page[WebhookEndpoint], error) {
	return list[WebhookEndpoint](ctx, c, "/webhook-endpoints", limit, opts)
}

// DisableWebhookEndpoint disables an endpoint for good (DELETE
// /v1/webhook-endpoints/{endpoint_id}, webhooks:write). Idempotent.
func (c *Client) DisableWebhookEndpoint(ctx context.Context, endpointID string, opts ...RequestOption) (*WebhookEndpoint, error) {
	return del[WebhookEndpoint](ctx, c, opts, "/webhook-endpoints/", "endpointID", endpointID)
}

// ListWebhookDeliveries lists an endpoint's deliveries, newest first (GET
// /v1/webhook-endpoints/{endpoint_id}/deliveries, webhooks:read).
func (c *Client) ListWebhookDeliveries(ctx context.Context, endpointID string, limit int, opts ...RequestOption) (*Page[WebhookDelivery], error) {
	ep, err := pathID("endpointID", endpointID)
	if err != nil {
		return nil, err
	}
	return list[WebhookDelivery](ctx, c, "/webhook-endpoints/"+ep+"/deliveries", limit, opts)
}

// RetryWebhookDelivery redelivers a dead delivery, or brings a retrying
// one's next attempt forward, and returns it (POST
// /v1/webhook-endpoints/{endpoint_id}/deliveries/{delivery_id}/retry,
// webhooks:write). A succeeded delivery, or one of a disabled endpoint, is
// 409 conflict. Never retried automatically.
func (c *Client) RetryWebhookDelivery(ctx context.Context, endpointID, deliveryID string, opts ...RequestOption) (*WebhookDelivery, error) {
	ep, err := pathID("endpointID", endpointID)
	if err != nil {
		return nil, err
	}
	dl, err := pathID("deliveryID", deliveryID)
	if err != nil {
		return nil, err
	}
	var out WebhookDelivery
	if err := c.do(ctx, request{method: http.MethodPost, path: "/webhook-endpoints/" + ep + "/deliveries/" + dl + "/retry"}, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// --- helpers ---------------------------------------------------------------

func list[T any](ctx context.Context, c *Client, path string, limit int, opts []RequestOption) (*Page[T], error) {
	var w wirePage[T]
	if err := c.do(ctx, request{method: http.MethodGet, path: path, query: limitQuery(limit)}, &w, opts); err != nil {
		return nil, err
	}
	return w.page(), nil
}

// get fetches prefix+id (id escaped and required when idName is set).
func get[T any](ctx context.Context, c *Client, opts []RequestOption, prefix, idName, id string) (*T, error) {
	return fetch[T](ctx, c, http.MethodGet, opts, prefix, idName, id)
}

func del[T any](ctx context.Context, c *Client, opts []RequestOption, prefix, idName, id string) (*T, error) {
	return fetch[T](ctx, c, http.MethodDelete, opts, prefix, idName, id)
}

func fetch[T any](ctx context.Context, c *Client, method string, opts []RequestOption, prefix, idName, id string) (*T, error) {
	path := prefix
	if idName != "" {
		seg, err := pathID(idName, id)
		if err != nil {
			return nil, err
		}
		path += seg
	}
	var out T
	if err := c.do(ctx, request{method: method, path: path}, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}
