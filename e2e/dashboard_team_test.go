package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"rtcd/auth"
)

// Dashboard team features through the real server: invitations and their
// limits, the roles on project routes (session + X-Project-Id), members,
// projects and their archive, the workspace audit log, and the cap on owned
// workspaces.

// --- helpers (prefix tm) -----------------------------------------------------

// tmProject is the header that names a session's project on a project route.
func tmProject(projectID string) string { return "X-Project-Id: " + projectID }

// tmObj returns a nested object field of m.
func tmObj(m map[string]any, field string) map[string]any {
	o, _ := m[field].(map[string]any)
	return o
}

// tmUserID is the id of a session's user.
func (e *env) tmUserID(session string) string {
	e.t.Helper()
	id, _ := tmObj(e.me(session).JSON, "user")["id"].(string)
	if !strings.HasPrefix(id, "usr_") {
		e.t.Fatalf("user id %q", id)
	}
	return id
}

// tmAccounts is GET /v1/me's accounts of a session.
func (e *env) tmAccounts(session string) []map[string]any {
	e.t.Helper()
	arr, _ := e.me(session).JSON["accounts"].([]any)
	out := make([]map[string]any, 0, len(arr))
	for _, v := range arr {
		out = append(out, v.(map[string]any))
	}
	return out
}

// tmAccount is the account accountID of GET /v1/me, or nil.
func (e *env) tmAccount(session, accountID string) map[string]any {
	e.t.Helper()
	for _, a := range e.tmAccounts(session) {
		if a["id"] == accountID {
			return a
		}
	}
	return nil
}

// tmProjectOf is project projectID of the account in GET /v1/me, or nil.
func (e *env) tmProjectOf(session, accountID, projectID string) map[string]any {
	e.t.Helper()
	a := e.tmAccount(session, accountID)
	if a == nil {
		return nil
	}
	ps, _ := a["projects"].([]any)
	for _, p := range ps {
		if pm := p.(map[string]any); pm["id"] == projectID {
			return pm
		}
	}
	return nil
}

// tmInvite is POST /v1/accounts/{id}/invitations.
func (e *env) tmInvite(session, accountID, email, role string) *resp {
	e.t.Helper()
	body := map[string]any{"email": email}
	if role != "" {
		body["role"] = role
	}
	return e.do("POST", "/v1/accounts/"+accountID+"/invitations", session, body)
}

// tmInvitation invites email with role (201 required) and returns the
// invitation's id and the token its mail carries.
func (e *env) tmInvitation(session, accountID, email, role string) (id, token string) {
	e.t.Helper()
	r := e.tmInvite(session, accountID, email, role).must(e.t, 201)
	if r.Str("object") != "invitation" || r.Str("status") != "pending" || r.Str("email") != strings.ToLower(email) ||
		r.Str("account_id") != accountID || !strings.HasPrefix(r.Str("id"), "inv_") {
		e.t.Fatalf("invitation: %s", r.Raw)
	}
	if role != "" && r.Str("role") != role {
		e.t.Fatalf("invitation role %q, want %q: %s", r.Str("role"), role, r.Raw)
	}
	if strings.Contains(string(r.Raw), auth.InvitationTokenPrefix) {
		e.t.Fatalf("the invitation's token is in the API answer: %s", r.Raw)
	}
	_, token = e.mailLink(email, "invitation_token")
	if !strings.HasPrefix(token, auth.InvitationTokenPrefix) {
		e.t.Fatalf("invitation token %q lacks %s", token, auth.InvitationTokenPrefix)
	}
	return r.Str("id"), token
}

// tmJoin invites email with role and signs them in from the invitation:
// it returns their session and user id.
func (e *env) tmJoin(owner, accountID, email, role string) (session, userID string) {
	e.t.Helper()
	_, token := e.tmInvitation(owner, accountID, email, role)
	r := e.signInResp(email, token)
	joined := tmObj(r.JSON, "joined_account")
	if joined["id"] != accountID || joined["role"] != role {
		e.t.Fatalf("%s joined %v as %v, want %s as %s: %s", email, joined["id"], joined["role"], accountID, role, r.Raw)
	}
	if r.JSON["created_account"] != nil {
		e.t.Fatalf("%s signed in from an invitation and got a workspace of their own: %s", email, r.Raw)
	}
	session = r.Str("token")
	return session, tmObj(r.JSON, "user")["id"].(string)
}

// tmAlone signs up a person without an invitation: their own workspace.
func (e *env) tmAlone(email string) (session, accountID, projectID string) {
	e.t.Helper()
	r := e.signInResp(email, "")
	created := tmObj(r.JSON, "created_account")
	if created == nil || r.JSON["joined_account"] != nil {
		e.t.Fatalf("%s signed up alone: %s", email, r.Raw)
	}
	session = r.Str("token")
	accountID, _ = created["id"].(string)
	projectID = e.tmWaitProjects(session, accountID, 1)[0]
	if a, _ := e.firstAccount(session); a != accountID {
		e.t.Fatalf("created_account %v, GET /v1/me %s", accountID, a)
	}
	return session, accountID, projectID
}

// tmWaitProjects waits until GET /v1/me lists at least n projects of the
// account and returns their ids. A new project's actor publishes its record
// after the creation is answered (see TestDashboardTeamNewProjectUsableAtOnce);
// the other tests wait for it here so that they test their own subject.
func (e *env) tmWaitProjects(session, accountID string, n int) []string {
	e.t.Helper()
	var ids []string
	e.eventually(fmt.Sprintf("%d projects of %s in GET /v1/me", n, accountID), func() bool {
		ids = ids[:0]
		if a := e.tmAccount(session, accountID); a != nil {
			ps, _ := a["projects"].([]any)
			for _, p := range ps {
				ids = append(ids, p.(map[string]any)["id"].(string))
			}
		}
		return len(ids) >= n
	})
	return ids
}

// tmInvitations is the owner's or admin's list of a workspace's invitations.
func (e *env) tmInvitations(session, accountID string) []map[string]any {
	e.t.Helper()
	return e.do("GET", "/v1/accounts/"+accountID+"/invitations?limit=100", session, nil).must(e.t, 200).Data()
}

// tmInvitationByID finds an invitation in the list.
func (e *env) tmInvitationByID(session, accountID, id string) map[string]any {
	e.t.Helper()
	for _, inv := range e.tmInvitations(session, accountID) {
		if inv["id"] == id {
			return inv
		}
	}
	e.t.Fatalf("invitation %s is not listed", id)
	return nil
}

// tmMembers is GET /v1/accounts/{id}/members (limit 100).
func (e *env) tmMembers(session, accountID string) []map[string]any {
	e.t.Helper()
	return e.do("GET", "/v1/accounts/"+accountID+"/members?limit=100", session, nil).must(e.t, 200).Data()
}

// tmRoleOf is a member's role in the members list ("" when not a member).
func (e *env) tmRoleOf(session, accountID, userID string) string {
	e.t.Helper()
	for _, m := range e.tmMembers(session, accountID) {
		if m["user_id"] == userID {
			return m["role"].(string)
		}
	}
	return ""
}

// tmSetRole is PATCH /v1/accounts/{id}/members/{user_id}.
func (e *env) tmSetRole(session, accountID, userID, role string) *resp {
	e.t.Helper()
	return e.do("PATCH", "/v1/accounts/"+accountID+"/members/"+userID, session, map[string]any{"role": role})
}

// tmRemove is DELETE /v1/accounts/{id}/members/{user_id}.
func (e *env) tmRemove(session, accountID, userID string) *resp {
	e.t.Helper()
	return e.do("DELETE", "/v1/accounts/"+accountID+"/members/"+userID, session, nil)
}

// tmCreateProject creates a project (201 required) and returns its id.
func (e *env) tmCreateProject(session, accountID, name string) string {
	e.t.Helper()
	r := e.do("POST", "/v1/accounts/"+accountID+"/projects", session, map[string]any{"name": name}).must(e.t, 201)
	if r.Str("object") != "project" || r.Str("name") != name || r.Str("status") != "active" || r.Str("account_id") != accountID ||
		!strings.HasPrefix(r.Str("id"), "prj_") || r.JSON["archived_at"] != nil {
		e.t.Fatalf("created project: %s", r.Raw)
	}
	id := r.Str("id")
	e.eventually("project "+id+" in GET /v1/me", func() bool { return e.tmProjectOf(session, accountID, id) != nil })
	return id
}

// tmArchive is DELETE /v1/accounts/{id}/projects/{project_id}.
func (e *env) tmArchive(session, accountID, projectID string) *resp {
	e.t.Helper()
	return e.do("DELETE", "/v1/accounts/"+accountID+"/projects/"+projectID, session, nil)
}

// tmAudit is the workspace audit log (limit 100), newest first.
func (e *env) tmAudit(session, accountID string) []map[string]any {
	e.t.Helper()
	return e.do("GET", "/v1/accounts/"+accountID+"/audit-logs?limit=100", session, nil).must(e.t, 200).Data()
}

