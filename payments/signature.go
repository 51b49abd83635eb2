package payments

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// maxSignatureHeaderBytes bounds a signature header before it is parsed. A
// real one is "t=<10 digits>,v1=<64 hex>" plus, for Stripe, a few more
// signatures during a secret roll.
const maxSignatureHeaderBytes = 1024

// signatureHeader is a parsed "t=<unix>,v1=<hex>[,v1=<hex>…]" header, the
// scheme both Stripe and the sandbox use.
type signatureHeader struct {
	timestamp  time.Time
	signatures [][]byte // decoded v1 values
}

// parseSignatureHeader reads a signature header. It insists on exactly one
// t= pair: with two, a verifier that checks the first for freshness and a
// signature check that uses the last (as stripe-go's does) would let an old
// signed body through with a fresh-looking timestamp.
func parseSignatureHeader(h string) (signatureHeader, error) {
	var out signatureHeader
	if h == "" {
		return out, errors.New("no signature header")
	}
	if len(h) > maxSignatureHeaderBytes {
		return out, errors.New("signature header too long")
	}
	timestamps := 0
	for _, pair := range strings.Split(h, ",") {
		key, value, ok := strings.Cut(pair, "=")
		if !ok {
			return out, errors.New("malformed signature header")
		}
		switch key {
		case "t":
			timestamps++
			unix, err := strconv.ParseInt(value, 10, 64)
			if err != nil || unix <= 0 {
				return out, errors.New("malformed signature timestamp")
			}
			out.timestamp = time.Unix(unix, 0).UTC()
		case "v1":
			sig, err := hex.DecodeString(value)
			if err != nil || len(sig) != sha256.Size {
				return out, errors.New("malformed v1 signature")
			}
			out.signatures = append(out.signatures, sig)
		default:
			// Other schemes (Stripe's v0 test signatures) are not trusted
			// and not needed; ignoring them keeps future schemes harmless.
		}
	}
	if timestamps != 1 {
		return out, fmt.Errorf("want exactly one signature timestamp, got %d", timestamps)
	}
	if len(out.signatures) == 0 {
		return out, errors.New("no v1 signature")
	}
	return out, nil
}

// signPayload is the raw v1 signature: HMAC-SHA256 of "<unix>.<body>".
func signPayload(key []byte, unix int64, body []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(strconv.FormatInt(unix, 10)))
	mac.Write([]byte("."))
	mac.Write(body)
	return mac.Sum(nil)
}

// signatureHeaderValue renders the header for body signed at t.
func signatureHeaderValue(key []byte, t time.Time, body []byte) string {
	unix := t.Unix()
	return "t=" + strconv.FormatInt(unix, 10) + ",v1=" + hex.EncodeToString(signPayload(key, unix, body))
}

// verifySignature checks a sandbox callback: the header parses, its
// timestamp is within CallbackTolerance of now, and one v1 signature matches
// in constant time. Every failure wraps ErrBadSignature.
func verifySignature(key []byte, header string, body []byte, now time.Time) error {
	if len(body) > MaxCallbackBytes {
		return fmt.Errorf("%w: body larger than %d bytes", ErrBadSignature, MaxCallbackBytes)
	}
	sh, err := parseSignatureHeader(header)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	if !withinTolerance(sh.timestamp, now) {
		return fmt.Errorf("%w: timestamp %s is more than %s from now", ErrBadSignature, sh.timestamp.Format(time.RFC3339), CallbackTolerance)
	}
	want := signPayload(key, sh.timestamp.Unix(), body)
	for _, sig := range sh.signatures {
		if hmac.Equal(want, sig) {
			return nil
		}
	}
	return fmt.Errorf("%w: no matching signature", ErrBadSignature)
}
