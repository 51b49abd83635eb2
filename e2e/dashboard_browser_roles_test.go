package e2e

// The web dashboard's role matrix in a real Chromium: the owner, an admin
// and a member of one workspace sign in through the sign-in page and visit
// every page. What each is offered there (every control that asks the
// server to change something, named by its data-action) must be exactly
// what the server allows their role: no button the server would refuse,
// and a button for every action it allows.
//
// The expected answers come from the server, not from a copy of roles.ts:
// after the visits, each action's API route is called with that person's
// own browser session, on a fresh target made for the purpose (so an
// allowed probe never changes what the pages showed), and 2xx counts as
// allowed, 403 permission_denied as refused. Anything else means the probe
// itself is wrong and fails the test.
//
// The actions, their data-action names and the routes they call:
//
//	create-room                  POST   /v1/rooms                                   (rooms; the form's submit too)
//	delete-room                  DELETE /v1/rooms/{room}                            (room)
//	add-participant              POST   /v1/rooms/{room}/participants               (room)
//	remove-participant           DELETE /v1/rooms/{room}/participants/{participant} (room)
//	create-api-key               POST   /v1/api-keys                                (API keys)
//	revoke-api-key               DELETE /v1/api-keys/{key}                          (API keys)
//	add-webhook-endpoint         POST   /v1/webhook-endpoints                       (webhooks)
//	disable-webhook-endpoint     DELETE /v1/webhook-endpoints/{endpoint}            (webhooks)
//	retry-delivery               POST   /v1/webhook-endpoints/{e}/deliveries/{d}/retry (endpoint deliveries)
//	top-up                       POST   /v1/billing/topups                          (billing)
//	invite                       POST   /v1/accounts/{a}/invitations                (team)
//	revoke-invitation            DELETE /v1/accounts/{a}/invitations/{invitation}   (team)
//	remove <role>                DELETE /v1/accounts/{a}/members/{user}             (team: another member's row)
//	leave                        DELETE /v1/accounts/{a}/members/{own user}         (team: one's own row)
//	change-role <role> to <role> PATCH  /v1/accounts/{a}/members/{user} {"role"}    (team: an option of a row's role select)
//	change-role self to <role>   PATCH  /v1/accounts/{a}/members/{own user}         (team: one's own row)
//	create-project               POST   /v1/accounts/{a}/projects                   (projects)
//	rename-project               PATCH  /v1/accounts/{a}/projects/{p}               (projects)
//	archive-project              DELETE /v1/accounts/{a}/projects/{p}               (projects)
//	read-workspace-audit-log     GET    /v1/accounts/{a}/audit-logs                 (the navigation's link)
//	rename-workspace             PATCH  /v1/accounts/{a}                            (settings)
//	save-display-name            PATCH  /v1/me                                      (profile)
//	create-workspace             POST   /v1/accounts                                (profile)
//	sign-out                     POST   /v1/auth/logout                             (profile, top bar)
//	sign-out-everywhere          POST   /v1/auth/logout-all                         (profile)
//
// One's own row is state the page knows: the only owner may neither leave
// nor give up the role (409 last_owner), so for those the page offers
// nothing and the probe's 409 last_owner counts as refused.

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"rtcd/internal/browsertest"
)

var roleNames = []string{"owner", "admin", "member"}

// uiOnlyButtons are the buttons that ask the server for no change: every
// other visible button must carry a data-action.
var uiOnlyButtons = []string{"Menu", "Cancel", "Refresh", "Copy", "Copied", "I have copied it", "All I hold", "None"}

// rolePerson is one member of the workspace, signed in in their own
// browser context.
type rolePerson struct {
	role, email, userID string
	page                *browsertest.Page
	session             string // the browser's own session token
}

// rolePage is a page every role visits: its path, the link that leads
// there from the page before ("": load the address), texts that show it has
// loaded, and the actions it can offer in the test's setup.
type rolePage struct {
	name, path, via string
	wait            []string
	candidates      func(role string) []string
}