// tmActions are the actions of audit entries, in order.
func tmActions(entries []map[string]any) []string {
	out := make([]string, 0, len(entries))
	for _, en := range entries {
		s, _ := en["action"].(string)
		out = append(out, s)
	}
	return out
}

// tmFindAudit returns the newest entry with action and target id.
func tmFindAudit(entries []map[string]any, action, targetID string) map[string]any {
	for _, en := range entries {
		if en["action"] == action && tmObj(en, "target")["id"] == targetID {
			return en
		}
	}
	return nil
}

// tmDetails requires the error envelope (status, code) and returns details.
func tmDetails(t *testing.T, r *resp, status int, code string) map[string]any {
	t.Helper()
	return erRequireEnvelope(t, r, status, code)
}

// --- invitations ---------------------------------------------------------------

func TestDashboardInvitationFlow(t *testing.T) {
	e := start(t)
	acct := e.Boot.AccountID
	owner := e.signIn(e.Boot.OwnerEmail)
	ownerID := e.tmUserID(owner)

	// The owner invites bob as a member; the mail carries the token.
	bobInv, bobToken := e.tmInvitation(owner, acct, "bob@example.com", "member")
	inv := e.tmInvitationByID(owner, acct, bobInv)
	if inv["status"] != "pending" || inv["invited_by"] != ownerID || inv["closed_at"] != nil || inv["role"] != "member" {
		t.Fatalf("listed invitation: %v", inv)
	}
	created, err1 := time.Parse(time.RFC3339Nano, inv["created_at"].(string))
	expires, err2 := time.Parse(time.RFC3339Nano, inv["expires_at"].(string))
	if err1 != nil || err2 != nil || expires.Sub(created) != 7*24*time.Hour {
		t.Fatalf("invitation valid from %v to %v, want 7 days", inv["created_at"], inv["expires_at"])
	}

	// Bob signs in from the invitation: he joins the owner's workspace and
	// gets none of his own.
	r := e.signInResp("bob@example.com", bobToken)
	joined := tmObj(r.JSON, "joined_account")
	if joined["id"] != acct || joined["role"] != "member" || r.JSON["created_account"] != nil {
		t.Fatalf("bob's sign-in: %s", r.Raw)
	}
	bob := r.Str("token")
	bobID := tmObj(r.JSON, "user")["id"].(string)
	if accts := e.tmAccounts(bob); len(accts) != 1 || accts[0]["id"] != acct || accts[0]["role"] != "member" {
		t.Fatalf("bob's workspaces: %v", accts)
	}
	if inv := e.tmInvitationByID(owner, acct, bobInv); inv["status"] != "accepted" || inv["closed_at"] == nil {
		t.Fatalf("accepted invitation listed as %v", inv)
	}
	if e.tmRoleOf(owner, acct, bobID) != "member" {
		t.Fatal("bob is not listed as a member")
	}
	// The token is used up.
	tmDetails(t, e.do("POST", "/v1/invitations/accept", bob, map[string]any{"invitation_token": bobToken}), 404, "invalid_request")

	// Inviting a member again (in any case) is a conflict.
	for _, addr := range []string{"bob@example.com", "BOB@Example.com"} {
		d := tmDetails(t, e.tmInvite(owner, acct, addr, "member"), 409, "conflict")
		if d["reason"] != "already_member" {
			t.Fatalf("re-inviting a member: details %v", d)
		}
	}

	// Carol is invited but signs in without the link: she gets her own
	// workspace and the invitation stays open.
	carolInv, carolToken := e.tmInvitation(owner, acct, "carol@example.com", "admin")
	carol, carolAcct, _ := e.tmAlone("carol@example.com")
	if carolAcct == acct {
		t.Fatal("carol's own workspace is the inviting one")
	}
	if accts := e.tmAccounts(carol); len(accts) != 1 || accts[0]["id"] != carolAcct || accts[0]["role"] != "owner" {
		t.Fatalf("carol's workspaces: %v", accts)
	}
	if inv := e.tmInvitationByID(owner, acct, carolInv); inv["status"] != "pending" {
		t.Fatalf("an open invitation changed by a plain sign-in: %v", inv)
	}

	// Dave's invitation cannot be accepted by carol.
	daveInv, daveToken := e.tmInvitation(owner, acct, "dave@example.com", "member")
	d := tmDetails(t, e.do("POST", "/v1/invitations/accept", carol, map[string]any{"invitation_token": daveToken}), 403, "permission_denied")
	if d["reason"] != "invitation_email_mismatch" {
		t.Fatalf("accepting another's invitation: details %v", d)
	}
	if inv := e.tmInvitationByID(owner, acct, daveInv); inv["status"] != "pending" {
		t.Fatalf("dave's invitation after carol's attempt: %v", inv)
	}
	if e.tmAccount(carol, acct) != nil {
		t.Fatal("carol joined through dave's invitation")
	}
	// Nor does signing in with it as someone else join: gina gets her own.
	gr := e.signInResp("gina@example.com", daveToken)
	if gr.JSON["joined_account"] != nil || gr.JSON["created_account"] == nil {
		t.Fatalf("sign-in with another's invitation: %s", gr.Raw)
	}
	if e.tmAccount(gr.Str("token"), acct) != nil {
		t.Fatal("gina joined through dave's invitation")
	}
	if inv := e.tmInvitationByID(owner, acct, daveInv); inv["status"] != "pending" {
		t.Fatalf("dave's invitation after gina's sign-in: %v", inv)
	}

	// Carol accepts her own later.
	acc := e.do("POST", "/v1/invitations/accept", carol, map[string]any{"invitation_token": carolToken}).must(t, 200)
	if acc.Str("invitation_id") != carolInv || tmObj(acc.JSON, "joined_account")["id"] != acct || tmObj(acc.JSON, "joined_account")["role"] != "admin" {
		t.Fatalf("accept: %s", acc.Raw)
	}
	if accts := e.tmAccounts(carol); len(accts) != 2 || e.tmAccount(carol, acct)["role"] != "admin" || e.tmAccount(carol, carolAcct)["role"] != "owner" {
		t.Fatalf("carol's workspaces after accepting: %v", accts)
	}
	if inv := e.tmInvitationByID(owner, acct, carolInv); inv["status"] != "accepted" {
		t.Fatalf("carol's invitation after accepting: %v", inv)
	}
	tmDetails(t, e.do("POST", "/v1/invitations/accept", carol, map[string]any{"invitation_token": carolToken}), 404, "invalid_request")

	// Invalid tokens: malformed, well-formed but unknown, missing.
	unknown, err := auth.NewDashboardSecret(auth.InvitationTokenPrefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{"rtc_inv_nope", "garbage", unknown} {
		d := tmDetails(t, e.do("POST", "/v1/invitations/accept", carol, map[string]any{"invitation_token": tok}), 404, "invalid_request")
		if d["reason"] != "invitation_invalid" {
			t.Fatalf("accepting %q: details %v", tok, d)
		}
	}
	tmDetails(t, e.do("POST", "/v1/invitations/accept", carol, map[string]any{}), 400, "invalid_request")
	tmDetails(t, e.do("POST", "/v1/invitations/accept", "", map[string]any{"invitation_token": unknown}), 401, "authentication_failed")

	// Revoking dave's invitation makes its token unusable: for accepting,
	// and for joining at sign-in (he gets his own workspace instead).
	rv := e.do("DELETE", "/v1/accounts/"+acct+"/invitations/"+daveInv, owner, nil).must(t, 200)
	if rv.Str("status") != "revoked" || rv.Str("id") != daveInv || rv.JSON["closed_at"] == nil {
		t.Fatalf("revoke: %s", rv.Raw)
	}
	if again := e.do("DELETE", "/v1/accounts/"+acct+"/invitations/"+daveInv, owner, nil).must(t, 200); again.Str("status") != "revoked" {
		t.Fatalf("second revoke: %s", again.Raw)
	}
	dr := e.signInResp("dave@example.com", daveToken)
	if dr.JSON["joined_account"] != nil || dr.JSON["created_account"] == nil {
		t.Fatalf("sign-in with a revoked invitation: %s", dr.Raw)
	}
	dave := dr.Str("token")
	if e.tmAccount(dave, acct) != nil {
		t.Fatal("dave joined through a revoked invitation")
	}
	d = tmDetails(t, e.do("POST", "/v1/invitations/accept", dave, map[string]any{"invitation_token": daveToken}), 404, "invalid_request")
	if d["reason"] != "invitation_invalid" {
		t.Fatalf("accepting a revoked invitation: details %v", d)
	}
	d = tmDetails(t, e.do("DELETE", "/v1/accounts/"+acct+"/invitations/inv_doesnotexist", owner, nil), 404, "invalid_request")
	if d["reason"] != "invitation_not_found" {
		t.Fatalf("revoking an unknown invitation: details %v", d)
	}

	// Inviting the same address again replaces the open invitation.
	erinOld, erinOldToken := e.tmInvitation(owner, acct, "erin@example.com", "member")
	erinNew, erinToken := e.tmInvitation(owner, acct, "erin@example.com", "admin")
	if erinOld == erinNew {
		t.Fatal("the second invitation kept the first one's id")
	}
	if inv := e.tmInvitationByID(owner, acct, erinOld); inv["status"] != "revoked" {
		t.Fatalf("the replaced invitation: %v", inv)
	}
	erin, _, _ := e.tmAlone("erin@example.com")
	tmDetails(t, e.do("POST", "/v1/invitations/accept", erin, map[string]any{"invitation_token": erinOldToken}), 404, "invalid_request")
	e.do("POST", "/v1/invitations/accept", erin, map[string]any{"invitation_token": erinToken}).must(t, 200)
	if a := e.tmAccount(erin, acct); a == nil || a["role"] != "admin" {
		t.Fatalf("erin in the workspace: %v", a)
	}

	// The list: newest first, every invitation with its status.
	list := e.tmInvitations(owner, acct)
	want := map[string]string{bobInv: "accepted", carolInv: "accepted", daveInv: "revoked", erinOld: "revoked", erinNew: "accepted"}
	if len(list) != len(want) {
		t.Fatalf("%d invitations listed, want %d: %v", len(list), len(want), list)
	}
	for i, inv := range list {
		if want[inv["id"].(string)] != inv["status"] {
			t.Errorf("invitation %v (%v) is %v, want %v", inv["id"], inv["email"], inv["status"], want[inv["id"].(string)])
		}
		if i > 0 && inv["created_at"].(string) > list[i-1]["created_at"].(string) {
			t.Errorf("invitations are not newest first: %v after %v", inv["created_at"], list[i-1]["created_at"])
		}
	}
	if list[0]["id"] != erinNew || list[len(list)-1]["id"] != bobInv {
		t.Fatalf("first %v, last %v; want %s and %s", list[0]["id"], list[len(list)-1]["id"], erinNew, bobInv)
	}
	pg := e.do("GET", "/v1/accounts/"+acct+"/invitations?limit=2", owner, nil).must(t, 200)
	if len(pg.Data()) != 2 || tmObj(pg.JSON, "page")["has_more"] != true {
		t.Fatalf("limit=2: %s", pg.Raw)
	}
	tmDetails(t, e.do("GET", "/v1/accounts/"+acct+"/invitations?limit=0", owner, nil), 400, "invalid_request")

	// Who may: carol and erin (admins) list and invite; bob (member) neither;
	// dave (outsider) sees no such workspace.
	e.do("GET", "/v1/accounts/"+acct+"/invitations", carol, nil).must(t, 200)
	tmDetails(t, e.do("GET", "/v1/accounts/"+acct+"/invitations", bob, nil), 403, "permission_denied")
	tmDetails(t, e.tmInvite(bob, acct, "frank@example.com", "member"), 403, "permission_denied")
	tmDetails(t, e.do("DELETE", "/v1/accounts/"+acct+"/invitations/"+erinNew, bob, nil), 403, "permission_denied")
	d = tmDetails(t, e.do("GET", "/v1/accounts/"+acct+"/invitations", dave, nil), 404, "invalid_request")
	if d["reason"] != "account_not_found" {
		t.Fatalf("an outsider listing invitations: details %v", d)
	}
	tmDetails(t, e.tmInvite(dave, acct, "frank@example.com", "member"), 404, "invalid_request")

	// Bad invitation bodies.
	for _, body := range []map[string]any{
		{"email": "frank@example.com", "role": "owner"},
		{"email": "frank@example.com", "role": "boss"},
		{"email": "not-an-address", "role": "member"},
		{"role": "member"},
	} {
		tmDetails(t, e.do("POST", "/v1/accounts/"+acct+"/invitations", owner, body), 400, "invalid_request")
	}
	// The default role is member.
	if r := e.tmInvite(owner, acct, "frank@example.com", "").must(t, 201); r.Str("role") != "member" {
		t.Fatalf("invitation without a role: %s", r.Raw)
	}
}

// An invitation expires after 7 days: its token then neither joins at
// sign-in nor can be accepted, and it is listed as expired.
func TestDashboardInvitationExpires(t *testing.T) {
	e := start(t)
	acct := e.Boot.AccountID
	owner := e.signIn(e.Boot.OwnerEmail)
	id, token := e.tmInvitation(owner, acct, "late@example.com", "member")
	e.clock.Advance(7*24*time.Hour - time.Minute)
	owner = e.signIn(e.Boot.OwnerEmail) // the first session idled out
	if inv := e.tmInvitationByID(owner, acct, id); inv["status"] != "pending" {
		t.Fatalf("before expiry: %v", inv)
	}
	e.clock.Advance(time.Minute)
	if inv := e.tmInvitationByID(owner, acct, id); inv["status"] != "expired" {
		t.Fatalf("after expiry: %v", inv)
	}
	r := e.signInResp("late@example.com", token)
	if r.JSON["joined_account"] != nil || r.JSON["created_account"] == nil {
		t.Fatalf("sign-in with an expired invitation: %s", r.Raw)
	}
	tmDetails(t, e.do("POST", "/v1/invitations/accept", r.Str("token"), map[string]any{"invitation_token": token}), 404, "invalid_request")
	// An expired invitation is no longer open: the same address can be
	// invited again.
	e.tmInvitation(owner, acct, "late@example.com", "member")
}

// 20 invitations per hour per account (429 with Retry-After, sliding
// hour), 50 open per account (409 quota_exceeded).
func TestDashboardInvitationLimits(t *testing.T) {
	e := start(t)
	acct := e.Boot.AccountID
	owner := e.signIn(e.Boot.OwnerEmail)
	n := 0
	invite := func() *resp {
		t.Helper()
		return e.tmInvite(owner, acct, fmt.Sprintf("lim%03d@example.com", n), "member")
	}
	created := func(k int) {
		t.Helper()
		for i := 0; i < k; i++ {
			invite().must(t, 201)
			n++
		}
	}
	// limited requires the next invitation to be refused by the hourly
	// account limit and returns its Retry-After.
	limited := func() time.Duration {
		t.Helper()
		r := invite()
		d := tmDetails(t, r, 429, "rate_limited")
		if d["limit_name"] != "invitations_per_hour_per_account" {
			t.Fatalf("429 details %v", d)
		}
		ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
		if err != nil || ra < 1 || ra > 3601 {
			t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
		}
		if r.Header.Get("X-RateLimit-Limit") != "20" || r.Header.Get("X-RateLimit-Remaining") != "0" {
			t.Fatalf("X-RateLimit headers %q/%q", r.Header.Get("X-RateLimit-Limit"), r.Header.Get("X-RateLimit-Remaining"))
		}
		if d["retry_after_seconds"] != float64(ra) {
			t.Fatalf("details.retry_after_seconds %v, Retry-After %d", d["retry_after_seconds"], ra)
		}
		return time.Duration(ra) * time.Second
	}

	created(20)
	if ra := limited(); ra < 59*time.Minute {
		t.Fatalf("Retry-After %v right after the 20th invitation", ra)
	}
	// The window slides: a minute before the hour is over it still holds,
	// and Retry-After says when it frees up.
	e.clock.Advance(59 * time.Minute)
	ra := limited()
	if ra > 2*time.Minute {
		t.Fatalf("Retry-After %v a minute before the hour is over", ra)
	}
	e.clock.Advance(ra)
	created(20) // 40 open
	e.clock.Advance(limited())
	created(10) // 50 open
	r := invite()
	d := tmDetails(t, r, 409, "quota_exceeded")
	if d["limit_name"] != "open_invitations_per_account" || d["limit"] != float64(50) {
		t.Fatalf("51st open invitation: details %v", d)
	}
	// Replacing an open invitation to the same address is not one more.
	e.tmInvite(owner, acct, "lim000@example.com", "admin").must(t, 201)
	// Revoking one frees a slot.
	list := e.tmInvitations(owner, acct)
	var pending []string
	for _, inv := range list {
		if inv["status"] == "pending" {
			pending = append(pending, inv["id"].(string))
		}
	}
	if len(pending) != 50 {
		t.Fatalf("%d pending invitations, want 50", len(pending))
	}
	e.do("DELETE", "/v1/accounts/"+acct+"/invitations/"+pending[len(pending)-1], owner, nil).must(t, 200)
	invite().must(t, 201)
	n++
	tmDetails(t, invite(), 409, "quota_exceeded")
	// The three hourly refusals are counted under the limit's name (the
	// open-invitations cap is a quota, not a rate limit).
	e.mfAwait("rtcd_rate_limit_rejections_total", mfLabels{"limit": "invitations_per_hour_per_account"}, 3)
}

// The hourly limit also holds per inviting user, over all their workspaces.
func TestDashboardInvitationUserLimit(t *testing.T) {
	e := start(t)
	acct := e.Boot.AccountID
	owner := e.signIn(e.Boot.OwnerEmail)
	admin, _ := e.tmJoin(owner, acct, "adm@example.com", "admin") // the owner's 1st
	other := e.do("POST", "/v1/accounts", owner, map[string]any{"name": "Second"}).must(t, 201).Str("id")
	for i := 0; i < 9; i++ {
		e.tmInvite(owner, acct, fmt.Sprintf("ua%02d@example.com", i), "member").must(t, 201)
	}
	for i := 0; i < 10; i++ {
		e.tmInvite(owner, other, fmt.Sprintf("ub%02d@example.com", i), "member").must(t, 201)
	}
	r := e.tmInvite(owner, other, "ub10@example.com", "member")
	d := tmDetails(t, r, 429, "rate_limited")
	if d["limit_name"] != "invitations_per_hour_per_user" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("the owner's 21st invitation: details %v, Retry-After %q", d, r.Header.Get("Retry-After"))
	}
	// Another admin of the first workspace (10 this hour) still can.
	e.tmInvite(admin, acct, "ua09@example.com", "member").must(t, 201)
	ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 3601 {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	e.clock.Advance(time.Duration(ra) * time.Second)
	e.tmInvite(owner, other, "ub10@example.com", "member").must(t, 201)
}

// --- workspaces -------------------------------------------------------------

// POST /v1/accounts: a user owns at most 10 workspaces.
func TestDashboardAccountsCap(t *testing.T) {
	e := start(t)
	solo, first, _ := e.tmAlone("solo@example.com")
	ids := map[string]bool{first: true}
	for i := 2; i <= 10; i++ {
		r := e.do("POST", "/v1/accounts", solo, map[string]any{"name": fmt.Sprintf("Workspace %d", i)}).must(t, 201)
		if r.Str("object") != "account" || r.Str("role") != "owner" || r.Str("name") != fmt.Sprintf("Workspace %d", i) || !strings.HasPrefix(r.Str("id"), "acct_") {
			t.Fatalf("created workspace: %s", r.Raw)
		}
		ids[r.Str("id")] = true
	}
	if len(ids) != 10 {
		t.Fatalf("%d distinct workspaces", len(ids))
	}
	d := tmDetails(t, e.do("POST", "/v1/accounts", solo, map[string]any{"name": "Eleventh"}), 409, "quota_exceeded")
	if d["limit"] != float64(10) {
		t.Fatalf("11th workspace: details %v", d)
	}
	tmDetails(t, e.do("POST", "/v1/accounts", solo, nil), 409, "quota_exceeded")
	for id := range ids {
		e.tmWaitProjects(solo, id, 1)
	}
	accts := e.tmAccounts(solo)
	if len(accts) != 10 {
		t.Fatalf("%d workspaces in GET /v1/me, want 10", len(accts))
	}
	for _, a := range accts {
		if !ids[a["id"].(string)] || a["role"] != "owner" {
			t.Fatalf("workspace %v", a)
		}
		ps, _ := a["projects"].([]any)
		if len(ps) != 1 {
			t.Fatalf("workspace %v has %d projects, want its first one", a["id"], len(ps))
		}
	}
	// A workspace without a name gets the default; an API key is no session.
	other := e.signIn(e.Boot.OwnerEmail)
	if r := e.do("POST", "/v1/accounts", other, nil).must(t, 201); r.Str("name") == "" {
		t.Fatalf("unnamed workspace: %s", r.Raw)
	}
	tmDetails(t, e.do("POST", "/v1/accounts", e.Boot.APIKey, map[string]any{"name": "x"}), 401, "authentication_failed")
	// Renaming: the owner can; another user sees no such workspace.
	r := e.do("PATCH", "/v1/accounts/"+first, solo, map[string]any{"name": "Renamed"}).must(t, 200)
	if r.Str("name") != "Renamed" || e.tmAccount(solo, first)["name"] != "Renamed" {
		t.Fatalf("rename: %s", r.Raw)
	}
	tmDetails(t, e.do("PATCH", "/v1/accounts/"+first, other, map[string]any{"name": "Mine"}), 404, "invalid_request")
}

// --- roles on project routes ---------------------------------------------------

func TestDashboardRoleMatrix(t *testing.T) {
	e := start(t, "--webhook-allow-private")
	acct, prj := e.Boot.AccountID, e.Boot.ProjectID
	owner := e.signIn(e.Boot.OwnerEmail)
	admin, adminID := e.tmJoin(owner, acct, "admin@example.com", "admin")
	member, _ := e.tmJoin(owner, acct, "member@example.com", "member")
	hdr := tmProject(prj)

	type check struct {
		method, path string
		body         any
		status       map[string]int // by role
	}
	all := func(s int) map[string]int { return map[string]int{"owner": s, "admin": s, "member": s} }
	managers := func(s int) map[string]int { return map[string]int{"owner": s, "admin": s, "member": 403} }
	checks := []check{
		{"GET", "/v1/rooms", nil, all(200)},
		{"POST", "/v1/rooms", map[string]any{}, all(201)},
		{"GET", "/v1/api-keys", nil, all(200)},
		{"POST", "/v1/api-keys", map[string]any{"name": "k", "scopes": []string{"rooms:read"}}, managers(201)},
		{"GET", "/v1/webhook-endpoints", nil, all(200)},
		{"POST", "/v1/webhook-endpoints", map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"room.ended"}}, managers(201)},
		{"GET", "/v1/billing/balance", nil, all(200)},
		{"GET", "/v1/billing/pricing", nil, all(200)},
		{"GET", "/v1/billing/ledger", nil, all(200)},
		{"GET", "/v1/billing/topups", nil, all(200)},
		{"POST", "/v1/billing/topups", map[string]any{"amount": "10.00"}, managers(201)},
		{"GET", "/v1/project/limits", nil, all(200)},
		{"GET", "/v1/audit-logs", nil, all(200)},
		{"GET", "/v1/usage/summary?from=2026-11-01&to=2026-11-30", nil, all(200)},
		{"GET", "/v1/system/info", nil, all(200)},
	}
	sessions := map[string]string{"owner": owner, "admin": admin, "member": member}
	rooms := map[string]string{}
	for _, role := range []string{"owner", "admin", "member"} {
		s := sessions[role]
		for _, c := range checks {
			r := e.do(c.method, c.path, s, c.body, hdr)
			want := c.status[role]
			if r.Status != want {
				t.Errorf("%s: %s %s = %d, want %d: %s", role, c.method, c.path, r.Status, want, r.Raw)
				continue
			}
			if want == 403 {
				d := tmDetails(t, r, 403, "permission_denied")
				if d["role"] != role || d["required_scope"] == nil {
					t.Errorf("%s: %s %s: details %v", role, c.method, c.path, d)
				}
			}
			if c.method == "POST" && c.path == "/v1/rooms" {
				rooms[role] = r.Str("id")
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Every role runs participants; a member cannot revoke keys or
	// disable endpoints.
	for role, s := range sessions {
		e.do("POST", "/v1/rooms/"+rooms[role]+"/participants", s, map[string]any{"name": role}, hdr).must(t, 201)
		e.do("DELETE", "/v1/rooms/"+rooms[role], s, nil, hdr).must(t, 200)
	}
	keyID := e.createKey(e.Boot.APIKey, "rooms:read").must(t, 201).Str("id")
	tmDetails(t, e.do("DELETE", "/v1/api-keys/"+keyID, member, nil, hdr), 403, "permission_denied")
	e.do("DELETE", "/v1/api-keys/"+keyID, admin, nil, hdr).must(t, 200)
	eps := e.do("GET", "/v1/webhook-endpoints", member, nil, hdr).must(t, 200).Data()
	if len(eps) != 2 {
		t.Fatalf("%d endpoints, want the owner's and the admin's", len(eps))
	}
	epID := eps[0]["id"].(string)
	tmDetails(t, e.do("DELETE", "/v1/webhook-endpoints/"+epID, member, nil, hdr), 403, "permission_denied")
	e.do("DELETE", "/v1/webhook-endpoints/"+epID, owner, nil, hdr).must(t, 200)
	// A key a session creates can do what the role can: everything here.
	full := e.do("POST", "/v1/api-keys", admin, map[string]any{"name": "full", "scopes": []string{"rooms:write", "rooms:read", "billing:write"}}, hdr).must(t, 201)
	e.do("GET", "/v1/rooms", full.Str("secret"), nil).must(t, 200)
	// The project's audit log names the person, not a key.
	var keyEntry map[string]any
	for _, en := range e.do("GET", "/v1/audit-logs?limit=100", member, nil, hdr).must(t, 200).Data() {
		if en["action"] == "api_key.created" && tmObj(en, "target")["id"] == full.Str("id") {
			keyEntry = en
		}
	}
	if keyEntry == nil || tmObj(keyEntry, "actor")["type"] != "user" || tmObj(keyEntry, "actor")["id"] != adminID {
		t.Fatalf("api_key.created by a session: %v", keyEntry)
	}

	// A session on a project route needs X-Project-Id.
	for _, s := range sessions {
		d := tmDetails(t, e.do("GET", "/v1/rooms", s, nil), 400, "invalid_request")
		if d["header"] != "X-Project-Id" {
			t.Fatalf("missing X-Project-Id: details %v", d)
		}
	}
	tmDetails(t, e.do("GET", "/v1/rooms", owner, nil, "X-Project-Id:"), 400, "invalid_request")

	// Someone else's project, a made-up one, garbage: 404.
	solo, soloAcct, soloPrj := e.tmAlone("solo@example.com")
	e.do("GET", "/v1/rooms", solo, nil, tmProject(soloPrj)).must(t, 200)
	for _, c := range []struct{ session, project string }{
		{owner, soloPrj}, {admin, soloPrj}, {member, soloPrj}, {solo, prj},
		{owner, "prj_doesnotexist0000000000"}, {owner, "garbage"}, {owner, "acct_" + strings.TrimPrefix(prj, "prj_")},
		{owner, soloAcct},
	} {
		d := tmDetails(t, e.do("GET", "/v1/rooms", c.session, nil, tmProject(c.project)), 404, "invalid_request")
		if d["reason"] != "project_not_found" {
			t.Fatalf("X-Project-Id %s: details %v", c.project, d)
		}
		tmDetails(t, e.do("POST", "/v1/rooms", c.session, map[string]any{}, tmProject(c.project)), 404, "invalid_request")
	}

	// Signed-out or unknown sessions: 401.
	unknown, err := auth.NewDashboardSecret(auth.SessionTokenPrefix)
	if err != nil {
		t.Fatal(err)
	}
	tmDetails(t, e.do("GET", "/v1/rooms", unknown, nil, hdr), 401, "authentication_failed")
	tmDetails(t, e.do("GET", "/v1/me", unknown, nil), 401, "authentication_failed")

	// Dashboard routes take no API key.
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/me"},
		{"POST", "/v1/accounts"},
		{"GET", "/v1/accounts/" + acct + "/members"},
		{"GET", "/v1/accounts/" + acct + "/invitations"},
		{"POST", "/v1/accounts/" + acct + "/projects"},
		{"GET", "/v1/accounts/" + acct + "/audit-logs"},
		{"POST", "/v1/invitations/accept"},
	} {
		for _, key := range []string{e.Boot.APIKey, ""} {
			r := e.do(c.method, c.path, key, map[string]any{}, hdr)
			tmDetails(t, r, 401, "authentication_failed")
			if r.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s: 401 without WWW-Authenticate", c.method, c.path)
			}
		}
	}
	// An API key on a project route ignores X-Project-Id.
	if r := e.do("GET", "/v1/rooms?limit=100", e.Boot.APIKey, nil, tmProject(soloPrj)).must(t, 200); len(r.Data()) != 3 {
		t.Fatalf("the bootstrap key with another X-Project-Id listed %d rooms, want its own 3", len(r.Data()))
	}
}

