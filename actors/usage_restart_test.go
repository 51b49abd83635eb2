package actors

import (
	"testing"
	"time"

	"github.com/goccy/go-json"
	"rtcd/actors/core"
	"rtcd/actors/room"
	"rtcd/actors/wallet"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/money"
	"rtcd/persistence"
	"rtcd/ratelimit"
)

// A participant joined on an embedded media node when the process stopped
// without any leave (kill -9): after recovery its session ends at the last
// instant it was settled for, so the downtime is never billed.
func TestRestartClosesLostSessionsAtLastSettlement(t *testing.T) {
	h := newUsageHarness(t)
	store, e := h.open()
	caller, roomID, cs := h.joinedParticipant(e)

	h.clk.Advance(90 * time.Second)
	rh, _ := e.room(roomID)
	e.system.Root.Send(rh.pid, core.Sweep{}) // settles 90 s
	if _, aerr := e.CreateParticipant(caller, roomID, &ParticipantParams{}, nil); aerr != nil {
		t.Fatal(aerr) // queued behind the sweep: the settlement is done
	}
	waitDurable(t, e)
	h.clk.Advance(10 * time.Minute) // the process is "down" for ten minutes
	e.Stop()                        // no leave was ever reported
	_ = store.Close()

	store, e = h.open()
	defer func() { e.Stop(); _ = store.Close() }()
	if rec := h.usage(e, caller, cs.SessionID); rec.Seconds != 90 {
		t.Fatalf("finalized %d s, want the 90 s settled before the stop (never the downtime)", rec.Seconds)
	}
	// 90 s at 0.001 per second = 0.090000, charged once.
	w, _ := e.wallet(e.limitsAccount(caller))
	r := e.ask(w.pid, wallet.Read{})
	if got := money.Micros(r.Value.(wallet.Reading).Balance); got != 10_000_000-90_000 {
		t.Fatalf("balance %s, want 9.910000", got)
	}
}

// TestStopAppliesLeavesReportedBeforeIt: what `rtcd serve` does on
// SIGTERM: the media node reports every leave (node_shutdown), then the
// engine stops. A leave handed to the engine before Stop is applied even
// when the room has a long queue of messages ahead of it, so the session
// is finalized with its whole length and the shutdown's reason, never
// left for recovery to close at its last settlement.
func TestStopAppliesLeavesReportedBeforeIt(t *testing.T) {
	h := newUsageHarness(t)
	store, e := h.open()
	caller, roomID, cs := h.joinedParticipant(e)
	waitDurable(t, e)
	h.clk.Advance(90 * time.Second)
	// A queue in front of the leave: presence snapshots that still show
	// the participant (each a no-op for the room), so Stop comes while the
	// leave waits in the room's mailbox.
	rh, _ := e.room(roomID)
	on := map[string]room.MediaJoin{cs.Participant.ID: {SessionID: cs.SessionID, ProjectID: caller.ProjectID, RoomID: roomID, ParticipantID: cs.Participant.ID}}
	for range 20000 {
		e.system.Root.Send(rh.pid, room.Presence{At: h.clk.Now(), Sessions: on})
	}
	e.MediaLeft(room.MediaLeave{SessionID: cs.SessionID, ProjectID: caller.ProjectID, RoomID: roomID, ParticipantID: cs.Participant.ID,
		At: h.clk.Now(), Reason: "node_shutdown"})
	e.Stop()
	_ = store.Close()

	store, e = h.open()
	defer func() { e.Stop(); _ = store.Close() }()
	// Recovery would have closed the session at its last settlement, the
	// join (0 s).
	if rec := h.usage(e, caller, cs.SessionID); rec.Seconds != 90 {
		t.Fatalf("finalized %d s, want the 90 s up to the shutdown's leave", rec.Seconds)
	}
}

// limitsAccount is the workspace of the caller's project.
func (e *Engine) limitsAccount(c *core.Caller) string {
	h, _ := e.project(c.ProjectID)
	return h.gate.Record.Load().AccountID
}

