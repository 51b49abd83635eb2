package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Dashboard sign-in through the real server: e-mail links read from the
// embedded outbox, sessions, logout, idle timeout and lifetime.

func TestDashboardOwnerSignsIn(t *testing.T) {
	e := start(t)
	if e.Boot.OwnerEmail != "owner@localhost" {
		t.Fatalf("bootstrap owner_email = %q, want the default owner@localhost", e.Boot.OwnerEmail)
	}
	e.startSignIn(map[string]any{"email": "Owner@LocalHost"}) // addresses compare case-insensitively
	msg, body := e.nextMail("owner@localhost")
	if got := msg.Header.Get("Subject"); got == "" {
		t.Fatal("the sign-in mail has no subject")
	}
	link := linkPattern.FindString(body)
	if !strings.HasPrefix(link, e.Base+"/sign-in/email?token=rtc_el_") {
		t.Fatalf("the link %q does not point at the dashboard origin with a token parameter", link)
	}
	token := link[strings.Index(link, "token=")+len("token="):]
	if len(token) < len("rtc_el_")+22 { // at least 128 bits of base64url
		t.Fatalf("sign-in token %q is too short", token)
	}
	// Peek tells the address without using the link.
	for i := 0; i < 2; i++ {
		p := e.do("POST", "/v1/auth/email/peek", "", map[string]any{"token": token}).must(t, 200)
		if p.Str("email") != "owner@localhost" || p.Str("object") != "email_sign_in_link" || p.JSON["invitation"] != nil {
			t.Fatalf("peek: %s", p.Raw)
		}
	}
	v := e.do("POST", "/v1/auth/email/verify", "", map[string]any{"token": token}).must(t, 200)
	if v.Str("object") != "session" || !strings.HasPrefix(v.Str("token"), "rtc_us_") {
		t.Fatalf("verify: %s", v.Raw)
	}
	if v.JSON["joined_account"] != nil || v.JSON["created_account"] != nil {
		t.Fatalf("the owner joins and creates nothing: %s", v.Raw)
	}
	if got := v.JSON["idle_timeout_seconds"]; got != float64(24*3600) {
		t.Fatalf("idle_timeout_seconds = %v", got)
	}
	s := v.Str("token")
	acct, prj := e.firstAccount(s)
	if acct != e.Boot.AccountID || prj != e.Boot.ProjectID {
		t.Fatalf("the owner's workspace is %s/%s, want the bootstrap %s/%s", acct, prj, e.Boot.AccountID, e.Boot.ProjectID)
	}
	// The link works once; peek after use says so too.
	e.do("POST", "/v1/auth/email/verify", "", map[string]any{"token": token}).must(t, 401)
	if r := e.do("POST", "/v1/auth/email/peek", "", map[string]any{"token": token}); r.Status != 401 || r.ErrCode() != "authentication_failed" {
		t.Fatalf("peek of a used link: %d %s", r.Status, r.Raw)
	}
	// The session reaches the project routes with X-Project-Id.
	e.do("GET", "/v1/rooms", s, nil, "X-Project-Id: "+prj).must(t, 200)
}

func TestDashboardStartAnswerIsConstant(t *testing.T) {
	e := start(t)
	known := e.do("POST", "/v1/auth/email/start", "", map[string]any{"email": e.Boot.OwnerEmail}).must(t, 202)
	unknown := e.do("POST", "/v1/auth/email/start", "", map[string]any{"email": "nobody@example.com"}).must(t, 202)
	// Plausible (one @, no spaces) but not an address: the same answer, no mail.
	odd := e.do("POST", "/v1/auth/email/start", "", map[string]any{"email": "a..b@example.com"}).must(t, 202)
	odd2 := e.do("POST", "/v1/auth/email/start", "", map[string]any{"email": "x(y@example.com"}).must(t, 202)
	for _, r := range []*resp{unknown, odd, odd2} {
		if !bytes.Equal(r.Raw, known.Raw) {
			t.Fatalf("202 bodies differ: %q vs %q", r.Raw, known.Raw)
		}
		for _, h := range []string{"Content-Type", "Content-Length"} {
			if r.Header.Get(h) != known.Header.Get(h) {
				t.Fatalf("header %s differs: %q vs %q", h, r.Header.Get(h), known.Header.Get(h))
			}
		}
	}
	e.nextMail(e.Boot.OwnerEmail)
	e.nextMail("nobody@example.com")
	// Nothing was sent for the malformed ones: only the two mails exist.
	entries, _ := os.ReadDir(filepath.Join(e.dataDir, "outbox"))
	if len(entries) != 2 {
		t.Fatalf("outbox holds %d messages, want 2 (none for malformed addresses)", len(entries))
	}
	// Not even plausible: 400.
	for _, bad := range []any{"no-at-sign", "two@@example.com", "sp ace@example.com", "", 5, nil} {
		r := e.do("POST", "/v1/auth/email/start", "", map[string]any{"email": bad})
		if r.Status != 400 || r.ErrCode() != "invalid_request" {
			t.Fatalf("email %v: %d %s", bad, r.Status, r.Raw)
		}
	}
	if r := e.do("POST", "/v1/auth/email/start", "", map[string]any{"email": "a@example.com", "extra": 1}); r.Status != 400 {
		t.Fatalf("unknown field: %d", r.Status)
	}
}

