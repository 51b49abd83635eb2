package dispatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/goccy/go-json"
	"rtcd/actors/core"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/persistence"
	"rtcd/ratelimit"
	"rtcd/webhookdelivery"
)

// testStart is the start of the tests' clocks.
var testStart = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// testWorld is a dispatcher on an in-memory store, driven by its test
// (Drive and Step), with one project whose gate publishes the endpoints.
type testWorld struct {
	t     *testing.T
	store *persistence.Store
	env   *core.Env
	gate  *core.ProjectGate
	d     *Dispatcher
}

func newTestWorld(t *testing.T, clk clock.Clock, sender WebhookSender, settings Settings) *testWorld {
	t.Helper()
	store, err := persistence.OpenWith("db", persistence.Options{FS: vfs.NewMem()}, persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	env, err := core.NewEnv(core.Settings{}, store, clk, ratelimit.NewMemory(), testKeys(t, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	gate := &core.ProjectGate{}
	env.Registry = gateRegistry{gate: gate}
	d := New(env)
	d.Drive(sender, settings)
	return &testWorld{t: t, store: store, env: env, gate: gate, d: d}
}

// testKeys derives keys from a master key of 32 bytes of seed.
func testKeys(t *testing.T, seed byte) auth.Keys {
	t.Helper()
	master := make([]byte, 32)
	for i := range master {
		master[i] = seed
	}
	keys, err := auth.DeriveKeys(master)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// endpoint publishes an enabled endpoint of every event type with secret
// and gives it a worker.
func (tw *testWorld) endpoint(id, secret string) *core.WebhookEndpoint {
	ep := &core.WebhookEndpoint{ID: id, URL: "https://example.test/" + id, Status: core.EndpointEnabled, CreatedAt: testStart}
	ep.SecretSealed = tw.env.Secrets.SealWebhookSecret(id, secret)
	tw.publish(ep)
	return ep
}

// publish makes eps the project's endpoints (replacing those of the same
// id) and tells the dispatcher, as the project actor does.
func (tw *testWorld) publish(eps ...*core.WebhookEndpoint) {
	var all []*core.WebhookEndpoint
	if cur := tw.gate.Endpoints.Load(); cur != nil {
		for _, ep := range *cur {
			replaced := false
			for _, n := range eps {
				replaced = replaced || n.ID == ep.ID
			}
			if !replaced {
				all = append(all, ep)
			}
		}
	}
	all = append(all, eps...)
	tw.gate.Endpoints.Store(&all)
	tw.d.EnsureWorkers(all)
}

// roomEvent writes one event of a room with its sequence number to the
// outbox, durably, and returns the event's id.
func (tw *testWorld) roomEvent(roomID string, sequence int) string {
	tw.t.Helper()
	b := tw.store.NewBatch()
	tw.env.Outbox.Emit(b, "prj_1", core.EventParticipantJoined, tw.env.Clock.Now(), map[string]any{"room_id": roomID, "sequence": sequence})
	if err := tw.store.CommitAndWait(b); err != nil {
		tw.t.Fatal(err)
	}
	var id string
	_ = tw.store.Scan([]byte(persistence.PrefixOutbox), 0, func(_, v []byte) bool {
		var ev core.OutboxEvent
		if json.Unmarshal(v, &ev) == nil {
			id = ev.ID // the newest is the last
		}
		return true
	})
	return id
}

// deliveries are the endpoint's delivery records, by event id.
func (tw *testWorld) deliveries(endpointID string) map[string]Delivery {
	tw.t.Helper()
	out := map[string]Delivery{}
	err := tw.store.Scan(persistence.IndexPrefix(persistence.PrefixDelivery, endpointID), 0, func(_, v []byte) bool {
		var dl Delivery
		if err := json.Unmarshal(v, &dl); err != nil {
			tw.t.Fatalf("a delivery does not decode: %v", err)
		}
		out[dl.EventID] = dl
		return true
	})
	if err != nil {
		tw.t.Fatal(err)
	}
	return out
}

// call is one request a recordingSender was given.
type call struct {
	url     string
	headers map[string]string
	event   core.OutboxEvent
}

// recordingSender keeps every request in the order Deliver was entered and
// answers each with answer (nil: success).
type recordingSender struct {
	mu     sync.Mutex
	calls  []call
	answer func(c call, n int) webhookdelivery.Attempt // n: the calls before this one
}

func (s *recordingSender) Deliver(_ context.Context, url string, headers map[string]string, body []byte) webhookdelivery.Attempt {
	c := call{url: url, headers: headers}
	_ = json.Unmarshal(body, &c.event)
	s.mu.Lock()
	n := len(s.calls)
	s.calls = append(s.calls, c)
	answer := s.answer
	s.mu.Unlock()
	if answer == nil {
		return webhookdelivery.Attempt{StatusCode: 204, Success: true}
	}
	return answer(c, n)
}

func (s *recordingSender) recorded() []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]call(nil), s.calls...)
}

func failure() webhookdelivery.Attempt {
	return webhookdelivery.Attempt{StatusCode: 500, Err: "receiver answered 500"}
}
