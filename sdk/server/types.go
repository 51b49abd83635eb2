package server

import (
	"bytes"
	"encoding/json"
	"time"
)

// String returns a pointer to s, for optional request fields.
func String(s string) *string { return &s }

// Int returns a pointer to n, for optional request fields.
func Int(n int) *int { return &n }

// Metadata is a free-form JSON object attached to rooms and participants
// (at most 4096 bytes encoded). Numbers decode as json.Number, so large
// integers keep every digit.
type Metadata map[string]any

// UnmarshalJSON decodes an object keeping numbers exact; null is nil.
func (m *Metadata) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*m = nil
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	*m = v
	return nil
}

// Page is one page of a list, newest first. The API has no cursor: HasMore
// says that items exist beyond this page, which can only be read by asking
// for a larger page (up to 100).
type Page[T any] struct {
	Data    []T
	HasMore bool
}

type wirePage[T any] struct {
	Data []T `json:"data"`
	Page struct {
		HasMore bool `json:"has_more"`
	} `json:"page"`
}

func (w *wirePage[T]) page() *Page[T] {
	data := w.Data
	if data == nil {
		data = []T{}
	}
	return &Page[T]{Data: data, HasMore: w.Page.HasMore}
}

// Room statuses.
const (
	RoomStatusWaiting = "waiting"
	RoomStatusActive  = "active"
	RoomStatusEnding  = "ending"
	RoomStatusEnded   = "ended"
)

// Room is a real-time audio/video session.
type Room struct {
	ID              string     `json:"id"`
	Name            *string    `json:"name"`
	Status          string     `json:"status"` // RoomStatus…
	Region          string     `json:"region"`
	MaxParticipants int        `json:"max_participants"`
	Metadata        Metadata   `json:"metadata"`
	CreatedAt       time.Time  `json:"created_at"`
	ExpiresAt       time.Time  `json:"expires_at"`
	EndedAt         *time.Time `json:"ended_at"`
	EndReason       *string    `json:"end_reason"` // "deleted" or "expired"
}

// CreateRoomParams is the body of CreateRoom; every field is optional.
type CreateRoomParams struct {
	Name *string `json:"name,omitempty"`
	// MaxParticipants defaults to the project's max_participants_per_room.
	MaxParticipants *int `json:"max_participants,omitempty"`
	// ExpiresIn is the room's lifetime in seconds (60 to 604800; default 86400).
	ExpiresIn *int `json:"expires_in,omitempty"`
	// Region must be the server's region when given.
	Region   *string  `json:"region,omitempty"`
	Metadata Metadata `json:"metadata,omitempty"`
}

// Participant roles.
const (
	RolePublisher  = "publisher"
	RoleSubscriber = "subscriber"
)

