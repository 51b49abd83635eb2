// Package apierr owns the public error codes of the API and the single table
// that maps each code to its HTTP status. Actors return *Error values; the
// HTTP layer renders them in the spec's envelope. Any other error reaching
// the edge is shown to the caller only as internal_error.
package apierr

import "fmt"

// Code is a stable, public error code (spec section 7).
type Code string

// The public codes. Adding one is an API change; renaming one is a breaking change.
const (
	InvalidRequest          Code = "invalid_request"
	AuthenticationFailed    Code = "authentication_failed"
	PermissionDenied        Code = "permission_denied"
	RateLimited             Code = "rate_limited"
	InsufficientCredit      Code = "insufficient_credit"
	QuotaExceeded           Code = "quota_exceeded"
	RoomNotFound            Code = "room_not_found"
	RoomExpired             Code = "room_expired"
	RoomEnded               Code = "room_ended"
	ParticipantNotFound     Code = "participant_not_found"
	ParticipantTokenInvalid Code = "participant_token_invalid"
	ParticipantTokenExpired Code = "participant_token_expired"
	APIKeyNotFound          Code = "api_key_not_found"
	APIKeyLimitReached      Code = "api_key_limit_reached"
	WebhookEndpointNotFound Code = "webhook_endpoint_not_found"
	WebhookEndpointLimit    Code = "webhook_endpoint_limit_reached"
	Conflict                Code = "conflict"
	IdempotencyInProgress   Code = "idempotency_in_progress"
	Internal                Code = "internal_error"
	ServiceUnavailable      Code = "service_unavailable"
	LastProject             Code = "last_project"
	ProjectHasActiveRooms   Code = "project_has_active_rooms"
	NotFound                Code = "not_found"
	MethodNotAllowed        Code = "method_not_allowed"
	RequestEntityTooLarge   Code = "request_too_large"
)

// statusByCode is the one table of HTTP statuses. docs/errors.md mirrors it.
var statusByCode = map[Code]int{
	InvalidRequest:          400,
	AuthenticationFailed:    401,
	PermissionDenied:        403,
	RateLimited:             429,
	InsufficientCredit:      402,
	QuotaExceeded:           409,
	RoomNotFound:            404,
	RoomExpired:             410,
	RoomEnded:               410,
	ParticipantNotFound:     404,
	ParticipantTokenInvalid: 401,
	ParticipantTokenExpired: 401,
	APIKeyNotFound:          404,
	APIKeyLimitReached:      409,
	WebhookEndpointNotFound: 404,
	WebhookEndpointLimit:    409,
	Conflict:                409,
	IdempotencyInProgress:   409,
	Internal:                500,
	ServiceUnavailable:      503,
	LastProject:             409,
	ProjectHasActiveRooms:   409,
}

// Status returns the HTTP status of code (500 for an unknown code, which is a bug).
// An Error may override it (see Error.HTTPStatus).
func Status(code Code) int {
	if s, ok := statusByCode[code]; ok {
		return s
	}
	return 500
}

// Error is an API error: a code, a human message and optional details.
type Error struct {
	Code    Code
	Message string
	Details map[string]any
	// RetryAfterSeconds, when positive, is sent as Retry-After.
	RetryAfterSeconds int
	// RateLimit, when positive, is sent as X-RateLimit-Limit (with Remaining 0).
	RateLimit int
	// HTTPStatus, when set, replaces the code's status. Used only for the
	// protocol-level failures that the spec's closed code list files under
	// invalid_request: unknown route (404), wrong method (405) and oversized
	// body (413).
	HTTPStatus int
}

// StatusOf is the HTTP status to send for e.
func StatusOf(e *Error) int {
	if e.HTTPStatus != 0 {
		return e.HTTPStatus
	}
	return Status(e.Code)
}

// WithStatus sets the HTTP status override and returns e.
func (e *Error) WithStatus(status int) *Error {
	e.HTTPStatus = status
	return e
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// New returns an error with code and a formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithDetails sets details and returns e.
func (e *Error) WithDetails(kv ...any) *Error {
	if e.Details == nil {
		e.Details = make(map[string]any, len(kv)/2)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		e.Details[fmt.Sprint(kv[i])] = kv[i+1]
	}
	return e
}

// Invalid is shorthand for an invalid_request error about one field.
func Invalid(field, format string, args ...any) *Error {
	return New(InvalidRequest, format, args...).WithDetails("field", field)
}

// RateLimitedError is the 429 for a limit of limitPerMinute.
func RateLimitedError(what string, limitPerMinute, retryAfterSeconds int) *Error {
	e := New(RateLimited, "rate limit for %s exceeded (%d per minute)", what, limitPerMinute).
		WithDetails("limit_name", what, "limit_per_minute", limitPerMinute, "retry_after_seconds", retryAfterSeconds)
	e.RetryAfterSeconds = retryAfterSeconds
	e.RateLimit = limitPerMinute
	return e
}
