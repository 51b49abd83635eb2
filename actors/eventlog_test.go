package actors

import (
	"strings"
	"testing"

	"rtcd/persistence"
)

// Every owner's Apply refuses, changing nothing, an event of no kind it
// knows (a journal written by a newer release, or damaged) and an event
// naming what its state does not hold.
func TestApplyRefusesUnknownAndDanglingEvents(t *testing.T) {
	room := func() *roomState { return applyAll(newRoomState(testRoom()), created("p1", 1)) }
	project := func() *projectState { return newProjectState(testProject()) }
	wallet := func() *walletState { return newWalletState(Account{ID: "acct_1"}, CreditNormal) }
	directory := func() *directoryState { return newDirectoryState() }
	type check struct {
		name  string
		apply func() (before, after string, err error)
		want  string
	}
	run := func(name, want string, state func() any, apply func(s any) error) check {
		return check{name: name, want: want, apply: func() (string, string, error) {
			s := state()
			before := string(encode(s))
			err := apply(s)
			return before, string(encode(s)), err
		}}
	}
	checks := []check{
		run("room: no kind", "no kind", func() any { return room() }, func(s any) error { return s.(*roomState).Apply(&roomEvent{EventSeq: 9}) }),
		run("room: unknown participant", "no participant p9", func() any { return room() }, func(s any) error {
			ev := connected("p9", 2)
			return s.(*roomState).Apply(&ev)
		}),
		run("room: a participant created twice", "already exists", func() any { return room() }, func(s any) error {
			ev := created("p1", 3)
			return s.(*roomState).Apply(&ev)
		}),
		run("project: no kind", "no kind", func() any { return project() }, func(s any) error { return s.(*projectState).Apply(&projectEvent{}) }),
		run("project: unknown key revoked", "no key k9", func() any { return project() }, func(s any) error {
			ev := keyRevoked("k9", 1)
			return s.(*projectState).Apply(&ev)
		}),
		run("project: unknown endpoint disabled", "no endpoint", func() any { return project() }, func(s any) error {
			return s.(*projectState).Apply(&projectEvent{EndpointDisabled: &endpointDisabled{EndpointID: "we_9", At: t0}})
		}),
		run("wallet: no kind", "no kind", func() any { return wallet() }, func(s any) error { return s.(*walletState).Apply(&walletEvent{}) }),
		run("wallet: unknown top-up", "no top-up pay_9", func() any { return wallet() }, func(s any) error {
			return s.(*walletState).Apply(&walletEvent{TopupUpdated: &topupUpdated{PaymentID: "pay_9", Status: PaymentSucceeded}})
		}),
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

// Recovery stops at an event it cannot apply, naming the journal and the
// entry, instead of skipping it; recording one is a bug and panics before
// anything reaches the batch.
func TestEventLogStopsAtAnEventItCannotApply(t *testing.T) {
	store, err := persistence.OpenWith(t.TempDir(), persistence.Options{}, persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	b := store.NewBatch()
	persistence.WriteSnapshotAt(b, roomJournal("room_1"), 0, encode(newRoomState(testRoom())))
	b.Set(persistence.JournalKey(roomJournal("room_1"), 1), encode(&[]roomEvent{created("p1", 1)}[0]))
	b.Set(persistence.JournalKey(roomJournal("room_1"), 2), []byte(`{"participant_teleported":{"participant_id":"p1"}}`))
	if err := store.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	blank := func() *roomState { return &roomState{} }
	_, err = recoverLog(store, roomJournal("room_1"), 1000, blank, nil)
	if err == nil || !strings.Contains(err.Error(), "room/room_1 #2") || !strings.Contains(err.Error(), "participant_teleported") {
		t.Fatalf("recovery over an unknown event: %v, want an error naming room/room_1 #2 and the entry", err)
	}

	_, err = recoverLog(store, roomJournal("room_2"), 1000, blank, nil)
	if err == nil || !strings.Contains(err.Error(), "no snapshot") {
		t.Fatalf("recovery of a room without a snapshot: %v, want an error", err)
	}

	log, err := recoverLog(store, roomJournal("room_3"), 1000, blank, func() *roomState { return newRoomState(testRoom()) })
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
	log.record(b, connected("p9", 1))
}