// Participant is one person's admission to one room.
type Participant struct {
	ID          string     `json:"id"`
	RoomID      string     `json:"room_id"`
	ExternalID  *string    `json:"external_id"`
	Name        *string    `json:"name"`
	Role        string     `json:"role"`
	Status      string     `json:"status"` // created, connected, joined, left, removed, ended
	Metadata    Metadata   `json:"metadata"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   time.Time  `json:"expires_at"`
	ConnectedAt *time.Time `json:"connected_at"`
	EndedAt     *time.Time `json:"ended_at"`
}

// ParticipantSession is the response of CreateParticipant: the participant
// and its token (rtc_pt_…), shown only once. Hand the token to the client
// SDK, which exchanges it at POST /v1/connect.
type ParticipantSession struct {
	Participant
	Token string `json:"token"`
	// JoinURL is a hosted join page, when the server offers one (this
	// release does not: it is empty).
	JoinURL string `json:"join_url,omitempty"`
}

// CreateParticipantParams is the body of CreateParticipant; every field is
// optional.
type CreateParticipantParams struct {
	// ExternalID is your own identifier for the person.
	ExternalID *string `json:"external_id,omitempty"`
	Name       *string `json:"name,omitempty"`
	// Role is RolePublisher (the default) or RoleSubscriber.
	Role *string `json:"role,omitempty"`
	// ExpiresIn is the token's lifetime in seconds (60 to 86400; default 3600).
	ExpiresIn *int     `json:"expires_in,omitempty"`
	Metadata  Metadata `json:"metadata,omitempty"`
}

// Scopes an API key can hold.
const (
	ScopeRoomsRead         = "rooms:read"
	ScopeRoomsWrite        = "rooms:write"
	ScopeParticipantsRead  = "participants:read"
	ScopeParticipantsWrite = "participants:write"
	ScopeAPIKeysRead       = "api_keys:read"
	ScopeAPIKeysWrite      = "api_keys:write"
	ScopeProjectRead       = "project:read"
	ScopeAuditLogsRead     = "audit_logs:read"
	ScopeUsageRead         = "usage:read"
	ScopeBillingRead       = "billing:read"
	ScopeBillingWrite      = "billing:write"
	ScopeWebhooksRead      = "webhooks:read"
	ScopeWebhooksWrite     = "webhooks:write"
)

// APIKey is a secret API key's public record (never the secret).
type APIKey struct {
	ID        string     `json:"id"`
	Name      *string    `json:"name"`
	Scopes    []string   `json:"scopes"`
	Last4     string     `json:"last4"`
	Status    string     `json:"status"` // active or revoked
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
	// LastUsedAt is the key's last use, recorded to the minute: the server
	// writes a use at most once a minute per key, so it can be up to a
	// minute behind, and it reaches the list a moment after the request.
	// Nil if the key was never used (always nil in CreateAPIKey's answer).
	LastUsedAt *time.Time `json:"last_used_at"`
}

// CreatedAPIKey is the response of CreateAPIKey: the key and its secret
// (sk_live_…), returned exactly once.
type CreatedAPIKey struct {
	APIKey
	Secret string `json:"secret"`
}

// CreateAPIKeyParams is the body of CreateAPIKey. Scopes is required (1 to
// 13 distinct Scope… values, each held by the calling key).
type CreateAPIKeyParams struct {
	Name   *string  `json:"name,omitempty"`
	Scopes []string `json:"scopes"`
}

// ProjectLimits are the project's effective limits.
type ProjectLimits struct {
	ProjectID                   string `json:"project_id"`
	MaxActiveRooms              int    `json:"max_active_rooms"`
	MaxActiveParticipants       int    `json:"max_active_participants"`
	MaxParticipantsPerRoom      int    `json:"max_participants_per_room"`
	RoomCreatesPerMinute        int    `json:"room_creates_per_minute"`
	ParticipantCreatesPerMinute int    `json:"participant_creates_per_minute"`
	ConnectRequestsPerMinute    int    `json:"connect_requests_per_minute"`
}

// AuditRef names who did something, or what it was done to.
type AuditRef struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// AuditLogEntry is one audited operation of the project.
type AuditLogEntry struct {
	ID        string         `json:"id"`
	Action    string         `json:"action"` // e.g. api_key.created, room.deleted
	Actor     AuditRef       `json:"actor"`
	Target    AuditRef       `json:"target"`
	RequestID *string        `json:"request_id"`
	SourceIP  *string        `json:"source_ip"`
	CreatedAt time.Time      `json:"created_at"`
	Details   map[string]any `json:"details"`
}

// UsagePeriod is the instants a usage report covers: From is the start of
// the first day, To the instant after the last day.
type UsagePeriod struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// UsageSummary is the project's finalized usage over a period.
type UsageSummary struct {
	ProjectID          string      `json:"project_id"`
	Period             UsagePeriod `json:"period"`
	ParticipantSeconds int64       `json:"participant_seconds"`
	ParticipantMinutes float64     `json:"participant_minutes"`
	Rooms              int         `json:"rooms"`
	Participants       int         `json:"participants"`
	FinalizedOnly      bool        `json:"finalized_only"`
}

// UsageDay is one UTC day of usage.
type UsageDay struct {
	Date               string  `json:"date"` // YYYY-MM-DD
	ParticipantSeconds int64   `json:"participant_seconds"`
	ParticipantMinutes float64 `json:"participant_minutes"`
	Rooms              int     `json:"rooms"`
	Participants       int     `json:"participants"`
}

// UsageDaily is the project's finalized usage per day, oldest first.
type UsageDaily struct {
	ProjectID     string      `json:"project_id"`
	Period        UsagePeriod `json:"period"`
	FinalizedOnly bool        `json:"finalized_only"`
	Data          []UsageDay  `json:"data"`
}

// Balance is the workspace's prepaid credit. Amounts are decimal strings.
type Balance struct {
	Currency  string `json:"currency"`
	Available string `json:"available"` // can be negative
	Reserved  string `json:"reserved"`
}

// Credit states.
const (
	CreditStateNormal    = "normal"
	CreditStateLow       = "low"
	CreditStateExhausted = "exhausted"
)

// Pricing is the price list and credit policy, with the workspace's credit
// state.
type Pricing struct {
	Currency               string `json:"currency"`
	ParticipantMinutePrice string `json:"participant_minute_price"`
	LowCreditThreshold     string `json:"low_credit_threshold"`
	MinimumCreditToStart   string `json:"minimum_credit_to_start"`
	CreditState            string `json:"credit_state"` // CreditState…
	BillingEnabled         bool   `json:"billing_enabled"`
}

// LedgerEntry is one change of the balance.
type LedgerEntry struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`          // topup, usage, refund or adjustment
	Amount       string         `json:"amount"`        // signed, six decimals
	BalanceAfter string         `json:"balance_after"` // six decimals
	Currency     string         `json:"currency"`
	Description  string         `json:"description"`
	Reference    map[string]any `json:"reference"`
	CreatedAt    time.Time      `json:"created_at"`
}

