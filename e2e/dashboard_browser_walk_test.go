package e2e

// A walk through the web dashboard in a real Chromium, as one person and
// then two: sign in from the mailed link, create a project, a room and a
// participant who joins through the media node, an API key, a webhook
// endpoint whose delivery fails and is retried, a top-up paid on the
// sandbox provider's page, an invitation accepted in a second browser
// context and a role change, and sign-out. Every page and state reached is
// saved as a screenshot at 375 px and 1280 px and checked by axe-core; any
// console error or unexpected failed request fails the test.

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"rtcd/internal/browsertest"
	"rtcd/scopes"
)

// walk is the state the steps of TestDashboardBrowserWalk share.
type walk struct {
	t         *testing.T
	e         *env
	b         *browsertest.Browser
	p         *browsertest.Page // the workspace's owner
	rcv       *whReceiver
	projectID string // the project the owner creates and works in
	roomID    string
}

// walkProjectName is the project the walk creates.
const walkProjectName = "Walkthrough"

func TestDashboardBrowserWalk(t *testing.T) {
	rcv := newWHReceiver(t)
	e := start(t, rcv.flags()...)
	walkThrough(t, e, rcv)
}

// walkThrough walks the dashboard served by e, whose webhooks may reach
// rcv, in a new browser.
func walkThrough(t *testing.T, e *env, rcv *whReceiver) {
	rcv.setNow(e.clock.Now)
	b := browsertest.Start(t, browsertest.Options{})
	w := &walk{t: t, e: e, b: b, p: b.NewPage(t, "owner"), rcv: rcv}

	steps := []struct {
		name string
		run  func()
	}{
		{"sign in", func() { e.browserSignIn(w.p, e.Boot.OwnerEmail, true) }},
		{"project", w.createProject},
		{"room and participant", w.roomAndParticipant},
		{"API keys", w.apiKeys},
		{"webhook", w.webhook},
		{"top-up", w.topUp},
		{"team", w.team},
		{"sign out", w.signOut},
	}
	for _, s := range steps {
		began := time.Now()
		s.run()
		t.Logf("%s: %v", s.name, time.Since(began).Round(10*time.Millisecond))
	}
	t.Logf("screenshots in %s", b.ScreenshotDir())
}

// nav follows a link of the dashboard's navigation (visible at desktop
// width, where Visit leaves the page; it comes before the page's own links).
func (w *walk) nav(label string) {
	w.t.Helper()
	w.p.Click(label)
}

// noSecretStored fails when secret is anywhere in the page's localStorage
// or sessionStorage.
func noSecretStored(t *testing.T, p *browsertest.Page, what, secret string) {
	t.Helper()
	for k, v := range p.Storage() {
		if strings.Contains(v, secret) || strings.Contains(k, secret) {
			t.Fatalf("the %s is kept in browser storage under %q", what, k)
		}
	}
}

// noFieldHolds fails when an input on the page still holds value (a secret
// that should be gone once dismissed).
func noFieldHolds(t *testing.T, p *browsertest.Page, value string) {
	t.Helper()
	var held bool
	p.Eval(`[...document.querySelectorAll("input, textarea")].some((el) => el.value === `+jsQuote(value)+`)`, &held)
	if held {
		t.Fatal("a dismissed secret is still in a field of the page")
	}
}

// jsQuote is s as a JavaScript string literal.
func jsQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

var projectInURL = regexp.MustCompile(`/p/(prj_[A-Za-z0-9]+)/`)

// createProject: the Projects page, a new project, then the project
// switcher to it.
func (w *walk) createProject() {
	t, p := w.t, w.p
	w.nav("Projects")
	p.WaitText("1 of at most 100 projects")
	p.Visit("projects")
	p.Fill("New project name", walkProjectName)
	p.Click("Create project")
	p.WaitText("2 of at most 100 projects")
	p.WaitText(walkProjectName)
	p.Visit("projects-created")
	p.Select("Project", walkProjectName)
	p.WaitURL(`/p/prj_[A-Za-z0-9]+/rooms$`)
	p.WaitText("No rooms yet")
	m := projectInURL.FindStringSubmatch(p.URL())
	if m == nil {
		t.Fatalf("no project in %s", p.URL())
	}
	w.projectID = m[1]
	if w.projectID == w.e.Boot.ProjectID {
		t.Fatal("the switcher stayed on the first project")
	}
	p.Visit("rooms-empty")
}

