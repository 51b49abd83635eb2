package e2e

// The dashboard's pages beyond the main walk, in a real Chromium against
// the real server: usage from a real media session (chart and totals) and
// the billing ledger it charged; the workspace's pages (settings, projects
// with their archive refusals in words, both audit logs, limits), the
// profile (display name, a new workspace within the cap); signing out
// everywhere; and Google sign-in against a real OpenID provider (mockoidc)
// with its bound-state check.

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"
	"rtcd/internal/browsertest"
)

// sessionIn is the session token a page keeps.
func sessionIn(t *testing.T, p *browsertest.Page) string {
	t.Helper()
	s := p.Storage()["local:rtcd.session"]
	if !strings.HasPrefix(s, "rtc_us_") {
		t.Fatalf("no session in the page's storage: %v", p.Storage())
	}
	return s
}

// pathRE matches the page's address ending in path.
func pathRE(e *env, path string) string { return "^" + regexp.QuoteMeta(e.Base+path) + "$" }

func TestDashboardBrowserUsage(t *testing.T) {
	e := start(t)
	// A participant joins the embedded media node for 125 s, then leaves:
	// finalized usage, charged to the wallet.
	room := e.createRoom(map[string]any{"name": "standup"})
	pid, token := e.createParticipant(room, map[string]any{"name": "ann"})
	c := e.joinMedia(token)
	e.eventually("participant joined", func() bool { return e.participantStatus(room, pid) == "joined" })
	e.stay(125*time.Second, c)
	c.send(map[string]any{"type": "leave"})
	e.eventually("participant left", func() bool { return e.participantStatus(room, pid) == "left" })
	e.eventually("usage charged to the wallet", func() bool {
		return e.do("GET", "/v1/billing/balance", e.Boot.APIKey, nil).must(t, 200).Str("available") == "9.991667"
	})

	b := browsertest.Start(t, browsertest.Options{})
	p := b.NewPage(t, "owner")
	e.browserSignIn(p, e.Boot.OwnerEmail, false)
	p.Click("Usage")
	p.WaitURL(pathRE(e, "/p/"+e.Boot.ProjectID+"/usage"))
	// The page's default range ends on the browser's today, and the
	// server's clock is its own (2026-11-22): the test picks the week.
	p.Fill("From", "2026-11-16")
	p.Fill("To", "2026-11-22")
	// The page keeps the last range's numbers while the new range loads:
	// wait for the chart of the chosen week.
	p.WaitJS("the chart of 2026-11-16 to 2026-11-22",
		`(document.querySelector("figure.chart svg")?.getAttribute("aria-label") ?? "").includes("2026-11-16 to 2026-11-22")`)
	p.WaitNoText("Loading…")
	cards := usageCards(p)
	for label, want := range map[string]string{"Participant-minutes": "2.1", "Participant-seconds": "125", "Rooms": "1", "Participants": "1"} {
		if cards[label] != want {
			t.Errorf("usage card %q = %q, want %q (cards %v)", label, cards[label], want, cards)
		}
	}
	var chart struct {
		Bars  int      `json:"bars"`
		Drawn []string `json:"drawn"`
		Label string   `json:"label"`
	}
	p.Eval(`(() => { const svg = document.querySelector("figure.chart svg"); const bars = [...svg.querySelectorAll("rect.bar")];
		return {bars: bars.length, label: svg.getAttribute("aria-label"),
			drawn: bars.filter((r) => Number(r.getAttribute("height")) > 0).map((r) => r.querySelector("title").textContent)}; })()`, &chart)
	if chart.Bars != 7 || len(chart.Drawn) != 1 || chart.Drawn[0] != "2026-11-22: 2.1 participant-minutes" {
		t.Errorf("chart: %d bars, drawn %q; want 7 days and one bar on 2026-11-22 of 2.1 participant-minutes", chart.Bars, chart.Drawn)
	}
	if !strings.Contains(chart.Label, "2026-11-16 to 2026-11-22: 2.1 in total") {
		t.Errorf("the chart's text alternative %q does not give the range and total", chart.Label)
	}
	p.Click("The numbers per day")
	p.WaitText("2026-11-22 2.1 125 1 1")
	p.Visit("usage-chart")

	p.Fill("From", "2026-10-01")
	p.Fill("To", "2026-10-07")
	p.WaitText("No finalized usage in this range yet.")
	p.WaitText("Participant-seconds 0") // the totals load on their own
	p.WaitNoText("Loading…")
	if cards := usageCards(p); cards["Participant-seconds"] != "0" {
		t.Errorf("usage cards of an empty week: %v", cards)
	}
	p.Visit("usage-empty-week")

	// The ledger: the opening credit and the usage charge, with balances.
	p.Click("Billing")
	p.WaitURL(pathRE(e, "/p/"+e.Boot.ProjectID+"/billing"))
	p.WaitText("opening credit")
	p.WaitText("125 participant-seconds")
	p.WaitNoText("Loading…")
	var ledger [][]string
	p.Eval(`[...[...document.querySelectorAll("table")].find((t) => t.caption && t.caption.textContent === "Ledger entries").querySelectorAll("tbody tr")]
		.map((tr) => [...tr.cells].map((c) => c.innerText.replace(/\s+/g, " ").trim()))`, &ledger)
	if len(ledger) != 2 {
		t.Fatalf("ledger rows %q, want the usage charge and the opening credit", ledger)
	}
	if got := ledger[0]; got[1] != "usage" || !strings.HasPrefix(got[2], "125 participant-seconds") || got[3] != "-0.008333 USD" || got[4] != "9.991667 USD" {
		t.Errorf("usage ledger row %q", got)
	}
	if got := ledger[1]; got[1] != "adjustment" || got[3] != "10.000000 USD" || got[4] != "10.000000 USD" {
		t.Errorf("opening credit ledger row %q", got)
	}
	if cards := usageCards(p); cards["Balance"] != "9.991667 USD" {
		t.Errorf("balance card %q, want 9.991667 USD", cards["Balance"])
	}
	p.Visit("billing-ledger")
}

