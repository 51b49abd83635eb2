package actors

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"rtcd/actors/core"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/persistence"
	"rtcd/ratelimit"
)

// limitedStore is a Pebble store that declares a limit on a batch's
// writes, as JetStream does (persistence/jsstore: 1000, here scaled down
// so a test reaches it), and counts the batches over it.
type limitedStore struct {
	*persistence.Store
	maxWrites int
	mu        sync.Mutex
	over      []int // writes of each batch over the limit
}

func (s *limitedStore) MaxBatchWrites() int { return s.maxWrites }

func (s *limitedStore) check(b *persistence.Batch) {
	if b.Writes() > s.maxWrites {
		s.mu.Lock()
		s.over = append(s.over, b.Writes())
		s.mu.Unlock()
	}
}

func (s *limitedStore) Commit(b *persistence.Batch, done func()) {
	s.check(b)
	s.Store.Commit(b, done)
}

func (s *limitedStore) CommitAndWait(b *persistence.Batch) error {
	s.check(b)
	return s.Store.CommitAndWait(b)
}

// startLimited bootstraps a Pebble store, lets before write into it, and
// starts an engine on it through a limitedStore of maxWrites.
func startLimited(t *testing.T, maxWrites int, before func(*persistence.Store, BootstrapResult)) (*Engine, *limitedStore, *clock.Fake, *core.Caller) {
	t.Helper()
	pebbleStore, err := persistence.Open(t.TempDir(), persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pebbleStore.Close() })
	keys, err := auth.DeriveKeys(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	boot, err := Bootstrap(pebbleStore, keys, clk, core.Billing{Currency: "USD"}, "owner@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(pebbleStore, boot)
	}
	store := &limitedStore{Store: pebbleStore, maxWrites: maxWrites}
	limits := core.Limits{MaxActiveRooms: 100, MaxActiveParticipants: 10, MaxParticipantsPerRoom: 2,
		RoomCreatesPerMinute: 100, ParticipantCreatesPerMinute: 100, ConnectRequestsPerMinute: 100}
	e, err := New(core.Settings{Region: "global", MediaURL: "ws://127.0.0.1:1/rtc", DefaultLimits: limits,
		ConnectPerIPPerMinute: 100, MediaTokenTTL: time.Minute, SnapshotEveryEvents: 1000}, store, clk, ratelimit.NewMemory(), keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	caller, aerr := e.Authenticate(boot.APIKey)
	if aerr != nil {
		t.Fatal(aerr)
	}
	return e, store, clk, caller
}

// TestIdempotencySweepStaysWithinTheStoresBatchLimit: on a store taking 12
// writes a batch, the sweep deletes 6 expired records (two keys each) a
// batch, and goes on until none is left.
func TestIdempotencySweepStaysWithinTheStoresBatchLimit(t *testing.T) {
	e, store, clk, caller := startLimited(t, 12, nil)
	const records = 15
	for i := range records {
		if _, err := e.CreateRoom(caller, &RoomParams{}, &IdempotencyRequest{Key: fmt.Sprintf("k%d", i), RequestHash: HashRequest("POST", "/v1/rooms", nil)}); err != nil {
			t.Fatal(err)
		}
	}
	store.mu.Lock()
	store.over = nil // the creates are not under test
	store.mu.Unlock()
	idem := persistence.IndexPrefix(persistence.PrefixIdem, caller.ProjectID)
	if n := countKeys(t, store, idem); n != records {
		t.Fatalf("%d records before the sweep, want %d", n, records)
	}
	clk.Advance(24*time.Hour + time.Second)
	h, _ := e.project(caller.ProjectID)
	e.system.Root.Send(h.pid, core.Sweep{})
	// The sweep posts itself again while a full batch was deleted; wait
	// until the records are gone (polling the actor's progress, not time).
	deadline := time.Now().Add(10 * time.Second)
	for countKeys(t, store, idem) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d records left after the sweeps", countKeys(t, store, idem))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := countKeys(t, store, persistence.IndexPrefix(persistence.PrefixIdemExp, caller.ProjectID)); n != 0 {
		t.Fatalf("%d expiry index entries left", n)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if len(store.over) > 0 {
		t.Fatalf("batches over the store's 12 writes during the sweep: %v", store.over)
	}
}

// TestWalletChargesStayWithinTheStoresBatchLimit: 12 usage charges left
// for a wallet are applied at its recovery, on a store taking 20 writes a
// batch, in several batches, each charge once: the ledger gets 12 usage
// entries and no pending charge is left.
func TestWalletChargesStayWithinTheStoresBatchLimit(t *testing.T) {
	const charges = 12
	var account string
	e, store, _, caller := startLimited(t, 20, func(s *persistence.Store, boot BootstrapResult) {
		account = boot.AccountID
		b := s.NewBatch()
		for i := range charges {
			c := core.PendingCharge{ID: fmt.Sprintf("chg_%02d", i), ProjectID: boot.ProjectID, RoomID: "room_x",
				ParticipantID: "pt_x", SessionID: fmt.Sprintf("ses_%02d", i), Seconds: 60, Amount: 1000}
			b.Set(persistence.Key(persistence.PrefixCharge, boot.AccountID+"/"+c.ID), core.MustJSON(c))
		}
		if err := s.CommitAndWait(b); err != nil {
			t.Fatal(err)
		}
	})
	pending := persistence.IndexPrefix(persistence.PrefixCharge, account)
	deadline := time.Now().Add(10 * time.Second)
	for countKeys(t, store, pending) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d pending charges left", countKeys(t, store, pending))
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitDurable(t, e)
	usage := 0
	_ = store.Scan(persistence.IndexPrefix(persistence.PrefixLedger, account), 0, func(_, v []byte) bool {
		var entry struct{ Type string }
		if jsonUnmarshal(v, &entry) == nil && entry.Type == "usage" {
			usage++
		}
		return true
	})
	if usage != charges {
		t.Fatalf("%d usage ledger entries, want %d (each charge once)", usage, charges)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if len(store.over) > 0 {
		t.Fatalf("batches over the store's 20 writes: %v", store.over)
	}
	_ = caller
}
