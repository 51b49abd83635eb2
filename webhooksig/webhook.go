package webhooksig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of a delivery, spelled as in the interface specification.
// net/http matches header names case-insensitively, so r.Header.Get works
// with these constants whatever spelling arrived on the wire.
const (
	HeaderID        = "X-RTC-Webhook-Id"
	HeaderTimestamp = "X-RTC-Timestamp"
	HeaderSignature = "X-RTC-Signature"
)

// DefaultTolerance is the largest accepted difference, in either direction,
// between the signed timestamp and the verifier's clock. Five minutes absorbs
// ordinary clock skew and network delay while keeping the replay window short.
const DefaultTolerance = 5 * time.Minute

// SignatureScheme is the prefix of every signature this version produces.
// Entries with other prefixes are ignored by Verify so that a future scheme
// can be sent alongside v1 without breaking existing receivers.
const SignatureScheme = "v1"

// Bounds on untrusted header input, so that a hostile sender cannot make the
// verifier do unbounded work.
const (
	// maxTimestampDigits is the length of the largest int64 (19 digits).
	maxTimestampDigits = 19
	// maxSignatureHeaderBytes comfortably holds maxSignatures entries of
	// "v1=" plus 64 hex digits each, with separators.
	maxSignatureHeaderBytes = 1024
	// maxSignatures bounds the number of comma-separated entries; rotation
	// needs two, eight leaves room for future schemes.
	maxSignatures = 8
	// signatureHexLen is the hex length of a SHA-256 HMAC (32 bytes).
	signatureHexLen = 2 * sha256.Size
)

// Errors returned by Verify and VerifyRequest. Compare with errors.Is.
var (
	// ErrMalformed means a header is missing or not in the documented format.
	ErrMalformed = errors.New("webhook: malformed signature or timestamp header")
	// ErrSignatureMismatch means no v1 signature matches the body and
	// timestamp under the given secret: the delivery is not authentic, was
	// altered, or was signed with another secret.
	ErrSignatureMismatch = errors.New("webhook: signature mismatch")
	// ErrTimestampOutsideTolerance means the signature is authentic but the
	// signed timestamp is too far from the verifier's clock: a replay, or a
	// badly skewed clock on either side.
	ErrTimestampOutsideTolerance = errors.New("webhook: timestamp outside tolerance")
	// ErrEmptySecret means Verify was called without a secret, which is a
	// configuration mistake on the receiving side.
	ErrEmptySecret = errors.New("webhook: empty signing secret")
)

// Sign returns the X-RTC-Signature value for body signed at timestamp (Unix
// seconds): "v1=" followed by the lowercase hex HMAC-SHA256, keyed with
// secret, of the decimal timestamp, a dot and the raw body bytes.
func Sign(secret string, timestamp int64, body []byte) string {
	mac := computeMAC(secret, strconv.FormatInt(timestamp, 10), body)
	return SignatureScheme + "=" + hex.EncodeToString(mac)
}

// Verify checks that signatureHeader holds a valid v1 signature of
// timestampHeader and body under secret, and that the timestamp is within
// tolerance of now in either direction. A tolerance of zero or less means
// DefaultTolerance: replay protection cannot be switched off by accident.
//
// body must be the exact bytes received. The signature header may list
// several comma-separated entries (for example two v1 values while a secret
// is rotated); any matching v1 entry passes, and entries of other schemes
// are ignored. Signatures are compared in constant time.
//
// The signature is checked before the timestamp, so ErrTimestampOutsideTolerance
// is only reported for authentic deliveries, where it points at a replay or a
// clock problem rather than at a forgery.
func Verify(secret string, body []byte, timestampHeader, signatureHeader string, tolerance time.Duration, now time.Time) error {
	if secret == "" {
		return ErrEmptySecret
	}
	timestamp, err := parseTimestamp(timestampHeader)
	if err != nil {
		return err
	}
	candidates, err := parseSignatures(signatureHeader)
	if err != nil {
		return err
	}

	// The signed content uses the header value exactly as received, which is
	// what the sender signed.
	expected := computeMAC(secret, timestampHeader, body)
	matched := false
	for _, candidate := range candidates {
		// Every candidate is compared, not just up to the first match, so
		// the work done does not depend on which entry matched.
		if hmac.Equal(expected, candidate) {
			matched = true
		}
	}
	if !matched {
		return ErrSignatureMismatch
	}

	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	// time.Time.Sub saturates instead of overflowing, and comparing against
	// both bounds avoids negating the most negative Duration.
	skew := now.Sub(time.Unix(timestamp, 0))
	if skew > tolerance || skew < -tolerance {
		return ErrTimestampOutsideTolerance
	}
	return nil
}

// VerifyRequest verifies a delivery received as r whose body the caller has
// already read into body, against the system clock. It is Verify with the
// headers taken from r and now = time.Now().
//
// Several X-RTC-Signature header lines, which some proxies produce from a
// comma-separated value, are joined back with commas.
func VerifyRequest(secret string, r *http.Request, body []byte, tolerance time.Duration) error {
	timestampHeader := r.Header.Get(HeaderTimestamp)
	signatureHeader := strings.Join(r.Header.Values(HeaderSignature), ",")
	return Verify(secret, body, timestampHeader, signatureHeader, tolerance, time.Now())
}

// computeMAC returns HMAC-SHA256(secret, timestamp + "." + body).
func computeMAC(secret, timestamp string, body []byte) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// parseTimestamp accepts only plain decimal digits: no sign, no spaces, no
// fraction. Anything else is ErrMalformed.
func parseTimestamp(header string) (int64, error) {
	if header == "" || len(header) > maxTimestampDigits {
		return 0, ErrMalformed
	}
	for i := 0; i < len(header); i++ {
		if header[i] < '0' || header[i] > '9' {
			return 0, ErrMalformed
		}
	}
	timestamp, err := strconv.ParseInt(header, 10, 64)
	if err != nil {
		return 0, ErrMalformed
	}
	return timestamp, nil
}

// parseSignatures returns the decoded v1 signatures of a header such as
// "v1=ab12..., v1=cd34...". It fails with ErrMalformed when the header is
// empty or too long, an entry is not "scheme=value", a v1 value is not 64 hex
// digits, or no v1 entry is present.
func parseSignatures(header string) ([][]byte, error) {
	if header == "" || len(header) > maxSignatureHeaderBytes {
		return nil, ErrMalformed
	}
	entries := strings.Split(header, ",")
	if len(entries) > maxSignatures {
		return nil, ErrMalformed
	}
	var signatures [][]byte
	for _, entry := range entries {
		scheme, value, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok || scheme == "" || value == "" {
			return nil, ErrMalformed
		}
		if scheme != SignatureScheme {
			continue
		}
		if len(value) != signatureHexLen {
			return nil, ErrMalformed
		}
		decoded, err := hex.DecodeString(value)
		if err != nil {
			return nil, ErrMalformed
		}
		signatures = append(signatures, decoded)
	}
	if len(signatures) == 0 {
		return nil, ErrMalformed
	}
	return signatures, nil
}