// roomAndParticipant: create a room, add a participant (token shown once,
// with its copy button), join with that token through the media node and
// watch the participant's state change on the room's page.
func (w *walk) roomAndParticipant() {
	t, e, p := w.t, w.e, w.p
	p.Click("Create room")
	p.WaitText("Expires after")
	p.Visit("room-create")
	p.Fill("Name (optional)", "standup", "Create a room")
	p.Fill("Metadata (optional JSON object)", `{"team": "core"}`, "Create a room")
	p.Click("Create room", "Create a room")
	p.WaitURL(`/rooms/room_[A-Za-z0-9]+$`)
	p.WaitText("No participants yet.")
	w.roomID = p.URL()[strings.LastIndex(p.URL(), "/")+1:]
	if r := e.do("GET", "/v1/rooms/"+w.roomID, e.Boot.APIKey, nil); r.Status != 404 {
		t.Fatalf("the room is visible to the first project's key (%d): it was created in the wrong project", r.Status)
	}
	p.Visit("room-waiting")

	p.Fill("Name (optional)", "ann", "Add a participant")
	p.Select("Role", "subscriber", "Add a participant")
	p.Click("Add participant")
	p.WaitText("Participant ann added")
	token := p.Value("Participant token")
	if token == "" {
		t.Fatal("no participant token shown")
	}
	if !p.Has("Copy", "Participant token") {
		t.Fatal("no copy button beside the participant token")
	}
	p.Click("Copy", "Participant token")
	p.WaitText("Copied")
	if copied := p.Clipboard(); copied != token {
		t.Fatalf("the copy button copied %q, not the token shown", copied)
	}
	noSecretStored(t, p, "participant token", token)
	p.WaitTextIn("created", "part_") // the participant's state in its row
	p.Visit("participant-token")
	p.Click("I have copied it")
	p.WaitText("Add a participant")
	noFieldHolds(t, p, token)

	// The token shown works: the participant joins through the media node.
	c := e.joinMedia(token)
	p.WaitTextIn("joined", "part_") // the page refreshes itself while the room is live
	p.WaitText("Status active")
	p.Visit("participant-joined")
	c.send(map[string]any{"type": "leave"})
	p.WaitTextIn("left", "part_")
}

// apiKeys: create a key with a scope picker that lists only the scopes the
// person holds, its secret shown once and never stored, the key working
// with exactly its scopes, then revoked.
func (w *walk) apiKeys() {
	t, e, p := w.t, w.e, w.p
	w.nav("API keys")
	p.WaitText("No API keys. Create one for your backend.")
	p.Visit("api-keys-empty")
	p.Click("Create API key")
	p.WaitText("All I hold")
	var offered []string
	p.Eval(`[...document.querySelectorAll("fieldset.scopes label.check")].map((l) => l.innerText.trim())`, &offered)
	if held := scopes.All.Names(); !slices.Equal(offered, held) { // an owner holds every scope
		t.Fatalf("the scope picker offers %v, want the owner's scopes %v", offered, held)
	}
	p.Visit("api-key-create")
	p.Fill("Name (optional)", "walk-backend", "Create an API key")
	p.Check("rooms:read", true)
	p.Check("participants:write", true)
	p.Click("Create key")
	p.WaitText("API key walk-backend created")
	secret := p.Value("Secret key")
	if !strings.HasPrefix(secret, "sk_live_") {
		t.Fatalf("secret key %q", secret)
	}
	noSecretStored(t, p, "API key secret", secret)
	p.Visit("api-key-secret")
	p.Click("I have copied it")
	p.WaitText("sk_live_…" + secret[len(secret)-4:])
	noFieldHolds(t, p, secret)
	noSecretStored(t, p, "API key secret", secret)

	// The key holds what was picked, in the project it was made in.
	if r := e.do("GET", "/v1/rooms", secret, nil).must(t, 200); len(r.Data()) != 1 || r.Data()[0]["id"] != w.roomID {
		t.Fatalf("the new key lists %s, want the walk's room", r.Raw)
	}
	e.do("POST", "/v1/rooms", secret, map[string]any{}).mustErr(t, 403, "permission_denied")
	p.Visit("api-keys-list")

	p.Click("Revoke", "walk-backend")
	p.WaitText("Revoke walk-backend?")
	p.Visit("api-key-revoke-confirm")
	p.Click("Yes, revoke", "walk-backend")
	p.WaitTextIn("revoked", "walk-backend")
	if r := e.do("GET", "/v1/rooms", secret, nil); r.Status != 401 {
		t.Fatalf("a revoked key answered %d", r.Status)
	}
	p.Visit("api-key-revoked")
}

