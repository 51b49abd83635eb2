package room

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"rtcd/actors/core"
	"rtcd/apierr"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/persistence"
	"rtcd/ratelimit"
)

// The room's connect decision, driven on its own: a room actor on an Env
// with Pebble's in-memory file system and a fake clock, its handler called
// directly (no actor runtime, no HTTP). Each case sets up a room where
// several checks would fail and expects the first in the spec's order
// (docs/errors.md, POST /v1/connect, steps 7 to 13):
//
//	7 project status, 8 room status, 9 participant status,
//	10 the room's max_participants, 11 the project's max_active_participants,
//	12 the workspace's credit gate, 13 media availability.
//
// Steps 0 to 6 (body, per-address rate, token signature and expiry, the
// project's existence and rate) run in the engine before the message.

// connectLimit is the project's max_active_participants in these cases.
const connectLimit = 5

// stubRegistry is the Registry of a room alone: it records what the room
// sends and publishes nothing else.
type stubRegistry struct {
	mu   sync.Mutex
	sent []string
}

func (r *stubRegistry) ProjectGate(string) (*core.ProjectGate, bool) { return nil, false }
func (r *stubRegistry) CreditGate(string) (*core.CreditGate, bool)   { return nil, false }
func (r *stubRegistry) RoomLive(string) bool                         { return false }
func (r *stubRegistry) Send(to core.Address, msg any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, fmt.Sprintf("%s %T", to, msg))
}
func (r *stubRegistry) Post(to core.Address, msg any) { r.Send(to, msg) }
func (r *stubRegistry) Request(to core.Address, msg any, answer func(core.Reply)) {
	go answer(core.Reply{Gone: true})
}
func (r *stubRegistry) SpawnRoom(string, string, *core.Recovery)                  {}
func (r *stubRegistry) SpawnProject(string, *core.Project, *core.Recovery)        {}
func (r *stubRegistry) SpawnWallet(string, *core.Recovery)                        {}
func (r *stubRegistry) RoomStopped(string)                                        {}
func (r *stubRegistry) EndpointWorkers(enabled, disabled []*core.WebhookEndpoint) {}

// connectRoom is room_1 of testRoom (max_participants 3, expiring at
// t0+1h) in project prj_1, recovered by its actor from what setUp wrote.
type connectRoom struct {
	t      *testing.T
	clk    *clock.Fake
	env    *core.Env
	gate   *core.ProjectGate
	credit *core.CreditGate
	room   *roomActor
}

// connectCase is one row: how the room, its project and the server stand,
// which participant connects, and what the decision must be.
type connectCase struct {
	name        string
	events      []roomEvent              // the room's journal after its Genesis
	setUp       func(c *connectRoom)     // after recovery: project, gate, clock, settings
	participant string                   // the token's participant
	want        apierr.Code              // "" for a connect session
	wantDetails map[string]any           // details the error must carry
	wantSlots   func(before int64) int64 // the project's slots after the decision
	fs          vfs.FS                   // the store's file system; nil: a fresh in-memory one
}

