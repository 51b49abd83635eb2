package dispatch

import (
	"path/filepath"
	"testing"
	"time"

	"rtcd/actors/core"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/persistence"
	"rtcd/ratelimit"
)

// A store written before the undelivered index existed gets it built at
// Start from the due entries: pending and retrying deliveries are indexed
// by their creation, dead ones and stale due entries are not, and the
// workers' backlog counts and the oldest age follow; a disabled
// endpoint's deliveries count nowhere.
func TestUndeliveredIndexBuiltAndCounted(t *testing.T) {
	store, err := persistence.Open(filepath.Join(t.TempDir(), "pebble"), persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	keys, err := auth.DeriveKeys(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	env, err := core.NewEnv(core.Settings{Region: "global"}, store, clk, ratelimit.NewMemory(), keys, nil)
	if err != nil {
		t.Fatal(err)
	}

	b := store.NewBatch()
	put := func(endpointID, id, status string, created time.Time, due bool) {
		dl := Delivery{ID: id, EndpointID: endpointID, EventID: "evt_" + id, EventType: "room.ended", Status: status,
			NextAttemptAt: created.Add(time.Minute), CreatedAt: created}
		b.Set(DeliveryKey(endpointID, id), core.MustJSON(dl))
		if due {
			b.Set(dueKey(endpointID, dl.NextAttemptAt, id), []byte(id))
		}
	}
	put("we_a", "wd_1", DeliveryRetrying, t0.Add(-3*time.Minute), true)
	put("we_a", "wd_2", DeliveryPending, t0.Add(-time.Minute), true)
	put("we_a", "wd_3", DeliveryDead, t0.Add(-5*time.Minute), false)
	put("we_a", "wd_4", DeliverySucceeded, t0.Add(-4*time.Minute), true) // a stale due entry
	b.Set(dueKey("we_a", t0, "wd_gone"), []byte("wd_gone"))              // and one without a record
	put("we_b", "wd_5", DeliveryRetrying, t0.Add(-10*time.Minute), true) // of a disabled endpoint
	if err := store.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}

	d := New(env)
	d.EnsureWorkers([]*core.WebhookEndpoint{{ID: "we_a", Status: core.EndpointEnabled}, {ID: "we_b", Status: core.EndpointEnabled}})
	d.IdleWorkers([]*core.WebhookEndpoint{{ID: "we_b", Status: core.EndpointDisabled}})
	d.countBacklog()

	var indexed []string
	_ = store.Scan([]byte(persistence.PrefixUndelivered), 0, func(key, value []byte) bool {
		indexed = append(indexed, string(key[len(key)-len("wd_1"):])+"="+string(value))
		return true
	})
	if want := []string{"wd_1=retrying", "wd_2=pending", "wd_5=retrying"}; len(indexed) != 3 ||
		indexed[0] != want[0] || indexed[1] != want[1] || indexed[2] != want[2] {
		t.Fatalf("undelivered index %v, want %v (oldest first per endpoint)", indexed, want)
	}
	if _, err := store.Get(undeliveredIndexBuilt); err != nil {
		t.Fatalf("the index is not marked built: %v", err)
	}
	if got := d.backlog(); got.Pending != 1 || got.Retrying != 1 {
		t.Fatalf("backlog %+v, want 1 pending and 1 retrying (the disabled endpoint's not counted)", got)
	}
	if age := d.oldestUndeliveredAgeSeconds(); age != 180 {
		t.Fatalf("oldest undelivered age %v s, want 180 (wd_1; wd_5's endpoint is disabled)", age)
	}
	clk.Advance(time.Minute)
	if age := d.oldestUndeliveredAgeSeconds(); age != 240 {
		t.Fatalf("oldest undelivered age %v s a minute later, want 240", age)
	}
}