// usageCards reads the page's cards: label -> value.
func usageCards(p *browsertest.Page) map[string]string {
	out := map[string]string{}
	p.Eval(`Object.fromEntries([...document.querySelectorAll(".card")].filter((c) => c.querySelector(".card-value"))
		.map((c) => [c.querySelector(".card-label").innerText.trim(), c.querySelector(".card-value").innerText.trim()]))`, &out)
	return out
}

func TestDashboardBrowserWorkspace(t *testing.T) {
	e := start(t)
	acct, prj := e.Boot.AccountID, e.Boot.ProjectID
	b := browsertest.Start(t, browsertest.Options{})
	p := b.NewPage(t, "owner")
	e.browserSignIn(p, e.Boot.OwnerEmail, false)
	session := sessionIn(t, p)

	// The profile: a display name, and a new workspace within the cap.
	p.Click("Profile and sessions")
	p.WaitURL(pathRE(e, "/account"))
	p.WaitText("You own 1 of at most 10 workspaces.")
	p.Fill("Display name", "Ann Owner")
	p.Click("Save")
	p.WaitText("Saved.")
	if name := tmObj(e.me(session).JSON, "user")["name"]; name != "Ann Owner" {
		t.Errorf("display name after saving: %v", name)
	}
	if !p.Has("Ann Owner") { // the top bar's link to the profile
		t.Errorf("the top bar does not show the new display name:\n%s", p.Text())
	}
	p.Visit("profile-named")
	p.Fill("New workspace name (optional)", "Side project")
	p.Click("Create workspace")
	p.WaitURL(`/p/prj_[a-z0-9]+/rooms$`)
	p.WaitText("No rooms yet")
	var side string
	for _, a := range e.tmAccounts(session) {
		if a["name"] == "Side project" && a["role"] == "owner" {
			side = a["id"].(string)
		}
	}
	if side == "" || strings.Contains(p.URL(), prj) || p.Value("Workspace") != side {
		t.Fatalf("after creating a workspace: at %s, workspace %q selected, Side project is %q", p.URL(), p.Value("Workspace"), side)
	}
	// Up to the cap: the page says so and offers no more.
	for i := 3; i <= 10; i++ {
		e.do("POST", "/v1/accounts", session, map[string]any{"name": fmt.Sprintf("Workspace %d", i)}).must(t, 201)
	}
	p.Go(e.Base + "/account")
	p.WaitText("You own 10 of at most 10 workspaces, the most a person may own.")
	var disabled bool
	p.Eval(`document.querySelector("[data-action=create-workspace]").disabled`, &disabled)
	if !disabled {
		t.Error("Create workspace is enabled at the cap of owned workspaces")
	}
	p.Visit("profile-workspace-cap")

	// Settings: rename the workspace.
	p.Go(e.Base + "/a/" + acct + "/settings")
	p.WaitText("Workspace settings")
	p.Fill("Workspace name", "Acme")
	p.Click("Save")
	p.WaitText("Saved.")
	if got := e.tmAccount(session, acct)["name"]; got != "Acme" {
		t.Errorf("workspace name after renaming: %v", got)
	}
	var switcher string
	p.Eval(`document.querySelector(".switcher select").selectedOptions[0].textContent`, &switcher)
	if switcher != "Acme (Owner)" {
		t.Errorf("the workspace switcher shows %q, want Acme (Owner)", switcher)
	}
	p.Visit("settings-renamed")

	// Projects: the only active project cannot be archived, said in words.
	p.Click("Projects")
	p.WaitURL(pathRE(e, "/a/"+acct+"/projects"))
	p.Allow(409, "/v1/accounts/"+acct+"/projects/")
	p.Click("Archive", "Default project")
	p.Click("Yes, archive", "Default project")
	lastProject := "A workspace keeps at least one active project. Create another project before archiving this one."
	p.WaitText(lastProject)
	p.Visit("projects-last-project")

	// Create a project and rename it.
	p.Fill("New project name", "Second")
	p.Click("Create project")
	p.WaitText("Second")
	p.Click("Rename", "Second")
	p.Fill("New name for Second", "Staging")
	p.Click("Save", "New name for Second")
	p.WaitText("Staging")
	p.WaitNoText("New name for Second")
	var staging string
	for _, pr := range tmAccountProjects(e, session, acct) {
		if pr["name"] == "Staging" {
			staging = pr["id"].(string)
		}
	}
	if staging == "" {
		t.Fatalf("no project Staging after the rename: %v", tmAccountProjects(e, session, acct))
	}
	p.Visit("projects-renamed")

	// A project with a room not yet ended cannot be archived.
	live := e.createRoom(map[string]any{"name": "Live"})
	p.Click("Archive", "Default project")
	p.Click("Yes, archive", "Default project")
	p.WaitText("This project still has rooms that have not ended. Delete them (or let them expire), then archive it.")
	p.WaitNoText(lastProject)
	p.Visit("projects-active-rooms")

	// Staging has none: archived.
	p.Click("Archive", "Staging")
	p.Click("Yes, archive", "Staging")
	// The page's subtitle always says "archived ones count": wait for the
	// row's own status.
	p.WaitTextIn("archived", "Staging")
	if got := e.tmProjectOf(session, acct, staging)["status"]; got != "archived" {
		t.Errorf("Staging after archiving: %v", got)
	}
	p.Visit("projects-archived")

	// The workspace audit log has all of it.
	p.Click("Workspace audit log")
	p.WaitURL(pathRE(e, "/a/"+acct+"/audit-logs"))
	for _, action := range []string{"account.renamed", "project.created", "project.renamed", "project.archived"} {
		p.WaitText(action)
	}
	p.WaitText(`{"from":"Default workspace","to":"Acme"}`)
	p.Visit("workspace-audit-log")

	// The project's audit log: a key made and a room deleted by the owner.
	e.do("POST", "/v1/api-keys", session, map[string]any{"name": "ci", "scopes": []string{"rooms:read"}}, tmProject(prj)).must(t, 201)
	e.do("DELETE", "/v1/rooms/"+live, session, nil, tmProject(prj)).must(t, 200)
	p.Go(e.Base + "/p/" + prj + "/audit-logs")
	p.WaitText("api_key.created")
	p.WaitText("room.deleted")
	p.WaitText(tmObj(e.me(session).JSON, "user")["id"].(string)) // by the person, not a key
	p.Visit("project-audit-log")

	// The project's limits, as the server states them.
	p.Click("Limits")
	p.WaitURL(pathRE(e, "/p/"+prj+"/limits"))
	p.WaitText("max_active_rooms")
	limits := e.do("GET", "/v1/project/limits", session, nil, tmProject(prj)).must(t, 200).JSON
	var shown map[string]string
	p.Eval(`Object.fromEntries([...document.querySelectorAll("tbody tr")].map((tr) => [tr.cells[3].innerText.trim(), tr.cells[1].innerText.trim()]))`, &shown)
	for _, key := range []string{"max_active_rooms", "max_active_participants", "max_participants_per_room",
		"room_creates_per_minute", "participant_creates_per_minute", "connect_requests_per_minute"} {
		v, _ := limits[key].(float64)
		if want := strconv.FormatFloat(v, 'f', -1, 64); shown[key] != want {
			t.Errorf("limit %s shown as %q, the server says %s", key, shown[key], want)
		}
	}
	p.Visit("limits")
}

