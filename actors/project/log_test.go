package project

import (
	"rtcd/actors/core/coretest"
	"strings"
	"testing"

	"rtcd/actors/core"
	"rtcd/persistence"
)

// refuses checks that Apply fails with an error saying want and leaves the
// state exactly as it was.
func refuses(t *testing.T, name, want string, s *projectState, e *projectEvent) {
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

// The project's Apply refuses, changing nothing, an event of no kind it
// knows and an event naming a key or an endpoint it does not hold.
func TestApplyRefusesUnknownAndDanglingEvents(t *testing.T) {
	fresh := func() *projectState { return newProjectState(testProject()) }
	refuses(t, "no kind", "no kind", fresh(), &projectEvent{})
	ev := keyRevoked("k9", 1)
	refuses(t, "unknown key revoked", "no key k9", fresh(), &ev)
	refuses(t, "unknown endpoint disabled", "no endpoint", fresh(),
		&projectEvent{EndpointDisabled: &endpointDisabled{EndpointID: "we_9", At: coretest.T0}})
}

// A project's first state, as Genesis writes it (with bootstrap's first
// key), is what its actor recovers, with its p/ entry and the key's record
// beside it.
func TestGenesisIsWhatRecoveryReads(t *testing.T) {
	store, err := persistence.OpenWith(t.TempDir(), persistence.Options{}, persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	p := core.Project{ID: "prj_1", AccountID: "acct_1", Name: "Default project", Status: core.ProjectActive, CreatedAt: coretest.T0}
	key := APIKey{ID: "key_1", Name: "bootstrap", Scopes: 1, Hash: [32]byte{1}, CreatedAt: coretest.T0}
	b := store.NewBatch()
	first := Genesis(b, p, &key)
	if err := store.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	if first.ActiveKeys != 1 {
		t.Fatalf("genesis: %+v", first)
	}
	log, err := core.RecoverLog(store, Journal("prj_1"), 1000, func() *projectState { return &projectState{} }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(core.Encode(log.State())), string(core.Encode(first)); got != want {
		t.Fatalf("recovered %s\nwant %s", got, want)
	}
	if _, err := store.Get(persistence.Key(persistence.PrefixProject, "prj_1")); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := store.Scan(persistence.IndexPrefix(persistence.PrefixKeyIdx, "prj_1"), 0, func(_, _ []byte) bool { n++; return true }); err != nil || n != 1 {
		t.Fatalf("%d key records (%v), want the first key's", n, err)
	}
}
