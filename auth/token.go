package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"time"
)

// Participant and media tokens share one structure, implemented once here:
//
//	<prefix><base64url(payload)>.<base64url(HMAC-SHA256(key, <prefix><base64url(payload)>))>
//
// base64url is the unpadded URL alphabet, so tokens survive URLs, headers and
// JSON unescaped. The MAC covers the prefix as well as the payload, and each
// kind has its own key, so a token of one kind can never verify as another.
//
// Payload, a length-prefixed binary encoding rather than JSON so
// verification needs no reflection and almost no allocation. Version 1:
//
//	offset 0:  version, 1 byte (tokenVersion)
//	offset 1:  expires-at, 8 bytes, big-endian int64 Unix seconds
//	offset 9:  fields, in the order fixed by the token kind, each encoded as
//	           a 1-byte length (0..MaxIDLength) followed by that many bytes
//
// Version 2 (tokenVersionIssued), signed for the kinds that carry an issue
// time (media tokens), inserts after expires-at:
//
//	offset 9:  issued-at, 8 bytes, big-endian int64 Unix nanoseconds (0: none)
//	offset 17: fields, as in version 1
//
// A kind with an issue time still verifies version 1 tokens (signed by the
// release before, at most one media token lifetime old); their issue time
// reads as the zero time, the oldest there is.
//
// Trailing bytes after the last field are invalid, so every set of claims has
// exactly one encoding.

// Public limits.
const (
	// MaxTokenLength bounds the input Verify will even look at, so a
	// hostile multi-megabyte "token" costs nothing to reject and the decode
	// buffer can live on the stack.
	MaxTokenLength = 544
	// MaxIDLength is the longest id (or role) a token can carry, in bytes.
	MaxIDLength = 64
)

// Encoding constants. Lengths are in bytes.
const (
	tokenVersion       = 1
	tokenVersionIssued = 2
	tokenSeparator     = '.'

	versionLength       = 1
	expiresAtLength     = 8
	issuedAtLength      = 8
	fieldLengthLength   = 1
	payloadHeaderLength = versionLength + expiresAtLength

	macLength = sha256.Size
	// Unpadded base64 length of n bytes is ceil(n*8/6) = (n*8+5)/6; the
	// test checks these against encoding/base64.
	macEncodedLength = (macLength*8 + 5) / 6

	// The most fields any token kind carries (media tokens).
	maxTokenFields = mediaTokenFieldCount
	// The sign side writes at most MaxIDLength+1 bytes of a field: enough
	// for verify to see the field is too long and reject it (see
	// tokenKind.sign), never more.
	maxEncodedFieldLength = MaxIDLength + 1
	maxPayloadLength      = payloadHeaderLength + issuedAtLength + maxTokenFields*(fieldLengthLength+maxEncodedFieldLength)
	maxPrefixLength       = max(len(participantTokenPrefix), len(mediaTokenPrefix))
	maxSignedTokenLength  = maxPrefixLength + (maxPayloadLength*8+5)/6 + 1 + macEncodedLength
)

// Compile-time check that the longest token tokenKind.sign can produce still fits
// in MaxTokenLength; if not, the array length is negative and the build
// fails. Without this, raising MaxIDLength could silently mint tokens that
// Verify refuses to read.
var _ [MaxTokenLength - maxSignedTokenLength]struct{}

// Errors returned by token verification. Every failure is exactly one of
// these two, so callers can map them to responses without inspecting
// details (which would only help an attacker).
var (
	// ErrTokenInvalid means the token is malformed, was not signed by us,
	// or was signed for a different purpose.
	ErrTokenInvalid = errors.New("auth: token invalid")
	// ErrTokenExpired means the token is authentic but past its expiry. It
	// is only returned after the MAC checks out, so it is safe to tell the
	// client "expired, refresh" rather than "invalid".
	ErrTokenExpired = errors.New("auth: token expired")
)

