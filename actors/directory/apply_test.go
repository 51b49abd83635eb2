package directory

import (
	"fmt"
	"reflect"
	"rtcd/actors/core/coretest"
	"sort"
	"strings"
	"testing"
	"time"

	"rtcd/actors/core"

	"github.com/goccy/go-json"
)

// dirHash is a stand-in for a keyed token hash: 64 hex characters.
func dirHash(n byte) string { return HashHex([32]byte{n}) }

// directoryEvents is a history touching every kind of event, in an order
// the directory could produce it. Times are seconds after coretest.T0.
func directoryEvents() []directoryEvent {
	inv := func(id, acct, email, role string, hash byte, sec int) *Invitation {
		return &Invitation{ID: id, AccountID: acct, Email: email, Role: role, Status: InvitationPending, Hash: dirHash(hash),
			InvitedBy: "usr_alice", CreatedAt: coretest.At(sec), ExpiresAt: coretest.At(sec).Add(InvitationTTL)}
	}
	session := func(hash byte, user string, sec int) *Session {
		return &Session{Hash: dirHash(hash), UserID: user, Method: "email", CreatedAt: coretest.At(sec),
			ExpiresAt: coretest.At(sec).Add(SessionLifetime), LastSeenAt: coretest.At(sec)}
	}
	link := func(hash byte, email string, invitation string, sec int) *SignInLink {
		return &SignInLink{Hash: dirHash(hash), Email: email, InvitationHash: invitation, CreatedAt: coretest.At(sec), ExpiresAt: coretest.At(sec).Add(SignInLinkTTL)}
	}
	return []directoryEvent{
		{UserCreated: &User{ID: "usr_alice", Email: "alice@example.com", CreatedAt: coretest.At(0)}},
		{WorkspaceCreated: &workspaceCreated{ID: "acct_a", Name: "Alice's", CreatedAt: coretest.At(0)}},
		{MemberSet: &memberSet{AccountID: "acct_a", UserID: "usr_alice", Role: RoleOwner, At: coretest.At(0)}},
		{ProjectAdded: &workspaceProject{AccountID: "acct_a", ProjectID: "prj_a1"}},
		{SessionCreated: session(1, "usr_alice", 1)},
		{SessionTouched: &sessionTouched{Hash: dirHash(1), At: coretest.At(120)}},
		{SessionTouched: &sessionTouched{Hash: dirHash(1), At: coretest.At(60)}},  // older: ignored
		{SessionTouched: &sessionTouched{Hash: dirHash(99), At: coretest.At(60)}}, // unknown: ignored
		{InvitationCreated: inv("inv_bob", "acct_a", "bob@example.com", RoleAdmin, 10, 130)},
		{InvitationCreated: inv("inv_carol", "acct_a", "carol@example.com", RoleMember, 11, 131)},
		{InvitationCreated: inv("inv_dave", "acct_a", "dave@example.com", RoleMember, 12, 132)},
		{SignInLinkCreated: link(20, "bob@example.com", dirHash(10), 140)},
		{SignInLinkCreated: link(21, "erin@example.com", "", 141)},
		// Bob signs in from his invitation: user, membership, invitation
		// closed, link used, session, all in one batch.
		{SignInLinksDropped: &signInLinksDropped{Hashes: []string{dirHash(20)}}},
		{UserCreated: &User{ID: "usr_bob", Email: "bob@example.com", CreatedAt: coretest.At(150)}},
		{MemberSet: &memberSet{AccountID: "acct_a", UserID: "usr_bob", Role: RoleAdmin, At: coretest.At(150)}},
		{InvitationClosed: &invitationClosed{AccountID: "acct_a", InvitationID: "inv_bob", Status: InvitationAccepted, At: coretest.At(150), By: "usr_bob"}},
		{SessionCreated: session(2, "usr_bob", 150)},
		{InvitationClosed: &invitationClosed{AccountID: "acct_a", InvitationID: "inv_carol", Status: InvitationRevoked, At: coretest.At(160)}},
		// Erin signs up with Google: her own workspace.
		{UserCreated: &User{ID: "usr_erin", Email: "erin@example.com", Name: "Erin", GoogleSubject: "g-erin", CreatedAt: coretest.At(170)}},
		{WorkspaceCreated: &workspaceCreated{ID: "acct_e", Name: "My workspace", CreatedAt: coretest.At(170)}},
		{MemberSet: &memberSet{AccountID: "acct_e", UserID: "usr_erin", Role: RoleOwner, At: coretest.At(170)}},
		{ProjectAdded: &workspaceProject{AccountID: "acct_e", ProjectID: "prj_e1"}},
		{SessionCreated: session(3, "usr_erin", 170)},
		{SessionCreated: session(4, "usr_erin", 171)},
		// Alice links Google later and renames things.
		{UserUpdated: &userUpdated{UserID: "usr_alice", Name: "Alice", GoogleSubject: "g-alice"}},
		{UserUpdated: &userUpdated{UserID: "usr_alice", Name: "Alice A."}},
		{WorkspaceRenamed: &workspaceRenamed{AccountID: "acct_a", Name: "Acme"}},
		{ProjectAdded: &workspaceProject{AccountID: "acct_a", ProjectID: "prj_a2"}},
		// Bob is made owner, then Alice invites Erin, Erin joins, leaves.
		{MemberSet: &memberSet{AccountID: "acct_a", UserID: "usr_bob", Role: RoleOwner, At: coretest.At(200)}},
		{InvitationCreated: inv("inv_erin", "acct_a", "erin@example.com", RoleMember, 13, 210)},
		{MemberSet: &memberSet{AccountID: "acct_a", UserID: "usr_erin", Role: RoleMember, At: coretest.At(220)}},
		{InvitationClosed: &invitationClosed{AccountID: "acct_a", InvitationID: "inv_erin", Status: InvitationAccepted, At: coretest.At(220), By: "usr_erin"}},
		{MemberRemoved: &memberRemoved{AccountID: "acct_a", UserID: "usr_erin"}},
		// Logout of one of Erin's sessions, logout-all of Bob's, an unknown
		// hash ended (idempotent), sweeps of links and old invitations.
		{SessionsEnded: &sessionsEnded{Hashes: []string{dirHash(3)}}},
		{SessionsEnded: &sessionsEnded{Hashes: []string{dirHash(2), dirHash(98)}}},
		{SignInLinksDropped: &signInLinksDropped{Hashes: []string{dirHash(21), dirHash(97)}}},
		{InvitationsDropped: &invitationsDropped{AccountID: "acct_a", IDs: []string{"inv_carol", "inv_missing"}}},
	}
}