// tmAccountProjects are the projects of an account in GET /v1/me.
func tmAccountProjects(e *env, session, accountID string) []map[string]any {
	var out []map[string]any
	ps, _ := e.tmAccount(session, accountID)["projects"].([]any)
	for _, p := range ps {
		out = append(out, p.(map[string]any))
	}
	return out
}

func TestDashboardBrowserSignOutEverywhere(t *testing.T) {
	e := start(t)
	b := browsertest.Start(t, browsertest.Options{})
	laptop := b.NewPage(t, "laptop")
	phone := b.NewPage(t, "phone")
	e.browserSignIn(laptop, e.Boot.OwnerEmail, false)
	e.browserSignIn(phone, e.Boot.OwnerEmail, false)
	phoneSession := sessionIn(t, phone)
	if sessionIn(t, laptop) == phoneSession {
		t.Fatal("two sign-ins share a session")
	}

	laptop.Click("Profile and sessions")
	laptop.WaitText("Signing out everywhere ends every session of yours")
	laptop.Click("Sign out everywhere")
	laptop.WaitURL(pathRE(e, "/sign-in"))
	laptop.WaitText("E-mail me a sign-in link")
	if _, kept := laptop.Storage()["local:rtcd.session"]; kept {
		t.Error("the laptop still keeps its session after signing out everywhere")
	}

	// The phone's session ended too: its next request is refused, and it
	// is back at the sign-in page.
	tmDetails(t, e.do("GET", "/v1/me", phoneSession, nil), 401, "authentication_failed")
	phone.Allow(401, "/v1/")
	phone.Click("Usage")
	phone.WaitURL(pathRE(e, "/sign-in"))
	phone.WaitText("E-mail me a sign-in link")
	if _, kept := phone.Storage()["local:rtcd.session"]; kept {
		t.Error("the phone still keeps its ended session")
	}
	phone.Visit("signed-out-elsewhere")
}

