package actors

import (
	"testing"
	"time"

	"github.com/goccy/go-json"
	"rtcd/actors/core"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/persistence"
	"rtcd/ratelimit"
)

// TestActorRestartAfterPanicCountsOnce proves that when protoactor restarts
// a panicked project or room actor (same value, Started again), recovery
// reloads from disk without double-counting rooms or participant slots and
// the actors keep serving.
func TestActorRestartAfterPanicCountsOnce(t *testing.T) {
	e, _, caller := newTestEngine(t)
	res, aerr := e.CreateRoom(caller, &RoomParams{}, nil)
	if aerr != nil {
		t.Fatal(aerr)
	}
	roomID := decodeID(t, res.Body)
	var tokens []string
	for i := 0; i < 3; i++ {
		res, aerr := e.CreateParticipant(caller, roomID, &ParticipantParams{}, nil)
		if aerr != nil {
			t.Fatal(aerr)
		}
		tokens = append(tokens, decodeToken(t, res.Body))
	}
	for _, tok := range tokens[:2] {
		if _, aerr := e.Connect(&ConnectParams{Token: &tok}, "127.0.0.1"); aerr != nil {
			t.Fatal(aerr)
		}
	}
	want := Stats{ActiveRooms: 1, ActiveParticipants: 2}
	if got := e.Stats(); got.ActiveRooms != want.ActiveRooms || got.ActiveParticipants != want.ActiveParticipants {
		t.Fatalf("before crash: %+v", got)
	}

	ph, _ := e.project(caller.ProjectID)
	rh, _ := e.room(roomID)
	e.system.Root.Send(ph.pid, crashForTest{})
	e.system.Root.Send(rh.pid, crashForTest{})

	// Both actors answer again after their restart (commands queue behind
	// the crash), and nothing was counted twice.
	if _, aerr := e.CreateParticipant(caller, roomID, &ParticipantParams{}, nil); aerr != nil {
		t.Fatalf("room after restart: %v", aerr)
	}
	if _, aerr := e.CreateAPIKey(caller, &APIKeyParams{Scopes: []string{"rooms:read"}}, nil); aerr != nil {
		t.Fatalf("project after restart: %v", aerr)
	}
	if got := e.Stats(); got.ActiveRooms != 1 || got.ActiveParticipants != 2 {
		t.Fatalf("after restart: %+v, want 1 room and 2 participants", got)
	}
	// The room is still full at 2: the third participant is refused.
	if _, aerr := e.Connect(&ConnectParams{Token: &tokens[2]}, "127.0.0.1"); aerr == nil || aerr.Code != "quota_exceeded" {
		t.Fatalf("third connect after restart: %v, want quota_exceeded", aerr)
	}
}

func decodeID(t *testing.T, body []byte) string {
	t.Helper()
	var v struct {
		ID string `json:"id"`
	}
	if err := jsonUnmarshal(body, &v); err != nil || v.ID == "" {
		t.Fatalf("no id in %s", body)
	}
	return v.ID
}

func decodeToken(t *testing.T, body []byte) string {
	t.Helper()
	var v struct {
		Token string `json:"token"`
	}
	if err := jsonUnmarshal(body, &v); err != nil || v.Token == "" {
		t.Fatalf("no token in %s", body)
	}
	return v.Token
}

var jsonUnmarshal = func(b []byte, v any) error { return json.Unmarshal(b, v) }

// newTestEngine starts an engine on a fresh store with a bootstrapped
// workspace and returns it with its fake clock and the bootstrap key's caller.
func newTestEngine(t *testing.T) (*Engine, *clock.Fake, *core.Caller) {
	t.Helper()
	return newTestEngineWith(t, persistence.Options{}, nil)
}

// newTestEngineWith is newTestEngine on a store opened with o (a file
// system that holds WAL syncs back, a small sync queue), with the
// settings changed by tweak (nil: none).
func newTestEngineWith(t *testing.T, o persistence.Options, tweak func(*core.Settings)) (*Engine, *clock.Fake, *core.Caller) {
	t.Helper()
	e, clk, boot := bootTestEngine(t, o, tweak)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}

	t.Cleanup(e.Stop)
	caller, aerr := e.Authenticate(boot.APIKey)
	if aerr != nil {
		t.Fatal(aerr)
	}
	return e, clk, caller
}

// bootTestEngine bootstraps a Pebble store opened with o and returns an
// engine over it, not started, with the settings changed by tweak (nil:
// none), its clock and the bootstrap's credentials.
func bootTestEngine(t *testing.T, o persistence.Options, tweak func(*core.Settings)) (*Engine, *clock.Fake, BootstrapResult) {
	t.Helper()
	store, err := persistence.OpenWith(t.TempDir(), o, persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	keys, err := auth.DeriveKeys(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	boot, err := Bootstrap(store, keys, clk, core.Billing{Currency: "USD"}, "owner@example.com")
	if err != nil {
		t.Fatal(err)
	}
	limits := core.Limits{MaxActiveRooms: 10, MaxActiveParticipants: 10, MaxParticipantsPerRoom: 2,
		RoomCreatesPerMinute: 100, ParticipantCreatesPerMinute: 100, ConnectRequestsPerMinute: 100}
	settings := core.Settings{Region: "global", MediaURL: "ws://127.0.0.1:1/rtc", DefaultLimits: limits,
		ConnectPerIPPerMinute: 100, MediaTokenTTL: time.Minute, SnapshotEveryEvents: 1000}
	if tweak != nil {
		tweak(&settings)
	}
	e, err := New(settings, store, clk, ratelimit.NewMemory(), keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e, clk, boot
}