// dirIndexes renders the derived maps of s in a canonical form: sorted,
// empty inner sets dropped (apply may leave an empty set where index
// builds none; both mean "no entries").
func dirIndexes(t *testing.T, s *State) string {
	t.Helper()
	var b strings.Builder
	sortedKeys := func(m map[string]string) []string {
		ks := make([]string, 0, len(m))
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return ks
	}
	for _, k := range sortedKeys(s.byEmail) {
		fmt.Fprintf(&b, "byEmail %s -> %s\n", k, s.byEmail[k])
	}
	for _, k := range sortedKeys(s.byGoogle) {
		fmt.Fprintf(&b, "byGoogle %s -> %s\n", k, s.byGoogle[k])
	}
	hashes := make([]string, 0, len(s.invitations))
	for h := range s.invitations {
		hashes = append(hashes, h)
	}
	sort.Strings(hashes)
	for _, h := range hashes {
		inv := s.invitations[h]
		// The index must point at the very record the workspace holds, so
		// closing it through either is seen through both.
		if w := s.Workspaces[inv.AccountID]; w == nil || w.Invitations[inv.ID] != inv {
			t.Errorf("invitations[%s] (%s) is not the workspace's record", h[:8], inv.ID)
		}
		fmt.Fprintf(&b, "invitation %s -> %s %s %s\n", h[:8], inv.ID, inv.Status, inv.AccountID)
	}
	sets := func(name string, m map[string]map[string]struct{}) {
		users := make([]string, 0, len(m))
		for u := range m {
			users = append(users, u)
		}
		sort.Strings(users)
		for _, u := range users {
			vs := make([]string, 0, len(m[u]))
			for v := range m[u] {
				vs = append(vs, v)
			}
			if len(vs) == 0 {
				continue
			}
			sort.Strings(vs)
			fmt.Fprintf(&b, "%s %s -> %s\n", name, u, strings.Join(vs, ","))
		}
	}
	sets("userAccounts", s.userAccounts)
	sets("userSessions", s.userSessions)
	return b.String()
}