// roleProbe calls an action's route as a person: the response decides
// whether their role is allowed it.
type roleProbe func(p *rolePerson) *resp

func TestDashboardBrowserRoles(t *testing.T) {
	rcv := newWHReceiver(t)
	rcv.on("/fail", whStatus(500))
	e := start(t, rcv.flags()...)
	rcv.setNow(e.clock.Now)
	acct, prj := e.Boot.AccountID, e.Boot.ProjectID

	// --- the workspace as the pages show it -----------------------------
	owner := e.signIn(e.Boot.OwnerEmail) // the setup's own session
	_, adminID := e.tmJoin(owner, acct, "admin@example.com", "admin")
	_, memberID := e.tmJoin(owner, acct, "member@example.com", "member")
	e.tmInvitation(owner, acct, "pending@example.com", "member")
	probes := e.tmCreateProject(owner, acct, "Probes") // the probes' targets live here
	room := e.createRoom(map[string]any{"name": "Standup"})
	e.createParticipant(room, map[string]any{"name": "Ann"})
	failing := rcv.url("/fail")
	endpoint, _ := e.whCreate(failing, []string{"room.ended"})
	e.whRoomEnd(e.createRoom(map[string]any{"name": "Retro"}))
	e.eventually("a retrying delivery", func() bool {
		d := e.whDeliveries(endpoint)
		return len(d) == 1 && d[0]["status"] == "retrying"
	})

	people := []*rolePerson{
		{role: "owner", email: e.Boot.OwnerEmail, userID: e.tmUserID(owner)},
		{role: "admin", email: "admin@example.com", userID: adminID},
		{role: "member", email: "member@example.com", userID: memberID},
	}
	byRole := map[string]*rolePerson{}
	for _, p := range people {
		byRole[p.role] = p
	}

	shell := []string{"sign-out", "read-workspace-audit-log"}
	none := func(string) []string { return nil }
	pp := func(page string) string { return "/p/" + prj + "/" + page }
	ap := func(page string) string { return "/a/" + acct + "/" + page }
	pages := []rolePage{
		{"rooms", pp("rooms"), "", []string{"Standup", "Retro"}, func(string) []string { return []string{"create-room"} }},
		{"room", pp("rooms/" + room), "Standup", []string{"Ann", "Participants"},
			func(string) []string { return []string{"delete-room", "add-participant", "remove-participant"} }},
		{"usage", pp("usage"), "Usage", []string{"Participant-seconds", "No finalized usage in this range yet."}, none},
		{"api-keys", pp("api-keys"), "API keys", []string{"sk_live_…"}, func(string) []string { return []string{"create-api-key", "revoke-api-key"} }},
		{"webhooks", pp("webhooks"), "Webhooks", []string{failing}, func(string) []string { return []string{"add-webhook-endpoint", "disable-webhook-endpoint"} }},
		{"deliveries", pp("webhooks/" + endpoint), failing, []string{failing, "room.ended", "retrying"}, func(string) []string { return []string{"retry-delivery"} }},
		{"audit-log", pp("audit-logs"), "Audit log", []string{"webhook_endpoint.created"}, none},
		{"limits", pp("limits"), "Limits", []string{"max_active_rooms"}, none},
		{"billing", pp("billing"), "Billing", []string{"Balance", "opening credit", "No top-ups yet."}, func(string) []string { return []string{"top-up"} }},
		{"team", ap("team"), "Team", []string{"member@example.com", "admin@example.com"}, teamCandidates},
		{"projects", ap("projects"), "Projects", []string{"Probes", "Default project"},
			func(string) []string { return []string{"create-project", "rename-project", "archive-project"} }},
		{"workspace-audit-log", ap("audit-logs"), "Workspace audit log", nil, none},
		{"settings", ap("settings"), "Settings", []string{"Workspace settings"}, func(string) []string { return []string{"rename-workspace"} }},
		{"profile", "/account", "Profile and sessions", []string{"Your profile"},
			func(string) []string {
				return []string{"save-display-name", "create-workspace", "sign-out", "sign-out-everywhere"}
			}},
	}

	// --- what each person is offered -----------------------------------
	b := browsertest.Start(t, browsertest.Options{})
	shown := map[string]map[string][]string{} // role -> page -> actions
	for _, p := range people {
		p.page = b.NewPage(t, p.role)
		e.browserSignIn(p.page, p.email, false)
		p.session = p.page.Storage()["local:rtcd.session"]
		if !strings.HasPrefix(p.session, "rtc_us_") {
			t.Fatalf("%s: no session in the browser's storage: %v", p.role, p.page.Storage())
		}
		shown[p.role] = map[string][]string{}
		for _, pg := range pages {
			// Like a person: by the page's own links, so the page is
			// not reloaded (the member has no link to the workspace's
			// audit log and types its address).
			if pg.via == "" || (pg.name == "workspace-audit-log" && p.role == "member") {
				p.page.Go(e.Base + pg.path)
			} else {
				p.page.Click(pg.via)
			}
			p.page.WaitURL("^" + regexp.QuoteMeta(e.Base+pg.path) + "$")
			wait := pg.wait
			if pg.name == "workspace-audit-log" {
				if p.role == "member" {
					// The page asks, and shows the server's refusal in words.
					p.page.Allow(403, "/audit-logs")
					wait = []string{"Your role does not allow this."}
				} else {
					wait = []string{"invitation.created", "project.created"}
				}
			}
			for _, w := range wait {
				p.page.WaitText(w)
			}
			p.page.WaitNoText("Loading…")
			p.page.Visit(pg.name)
			shown[p.role][pg.name] = p.page.Actions()
			for _, words := range p.page.UnnamedButtons() {
				if !slices.Contains(uiOnlyButtons, words) {
					t.Errorf("%s on %s: the button %q has no data-action: name the action it asks for", p.role, pg.name, words)
				}
			}
		}
		// Nothing more from this page: its session is probed (and ended) below.
		p.page.Go("about:blank")
	}

	// --- what the server allows each role ------------------------------
	hdr := tmProject(probes)
	asOwner := func(method, path string, body any) *resp {
		return e.do(method, path, owner, body, hdr)
	}
	created := func(r *resp) string { return r.must(t, 201).Str("id") }
	retryEndpoint := created(asOwner("POST", "/v1/webhook-endpoints", map[string]any{"url": failing, "events": []string{"room.ended"}}))
	probeRoom := func() string { return created(asOwner("POST", "/v1/rooms", map[string]any{})) }
	probeRoomEnd := probeRoom()
	asOwner("DELETE", "/v1/rooms/"+probeRoomEnd, nil).must(t, 200)
	var delivery string
	e.eventually("a retrying delivery of the probes' project", func() bool {
		d := e.do("GET", "/v1/webhook-endpoints/"+retryEndpoint+"/deliveries", owner, nil, hdr).must(t, 200).Data()
		if len(d) > 0 && d[0]["status"] == "retrying" {
			delivery = d[0]["id"].(string)
		}
		return delivery != ""
	})
	invited := 0
	invite := func(role string) *resp {
		invited++
		return e.invite(owner, acct, fmt.Sprintf("probe%d@example.com", invited), role)
	}
	scratch := newScratchMembers(e, owner, acct)
	projectName := "Probes"

	probeFor := map[string]roleProbe{
		"create-room": func(p *rolePerson) *resp { return e.do("POST", "/v1/rooms", p.session, map[string]any{}, hdr) },
		"delete-room": func(p *rolePerson) *resp { return e.do("DELETE", "/v1/rooms/"+probeRoom(), p.session, nil, hdr) },
		"add-participant": func(p *rolePerson) *resp {
			return e.do("POST", "/v1/rooms/"+probeRoom()+"/participants", p.session, map[string]any{}, hdr)
		},
		"remove-participant": func(p *rolePerson) *resp {
			r := probeRoom()
			pid := created(asOwner("POST", "/v1/rooms/"+r+"/participants", map[string]any{}))
			return e.do("DELETE", "/v1/rooms/"+r+"/participants/"+pid, p.session, nil, hdr)
		},
		"create-api-key": func(p *rolePerson) *resp {
			return e.do("POST", "/v1/api-keys", p.session, map[string]any{"name": "probe", "scopes": []string{"rooms:read"}}, hdr)
		},
		"revoke-api-key": func(p *rolePerson) *resp {
			k := created(asOwner("POST", "/v1/api-keys", map[string]any{"name": "probe", "scopes": []string{"rooms:read"}}))
			return e.do("DELETE", "/v1/api-keys/"+k, p.session, nil, hdr)
		},
		"add-webhook-endpoint": func(p *rolePerson) *resp {
			// An event type nothing here emits: the probe's endpoints stay quiet.
			return e.do("POST", "/v1/webhook-endpoints", p.session, map[string]any{"url": rcv.url("/probe"), "events": []string{"payment.refunded"}}, hdr)
		},
		"disable-webhook-endpoint": func(p *rolePerson) *resp {
			ep := created(asOwner("POST", "/v1/webhook-endpoints", map[string]any{"url": rcv.url("/probe"), "events": []string{"payment.refunded"}}))
			return e.do("DELETE", "/v1/webhook-endpoints/"+ep, p.session, nil, hdr)
		},
		"retry-delivery": func(p *rolePerson) *resp {
			// A retrying delivery stays retrying when retried (the receiver fails).
			return e.do("POST", "/v1/webhook-endpoints/"+retryEndpoint+"/deliveries/"+delivery+"/retry", p.session, nil, hdr)
		},
		"top-up": func(p *rolePerson) *resp {
			return e.do("POST", "/v1/billing/topups", p.session, map[string]any{"amount": "25.00", "method": "checkout"}, hdr)
		},
		"invite": func(p *rolePerson) *resp {
			invited++
			return e.invite(p.session, acct, fmt.Sprintf("probe%d@example.com", invited), "member")
		},
		"revoke-invitation": func(p *rolePerson) *resp {
			inv := invite("member").must(t, 201).Str("id")
			return e.do("DELETE", "/v1/accounts/"+acct+"/invitations/"+inv, p.session, nil)
		},
		"create-project": func(p *rolePerson) *resp {
			return e.do("POST", "/v1/accounts/"+acct+"/projects", p.session, map[string]any{"name": "By " + p.role})
		},
		"rename-project": func(p *rolePerson) *resp {
			return e.do("PATCH", "/v1/accounts/"+acct+"/projects/"+probes, p.session, map[string]any{"name": projectName})
		},
		"archive-project": func(p *rolePerson) *resp {
			scrap := created(e.do("POST", "/v1/accounts/"+acct+"/projects", owner, map[string]any{"name": "Scrap"}))
			e.eventually("project "+scrap+" in GET /v1/me", func() bool { return e.tmProjectOf(owner, acct, scrap) != nil })
			return e.tmArchive(p.session, acct, scrap)
		},
		"read-workspace-audit-log": func(p *rolePerson) *resp {
			return e.do("GET", "/v1/accounts/"+acct+"/audit-logs", p.session, nil)
		},
		"rename-workspace": func(p *rolePerson) *resp {
			return e.do("PATCH", "/v1/accounts/"+acct, p.session, map[string]any{"name": "Default workspace"})
		},
		"save-display-name": func(p *rolePerson) *resp {
			return e.do("PATCH", "/v1/me", p.session, map[string]any{"name": "Probe " + p.role})
		},
		"create-workspace": func(p *rolePerson) *resp {
			return e.do("POST", "/v1/accounts", p.session, map[string]any{"name": p.role + "'s own"})
		},
		// The sign-outs end a spare session of the same person, made here.
		"sign-out": func(p *rolePerson) *resp { return e.do("POST", "/v1/auth/logout", e.signIn(p.email), nil) },
		"sign-out-everywhere": func(p *rolePerson) *resp {
			return e.do("POST", "/v1/auth/logout-all", e.signIn(p.email), nil)
		},
	}
	for _, target := range roleNames {
		target := target
		probeFor["remove "+target] = func(p *rolePerson) *resp {
			id := scratch.take(target)
			r := e.tmRemove(p.session, acct, id)
			if r.Status != 200 {
				scratch.put(target, id)
			}
			return r
		}
		for _, to := range roleNames {
			if to == target {
				continue
			}
			to := to
			probeFor["change-role "+target+" to "+to] = func(p *rolePerson) *resp {
				id := scratch.take(target)
				r := e.tmSetRole(p.session, acct, id, to)
				if r.Status == 200 {
					scratch.put(to, id)
				} else {
					scratch.put(target, id)
				}
				return r
			}
		}
	}

	allowed := map[string]map[string]bool{}  // role -> action -> allowed
	answer := map[string]map[string]string{} // role -> action -> what the server said
	record := func(p *rolePerson, action string, r *resp, stateRefusal bool) {
		if allowed[p.role] == nil {
			allowed[p.role], answer[p.role] = map[string]bool{}, map[string]string{}
		}
		switch {
		case r.Status >= 200 && r.Status < 300:
			allowed[p.role][action] = true
		case r.Status == 403 && r.ErrCode() == "permission_denied":
			allowed[p.role][action] = false
		case stateRefusal && r.Status == 409 && ggDetail(r, "reason") == "last_owner":
			allowed[p.role][action] = false
		default:
			t.Fatalf("%s: the probe of %q got neither 2xx nor 403: %d %s", p.role, action, r.Status, r.Raw)
		}
		answer[p.role][action] = fmt.Sprintf("%d", r.Status)
	}
	deferred := map[string]bool{"leave": true, "save-display-name": true, "create-workspace": true, "sign-out": true, "sign-out-everywhere": true}
	for _, p := range people {
		for _, action := range roleCandidates(pages, p.role, shell) {
			if deferred[action] || strings.HasPrefix(action, "change-role self") {
				continue
			}
			probe, ok := probeFor[action]
			if !ok {
				t.Fatalf("no probe for the action %q", action)
			}
			record(p, action, probe(p), false)
		}
	}
	// One's own row, in the state the pages showed: one owner, one admin,
	// one member. The admin's allowed self-demotion is undone before they
	// leave, so that "leave" is asked as an admin.
	scratch.removeAll()
	self := func(p *rolePerson, action string, call func() *resp) { record(p, action, call(), true) }
	for _, role := range []string{"owner", "member", "admin"} {
		p := byRole[role]
		for _, to := range roleNames {
			if to == role {
				continue
			}
			self(p, "change-role self to "+to, func() *resp { return e.tmSetRole(p.session, acct, p.userID, to) })
			if allowed[role]["change-role self to "+to] {
				e.tmSetRole(owner, acct, p.userID, role).must(t, 200)
			}
		}
		self(p, "leave", func() *resp { return e.tmRemove(p.session, acct, p.userID) })
	}
	// The person's own settings, last: signing out everywhere ends the
	// browser's session too.
	for _, p := range people {
		for _, action := range []string{"save-display-name", "create-workspace", "sign-out", "sign-out-everywhere"} {
			record(p, action, probeFor[action](p), false)
		}
		tmDetails(t, e.do("GET", "/v1/me", p.session, nil), 401, "authentication_failed")
	}

	// --- offered == allowed ----------------------------------------------
	for _, p := range people {
		for _, pg := range pages {
			got := uniqueSorted(shown[p.role][pg.name])
			cands := append(pg.candidates(p.role), shell...)
			var want []string
			for _, c := range cands {
				if allowed[p.role][c] {
					want = append(want, c)
				}
			}
			want = uniqueSorted(want)
			for _, a := range got {
				switch {
				case !slices.Contains(cands, a):
					t.Errorf("%s on %s offers %q, an action this test has no probe for: add it to the mapping", p.role, pg.name, a)
				case !allowed[p.role][a]:
					t.Errorf("%s on %s offers %q, which the server refuses their role (%s)", p.role, pg.name, a, answer[p.role][a])
				}
			}
			for _, a := range want {
				if !slices.Contains(got, a) {
					t.Errorf("%s on %s is not offered %q, which the server allows their role (%s)", p.role, pg.name, a, answer[p.role][a])
				}
			}
		}
		t.Logf("%s may: %s", p.role, strings.Join(allowedList(allowed[p.role]), ", "))
	}
	t.Logf("screenshots in %s", b.ScreenshotDir())
}

