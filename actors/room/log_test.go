package room

import (
	"strings"
	"testing"

	"rtcd/actors/core"
	"rtcd/persistence"
)

// refuses checks that apply fails with an error saying want and leaves the
// state exactly as it was.
func refuses[E any, S core.State[E]](t *testing.T, name, want string, s S, e *E) {
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

// The room's Apply refuses, changing nothing, an event of no kind it knows
// (a journal written by a newer release, or damaged) and an event naming a
// participant it does not hold.
func TestApplyRefusesUnknownAndDanglingEvents(t *testing.T) {
	fresh := func() *roomState { return core.ApplyAll(newRoomState(testRoom()), created("p1", 1)) }
	refuses(t, "no kind", "no kind", fresh(), &roomEvent{EventSeq: 9})
	ev := connected("p9", 2)
	refuses(t, "unknown participant", "no participant p9", fresh(), &ev)
	ev = created("p1", 3)
	refuses(t, "a participant created twice", "already exists", fresh(), &ev)
}

func openStore(t *testing.T) *persistence.Store {
	t.Helper()
	store, err := persistence.OpenWith(t.TempDir(), persistence.Options{}, persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// Recovery stops at an event it cannot apply, naming the journal and the
// entry, instead of skipping it; recording one is a bug and panics before
// anything reaches the batch.
func TestEventLogStopsAtAnEventItCannotApply(t *testing.T) {
	store := openStore(t)
	b := store.NewBatch()
	persistence.WriteSnapshotAt(b, Journal("room_1"), 0, core.Encode(newRoomState(testRoom())))
	b.Set(persistence.JournalKey(Journal("room_1"), 1), core.Encode(&[]roomEvent{created("p1", 1)}[0]))
	b.Set(persistence.JournalKey(Journal("room_1"), 2), []byte(`{"participant_teleported":{"participant_id":"p1"}}`))
	if err := store.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	blank := func() *roomState { return &roomState{} }
	_, err := core.RecoverLog(store, Journal("room_1"), 1000, blank, nil)
	if err == nil || !strings.Contains(err.Error(), "room/room_1 #2") || !strings.Contains(err.Error(), "participant_teleported") {
		t.Fatalf("recovery over an unknown event: %v, want an error naming room/room_1 #2 and the entry", err)
	}

	_, err = core.RecoverLog(store, Journal("room_2"), 1000, blank, nil)
	if err == nil || !strings.Contains(err.Error(), "no snapshot") {
		t.Fatalf("recovery of a room without a snapshot: %v, want an error", err)
	}

	log, err := core.RecoverLog(store, Journal("room_3"), 1000, blank, func() *roomState { return newRoomState(testRoom()) })
	if err != nil {
		t.Fatal(err)
	}
	b = store.NewBatch()
	defer b.Discard()
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "does not apply") {
			t.Fatalf("recording an event that does not apply: recovered %v, want an assertion panic", r)
		}
		if !b.Empty() {
			t.Fatal("the refused event reached the batch")
		}
	}()
	log.Record(b, connected("p9", 1))
}

// A new room's first state, as Genesis writes it, is what its actor
// recovers, with its record beside it.
func TestGenesisIsWhatRecoveryReads(t *testing.T) {
	store := openStore(t)
	b := store.NewBatch()
	body := Genesis(b, testRoom())
	if err := store.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	log, err := core.RecoverLog(store, Journal("room_1"), 1000, func() *roomState { return &roomState{} }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(core.Encode(log.State())), string(core.Encode(newRoomState(testRoom()))); got != want {
		t.Fatalf("recovered %s\nwant %s", got, want)
	}
	if got, _ := store.Get(RecordKey("prj_1", "room_1")); string(got) != string(body) {
		t.Fatalf("room record %s, want %s", got, body)
	}
	n := 0
	if err := store.Scan(persistence.IndexPrefix(persistence.PrefixRoomIdx, "prj_1"), 0, func(_, _ []byte) bool { n++; return true }); err != nil || n != 1 {
		t.Fatalf("%d list entries (%v), want 1", n, err)
	}
}