// dirRoles is the role map the directory would publish for s.
func dirRoles(s *State) map[string]map[string]string { return s.roles() }

// reloaded is s written as a snapshot and read back, as recovery does.
func reloaded(t *testing.T, s *State) *State {
	t.Helper()
	var r State
	if err := json.Unmarshal(core.Encode(s), &r); err != nil {
		t.Fatal(err)
	}
	r.index()
	return &r
}

func TestDirectoryApplyReplayAndIndex(t *testing.T) {
	events := directoryEvents()
	live := newState()
	fromJournal := newState() // each event through its JSON, as recovery reads it
	for i := range events {
		before := string(core.Encode(&events[i]))
		coretest.MustApply(t, live, &events[i])
		if after := string(core.Encode(&events[i])); after != before {
			t.Fatalf("event %d: apply changed its event:\n%s\n%s", i, before, after)
		}
		var ev directoryEvent
		if err := json.Unmarshal(core.Encode(&events[i]), &ev); err != nil {
			t.Fatal(err)
		}
		coretest.MustApply(t, fromJournal, &ev)

		// After every event: the snapshot round trip and the journal replay
		// give the same state, the same indexes and the same roles.
		snap := reloaded(t, live)
		want, wantIdx := string(core.Encode(live)), dirIndexes(t, live)
		for name, got := range map[string]*State{"snapshot": snap, "journal": fromJournal} {
			if s := string(core.Encode(got)); s != want {
				t.Fatalf("after event %d, %s state differs:\n%s\nwant\n%s", i, name, s, want)
			}
			if idx := dirIndexes(t, got); idx != wantIdx {
				t.Fatalf("after event %d, %s indexes differ:\n%s\nwant\n%s", i, name, idx, wantIdx)
			}
			if !reflect.DeepEqual(dirRoles(got), dirRoles(live)) {
				t.Fatalf("after event %d, %s roles differ: %v, want %v", i, name, dirRoles(got), dirRoles(live))
			}
		}
	}

	// The state holds copies: changing an applied event afterwards (the
	// caller's variables) does not reach it.
	for i := range events {
		if u := events[i].UserCreated; u != nil {
			u.Email = "mutated@example.com"
		}
		if s := events[i].SessionCreated; s != nil {
			s.UserID = "usr_mutated"
		}
		if inv := events[i].InvitationCreated; inv != nil {
			inv.Status = "mutated"
		}
		if l := events[i].SignInLinkCreated; l != nil {
			l.Email = "mutated@example.com"
		}
	}
	if got := string(core.Encode(live)); strings.Contains(got, "mutated") {
		t.Fatalf("the state aliases its events: %s", got)
	}

	// The outcome, spelled out.
	want := strings.Join([]string{
		"byEmail alice@example.com -> usr_alice",
		"byEmail bob@example.com -> usr_bob",
		"byEmail erin@example.com -> usr_erin",
		"byGoogle g-alice -> usr_alice",
		"byGoogle g-erin -> usr_erin",
		"invitation " + dirHash(10)[:8] + " -> inv_bob accepted acct_a",
		"invitation " + dirHash(12)[:8] + " -> inv_dave pending acct_a",
		"invitation " + dirHash(13)[:8] + " -> inv_erin accepted acct_a",
		"userAccounts usr_alice -> acct_a",
		"userAccounts usr_bob -> acct_a",
		"userAccounts usr_erin -> acct_e",
		"userSessions usr_alice -> " + dirHash(1),
		"userSessions usr_erin -> " + dirHash(4),
		"",
	}, "\n")
	if got := dirIndexes(t, live); got != want {
		t.Fatalf("indexes:\n%s\nwant\n%s", got, want)
	}
	alice := live.Users["usr_alice"]
	if alice.Name != "Alice A." || alice.GoogleSubject != "g-alice" {
		t.Errorf("alice = %+v: a later name-only update must keep the Google subject", alice)
	}
	a := live.Workspaces["acct_a"]
	if a.Name != "Acme" || !reflect.DeepEqual(a.ProjectIDs, []string{"prj_a1", "prj_a2"}) {
		t.Errorf("acct_a = %q %v", a.Name, a.ProjectIDs)
	}
	if len(a.Members) != 2 || a.Members["usr_bob"].Role != RoleOwner || a.Members["usr_bob"].JoinedAt != coretest.At(150) ||
		a.ownerCount() != 2 {
		t.Errorf("acct_a members: %v", a.Members)
	}
	if _, ok := a.Members["usr_erin"]; ok {
		t.Error("erin is still a member of acct_a")
	}
	if inv := a.Invitations["inv_bob"]; inv.ClosedAt != coretest.At(150) || inv.AcceptedBy != "usr_bob" {
		t.Errorf("inv_bob = %+v", inv)
	}
	if _, ok := a.Invitations["inv_carol"]; ok {
		t.Error("inv_carol was not dropped")
	}
	if ss := live.Sessions[dirHash(1)]; ss == nil || ss.LastSeenAt != coretest.At(120) {
		t.Errorf("alice's session = %+v: last seen must only move forward", ss)
	}
	if len(live.Sessions) != 2 || len(live.SignInLinks) != 0 {
		t.Errorf("sessions %d, links %d", len(live.Sessions), len(live.SignInLinks))
	}
	roles := dirRoles(live)
	wantRoles := map[string]map[string]string{
		"usr_alice": {"acct_a": RoleOwner}, "usr_bob": {"acct_a": RoleOwner}, "usr_erin": {"acct_e": RoleOwner},
	}
	if !reflect.DeepEqual(roles, wantRoles) {
		t.Errorf("roles = %v, want %v", roles, wantRoles)
	}

	// Replaying the whole journal on a fresh state is deterministic.
	again := newState()
	for _, ev := range directoryEvents() {
		coretest.MustApply(t, again, &ev)
	}
	if string(core.Encode(again)) != string(core.Encode(reloaded(t, again))) || dirIndexes(t, again) != want {
		t.Error("a second replay differs")
	}
}

