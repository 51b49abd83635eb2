package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"
	"testing"
	"time"
)

// testNow is fixed so tests do not depend on the wall clock.
var testNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func testKeys(t testing.TB, seed byte) Keys {
	t.Helper()
	k, err := DeriveKeys(bytes.Repeat([]byte{seed}, MinMasterKeyLength))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func testParticipantClaims() ParticipantClaims {
	return ParticipantClaims{
		ProjectID:     "prj_01HZX3",
		RoomID:        "room_standup",
		ParticipantID: "part_alice",
		ExpiresAt:     testNow.Add(time.Hour),
	}
}

func testMediaClaims() MediaClaims {
	return MediaClaims{
		SessionID:     "cs_9f8e7d",
		ProjectID:     "prj_01HZX3",
		RoomID:        "room_standup",
		ParticipantID: "part_alice",
		Role:          "publisher",
		ExpiresAt:     testNow.Add(2 * time.Minute),
	}
}

func TestDeriveKeys(t *testing.T) {
	if _, err := DeriveKeys(make([]byte, MinMasterKeyLength-1)); !errors.Is(err, ErrMasterKeyTooShort) {
		t.Fatalf("short master: err = %v, want ErrMasterKeyTooShort", err)
	}
	k := testKeys(t, 1)
	subkeys := [][32]byte{k.apiKeyHash, k.participantToken, k.mediaToken, k.idempotency}
	for i := range subkeys {
		if subkeys[i] == ([32]byte{}) {
			t.Errorf("subkey %d is zero", i)
		}
		for j := i + 1; j < len(subkeys); j++ {
			if subkeys[i] == subkeys[j] {
				t.Errorf("subkeys %d and %d are equal", i, j)
			}
		}
	}
	if k.MediaToken() != k.mediaToken || k.Idempotency() != k.idempotency {
		t.Error("accessors do not return the derived subkeys")
	}
	if k2 := testKeys(t, 1); k2 != k {
		t.Error("derivation is not deterministic")
	}
	if k3 := testKeys(t, 2); k3.participantToken == k.participantToken {
		t.Error("different masters gave the same subkey")
	}
}

func TestKeysAreRedactedWhenFormatted(t *testing.T) {
	k := testKeys(t, 1)
	v := k.MediaVerifier()
	cases := map[string]string{
		fmt.Sprintf("%v|%+v|%#v|%s", k, k, k, k): "auth.Keys{REDACTED}|auth.Keys{REDACTED}|auth.Keys{REDACTED}|auth.Keys{REDACTED}",
		fmt.Sprintf("%v|%#v", v, v):              "auth.MediaVerifier{REDACTED}|auth.MediaVerifier{REDACTED}",
	}
	for got, want := range cases {
		if got != want {
			t.Errorf("formatted = %q, want %q", got, want)
		}
	}
}

func TestConstantsMatchEncoding(t *testing.T) {
	if got := base64.RawURLEncoding.EncodedLen(sha256.Size); got != macEncodedLength {
		t.Errorf("macEncodedLength = %d, want %d", macEncodedLength, got)
	}
	longest := maxPrefixLength + base64.RawURLEncoding.EncodedLen(maxPayloadLength) + 1 + macEncodedLength
	if longest != maxSignedTokenLength {
		t.Errorf("maxSignedTokenLength = %d, want %d", maxSignedTokenLength, longest)
	}
	for _, kind := range []tokenKind{participantTokenKind, mediaTokenKind} {
		if len(kind.prefix) > maxPrefixLength || len(kind.fieldPrefixes) > maxTokenFields {
			t.Errorf("%s exceeds the limits maxSignedTokenLength was computed from", kind.prefix)
		}
	}
	if len(participantTokenKind.fieldPrefixes) != participantTokenFieldCount ||
		len(mediaTokenKind.fieldPrefixes) != mediaTokenFieldCount {
		t.Error("field counts do not match the token kinds")
	}
	if APIKeyLength != 46 {
		t.Errorf("APIKeyLength = %d, want 46", APIKeyLength)
	}
}

// --- API keys ---

func TestNewAPIKeySecret(t *testing.T) {
	seen := make(map[string]bool)
	for range 100 {
		s, err := NewAPIKeySecret()
		if err != nil {
			t.Fatal(err)
		}
		if len(s) != APIKeyLength || !strings.HasPrefix(s, APIKeyPrefix) {
			t.Fatalf("bad shape: %q", s)
		}
		if !CheckAPIKeyFormat(s) {
			t.Fatalf("CheckAPIKeyFormat rejected fresh secret %q", s)
		}
		if seen[s] {
			t.Fatalf("duplicate secret %q", s)
		}
		seen[s] = true
	}
}

func TestAPIKeyChecksumEncoding(t *testing.T) {
	random := strings.Repeat("a", apiKeyRandomLength)
	var sum [apiKeyChecksumLength]byte
	encodeBase62Fixed(sum[:], crc32.ChecksumIEEE([]byte(random)))
	if !CheckAPIKeyFormat(APIKeyPrefix + random + string(sum[:])) {
		t.Fatal("hand-built secret rejected")
	}
	// Left padding: small values are padded with '0', the largest uses all
	// six digits.
	encodeBase62Fixed(sum[:], 61)
	if string(sum[:]) != "00000z" {
		t.Errorf("encode(61) = %q, want 00000z", sum[:])
	}
	encodeBase62Fixed(sum[:], 1<<32-1)
	if string(sum[:]) != "4gfFC3" {
		t.Errorf("encode(max uint32) = %q, want 4gfFC3", sum[:])
	}
}

func TestCheckAPIKeyFormatRejects(t *testing.T) {
	valid, err := NewAPIKeySecret()
	if err != nil {
		t.Fatal(err)
	}
	// Every single-character change, anywhere, must be caught: in the
	// prefix by the prefix check, elsewhere by CRC32 (which detects every
	// single-byte error) or the checksum comparison.
	for i := range len(valid) {
		for _, c := range []byte(base62Alphabet + "_-.+/ \x00\xff") {
			if c == valid[i] {
				continue
			}
			mutated := valid[:i] + string(c) + valid[i+1:]
			if CheckAPIKeyFormat(mutated) {
				t.Fatalf("accepted %q (changed index %d)", mutated, i)
			}
		}
	}
	rejects := map[string]string{
		"empty":             "",
		"wrong prefix":      "sk_test_" + valid[len(APIKeyPrefix):],
		"no prefix":         valid[len(APIKeyPrefix):],
		"too short":         valid[:APIKeyLength-1],
		"too long":          valid + "0",
		"prefix only":       APIKeyPrefix,
		"uppercased prefix": strings.ToUpper(APIKeyPrefix) + valid[len(APIKeyPrefix):],
	}
	for name, s := range rejects {
		if CheckAPIKeyFormat(s) {
			t.Errorf("%s: accepted %q", name, s)
		}
	}
}

func TestHashAPIKey(t *testing.T) {
	k := testKeys(t, 1)
	a, _ := NewAPIKeySecret()
	b, _ := NewAPIKeySecret()
	if k.HashAPIKey(a) != k.HashAPIKey(a) {
		t.Error("hash is not deterministic")
	}
	if k.HashAPIKey(a) == k.HashAPIKey(b) {
		t.Error("different secrets hash equal")
	}
	if k.HashAPIKey(a) == testKeys(t, 2).HashAPIKey(a) {
		t.Error("hash does not depend on the master key")
	}
	if k.HashAPIKey(a) == sha256.Sum256([]byte(a)) {
		t.Error("hash is unkeyed")
	}
}

func TestLast4(t *testing.T) {
	cases := map[string]string{"sk_live_abcdWXYZ": "WXYZ", "abcd": "abcd", "abc": "", "": ""}
	for in, want := range cases {
		if got := Last4(in); got != want {
			t.Errorf("Last4(%q) = %q, want %q", in, got, want)
		}
	}
}

// --- tokens ---

func TestParticipantTokenRoundTrip(t *testing.T) {
	k := testKeys(t, 1)
	c := testParticipantClaims()
	c.ExpiresAt = c.ExpiresAt.Add(500 * time.Millisecond) // truncated to seconds
	token := k.SignParticipantToken(c)
	if !strings.HasPrefix(token, "rtc_pt_") || len(token) > MaxTokenLength {
		t.Fatalf("bad token shape: %q", token)
	}
	got, err := k.VerifyParticipantToken(token, testNow)
	if err != nil {
		t.Fatal(err)
	}
	want := c
	want.ExpiresAt = c.ExpiresAt.Truncate(time.Second)
	if got.ProjectID != want.ProjectID || got.RoomID != want.RoomID ||
		got.ParticipantID != want.ParticipantID || !got.ExpiresAt.Equal(want.ExpiresAt) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestMediaTokenRoundTrip(t *testing.T) {
	k := testKeys(t, 1)
	c := testMediaClaims()
	token := k.SignMediaToken(c)
	if !strings.HasPrefix(token, "rtc_mt_") {
		t.Fatalf("bad token shape: %q", token)
	}
	// The media node has only the media key.
	v := NewMediaVerifier(k.MediaToken())
	got, err := v.Verify(token, testNow)
	if err != nil {
		t.Fatal(err)
	}
	gotExpiry, wantExpiry := got.ExpiresAt, c.ExpiresAt
	got.ExpiresAt, c.ExpiresAt = time.Time{}, time.Time{}
	if got != c || !gotExpiry.Equal(wantExpiry) {
		t.Fatalf("got %+v (expiry %v), want %+v (expiry %v)", got, gotExpiry, c, wantExpiry)
	}
	if _, err := k.MediaVerifier().Verify(token, testNow); err != nil {
		t.Fatalf("Keys.MediaVerifier: %v", err)
	}
}

// A media token carries its issue time to the nanosecond (the control plane
// orders a participant's sessions by it); the zero time round-trips as
// zero.
func TestMediaTokenIssuedAt(t *testing.T) {
	k := testKeys(t, 1)
	for _, issued := range []time.Time{testNow.Add(-1234567 * time.Nanosecond), {}} {
		c := testMediaClaims()
		c.IssuedAt = issued
		got, err := k.MediaVerifier().Verify(k.SignMediaToken(c), testNow)
		if err != nil {
			t.Fatal(err)
		}
		if !got.IssuedAt.Equal(issued) || got.IssuedAt.IsZero() != issued.IsZero() {
			t.Fatalf("issued at %v, want %v", got.IssuedAt, issued)
		}
	}
}

// A media token signed by the release before (payload version 1, no issue
// time) still verifies, as issued at the zero time; a participant token
// never reads version 2.
func TestMediaTokenVersion1StillVerifies(t *testing.T) {
	k := testKeys(t, 1)
	c := testMediaClaims()
	before := tokenKind{prefix: mediaTokenKind.prefix, fieldPrefixes: mediaTokenKind.fieldPrefixes}
	old := before.sign(k.mediaToken, c.ExpiresAt, testNow, c.SessionID, c.ProjectID, c.RoomID, c.ParticipantID, c.Role)
	got, err := k.MediaVerifier().Verify(old, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if got.SessionID != c.SessionID || !got.IssuedAt.IsZero() {
		t.Fatalf("version 1 token read as %+v", got)
	}
	p := testParticipantClaims()
	issuedKind := tokenKind{prefix: participantTokenKind.prefix, fieldPrefixes: participantTokenKind.fieldPrefixes, issued: true}
	v2 := issuedKind.sign(k.participantToken, p.ExpiresAt, testNow, p.ProjectID, p.RoomID, p.ParticipantID)
	if _, err := k.VerifyParticipantToken(v2, testNow); !errors.Is(err, ErrTokenInvalid) {
		t.Fatalf("a version 2 participant token: %v, want ErrTokenInvalid", err)
	}
}

func TestMaximalClaimsFit(t *testing.T) {
	k := testKeys(t, 1)
	id := func(prefix string) string { return prefix + strings.Repeat("x", MaxIDLength-len(prefix)) }
	c := MediaClaims{
		SessionID: id("cs_"), ProjectID: id("prj_"), RoomID: id("room_"),
		ParticipantID: id("part_"), Role: id(""), ExpiresAt: testNow.Add(time.Minute),
	}
	token := k.SignMediaToken(c)
	if len(token) > MaxTokenLength {
		t.Fatalf("maximal token is %d bytes, limit %d", len(token), MaxTokenLength)
	}
	if _, err := k.MediaVerifier().Verify(token, testNow); err != nil {
		t.Fatalf("maximal claims: %v", err)
	}
}

func TestTokenExpiry(t *testing.T) {
	k := testKeys(t, 1)
	c := testParticipantClaims()
	token := k.SignParticipantToken(c)
	for _, tc := range []struct {
		now  time.Time
		want error
	}{
		{c.ExpiresAt.Add(-time.Second), nil},
		{c.ExpiresAt.Add(-time.Nanosecond), nil},
		{c.ExpiresAt, ErrTokenExpired},
		{c.ExpiresAt.Add(time.Hour), ErrTokenExpired},
	} {
		got, err := k.VerifyParticipantToken(token, tc.now)
		if err != tc.want {
			t.Errorf("now=%v: err = %v, want %v", tc.now, err, tc.want)
		}
		if err != nil && got != (ParticipantClaims{}) {
			t.Errorf("now=%v: claims returned with error: %+v", tc.now, got)
		}
	}
	mt := k.SignMediaToken(testMediaClaims())
	if _, err := k.MediaVerifier().Verify(mt, testMediaClaims().ExpiresAt); err != ErrTokenExpired {
		t.Errorf("media: err = %v, want ErrTokenExpired", err)
	}
}

// tokenAlphabet is every character that can appear in a token, plus a few
// that cannot, including the CR/LF that encoding/base64 would skip.
const tokenAlphabet = base62Alphabet + "-_.=+/\r\n \x00\xff"

func TestTamperedParticipantTokenIsInvalid(t *testing.T) {
	k := testKeys(t, 1)
	token := k.SignParticipantToken(testParticipantClaims())
	assertEveryTamperInvalid(t, token, func(s string) error {
		_, err := k.VerifyParticipantToken(s, testNow)
		return err
	})
}

func TestTamperedMediaTokenIsInvalid(t *testing.T) {
	k := testKeys(t, 1)
	token := k.SignMediaToken(testMediaClaims())
	v := k.MediaVerifier()
	assertEveryTamperInvalid(t, token, func(s string) error {
		_, err := v.Verify(s, testNow)
		return err
	})
}

// assertEveryTamperInvalid replaces each byte of token with every other
// candidate byte, and also deletes each byte, checking every result is
// ErrTokenInvalid. Replacing the last character covers the base64 padding
// bits, which only strict decoding catches.
func assertEveryTamperInvalid(t *testing.T, token string, verify func(string) error) {
	t.Helper()
	if err := verify(token); err != nil {
		t.Fatalf("untampered token: %v", err)
	}
	for i := range len(token) {
		for _, c := range []byte(tokenAlphabet) {
			if c == token[i] {
				continue
			}
			mutated := token[:i] + string([]byte{c}) + token[i+1:]
			if err := verify(mutated); err != ErrTokenInvalid {
				t.Fatalf("byte %d set to %q: err = %v, want ErrTokenInvalid", i, c, err)
			}
		}
		if err := verify(token[:i] + token[i+1:]); err != ErrTokenInvalid {
			t.Fatalf("byte %d deleted: err = %v, want ErrTokenInvalid", i, err)
		}
	}
	for _, extra := range []string{"A", ".", "\n", "=="} {
		if err := verify(token + extra); err != ErrTokenInvalid {
			t.Fatalf("appended %q: err = %v, want ErrTokenInvalid", extra, err)
		}
	}
}

func TestTokenFromOtherMasterIsInvalid(t *testing.T) {
	ours, theirs := testKeys(t, 1), testKeys(t, 2)
	if _, err := ours.VerifyParticipantToken(theirs.SignParticipantToken(testParticipantClaims()), testNow); err != ErrTokenInvalid {
		t.Errorf("participant: err = %v, want ErrTokenInvalid", err)
	}
	if _, err := ours.MediaVerifier().Verify(theirs.SignMediaToken(testMediaClaims()), testNow); err != ErrTokenInvalid {
		t.Errorf("media: err = %v, want ErrTokenInvalid", err)
	}
	// Expired tokens from another master are still invalid, not expired:
	// "expired" must only be said about authentic tokens.
	late := testParticipantClaims().ExpiresAt.Add(time.Hour)
	if _, err := ours.VerifyParticipantToken(theirs.SignParticipantToken(testParticipantClaims()), late); err != ErrTokenInvalid {
		t.Errorf("expired foreign token: err = %v, want ErrTokenInvalid", err)
	}
}

func TestTokenKindsAreNotInterchangeable(t *testing.T) {
	k := testKeys(t, 1)
	pt := k.SignParticipantToken(testParticipantClaims())
	mt := k.SignMediaToken(testMediaClaims())
	if _, err := k.MediaVerifier().Verify(pt, testNow); err != ErrTokenInvalid {
		t.Errorf("participant token as media token: err = %v, want ErrTokenInvalid", err)
	}
	if _, err := k.VerifyParticipantToken(mt, testNow); err != ErrTokenInvalid {
		t.Errorf("media token as participant token: err = %v, want ErrTokenInvalid", err)
	}
	// Swapping the prefix alone must not help either: the MAC covers the
	// prefix and the kinds use different keys.
	if _, err := k.MediaVerifier().Verify("rtc_mt_"+strings.TrimPrefix(pt, "rtc_pt_"), testNow); err != ErrTokenInvalid {
		t.Errorf("re-prefixed participant token: err = %v, want ErrTokenInvalid", err)
	}
	if _, err := k.VerifyParticipantToken("rtc_pt_"+strings.TrimPrefix(mt, "rtc_mt_"), testNow); err != ErrTokenInvalid {
		t.Errorf("re-prefixed media token: err = %v, want ErrTokenInvalid", err)
	}
}

func TestZeroKeysRejectEverything(t *testing.T) {
	var zero Keys
	token := zero.SignParticipantToken(testParticipantClaims())
	if _, err := zero.VerifyParticipantToken(token, testNow); err != ErrTokenInvalid {
		t.Errorf("zero Keys: err = %v, want ErrTokenInvalid", err)
	}
	if _, err := (MediaVerifier{}).Verify(zero.SignMediaToken(testMediaClaims()), testNow); err != ErrTokenInvalid {
		t.Errorf("zero MediaVerifier: err = %v, want ErrTokenInvalid", err)
	}
}

func TestInvalidClaimsNeverVerify(t *testing.T) {
	k := testKeys(t, 1)
	long := func(prefix string) string { return prefix + strings.Repeat("x", MaxIDLength) }
	participant := map[string]func(*ParticipantClaims){
		"project prefix":     func(c *ParticipantClaims) { c.ProjectID = "project_1" },
		"room prefix":        func(c *ParticipantClaims) { c.RoomID = "prj_1" },
		"participant prefix": func(c *ParticipantClaims) { c.ParticipantID = "room_1" },
		"bare prefix":        func(c *ParticipantClaims) { c.RoomID = "room_" },
		"empty":              func(c *ParticipantClaims) { c.ProjectID = "" },
		"too long":           func(c *ParticipantClaims) { c.RoomID = long("room_") },
		"far too long":       func(c *ParticipantClaims) { c.ParticipantID = long(long("part_")) + long("") },
	}
	for name, mutate := range participant {
		c := testParticipantClaims()
		mutate(&c)
		token := k.SignParticipantToken(c)
		if len(token) > MaxTokenLength {
			t.Errorf("%s: token is %d bytes", name, len(token))
		}
		if _, err := k.VerifyParticipantToken(token, testNow); err != ErrTokenInvalid {
			t.Errorf("%s: err = %v, want ErrTokenInvalid", name, err)
		}
	}
	media := map[string]func(*MediaClaims){
		"session prefix": func(c *MediaClaims) { c.SessionID = "sess_1" },
		"empty role":     func(c *MediaClaims) { c.Role = "" },
		"long role":      func(c *MediaClaims) { c.Role = long("r") },
	}
	for name, mutate := range media {
		c := testMediaClaims()
		mutate(&c)
		if _, err := k.MediaVerifier().Verify(k.SignMediaToken(c), testNow); err != ErrTokenInvalid {
			t.Errorf("%s: err = %v, want ErrTokenInvalid", name, err)
		}
	}
}

func TestMalformedTokensAreInvalid(t *testing.T) {
	k := testKeys(t, 1)
	valid := k.SignParticipantToken(testParticipantClaims())
	dot := strings.IndexByte(valid, '.')
	cases := map[string]string{
		"empty":           "",
		"prefix only":     "rtc_pt_",
		"no separator":    strings.Replace(valid, ".", "", 1),
		"empty payload":   "rtc_pt_" + valid[dot:],
		"empty mac":       valid[:dot+1],
		"second dot":      valid[:dot] + "." + valid[dot:],
		"padded":          valid + "=",
		"over max length": valid + strings.Repeat("A", MaxTokenLength),
		"wrong prefix":    "rtc_xx_" + valid[len("rtc_pt_"):],
		"std base64":      strings.NewReplacer("-", "+", "_", "/").Replace(valid),
	}
	for name, token := range cases {
		if token == valid {
			continue // e.g. no '-' or '_' to replace
		}
		if _, err := k.VerifyParticipantToken(token, testNow); err != ErrTokenInvalid {
			t.Errorf("%s: err = %v, want ErrTokenInvalid", name, err)
		}
	}
}

// signRawPayload MACs an arbitrary payload, to test the parser behind a
// valid MAC (which attackers cannot reach, but our own bugs could).
func signRawPayload(k Keys, payload []byte) string {
	body := "rtc_pt_" + base64.RawURLEncoding.EncodeToString(payload)
	mac := hmacSHA256(k.participantToken[:], []byte(body))
	return body + "." + base64.RawURLEncoding.EncodeToString(mac[:])
}

func TestBadPayloadBehindValidMACIsInvalid(t *testing.T) {
	k := testKeys(t, 1)
	exp := []byte{0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff} // year 2038
	field := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	good := bytes.Join([][]byte{{tokenVersion}, exp, field("prj_1"), field("room_1"), field("part_1")}, nil)
	if _, err := k.VerifyParticipantToken(signRawPayload(k, good), testNow); err != nil {
		t.Fatalf("hand-built payload rejected: %v", err)
	}
	cases := map[string][]byte{
		"empty":          {},
		"version only":   {tokenVersion},
		"wrong version":  append([]byte{2}, good[1:]...),
		"version zero":   append([]byte{0}, good[1:]...),
		"truncated":      good[:len(good)-1],
		"trailing byte":  append(append([]byte{}, good...), 0),
		"missing field":  bytes.Join([][]byte{{tokenVersion}, exp, field("prj_1"), field("room_1")}, nil),
		"extra field":    bytes.Join([][]byte{good, field("x")}, nil),
		"length overrun": bytes.Join([][]byte{{tokenVersion}, exp, field("prj_1"), field("room_1"), {200}, []byte("part_1")}, nil),
	}
	for name, payload := range cases {
		if _, err := k.VerifyParticipantToken(signRawPayload(k, payload), testNow); err != ErrTokenInvalid {
			t.Errorf("%s: err = %v, want ErrTokenInvalid", name, err)
		}
	}
}

func FuzzVerifyParticipantToken(f *testing.F) {
	k := testKeys(f, 1)
	valid := k.SignParticipantToken(testParticipantClaims())
	f.Add(valid)
	f.Add(k.SignMediaToken(testMediaClaims()))
	f.Add("")
	f.Add("rtc_pt_.")
	f.Add(valid[:len(valid)-1])
	f.Add(strings.Replace(valid, ".", "..", 1))
	v := k.MediaVerifier()
	f.Fuzz(func(t *testing.T, token string) {
		// Failing here means a panic, or an error other than the two
		// documented ones.
		c, err := k.VerifyParticipantToken(token, testNow)
		if err != nil && err != ErrTokenInvalid && err != ErrTokenExpired {
			t.Fatalf("unexpected error %v", err)
		}
		// Encodings are canonical, so anything accepted must be exactly
		// what we would sign for the same claims.
		if err == nil && k.SignParticipantToken(c) != token {
			t.Fatalf("accepted non-canonical token %q", token)
		}
		if _, err := v.Verify(token, testNow); err != nil && err != ErrTokenInvalid && err != ErrTokenExpired {
			t.Fatalf("media: unexpected error %v", err)
		}
	})
}

func BenchmarkVerifyParticipantToken(b *testing.B) {
	k := testKeys(b, 1)
	token := k.SignParticipantToken(testParticipantClaims())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.VerifyParticipantToken(token, testNow); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSignParticipantToken(b *testing.B) {
	k := testKeys(b, 1)
	c := testParticipantClaims()
	b.ReportAllocs()
	for b.Loop() {
		_ = k.SignParticipantToken(c)
	}
}

// TestPooledMACMatchesHMAC: the pooled MAC states give exactly what a fresh
// hmac.New gives, for pooled keys, keys past the pool bound, and under
// concurrent use.
func TestPooledMACMatchesHMAC(t *testing.T) {
	fresh := func(key, msg []byte) [32]byte {
		var out [32]byte
		m := hmac.New(sha256.New, key)
		m.Write(msg)
		m.Sum(out[:0])
		return out
	}
	var wg sync.WaitGroup
	for k := 0; k < maxPooledMACKeys+8; k++ {
		key := []byte(fmt.Sprintf("key-%03d-%s", k, strings.Repeat("x", k)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				msg := []byte(fmt.Sprintf("message %d", i))
				if got, want := hmacSHA256(key, msg), fresh(key, msg); got != want {
					t.Errorf("key %q message %q: pooled MAC differs", key, msg)
					return
				}
			}
		}()
	}
	wg.Wait()
}