// webhook: an endpoint on the test's TLS receiver (a refused address
// first), its signing secret shown once; a room's end is delivered, the
// receiver fails it (retrying, with the attempt's status, latency and
// body in the log), then recovers and "Retry now" delivers it.
func (w *walk) webhook() {
	t, e, p, rcv := w.t, w.e, w.p, w.rcv
	failing := func(rw http.ResponseWriter, _ *http.Request) {
		rw.WriteHeader(http.StatusServiceUnavailable)
		_, _ = rw.Write([]byte("receiver down for maintenance"))
	}
	rcv.on("/hook", failing)

	w.nav("Webhooks")
	p.WaitText("No webhook endpoints. Add one to receive events.")
	p.Visit("webhooks-empty")
	p.Click("Add endpoint")
	p.WaitText("Every event (also types added later)")
	// A URL with credentials in it is refused, in words.
	p.Allow(400, "/v1/webhook-endpoints")
	p.Fill("URL", strings.Replace(rcv.url("/hook"), "https://", "https://user:pw@", 1))
	p.Click("Add endpoint", "Add a webhook endpoint")
	p.WaitText("userinfo")
	p.WaitText("Request id")
	p.Visit("webhook-refused")

	p.Fill("URL", rcv.url("/hook"))
	p.Check("Every event (also types added later)", false)
	p.Check("room.ended", true)
	p.Visit("webhook-create")
	p.Click("Add endpoint", "Add a webhook endpoint")
	p.WaitText("Webhook endpoint created")
	secret := p.Value("Signing secret")
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("signing secret %q", secret)
	}
	noSecretStored(t, p, "signing secret", secret)
	p.Visit("webhook-secret")
	p.Click("I have copied it")
	p.WaitText("room.ended")
	noFieldHolds(t, p, secret)
	p.Visit("webhooks-list")
	p.Click(rcv.url("/hook"))
	p.WaitText("No deliveries yet.")
	endpointURL := p.URL()
	p.Visit("webhook-deliveries-empty")

	// The event: the owner deletes the room on its page.
	w.nav("Rooms")
	p.Click("standup")
	p.WaitText("Delete room")
	p.Click("Delete room")
	p.Click("Yes, delete room")
	p.WaitText("Status ended (deleted)")
	p.Visit("room-ended")
	e.eventually("the room.ended delivery's first attempt", func() bool { return len(rcv.requests("/hook")) == 1 })
	if ev := whCheck(t, rcv.requests("/hook")[0], secret, w.projectID); ev.Type != "room.ended" || ev.Data["room_id"] != w.roomID {
		t.Fatalf("delivered %s for %v, want room.ended of %s", ev.Type, ev.Data["room_id"], w.roomID)
	}

	p.Go(endpointURL)
	p.WaitTextIn("retrying", "room.ended")
	p.WaitTextIn("503 unexpected status 503", "receiver down for maintenance")
	p.WaitTextIn(" ms", "receiver down for maintenance")
	p.Visit("webhook-delivery-retrying")

	rcv.on("/hook", func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte(`{"received":true}`)) })
	p.Click("Retry now", "room.ended")
	e.eventually("the retried attempt", func() bool { return len(rcv.requests("/hook")) == 2 })
	whCheck(t, rcv.requests("/hook")[1], secret, w.projectID)
	p.WaitTextIn("succeeded", "room.ended")
	p.WaitTextIn("200", `{"received":true}`)
	p.WaitTextIn("2 attempts", "room.ended")
	if p.Has("Retry now") {
		t.Fatal("a succeeded delivery still offers Retry now")
	}
	p.Visit("webhook-delivery-succeeded")
}

