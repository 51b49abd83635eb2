package actors

import (
	"strings"
	"testing"

	"rtcd/actors/core"
	"rtcd/persistence"
)

// Every owner's Apply refuses, changing nothing, an event of no kind it
// knows (a journal written by a newer release, or damaged) and an event
// naming what its state does not hold.
func TestApplyRefusesUnknownAndDanglingEvents(t *testing.T) {
	directory := func() *directoryState { return newDirectoryState() }
	type check struct {
		name  string
		apply func() (before, after string, err error)
		want  string
	}
	run := func(name, want string, state func() any, apply func(s any) error) check {
		return check{name: name, want: want, apply: func() (string, string, error) {
			s := state()
			before := string(core.Encode(s))
			err := apply(s)
			return before, string(core.Encode(s)), err
		}}
	}
	checks := []check{
		run("directory: no kind", "no kind", func() any { return directory() }, func(s any) error { return s.(*directoryState).Apply(&directoryEvent{}) }),
		run("directory: unknown workspace", "no workspace acct_9", func() any { return directory() }, func(s any) error {
			return s.(*directoryState).Apply(&directoryEvent{MemberSet: &memberSet{AccountID: "acct_9", UserID: "usr_1", Role: RoleOwner}})
		}),
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			before, after, err := c.apply()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Apply: %v, want an error saying %q", err, c.want)
			}
			if before != after {
				t.Fatalf("a refused event changed the state:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// Each owner's first state, as its Genesis writes it, is what its actor
// recovers: the snapshot at sequence 0 decodes to the same state, with the
// records bootstrap and the dashboard rely on beside it.
func TestGenesisIsWhatRecoveryReads(t *testing.T) {
	store, err := persistence.OpenWith(t.TempDir(), persistence.Options{}, persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	b := store.NewBatch()
	dir := directoryGenesis(b, User{ID: "usr_1", Email: "o@example.com", CreatedAt: t0},
		workspaceCreated{ID: "acct_1", Name: "Default workspace", CreatedAt: t0}, "prj_1")
	if err := store.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}

	if dir.Workspaces["acct_1"].Members["usr_1"].Role != RoleOwner {
		t.Fatalf("directory genesis: %+v", dir.Workspaces["acct_1"])
	}
	same := func(name string, want, got any) {
		t.Helper()
		if w, g := string(core.Encode(want)), string(core.Encode(got)); w != g {
			t.Fatalf("%s: recovered %s\nwant %s", name, g, w)
		}
	}
	d, err := core.RecoverLog(store, directoryJournal(), 1000, func() *directoryState { return &directoryState{} }, nil)
	if err != nil {
		t.Fatal(err)
	}
	same("directory", dir, d.State())
	if d.State().byEmail["o@example.com"] != "usr_1" {
		t.Fatal("the directory's indexes were not rebuilt")
	}

}
