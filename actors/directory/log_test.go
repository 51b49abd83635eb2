package directory

import (
	"rtcd/actors/core/coretest"
	"strings"
	"testing"

	"rtcd/actors/core"
	"rtcd/persistence"
)

// refuses checks that Apply fails with an error saying want and leaves the
// state exactly as it was.
func refuses(t *testing.T, name, want string, s *State, e *directoryEvent) {
	t.Helper()
	before := string(core.Encode(s))
	err := s.Apply(e)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: Apply: %v, want an error saying %q", name, err, want)
	}
	if after := string(core.Encode(s)); after != before {
		t.Fatalf("%s: a refused event changed the state:\nbefore %s\nafter  %s", name, before, after)
	}
}

// The directory's Apply refuses, changing nothing, an event of no kind it
// knows and an event naming a workspace it does not hold.
func TestApplyRefusesUnknownAndDanglingEvents(t *testing.T) {
	refuses(t, "no kind", "no kind", newState(), &directoryEvent{})
	refuses(t, "unknown workspace", "no workspace acct_9", newState(),
		&directoryEvent{MemberSet: &memberSet{AccountID: "acct_9", UserID: "usr_1", Role: RoleOwner}})
}

// The directory's first state, as Genesis writes it at bootstrap, is what
// its actor recovers, indexes rebuilt.
func TestGenesisIsWhatRecoveryReads(t *testing.T) {
	store, err := persistence.OpenWith(t.TempDir(), persistence.Options{}, persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	b := store.NewBatch()
	first := Genesis(b, User{ID: "usr_1", Email: "o@example.com", CreatedAt: coretest.T0}, "acct_1", "Default workspace", "prj_1", coretest.T0)
	if err := store.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	if first.Workspaces["acct_1"].Members["usr_1"].Role != RoleOwner {
		t.Fatalf("genesis: %+v", first.Workspaces["acct_1"])
	}
	log, err := core.RecoverLog(store, Journal(), 1000, func() *State { return &State{} }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(core.Encode(log.State())), string(core.Encode(first)); got != want {
		t.Fatalf("recovered %s\nwant %s", got, want)
	}
	if log.State().byEmail["o@example.com"] != "usr_1" {
		t.Fatal("the directory's indexes were not rebuilt")
	}
}
