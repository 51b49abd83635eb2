package dispatch

import (
	"context"
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

// gateRegistry publishes one project's gate; the rest of a registry is
// not used by the dispatcher.
type gateRegistry struct {
	core.Registry // nil: the dispatcher asks only for gates
	gate          *core.ProjectGate
}

func (r gateRegistry) ProjectGate(string) (*core.ProjectGate, bool) { return r.gate, true }

// scriptedSender answers with the next of its outcomes and keeps what it
// was sent.
type scriptedSender struct {
	succeed []bool
	bodies  []string
}

func (s *scriptedSender) Deliver(_ context.Context, _ string, _ map[string]string, body []byte) webhookdelivery.Attempt {
	ok := s.succeed[len(s.bodies)]
	s.bodies = append(s.bodies, string(body))
	if ok {
		return webhookdelivery.Attempt{StatusCode: 204, Success: true}
	}
	return webhookdelivery.Attempt{StatusCode: 500, Err: "receiver answered 500"}
}

// A driven dispatcher delivers only when its caller steps it: the fan-out
// moves the outbox into a delivery, the worker's step attempts what is
// due, and a failed attempt waits for its retry time on the injected clock.
func TestStepDeliversOnlyWhenStepped(t *testing.T) {
	store, err := persistence.OpenWith("db", persistence.Options{FS: vfs.NewMem()}, persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	keys, err := auth.DeriveKeys(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	env, err := core.NewEnv(core.Settings{}, store, clk, ratelimit.NewMemory(), keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	ep := &core.WebhookEndpoint{ID: "we_1", URL: "https://example.test/hook", Status: core.EndpointEnabled, CreatedAt: t0}
	ep.SecretSealed = env.Secrets.SealWebhookSecret(ep.ID, "whsec_test")
	gate := &core.ProjectGate{}
	gate.Endpoints.Store(&[]*core.WebhookEndpoint{ep})
	env.Registry = gateRegistry{gate: gate}

	d := New(env)
	sender := &scriptedSender{succeed: []bool{false, true}}
	d.Drive(sender, Settings{ScheduleSeconds: []int{60}})
	d.EnsureWorkers([]*core.WebhookEndpoint{ep})

	b := store.NewBatch()
	env.Outbox.Emit(b, "prj_1", core.EventRoomStarted, t0, map[string]any{"room_id": "room_1", "sequence": 1})
	if err := store.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	status := func() string {
		t.Helper()
		var dl Delivery
		n := 0
		err := store.Scan([]byte(persistence.PrefixDelivery), 0, func(_, v []byte) bool {
			n++
			return json.Unmarshal(v, &dl) == nil
		})
		if err != nil || n != 1 {
			t.Fatalf("%d deliveries (%v), want 1", n, err)
		}
		return dl.Status
	}

	if moved := d.Step(); moved != 1 {
		t.Fatalf("the fan-out moved %d events, want 1", moved)
	}
	if got := status(); got != DeliveryRetrying || len(sender.bodies) != 1 {
		t.Fatalf("after the first step: %s with %d attempts, want retrying after 1", got, len(sender.bodies))
	}
	d.Step()
	if len(sender.bodies) != 1 {
		t.Fatal("a retry was attempted before its time")
	}
	clk.Advance(time.Minute)
	if moved := d.Step(); moved != 0 {
		t.Fatalf("the fan-out moved %d events the second time", moved)
	}
	if got := status(); got != DeliverySucceeded || len(sender.bodies) != 2 || sender.bodies[0] != sender.bodies[1] {
		t.Fatalf("after the retry: %s with attempts %q, want succeeded after two of the same event", got, sender.bodies)
	}
}
