package actors

import (
	"testing"
	"time"

	"rtcd/actors/core"
	"rtcd/persistence"
)

func countKeys(t *testing.T, s persistence.Storage, prefix []byte) int {
	t.Helper()
	n := 0
	if err := s.Scan(prefix, 0, func(_, _ []byte) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	return n
}

// The sweep deletes stored responses past the 24 h retention through the
// expiry index, and only those.
func TestIdempotencySweepDeletesOnlyExpired(t *testing.T) {
	e, clk, caller := newTestEngine(t)
	for _, key := range []string{"a", "b", "c"} {
		if _, err := e.CreateRoom(caller, &RoomParams{}, &IdempotencyRequest{Key: key, RequestHash: HashRequest("POST", "/v1/rooms", nil)}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(12 * time.Hour)
	if _, err := e.CreateRoom(caller, &RoomParams{}, &IdempotencyRequest{Key: "d", RequestHash: HashRequest("POST", "/v1/rooms", nil)}); err != nil {
		t.Fatal(err)
	}
	records := persistence.IndexPrefix(persistence.PrefixIdem, caller.ProjectID)
	index := persistence.IndexPrefix(persistence.PrefixIdemExp, caller.ProjectID)
	if n, m := countKeys(t, e.env.Store, records), countKeys(t, e.env.Store, index); n != 4 || m != 4 {
		t.Fatalf("before sweep: %d records, %d index entries", n, m)
	}
	clk.Advance(12*time.Hour + time.Second) // a, b, c are 24h+1s old; d is 12h+1s old
	h, _ := e.project(caller.ProjectID)
	e.system.Root.Send(h.pid, core.Sweep{})
	// A command queued behind the sweep: once it answers, the sweep is done.
	if _, err := e.CreateAPIKey(caller, &APIKeyParams{Scopes: []string{"rooms:read"}}, nil); err != nil {
		t.Fatal(err)
	}
	waitDurable(t, e)
	if n, m := countKeys(t, e.env.Store, records), countKeys(t, e.env.Store, index); n != 1 || m != 1 {
		t.Fatalf("after sweep: %d records, %d index entries, want 1 and 1", n, m)
	}
	// d still replays; a is fresh again and creates a new room.
	r, err := e.CreateRoom(caller, &RoomParams{}, &IdempotencyRequest{Key: "d", RequestHash: HashRequest("POST", "/v1/rooms", nil)})
	if err != nil || !r.Replayed {
		t.Fatalf("d after sweep: %+v, %v", r, err)
	}
	r, err = e.CreateRoom(caller, &RoomParams{}, &IdempotencyRequest{Key: "a", RequestHash: HashRequest("POST", "/v1/rooms", nil)})
	if err != nil || r.Replayed {
		t.Fatalf("a after sweep: %+v, %v", r, err)
	}
}

// waitDurable commits an empty batch and waits for it: every batch applied
// before it is then durable and visible.
func waitDurable(t *testing.T, e *Engine) {
	t.Helper()
	if err := e.env.Store.CommitAndWait(e.env.Store.NewBatch()); err != nil {
		t.Fatal(err)
	}
}