// Top-up methods.
const (
	TopupMethodCheckout = "checkout"
	TopupMethodCard     = "card"
)

// Topup is one payment adding credit to the workspace.
type Topup struct {
	PaymentID      string     `json:"payment_id"`
	Amount         string     `json:"amount"`
	Currency       string     `json:"currency"`
	Method         string     `json:"method"`
	Status         string     `json:"status"` // pending, succeeded, failed, canceled, expired, refunded
	Provider       string     `json:"provider"`
	AuthorizeURL   string     `json:"authorize_url"` // send the payer here
	ReceiptURL     string     `json:"receipt_url"`   // "" until the payment succeeded
	AmountRefunded string     `json:"amount_refunded"`
	CreatedAt      time.Time  `json:"created_at"`
	ExpiresAt      time.Time  `json:"expires_at"`
	CompletedAt    *time.Time `json:"completed_at"`
}

// CreateTopupParams is the body of CreateTopup.
type CreateTopupParams struct {
	// Amount is required: a decimal string from "5.00" to "10000.00" with
	// at most two decimals.
	Amount string `json:"amount"`
	// Method is TopupMethodCheckout (the default) or TopupMethodCard.
	Method *string `json:"method,omitempty"`
}

// Webhook event types.
const (
	EventRoomStarted       = "room.started"
	EventRoomEnded         = "room.ended"
	EventParticipantJoined = "participant.joined"
	EventParticipantLeft   = "participant.left"
	EventUsageFinalized    = "usage.finalized"
	EventCreditLow         = "credit.low"
	EventCreditExhausted   = "credit.exhausted"
	EventCreditRestored    = "credit.restored"
	EventPaymentSucceeded  = "payment.succeeded"
	EventPaymentFailed     = "payment.failed"
	EventPaymentExpired    = "payment.expired"
	EventPaymentCanceled   = "payment.canceled"
	EventPaymentRefunded   = "payment.refunded"
)

// WebhookEndpoint is a registered webhook destination (never its secret).
type WebhookEndpoint struct {
	ID         string     `json:"id"`
	URL        string     `json:"url"`
	Events     []string   `json:"events"`
	Status     string     `json:"status"` // enabled or disabled
	CreatedAt  time.Time  `json:"created_at"`
	DisabledAt *time.Time `json:"disabled_at"`
}

// CreatedWebhookEndpoint is the response of CreateWebhookEndpoint: the
// endpoint and its signing secret (whsec_…), returned exactly once. Keep it
// for VerifyWebhook.
type CreatedWebhookEndpoint struct {
	WebhookEndpoint
	SigningSecret string `json:"signing_secret"`
}

// CreateWebhookEndpointParams is the body of CreateWebhookEndpoint.
type CreateWebhookEndpointParams struct {
	// URL is required: an https:// address on the public internet.
	URL string `json:"url"`
	// Events lists the Event… types to receive; nil subscribes to every
	// type (including types added later).
	Events []string `json:"events,omitempty"`
}

// WebhookDelivery is one event sent (or to be sent) to one endpoint.
type WebhookDelivery struct {
	ID            string                   `json:"id"`
	EndpointID    string                   `json:"endpoint_id"`
	EventID       string                   `json:"event_id"`
	EventType     string                   `json:"event_type"`
	Status        string                   `json:"status"` // pending, retrying, succeeded or dead
	AttemptCount  int                      `json:"attempt_count"`
	NextAttemptAt *time.Time               `json:"next_attempt_at"`
	CreatedAt     time.Time                `json:"created_at"`
	Attempts      []WebhookDeliveryAttempt `json:"attempts"`
}

// WebhookDeliveryAttempt is one recorded attempt of a delivery.
type WebhookDeliveryAttempt struct {
	Attempt        int        `json:"attempt"`
	RequestedAt    time.Time  `json:"requested_at"`
	ResponseStatus int        `json:"response_status"` // 0 without a response
	LatencyMS      int64      `json:"latency_ms"`
	ResponseBody   string     `json:"response_body"`
	Error          *string    `json:"error"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
}

// SystemInfo identifies the deployment.
type SystemInfo struct {
	Service    string `json:"service"`
	APIVersion string `json:"api_version"`
	Version    string `json:"version"`
	Region     string `json:"region"`
}