// topUp: the Billing page (a refused amount first), "Continue to payment"
// to the sandbox provider's checkout served by rtcd, Pay, back to the
// dashboard's page of the top-up, its receipt, and the raised balance.
func (w *walk) topUp() {
	t, e, p := w.t, w.e, w.p
	before := e.do("GET", "/v1/billing/balance", e.Boot.APIKey, nil).must(t, 200).Str("available")
	w.nav("Billing")
	p.WaitText("Balance")
	p.WaitText(before)
	p.Visit("billing")
	p.Fill("Amount", "2.50")
	p.Click("Continue to payment")
	p.WaitText("Enter an amount from 5.00 to 10000.00")
	p.Visit("billing-amount-refused")

	p.Fill("Amount", "25.00")
	p.Click("Continue to payment")
	p.WaitURL(`/v1/billing/sandbox/checkout/`)
	p.WaitText("Top up prepaid credit")
	p.WaitText("25.00")
	p.Visit("sandbox-checkout")
	p.Click("Pay")
	p.WaitText("Payment succeeded")
	var back string
	p.Eval(`(document.querySelector("a.back") || {}).href || ""`, &back)
	m := regexp.MustCompile(`^` + regexp.QuoteMeta(e.Base) + `/billing/topups/(pay_[A-Za-z0-9]+)$`).FindStringSubmatch(back)
	if m == nil {
		t.Fatalf("the sandbox's result page links back to %q, want %s/billing/topups/<payment_id>", back, e.Base)
	}
	paymentID := m[1]
	p.Visit("sandbox-result")
	p.Click("Back to the dashboard")
	p.WaitURL(`/billing/topups/` + paymentID + `$`)
	p.WaitText("25.00 USD succeeded")
	p.WaitText("Paid: the credit is in your wallet.")
	var receipt string
	p.Eval(`[...document.querySelectorAll("a")].filter((a) => a.innerText.trim() === "View the receipt").map((a) => a.href)[0] || ""`, &receipt)
	if !strings.HasPrefix(receipt, e.Base+"/v1/billing/sandbox/receipts/"+paymentID+"?") {
		t.Fatalf("receipt link %q", receipt)
	}
	p.Visit("topup-succeeded")
	p.Go(receipt)
	p.WaitText("Receipt")
	p.WaitText(paymentID)
	p.Visit("sandbox-receipt")
	p.Go(e.Base + "/billing/topups/" + paymentID)
	p.Click("Back to billing")
	p.WaitURL(`/p/` + w.projectID + `/billing$`)

	after := e.do("GET", "/v1/billing/balance", e.Boot.APIKey, nil).must(t, 200).Str("available")
	if blMicros(t, after)-blMicros(t, before) != blMicros(t, "25.00") {
		t.Fatalf("balance %s -> %s, want 25.00 more", before, after)
	}
	p.WaitText(after + " USD")
	p.WaitTextIn("succeeded", paymentID) // the top-up's row
	p.WaitTextIn("Receipt", paymentID)
	p.WaitTextIn("topup", "top-up "+paymentID) // its ledger entry
	p.WaitTextIn("25.000000 USD", "top-up "+paymentID)
	p.Visit("billing-topped-up")
}