// A snapshot written by an older build may lack maps; index fills them in.
func TestDirectoryIndexOfSparseSnapshot(t *testing.T) {
	var s State
	if err := json.Unmarshal([]byte(`{"users":{"usr_a":{"id":"usr_a","email":"a@example.com"}},
		"workspaces":{"acct_a":{"id":"acct_a","name":"A"}}}`), &s); err != nil {
		t.Fatal(err)
	}
	s.index()
	if s.Sessions == nil || s.SignInLinks == nil || s.Workspaces["acct_a"].Members == nil || s.Workspaces["acct_a"].Invitations == nil {
		t.Fatal("index left a nil map")
	}
	coretest.MustApply(t, &s, &directoryEvent{MemberSet: &memberSet{AccountID: "acct_a", UserID: "usr_a", Role: RoleOwner, At: coretest.T0}})
	coretest.MustApply(t, &s, &directoryEvent{SessionCreated: &Session{Hash: dirHash(1), UserID: "usr_a", ExpiresAt: coretest.T0.Add(time.Hour)}})
	if s.byEmail["a@example.com"] != "usr_a" || len(s.userAccounts["usr_a"]) != 1 || len(s.userSessions["usr_a"]) != 1 {
		t.Fatalf("indexes after apply: %s", dirIndexes(t, &s))
	}
}