// --- members --------------------------------------------------------------------

func TestDashboardTeamMembers(t *testing.T) {
	e := start(t)
	acct, prj := e.Boot.AccountID, e.Boot.ProjectID
	hdr := tmProject(prj)
	owner := e.signIn(e.Boot.OwnerEmail)
	ownerID := e.tmUserID(owner)
	// Members are listed by when they joined (the clock's reading), newest
	// first: the clock moves between the joins.
	e.clock.Advance(time.Second)
	admin, adminID := e.tmJoin(owner, acct, "ann@example.com", "admin")
	e.clock.Advance(time.Second)
	member, memberID := e.tmJoin(owner, acct, "mo@example.com", "member")
	e.clock.Advance(time.Second)
	member2, member2ID := e.tmJoin(owner, acct, "mia@example.com", "member")
	outsider, _, _ := e.tmAlone("olga@example.com")

	// Any member lists the team, newest first.
	list := e.tmMembers(member, acct)
	if len(list) != 4 {
		t.Fatalf("%d members, want 4: %v", len(list), list)
	}
	wantOrder := []string{member2ID, memberID, adminID, ownerID}
	wantRole := []string{"member", "member", "admin", "owner"}
	wantEmail := []string{"mia@example.com", "mo@example.com", "ann@example.com", e.Boot.OwnerEmail}
	for i, m := range list {
		if m["object"] != "member" || m["user_id"] != wantOrder[i] || m["role"] != wantRole[i] || m["email"] != wantEmail[i] || m["joined_at"] == nil {
			t.Fatalf("member %d: %v, want %s (%s, %s)", i, m, wantOrder[i], wantEmail[i], wantRole[i])
		}
	}
	pg := e.do("GET", "/v1/accounts/"+acct+"/members?limit=4", owner, nil).must(t, 200)
	if len(pg.Data()) != 4 || tmObj(pg.JSON, "page")["has_more"] != false {
		t.Fatalf("exactly full page: %s", pg.Raw)
	}
	pg = e.do("GET", "/v1/accounts/"+acct+"/members?limit=3", owner, nil).must(t, 200)
	if len(pg.Data()) != 3 || tmObj(pg.JSON, "page")["has_more"] != true {
		t.Fatalf("limit=3: %s", pg.Raw)
	}
	tmDetails(t, e.do("GET", "/v1/accounts/"+acct+"/members?limit=101", owner, nil), 400, "invalid_request")

	// An outsider sees no such workspace.
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/accounts/" + acct + "/members", nil},
		{"PATCH", "/v1/accounts/" + acct + "/members/" + memberID, map[string]any{"role": "admin"}},
		{"DELETE", "/v1/accounts/" + acct + "/members/" + memberID, nil},
		{"GET", "/v1/accounts/" + acct + "/audit-logs", nil},
		{"PATCH", "/v1/accounts/" + acct, map[string]any{"name": "x"}},
		{"POST", "/v1/accounts/" + acct + "/projects", map[string]any{"name": "x"}},
		{"GET", "/v1/accounts/acct_doesnotexist/members", nil},
	} {
		d := tmDetails(t, e.do(c.method, c.path, outsider, c.body), 404, "invalid_request")
		if d["reason"] != "account_not_found" {
			t.Fatalf("outsider %s %s: details %v", c.method, c.path, d)
		}
	}

	// A member changes nobody.
	tmDetails(t, e.tmSetRole(member, acct, member2ID, "admin"), 403, "permission_denied")
	tmDetails(t, e.tmSetRole(member, acct, memberID, "admin"), 403, "permission_denied")
	tmDetails(t, e.tmRemove(member, acct, member2ID), 403, "permission_denied")
	tmDetails(t, e.tmRemove(member, acct, ownerID), 403, "permission_denied")

	// Bad requests.
	tmDetails(t, e.tmSetRole(owner, acct, memberID, "boss"), 400, "invalid_request")
	tmDetails(t, e.do("PATCH", "/v1/accounts/"+acct+"/members/"+memberID, owner, map[string]any{}), 400, "invalid_request")
	d := tmDetails(t, e.tmSetRole(owner, acct, "usr_doesnotexist", "admin"), 404, "invalid_request")
	if d["reason"] != "member_not_found" {
		t.Fatalf("unknown member: details %v", d)
	}
	tmDetails(t, e.tmRemove(owner, acct, "usr_doesnotexist"), 404, "invalid_request")

	// An admin changes members and admins, never owners.
	r := e.tmSetRole(admin, acct, memberID, "admin").must(t, 200)
	if r.Str("role") != "admin" || r.Str("user_id") != memberID {
		t.Fatalf("promotion: %s", r.Raw)
	}
	e.tmSetRole(admin, acct, memberID, "member").must(t, 200)
	e.tmSetRole(admin, acct, memberID, "member").must(t, 200) // unchanged: still 200
	tmDetails(t, e.tmSetRole(admin, acct, memberID, "owner"), 403, "permission_denied")
	tmDetails(t, e.tmSetRole(admin, acct, adminID, "owner"), 403, "permission_denied")
	tmDetails(t, e.tmSetRole(admin, acct, ownerID, "member"), 403, "permission_denied")
	tmDetails(t, e.tmSetRole(admin, acct, ownerID, "admin"), 403, "permission_denied")
	tmDetails(t, e.tmRemove(admin, acct, ownerID), 403, "permission_denied")
	if e.tmRoleOf(owner, acct, ownerID) != "owner" {
		t.Fatal("the owner's role changed")
	}

	// The last owner stays: neither demoted nor removed.
	for _, r := range []*resp{e.tmSetRole(owner, acct, ownerID, "admin"), e.tmSetRole(owner, acct, ownerID, "member"), e.tmRemove(owner, acct, ownerID)} {
		if d := tmDetails(t, r, 409, "conflict"); d["reason"] != "last_owner" {
			t.Fatalf("last owner: details %v", d)
		}
	}

	// With a second owner, the first may step down, and back.
	e.tmSetRole(owner, acct, adminID, "owner").must(t, 200)
	if a := e.tmAccount(admin, acct); a["role"] != "owner" {
		t.Fatalf("ann's role in GET /v1/me: %v", a["role"])
	}
	e.tmSetRole(admin, acct, ownerID, "admin").must(t, 200) // ann, now owner, demotes the first owner
	if d := tmDetails(t, e.tmSetRole(admin, acct, adminID, "admin"), 409, "conflict"); d["reason"] != "last_owner" {
		t.Fatalf("ann as the last owner: details %v", d)
	}
	e.tmSetRole(admin, acct, ownerID, "owner").must(t, 200)
	e.tmSetRole(admin, acct, adminID, "admin").must(t, 200) // ann steps down herself
	if e.tmRoleOf(member, acct, adminID) != "admin" || e.tmRoleOf(member, acct, ownerID) != "owner" {
		t.Fatal("roles after the round trip")
	}

	// A role change takes effect at once on project routes.
	e.do("POST", "/v1/api-keys", admin, map[string]any{"name": "a", "scopes": []string{"rooms:read"}}, hdr).must(t, 201)
	e.tmSetRole(owner, acct, adminID, "member").must(t, 200)
	d = tmDetails(t, e.do("POST", "/v1/api-keys", admin, map[string]any{"name": "b", "scopes": []string{"rooms:read"}}, hdr), 403, "permission_denied")
	if d["role"] != "member" {
		t.Fatalf("demoted admin: details %v", d)
	}
	tmDetails(t, e.tmSetRole(admin, acct, memberID, "admin"), 403, "permission_denied")
	e.tmSetRole(owner, acct, adminID, "admin").must(t, 200)
	e.do("POST", "/v1/api-keys", admin, map[string]any{"name": "c", "scopes": []string{"rooms:read"}}, hdr).must(t, 201)

	// Removal takes effect at once: the removed user's session no longer
	// reaches the workspace or its projects.
	e.do("GET", "/v1/rooms", member2, nil, hdr).must(t, 200)
	rm := e.tmRemove(admin, acct, member2ID).must(t, 200)
	if rm.Str("user_id") != member2ID {
		t.Fatalf("remove: %s", rm.Raw)
	}
	if d := tmDetails(t, e.do("GET", "/v1/rooms", member2, nil, hdr), 404, "invalid_request"); d["reason"] != "project_not_found" {
		t.Fatalf("removed member on a project route: details %v", d)
	}
	tmDetails(t, e.do("POST", "/v1/rooms", member2, map[string]any{}, hdr), 404, "invalid_request")
	tmDetails(t, e.do("GET", "/v1/accounts/"+acct+"/members", member2, nil), 404, "invalid_request")
	if accts := e.tmAccounts(member2); len(accts) != 0 {
		t.Fatalf("the removed member still has workspaces: %v", accts)
	}
	if e.tmRoleOf(owner, acct, member2ID) != "" {
		t.Fatal("the removed member is still listed")
	}
	tmDetails(t, e.tmRemove(owner, acct, member2ID), 404, "invalid_request")

	// Anyone may leave.
	e.tmRemove(member, acct, memberID).must(t, 200)
	tmDetails(t, e.do("GET", "/v1/rooms", member, nil, hdr), 404, "invalid_request")
	// Removed people can be invited again.
	e.tmInvitation(owner, acct, "mia@example.com", "member")

	// The team's changes are audited.
	audit := e.tmAudit(owner, acct)
	for _, c := range []struct{ action, target string }{
		{"member.removed", member2ID}, {"member.removed", memberID}, {"member.role_changed", adminID},
		{"member.role_changed", ownerID}, {"member.added", memberID}, {"invitation.accepted", ""},
	} {
		found := false
		for _, en := range audit {
			if en["action"] == c.action && (c.target == "" || tmObj(en, "target")["id"] == c.target) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no %s of %s in the audit log: %v", c.action, c.target, tmActions(audit))
		}
	}
	if en := tmFindAudit(audit, "member.removed", member2ID); en == nil || tmObj(en, "actor")["id"] != adminID || tmObj(en, "actor")["type"] != "user" {
		t.Errorf("member.removed entry: %v", en)
	}
}