// tokenEncoding is strict so that the unused low bits of the final character
// must be zero. Otherwise several strings would decode to the same MAC, and
// changing the last character of a token could leave it valid.
var tokenEncoding = base64.RawURLEncoding.Strict()

// tokenKind describes one kind of token: its prefix and the fields its
// payload carries.
type tokenKind struct {
	prefix string
	// fieldPrefixes holds, in payload order, the prefix each field must
	// start with. A field must be longer than its prefix, so "" means
	// "any non-empty value".
	fieldPrefixes []string
	// issued says the kind carries its issue time (payload version 2).
	issued bool
}

// sign returns a token for fields (which must be in fieldPrefixes order)
// expiring at expiresAt, truncated to whole seconds, and issued at issuedAt
// (kept to the nanosecond, for the kinds that carry it; ignored by others).
//
// The exported Sign methods have no error return, so sign does not
// validate: it encodes whatever it is given such that verify rejects claims
// that break the rules. In particular a field longer than MaxIDLength is cut
// to MaxIDLength+1 bytes, which keeps the token within MaxTokenLength yet
// still fails verification, instead of being cut to a shorter, valid,
// different id. Invalid claims therefore fail closed, at verification.
func (t tokenKind) sign(key [32]byte, expiresAt, issuedAt time.Time, fields ...string) string {
	var payloadBuf [maxPayloadLength]byte
	var payload []byte
	if t.issued {
		payload = append(payloadBuf[:0], tokenVersionIssued)
		payload = binary.BigEndian.AppendUint64(payload, uint64(expiresAt.Unix()))
		var nanos int64 // 0 stands for the zero time, whose UnixNano overflows
		if !issuedAt.IsZero() {
			nanos = issuedAt.UnixNano()
		}
		payload = binary.BigEndian.AppendUint64(payload, uint64(nanos))
	} else {
		payload = append(payloadBuf[:0], tokenVersion)
		payload = binary.BigEndian.AppendUint64(payload, uint64(expiresAt.Unix()))
	}
	for _, f := range fields {
		if len(f) > maxEncodedFieldLength {
			f = f[:maxEncodedFieldLength]
		}
		payload = append(payload, byte(len(f)))
		payload = append(payload, f...)
	}

	var tokenBuf [maxSignedTokenLength]byte
	token := append(tokenBuf[:0], t.prefix...)
	token = tokenEncoding.AppendEncode(token, payload)
	mac := hmacSHA256(key[:], token)
	token = append(token, tokenSeparator)
	token = tokenEncoding.AppendEncode(token, mac[:])
	return string(token)
}

