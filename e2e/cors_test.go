package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// What a browser needs from the API (docs/api.md, "Browsers and CORS"):
// POST /v1/connect callable from any origin, secret-key routes closed to
// browsers, the session routes open to a dashboard on another origin only,
// and no body acted on unless it is declared as JSON.

// A web client's origin: a customer's site, not the API's.
const customerOrigin = "https://app.customer.example"

// preflight sends a browser's CORS preflight for method on path.
func (e *env) preflight(path, origin, method, headers string) *resp {
	e.t.Helper()
	h := []string{"Origin: " + origin, "Access-Control-Request-Method: " + method}
	if headers != "" {
		h = append(h, "Access-Control-Request-Headers: "+headers)
	}
	return e.do("OPTIONS", path, "", nil, h...)
}

// headerList splits a comma-separated header into its trimmed items.
func headerList(h http.Header, name string) []string {
	var out []string
	for _, v := range h.Values(name) {
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, strings.ToLower(item))
			}
		}
	}
	return out
}

// requireNoCORS fails when r carries any CORS response header.
func requireNoCORS(t *testing.T, what string, r *resp) {
	t.Helper()
	for name := range r.Header {
		if strings.HasPrefix(strings.ToLower(name), "access-control-") {
			t.Errorf("%s: %s: %q, want no CORS headers", what, name, r.Header.Get(name))
		}
	}
}

// requireReadableBy checks that a page of origin may read r, without
// credentials, including the headers a client needs (Retry-After,
// X-Request-Id).
func requireReadableBy(t *testing.T, what string, r *resp, allowOrigin string) {
	t.Helper()
	if got := r.Header.Get("Access-Control-Allow-Origin"); got != allowOrigin {
		t.Errorf("%s: Access-Control-Allow-Origin %q, want %q", what, got, allowOrigin)
	}
	if got := r.Header.Get("Access-Control-Allow-Credentials"); got != "" {
		t.Errorf("%s: Access-Control-Allow-Credentials %q, want none (no credentials mode)", what, got)
	}
	exposed := headerList(r.Header, "Access-Control-Expose-Headers")
	for _, h := range []string{"retry-after", "x-request-id", "x-ratelimit-limit", "x-ratelimit-remaining"} {
		if !slices.Contains(exposed, h) {
			t.Errorf("%s: Access-Control-Expose-Headers %v lacks %s", what, exposed, h)
		}
	}
}

// POST /v1/connect from a page of any origin: the preflight is answered
// (and OPTIONS is listed in Allow because it is served), the answers,
// refusals included, are readable with Retry-After and X-Request-Id, and
// no credentials mode is ever offered.
func TestCORSConnectFromAnyOrigin(t *testing.T) {
	e := start(t, "--connect-per-ip-per-minute=2")
	room := e.createRoom(nil)
	_, token := e.createParticipant(room, nil)

	pre := e.preflight("/v1/connect", customerOrigin, "POST", "content-type").must(t, 204)
	if got := pre.Header.Get("Access-Control-Allow-Origin"); got != "*" {
		t.Errorf("preflight Access-Control-Allow-Origin %q, want *", got)
	}
	if m := headerList(pre.Header, "Access-Control-Allow-Methods"); !slices.Contains(m, "post") {
		t.Errorf("preflight Access-Control-Allow-Methods %v lacks POST", m)
	}
	if h := headerList(pre.Header, "Access-Control-Allow-Headers"); !slices.Contains(h, "content-type") || slices.Contains(h, "authorization") {
		t.Errorf("preflight Access-Control-Allow-Headers %v: want Content-Type, never Authorization", h)
	}
	if pre.Header.Get("Access-Control-Max-Age") == "" || pre.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("preflight Max-Age %q, Allow-Credentials %q", pre.Header.Get("Access-Control-Max-Age"), pre.Header.Get("Access-Control-Allow-Credentials"))
	}
	if allow := headerList(pre.Header, "Allow"); !slices.Equal(slices.Sorted(slices.Values(allow)), []string{"options", "post"}) {
		t.Errorf("preflight Allow %v, want POST and OPTIONS", allow)
	}
	// A plain OPTIONS (no preflight) only lists the methods.
	plain := e.do("OPTIONS", "/v1/connect", "", nil).must(t, 204)
	if plain.Header.Get("Allow") == "" || plain.Header.Get("Access-Control-Allow-Methods") != "" {
		t.Errorf("plain OPTIONS: Allow %q, Allow-Methods %q", plain.Header.Get("Allow"), plain.Header.Get("Access-Control-Allow-Methods"))
	}

	sdk := map[string]any{"name": "rtcd-web", "version": "0.1.0", "platform": "web"}
	ok := e.do("POST", "/v1/connect", "", map[string]any{"token": token, "sdk": sdk}, "Origin: "+customerOrigin).must(t, 200)
	requireReadableBy(t, "connect", ok, "*")

	// A refusal is readable too: the page shows the code, and backs off
	// for Retry-After.
	bad := e.do("POST", "/v1/connect", "", map[string]any{"token": "rtc_pt_nope"}, "Origin: "+customerOrigin)
	erRequireEnvelope(t, bad, 401, "participant_token_invalid")
	requireReadableBy(t, "refused connect", bad, "*")
	limited := e.do("POST", "/v1/connect", "", map[string]any{"token": token, "sdk": sdk}, "Origin: "+customerOrigin)
	erRequireEnvelope(t, limited, 429, "rate_limited")
	requireReadableBy(t, "rate-limited connect", limited, "*")
	if limited.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}

	// A request without Origin (a server, the Go SDK) gets no CORS headers
	// it has no use for.
	e.clock.Advance(time.Minute)
	requireNoCORS(t, "connect without Origin", e.connect(token).must(t, 200))
}