// --- projects -----------------------------------------------------------------

func TestDashboardTeamProjects(t *testing.T) {
	e := start(t)
	acct, prj := e.Boot.AccountID, e.Boot.ProjectID
	owner := e.signIn(e.Boot.OwnerEmail)
	admin, _ := e.tmJoin(owner, acct, "ann@example.com", "admin")
	member, _ := e.tmJoin(owner, acct, "mo@example.com", "member")
	outsider, soloAcct, soloPrj := e.tmAlone("olga@example.com")

	p1 := e.tmCreateProject(owner, acct, "Staging")
	p2 := e.tmCreateProject(admin, acct, "Load tests")
	// A new project is usable by every member.
	e.do("GET", "/v1/rooms", member, nil, tmProject(p1)).must(t, 200)
	e.do("POST", "/v1/rooms", member, map[string]any{}, tmProject(p2)).must(t, 201)
	if p := e.tmProjectOf(member, acct, p1); p == nil || p["name"] != "Staging" || p["status"] != "active" {
		t.Fatalf("new project in GET /v1/me: %v", p)
	}
	tmDetails(t, e.do("POST", "/v1/accounts/"+acct+"/projects", member, map[string]any{"name": "Mine"}), 403, "permission_denied")
	for _, body := range []any{map[string]any{}, map[string]any{"name": ""}, map[string]any{"name": "   "}, map[string]any{"name": strings.Repeat("x", 129)}} {
		tmDetails(t, e.do("POST", "/v1/accounts/"+acct+"/projects", owner, body), 400, "invalid_request")
	}

	// Rename: owners and admins.
	r := e.do("PATCH", "/v1/accounts/"+acct+"/projects/"+p1, admin, map[string]any{"name": "Staging EU"}).must(t, 200)
	if r.Str("name") != "Staging EU" || r.Str("id") != p1 {
		t.Fatalf("rename: %s", r.Raw)
	}
	if p := e.tmProjectOf(owner, acct, p1); p["name"] != "Staging EU" {
		t.Fatalf("renamed project in GET /v1/me: %v", p)
	}
	e.do("PATCH", "/v1/accounts/"+acct+"/projects/"+prj, owner, map[string]any{"name": "Production"}).must(t, 200)
	if p := e.tmProjectOf(member, acct, prj); p["name"] != "Production" {
		t.Fatalf("renamed project in GET /v1/me: %v", p)
	}
	tmDetails(t, e.do("PATCH", "/v1/accounts/"+acct+"/projects/"+p1, member, map[string]any{"name": "Nope"}), 403, "permission_denied")
	tmDetails(t, e.do("PATCH", "/v1/accounts/"+acct+"/projects/"+p1, owner, map[string]any{}), 400, "invalid_request")
	// A project of another workspace, or none, under this one: 404.
	for _, id := range []string{soloPrj, "prj_doesnotexist", "garbage"} {
		d := tmDetails(t, e.do("PATCH", "/v1/accounts/"+acct+"/projects/"+id, owner, map[string]any{"name": "x"}), 404, "invalid_request")
		if d["reason"] != "project_not_found" {
			t.Fatalf("rename %s: details %v", id, d)
		}
		tmDetails(t, e.tmArchive(owner, acct, id), 404, "invalid_request")
	}
	tmDetails(t, e.do("PATCH", "/v1/accounts/"+soloAcct+"/projects/"+soloPrj, owner, map[string]any{"name": "x"}), 404, "invalid_request")
	tmDetails(t, e.do("PATCH", "/v1/accounts/"+acct+"/projects/"+p1, outsider, map[string]any{"name": "x"}), 404, "invalid_request")
	tmDetails(t, e.tmArchive(outsider, acct, p1), 404, "invalid_request")

	// Archive: owners only.
	tmDetails(t, e.tmArchive(admin, acct, p1), 403, "permission_denied")
	tmDetails(t, e.tmArchive(member, acct, p1), 403, "permission_denied")
	a := e.tmArchive(owner, acct, p1).must(t, 200)
	if a.Str("status") != "archived" || a.JSON["archived_at"] == nil {
		t.Fatalf("archive: %s", a.Raw)
	}
	if p := e.tmProjectOf(admin, acct, p1); p == nil || p["status"] != "archived" {
		t.Fatalf("archived project in GET /v1/me: %v", p)
	}
	d := tmDetails(t, e.do("PATCH", "/v1/accounts/"+acct+"/projects/"+p1, owner, map[string]any{"name": "Back"}), 409, "conflict")
	if d["reason"] != "project_archived" {
		t.Fatalf("renaming an archived project: details %v", d)
	}
	tmDetails(t, e.do("GET", "/v1/rooms", owner, nil, tmProject(p1)), 404, "invalid_request")
}

