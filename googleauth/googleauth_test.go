package googleauth

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/oauth2-proxy/mockoidc"
	"golang.org/x/oauth2"
)

// testRedirectURL is never fetched: the test browser does not follow the
// provider's redirect, it only reads code and state from it.
const testRedirectURL = "https://dashboard.example.test/auth/callback"

var testStateKey = sha256.Sum256([]byte("googleauth test state key"))

// startMock runs an in-process mockoidc provider on 127.0.0.1 for one test.
func startMock(t *testing.T) *mockoidc.MockOIDC {
	t.Helper()
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatalf("mockoidc.Run: %v", err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

// newProvider returns a Provider configured for m; mutate may change the
// config before New.
func newProvider(t *testing.T, m *mockoidc.MockOIDC, mutate func(*Config)) *Provider {
	t.Helper()
	cfg := Config{
		Issuer:       m.Issuer(),
		ClientID:     m.ClientID,
		ClientSecret: m.ClientSecret,
		RedirectURL:  testRedirectURL,
		StateKey:     testStateKey,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// randomState returns a fresh 43-character state, as a dashboard would.
func randomState(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// authorize plays the browser at the provider: it GETs authURL without
// following the redirect back to the dashboard and returns the code and
// state that the redirect carries.
func authorize(t *testing.T, authURL string) (code, state string) {
	t.Helper()
	browser := &http.Client{
		Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	resp, err := browser.Get(authURL)
	if err != nil {
		t.Fatalf("GET authorize: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("authorize answered %d, want 302: %s", resp.StatusCode, body)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatalf("parse Location: %v", err)
	}
	if got := loc.Scheme + "://" + loc.Host + loc.Path; got != testRedirectURL {
		t.Fatalf("redirected to %q, want %q", got, testRedirectURL)
	}
	code = loc.Query().Get("code")
	if code == "" {
		t.Fatalf("redirect has no code: %s", loc)
	}
	return code, loc.Query().Get("state")
}

// signIn runs the whole flow for state and returns what Exchange returns.
func signIn(t *testing.T, p *Provider, state string) (Identity, error) {
	t.Helper()
	ctx := context.Background()
	authURL, err := p.AuthURL(ctx, state)
	if err != nil {
		t.Fatalf("AuthURL: %v", err)
	}
	code, gotState := authorize(t, authURL)
	if gotState != state {
		t.Fatalf("provider returned state %q, want %q", gotState, state)
	}
	return p.Exchange(ctx, code, state)
}

// roundTripFunc lets a test stand between the Provider and mockoidc.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func jsonResponse(r *http.Request, status int, body []byte) *http.Response {
	return &http.Response{
		StatusCode: status,
		Status:     http.StatusText(status),
		Header:     http.Header{"Content-Type": []string{"application/json"}},
		Body:       io.NopCloser(bytes.NewReader(body)),
		Request:    r,
	}
}

func assertIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want errors.Is(%v)", err, target)
	}
}

func TestValidState(t *testing.T) {
	cases := []struct {
		name  string
		state string
		want  bool
	}{
		{"empty", "", false},
		{"one short", strings.Repeat("a", minStateLen-1), false},
		{"shortest", strings.Repeat("a", minStateLen), true},
		{"longest", strings.Repeat("Z", maxStateLen), true},
		{"one long", strings.Repeat("Z", maxStateLen+1), false},
		{"unreserved punctuation", "abcXYZ019-._~abcd", true},
		{"space", "abcdefgh ijklmnop", false},
		{"plus", "abcdefgh+ijklmnop", false},
		{"slash", "abcdefgh/ijklmnop", false},
		{"percent", "abcdefgh%20jklmnop", false},
		{"NUL", "abcdefgh\x00ijklmnop", false},
		{"non-ASCII", "abcdefghé1234567", false},
	}
	for _, tc := range cases {
		if got := ValidState(tc.state); got != tc.want {
			t.Errorf("%s: ValidState(%q) = %v, want %v", tc.name, tc.state, got, tc.want)
		}
	}
}

func TestNewValidatesConfig(t *testing.T) {
	valid := Config{
		ClientID:     "client",
		ClientSecret: "secret",
		RedirectURL:  testRedirectURL,
		StateKey:     testStateKey,
	}
	if _, err := New(valid); err != nil {
		t.Fatalf("New(valid config) = %v", err)
	}
	cases := []struct {
		name   string
		mutate func(*Config)
	}{
		{"no ClientID", func(c *Config) { c.ClientID = "" }},
		{"no ClientSecret", func(c *Config) { c.ClientSecret = "" }},
		{"no RedirectURL", func(c *Config) { c.RedirectURL = "" }},
		{"relative RedirectURL", func(c *Config) { c.RedirectURL = "/auth/callback" }},
		{"RedirectURL without host", func(c *Config) { c.RedirectURL = "https:///auth/callback" }},
		{"non-http RedirectURL", func(c *Config) { c.RedirectURL = "javascript:alert(1)" }},
		{"bad Issuer", func(c *Config) { c.Issuer = "accounts.google.com" }},
		{"zero StateKey", func(c *Config) { c.StateKey = [32]byte{} }},
	}
	for _, tc := range cases {
		cfg := valid
		tc.mutate(&cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New succeeded, want an error", tc.name)
		} else if strings.Contains(err.Error(), valid.ClientSecret) {
			t.Errorf("%s: error %q contains the client secret", tc.name, err)
		}
	}
}

func TestNewDoesNotContactProvider(t *testing.T) {
	var requests atomic.Int32
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		requests.Add(1)
		return nil, errors.New("no network in this test")
	})}
	p, err := New(Config{
		ClientID:     "client",
		ClientSecret: "secret",
		RedirectURL:  testRedirectURL,
		StateKey:     testStateKey,
		HTTPClient:   client,
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.issuer != googleIssuer {
		t.Errorf("issuer = %q, want the default %q", p.issuer, googleIssuer)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("New made %d requests, want 0", n)
	}
	// Sanity check that this client is the one used later on.
	_, err = p.AuthURL(context.Background(), randomState(t))
	assertIs(t, err, ErrUnavailable)
	if n := requests.Load(); n != 1 {
		t.Errorf("AuthURL made %d requests, want 1 (discovery)", n)
	}
}

func TestSignIn(t *testing.T) {
	m := startMock(t)
	m.QueueUser(&mockoidc.MockUser{
		Subject:       "google-sub-42",
		Email:         "Alice.Example@Example.COM",
		EmailVerified: true,
	})
	p := newProvider(t, m, nil)
	state := randomState(t)

	authURL, err := p.AuthURL(context.Background(), state)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(authURL)
	if err != nil {
		t.Fatal(err)
	}
	if got := u.Scheme + "://" + u.Host + u.Path; got != m.AuthorizationEndpoint() {
		t.Errorf("AuthURL points at %q, want %q", got, m.AuthorizationEndpoint())
	}
	q := u.Query()
	verifier := p.derive(pkceLabel, state)
	if len(verifier) != 43 {
		t.Errorf("verifier has %d chars, want 43", len(verifier))
	}
	want := map[string]string{
		"client_id":             m.ClientID,
		"redirect_uri":          testRedirectURL,
		"response_type":         "code",
		"scope":                 "openid email profile",
		"state":                 state,
		"nonce":                 p.derive(nonceLabel, state),
		"code_challenge_method": "S256",
		"code_challenge":        oauth2.S256ChallengeFromVerifier(verifier),
	}
	for k, v := range want {
		if got := q.Get(k); got != v {
			t.Errorf("AuthURL %s = %q, want %q", k, got, v)
		}
	}
	if q.Get("nonce") == verifier || strings.Contains(authURL, verifier) {
		t.Error("the PKCE verifier leaks into the authorization URL")
	}

	code, gotState := authorize(t, authURL)
	if gotState != state {
		t.Fatalf("state = %q, want %q", gotState, state)
	}
	id, err := p.Exchange(context.Background(), code, state)
	if err != nil {
		t.Fatalf("Exchange: %v", err)
	}
	wantID := Identity{
		Subject:       "google-sub-42",
		Email:         "alice.example@example.com",
		EmailVerified: true,
		Name:          "", // mockoidc's MockUser emits no "name" claim
	}
	if id != wantID {
		t.Errorf("identity = %+v, want %+v", id, wantID)
	}

	// A second sign-in reuses the cached discovery and key set.
	m.QueueUser(&mockoidc.MockUser{Subject: "google-sub-43", Email: "bob@example.com"})
	id, err = signIn(t, p, randomState(t))
	if err != nil {
		t.Fatalf("second sign-in: %v", err)
	}
	// mockoidc omits email_verified when false (omitempty).
	if id.Email != "bob@example.com" || id.EmailVerified {
		t.Errorf("second identity = %+v, want bob@example.com, not verified", id)
	}
}

func TestIdentityFromClaims(t *testing.T) {
	cases := []struct {
		name    string
		subject string
		claims  string
		want    Identity
		wantErr error
	}{
		{"bool true", "s1", `{"email":"A@B.example","email_verified":true,"name":"Ann B"}`,
			Identity{Subject: "s1", Email: "a@b.example", EmailVerified: true, Name: "Ann B"}, nil},
		{"string true", "s1", `{"email":"a@b.example","email_verified":"true"}`,
			Identity{Subject: "s1", Email: "a@b.example", EmailVerified: true}, nil},
		{"string false", "s1", `{"email":"a@b.example","email_verified":"false"}`,
			Identity{Subject: "s1", Email: "a@b.example"}, nil},
		{"string TRUE is not true", "s1", `{"email":"a@b.example","email_verified":"TRUE"}`,
			Identity{Subject: "s1", Email: "a@b.example"}, nil},
		{"bool false", "s1", `{"email":"a@b.example","email_verified":false}`,
			Identity{Subject: "s1", Email: "a@b.example"}, nil},
		{"absent", "s1", `{"email":"a@b.example"}`,
			Identity{Subject: "s1", Email: "a@b.example"}, nil},
		{"number", "s1", `{"email":"a@b.example","email_verified":1}`,
			Identity{Subject: "s1", Email: "a@b.example"}, nil},
		{"no email", "s1", `{"email_verified":true}`, Identity{}, ErrRejected},
		{"empty email", "s1", `{"email":""}`, Identity{}, ErrRejected},
		{"no subject", "", `{"email":"a@b.example"}`, Identity{}, ErrRejected},
	}
	for _, tc := range cases {
		var c idClaims
		if err := json.Unmarshal([]byte(tc.claims), &c); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, err := identityFromClaims(tc.subject, c)
		if tc.wantErr != nil {
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("%s: error = %v, want %v", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestExchangeRejectsWrongNonce(t *testing.T) {
	m := startMock(t)
	p := newProvider(t, m, nil)
	state := randomState(t)
	authURL, err := p.AuthURL(context.Background(), state)
	if err != nil {
		t.Fatal(err)
	}
	// Same state, so PKCE still matches at the provider; only the nonce
	// in the ID token differs from the one derived from state.
	u, _ := url.Parse(authURL)
	q := u.Query()
	q.Set("nonce", p.derive(nonceLabel, randomState(t)))
	u.RawQuery = q.Encode()

	code, _ := authorize(t, u.String())
	_, err = p.Exchange(context.Background(), code, state)
	assertIs(t, err, ErrRejected)
	if !strings.Contains(err.Error(), "nonce") {
		t.Errorf("error = %v, want the nonce check to fail", err)
	}
}

func TestExchangeRejectsCodeFromAnotherState(t *testing.T) {
	m := startMock(t)
	p := newProvider(t, m, nil)
	authURL, err := p.AuthURL(context.Background(), randomState(t))
	if err != nil {
		t.Fatal(err)
	}
	code, _ := authorize(t, authURL)
	// The browser's state differs (login CSRF / code injection): the
	// derived PKCE verifier is wrong, so mockoidc refuses the code.
	_, err = p.Exchange(context.Background(), code, randomState(t))
	assertIs(t, err, ErrRejected)
	if !strings.Contains(err.Error(), "invalid_grant") {
		t.Errorf("error = %v, want the token endpoint's invalid_grant (PKCE)", err)
	}
}

func TestExchangeRejectsReusedCodeWithoutLeaking(t *testing.T) {
	m := startMock(t)
	m.QueueCode("reused-code-4f1b9c")
	p := newProvider(t, m, nil)
	state := randomState(t)
	if _, err := signIn(t, p, state); err != nil {
		t.Fatalf("first sign-in: %v", err)
	}
	_, err := p.Exchange(context.Background(), "reused-code-4f1b9c", state)
	assertIs(t, err, ErrRejected)
	// mockoidc echoes the code in its error_description.
	for _, secret := range []string{"reused-code-4f1b9c", m.ClientSecret, p.derive(pkceLabel, state)} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q leaks %q", err, secret)
		}
	}
}

func TestExchangeRejectsEmptyCode(t *testing.T) {
	m := startMock(t)
	p := newProvider(t, m, nil)
	_, err := p.Exchange(context.Background(), "", randomState(t))
	assertIs(t, err, ErrRejected)
}

func TestExchangeRejectsWrongAudience(t *testing.T) {
	// mockoidc checks client_id at both endpoints and always issues
	// aud = its own ClientID, so an ID token for another audience needs
	// a provider that accepts our client_id but names someone else in the
	// token. The middleware makes it so: it swaps our client_id for
	// mockoidc's before the handlers see it.
	const ourClientID = "dashboard-other-client"
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	var tokenAnswered atomic.Int32
	err = m.AddMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := r.ParseForm(); err == nil && r.Form.Get("client_id") == ourClientID {
				r.Form.Set("client_id", m.ClientID)
				if r.PostForm != nil && r.PostForm.Get("client_id") != "" {
					r.PostForm.Set("client_id", m.ClientID)
				}
			}
			if r.URL.Path == mockoidc.TokenEndpoint {
				tokenAnswered.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })

	// Control: the same server and flow with the right ClientID works.
	if _, err := signIn(t, newProvider(t, m, nil), randomState(t)); err != nil {
		t.Fatalf("sign-in with mockoidc's ClientID: %v", err)
	}

	p := newProvider(t, m, func(c *Config) { c.ClientID = ourClientID })
	_, err = signIn(t, p, randomState(t))
	assertIs(t, err, ErrRejected)
	if !strings.Contains(err.Error(), "expected audience") {
		t.Errorf("error = %v, want the audience check to fail", err)
	}
	if n := tokenAnswered.Load(); n != 2 {
		t.Errorf("token endpoint was called %d times, want 2 (once per sign-in)", n)
	}
}

func TestExchangeRejectsExpiredToken(t *testing.T) {
	m := startMock(t)
	now := time.Now()
	p := newProvider(t, m, func(c *Config) {
		// Only the test goroutine calls Exchange, so a plain variable is
		// enough for the injected clock.
		c.Now = func() time.Time { return now }
	})
	state := randomState(t)
	authURL, err := p.AuthURL(context.Background(), state)
	if err != nil {
		t.Fatal(err)
	}
	code, _ := authorize(t, authURL)

	// mockoidc's ID token lives AccessTTL from its own clock.
	now = m.Now().Add(m.AccessTTL + time.Second)
	_, err = p.Exchange(context.Background(), code, state)
	assertIs(t, err, ErrRejected)
	var expired *oidc.TokenExpiredError
	if !errors.As(err, &expired) {
		t.Errorf("error = %v, want an *oidc.TokenExpiredError inside", err)
	}
}

func TestExchangeRejectsMissingEmail(t *testing.T) {
	m := startMock(t)
	m.QueueUser(&mockoidc.MockUser{Subject: "no-email"})
	_, err := signIn(t, newProvider(t, m, nil), randomState(t))
	assertIs(t, err, ErrRejected)
	if !strings.Contains(err.Error(), "email") {
		t.Errorf("error = %v, want a missing-email error", err)
	}
}

func TestExchangeRejectsMissingIDToken(t *testing.T) {
	m := startMock(t)
	p := newProvider(t, m, nil)
	state := randomState(t)
	authURL, err := p.AuthURL(context.Background(), state)
	if err != nil {
		t.Fatal(err)
	}
	// mockoidc issues an id_token only when the first scope is "openid".
	u, _ := url.Parse(authURL)
	q := u.Query()
	q.Set("scope", "email openid profile")
	u.RawQuery = q.Encode()
	code, _ := authorize(t, u.String())
	_, err = p.Exchange(context.Background(), code, state)
	assertIs(t, err, ErrRejected)
	if !strings.Contains(err.Error(), "id_token") {
		t.Errorf("error = %v, want a missing id_token error", err)
	}
}

func TestExchangeRejectsBadSignature(t *testing.T) {
	m := startMock(t)
	// The key endpoint serves another public key under mockoidc's key id,
	// so the signature check itself fails.
	other, err := mockoidc.RandomKeypair(2048)
	if err != nil {
		t.Fatal(err)
	}
	if other.Kid, err = m.Keypair.KeyID(); err != nil {
		t.Fatal(err)
	}
	otherJWKS, err := other.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(transport.CloseIdleConnections)
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Path == mockoidc.JWKSEndpoint {
			return jsonResponse(r, http.StatusOK, otherJWKS), nil
		}
		return transport.RoundTrip(r)
	})}
	p := newProvider(t, m, func(c *Config) { c.HTTPClient = client })
	_, err = signIn(t, p, randomState(t))
	assertIs(t, err, ErrRejected)
	if !strings.Contains(err.Error(), "signature") {
		t.Errorf("error = %v, want a signature error", err)
	}
}

func TestExchangeUnavailableWhenKeysCannotBeFetched(t *testing.T) {
	cases := []struct {
		name   string
		answer func(*http.Request) (*http.Response, error)
	}{
		{"network error", func(*http.Request) (*http.Response, error) {
			return nil, errors.New("connection reset by test")
		}},
		{"503", func(r *http.Request) (*http.Response, error) {
			return jsonResponse(r, http.StatusServiceUnavailable, []byte(`{}`)), nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := startMock(t)
			transport := http.DefaultTransport.(*http.Transport).Clone()
			t.Cleanup(transport.CloseIdleConnections)
			var keysDown atomic.Bool
			keysDown.Store(true)
			client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if r.URL.Path == mockoidc.JWKSEndpoint && keysDown.Load() {
					return tc.answer(r)
				}
				return transport.RoundTrip(r)
			})}
			p := newProvider(t, m, func(c *Config) { c.HTTPClient = client })
			_, err := signIn(t, p, randomState(t))
			assertIs(t, err, ErrUnavailable)
			if errors.Is(err, ErrRejected) {
				t.Errorf("error = %v is both unavailable and rejected", err)
			}

			// Once the key endpoint is back, the next sign-in works.
			keysDown.Store(false)
			if _, err := signIn(t, p, randomState(t)); err != nil {
				t.Fatalf("sign-in after keys came back: %v", err)
			}
		})
	}
}