// team: the owner invites a second person, who signs in from the
// invitation mail in a browser context of their own and sees a member's
// restricted view; the owner makes them an admin, and after a reload they
// see an admin's buttons.
func (w *walk) team() {
	t, e, p := w.t, w.e, w.p
	const sam = "sam@example.com"
	w.nav("Team")
	p.WaitText("You are owner.")
	p.WaitText("No invitations.")
	p.Visit("team")
	p.Fill("E-mail address", sam)
	p.Click("Send invitation")
	p.WaitText("Invitation sent to " + sam + ".")
	p.WaitTextIn("pending", sam)
	p.Visit("team-invited")

	// Sam, in a browser context of their own.
	s := w.b.NewPage(t, "invitee")
	link, _ := e.mailLink(sam, "invitation_token")
	s.Go(link)
	s.WaitText("You are invited")
	s.Visit("invitation")
	s.Fill("E-mail address", sam)
	s.Click("E-mail me a sign-in link")
	s.WaitText("Check your mail")
	link, _ = e.mailLink(sam, "token")
	s.Go(link)
	s.WaitText("and join")
	s.WaitText("as member?")
	s.Visit("invitation-sign-in")
	s.Click("Sign in")
	s.WaitText("Rooms")
	s.Select("Project", walkProjectName)
	s.WaitURL(`/p/` + w.projectID + `/rooms$`)

	// A member's view: no key, endpoint or top-up forms, no invitations.
	memberView := func(page, want string, absent ...string) {
		t.Helper()
		s.Click(page)
		s.WaitText(want)
		for _, a := range absent {
			if s.Has(a) {
				t.Fatalf("a member sees %q on %s", a, page)
			}
		}
	}
	memberView("API keys", "walk-backend", "Create API key", "Revoke")
	memberView("Webhooks", "room.ended", "Add endpoint", "Disable")
	s.Visit("member-webhooks")
	memberView("Billing", "Only owners and admins can add credit.", "Continue to payment")
	s.Visit("member-billing")
	memberView("Team", "You are member.", "Send invitation")
	if strings.Contains(s.Text(), "Invitations") {
		t.Fatal("a member sees the invitations")
	}
	if s.Has("Workspace audit log") {
		t.Fatal("a member is offered the workspace audit log")
	}
	s.Visit("member-team")

	// The owner makes Sam an admin.
	p.Go(p.URL()) // the members list as it is now
	p.WaitText(sam)
	p.Select("Role of "+sam, "admin")
	e.eventually("sam is an admin", func() bool {
		for _, m := range e.do("GET", "/v1/accounts/"+e.Boot.AccountID+"/members", w.ownerSession(), nil).must(t, 200).Data() {
			if m["email"] == sam {
				return m["role"] == "admin"
			}
		}
		return false
	})
	e.eventually("the members list shows sam as an admin", func() bool { return p.Value("Role of "+sam) == "admin" })
	p.Visit("team-sam-admin")

	s.Go(s.URL())
	s.WaitText("You are admin.")
	s.WaitText("Send invitation")
	if !s.Has("Workspace audit log") {
		t.Fatal("an admin is not offered the workspace audit log")
	}
	s.Visit("admin-team")
	s.Select("Project", walkProjectName)
	s.WaitURL(`/p/` + w.projectID + `/rooms$`)
	s.Click("API keys")
	s.WaitText("Create API key")
	s.Click("Webhooks")
	s.WaitText("Add endpoint")
	s.Click("Billing")
	s.WaitText("Continue to payment")
	s.Visit("admin-billing")
}

// ownerSession is the owner's session token, as the page keeps it.
func (w *walk) ownerSession() string {
	w.t.Helper()
	tok := w.p.Storage()["local:rtcd.session"]
	if !strings.HasPrefix(tok, "rtc_us_") {
		w.t.Fatalf("the owner's page keeps no session token: %q", tok)
	}
	return tok
}

// signOut: the owner signs out; the page goes to sign-in, the old token is
// refused by the API, and a dashboard address leads back to sign-in.
func (w *walk) signOut() {
	t, e, p := w.t, w.e, w.p
	tok := w.ownerSession()
	e.do("GET", "/v1/me", tok, nil).must(t, 200)
	p.Click("Sign out")
	p.WaitURL(`/sign-in$`)
	p.WaitText("E-mail me a sign-in link")
	if _, kept := p.Storage()["local:rtcd.session"]; kept {
		t.Fatal("the session token is still stored after signing out")
	}
	e.do("GET", "/v1/me", tok, nil).mustErr(t, 401, "authentication_failed")
	p.Go(e.Base + "/p/" + w.projectID + "/rooms")
	p.WaitURL(`/sign-in$`)
	p.Visit("signed-out")
}