// A project is usable as soon as its creation is answered: commitAndStart
// answers only after the project's actor is registered, "so a caller told
// about a new project may use it at once". Renaming it, a session naming it
// in X-Project-Id, GET /v1/me, POST /v1/accounts' answer and archiving
// another project of the workspace must all see it. Each step stops the test
// at its first failure.
func TestDashboardTeamNewProjectUsableAtOnce(t *testing.T) {
	e := start(t)
	acct := e.Boot.AccountID
	owner := e.signIn(e.Boot.OwnerEmail)
	create := func(name string) string {
		t.Helper()
		return e.do("POST", "/v1/accounts/"+acct+"/projects", owner, map[string]any{"name": name}).must(t, 201).Str("id")
	}
	projects := 1
	for i := 0; i < 20; i++ {
		p := create(fmt.Sprintf("rename %d", i))
		projects++
		if r := e.do("PATCH", "/v1/accounts/"+acct+"/projects/"+p, owner, map[string]any{"name": "renamed"}); r.Status != 200 {
			t.Errorf("renaming project %d right after its creation: %d %s", i, r.Status, r.Raw)
			break
		}
	}
	for i := 0; i < 20; i++ {
		p := create(fmt.Sprintf("session %d", i))
		projects++
		if r := e.do("GET", "/v1/rooms", owner, nil, tmProject(p)); r.Status != 200 {
			t.Errorf("a session on project %d right after its creation: %d %s", i, r.Status, r.Raw)
			break
		}
	}
	for i := 0; i < 20; i++ {
		p := create(fmt.Sprintf("me %d", i))
		projects++
		if e.tmProjectOf(owner, acct, p) == nil {
			t.Errorf("GET /v1/me right after the creation of project %d does not list it", i)
			break
		}
	}
	for i := 0; i < 9; i++ {
		r := e.do("POST", "/v1/accounts", owner, nil).must(t, 201)
		if ps, _ := r.JSON["projects"].([]any); len(ps) != 1 {
			t.Errorf("POST /v1/accounts answered workspace %d with %d projects, want its first one: %s", i, len(ps), r.Raw)
			break
		}
	}
	// Archiving an older project while a new one's record may not be
	// published yet. (A failure here costs the directory's answer timeout.)
	prev := create("archive 0")
	projects++
	e.tmWaitProjects(owner, acct, projects)
	for i := 1; i <= 30; i++ { // at most 92 projects of the 100 allowed
		p := create(fmt.Sprintf("archive %d", i))
		if r := e.tmArchive(owner, acct, prev); r.Status != 200 {
			t.Errorf("archiving a project right after another's creation (%d): %d %s", i, r.Status, r.Raw)
			break
		}
		prev = p
	}
}