func TestDashboardLinkOriginIgnoresHost(t *testing.T) {
	e := start(t, "--dashboard-url=https://app.example.test")
	e.do("POST", "/v1/auth/email/start", "", map[string]any{"email": "h@example.com"}, "Host: evil.example",
		"X-Forwarded-Host: evil.example").must(t, 202)
	link, _ := e.mailLink("h@example.com", "token")
	if !strings.HasPrefix(link, "https://app.example.test/sign-in/email?token=") {
		t.Fatalf("link %q does not use the configured origin", link)
	}
}

func TestDashboardNewPersonGetsOwnWorkspace(t *testing.T) {
	e := start(t)
	v := e.signInResp("New.Person@Example.com", "")
	created, _ := v.JSON["created_account"].(map[string]any)
	if created == nil || created["role"] != "owner" {
		t.Fatalf("a new person gets a workspace they own: %s", v.Raw)
	}
	user := v.JSON["user"].(map[string]any)
	if user["email"] != "new.person@example.com" || !strings.HasPrefix(user["id"].(string), "usr_") {
		t.Fatalf("user: %v", user)
	}
	s := v.Str("token")
	acct, prj := e.firstAccount(s)
	if acct != created["id"] || acct == e.Boot.AccountID {
		t.Fatalf("workspace %s, want the created one %v", acct, created["id"])
	}
	// Their project is theirs, the bootstrap one is not.
	e.do("GET", "/v1/rooms", s, nil, "X-Project-Id: "+prj).must(t, 200)
	if r := e.do("GET", "/v1/rooms", s, nil, "X-Project-Id: "+e.Boot.ProjectID); r.Status != 404 {
		t.Fatalf("another workspace's project: %d %s", r.Status, r.Raw)
	}
	// Signing in again finds the same user and creates nothing.
	again := e.signInResp("new.person@example.com", "")
	if again.JSON["created_account"] != nil || again.JSON["user"].(map[string]any)["id"] != user["id"] {
		t.Fatalf("second sign-in: %s", again.Raw)
	}
	// PATCH /v1/me sets the display name.
	e.do("PATCH", "/v1/me", s, map[string]any{"name": "  Ada  "}).must(t, 200)
	if got := e.me(s).JSON["user"].(map[string]any)["name"]; got != "Ada" {
		t.Fatalf("name = %v", got)
	}
	for _, bad := range []any{strings.Repeat("x", 129), "", "a\x00b", 7} {
		if r := e.do("PATCH", "/v1/me", s, map[string]any{"name": bad}); r.Status != 400 {
			t.Fatalf("name %q: %d %s", bad, r.Status, r.Raw)
		}
	}
}

// TestDashboardLinkSingleUse redeems one link 32 times at once: exactly one
// session results.
func TestDashboardLinkSingleUse(t *testing.T) {
	// Each redemption comes from its own address, so the per-IP limit of
	// sign-in attempts (30 a minute) is not what refuses them.
	e := start(t, "--trust-forwarded-for")
	e.startSignIn(map[string]any{"email": "race@example.com"})
	_, token := e.mailLink("race@example.com", "token")
	const n = 32
	var wg sync.WaitGroup
	statuses := make([]int, n)
	sessions := make([]string, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			r, err := e.send("POST", "/v1/auth/email/verify", "", map[string]any{"token": token},
				fmt.Sprintf("X-Forwarded-For: 10.0.0.%d", i+1))
			if err != nil {
				return
			}
			statuses[i] = r.Status
			sessions[i] = r.Str("token")
		}(i)
	}
	close(start)
	wg.Wait()
	ok, unauthorized := 0, 0
	for i, st := range statuses {
		switch st {
		case 200:
			ok++
			e.me(sessions[i])
		case 401:
			unauthorized++
		default:
			t.Errorf("redemption %d: status %d", i, st)
		}
	}
	if ok != 1 || unauthorized != n-1 {
		t.Fatalf("%d sessions and %d refusals, want exactly 1 and %d", ok, unauthorized, n-1)
	}
	// Only one user and one workspace came of it.
	accts, _ := e.me(sessionOf(sessions)).JSON["accounts"].([]any)
	if len(accts) != 1 {
		t.Fatalf("%d workspaces, want 1", len(accts))
	}
}