func newConnectRoom(t *testing.T, tc connectCase) *connectRoom {
	t.Helper()
	fs := tc.fs
	if fs == nil {
		fs = vfs.NewMem()
	}
	store, err := persistence.OpenWith("db", persistence.Options{FS: fs}, persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	keys, err := auth.DeriveKeys(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	settings := core.Settings{Region: "global", MediaURL: "ws://127.0.0.1:1/rtc", MediaTokenTTL: time.Minute, SnapshotEveryEvents: 1000,
		DefaultLimits: core.Limits{MaxActiveRooms: 10, MaxActiveParticipants: connectLimit, MaxParticipantsPerRoom: 3,
			RoomCreatesPerMinute: 100, ParticipantCreatesPerMinute: 100, ConnectRequestsPerMinute: 100},
		MediaNodeRunsOnItsOwn: true} // nothing to close at recovery: no node in these cases
	env, err := core.NewEnv(settings, store, clk, ratelimit.NewMemory(), keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	env.Registry = &stubRegistry{}

	// The room as its project created it, then its journal.
	b := store.NewBatch()
	Genesis(b, testRoom())
	if err := store.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	if len(tc.events) > 0 {
		log, err := core.RecoverLog(store, Journal("room_1"), 1000, func() *roomState { return &roomState{} }, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := store.NewBatch()
		log.Record(b, tc.events...)
		if err := store.CommitAndWait(b); err != nil {
			t.Fatal(err)
		}
	}

	c := &connectRoom{t: t, clk: clk, env: env, gate: &core.ProjectGate{}, credit: &core.CreditGate{}}
	c.gate.Record.Store(&core.Project{ID: "prj_1", AccountID: "acct_1", Status: core.ProjectActive, CreatedAt: t0})
	c.gate.Credit.Store(c.credit)
	c.room = New(env, "room_1", "prj_1", c.gate, nil).(*roomActor)
	c.room.recover() // counts its connected participants into the gate
	if tc.setUp != nil {
		tc.setUp(c)
	}
	return c
}

// connect runs the room's connect handler for participant and waits for
// its answer (a connect session is answered once its batch is durable).
func (c *connectRoom) connect(participant string) core.Reply {
	c.t.Helper()
	req, answer := core.NewEnvelope(Connect{Claims: auth.ParticipantClaims{
		ProjectID: "prj_1", RoomID: "room_1", ParticipantID: participant, ExpiresAt: t0.Add(time.Hour)}})
	c.room.connect(req.Msg.(Connect), req)
	select {
	case r := <-answer:
		return r
	case <-time.After(10 * time.Second):
		c.t.Fatal("the room did not answer the connect")
		return core.Reply{}
	}
}

// Events of the cases' rooms.
func connectedTwice(ids ...string) []roomEvent {
	var evs []roomEvent
	for i, id := range ids {
		evs = append(evs, created(id, i+1), connected(id, i+1))
	}
	return evs
}

func same(n int64) int64    { return n }
func plusOne(n int64) int64 { return n + 1 }

var connectCases = []connectCase{
	// 7: the project's status comes first.
	{name: "archived project: 403, before an ended room and a missing participant",
		events: []roomEvent{endingStarted(EndReasonDeleted, 5), ended(5)},
		setUp: func(c *connectRoom) {
			p := *c.gate.Record.Load()
			p.Status = core.ProjectArchived
			c.gate.Record.Store(&p)
		},
		participant: "p9", want: apierr.PermissionDenied, wantSlots: same},
	// 8: the room's status.
	{name: "deleted room: 410 room_ended, before a missing participant",
		events:      []roomEvent{endingStarted(EndReasonDeleted, 5), ended(5)},
		participant: "p9", want: apierr.RoomEnded, wantSlots: same},
	{name: "room past expires_at: 410 room_expired, before a closed credit gate",
		events:      []roomEvent{created("p1", 1)},
		setUp:       func(c *connectRoom) { c.clk.Advance(time.Hour); c.credit.Set(true) },
		participant: "p1", want: apierr.RoomExpired, wantSlots: same},
	// 9: the participant's status.
	{name: "unknown participant: 404, before a full room",
		events:      connectedTwice("p1", "p2", "p3"),
		participant: "p9", want: apierr.ParticipantNotFound, wantSlots: same},
	{name: "removed participant: 404 naming its status",
		events:      []roomEvent{created("p1", 1), connected("p1", 2), removed("p1", 3)},
		participant: "p1", want: apierr.ParticipantNotFound, wantDetails: map[string]any{"participant_status": ParticipantRemoved}, wantSlots: same},
	{name: "participant of an ended room: 410 room_ended (the room answers first)",
		events:      []roomEvent{created("p1", 1), endingStarted(EndReasonDeleted, 5), ended(5)},
		participant: "p1", want: apierr.RoomEnded, wantSlots: same},
	// 10: the room's cap.
	{name: "full room: 409 max_participants, before a full project",
		events:      append(connectedTwice("p1", "p2", "p3"), created("p4", 4)),
		setUp:       func(c *connectRoom) { c.gate.ActiveParticipants.Store(connectLimit) },
		participant: "p4", want: apierr.QuotaExceeded, wantDetails: map[string]any{"limit_name": "max_participants"}, wantSlots: same},
	// 11: the project's quota.
	{name: "full project: 409 max_active_participants, before the credit gate",
		events:      []roomEvent{created("p1", 1)},
		setUp:       func(c *connectRoom) { c.gate.ActiveParticipants.Store(connectLimit); c.credit.Set(true) },
		participant: "p1", want: apierr.QuotaExceeded, wantDetails: map[string]any{"limit_name": "max_active_participants"}, wantSlots: same},
	// 12: the credit gate.
	{name: "closed credit gate: 402, before a missing media node; no slot held",
		events: []roomEvent{created("p1", 1)},
		setUp: func(c *connectRoom) {
			c.credit.Set(true)
			c.room.env.Settings.MediaURL = ""
		},
		participant: "p1", want: apierr.InsufficientCredit, wantSlots: same},
	// 13: media availability.
	{name: "no media node: 503; no slot held",
		events:      []roomEvent{created("p1", 1)},
		setUp:       func(c *connectRoom) { c.room.env.Settings.MediaURL = "" },
		participant: "p1", want: apierr.ServiceUnavailable, wantSlots: same},
	// A media token carries whole seconds: a room whose expiry falls within
	// the current second has no second left to give, and is expired, after
	// every cap.
	{name: "room expiring within this second: 410 room_expired; no slot held",
		events: []roomEvent{created("p1", 1)},
		setUp: func(c *connectRoom) {
			c.room.state.Room.ExpiresAt = t0.Add(time.Hour + 700*time.Millisecond)
			c.clk.Advance(time.Hour + 200*time.Millisecond)
		},
		participant: "p1", want: apierr.RoomExpired, wantSlots: same},
	// A participant holding its slot skips 10 and 11, not 12.
	{name: "connected participant in a full room and project: a new session, no new slot",
		events:      connectedTwice("p1", "p2", "p3"),
		setUp:       func(c *connectRoom) { c.gate.ActiveParticipants.Store(connectLimit) },
		participant: "p1", wantSlots: same},
	{name: "connected participant: still refused by a closed credit gate",
		events:      connectedTwice("p1"),
		setUp:       func(c *connectRoom) { c.credit.Set(true) },
		participant: "p1", want: apierr.InsufficientCredit, wantSlots: same},
	// Everything passes: the slot is taken, last.
	{name: "created participant: a session, one slot taken",
		events:      []roomEvent{created("p1", 1)},
		participant: "p1", wantSlots: plusOne},
	{name: "last slot of the project: taken",
		events:      []roomEvent{created("p1", 1)},
		setUp:       func(c *connectRoom) { c.gate.ActiveParticipants.Store(connectLimit - 1) },
		participant: "p1", wantSlots: plusOne},
}

func TestConnectDecisionFollowsTheSpecOrder(t *testing.T) {
	for _, tc := range connectCases {
		t.Run(tc.name, func(t *testing.T) {
			c := newConnectRoom(t, tc)
			before := c.gate.ActiveParticipants.Load()
			r := c.connect(tc.participant)
			switch {
			case tc.want == "" && r.Err != nil:
				t.Fatalf("refused with %s (%s), want a connect session", r.Err.Code, r.Err.Message)
			case tc.want == "" && r.Status != 200:
				t.Fatalf("answered %d %s, want 200", r.Status, r.Body)
			case tc.want != "" && r.Err == nil:
				t.Fatalf("answered %d %s, want %s", r.Status, r.Body, tc.want)
			case tc.want != "" && r.Err.Code != tc.want:
				t.Fatalf("refused with %s (%s), want %s", r.Err.Code, r.Err.Message, tc.want)
			}
			for k, v := range tc.wantDetails {
				if got := r.Err.Details[k]; got != v {
					t.Fatalf("details[%q] = %v, want %v (%v)", k, got, v, r.Err.Details)
				}
			}
			if got, want := c.gate.ActiveParticipants.Load(), tc.wantSlots(before); got != want {
				t.Fatalf("project slots %d after the decision, want %d (from %d)", got, want, before)
			}
			if got := c.room.countedSlots; int64(got) != int64(c.room.state.Connected) {
				t.Fatalf("the room counts %d slots and holds %d connected participants", got, c.room.state.Connected)
			}
		})
	}
}

// Two rooms of one project racing for its last slot, each on its own
// goroutine: both pass every check, and the compare-and-swap lets exactly
// one take the slot; the other gets the quota's answer and holds nothing.
func TestConnectRaceForTheLastProjectSlot(t *testing.T) {
	for round := 0; round < 20; round++ {
		c := newConnectRoom(t, connectCase{events: []roomEvent{created("p1", 1)}})
		// room_2 of the same project, on the same Env and gate.
		other := testRoom()
		other.ID = "room_2"
		b := c.env.Store.NewBatch()
		Genesis(b, other)
		if err := c.env.Store.CommitAndWait(b); err != nil {
			t.Fatal(err)
		}
		log, err := core.RecoverLog(c.env.Store, Journal("room_2"), 1000, func() *roomState { return &roomState{} }, nil)
		if err != nil {
			t.Fatal(err)
		}
		b = c.env.Store.NewBatch()
		ev := created("p1", 1)
		ev.ParticipantCreated.RoomID = "room_2"
		log.Record(b, ev)
		if err := c.env.Store.CommitAndWait(b); err != nil {
			t.Fatal(err)
		}
		second := New(c.env, "room_2", "prj_1", c.gate, nil).(*roomActor)
		second.recover()
		c.gate.ActiveParticipants.Store(connectLimit - 1)

		answers := make(chan core.Reply, 2)
		for _, a := range []*roomActor{c.room, second} {
			go func() {
				req, answer := core.NewEnvelope(Connect{Claims: auth.ParticipantClaims{ProjectID: "prj_1", RoomID: a.id, ParticipantID: "p1"}})
				a.connect(req.Msg.(Connect), req)
				answers <- <-answer
			}()
		}
		ok, refused := 0, 0
		for i := 0; i < 2; i++ {
			select {
			case r := <-answers:
				switch {
				case r.Err == nil:
					ok++
				case r.Err.Code == apierr.QuotaExceeded && r.Err.Details["limit_name"] == "max_active_participants":
					refused++
				default:
					t.Fatalf("round %d: unexpected answer %+v", round, r.Err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: a room did not answer", round)
			}
		}
		if ok != 1 || refused != 1 {
			t.Fatalf("round %d: %d connected and %d refused, want one of each", round, ok, refused)
		}
		if got := c.gate.ActiveParticipants.Load(); got != connectLimit {
			t.Fatalf("round %d: project slots %d, want %d", round, got, connectLimit)
		}
		if c.room.countedSlots+second.countedSlots != 1 {
			t.Fatalf("round %d: the rooms count %d and %d slots, want one between them", round, c.room.countedSlots, second.countedSlots)
		}
	}
}
