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
	dir := t.TempDir()
	keys, _ := auth.DeriveKeys(make([]byte, 32))
	clk := clock.NewFake(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	billing := core.Billing{Enabled: true, Currency: "USD", ParticipantMinutePrice: 60_000, // 0.001 per second
		LowCreditThreshold: 1_000_000, MinimumCreditToStart: 0, SettleInterval: time.Minute, BootstrapCredit: 10_000_000}
	settings := core.Settings{Region: "global", MediaURL: "ws://127.0.0.1:1/rtc",
		DefaultLimits: core.Limits{MaxActiveRooms: 10, MaxActiveParticipants: 10, MaxParticipantsPerRoom: 5,
			RoomCreatesPerMinute: 100, ParticipantCreatesPerMinute: 100, ConnectRequestsPerMinute: 100},
		ConnectPerIPPerMinute: 100, MediaTokenTTL: time.Minute, SnapshotEveryEvents: 1000, Billing: billing}
	open := func() (*persistence.Store, *Engine) {
		store, err := persistence.Open(dir, persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
		if err != nil {
			t.Fatal(err)
		}
		if ok, _ := Initialized(store); !ok {
			if _, err := Bootstrap(store, keys, clk, billing, "owner@example.com"); err != nil {
				t.Fatal(err)
			}
		}
		e, err := New(settings, store, clk, ratelimit.NewMemory(), keys, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(); err != nil {
			t.Fatal(err)
		}
		return store, e
	}

	store, e := open()
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
	var cs struct {
		SessionID   string `json:"session_id"`
		Participant struct {
			ID string `json:"id"`
		} `json:"participant"`
	}
	_ = json.Unmarshal(res.Body, &cs)
	e.MediaJoined(room.MediaJoin{SessionID: cs.SessionID, ProjectID: caller.ProjectID, RoomID: roomID, ParticipantID: cs.Participant.ID, At: clk.Now()})

	clk.Advance(90 * time.Second)
	rh, _ := e.room(roomID)
	e.system.Root.Send(rh.pid, core.Sweep{}) // settles 90 s
	if _, aerr := e.CreateParticipant(caller, roomID, &ParticipantParams{}, nil); aerr != nil {
		t.Fatal(aerr) // queued behind the sweep: the settlement is done
	}
	waitDurable(t, e)
	clk.Advance(10 * time.Minute) // the process is "down" for ten minutes
	e.Stop()                      // no leave was ever reported
	_ = store.Close()

	store, e = open()
	defer func() { e.Stop(); _ = store.Close() }()
	var rec room.UsageRecord
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, err := e.env.Store.Get(persistence.Key(persistence.PrefixUsage, caller.ProjectID+"/2026-11-22/"+cs.SessionID))
		if err == nil {
			_ = json.Unmarshal(v, &rec)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lost session was not finalized at recovery")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rec.Seconds != 90 {
		t.Fatalf("finalized %d s, want the 90 s settled before the stop (never the downtime)", rec.Seconds)
	}
	// 90 s at 0.001 per second = 0.090000, charged once.
	w, _ := e.wallet(e.limitsAccount(caller))
	r := e.ask(w.pid, wallet.Read{})
	if got := money.Micros(r.Value.(wallet.Reading).Balance); got != 10_000_000-90_000 {
		t.Fatalf("balance %s, want 9.910000", got)
	}
}

// limitsAccount is the workspace of the caller's project.
func (e *Engine) limitsAccount(c *core.Caller) string {
	h, _ := e.project(c.ProjectID)
	return h.gate.Record.Load().AccountID
}