// teamCandidates are the team page's actions for role: invitations, and for
// every row (the other two people, by their role, and one's own) a removal
// and each role change.
func teamCandidates(role string) []string {
	out := []string{"invite", "revoke-invitation", "leave"}
	for _, target := range roleNames {
		for _, to := range roleNames {
			if to == target {
				continue
			}
			if target == role {
				out = append(out, "change-role self to "+to)
			} else {
				out = append(out, "change-role "+target+" to "+to)
			}
		}
		if target != role {
			out = append(out, "remove "+target)
		}
	}
	return out
}

// roleCandidates is every action role could be offered on any page.
func roleCandidates(pages []rolePage, role string, shell []string) []string {
	var out []string
	for _, pg := range pages {
		out = append(out, pg.candidates(role)...)
	}
	return uniqueSorted(append(out, shell...))
}

func uniqueSorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return slices.Compact(out)
}

func allowedList(m map[string]bool) []string {
	var out []string
	for a, ok := range m {
		if ok {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out
}

// scratchMembers are extra members the role-change and removal probes act
// on, by their current role, so that no probe touches the people whose
// pages were checked.
type scratchMembers struct {
	e       *env
	owner   string // an owner's session, which makes them
	account string
	byRole  map[string][]string
	n       int
}

func newScratchMembers(e *env, owner, account string) *scratchMembers {
	return &scratchMembers{e: e, owner: owner, account: account, byRole: map[string][]string{}}
}

// take returns a member with role, joining a new one when none is free.
func (s *scratchMembers) take(role string) string {
	s.e.t.Helper()
	if ids := s.byRole[role]; len(ids) > 0 {
		s.byRole[role] = ids[1:]
		return ids[0]
	}
	s.n++
	email := fmt.Sprintf("scratch%d@example.com", s.n)
	joinAs := role
	if role == "owner" {
		joinAs = "admin" // invitations offer admin or member; owners are made
	}
	s.e.invite(s.owner, s.account, email, joinAs).must(s.e.t, 201)
	_, token := s.e.mailLink(email, "invitation_token")
	id, _ := tmObj(s.e.signInResp(email, token).JSON, "user")["id"].(string)
	if role == "owner" {
		s.e.tmSetRole(s.owner, s.account, id, "owner").must(s.e.t, 200)
	}
	return id
}

// invite is tmInvite, moving the fake clock past the hour when the
// probes have used up the workspace's invitations per hour.
func (e *env) invite(session, account, email, role string) *resp {
	e.t.Helper()
	r := e.tmInvite(session, account, email, role)
	if r.Status == 429 {
		e.clock.Advance(time.Hour)
		r = e.tmInvite(session, account, email, role)
	}
	return r
}

// put returns a member, now with role, to the pool.
func (s *scratchMembers) put(role, id string) { s.byRole[role] = append(s.byRole[role], id) }

// removeAll takes every scratch member out of the workspace.
func (s *scratchMembers) removeAll() {
	s.e.t.Helper()
	for role, ids := range s.byRole {
		for _, id := range ids {
			s.e.tmRemove(s.owner, s.account, id).must(s.e.t, 200)
		}
		delete(s.byRole, role)
	}
}