// Archiving a project: refused while rooms are active and for the last
// active project; then its keys stop working and its endpoints get nothing.
func TestDashboardArchiveProject(t *testing.T) {
	rcv := newWHReceiver(t)
	e := start(t, rcv.flags("--webhook-retry-schedule=10,10,10,10")...)
	rcv.setNow(e.clock.Now)
	acct, prj := e.Boot.AccountID, e.Boot.ProjectID
	owner := e.signIn(e.Boot.OwnerEmail)

	// The only active project cannot go.
	tmDetails(t, e.tmArchive(owner, acct, prj), 409, "last_project")

	p2 := e.tmCreateProject(owner, acct, "Doomed")
	hdr := tmProject(p2)
	key := e.do("POST", "/v1/api-keys", owner, map[string]any{"name": "p2", "scopes": []string{"rooms:read", "rooms:write", "webhooks:write", "webhooks:read", "api_keys:read", "api_keys:write", "billing:read"}}, hdr).must(t, 201).Str("secret")
	// A key the first key made, too.
	key2 := e.createKey(key, "rooms:read").must(t, 201).Str("secret")
	e.do("GET", "/v1/rooms", key2, nil).must(t, 200)

	// Both endpoints fail every delivery, so each attempt shows.
	rcv.on("/doomed", whStatus(500))
	rcv.on("/witness", whStatus(500))
	e.do("POST", "/v1/webhook-endpoints", key, map[string]any{"url": rcv.url("/doomed"), "events": []string{"room.ended"}}).must(t, 201)
	e.do("POST", "/v1/webhook-endpoints", owner, map[string]any{"url": rcv.url("/witness"), "events": []string{"room.ended"}}, tmProject(prj)).must(t, 201)

	room := e.do("POST", "/v1/rooms", key, map[string]any{}).must(t, 201).Str("id")
	d := tmDetails(t, e.tmArchive(owner, acct, p2), 409, "project_has_active_rooms")
	if d["active_rooms"] != float64(1) {
		t.Fatalf("details %v", d)
	}
	witnessRoom := e.createRoom(nil)

	// End both rooms; each endpoint gets its first (failing) attempt.
	e.do("DELETE", "/v1/rooms/"+room, key, nil).must(t, 200)
	e.do("DELETE", "/v1/rooms/"+witnessRoom, e.Boot.APIKey, nil).must(t, 200)
	e.eventually("the first attempts", func() bool {
		return len(rcv.requests("/doomed")) >= 1 && len(rcv.requests("/witness")) >= 1
	})

	var archived *resp
	e.eventually("the archive to pass the active-rooms check", func() bool {
		archived = e.tmArchive(owner, acct, p2)
		return archived.ErrCode() != "project_has_active_rooms"
	})
	archived.must(t, 200)
	if archived.Str("status") != "archived" || archived.Str("id") != p2 || archived.JSON["archived_at"] == nil {
		t.Fatalf("archive: %s", archived.Raw)
	}

	// Its keys answer 401 on every route.
	for _, k := range []string{key, key2} {
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{"GET", "/v1/rooms", nil},
			{"POST", "/v1/rooms", map[string]any{}},
			{"GET", "/v1/rooms/" + room, nil},
			{"GET", "/v1/api-keys", nil},
			{"POST", "/v1/api-keys", map[string]any{"name": "x", "scopes": []string{"rooms:read"}}},
			{"GET", "/v1/webhook-endpoints", nil},
			{"POST", "/v1/webhook-endpoints", map[string]any{"url": rcv.url("/doomed")}},
			{"GET", "/v1/billing/balance", nil},
			{"GET", "/v1/project/limits", nil},
			{"GET", "/v1/audit-logs", nil},
			{"GET", "/v1/system/info", nil},
		} {
			tmDetails(t, e.do(c.method, c.path, k, c.body), 401, "authentication_failed")
		}
	}
	// Sessions no longer reach it; the other project is untouched.
	tmDetails(t, e.do("GET", "/v1/rooms", owner, nil, hdr), 404, "invalid_request")
	e.do("GET", "/v1/rooms", owner, nil, tmProject(prj)).must(t, 200)
	e.do("GET", "/v1/rooms", e.Boot.APIKey, nil).must(t, 200)
	if p := e.tmProjectOf(owner, acct, p2); p == nil || p["status"] != "archived" {
		t.Fatalf("archived project in GET /v1/me: %v", p)
	}

	// Idempotent.
	again := e.tmArchive(owner, acct, p2).must(t, 200)
	if again.Str("status") != "archived" || again.JSON["archived_at"] != archived.JSON["archived_at"] {
		t.Fatalf("second archive: %s (first %s)", again.Raw, archived.Raw)
	}
	// The bootstrap project is again the last active one.
	tmDetails(t, e.tmArchive(owner, acct, prj), 409, "last_project")

	// The archived project's endpoint is disabled: its retries stop while
	// the witness's (same schedule, other project) go on.
	doomed := len(rcv.requests("/doomed"))
	for round := 2; round <= 3; round++ {
		e.clock.Advance(10 * time.Second)
		e.eventually(fmt.Sprintf("the witness's attempt %d", round), func() bool { return len(rcv.requests("/witness")) >= round })
	}
	if n := len(rcv.requests("/doomed")); n != doomed {
		t.Fatalf("the archived project's endpoint got %d more attempts", n-doomed)
	}

	// The workspace audit log records it.
	en := tmFindAudit(e.tmAudit(owner, acct), "project.archived", p2)
	if en == nil || tmObj(en, "details")["revoked_api_keys"] != float64(2) || tmObj(en, "actor")["type"] != "user" {
		t.Fatalf("project.archived entry: %v", en)
	}

	// With a third project, the bootstrap one (its room over) can go too,
	// and the third is then the last.
	p3 := e.tmCreateProject(owner, acct, "Next")
	var last *resp
	e.eventually("the bootstrap project to be archivable", func() bool {
		last = e.tmArchive(owner, acct, prj)
		return last.ErrCode() != "project_has_active_rooms"
	})
	if last.must(t, 200).Str("status") != "archived" {
		t.Fatalf("archiving the bootstrap project: %s", last.Raw)
	}
	tmDetails(t, e.do("GET", "/v1/rooms", e.Boot.APIKey, nil), 401, "authentication_failed")
	tmDetails(t, e.tmArchive(owner, acct, p3), 409, "last_project")
}

