package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Normalized error codes (spec 7, "Client SDK errors"). They are the
// contract; what the API or the media engine said is only in Error.Debug.
const (
	CodeAuthenticationFailed    = "authentication_failed"
	CodeTokenExpired            = "token_expired"
	CodeRoomNotFound            = "room_not_found"
	CodeRoomEnded               = "room_ended"
	CodeParticipantLimitReached = "participant_limit_reached"
	CodePermissionDenied        = "permission_denied"
	CodeDeviceNotFound          = "device_not_found"
	CodeDeviceInUse             = "device_in_use"
	CodeMediaPermissionDenied   = "media_permission_denied"
	CodeConnectionFailed        = "connection_failed"
	CodeConnectionLost          = "connection_lost"
	CodeNetworkUnavailable      = "network_unavailable"
	CodeServiceUnavailable      = "service_unavailable"
	CodeUnsupportedPlatform     = "unsupported_platform"
	CodeInvalidRequest          = "invalid_request"
	CodeInsufficientCredit      = "insufficient_credit"
	CodeRateLimited             = "rate_limited"
	CodeTimeout                 = "timeout"
	CodeUnknown                 = "unknown"
)

// Error is every error this package returns from Connect, Leave and
// UpdateState, and the one carried by "error" events. Use errors.As:
//
//	var e *client.Error
//	if errors.As(err, &e) && e.Code == client.CodeRateLimited { wait(e.RetryAfter) }
type Error struct {
	// Code is one of the Code… constants.
	Code string
	// Message is for humans and may change.
	Message string
	// RetryAfter is the API's Retry-After for rate_limited (and for a 503
	// that sent one), else 0.
	RetryAfter time.Duration
	// Debug holds what the SDK knows about the cause, for logs and support
	// only (not a contract): http_status, api_code, request_id, details
	// (from the API's error envelope); media_code, media_message,
	// close_code (from the media node); cause (a transport error's text).
	Debug map[string]any

	cause error
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "rtcd client: " + e.Code
	}
	return "rtcd client: " + e.Code + ": " + e.Message
}

// Unwrap returns the underlying error, if any (for example
// context.Canceled when the caller cancelled Connect).
func (e *Error) Unwrap() error { return e.cause }

// Is makes errors.Is(err, &client.Error{Code: client.CodeRoomEnded}) match
// any *Error with that code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code != "" && t.Code == e.Code
}

func newError(code, msg string, cause error, debug map[string]any) *Error {
	if debug == nil {
		debug = map[string]any{}
	}
	if cause != nil {
		if _, ok := debug["cause"]; !ok {
			debug["cause"] = cause.Error()
		}
	}
	return &Error{Code: code, Message: msg, Debug: debug, cause: cause}
}

// apiEnvelope is the API's error body.
type apiEnvelope struct {
	Error struct {
		Code      string         `json:"code"`
		Message   string         `json:"message"`
		RequestID string         `json:"request_id"`
		Details   map[string]any `json:"details"`
	} `json:"error"`
}

// errorFromAPI maps a non-2xx answer of POST /v1/connect to a normalized
// error. The API's code decides where it is known; the status otherwise.
func errorFromAPI(status int, h http.Header, body []byte, now time.Time) *Error {
	var env apiEnvelope
	_ = json.Unmarshal(body, &env)
	api := env.Error
	debug := map[string]any{"http_status": status}
	if api.Code != "" {
		debug["api_code"] = api.Code
	}
	if api.RequestID != "" {
		debug["request_id"] = api.RequestID
	} else if rid := h.Get("X-Request-Id"); rid != "" {
		debug["request_id"] = rid
	}
	if len(api.Details) > 0 {
		debug["details"] = api.Details
	}
	msg := api.Message
	if msg == "" {
		msg = fmt.Sprintf("the API answered %d", status)
	}

	code := CodeUnknown
	switch api.Code {
	case "participant_token_invalid", "authentication_failed":
		code = CodeAuthenticationFailed
	case "participant_token_expired":
		code = CodeTokenExpired
	case "permission_denied":
		code = CodePermissionDenied
	case "participant_not_found":
		// The participant was removed (or ended with its room): its token
		// no longer admits anyone.
		code = CodePermissionDenied
	case "room_not_found":
		code = CodeRoomNotFound
	case "room_ended", "room_expired":
		code = CodeRoomEnded
	case "quota_exceeded":
		// max_participants of the room or max_active_participants of the
		// project: both are participant limits to the person joining.
		code = CodeParticipantLimitReached
	case "insufficient_credit":
		code = CodeInsufficientCredit
	case "rate_limited":
		code = CodeRateLimited
	case "invalid_request":
		code = CodeInvalidRequest
	case "service_unavailable":
		code = CodeServiceUnavailable
	default:
		switch {
		case status == http.StatusPaymentRequired:
			code = CodeInsufficientCredit
		case status == http.StatusTooManyRequests:
			code = CodeRateLimited
		case status == http.StatusUnauthorized:
			code = CodeAuthenticationFailed
		case status == http.StatusForbidden:
			code = CodePermissionDenied
		case status == http.StatusGone:
			code = CodeRoomEnded
		case status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout:
			code = CodeServiceUnavailable
		case status >= 400 && status < 500 && status != http.StatusNotFound:
			code = CodeInvalidRequest
		}
	}
	e := newError(code, msg, nil, debug)
	if code == CodeRateLimited || code == CodeServiceUnavailable {
		e.RetryAfter = parseRetryAfter(h.Get("Retry-After"), now)
		if e.RetryAfter == 0 && code == CodeRateLimited {
			if s, ok := api.Details["retry_after_seconds"].(float64); ok && s > 0 {
				e.RetryAfter = time.Duration(s * float64(time.Second))
			}
		}
	}
	return e
}