// A text/plain POST, which a browser sends cross-origin without asking
// first, is refused with 415 before anything happens: the participant
// keeps its status, no connect session is issued, and no rate budget is
// spent. The same token then connects normally.
func TestConnectRefusesUndeclaredBodies(t *testing.T) {
	e := start(t, "--connect-per-ip-per-minute=1")
	room := e.createRoom(nil)
	pid, token := e.createParticipant(room, nil)
	body := `{"token":"` + token + `"}`
	for _, ct := range []string{
		"", // no Content-Type at all
		"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=x", "application/json; charset=iso-8859-1", "application/jsonx", "application/json-patch+json",
	} {
		req, err := http.NewRequest("POST", e.Base+"/v1/connect", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		req.Header.Set("Origin", customerOrigin)
		r := erRawDo(t, e, req)
		d := erRequireEnvelope(t, r, 415, "invalid_request")
		if d["header"] != "Content-Type" || d["expected"] != "application/json" {
			t.Errorf("Content-Type %q: details %v", ct, d)
		}
		requireReadableBy(t, "415 to "+ct, r, "*")
	}
	if got := e.participantStatus(room, pid); got != "created" {
		t.Fatalf("participant status %q after refused connects, want created", got)
	}
	if n := e.connectResults()["ok"]; n != 0 {
		t.Fatalf("%v connects counted ok", n)
	}
	// Declared as JSON (any case, UTF-8 charset) it is accepted, and the
	// per-IP budget of 1 was not spent by the refusals.
	e.do("POST", "/v1/connect", "", body, "Content-Type: Application/JSON; charset=UTF-8").must(t, 200)
	if got := e.participantStatus(room, pid); got != "connected" {
		t.Fatalf("participant status %q, want connected", got)
	}
}

// Every JSON route refuses a body not declared as JSON, with its
// credentials accepted (415 comes with the body, after authentication),
// and nothing changes: the same reads answer the same before and after.
func TestJSONRoutesRefuseUndeclaredBodies(t *testing.T) {
	e := start(t)
	session := e.signIn(e.Boot.OwnerEmail)
	account, project := e.firstAccount(session)
	room := e.createRoom(nil)

	reads := []struct{ path, key string }{
		{"/v1/rooms", e.Boot.APIKey},
		{"/v1/rooms/" + room + "/participants", e.Boot.APIKey},
		{"/v1/api-keys", e.Boot.APIKey},
		{"/v1/webhook-endpoints", e.Boot.APIKey},
		{"/v1/billing/topups", e.Boot.APIKey},
		{"/v1/audit-logs?limit=100", e.Boot.APIKey},
		{"/v1/accounts/" + account + "/invitations", session},
		{"/v1/accounts/" + account + "/audit-logs?limit=100", session},
	}
	snapshot := func() []string {
		var out []string
		for _, r := range reads {
			out = append(out, string(e.do("GET", r.path, r.key, nil).must(t, 200).Raw))
		}
		// /v1/me without its sessions' last-use times.
		out = append(out, regexp.MustCompile(`"last_[a-z_]*":"[^"]*"`).ReplaceAllString(string(e.me(session).Raw), ""))
		return out
	}
	before := snapshot()
	mailsBefore := outboxFiles(t, e)

	ids := map[string]string{
		"room_id": room, "participant_id": "part_aaaaaaaaaaaaaaaaaaaaaaaa", "account_id": account, "project_id": project,
		"user_id": "usr_aaaaaaaaaaaaaaaaaaaaaaaa", "payment_id": "pay_aaaaaaaaaaaaaaaaaaaaaaaa",
	}
	doc := openAPIDocument(t)
	tried := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody == nil || op.RequestBody.Value.Content.Get("application/json") == nil {
				continue
			}
			switch path {
			case "/v1/billing/providers/{provider}/webhook":
				continue // the provider's own contract, verified by its signature
			case "/v1/auth/google":
				continue // answers 404 first while Google sign-in is off
			}
			key := e.Boot.APIKey
			switch {
			case strings.HasPrefix(path, "/v1/auth/") || path == "/v1/connect":
				key = ""
			case strings.HasPrefix(path, "/v1/me") || strings.HasPrefix(path, "/v1/accounts") || strings.HasPrefix(path, "/v1/invitations"):
				key = session
			}
			concrete := regexp.MustCompile(`\{([a-z_]+)\}`).ReplaceAllStringFunc(path, func(p string) string {
				id, ok := ids[strings.Trim(p, "{}")]
				if !ok {
					t.Fatalf("%s: no id for %s", path, p)
				}
				return id
			})
			body := `{"name":"x","email":"someone@example.com","token":"x","amount":"10.00","url":"https://example.com/h","events":["room.started"],"scopes":["rooms:read"],"role":"member"}`
			for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded"} {
				r := e.do(method, concrete, key, body, "Content-Type: "+ct, "Idempotency-Key: k-"+method+path)
				if d := erRequireEnvelope(t, r, 415, "invalid_request"); d["header"] != "Content-Type" {
					t.Errorf("%s %s (%s): details %v", method, path, ct, d)
				}
			}
			tried++
		}
	}
	if tried < 15 {
		t.Fatalf("only %d JSON routes found in the OpenAPI document", tried)
	}
	if after := snapshot(); !slices.Equal(before, after) {
		for i := range before {
			if before[i] != after[i] {
				t.Errorf("refused requests changed a read:\nbefore %s\nafter  %s", before[i], after[i])
			}
		}
	}
	if got := outboxFiles(t, e); got != mailsBefore {
		t.Errorf("%d mails in the outbox after the refused requests, %d before", got, mailsBefore)
	}
}