// --- workspace audit log ---------------------------------------------------------

func TestDashboardTeamAuditLog(t *testing.T) {
	e := start(t)
	acct := e.Boot.AccountID
	owner := e.signIn(e.Boot.OwnerEmail)
	ownerID := e.tmUserID(owner)

	invID, token := e.tmInvitation(owner, acct, "bob@example.com", "member")
	e.clock.Advance(time.Second)
	r := e.signInResp("bob@example.com", token)
	bob, bobID := r.Str("token"), tmObj(r.JSON, "user")["id"].(string)
	e.clock.Advance(time.Second)
	e.tmSetRole(owner, acct, bobID, "admin").must(t, 200)
	e.clock.Advance(time.Second)
	p := e.tmCreateProject(owner, acct, "Audited")
	e.do("PATCH", "/v1/accounts/"+acct+"/projects/"+p, bob, map[string]any{"name": "Audited 2"}).must(t, 200)
	e.clock.Advance(time.Second)
	e.tmArchive(owner, acct, p).must(t, 200)
	e.do("PATCH", "/v1/accounts/"+acct, owner, map[string]any{"name": "Team"}).must(t, 200)
	revokedID, _ := e.tmInvitation(bob, acct, "carl@example.com", "member")
	e.do("DELETE", "/v1/accounts/"+acct+"/invitations/"+revokedID, bob, nil).must(t, 200)

	// Admins read it, newest first.
	entries := e.tmAudit(bob, acct)
	want := []string{
		"invitation.revoked", "invitation.created", "account.renamed", "project.archived", "project.renamed",
		"project.created", "member.role_changed", "invitation.accepted", "member.added", "invitation.created",
	}
	got := tmActions(entries)
	if len(got) < len(want) {
		t.Fatalf("audit log %v, want it to start with %v", got, want)
	}
	// member.added and invitation.accepted are one step: either order.
	norm := append([]string(nil), got[:len(want)]...)
	if norm[7] == "member.added" && norm[8] == "invitation.accepted" {
		norm[7], norm[8] = norm[8], norm[7]
	}
	if strings.Join(norm, ",") != strings.Join(want, ",") {
		t.Fatalf("audit log starts %v, want %v", got[:len(want)], want)
	}
	for i := 1; i < len(entries); i++ {
		if entries[i]["created_at"].(string) > entries[i-1]["created_at"].(string) {
			t.Fatalf("not newest first at %d: %v after %v", i, entries[i]["created_at"], entries[i-1]["created_at"])
		}
	}
	seen := map[string]bool{}
	for _, en := range entries {
		id, _ := en["id"].(string)
		if en["object"] != "audit_log_entry" || id == "" || seen[id] || en["created_at"] == nil {
			t.Fatalf("entry %v", en)
		}
		seen[id] = true
	}
	if en := tmFindAudit(entries, "invitation.created", invID); en == nil || tmObj(en, "actor")["id"] != ownerID ||
		tmObj(en, "details")["email"] != "bob@example.com" || tmObj(en, "details")["role"] != "member" {
		t.Fatalf("invitation.created: %v", en)
	}
	if en := tmFindAudit(entries, "member.role_changed", bobID); en == nil || tmObj(en, "details")["from"] != "member" || tmObj(en, "details")["to"] != "admin" {
		t.Fatalf("member.role_changed: %v", en)
	}
	if en := tmFindAudit(entries, "member.added", bobID); en == nil || tmObj(en, "actor")["id"] != bobID {
		t.Fatalf("member.added: %v", en)
	}
	if en := tmFindAudit(entries, "project.renamed", p); en == nil || tmObj(en, "actor")["id"] != bobID {
		t.Fatalf("project.renamed: %v", en)
	}
	if en := tmFindAudit(entries, "project.created", p); en == nil || tmObj(en, "details")["name"] != "Audited" {
		t.Fatalf("project.created: %v", en)
	}
	if tmFindAudit(entries, "project.archived", p) == nil {
		t.Fatal("no project.archived")
	}
	if en := tmFindAudit(entries, "invitation.revoked", revokedID); en == nil || tmObj(en, "actor")["id"] != bobID {
		t.Fatalf("invitation.revoked: %v", en)
	}

	// Pagination: limit 1..100, default 50, has_more only beyond the page.
	total := len(entries)
	one := e.do("GET", "/v1/accounts/"+acct+"/audit-logs?limit=1", owner, nil).must(t, 200)
	if len(one.Data()) != 1 || one.Data()[0]["id"] != entries[0]["id"] || tmObj(one.JSON, "page")["has_more"] != true {
		t.Fatalf("limit=1: %s", one.Raw)
	}
	full := e.do("GET", "/v1/accounts/"+acct+"/audit-logs?limit="+strconv.Itoa(total), owner, nil).must(t, 200)
	if len(full.Data()) != total || tmObj(full.JSON, "page")["has_more"] != false {
		t.Fatalf("exactly full page of %d: %s", total, full.Raw)
	}
	def := e.do("GET", "/v1/accounts/"+acct+"/audit-logs?after=x", owner, nil).must(t, 200)
	if len(def.Data()) != min(total, 50) {
		t.Fatalf("default page: %d entries", len(def.Data()))
	}
	for _, bad := range []string{"0", "101", "-1", "abc", "", "1.5", "1000"} {
		d := tmDetails(t, e.do("GET", "/v1/accounts/"+acct+"/audit-logs?limit="+bad, owner, nil), 400, "invalid_request")
		if d["field"] != "limit" {
			t.Fatalf("limit=%q: details %v", bad, d)
		}
	}

	// Members may not read it; outsiders see no such workspace.
	e.tmSetRole(owner, acct, bobID, "member").must(t, 200)
	tmDetails(t, e.do("GET", "/v1/accounts/"+acct+"/audit-logs", bob, nil), 403, "permission_denied")
	solo, soloAcct, _ := e.tmAlone("solo@example.com")
	tmDetails(t, e.do("GET", "/v1/accounts/"+acct+"/audit-logs", solo, nil), 404, "invalid_request")
	tmDetails(t, e.do("GET", "/v1/accounts/"+soloAcct+"/audit-logs", owner, nil), 404, "invalid_request")
	tmDetails(t, e.do("GET", "/v1/accounts/"+acct+"/audit-logs", e.Boot.APIKey, nil), 401, "authentication_failed")
	// A workspace's log holds only its own entries.
	soloEntries := e.tmAudit(solo, soloAcct)
	for _, en := range soloEntries {
		if a := en["action"]; a != "account.created" && a != "project.created" {
			t.Fatalf("solo's workspace log has %v", en)
		}
	}
}