func sessionOf(tokens []string) string {
	for _, s := range tokens {
		if s != "" {
			return s
		}
	}
	return ""
}

func TestDashboardLinkExpires(t *testing.T) {
	e := start(t)
	e.startSignIn(map[string]any{"email": "late@example.com"})
	_, token := e.mailLink("late@example.com", "token")
	e.clock.Advance(15 * time.Minute)
	if r := e.do("POST", "/v1/auth/email/verify", "", map[string]any{"token": token}); r.Status != 401 || r.ErrCode() != "authentication_failed" {
		t.Fatalf("verify after 15 minutes: %d %s", r.Status, r.Raw)
	}
	for _, bad := range []string{"", "rtc_el_short", "sk_live_x", token + "x"} {
		if r := e.do("POST", "/v1/auth/email/verify", "", map[string]any{"token": bad}); r.Status != 401 {
			t.Fatalf("token %q: %d %s", bad, r.Status, r.Raw)
		}
	}
	if r := e.do("POST", "/v1/auth/email/verify", "", map[string]any{}); r.Status != 400 {
		t.Fatalf("no token: %d", r.Status)
	}
}

func TestDashboardSignInRateLimits(t *testing.T) {
	e := start(t)
	// Per address: 5 mails an hour; more requests still answer 202 but send
	// nothing.
	for i := 0; i < 7; i++ {
		e.do("POST", "/v1/auth/email/start", "", map[string]any{"email": "flood@example.com"}).must(t, 202)
	}
	for i := 0; i < 5; i++ {
		e.nextMail("flood@example.com")
	}
	// Per IP: 10 starts a minute; that was the 7th. Three more pass, then 429.
	e.do("POST", "/v1/auth/email/start", "", map[string]any{"email": "other1@example.com"}).must(t, 202)
	e.do("POST", "/v1/auth/email/start", "", map[string]any{"email": "other2@example.com"}).must(t, 202)
	e.do("POST", "/v1/auth/email/start", "", map[string]any{"email": "other3@example.com"}).must(t, 202)
	r := e.do("POST", "/v1/auth/email/start", "", map[string]any{"email": "other4@example.com"})
	if r.Status != 429 || r.ErrCode() != "rate_limited" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("11th start in a minute: %d %s", r.Status, r.Raw)
	}
	e.nextMail("other1@example.com")
	e.nextMail("other2@example.com")
	e.nextMail("other3@example.com")
	entries, _ := os.ReadDir(filepath.Join(e.dataDir, "outbox"))
	if len(entries) != 8 {
		t.Fatalf("outbox holds %d messages, want 8 (5 to flood, 1 each to other1, 2 and 3)", len(entries))
	}
	// An hour later the address may get mail again.
	e.clock.Advance(time.Hour)
	e.startSignIn(map[string]any{"email": "flood@example.com"})
	e.nextMail("flood@example.com")
	// Verify attempts: 30 a minute per IP.
	for i := 0; i < 30; i++ {
		e.do("POST", "/v1/auth/email/verify", "", map[string]any{"token": "rtc_el_guess"}).must(t, 401)
	}
	if r := e.do("POST", "/v1/auth/email/verify", "", map[string]any{"token": "rtc_el_guess"}); r.Status != 429 {
		t.Fatalf("31st attempt in a minute: %d %s", r.Status, r.Raw)
	}
	// Each refusal is counted under its limit's name, the silent ones too.
	e.mfAwait("rtcd_rate_limit_rejections_total", mfLabels{"limit": "sign_in_mails_per_address_per_hour"}, 2)
	e.mfAwait("rtcd_rate_limit_rejections_total", mfLabels{"limit": "sign_in_starts_per_ip_per_minute"}, 1)
	e.mfAwait("rtcd_rate_limit_rejections_total", mfLabels{"limit": "sign_in_attempts_per_ip_per_minute"}, 1)
}

