package dispatch

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"rtcd/actors/core"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/persistence"
	"rtcd/ratelimit"
)

// limitedStore is a Pebble store that declares a limit on a batch's writes,
// as JetStream does (persistence/jsstore: 1000), and fails the test on a
// batch over it.
type limitedStore struct {
	*persistence.Store
	t         *testing.T
	maxWrites int
	batches   []int // writes of each batch committed
}

func (s *limitedStore) MaxBatchWrites() int { return s.maxWrites }

func (s *limitedStore) CommitAndWait(b *persistence.Batch) error {
	if b.Writes() > s.maxWrites {
		s.t.Errorf("a batch of %d writes, over the store's %d", b.Writes(), s.maxWrites)
	}
	s.batches = append(s.batches, b.Writes())
	return s.Store.CommitAndWait(b)
}

// TestFanoutStaysWithinTheStoresBatchLimit: with three subscribed
// endpoints an event writes 13 records (its outbox deletion and four per
// delivery); on a store taking 26 writes a batch, the fan-out moves two
// events a batch, says more are waiting, and moves all of them in the
// end, each event's deliveries whole in one batch.
func TestFanoutStaysWithinTheStoresBatchLimit(t *testing.T) {
	pebbleStore, err := persistence.OpenWith("db", persistence.Options{FS: vfs.NewMem()}, persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer pebbleStore.Close()
	store := &limitedStore{Store: pebbleStore, t: t, maxWrites: 26}
	keys, err := auth.DeriveKeys(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	env, err := core.NewEnv(core.Settings{}, store, clock.NewFake(t0), ratelimit.NewMemory(), keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	var eps []*core.WebhookEndpoint
	for i := range 3 {
		ep := &core.WebhookEndpoint{ID: fmt.Sprintf("we_%d", i), URL: "https://example.test/hook", Status: core.EndpointEnabled, CreatedAt: t0}
		ep.SecretSealed = env.Secrets.SealWebhookSecret(ep.ID, "whsec_test")
		eps = append(eps, ep)
	}
	gate := &core.ProjectGate{}
	gate.Endpoints.Store(&eps)
	env.Registry = gateRegistry{gate: gate}
	d := New(env)

	const events = 9
	b := store.NewBatch()
	for i := range events {
		env.Outbox.Emit(b, "prj_1", core.EventRoomStarted, t0, map[string]any{"room_id": fmt.Sprintf("room_%d", i), "sequence": 1})
	}
	if err := store.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	store.batches = nil

	moved, steps := 0, 0
	for more := true; more; steps++ {
		var n int
		n, more = d.fanout()
		if more && n != 2 {
			t.Fatalf("step %d moved %d events, want 2 (26 writes, 13 an event) while more wait", steps, n)
		}
		moved += n
		if steps > events {
			t.Fatal("the fan-out never said it was done")
		}
	}
	if moved != events {
		t.Fatalf("moved %d of %d events", moved, events)
	}
	deliveries := 0
	_ = store.Scan([]byte(persistence.PrefixDelivery), 0, func(_, _ []byte) bool { deliveries++; return true })
	if deliveries != events*len(eps) {
		t.Fatalf("%d deliveries, want %d", deliveries, events*len(eps))
	}
	t.Logf("%d events moved in batches of %v writes", moved, store.batches)
}

// TestUndeliveredIndexBuildStaysWithinTheStoresBatchLimit: on a store
// taking 4 writes a batch, the index of 10 undelivered deliveries is built
// 3 entries a batch (one write is kept for the mark that ends it), every
// delivery indexed.
func TestUndeliveredIndexBuildStaysWithinTheStoresBatchLimit(t *testing.T) {
	pebbleStore, err := persistence.OpenWith("db", persistence.Options{FS: vfs.NewMem()}, persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer pebbleStore.Close()
	keys, err := auth.DeriveKeys(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	b := pebbleStore.NewBatch()
	const deliveries = 10
	for i := range deliveries {
		dl := Delivery{ID: fmt.Sprintf("wd_%02d", i), EndpointID: "we_a", EventID: "evt", EventType: "room.ended", Status: DeliveryPending,
			NextAttemptAt: t0, CreatedAt: t0.Add(time.Duration(i) * time.Second)}
		b.Set(DeliveryKey(dl.EndpointID, dl.ID), core.MustJSON(dl))
		b.Set(dueKey(dl.EndpointID, dl.NextAttemptAt, dl.ID), []byte(dl.ID))
	}
	if err := pebbleStore.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	store := &limitedStore{Store: pebbleStore, t: t, maxWrites: 4}
	env, err := core.NewEnv(core.Settings{}, store, clock.NewFake(t0), ratelimit.NewMemory(), keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := New(env).buildUndeliveredIndex(); err != nil {
		t.Fatal(err)
	}
	n := 0
	_ = store.Scan([]byte(persistence.PrefixUndelivered), 0, func(_, _ []byte) bool { n++; return true })
	if n != deliveries {
		t.Fatalf("%d deliveries indexed, want %d", n, deliveries)
	}
	if _, err := store.Get(undeliveredIndexBuilt); err != nil {
		t.Fatalf("the index is not marked built: %v", err)
	}
	t.Logf("built in batches of %v writes", store.batches)
}