// TestDashboardInvitationsEndWithTheInvitersRole: an invitation carries its
// sender's authority, so an admin who is demoted or removed cannot let
// someone in afterwards (a departing admin inviting their own address).
func TestDashboardInvitationsEndWithTheInvitersRole(t *testing.T) {
	e := start(t)
	owner := e.signIn(e.Boot.OwnerEmail)
	acct := e.Boot.AccountID
	admin, adminID := e.tmJoin(owner, acct, "admin1@example.com", "admin")
	demoteID, demoteToken := e.tmInvitation(admin, acct, "later1@example.com", "admin")
	keptID, keptToken := e.tmInvitation(owner, acct, "later2@example.com", "member")
	e.tmSetRole(owner, acct, adminID, "member").must(t, 200)
	if got := e.tmInvitationByID(owner, acct, demoteID)["status"]; got != "revoked" {
		t.Fatalf("the demoted admin's invitation is %v, want revoked", got)
	}
	if got := e.tmInvitationByID(owner, acct, keptID)["status"]; got != "pending" {
		t.Fatalf("the owner's invitation is %v, want pending", got)
	}
	r := e.signInResp("later1@example.com", demoteToken)
	if r.JSON["joined_account"] != nil {
		t.Fatalf("a revoked invitation let someone in: %s", r.Raw)
	}
	if r := e.signInResp("later2@example.com", keptToken); tmObj(r.JSON, "joined_account")["id"] != acct {
		t.Fatalf("the owner's invitation no longer works: %s", r.Raw)
	}

	admin2, admin2ID := e.tmJoin(owner, acct, "admin2@example.com", "admin")
	goneID, goneToken := e.tmInvitation(admin2, acct, "admin2.private@example.com", "admin")
	e.tmRemove(owner, acct, admin2ID).must(t, 200)
	if got := e.tmInvitationByID(owner, acct, goneID)["status"]; got != "revoked" {
		t.Fatalf("the removed admin's invitation is %v, want revoked", got)
	}
	if r := e.do("POST", "/v1/invitations/accept", admin2, map[string]any{"invitation_token": goneToken}); r.Status == 200 {
		t.Fatalf("a removed admin accepted their own invitation: %s", r.Raw)
	}
	if entry := tmFindAudit(e.tmAudit(owner, acct), "invitation.revoked", goneID); entry == nil {
		t.Fatal("no invitation.revoked audit entry for the removed admin's invitation")
	}
}