func TestDashboardLogout(t *testing.T) {
	e := start(t)
	s1 := e.signIn(e.Boot.OwnerEmail)
	s2 := e.signIn(e.Boot.OwnerEmail)
	s3 := e.signIn(e.Boot.OwnerEmail)
	e.do("POST", "/v1/auth/logout", s1, nil).must(t, 204)
	if r := e.do("GET", "/v1/me", s1, nil); r.Status != 401 || r.ErrCode() != "authentication_failed" {
		t.Fatalf("after logout: %d %s", r.Status, r.Raw)
	}
	if r := e.do("GET", "/v1/rooms", s1, nil, "X-Project-Id: "+e.Boot.ProjectID); r.Status != 401 {
		t.Fatalf("a signed-out session on a project route: %d", r.Status)
	}
	e.me(s2)
	e.do("POST", "/v1/auth/logout-all", s2, nil).must(t, 204)
	for _, s := range []string{s2, s3} {
		if r := e.do("GET", "/v1/me", s, nil); r.Status != 401 {
			t.Fatalf("after logout-all: %d", r.Status)
		}
	}
	// Dashboard routes refuse API keys and missing credentials.
	if r := e.do("GET", "/v1/me", e.Boot.APIKey, nil); r.Status != 401 {
		t.Fatalf("API key on /v1/me: %d", r.Status)
	}
	if r := e.do("GET", "/v1/me", "", nil); r.Status != 401 || r.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("no credential on /v1/me: %d", r.Status)
	}
}

func TestDashboardSessionIdleAndLifetime(t *testing.T) {
	e := start(t)
	idle := e.signIn(e.Boot.OwnerEmail)
	used := e.signIn(e.Boot.OwnerEmail)
	// Used every 23 hours, a session outlives the idle timeout…
	for i := 0; i < 2; i++ {
		e.clock.Advance(23 * time.Hour)
		e.me(used)
	}
	// …while one left alone for 24 hours has ended.
	if r := e.do("GET", "/v1/me", idle, nil); r.Status != 401 {
		t.Fatalf("a session idle for 46 hours: %d", r.Status)
	}
	// No use keeps a session past its 14-day lifetime.
	for elapsed := 46 * time.Hour; elapsed+23*time.Hour < 14*24*time.Hour; elapsed += 23 * time.Hour {
		e.clock.Advance(23 * time.Hour)
		e.me(used)
	}
	e.clock.Advance(23 * time.Hour)
	if r := e.do("GET", "/v1/me", used, nil); r.Status != 401 {
		t.Fatalf("a session past 14 days: %d", r.Status)
	}
}

// TestDashboardIdleSurvivesRestart: the last use is written to disk (at
// most once a minute), so a restart neither ends a used session nor revives
// an idle one.
func TestDashboardIdleSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	e := startIn(t, dir, nil)
	owner := e.Boot.OwnerEmail
	idle := e.signIn(owner)
	used := e.signIn(owner)
	e.clock.Advance(20 * time.Hour)
	// The use is noted on the way in; GET /v1/me then asks the directory,
	// which handles the note first (its mailbox is in order).
	e.me(used)
	e.Stop()
	clk := e.clock
	clk.Advance(5 * time.Hour) // 25 h after sign-in, 5 h after the last use
	e2 := startIn(t, dir, clk)
	e2.me(used)
	if r := e2.do("GET", "/v1/me", idle, nil); r.Status != 401 {
		t.Fatalf("an idle session revived by a restart: %d", r.Status)
	}
}

func TestDashboardNoCredentialLeaksInOutboxMode(t *testing.T) {
	e := start(t)
	e.startSignIn(map[string]any{"email": "perm@example.com"})
	entries, _ := os.ReadDir(filepath.Join(e.dataDir, "outbox"))
	e.eventually("a mail in the outbox", func() bool {
		entries, _ = os.ReadDir(filepath.Join(e.dataDir, "outbox"))
		return len(entries) > 0
	})
	info, err := entries[0].Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("outbox message mode %v, want 0600", info.Mode().Perm())
	}
	// GET /v1/auth/providers lists e-mail only without Google settings.
	p := e.do("GET", "/v1/auth/providers", "", nil).must(t, 200)
	if string(p.Raw) != `{"object":"auth_providers","providers":["email"]}` {
		t.Fatalf("providers: %s", p.Raw)
	}
	if r := e.do("GET", "/v1/auth/google/url?state=abcdefghijklmnop", "", nil); r.Status != http.StatusNotFound {
		t.Fatalf("google url without Google: %d", r.Status)
	}
}