// usageHarness runs an engine with billing on a data directory that
// survives its restarts, on a fake clock.
type usageHarness struct {
	t        *testing.T
	dir      string
	keys     auth.Keys
	clk      *clock.Fake
	billing  core.Billing
	settings core.Settings
}

func newUsageHarness(t *testing.T) *usageHarness {
	keys, _ := auth.DeriveKeys(make([]byte, 32))
	billing := core.Billing{Enabled: true, Currency: "USD", ParticipantMinutePrice: 60_000, // 0.001 per second
		LowCreditThreshold: 1_000_000, MinimumCreditToStart: 0, SettleInterval: time.Minute, BootstrapCredit: 10_000_000}
	return &usageHarness{t: t, dir: t.TempDir(), keys: keys, clk: clock.NewFake(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)), billing: billing,
		settings: core.Settings{Region: "global", MediaURL: "ws://127.0.0.1:1/rtc",
			DefaultLimits: core.Limits{MaxActiveRooms: 10, MaxActiveParticipants: 10, MaxParticipantsPerRoom: 5,
				RoomCreatesPerMinute: 100, ParticipantCreatesPerMinute: 100, ConnectRequestsPerMinute: 100},
			ConnectPerIPPerMinute: 100, MediaTokenTTL: time.Minute, SnapshotEveryEvents: 1000, Billing: billing}}
}

// open opens the store (bootstrapping it the first time) and starts an
// engine on it.
func (h *usageHarness) open() (*persistence.Store, *Engine) {
	t := h.t
	store, err := persistence.Open(h.dir, persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := Initialized(store); !ok {
		if _, err := Bootstrap(store, h.keys, h.clk, h.billing, "owner@example.com"); err != nil {
			t.Fatal(err)
		}
	}
	e, err := New(h.settings, store, h.clk, ratelimit.NewMemory(), h.keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	return store, e
}

type connectSession struct {
	SessionID   string `json:"session_id"`
	Participant struct {
		ID string `json:"id"`
	} `json:"participant"`
}

// joinedParticipant creates a room and a participant, connects it, and
// reports its media join now.
func (h *usageHarness) joinedParticipant(e *Engine) (*core.Caller, string, connectSession) {
	t := h.t
	var caller *core.Caller
	e.env.APIKeys.Range(func(rec *core.KeyRecord) { // the bootstrap key is the only one
		caller = &core.Caller{ProjectID: rec.ProjectID, ActorType: "api_key", ActorID: rec.KeyID, Scopes: rec.Scopes}
	})
	res, aerr := e.CreateRoom(caller, &RoomParams{}, nil)
	if aerr != nil {
		t.Fatal(aerr)
	}
	roomID := decodeID(t, res.Body)
	res, aerr = e.CreateParticipant(caller, roomID, &ParticipantParams{}, nil)
	if aerr != nil {
		t.Fatal(aerr)
	}
	tok := decodeToken(t, res.Body)
	res, aerr = e.Connect(&ConnectParams{Token: &tok}, "127.0.0.1")
	if aerr != nil {
		t.Fatal(aerr)
	}
	var cs connectSession
	_ = json.Unmarshal(res.Body, &cs)
	e.MediaJoined(room.MediaJoin{SessionID: cs.SessionID, ProjectID: caller.ProjectID, RoomID: roomID, ParticipantID: cs.Participant.ID, At: h.clk.Now()})
	return caller, roomID, cs
}

// usage waits for the finalized usage of a session on the harness's day.
func (h *usageHarness) usage(e *Engine, caller *core.Caller, sessionID string) room.UsageRecord {
	var rec room.UsageRecord
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, err := e.env.Store.Get(persistence.Key(persistence.PrefixUsage, caller.ProjectID+"/2026-11-22/"+sessionID))
		if err == nil {
			_ = json.Unmarshal(v, &rec)
			return rec
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("session %s was not finalized", sessionID)
		}
		time.Sleep(10 * time.Millisecond) // polling the store another goroutine writes
	}
}
