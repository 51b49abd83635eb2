package actors

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goccy/go-json"
	"rtcd/actors/core"
	"rtcd/actors/directory"
	"rtcd/apierr"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/mail"
	"rtcd/persistence"
	"rtcd/ratelimit"
)

// dirEnv runs an engine over a data directory that survives restarts.
type dirEnv struct {
	t     *testing.T
	dir   string
	keys  auth.Keys
	clk   *clock.Fake
	mail  *captureSender
	store *persistence.Store
	e     *Engine
	boot  BootstrapResult
	ipSeq int
	// clustered starts the engine as a cluster node with the directory
	// placed on it (and no workspace).
	clustered bool
}

func newDirEnv(t *testing.T) *dirEnv {
	t.Helper()
	keys, err := auth.DeriveKeys(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	env := &dirEnv{t: t, dir: t.TempDir(), keys: keys, mail: newCaptureSender(),
		clk: clock.NewFake(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))}
	env.open()
	t.Cleanup(env.close)
	return env
}

func (env *dirEnv) open() {
	t := env.t
	t.Helper()
	store, err := persistence.Open(env.dir, persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := Initialized(store); !ok {
		if env.boot, err = Bootstrap(store, env.keys, env.clk, core.Billing{Currency: "USD"}, "Owner@Example.com"); err != nil {
			t.Fatal(err)
		}
	}
	limits := core.Limits{MaxActiveRooms: 10, MaxActiveParticipants: 10, MaxParticipantsPerRoom: 2,
		RoomCreatesPerMinute: 100, ParticipantCreatesPerMinute: 100, ConnectRequestsPerMinute: 100}
	e, err := New(core.Settings{Region: "global", MediaURL: "ws://127.0.0.1:1/rtc", DefaultLimits: limits,
		ConnectPerIPPerMinute: 100, MediaTokenTTL: time.Minute, SnapshotEveryEvents: 5},
		store, env.clk, ratelimit.NewMemory(), env.keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.SetMailer(Mailer{Sender: env.mail, DashboardURL: "https://dash.example"})
	start := e.Start
	if env.clustered {
		start = func() error {
			if err := e.StartClustered(); err != nil {
				return err
			}
			return e.PlaceDirectory()
		}
	}
	if err := start(); err != nil {
		t.Fatal(err)
	}
	env.store, env.e = store, e
}

func (env *dirEnv) close() {
	if env.e != nil {
		env.e.Stop()
		env.e = nil
	}
	if env.store != nil {
		if err := env.store.Close(); err != nil {
			env.t.Error(err)
		}
		env.store = nil
	}
}

func (env *dirEnv) restart() {
	env.close()
	env.open()
}

// ip is a fresh source address, so per-IP limits stay out of the way.
func (env *dirEnv) ip() string {
	env.ipSeq++
	return fmt.Sprintf("10.0.%d.%d", env.ipSeq/250, env.ipSeq%250+1)
}

// startSignIn asks for a link for address and returns its token, read from
// the mail the engine's queue sent.
func (env *dirEnv) startSignIn(address string, invitationToken *string) string {
	t := env.t
	t.Helper()
	if err := env.e.StartEmailSignIn(&EmailStartParams{Email: &address, InvitationToken: invitationToken}, env.ip()); err != nil {
		t.Fatalf("start %s: %v", address, err)
	}
	m := env.mail.next(t)
	if want, _ := normalizeEmail(address); m.To != want {
		t.Fatalf("mail went to %s, want %s", m.To, want)
	}
	token := linkToken(t, m.Text, "https://dash.example/sign-in/email?", "token")
	if !auth.CheckDashboardSecretFormat(auth.SignInTokenPrefix, token) {
		t.Fatalf("mailed token %q is malformed", token)
	}
	return token
}

func (env *dirEnv) verify(token string) (directory.SessionView, *apierr.Error) {
	body, err := env.e.VerifyEmailSignIn(&EmailTokenParams{Token: &token}, "req_test", env.ip())
	var v directory.SessionView
	if err == nil {
		if jerr := json.Unmarshal(body, &v); jerr != nil {
			env.t.Fatalf("verify body %s: %v", body, jerr)
		}
	}
	return v, err
}

// signIn is the whole e-mail sign-in of address.
func (env *dirEnv) signIn(address string) directory.SessionView {
	env.t.Helper()
	v, err := env.verify(env.startSignIn(address, nil))
	if err != nil {
		env.t.Fatalf("verify for %s: %v", address, err)
	}
	return v
}

func (env *dirEnv) me(u *core.DashboardUser) directory.MeView {
	env.t.Helper()
	body, err := env.e.Me(u)
	if err != nil {
		env.t.Fatalf("me: %v", err)
	}
	var v directory.MeView
	if err := json.Unmarshal(body, &v); err != nil {
		env.t.Fatal(err)
	}
	return v
}

func (env *dirEnv) mustAuth(token string) *core.DashboardUser {
	env.t.Helper()
	u, err := env.e.AuthenticateSession(token)
	if err != nil {
		env.t.Fatalf("session %s…: %v", token[:12], err)
	}
	return u
}

func (env *dirEnv) mustNotAuth(token, why string) {
	env.t.Helper()
	if u, err := env.e.AuthenticateSession(token); err == nil {
		env.t.Fatalf("%s: session of %s still authenticates", why, u.UserID)
	} else if err.Code != apierr.AuthenticationFailed {
		env.t.Fatalf("%s: err = %v, want authentication_failed", why, err)
	}
}

// inDirectory runs f on a copy of the directory's state, read through
// ReadState (as its snapshot encodes it, indexes rebuilt).
func (env *dirEnv) inDirectory(f func(s *directory.State)) {
	env.t.Helper()
	r := env.e.askDirectory(directory.ReadState{})
	if r.Err != nil {
		env.t.Fatal(r.Err)
	}
	var s directory.State
	if err := json.Unmarshal(r.Value.([]byte), &s); err != nil {
		env.t.Fatal(err)
	}
	s.Loaded()
	f(&s)
}

func TestEmailSignInSessionsSurviveRestartAndLogout(t *testing.T) {
	env := newDirEnv(t)

	// The bootstrap owner signs in (address case does not matter).
	owner := env.signIn("  OWNER@example.COM ")
	if owner.Object != "session" || owner.User.Email != "owner@example.com" || owner.CreatedAccount != nil || owner.JoinedAccount != nil {
		t.Fatalf("owner sign-in: %+v", owner)
	}
	if !auth.CheckDashboardSecretFormat(auth.SessionTokenPrefix, owner.Token) || owner.IdleTimeoutSeconds != int(directory.SessionIdleTimeout/time.Second) {
		t.Fatalf("owner session: %+v", owner)
	}
	ou := env.mustAuth(owner.Token)
	if ou.UserID != owner.User.ID {
		t.Fatalf("session is for %s, want %s", ou.UserID, owner.User.ID)
	}
	me := env.me(ou)
	if len(me.Accounts) != 1 || me.Accounts[0].ID != env.boot.AccountID || me.Accounts[0].Role != directory.RoleOwner ||
		len(me.Accounts[0].Projects) != 1 || me.Accounts[0].Projects[0].ID != env.boot.ProjectID {
		t.Fatalf("owner's me: %+v", me)
	}

	// A second session of the owner, then logged out.
	second := env.signIn("owner@example.com")
	if second.User.ID != owner.User.ID {
		t.Fatalf("second sign-in made another user: %s", second.User.ID)
	}
	su := env.mustAuth(second.Token)
	if err := env.e.Logout(su); err != nil {
		t.Fatal(err)
	}
	env.mustNotAuth(second.Token, "after logout")
	if err := env.e.Logout(su); err != nil { // idempotent
		t.Fatalf("second logout: %v", err)
	}
	env.mustAuth(owner.Token)

	// A new person gets a workspace of their own.
	newcomer := env.signIn("new@example.com")
	if newcomer.CreatedAccount == nil || newcomer.CreatedAccount.Role != directory.RoleOwner || newcomer.JoinedAccount != nil {
		t.Fatalf("newcomer: %+v", newcomer)
	}
	nu := env.mustAuth(newcomer.Token)
	// The new workspace's project actor recovers asynchronously after the
	// sign-in answered (see the report): wait for it to be listed.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		nme := env.me(nu)
		if len(nme.Accounts) != 1 || nme.Accounts[0].ID != newcomer.CreatedAccount.ID {
			t.Fatalf("newcomer's me: %+v", nme)
		}
		if len(nme.Accounts[0].Projects) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("newcomer's workspace lists no project: %+v", nme)
		}
	}

	// A link works once, and not after its TTL.
	used := env.startSignIn("owner@example.com", nil)
	if _, err := env.verify(used); err != nil {
		t.Fatal(err)
	}
	if _, err := env.verify(used); err == nil || err.Code != apierr.AuthenticationFailed {
		t.Fatalf("reused link: %v", err)
	}
	stale := env.startSignIn("new@example.com", nil)
	env.clk.Advance(directory.SignInLinkTTL)
	if _, err := env.verify(stale); err == nil {
		t.Fatal("an expired link signed in")
	}

	// A session's last use is written to disk (at most once a minute).
	env.clk.Advance(2 * directory.SessionTouchInterval)
	env.mustAuth(owner.Token)
	env.mustAuth(newcomer.Token)
	touched := env.clk.Now()
	deadline := time.Now().Add(10 * time.Second)
	for _, token := range []string{owner.Token, newcomer.Token} {
		h := directory.HashHex(env.keys.HashDashboardSecret(token))
		for {
			var seen time.Time
			env.inDirectory(func(s *directory.State) { seen = s.Sessions[h].LastSeenAt })
			if seen.Equal(touched) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("last use on record %v, want %v", seen, touched)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	// Restart: the live sessions still work, the ended one does not.
	env.restart()
	env.mustAuth(owner.Token)
	env.mustAuth(newcomer.Token)
	env.mustNotAuth(second.Token, "logged out before the restart")
	if me := env.me(env.mustAuth(newcomer.Token)); len(me.Accounts) != 1 || me.Accounts[0].ID != newcomer.CreatedAccount.ID {
		t.Fatalf("newcomer's me after restart: %+v", me)
	}
	var sessions int
	env.inDirectory(func(s *directory.State) { sessions = s.UserSessions(owner.User.ID) })
	if sessions != 2 { // the first and the one from the link used once
		t.Fatalf("owner has %d sessions after restart, want 2", sessions)
	}

	// Idle time counts from the last use on disk: the restart did not
	// reset it to "now", and it did not lose the touch either.
	env.clk.Set(touched.Add(directory.SessionIdleTimeout - time.Second))
	env.mustAuth(owner.Token)

	// Logout-all ends every session of the user, durably.
	if err := env.e.LogoutAll(env.mustAuth(owner.Token)); err != nil {
		t.Fatal(err)
	}
	env.mustNotAuth(owner.Token, "after logout-all")
	env.mustAuth(newcomer.Token)
	env.restart()
	env.mustNotAuth(owner.Token, "logout-all before the restart")
	env.mustNotAuth(second.Token, "logout before two restarts")
	env.mustAuth(newcomer.Token)

	// Idle timeout after the restart.
	env.clk.Advance(directory.SessionIdleTimeout)
	env.mustNotAuth(newcomer.Token, "idle for the idle timeout")
}

func TestEmailSignInStartAnswersAlikeAndSendsOnlyWhenItShould(t *testing.T) {
	env := newDirEnv(t)
	start := func(address string) *apierr.Error {
		return env.e.StartEmailSignIn(&EmailStartParams{Email: &address}, env.ip())
	}
	// Known, unknown and malformed-but-plausible addresses all succeed
	// (the 202); only the well-formed ones are mailed.
	plausible := "foo..bar@example.com"
	if _, err := mail.ParseAddress(plausible); err == nil {
		t.Fatalf("test bug: %q parses", plausible)
	}
	for _, a := range []string{"owner@example.com", plausible, "nobody@example.com"} {
		if err := start(a); err != nil {
			t.Fatalf("start %q: %v", a, err)
		}
	}
	for _, want := range []string{"owner@example.com", "nobody@example.com"} {
		if m := env.mail.next(t); m.To != want {
			t.Fatalf("mail to %s, want %s", m.To, want)
		}
	}
	// Past the per-address limit: the same answer, no mail.
	for i := 1; i < directory.SignInMailsPerAddressPerHour; i++ {
		if err := start("nobody@example.com"); err != nil {
			t.Fatal(err)
		}
		env.mail.next(t)
	}
	if err := start("NOBODY@example.com"); err != nil {
		t.Fatalf("over the limit: %v", err)
	}
	if err := start("marker@example.com"); err != nil {
		t.Fatal(err)
	}
	if m := env.mail.next(t); m.To != "marker@example.com" {
		t.Fatalf("a mail past the per-address limit went to %s", m.To)
	}
	// Not even plausible: 400.
	for _, a := range []string{"", "no-at-sign", "@example.com", "a@", "a b@example.com", "a@b@example.com", strings.Repeat("a", 250) + "@example.com"} {
		if err := start(a); err == nil || err.Code != apierr.InvalidRequest {
			t.Errorf("start %q: %v, want invalid_request", a, err)
		}
	}
}

func TestConcurrentVerifyOfOneLinkSucceedsOnce(t *testing.T) {
	env := newDirEnv(t)
	token := env.startSignIn("racer@example.com", nil)
	ips := make([]string, 32)
	for i := range ips {
		ips[i] = env.ip()
	}
	var wg sync.WaitGroup
	results := make([]directory.SessionView, len(ips))
	errs := make([]*apierr.Error, len(ips))
	ready := make(chan struct{})
	for i := range ips {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ready
			tok := token
			body, err := env.e.VerifyEmailSignIn(&EmailTokenParams{Token: &tok}, "req_race", ips[i])
			errs[i] = err
			if err == nil {
				if jerr := json.Unmarshal(body, &results[i]); jerr != nil {
					errs[i] = apierr.New(apierr.Internal, "bad body %s", body)
				}
			}
		}()
	}
	close(ready)
	wg.Wait()
	var winners []int
	for i, err := range errs {
		switch {
		case err == nil:
			winners = append(winners, i)
		case err.Code != apierr.AuthenticationFailed || err.Details["reason"] != "sign_in_link_invalid":
			t.Errorf("verify %d: %v, want sign_in_link_invalid", i, err)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%d verifications of one link succeeded, want 1", len(winners))
	}
	v := results[winners[0]]
	if v.CreatedAccount == nil {
		t.Fatalf("the newcomer got no workspace: %+v", v)
	}
	u := env.mustAuth(v.Token)
	// One user, one workspace, one session: the losers changed nothing.
	env.inDirectory(func(s *directory.State) {
		if len(s.Users) != 2 || s.UserWorkspaces(u.UserID) != 1 || s.UserSessions(u.UserID) != 1 || len(s.SignInLinks) != 0 {
			t.Errorf("users %d, racer's accounts %d, sessions %d, links %d",
				len(s.Users), s.UserWorkspaces(u.UserID), s.UserSessions(u.UserID), len(s.SignInLinks))
		}
	})
}

// invite has the owner invite address and returns the token mailed to it.
func (env *dirEnv) invite(u *core.DashboardUser, accountID, address, role string) (directory.InvitationView, string) {
	t := env.t
	t.Helper()
	body, err := env.e.CreateInvitation(u, accountID, &InvitationParams{Email: &address, Role: &role})
	if err != nil {
		t.Fatalf("invite %s: %v", address, err)
	}
	var v directory.InvitationView
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	m := env.mail.next(t)
	if m.To != address {
		t.Fatalf("invitation mailed to %s, want %s", m.To, address)
	}
	return v, linkToken(t, m.Text, "https://dash.example/invitations/accept?", "invitation_token")
}

func (env *dirEnv) invitationStatus(accountID, id string) string {
	var status string
	env.inDirectory(func(s *directory.State) { status = s.Workspaces[accountID].Invitations[id].StatusAt(env.clk.Now()) })
	return status
}

// New people get their own workspace unless they sign in from an
// invitation addressed to them; an open invitation alone, or one addressed
// to someone else, never takes its place.
func TestInvitationNeverReplacesOwnWorkspace(t *testing.T) {
	env := newDirEnv(t)
	owner := env.mustAuth(env.signIn("owner@example.com").Token)
	acct := env.boot.AccountID

	// Open invitation, plain sign-in: own workspace, invitation still open.
	inv1, _ := env.invite(owner, acct, "ann@example.com", directory.RoleMember)
	ann := env.signIn("ann@example.com")
	if ann.CreatedAccount == nil || ann.JoinedAccount != nil {
		t.Fatalf("ann: %+v", ann)
	}
	if s := env.invitationStatus(acct, inv1.ID); s != directory.InvitationPending {
		t.Fatalf("ann's invitation is %s after a plain sign-in", s)
	}

	// Sign-in from the invitation addressed to the person: joins, no
	// workspace of their own.
	inv2, tok2 := env.invite(owner, acct, "ben@example.com", directory.RoleAdmin)
	ben, err := env.verify(env.startSignIn("ben@example.com", &tok2))
	if err != nil {
		t.Fatal(err)
	}
	if ben.CreatedAccount != nil || ben.JoinedAccount == nil || ben.JoinedAccount.ID != acct || ben.JoinedAccount.Role != directory.RoleAdmin {
		t.Fatalf("ben: %+v", ben)
	}
	if s := env.invitationStatus(acct, inv2.ID); s != directory.InvitationAccepted {
		t.Fatalf("ben's invitation is %s", s)
	}
	if me := env.me(env.mustAuth(ben.Token)); len(me.Accounts) != 1 || me.Accounts[0].ID != acct {
		t.Fatalf("ben's me: %+v", me)
	}

	// A token addressed to someone else, by e-mail link and by Google: own
	// workspace, the invitation untouched.
	inv3, tok3 := env.invite(owner, acct, "cat@example.com", directory.RoleMember)
	eve, err := env.verify(env.startSignIn("eve@example.com", &tok3))
	if err != nil {
		t.Fatal(err)
	}
	if eve.CreatedAccount == nil || eve.JoinedAccount != nil {
		t.Fatalf("eve used cat's invitation: %+v", eve)
	}
	body, aerr := env.e.GoogleSignIn(directory.GoogleIdentity{Subject: "g-mallory", Email: "mallory@example.com", Name: "M"}, &tok3, "req_g", env.ip())
	if aerr != nil {
		t.Fatal(aerr)
	}
	var mallory directory.SessionView
	if err := json.Unmarshal(body, &mallory); err != nil {
		t.Fatal(err)
	}
	if mallory.CreatedAccount == nil || mallory.JoinedAccount != nil {
		t.Fatalf("mallory used cat's invitation: %+v", mallory)
	}
	if _, aerr := env.e.AcceptInvitation(env.mustAuth(eve.Token), &AcceptParams{InvitationToken: &tok3}); aerr == nil || aerr.Code != apierr.PermissionDenied {
		t.Fatalf("eve accepting cat's invitation: %v", aerr)
	}
	if s := env.invitationStatus(acct, inv3.ID); s != directory.InvitationPending {
		t.Fatalf("cat's invitation is %s", s)
	}

	// A revoked invitation: the sign-in still works, into an own workspace.
	inv4, tok4 := env.invite(owner, acct, "dan@example.com", directory.RoleMember)
	link := env.startSignIn("dan@example.com", &tok4)
	if _, err := env.e.RevokeInvitation(owner, acct, inv4.ID); err != nil {
		t.Fatal(err)
	}
	dan, err := env.verify(link)
	if err != nil {
		t.Fatal(err)
	}
	if dan.CreatedAccount == nil || dan.JoinedAccount != nil {
		t.Fatalf("dan joined through a revoked invitation: %+v", dan)
	}
	var members int
	env.inDirectory(func(s *directory.State) { members = len(s.Workspaces[acct].Members) })
	if members != 2 { // the owner and ben
		t.Fatalf("workspace has %d members, want 2", members)
	}
}