func TestExchangeUnavailableOnTokenEndpoint5xx(t *testing.T) {
	m := startMock(t)
	p := newProvider(t, m, nil)
	state := randomState(t)
	authURL, err := p.AuthURL(context.Background(), state)
	if err != nil {
		t.Fatal(err)
	}
	code, _ := authorize(t, authURL)
	// Discovery is cached, so the next request mockoidc handles is the
	// token request.
	m.QueueError(&mockoidc.ServerError{
		Code:        http.StatusInternalServerError,
		Error:       mockoidc.InternalServerError,
		Description: "test outage",
	})
	_, err = p.Exchange(context.Background(), code, state)
	assertIs(t, err, ErrUnavailable)

	// The failed attempt did not use the code up.
	if _, err := p.Exchange(context.Background(), code, state); err != nil {
		t.Fatalf("Exchange after the outage: %v", err)
	}
}

func TestInvalidStateIsCheckedFirst(t *testing.T) {
	var requests atomic.Int32
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		requests.Add(1)
		return nil, errors.New("no network in this test")
	})}
	p, err := New(Config{
		ClientID:     "client",
		ClientSecret: "secret",
		RedirectURL:  testRedirectURL,
		StateKey:     testStateKey,
		HTTPClient:   client,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, state := range []string{"", "short", "has space in it ok", strings.Repeat("a", maxStateLen+1)} {
		_, err := p.AuthURL(context.Background(), state)
		assertIs(t, err, ErrInvalidState)
		_, err = p.Exchange(context.Background(), "some-code", state)
		assertIs(t, err, ErrInvalidState)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("made %d requests for invalid states, want 0", n)
	}
}

func TestUnreachableIssuer(t *testing.T) {
	// A port that was just free and is now closed: connections are refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{
		Issuer:       "http://" + addr + "/oidc",
		ClientID:     "client",
		ClientSecret: "secret",
		RedirectURL:  testRedirectURL,
		StateKey:     testStateKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	state := randomState(t)
	_, err = p.AuthURL(context.Background(), state)
	assertIs(t, err, ErrUnavailable)
	_, err = p.Exchange(context.Background(), "some-code", state)
	assertIs(t, err, ErrUnavailable)
}

func TestDiscoveryRetriedUntilItSucceeds(t *testing.T) {
	m := startMock(t)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(transport.CloseIdleConnections)
	var down atomic.Bool
	var discoveries atomic.Int32
	down.Store(true)
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if down.Load() {
			return nil, errors.New("provider down in this test")
		}
		if r.URL.Path == mockoidc.DiscoveryEndpoint {
			discoveries.Add(1)
		}
		return transport.RoundTrip(r)
	})}
	p := newProvider(t, m, func(c *Config) { c.HTTPClient = client })

	_, err := p.AuthURL(context.Background(), randomState(t))
	assertIs(t, err, ErrUnavailable)

	down.Store(false)
	if _, err := signIn(t, p, randomState(t)); err != nil {
		t.Fatalf("sign-in once the provider is back: %v", err)
	}
	if _, err := signIn(t, p, randomState(t)); err != nil {
		t.Fatalf("second sign-in: %v", err)
	}
	if n := discoveries.Load(); n != 1 {
		t.Errorf("discovery fetched %d times after recovery, want 1 (cached)", n)
	}
}

func TestDiscoveryFailureStatusIsUnavailable(t *testing.T) {
	m := startMock(t)
	m.QueueError(&mockoidc.ServerError{
		Code:        http.StatusBadGateway,
		Error:       mockoidc.InternalServerError,
		Description: "test outage",
	})
	p := newProvider(t, m, nil)
	_, err := p.AuthURL(context.Background(), randomState(t))
	assertIs(t, err, ErrUnavailable)
	if _, err := signIn(t, p, randomState(t)); err != nil {
		t.Fatalf("sign-in after the outage: %v", err)
	}
}
