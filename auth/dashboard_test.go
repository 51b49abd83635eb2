package auth

import (
	"encoding/base64"
	"strings"
	"testing"
)

var dashboardPrefixes = []string{SessionTokenPrefix, SignInTokenPrefix, InvitationTokenPrefix}

func TestNewDashboardSecretShapeAndEntropy(t *testing.T) {
	for _, prefix := range dashboardPrefixes {
		s, err := NewDashboardSecret(prefix)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s, prefix) {
			t.Fatalf("%q lacks prefix %q", s, prefix)
		}
		raw, err := base64.RawURLEncoding.DecodeString(s[len(prefix):])
		if err != nil {
			t.Fatalf("%q: random part is not unpadded base64url: %v", s, err)
		}
		if bits := len(raw) * 8; bits < 128 || bits != 256 {
			t.Fatalf("%q carries %d random bits, want 256 (and at least 128)", s, bits)
		}
		if len(s) != len(prefix)+43 {
			t.Fatalf("%q: length %d, want %d", s, len(s), len(prefix)+43)
		}
		if !CheckDashboardSecretFormat(prefix, s) {
			t.Fatalf("%q fails its own format check", s)
		}
		for _, other := range dashboardPrefixes {
			if other != prefix && CheckDashboardSecretFormat(other, s) {
				t.Fatalf("%q passes the format check of prefix %q", s, other)
			}
		}
	}
}

func TestNewDashboardSecretIsUnique(t *testing.T) {
	const draws = 10_000
	seen := make(map[string]struct{}, draws)
	// Per byte position, which values were seen: a stuck byte (a zeroed
	// buffer, a short read) would show as a single value.
	var values [32]map[byte]struct{}
	for i := range values {
		values[i] = make(map[byte]struct{})
	}
	for i := 0; i < draws; i++ {
		s, err := NewDashboardSecret(SessionTokenPrefix)
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := seen[s]; dup {
			t.Fatalf("draw %d repeated %q", i, s)
		}
		seen[s] = struct{}{}
		raw, err := base64.RawURLEncoding.DecodeString(s[len(SessionTokenPrefix):])
		if err != nil {
			t.Fatal(err)
		}
		for j, b := range raw {
			values[j][b] = struct{}{}
		}
	}
	for j, v := range values {
		// 10,000 uniform draws over 256 values miss one with probability
		// about 256*e^-39: every value shows up.
		if len(v) != 256 {
			t.Errorf("byte %d took only %d distinct values over %d draws", j, len(v), draws)
		}
	}
}

func TestCheckDashboardSecretFormatRefuses(t *testing.T) {
	good, err := NewDashboardSecret(SignInTokenPrefix)
	if err != nil {
		t.Fatal(err)
	}
	body := good[len(SignInTokenPrefix):]
	cases := map[string]string{
		"empty":                      "",
		"prefix only":                SignInTokenPrefix,
		"no prefix":                  body,
		"session prefix":             SessionTokenPrefix + body,
		"invitation prefix":          InvitationTokenPrefix + body,
		"upper-case prefix":          strings.ToUpper(SignInTokenPrefix) + body,
		"api key prefix":             "sk_live_" + body,
		"one char short":             good[:len(good)-1],
		"one char long":              good + "A",
		"padding":                    good + "=",
		"padded, same length":        good[:len(good)-1] + "=",
		"standard base64 plus":       good[:len(good)-1] + "+",
		"standard base64 slash":      good[:len(good)-1] + "/",
		"space":                      good[:len(good)-1] + " ",
		"dot":                        good[:len(good)-1] + ".",
		"NUL":                        good[:len(good)-1] + "\x00",
		"newline":                    good[:len(good)-1] + "\n",
		"non-ASCII":                  good[:len(good)-2] + "é",
		"leading space":              " " + good[:len(good)-1],
		"all underscores, too short": SignInTokenPrefix + strings.Repeat("_", 42),
	}
	for name, s := range cases {
		if CheckDashboardSecretFormat(SignInTokenPrefix, s) {
			t.Errorf("%s: %q passes the format check", name, s)
		}
	}
	// The whole alphabet is accepted, '-' and '_' included.
	for _, s := range []string{
		SignInTokenPrefix + strings.Repeat("-", 43),
		SignInTokenPrefix + strings.Repeat("_", 43),
		SignInTokenPrefix + "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefg",
	} {
		if !CheckDashboardSecretFormat(SignInTokenPrefix, s) {
			t.Errorf("%q fails the format check", s)
		}
	}
	// An empty prefix checks the random part alone.
	if !CheckDashboardSecretFormat("", body) || CheckDashboardSecretFormat("", "") {
		t.Error("empty prefix: format check wrong")
	}
}

func TestHashDashboardSecret(t *testing.T) {
	k1, k1again, k2 := testKeys(t, 1), testKeys(t, 1), testKeys(t, 2)
	s, err := NewDashboardSecret(SessionTokenPrefix)
	if err != nil {
		t.Fatal(err)
	}
	h := k1.HashDashboardSecret(s)
	if h == ([32]byte{}) {
		t.Fatal("hash is zero")
	}
	if k1.HashDashboardSecret(s) != h || k1again.HashDashboardSecret(s) != h {
		t.Error("hash is not deterministic for the same master key")
	}
	if k2.HashDashboardSecret(s) == h {
		t.Error("different master keys give the same hash")
	}
	// Domain separation: the same string hashes differently as an API key,
	// so a stored hash of one kind can never match a lookup of the other.
	if k1.HashAPIKey(s) == h {
		t.Error("HashDashboardSecret equals HashAPIKey of the same string")
	}
	apiKey, err := NewAPIKeySecret()
	if err != nil {
		t.Fatal(err)
	}
	if k1.HashAPIKey(apiKey) == k1.HashDashboardSecret(apiKey) {
		t.Error("HashAPIKey equals HashDashboardSecret of the same API key")
	}
	// Secrets that differ in one character hash differently.
	last := byte('A')
	if s[len(s)-1] == 'A' {
		last = 'B'
	}
	other := s[:len(s)-1] + string(last)
	if k1.HashDashboardSecret(other) == h {
		t.Error("a one-character change gives the same hash")
	}
	// The prefix is part of what is hashed: a session token replayed as a
	// sign-in link token (same random part) does not match.
	if k1.HashDashboardSecret(SignInTokenPrefix+s[len(SessionTokenPrefix):]) == h {
		t.Error("the prefix is not part of the hash")
	}
}