// outboxFiles counts the mails written to the server's outbox.
func outboxFiles(t *testing.T, e *env) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(e.dataDir, "outbox"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return len(entries)
}

// Routes that take a secret API key answer no browser: no preflight (their
// OPTIONS is refused as before, and Allow does not list it), no CORS
// headers on their answers, whatever the origin. With the dashboard served
// by rtcd itself (the default), the session routes answer no other origin
// either: the dashboard is same-origin.
func TestCORSClosedByDefault(t *testing.T) {
	e := start(t)
	session := e.signIn(e.Boot.OwnerEmail)
	_, project := e.firstAccount(session)
	for _, origin := range []string{customerOrigin, e.Base} {
		pre := e.preflight("/v1/rooms", origin, "POST", "authorization,content-type")
		erRequireEnvelope(t, pre, 405, "invalid_request")
		requireNoCORS(t, "OPTIONS /v1/rooms", pre)
		requireNoCORS(t, "API key", e.do("GET", "/v1/rooms", e.Boot.APIKey, nil, "Origin: "+origin).must(t, 200))
		requireNoCORS(t, "session", e.do("GET", "/v1/rooms", session, nil, "Origin: "+origin, "X-Project-Id: "+project).must(t, 200))
		requireNoCORS(t, "me", e.do("GET", "/v1/me", session, nil, "Origin: "+origin).must(t, 200))
		erRequireEnvelope(t, e.preflight("/v1/me", origin, "GET", "authorization"), 405, "invalid_request")
	}
}

