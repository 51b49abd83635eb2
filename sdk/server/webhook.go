package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of a webhook delivery.
const (
	HeaderWebhookID        = "X-RTC-Webhook-Id"
	HeaderWebhookTimestamp = "X-RTC-Timestamp"
	HeaderWebhookSignature = "X-RTC-Signature"
)

// DefaultWebhookTolerance is the largest accepted difference, either way,
// between a delivery's signed timestamp and the verifier's clock.
const DefaultWebhookTolerance = 5 * time.Minute

// Errors of VerifyWebhook; compare with errors.Is.
var (
	// ErrWebhookMalformed: a header is missing or not in the documented
	// format, or the verified body is not an event.
	ErrWebhookMalformed = errors.New("rtcd: malformed webhook signature or timestamp header")
	// ErrWebhookSignatureMismatch: no v1 signature matches the body and
	// timestamp under the secret (forged, altered, or another secret).
	ErrWebhookSignatureMismatch = errors.New("rtcd: webhook signature mismatch")
	// ErrWebhookTimestampOutsideTolerance: authentic, but signed too long
	// ago or too far ahead (a replay, or a skewed clock).
	ErrWebhookTimestampOutsideTolerance = errors.New("rtcd: webhook timestamp outside tolerance")
	// ErrWebhookEmptySecret: no signing secret was given.
	ErrWebhookEmptySecret = errors.New("rtcd: empty webhook signing secret")
)

// WebhookEvent is the body of a delivery.
type WebhookEvent struct {
	ID        string    `json:"id"`   // evt_…; process events idempotently by it
	Type      string    `json:"type"` // Event…
	CreatedAt time.Time `json:"created_at"`
	ProjectID string    `json:"project_id"`
	// Data depends on Type (for participant.joined: room_id,
	// participant_id, session_id, sequence). Decode it with DecodeData.
	Data json.RawMessage `json:"data"`
}

// DecodeData decodes the event's data object into v.
func (e *WebhookEvent) DecodeData(v any) error { return json.Unmarshal(e.Data, v) }

// Bounds on untrusted header input (as the server's verifier).
const (
	maxTimestampDigits      = 19
	maxSignatureHeaderBytes = 1024
	maxSignatures           = 8
	signatureHexLen         = 2 * sha256.Size
)

// SignWebhook returns the X-RTC-Signature value the server sends for body
// signed at timestamp (Unix seconds): "v1=" and the lowercase hex
// HMAC-SHA256, keyed with the whole secret (whsec_ included), of the decimal
// timestamp, a dot and the raw body. Useful to test a receiver.
func SignWebhook(secret string, timestamp int64, body []byte) string {
	return "v1=" + hex.EncodeToString(webhookMAC(secret, strconv.FormatInt(timestamp, 10), body))
}

// VerifyWebhook checks a delivery and returns its event. body must be the
// raw bytes received (never re-encoded JSON); header is the request's
// header (X-RTC-Timestamp and X-RTC-Signature are read from it; several
// X-RTC-Signature lines are joined with commas). Any v1 entry of the
// signature list matching passes (other schemes are ignored); signatures are
// compared in constant time, and the signature is checked before the
// timestamp. tolerance <= 0 means DefaultWebhookTolerance; a zero now means
// time.Now().
//
// Deliveries are at least once: skip an event whose ID was already processed.
func VerifyWebhook(secret string, body []byte, header http.Header, tolerance time.Duration, now time.Time) (*WebhookEvent, error) {
	if secret == "" {
		return nil, ErrWebhookEmptySecret
	}
	tsHeader := header.Get(HeaderWebhookTimestamp)
	ts, err := parseWebhookTimestamp(tsHeader)
	if err != nil {
		return nil, err
	}
	candidates, err := parseWebhookSignatures(strings.Join(header.Values(HeaderWebhookSignature), ","))
	if err != nil {
		return nil, err
	}
	expected := webhookMAC(secret, tsHeader, body)
	matched := false
	for _, c := range candidates {
		if hmac.Equal(expected, c) { // every candidate is compared
			matched = true
		}
	}
	if !matched {
		return nil, ErrWebhookSignatureMismatch
	}
	if tolerance <= 0 {
		tolerance = DefaultWebhookTolerance
	}
	if now.IsZero() {
		now = time.Now()
	}
	if skew := now.Sub(time.Unix(ts, 0)); skew > tolerance || skew < -tolerance {
		return nil, ErrWebhookTimestampOutsideTolerance
	}
	var ev WebhookEvent
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" || ev.Type == "" {
		if err == nil {
			err = errors.New("id or type missing")
		}
		return nil, fmt.Errorf("%w: the body is not an event: %v", ErrWebhookMalformed, err)
	}
	return &ev, nil
}

func webhookMAC(secret, timestamp string, body []byte) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

func parseWebhookTimestamp(h string) (int64, error) {
	if h == "" || len(h) > maxTimestampDigits {
		return 0, ErrWebhookMalformed
	}
	for i := 0; i < len(h); i++ {
		if h[i] < '0' || h[i] > '9' {
			return 0, ErrWebhookMalformed
		}
	}
	ts, err := strconv.ParseInt(h, 10, 64)
	if err != nil {
		return 0, ErrWebhookMalformed
	}
	return ts, nil
}

func parseWebhookSignatures(h string) ([][]byte, error) {
	if h == "" || len(h) > maxSignatureHeaderBytes {
		return nil, ErrWebhookMalformed
	}
	entries := strings.Split(h, ",")
	if len(entries) > maxSignatures {
		return nil, ErrWebhookMalformed
	}
	var sigs [][]byte
	for _, entry := range entries {
		scheme, value, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok || scheme == "" || value == "" {
			return nil, ErrWebhookMalformed
		}
		if scheme != "v1" {
			continue
		}
		if len(value) != signatureHexLen {
			return nil, ErrWebhookMalformed
		}
		d, err := hex.DecodeString(value)
		if err != nil {
			return nil, ErrWebhookMalformed
		}
		sigs = append(sigs, d)
	}
	if len(sigs) == 0 {
		return nil, ErrWebhookMalformed
	}
	return sigs, nil
}
