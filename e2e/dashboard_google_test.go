package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"
	"rtcd/clock"
)

// Google sign-in end to end: the real server against an in-process
// mockoidc provider. The test plays the browser: it asks the server for the
// provider URL, GETs it without following the redirect back to the
// dashboard, and hands the code and state to POST /v1/auth/google.
//
// mockoidc keeps one queue of users and is not safe for concurrent logins,
// so each test runs its own instance and logs in one user at a time.

// ggStart runs a mockoidc provider and a server with Google sign-in
// pointing at it. The fake clock starts at the real now: mockoidc signs its
// ID tokens with real time, and the server checks their expiry with its
// clock.
func ggStart(t *testing.T) (*env, *mockoidc.MockOIDC) {
	t.Helper()
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatalf("mockoidc.Run: %v", err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	e := startIn(t, t.TempDir(), clock.NewFake(time.Now()),
		"--google-client-id="+m.ClientID,
		"--google-client-secret="+m.ClientSecret,
		"--google-issuer="+m.Issuer())
	return e, m
}

// ggState returns a fresh random state, as a dashboard would bind to the
// browser.
func ggState(t *testing.T) string {
	t.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// ggAuthURL asks the server for the provider URL of state.
func (e *env) ggAuthURL(state string) string {
	e.t.Helper()
	r := e.do("GET", "/v1/auth/google/url?state="+url.QueryEscape(state), "", nil).must(e.t, 200)
	if r.Str("object") != "google_authorization_url" {
		e.t.Fatalf("object = %q, want google_authorization_url: %s", r.Str("object"), r.Raw)
	}
	u := r.Str("url")
	if u == "" {
		e.t.Fatalf("no url: %s", r.Raw)
	}
	return u
}

// ggBrowser never follows redirects: the redirect goes to the dashboard's
// callback page, which the test reads instead of fetching.
var ggBrowser = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// ggAuthorize signs user in at the provider for a login started with state
// and returns the authorization code the provider redirects back with.
func (e *env) ggAuthorize(m *mockoidc.MockOIDC, state string, user *mockoidc.MockUser) string {
	e.t.Helper()
	m.QueueUser(user)
	res, err := ggBrowser.Get(e.ggAuthURL(state))
	if err != nil {
		e.t.Fatalf("GET authorize: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusFound {
		e.t.Fatalf("authorize answered %d, want 302: %s", res.StatusCode, body)
	}
	loc, err := url.Parse(res.Header.Get("Location"))
	if err != nil {
		e.t.Fatalf("Location: %v", err)
	}
	if want := e.Base + "/sign-in/google"; loc.Scheme+"://"+loc.Host+loc.Path != want {
		e.t.Fatalf("redirected to %s, want the dashboard callback %s", loc, want)
	}
	if got := loc.Query().Get("state"); got != state {
		e.t.Fatalf("redirect state = %q, want %q", got, state)
	}
	code := loc.Query().Get("code")
	if code == "" {
		e.t.Fatalf("redirect has no code: %s", loc)
	}
	return code
}

// ggSignIn posts code and state (and an invitation token unless "") to
// POST /v1/auth/google.
func (e *env) ggSignIn(code, state, invitationToken string) *resp {
	e.t.Helper()
	body := map[string]any{"code": code, "state": state}
	if invitationToken != "" {
		body["invitation_token"] = invitationToken
	}
	return e.do("POST", "/v1/auth/google", "", body)
}

// ggMustFail asserts an error response's status and code.
func ggMustFail(t *testing.T, r *resp, status int, code string) {
	t.Helper()
	if r.Status != status || r.ErrCode() != code {
		t.Fatalf("got %d %q, want %d %s: %s", r.Status, r.ErrCode(), status, code, r.Raw)
	}
}

// ggDetail returns a string from the error envelope's details.
func ggDetail(r *resp, key string) string {
	e, _ := r.JSON["error"].(map[string]any)
	d, _ := e["details"].(map[string]any)
	s, _ := d[key].(string)
	return s
}

// ggProviders returns GET /v1/auth/providers.
func (e *env) ggProviders() []string {
	e.t.Helper()
	r := e.do("GET", "/v1/auth/providers", "", nil).must(e.t, 200)
	if r.Str("object") != "auth_providers" {
		e.t.Fatalf("object = %q: %s", r.Str("object"), r.Raw)
	}
	arr, _ := r.JSON["providers"].([]any)
	out := make([]string, 0, len(arr))
	for _, v := range arr {
		s, _ := v.(string)
		out = append(out, s)
	}
	return out
}

// ggAccounts returns the workspaces of GET /v1/me.
func (e *env) ggAccounts(session string) []map[string]any {
	e.t.Helper()
	arr, _ := e.me(session).JSON["accounts"].([]any)
	out := make([]map[string]any, 0, len(arr))
	for _, v := range arr {
		a, _ := v.(map[string]any)
		out = append(out, a)
	}
	return out
}

func ggUserField(r *resp, field string) string {
	u, _ := r.JSON["user"].(map[string]any)
	s, _ := u[field].(string)
	return s
}

func TestDashboardGoogleOffWithoutFlags(t *testing.T) {
	e := start(t)
	if got := e.ggProviders(); strings.Join(got, ",") != "email" {
		t.Fatalf("providers = %v, want [email]", got)
	}
	r := e.do("GET", "/v1/auth/google/url?state="+ggState(t), "", nil)
	ggMustFail(t, r, 404, "invalid_request")
	if ggDetail(r, "reason") != "provider_not_enabled" {
		t.Fatalf("reason = %q, want provider_not_enabled: %s", ggDetail(r, "reason"), r.Raw)
	}
	r = e.do("POST", "/v1/auth/google", "", map[string]any{"code": "abc", "state": ggState(t)})
	ggMustFail(t, r, 404, "invalid_request")
	if ggDetail(r, "reason") != "provider_not_enabled" {
		t.Fatalf("POST reason = %q, want provider_not_enabled: %s", ggDetail(r, "reason"), r.Raw)
	}
}

func TestDashboardGoogleAuthorizationURL(t *testing.T) {
	e, m := ggStart(t)
	if got := e.ggProviders(); strings.Join(got, ",") != "email,google" {
		t.Fatalf("providers = %v, want [email google]", got)
	}

	state := ggState(t)
	u, err := url.Parse(e.ggAuthURL(state))
	if err != nil {
		t.Fatal(err)
	}
	if got := u.Scheme + "://" + u.Host + u.Path; got != m.AuthorizationEndpoint() {
		t.Fatalf("url points at %s, want the provider's authorize endpoint %s", got, m.AuthorizationEndpoint())
	}
	q := u.Query()
	if q.Get("state") != state {
		t.Errorf("state = %q, want %q", q.Get("state"), state)
	}
	if q.Get("client_id") != m.ClientID {
		t.Errorf("client_id = %q, want %q", q.Get("client_id"), m.ClientID)
	}
	if q.Get("response_type") != "code" {
		t.Errorf("response_type = %q, want code", q.Get("response_type"))
	}
	if q.Get("redirect_uri") != e.Base+"/sign-in/google" {
		t.Errorf("redirect_uri = %q, want %s/sign-in/google", q.Get("redirect_uri"), e.Base)
	}
	if !strings.Contains(" "+q.Get("scope")+" ", " openid ") || !strings.Contains(" "+q.Get("scope")+" ", " email ") {
		t.Errorf("scope = %q, want openid and email", q.Get("scope"))
	}
	if q.Get("nonce") == "" {
		t.Error("no nonce")
	}
	if q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256" {
		t.Errorf("code_challenge = %q, method = %q, want an S256 challenge", q.Get("code_challenge"), q.Get("code_challenge_method"))
	}
	if strings.Contains(u.String(), m.ClientSecret) {
		t.Error("the URL carries the client secret")
	}
	// The nonce and challenge are derived from the state: the same state
	// gives the same URL, another state another nonce and challenge.
	if again := e.ggAuthURL(state); again != u.String() {
		t.Errorf("same state, different URL:\n%s\n%s", u, again)
	}
	other, _ := url.Parse(e.ggAuthURL(ggState(t)))
	if other.Query().Get("nonce") == q.Get("nonce") || other.Query().Get("code_challenge") == q.Get("code_challenge") {
		t.Error("another state gave the same nonce or code challenge")
	}
	if q.Get("nonce") == q.Get("code_challenge") || q.Get("nonce") == state {
		t.Error("nonce is not independent of the state and the challenge")
	}

	for name, bad := range map[string]string{
		"missing":     "",
		"too short":   "abcdefghijklmno", // 15
		"bad char":    "abcdefgh+ijklmnopq",
		"space":       "abcdefgh ijklmnopq",
		"slash":       "abcdefgh/ijklmnopq",
		"too long":    strings.Repeat("a", 513),
		"non-ascii":   "abcdefghé1234567",
		"percent-enc": "abcdefgh%ijklmnopq",
	} {
		path := "/v1/auth/google/url"
		if name != "missing" {
			path += "?state=" + url.QueryEscape(bad)
		}
		r := e.do("GET", path, "", nil)
		if r.Status != 400 || r.ErrCode() != "invalid_request" || ggDetail(r, "field") != "state" {
			t.Errorf("%s: got %d %q field %q, want 400 invalid_request field state: %s", name, r.Status, r.ErrCode(), ggDetail(r, "field"), r.Raw)
		}
	}
	// The shortest and the longest valid states are accepted.
	e.ggAuthURL(strings.Repeat("a", 16))
	e.ggAuthURL(strings.Repeat("Z", 512))
}

func TestDashboardGoogleSignIn(t *testing.T) {
	e, m := ggStart(t)
	user := &mockoidc.MockUser{Subject: "google-sub-ada-1", Email: "Ada@Example.com", EmailVerified: true}

	state := ggState(t)
	code := e.ggAuthorize(m, state, user)
	r := e.ggSignIn(code, state, "").must(t, 200)
	if r.Str("object") != "session" {
		t.Fatalf("object = %q: %s", r.Str("object"), r.Raw)
	}
	session := r.Str("token")
	if !strings.HasPrefix(session, "rtc_us_") {
		t.Fatalf("session token %q lacks rtc_us_", session)
	}
	if got := ggUserField(r, "email"); got != "ada@example.com" {
		t.Fatalf("user email = %q, want the provider's address lowercased", got)
	}
	userID := ggUserField(r, "id")
	if userID == "" {
		t.Fatalf("no user id: %s", r.Raw)
	}
	if r.JSON["joined_account"] != nil {
		t.Errorf("joined_account = %v without an invitation", r.JSON["joined_account"])
	}
	created, _ := r.JSON["created_account"].(map[string]any)
	if created == nil || created["role"] != "owner" {
		t.Errorf("created_account = %v, want a new workspace owned by the user", r.JSON["created_account"])
	}

	// The new user has a workspace of their own.
	accts := e.ggAccounts(session)
	if len(accts) != 1 || accts[0]["role"] != "owner" {
		t.Fatalf("accounts = %v, want one workspace with role owner", accts)
	}
	if accts[0]["id"] == e.Boot.AccountID {
		t.Fatal("a new Google user landed in the bootstrap workspace")
	}
	if created != nil && created["id"] != accts[0]["id"] {
		t.Errorf("created_account %v is not the workspace GET /v1/me shows (%v)", created["id"], accts[0]["id"])
	}
	if me := e.me(session); ggUserField(me, "id") != userID {
		t.Fatalf("GET /v1/me user id = %q, want %q", ggUserField(me, "id"), userID)
	}

	// The same code again: the provider refuses it.
	ggMustFail(t, e.ggSignIn(code, state, ""), 401, "authentication_failed")

	// Signing in again with the same subject: the same user, no new workspace.
	state2 := ggState(t)
	r2 := e.ggSignIn(e.ggAuthorize(m, state2, user), state2, "").must(t, 200)
	if got := ggUserField(r2, "id"); got != userID {
		t.Fatalf("second sign-in user id = %q, want %q", got, userID)
	}
	if r2.JSON["created_account"] != nil {
		t.Errorf("second sign-in created_account = %v, want null", r2.JSON["created_account"])
	}
	session2 := r2.Str("token")
	if session2 == session || !strings.HasPrefix(session2, "rtc_us_") {
		t.Fatalf("second session token %q: want a new rtc_us_ token", session2)
	}
	if accts := e.ggAccounts(session2); len(accts) != 1 || accts[0]["role"] != "owner" {
		t.Fatalf("after the second sign-in accounts = %v, want the one workspace", accts)
	}
	// Both sessions work.
	e.me(session)

	// Missing or empty code: 400 before the provider is asked.
	for _, body := range []map[string]any{
		{"state": ggState(t)},
		{"code": "", "state": ggState(t)},
		{"code": strings.Repeat("c", 2049), "state": ggState(t)},
	} {
		r := e.do("POST", "/v1/auth/google", "", body)
		if r.Status != 400 || r.ErrCode() != "invalid_request" || ggDetail(r, "field") != "code" {
			t.Errorf("%v: got %d %q field %q, want 400 invalid_request field code: %s", body, r.Status, r.ErrCode(), ggDetail(r, "field"), r.Raw)
		}
	}
	// Missing or malformed state: 400.
	for _, body := range []map[string]any{
		{"code": "abc"},
		{"code": "abc", "state": "short"},
		{"code": "abc", "state": "abcdefgh ijklmnopq"},
	} {
		r := e.do("POST", "/v1/auth/google", "", body)
		if r.Status != 400 || r.ErrCode() != "invalid_request" || ggDetail(r, "field") != "state" {
			t.Errorf("%v: got %d %q field %q, want 400 invalid_request field state: %s", body, r.Status, r.ErrCode(), ggDetail(r, "field"), r.Raw)
		}
	}
	// Not a JSON object, unknown fields: 400.
	ggMustFail(t, e.do("POST", "/v1/auth/google", "", nil), 400, "invalid_request")
	ggMustFail(t, e.do("POST", "/v1/auth/google", "", map[string]any{"code": "abc", "state": ggState(t), "extra": 1}), 400, "invalid_request")
}

func TestDashboardGoogleRejections(t *testing.T) {
	e, m := ggStart(t)

	// A code obtained for one state, redeemed with another: the PKCE
	// verifier (and the nonce) derived from the other state do not match.
	stateA, stateB := ggState(t), ggState(t)
	code := e.ggAuthorize(m, stateA, &mockoidc.MockUser{Subject: "sub-mallory", Email: "mallory@example.com", EmailVerified: true})
	ggMustFail(t, e.ggSignIn(code, stateB, ""), 401, "authentication_failed")

	// A code the provider never issued.
	ggMustFail(t, e.ggSignIn("not-a-code-the-provider-issued", ggState(t), ""), 401, "authentication_failed")

	// An address the provider has not verified.
	state := ggState(t)
	code = e.ggAuthorize(m, state, &mockoidc.MockUser{Subject: "sub-unverified", Email: "unverified@example.com", EmailVerified: false})
	ggMustFail(t, e.ggSignIn(code, state, ""), 401, "authentication_failed")

	// None of those created a user: signing in with e-mail as
	// unverified@example.com makes a brand-new user with a new workspace.
	r := e.signInResp("unverified@example.com", "")
	if created, _ := r.JSON["created_account"].(map[string]any); created == nil {
		t.Fatalf("the unverified Google sign-in left a user behind: e-mail sign-in created no workspace: %s", r.Raw)
	}
}

func TestDashboardGoogleSignInWithInvitation(t *testing.T) {
	e, m := ggStart(t)
	const invitee = "grace@example.com"

	owner := e.signIn(e.Boot.OwnerEmail)
	e.do("POST", "/v1/accounts/"+e.Boot.AccountID+"/invitations", owner,
		map[string]any{"email": invitee, "role": "member"}).must(t, 201)
	_, invitation := e.mailLink(invitee, "invitation_token")
	if !strings.HasPrefix(invitation, "rtc_inv_") {
		t.Fatalf("invitation token %q lacks rtc_inv_", invitation)
	}

	// Someone else holding the token does not get in: the invitation is
	// addressed to grace, and stays pending for her.
	state := ggState(t)
	code := e.ggAuthorize(m, state, &mockoidc.MockUser{Subject: "sub-eve", Email: "eve@example.com", EmailVerified: true})
	eve := e.ggSignIn(code, state, invitation).must(t, 200)
	if eve.JSON["joined_account"] != nil {
		t.Fatalf("a user the invitation is not addressed to joined %v", eve.JSON["joined_account"])
	}
	if accts := e.ggAccounts(eve.Str("token")); len(accts) != 1 || accts[0]["id"] == e.Boot.AccountID || accts[0]["role"] != "owner" {
		t.Fatalf("eve's accounts = %v, want only a workspace of her own", accts)
	}

	state = ggState(t)
	code = e.ggAuthorize(m, state, &mockoidc.MockUser{Subject: "sub-grace", Email: invitee, EmailVerified: true})
	r := e.ggSignIn(code, state, invitation).must(t, 200)
	joined, _ := r.JSON["joined_account"].(map[string]any)
	if joined == nil || joined["id"] != e.Boot.AccountID || joined["role"] != "member" {
		t.Fatalf("joined_account = %v, want the bootstrap workspace as member: %s", r.JSON["joined_account"], r.Raw)
	}
	if r.JSON["created_account"] != nil {
		t.Errorf("created_account = %v, want null: the invitation replaces a workspace of one's own", r.JSON["created_account"])
	}
	session := r.Str("token")
	accts := e.ggAccounts(session)
	if len(accts) != 1 || accts[0]["id"] != e.Boot.AccountID || accts[0]["role"] != "member" {
		t.Fatalf("accounts = %v, want only the inviting workspace, as member", accts)
	}

	// The invitation is used up: listed as accepted, and the owner sees the
	// new member.
	inv := e.do("GET", "/v1/accounts/"+e.Boot.AccountID+"/invitations", owner, nil).must(t, 200).Data()
	accepted := false
	for _, i := range inv {
		if i["email"] == invitee && i["status"] == "accepted" {
			accepted = true
		}
	}
	if !accepted {
		t.Errorf("invitations = %v, want %s accepted", inv, invitee)
	}
	members := e.do("GET", "/v1/accounts/"+e.Boot.AccountID+"/members", owner, nil).must(t, 200).Data()
	found := false
	for _, mb := range members {
		if mb["user_id"] == ggUserField(r, "id") {
			found = mb["email"] == invitee && mb["role"] == "member"
		}
	}
	if !found {
		t.Errorf("members = %v, want the Google user %s as member", members, ggUserField(r, "id"))
	}
}

func TestDashboardGoogleLinksExistingEmailUser(t *testing.T) {
	e, m := ggStart(t)
	// The bootstrap owner, known by e-mail, signs in with Google for the
	// first time: the same user, in the same workspace, and no new one.
	emailSession := e.signIn(e.Boot.OwnerEmail)
	ownerID := ggUserField(e.me(emailSession), "id")

	state := ggState(t)
	code := e.ggAuthorize(m, state, &mockoidc.MockUser{Subject: "sub-owner", Email: e.Boot.OwnerEmail, EmailVerified: true})
	r := e.ggSignIn(code, state, "").must(t, 200)
	if got := ggUserField(r, "id"); got != ownerID {
		t.Fatalf("Google sign-in as the owner's address gave user %q, want %q", got, ownerID)
	}
	if r.JSON["created_account"] != nil {
		t.Errorf("created_account = %v for an existing user", r.JSON["created_account"])
	}
	if acct, _ := e.firstAccount(r.Str("token")); acct != e.Boot.AccountID {
		t.Fatalf("owner's workspace via Google = %s, want %s", acct, e.Boot.AccountID)
	}
	if accts := e.ggAccounts(r.Str("token")); len(accts) != 1 || accts[0]["role"] != "owner" {
		t.Fatalf("accounts = %v, want the bootstrap workspace as owner", accts)
	}
	// Users are keyed on the subject: another Google account with the same
	// address (a reused address) does not get in.
	state = ggState(t)
	code = e.ggAuthorize(m, state, &mockoidc.MockUser{Subject: "sub-someone-else", Email: e.Boot.OwnerEmail, EmailVerified: true})
	ggMustFail(t, e.ggSignIn(code, state, ""), 401, "authentication_failed")
	// The linked subject still does.
	state = ggState(t)
	code = e.ggAuthorize(m, state, &mockoidc.MockUser{Subject: "sub-owner", Email: e.Boot.OwnerEmail, EmailVerified: true})
	if got := ggUserField(e.ggSignIn(code, state, "").must(t, 200), "id"); got != ownerID {
		t.Fatalf("the linked subject signs in as %q, want %q", got, ownerID)
	}
}

func TestDashboardGoogleIssuerUnreachable(t *testing.T) {
	// A port that was free a moment ago and has nothing listening now.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	e := startIn(t, t.TempDir(), clock.NewFake(time.Now()),
		"--google-client-id=client-id", "--google-client-secret=client-secret",
		"--google-issuer=http://127.0.0.1:"+strconv.Itoa(port))

	if got := e.ggProviders(); strings.Join(got, ",") != "email,google" {
		t.Fatalf("providers = %v, want [email google]", got)
	}
	ggMustFail(t, e.ggSignIn("a-syntactically-valid-code", ggState(t), ""), 503, "service_unavailable")
	ggMustFail(t, e.do("GET", "/v1/auth/google/url?state="+ggState(t), "", nil), 503, "service_unavailable")
	// Discovery failures are not cached: still 503, not a stuck state.
	ggMustFail(t, e.ggSignIn("a-syntactically-valid-code", ggState(t), ""), 503, "service_unavailable")
}

// ggAuthorizeURL signs user in at the provider through authURL (which a
// test may have altered) and returns the code of the redirect.
func ggAuthorizeURL(t *testing.T, m *mockoidc.MockOIDC, authURL string, user *mockoidc.MockUser) string {
	t.Helper()
	m.QueueUser(user)
	res, err := ggBrowser.Get(authURL)
	if err != nil {
		t.Fatalf("GET authorize: %v", err)
	}
	res.Body.Close()
	loc, err := url.Parse(res.Header.Get("Location"))
	if err != nil || loc.Query().Get("code") == "" {
		t.Fatalf("authorize answered %d with Location %q", res.StatusCode, res.Header.Get("Location"))
	}
	return loc.Query().Get("code")
}

// TestDashboardGoogleWrongNonce: an ID token whose nonce is not the one
// derived from the state is refused by the server (the PKCE verifier still
// matches, so only the nonce check can catch it).
func TestDashboardGoogleWrongNonce(t *testing.T) {
	e, m := ggStart(t)
	state := ggState(t)
	u, _ := url.Parse(e.ggAuthURL(state))
	q := u.Query()
	q.Set("nonce", "a-nonce-from-another-login")
	u.RawQuery = q.Encode()
	code := ggAuthorizeURL(t, m, u.String(), &mockoidc.MockUser{Subject: "sub-nonce", Email: "nonce@example.com", EmailVerified: true})
	ggMustFail(t, e.ggSignIn(code, state, ""), 401, "authentication_failed")
}

// TestDashboardGoogleExpiredToken: the server checks the ID token's expiry
// on its injected clock.
func TestDashboardGoogleExpiredToken(t *testing.T) {
	e, m := ggStart(t)
	state := ggState(t)
	code := e.ggAuthorize(m, state, &mockoidc.MockUser{Subject: "sub-late", Email: "late@example.com", EmailVerified: true})
	e.clock.Advance(m.AccessTTL + time.Minute)
	ggMustFail(t, e.ggSignIn(code, state, ""), 401, "authentication_failed")
}

// TestDashboardGoogleWrongAudience: an ID token issued to another client
// is refused. mockoidc always names its own client id as the audience, so
// the server is configured with another id, which a middleware swaps for
// mockoidc's before its handlers see it.
func TestDashboardGoogleWrongAudience(t *testing.T) {
	const ourClientID = "rtcd-dashboard-other-client"
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	err = m.AddMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := r.ParseForm(); err == nil && r.Form.Get("client_id") == ourClientID {
				r.Form.Set("client_id", m.ClientID)
				if r.PostForm != nil && r.PostForm.Get("client_id") != "" {
					r.PostForm.Set("client_id", m.ClientID)
				}
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
	// Control: through the same provider, the right client id signs in.
	ok := startIn(t, t.TempDir(), clock.NewFake(time.Now()),
		"--google-client-id="+m.ClientID, "--google-client-secret="+m.ClientSecret, "--google-issuer="+m.Issuer())
	state := ggState(t)
	code := ok.ggAuthorize(m, state, &mockoidc.MockUser{Subject: "sub-aud", Email: "aud@example.com", EmailVerified: true})
	ok.ggSignIn(code, state, "").must(t, 200)

	e := startIn(t, t.TempDir(), clock.NewFake(time.Now()),
		"--google-client-id="+ourClientID, "--google-client-secret="+m.ClientSecret, "--google-issuer="+m.Issuer())
	state = ggState(t)
	code = e.ggAuthorize(m, state, &mockoidc.MockUser{Subject: "sub-aud", Email: "aud@example.com", EmailVerified: true})
	ggMustFail(t, e.ggSignIn(code, state, ""), 401, "authentication_failed")
}