// verify checks token and, if it is authentic, well formed and unexpired,
// fills fields (len(fields) must equal len(t.fieldPrefixes)) and returns the
// expiry and the issue time (zero for a kind without one, or a version 1
// token). On error fields must be ignored.
//
// Order matters: the MAC is checked before the payload is parsed, so the
// parser only ever sees bytes we signed ourselves.
func (t tokenKind) verify(key [32]byte, token string, now time.Time, fields []string) (expiresAt, issuedAt time.Time, err error) {
	// An all-zero key means a zero Keys or MediaVerifier: refuse rather
	// than accept tokens anyone could compute.
	if key == ([32]byte{}) || len(fields) != len(t.fieldPrefixes) {
		return time.Time{}, time.Time{}, ErrTokenInvalid
	}
	if len(token) > MaxTokenLength || !strings.HasPrefix(token, t.prefix) {
		return time.Time{}, time.Time{}, ErrTokenInvalid
	}
	dot := strings.IndexByte(token, tokenSeparator)
	if dot < 0 {
		return time.Time{}, time.Time{}, ErrTokenInvalid
	}
	signed, payloadText, macText := token[:dot], token[len(t.prefix):dot], token[dot+1:]
	// The explicit charset check also rules out a second '.', and CR/LF,
	// which encoding/base64 would otherwise silently skip.
	if len(macText) != macEncodedLength || !isBase64URL(payloadText) || !isBase64URL(macText) {
		return time.Time{}, time.Time{}, ErrTokenInvalid
	}

	// Decode wants []byte; copying into a stack buffer avoids the heap
	// allocation a string conversion would cost.
	var text [MaxTokenLength]byte
	var gotMAC [macLength]byte
	n, err := tokenEncoding.Decode(gotMAC[:], text[:copy(text[:], macText)])
	if err != nil || n != macLength {
		return time.Time{}, time.Time{}, ErrTokenInvalid
	}
	// Here the conversion is deliberate: crypto/hmac takes the message
	// through an interface, so whatever buffer is passed escapes to the
	// heap, and a conversion allocates only len(signed) bytes rather than
	// moving all of text there.
	wantMAC := hmacSHA256(key[:], []byte(signed))
	if !hmac.Equal(gotMAC[:], wantMAC[:]) {
		return time.Time{}, time.Time{}, ErrTokenInvalid
	}

	// Decoding never grows data, so a MaxTokenLength buffer always fits.
	var payload [MaxTokenLength]byte
	n, err = tokenEncoding.Decode(payload[:], text[:copy(text[:], payloadText)])
	if err != nil {
		return time.Time{}, time.Time{}, ErrTokenInvalid
	}
	expiresAt, issuedAt, ok := t.parsePayload(payload[:n], fields)
	if !ok {
		return time.Time{}, time.Time{}, ErrTokenInvalid
	}
	for i, f := range fields {
		if len(f) <= len(t.fieldPrefixes[i]) || !strings.HasPrefix(f, t.fieldPrefixes[i]) {
			return time.Time{}, time.Time{}, ErrTokenInvalid
		}
	}
	// Checked last so that "expired" is only ever said about a token that
	// is otherwise entirely valid.
	if !now.Before(expiresAt) {
		return time.Time{}, time.Time{}, ErrTokenExpired
	}
	return expiresAt, issuedAt, nil
}

// parsePayload decodes a payload of t (layout at the top of this file) into
// fields, which must have exactly as many entries as the payload has fields.
// It reports false for any deviation, and for a version t does not sign or
// read (version 2 is read only by the kinds that carry an issue time).
func (t tokenKind) parsePayload(payload []byte, fields []string) (expiresAt, issuedAt time.Time, ok bool) {
	if len(payload) < payloadHeaderLength {
		return time.Time{}, time.Time{}, false
	}
	unix := int64(binary.BigEndian.Uint64(payload[versionLength:payloadHeaderLength]))
	header := payloadHeaderLength
	switch {
	case payload[0] == tokenVersion:
	case payload[0] == tokenVersionIssued && t.issued && len(payload) >= payloadHeaderLength+issuedAtLength:
		if nanos := int64(binary.BigEndian.Uint64(payload[payloadHeaderLength : payloadHeaderLength+issuedAtLength])); nanos != 0 {
			issuedAt = time.Unix(0, nanos).UTC()
		}
		header += issuedAtLength
	default:
		return time.Time{}, time.Time{}, false
	}

	// One string conversion for all fields, which then share its memory:
	// one allocation per verification instead of one per field.
	rest := string(payload[header:])
	off := 0
	for i := range fields {
		if off >= len(rest) {
			return time.Time{}, time.Time{}, false
		}
		n := int(rest[off])
		off += fieldLengthLength
		if n > MaxIDLength || n > len(rest)-off {
			return time.Time{}, time.Time{}, false
		}
		fields[i] = rest[off : off+n]
		off += n
	}
	if off != len(rest) {
		return time.Time{}, time.Time{}, false
	}
	return time.Unix(unix, 0).UTC(), issuedAt, true
}

// isBase64URL reports whether s consists only of unpadded base64url
// characters.
func isBase64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isBase62(c) && c != '-' && c != '_' {
			return false
		}
	}
	return true
}