func TestDashboardBrowserGoogle(t *testing.T) {
	e, m := ggStart(t)
	b := browsertest.Start(t, browsertest.Options{})

	// A person new to rtcd: "Sign in with Google", the provider, back at
	// /sign-in/google, signed in to a workspace of their own.
	p := b.NewPage(t, "gina")
	p.Go(e.Base + "/sign-in")
	p.WaitText("Sign in with Google")
	p.Visit("sign-in-with-google")
	m.QueueUser(&mockoidc.MockUser{Subject: "google-sub-gina", Email: "Gina@Example.com", EmailVerified: true})
	p.Click("Sign in with Google")
	p.WaitURL(`/p/prj_[a-z0-9]+/rooms$`)
	p.WaitText("No rooms yet")
	p.WaitText("gina@example.com")
	if u := p.URL(); strings.Contains(u, "code=") || strings.Contains(u, "state=") {
		t.Errorf("the provider's code or state is left in the address bar: %s", u)
	}
	me := e.me(sessionIn(t, p))
	if got := tmObj(me.JSON, "user")["email"]; got != "gina@example.com" {
		t.Errorf("signed in as %v", got)
	}
	if accts, _ := me.JSON["accounts"].([]any); len(accts) != 1 || accts[0].(map[string]any)["role"] != "owner" {
		t.Errorf("a new Google user's workspaces: %v", accts)
	}
	p.Visit("google-signed-in")

	// A callback this tab did not start (a code and state from someone
	// else's login, as a forged link would carry) is refused in words and
	// never exchanged: the code still works for the login it belongs to.
	state := ggState(t)
	code := e.ggAuthorize(m, state, &mockoidc.MockUser{Subject: "google-sub-mallory", Email: "mallory@example.com", EmailVerified: true})
	victim := b.NewPage(t, "victim")
	victim.Go(e.Base + "/sign-in/google?code=" + url.QueryEscape(code) + "&state=" + url.QueryEscape(state))
	victim.WaitText("This sign-in was not started in this browser tab, so it was not completed. Start again.")
	if _, kept := victim.Storage()["local:rtcd.session"]; kept {
		t.Error("a callback with a foreign state signed the browser in")
	}
	if u := victim.URL(); strings.Contains(u, "code=") {
		t.Errorf("the foreign code is left in the address bar: %s", u)
	}
	victim.Visit("google-foreign-state")
	e.ggSignIn(code, state, "").must(t, 200)
}