// parseRetryAfter reads delay-seconds or an HTTP date (RFC 9110 10.2.3).
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Media node error codes (docs/media-protocol.md) and close codes.
const (
	mediaBadMessage       = "bad_message"
	mediaTokenInvalid     = "token_invalid"
	mediaTokenExpired     = "token_expired"
	mediaJoinTimeout      = "join_timeout"
	mediaRoomFull         = "room_full"
	mediaHeartbeatTimeout = "heartbeat_timeout"
	mediaSlowConsumer     = "slow_consumer"
	mediaReplaced         = "replaced"
	mediaRemoved          = "removed"
	mediaRoomClosed       = "room_closed"
	mediaNodeShutdown     = "node_shutdown"
	// The control plane's refusals of a join (the join is its point of
	// record).
	mediaSessionSuperseded       = "session_superseded"
	mediaParticipantLimitReached = "participant_limit_reached"
	mediaInsufficientCredit      = "insufficient_credit"
)

// mediaCodeOfClose maps a close code to the media error code it stands for,
// for when the error message was lost but the close frame arrived.
var mediaCodeOfClose = map[int]string{
	4000: mediaBadMessage, 4001: mediaTokenInvalid, 4002: mediaTokenExpired,
	4003: mediaJoinTimeout, 4004: mediaRoomFull, 4005: mediaHeartbeatTimeout,
	4006: mediaSlowConsumer, 4007: mediaReplaced, 4008: mediaRemoved,
	4009: mediaRoomClosed, 4010: mediaNodeShutdown,
	4011: mediaSessionSuperseded, 4012: mediaParticipantLimitReached, 4013: mediaInsufficientCredit,
}

// mediaError is what the media node said when it ended a socket.
type mediaError struct {
	code      string // media error code, "" when unknown
	message   string
	closeCode int // 0 when no close frame was seen
}

func (m *mediaError) Error() string {
	return fmt.Sprintf("media node: %s (close %d): %s", m.code, m.closeCode, m.message)
}

// mediaAction is what the SDK does about a media node's verdict.
type mediaAction int

const (
	actionReconnect  mediaAction = iota // transient: reconnect with backoff
	actionReExchange                    // the media token was refused: POST /v1/connect again
	actionEnd                           // the server ended the session: disconnected
	actionFail                          // cannot continue: failed
)

// classifyMedia decides what to do about a media node error and how to
// report it.
func classifyMedia(m *mediaError) (mediaAction, *Error) {
	debug := map[string]any{"media_code": m.code}
	if m.message != "" {
		debug["media_message"] = m.message
	}
	if m.closeCode != 0 {
		debug["close_code"] = m.closeCode
	}
	switch m.code {
	case mediaTokenInvalid:
		return actionReExchange, newError(CodeAuthenticationFailed, "the media node refused the media token", m, debug)
	case mediaTokenExpired:
		return actionReExchange, newError(CodeTokenExpired, "the media token expired before the join", m, debug)
	case mediaRoomFull, mediaParticipantLimitReached:
		return actionFail, newError(CodeParticipantLimitReached, "the room is full", m, debug)
	case mediaInsufficientCredit:
		return actionFail, newError(CodeInsufficientCredit, "the workspace is out of credit", m, debug)
	case mediaSessionSuperseded:
		return actionEnd, newError(CodeConnectionLost, "a newer session of this participant took over", m, debug)
	case mediaBadMessage:
		return actionFail, newError(CodeUnknown, "the media node refused a message of this SDK", m, debug)
	case mediaReplaced:
		return actionEnd, newError(CodeConnectionLost, "a newer connection of this participant took over", m, debug)
	case mediaRemoved:
		return actionEnd, newError(CodePermissionDenied, "the participant was removed from the room", m, debug)
	case mediaRoomClosed:
		return actionEnd, newError(CodeRoomEnded, "the room ended", m, debug)
	case mediaNodeShutdown:
		return actionReconnect, newError(CodeServiceUnavailable, "the media node is shutting down", m, debug)
	default: // join_timeout, heartbeat_timeout, slow_consumer, an unknown code
		return actionReconnect, newError(CodeConnectionLost, "the media connection was lost", m, debug)
	}
}

// errTimeout is the cause of a connect cancelled by its 15-second deadline.
var errTimeout = errors.New("connect exceeded its deadline")

// errorFromTransport maps an error of the HTTP client or the WebSocket dial.
// media says whether it happened on the media connection (connection_failed)
// or on the API (network_unavailable).
func errorFromTransport(ctx context.Context, err error, media bool) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if ctx != nil {
		if cause := context.Cause(ctx); cause != nil {
			if errors.Is(cause, errTimeout) || errors.Is(cause, context.DeadlineExceeded) {
				return newError(CodeTimeout, "connect did not complete within its deadline", cause, nil)
			}
			if errors.Is(cause, context.Canceled) {
				return newError(CodeUnknown, "connect was cancelled", cause, nil)
			}
			return newError(CodeUnknown, "connect was cancelled", cause, nil)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return newError(CodeTimeout, "connect did not complete within its deadline", err, nil)
	}
	if media {
		return newError(CodeConnectionFailed, "could not connect to the media node", err, nil)
	}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	if errors.As(err, &dnsErr) || errors.As(err, &opErr) {
		return newError(CodeNetworkUnavailable, "could not reach the API", err, nil)
	}
	return newError(CodeConnectionFailed, "the connect request failed", err, nil)
}