// A dashboard served from its own origin (--dashboard-url, not the API's)
// may call the routes that take a session, from that origin only: the
// preflight is answered and the answers are readable, with Vary: Origin.
// A secret API key on the same routes gets no CORS headers, and any other
// origin gets none at all.
func TestCORSDashboardOnItsOwnOrigin(t *testing.T) {
	const dashboard = "http://dash.example.test:5173"
	e := start(t, "--dashboard-url="+dashboard+"/")
	session := e.signIn(e.Boot.OwnerEmail)
	_, project := e.firstAccount(session)

	pre := e.preflight("/v1/rooms", dashboard, "POST", "authorization,content-type,x-project-id,idempotency-key").must(t, 204)
	if got := pre.Header.Get("Access-Control-Allow-Origin"); got != dashboard {
		t.Errorf("preflight Access-Control-Allow-Origin %q, want %q", got, dashboard)
	}
	for _, h := range []string{"authorization", "content-type", "x-project-id", "idempotency-key"} {
		if !slices.Contains(headerList(pre.Header, "Access-Control-Allow-Headers"), h) {
			t.Errorf("preflight does not allow %s: %v", h, pre.Header.Values("Access-Control-Allow-Headers"))
		}
	}
	if m := headerList(pre.Header, "Access-Control-Allow-Methods"); !slices.Contains(m, "post") || !slices.Contains(m, "get") {
		t.Errorf("preflight methods %v", m)
	}
	if !slices.Contains(headerList(pre.Header, "Vary"), "origin") {
		t.Errorf("preflight Vary %v lacks Origin", pre.Header.Values("Vary"))
	}
	requireNoCORS(t, "preflight from another origin", e.preflight("/v1/rooms", customerOrigin, "POST", "authorization").must(t, 204))

	withSession := e.do("POST", "/v1/rooms", session, map[string]any{}, "Origin: "+dashboard, "X-Project-Id: "+project).must(t, 201)
	requireReadableBy(t, "session on a project route", withSession, dashboard)
	requireReadableBy(t, "me", e.do("GET", "/v1/me", session, nil, "Origin: "+dashboard).must(t, 200), dashboard)
	// An expired or unknown session's 401 is readable: the dashboard sends
	// the person to sign in again.
	requireReadableBy(t, "401", e.do("GET", "/v1/me", "rtc_us_nope", nil, "Origin: "+dashboard), dashboard)
	requireReadableBy(t, "sign-in start", e.do("POST", "/v1/auth/email/start", "", map[string]any{"email": "x@example.com"}, "Origin: "+dashboard).must(t, 202), dashboard)

	// A secret key never: the spec keeps them out of client applications.
	requireNoCORS(t, "API key from the dashboard's origin", e.do("GET", "/v1/rooms", e.Boot.APIKey, nil, "Origin: "+dashboard).must(t, 200))
	// Another origin never.
	requireNoCORS(t, "session from another origin", e.do("GET", "/v1/me", session, nil, "Origin: "+customerOrigin).must(t, 200))
	// Routes that take no session stay closed.
	requireNoCORS(t, "provider callback", e.do("POST", "/v1/billing/providers/sandbox/webhook", "", map[string]any{}, "Origin: "+dashboard))
	// Connect keeps its own answer.
	if got := e.preflight("/v1/connect", dashboard, "POST", "content-type").must(t, 204).Header.Get("Access-Control-Allow-Origin"); got != "*" {
		t.Errorf("connect preflight from the dashboard: %q", got)
	}
}
