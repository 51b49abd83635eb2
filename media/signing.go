package media

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Request signing between a media node and the control plane, in both
// directions (reports one way, commands the other), the same scheme as the
// public webhooks (spec 6):
//
//	X-RTC-Media-Timestamp: <Unix seconds>
//	X-RTC-Media-Signature: v1=<hex HMAC-SHA256(key, "<timestamp>.<raw body>")>
//
// The path is not signed, so every signed body names what it is (a report's
// "type", a command's "command" plus its ids) and receivers check that it
// matches the endpoint: a captured report cannot be replayed as a command,
// nor a command for one room against another.
const (
	HeaderTimestamp = "X-RTC-Media-Timestamp"
	HeaderSignature = "X-RTC-Media-Signature"
	// DefaultSignatureToleranceSeconds is how far a request's timestamp may
	// be from the receiver's clock, either way: the replay window, and the
	// clock skew allowed between node and control plane.
	DefaultSignatureToleranceSeconds = 300
)

const (
	signatureScheme = "v1="
	// maxTimestampHeaderBytes bounds the timestamp header parsed: Unix
	// seconds need 10 digits until 2286.
	maxTimestampHeaderBytes = 16
	signatureHexBytes       = 2 * sha256.Size
)

// Errors of VerifyReport.
var (
	// ErrSignatureInvalid: a header is missing or malformed, or the MAC does
	// not match (wrong key, altered body or timestamp).
	ErrSignatureInvalid = errors.New("media: request signature invalid")
	// ErrSignatureExpired: the signature is authentic but its timestamp is
	// outside the tolerance (a replay, or a badly skewed clock).
	ErrSignatureExpired = errors.New("media: request timestamp outside tolerance")
)

// SignRequest returns the timestamp and signature header values for body
// sent at the time at.
func SignRequest(key [32]byte, at time.Time, body []byte) (timestamp, signature string) {
	timestamp = strconv.FormatInt(at.Unix(), 10)
	mac := signatureMAC(key, timestamp, body)
	return timestamp, signatureScheme + hex.EncodeToString(mac)
}

// VerifyReport checks a signed request (a report from a node, or a command
// to one): the raw body bytes exactly as received, the two header values,
// the receiver's now, and the allowed distance between now and the
// timestamp. It returns nil, ErrSignatureInvalid, or ErrSignatureExpired
// (only once the MAC has matched). The MAC comparison is constant-time.
func VerifyReport(key [32]byte, timestampHeader, signatureHeader string, body []byte, now time.Time, tolerance time.Duration) error {
	// An all-zero key is a forgotten configuration: refuse everything
	// rather than accept signatures anyone could compute.
	if key == ([32]byte{}) {
		return ErrSignatureInvalid
	}
	if len(timestampHeader) == 0 || len(timestampHeader) > maxTimestampHeaderBytes ||
		strings.Trim(timestampHeader, "0123456789") != "" {
		return ErrSignatureInvalid
	}
	unix, err := strconv.ParseInt(timestampHeader, 10, 64)
	if err != nil {
		return ErrSignatureInvalid
	}
	got, ok := strings.CutPrefix(signatureHeader, signatureScheme)
	if !ok || len(got) != signatureHexBytes {
		return ErrSignatureInvalid
	}
	gotMAC, err := hex.DecodeString(got)
	if err != nil {
		return ErrSignatureInvalid
	}
	if !hmac.Equal(gotMAC, signatureMAC(key, timestampHeader, body)) {
		return ErrSignatureInvalid
	}
	skew := now.Sub(time.Unix(unix, 0))
	if skew > tolerance || skew < -tolerance {
		return ErrSignatureExpired
	}
	return nil
}

func signatureMAC(key [32]byte, timestamp string, body []byte) []byte {
	mac := hmac.New(sha256.New, key[:])
	mac.Write([]byte(timestamp)) // hash.Hash.Write never returns an error
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}
