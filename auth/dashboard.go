package auth

import (
	"crypto/rand"
	"encoding/base64"
	"strings"
)

// Dashboard secrets: the session token (rtc_us_), the e-mail sign-in link
// token (rtc_el_) and the invitation token (rtc_inv_). Unlike participant
// and media tokens they are not signed: each is 256 random bits that the
// service stores only as a keyed hash (HashDashboardSecret), so the record
// decides validity, expiry and single use, and revocation is immediate.
const (
	SessionTokenPrefix    = "rtc_us_"
	SignInTokenPrefix     = "rtc_el_"
	InvitationTokenPrefix = "rtc_inv_"
	// dashboardSecretBytes is the entropy of a dashboard secret (256 bits,
	// twice the 128 the sign-in link must have at least).
	dashboardSecretBytes = 32
)

// dashboardSecretChars is the length of the encoded random part.
var dashboardSecretChars = base64.RawURLEncoding.EncodedLen(dashboardSecretBytes)

// NewDashboardSecret returns prefix followed by 256 random bits in
// unpadded base64url.
func NewDashboardSecret(prefix string) (string, error) {
	var b [dashboardSecretBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// CheckDashboardSecretFormat reports whether s is prefix followed by exactly
// the encoded random part, so malformed input never reaches a lookup.
func CheckDashboardSecretFormat(prefix, s string) bool {
	if len(s) != len(prefix)+dashboardSecretChars || !strings.HasPrefix(s, prefix) {
		return false
	}
	return isBase64URL(s[len(prefix):])
}

// HashDashboardSecret is the value a dashboard secret is stored and looked
// up by: keyed, like HashAPIKey, so a copied database cannot be used to test
// guesses without the master secret.
func (k Keys) HashDashboardSecret(secret string) [32]byte {
	return hmacSHA256(k.dashboardSecret[:], []byte(secret))
}
