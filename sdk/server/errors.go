package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The error codes of the API (spec section 7). They are stable and part of
// the public contract: branch on APIError.Code, never on the message.
const (
	CodeInvalidRequest              = "invalid_request"
	CodeAuthenticationFailed        = "authentication_failed"
	CodePermissionDenied            = "permission_denied"
	CodeRateLimited                 = "rate_limited"
	CodeInsufficientCredit          = "insufficient_credit"
	CodeQuotaExceeded               = "quota_exceeded"
	CodeRoomNotFound                = "room_not_found"
	CodeRoomExpired                 = "room_expired"
	CodeRoomEnded                   = "room_ended"
	CodeParticipantNotFound         = "participant_not_found"
	CodeParticipantTokenInvalid     = "participant_token_invalid"
	CodeParticipantTokenExpired     = "participant_token_expired"
	CodeAPIKeyNotFound              = "api_key_not_found"
	CodeAPIKeyLimitReached          = "api_key_limit_reached"
	CodeWebhookEndpointNotFound     = "webhook_endpoint_not_found"
	CodeWebhookEndpointLimitReached = "webhook_endpoint_limit_reached"
	CodeConflict                    = "conflict"
	CodeIdempotencyInProgress       = "idempotency_in_progress"
	CodeInternalError               = "internal_error"
	CodeServiceUnavailable          = "service_unavailable"
	// CodeLastProject and CodeProjectHasActiveRooms are used by the
	// dashboard routes only (both 409); listed for completeness.
	CodeLastProject           = "last_project"
	CodeProjectHasActiveRooms = "project_has_active_rooms"
)

// APIError is an error answered by the API in its error envelope
// ({"error":{"code","message","request_id","details"}}). Use errors.As to
// get it from an error returned by a Client method.
//
// A response that is not an envelope (say, a proxy's 502 page) is an
// APIError too, with the status, an empty Code and the start of the body as
// Message.
type APIError struct {
	// Status is the HTTP status (400, 401, 402, 403, 404, 409, 410, 429, …).
	Status int
	// Code is the stable error code, one of the Code… constants.
	Code string
	// Message is for humans; its wording may change between releases.
	Message string
	// RequestID is the request's id (req_…), from the envelope or the
	// X-Request-Id header; quote it in support requests.
	RequestID string
	// Details is the envelope's details object (never nil): for example
	// "field" for invalid_request, "required_scope" for permission_denied,
	// "limit_name" for rate_limited and quota_exceeded, "reason" for conflict.
	Details map[string]any
	// RetryAfter is the Retry-After header's value (429, some 503), else 0.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rtcd: %d", e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.RequestID != "" {
		b.WriteString(" (request " + e.RequestID + ")")
	}
	return b.String()
}

// DetailString returns details[key] when it is a string, else "".
func (e *APIError) DetailString(key string) string {
	s, _ := e.Details[key].(string)
	return s
}

func parseAPIError(res *http.Response, body []byte) *APIError {
	e := &APIError{Status: res.StatusCode, RequestID: res.Header.Get("X-Request-Id"), RetryAfter: parseRetryAfter(res.Header.Get("Retry-After"))}
	var env struct {
		Error *struct {
			Code      string         `json:"code"`
			Message   string         `json:"message"`
			RequestID string         `json:"request_id"`
			Details   map[string]any `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && env.Error != nil && env.Error.Code != "" {
		e.Code, e.Message, e.Details = env.Error.Code, env.Error.Message, env.Error.Details
		if env.Error.RequestID != "" {
			e.RequestID = env.Error.RequestID
		}
	} else {
		msg := strings.TrimSpace(string(body))
		if len(msg) > 200 {
			msg = strings.ToValidUTF8(msg[:200], "") + "…"
		}
		if msg == "" {
			msg = http.StatusText(res.StatusCode)
		}
		e.Message = msg
	}
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	return e
}
