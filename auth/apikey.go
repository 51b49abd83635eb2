package auth

import (
	"crypto/rand"
	"hash/crc32"
)

// API key secret layout:
//
//	sk_live_ | 32 random base62 chars | 6 base62 chars of CRC32(random part)
//
// The checksum is not a security feature (the random part is); it lets
// CheckAPIKeyFormat reject typos and truncated copy-pastes without a database
// lookup, and lets secret scanners recognise real keys with few false
// positives.
const (
	// APIKeyPrefix starts every API key secret.
	APIKeyPrefix = "sk_live_"
	// APIKeyLength is the exact length of an API key secret in bytes.
	APIKeyLength = len(APIKeyPrefix) + apiKeyRandomLength + apiKeyChecksumLength

	// 32 base62 chars carry ~190 bits of entropy, far beyond brute force.
	apiKeyRandomLength = 32
	// 62^6 (~5.7e10) > 2^32, so 6 base62 chars hold any CRC32 value.
	apiKeyChecksumLength = 6
	// last4Length is how many trailing chars Last4 shows in UIs and logs.
	last4Length = 4

	// randomReadSize is how many random bytes are read per batch while
	// sampling; more than enough for one key even after rejections.
	randomReadSize = 64
)

// base62Alphabet maps digit values to characters. '0' is digit 0, so the
// fixed-width checksum encoding is naturally left-padded with '0'.
const base62Alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

const (
	base62Base = len(base62Alphabet)
	// base62SampleLimit is the largest multiple of 62 that fits in a byte
	// (248). Random bytes at or above it are discarded so that b%62 is
	// uniform; without this, the first 8 characters would be slightly more
	// likely than the rest.
	base62SampleLimit = 256 - 256%base62Base
)

// NewAPIKeySecret returns a fresh API key secret. Only its hash (HashAPIKey)
// and Last4 should be stored; the secret itself is shown to the user once.
func NewAPIKeySecret() (secret string, err error) {
	var buf [APIKeyLength]byte
	copy(buf[:], APIKeyPrefix)
	random := buf[len(APIKeyPrefix) : len(APIKeyPrefix)+apiKeyRandomLength]
	if err := fillRandomBase62(random); err != nil {
		return "", err
	}
	encodeBase62Fixed(buf[len(APIKeyPrefix)+apiKeyRandomLength:], crc32.ChecksumIEEE(random))
	return string(buf[:]), nil
}

// fillRandomBase62 fills dst with uniformly random base62 characters from
// crypto/rand, using rejection sampling.
func fillRandomBase62(dst []byte) error {
	var raw [randomReadSize]byte
	filled := 0
	for filled < len(dst) {
		if _, err := rand.Read(raw[:]); err != nil {
			return err
		}
		for _, b := range raw {
			if filled == len(dst) {
				break
			}
			if int(b) >= base62SampleLimit {
				continue
			}
			dst[filled] = base62Alphabet[int(b)%base62Base]
			filled++
		}
	}
	return nil
}

// encodeBase62Fixed writes v into dst as big-endian base62, using all of dst
// (leading '0's pad short values). dst must be long enough to hold v.
func encodeBase62Fixed(dst []byte, v uint32) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = base62Alphabet[v%uint32(base62Base)]
		v /= uint32(base62Base)
	}
}

// CheckAPIKeyFormat reports whether secret is shaped like an API key secret:
// right prefix, exact length, base62 charset and a matching checksum. It says
// nothing about whether the key exists; it only lets callers reject garbage
// before spending a database lookup on it. It is not constant-time: the
// checksum is a public function of the secret, so timing leaks nothing
// useful.
func CheckAPIKeyFormat(secret string) bool {
	if len(secret) != APIKeyLength || secret[:len(APIKeyPrefix)] != APIKeyPrefix {
		return false
	}
	body := secret[len(APIKeyPrefix):]
	for i := 0; i < len(body); i++ {
		if !isBase62(body[i]) {
			return false
		}
	}
	var random [apiKeyRandomLength]byte
	copy(random[:], body[:apiKeyRandomLength])
	var want [apiKeyChecksumLength]byte
	encodeBase62Fixed(want[:], crc32.ChecksumIEEE(random[:]))
	return body[apiKeyRandomLength:] == string(want[:])
}

func isBase62(c byte) bool {
	return ('0' <= c && c <= '9') || ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z')
}

// HashAPIKey returns the value to store and look API keys up by. It is keyed
// (HMAC rather than a bare hash) so a leaked database table cannot be used to
// test guesses offline without the master secret. Call CheckAPIKeyFormat
// first so malformed input never reaches the database.
func (k Keys) HashAPIKey(secret string) [32]byte {
	return hmacSHA256(k.apiKeyHash[:], []byte(secret))
}

// Last4 returns the last four characters of secret, for display so users can
// tell their keys apart. It returns "" if secret is shorter than that, rather
// than echoing back a short (and possibly mistyped) secret whole.
func Last4(secret string) string {
	if len(secret) < last4Length {
		return ""
	}
	return secret[len(secret)-last4Length:]
}
