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

// oneProjectRegistry publishes the gate of one project only, as a cluster
// node runs only the projects placed on it.
type oneProjectRegistry struct {
	gateRegistry
	projectID string
}

func (r oneProjectRegistry) ProjectGate(id string) (*core.ProjectGate, bool) {
	if id != r.projectID {
		return nil, false
	}
	return r.gate, true
}

// On a cluster node the shared outbox holds other nodes' events: the
// fan-out moves those of its own projects and leaves the others' for
// their owners, where a single node drops events of a project it does not
// know (nothing can deliver them).
func TestClusteredFanoutLeavesOtherNodesEvents(t *testing.T) {
	for _, clustered := range []bool{true, false} {
		t.Run(fmt.Sprintf("clustered=%v", clustered), func(t *testing.T) {
			gate := &core.ProjectGate{}
			env, store, t0 := clusteredEnv(t, clustered, gate)
			eps := []*core.WebhookEndpoint{testEndpoint(env, t0)}
			gate.Endpoints.Store(&eps)
			d := New(env)

			b := store.NewBatch()
			for i := range 6 {
				project := "prj_here"
				if i%2 == 0 {
					project = "prj_elsewhere"
				}
				env.Outbox.Emit(b, project, core.EventRoomStarted, t0, map[string]any{"room_id": fmt.Sprintf("room_%d", i), "sequence": 1})
			}
			if err := store.CommitAndWait(b); err != nil {
				t.Fatal(err)
			}
			moved, _ := d.fanout()
			left := 0
			_ = store.Scan([]byte(persistence.PrefixOutbox), 0, func(_, _ []byte) bool { left++; return true })
			deliveries := 0
			_ = store.Scan([]byte(persistence.PrefixDelivery), 0, func(_, _ []byte) bool { deliveries++; return true })
			wantMoved, wantLeft := 6, 0
			if clustered {
				wantMoved, wantLeft = 3, 3
			}
			if moved != wantMoved || left != wantLeft || deliveries != 3 {
				t.Fatalf("moved %d, left %d, %d deliveries; want %d moved, %d left, 3 deliveries", moved, left, deliveries, wantMoved, wantLeft)
			}
		})
	}
}

// A cluster node places a project while its dispatcher runs: between the
// registration of the project's gate and the recovery that publishes its
// endpoints, the fan-out leaves the project's events where they are (read
// as having no endpoint, they would be dropped), and moves them once the
// endpoints are known.
func TestClusteredFanoutWaitsForARecoveringProject(t *testing.T) {
	gate := &core.ProjectGate{} // registered, not yet recovered
	env, store, t0 := clusteredEnv(t, true, gate)
	d := New(env)
	b := store.NewBatch()
	env.Outbox.Emit(b, "prj_here", core.EventRoomEnded, t0, map[string]any{"room_id": "room_1", "sequence": 1})
	if err := store.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	if moved, _ := d.fanout(); moved != 0 {
		t.Fatalf("the fan-out moved %d events of a project whose endpoints are not known yet", moved)
	}
	gate.PublishEndpoints(1, []*core.WebhookEndpoint{testEndpoint(env, t0)}, func() {})
	if moved, _ := d.fanout(); moved != 1 {
		t.Fatalf("recovered, the fan-out moved %d events, want 1", moved)
	}
	deliveries := 0
	_ = store.Scan([]byte(persistence.PrefixDelivery), 0, func(_, _ []byte) bool { deliveries++; return true })
	if deliveries != 1 {
		t.Fatalf("%d deliveries, want 1", deliveries)
	}
}

// clusteredEnv is a cluster node's environment over an in-memory Pebble
// store, its registry publishing gate as project prj_here's only.
func clusteredEnv(t *testing.T, clustered bool, gate *core.ProjectGate) (*core.Env, *persistence.Store, time.Time) {
	t.Helper()
	store, err := persistence.OpenWith("db", persistence.Options{FS: vfs.NewMem()}, persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	keys, err := auth.DeriveKeys(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	env, err := core.NewEnv(core.Settings{}, store, clock.NewFake(t0), ratelimit.NewMemory(), keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	env.Clustered = clustered
	env.Registry = oneProjectRegistry{gateRegistry: gateRegistry{gate: gate}, projectID: "prj_here"}
	return env, store, t0
}

// testEndpoint is an enabled endpoint subscribed to every event.
func testEndpoint(env *core.Env, t0 time.Time) *core.WebhookEndpoint {
	ep := &core.WebhookEndpoint{ID: "we_1", URL: "https://example.test/hook", Status: core.EndpointEnabled, CreatedAt: t0}
	ep.SecretSealed = env.Secrets.SealWebhookSecret(ep.ID, "whsec_test")
	return ep
}
