package room

import (
	"fmt"
	"rtcd/actors/core/coretest"
	"sync"
	"testing"
	"time"

	"rtcd/actors/core"
	"rtcd/apierr"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/persistence"
	"rtcd/ratelimit"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The room's connect decision, driven on its own: a room actor on an Env
// with Pebble's in-memory file system and a fake clock, recovered by hand,
// and its Gate's Connect called directly (no actor runtime, no HTTP), as
// the request's goroutine calls it. Each case sets up a room where several
// checks would fail and expects the first in the spec's order
// (docs/errors.md, POST /v1/connect, steps 7 to 13):
//
//	7 project status, 8 room status, 9 participant status,
//	10 the room's max_participants, 11 the project's max_active_participants,
//	12 the workspace's credit gate, 13 media availability.
//
// Steps 0 to 6 (body, per-address rate, token signature and expiry, the
// project's existence and rate) run in the engine before it.

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
// coretest.T0+1h) in project prj_1, recovered by its actor from what setUp wrote.
type connectRoom struct {
	t      *testing.T
	clk    *clock.Fake
	env    *core.Env
	gate   *core.ProjectGate
	credit *core.CreditGate
	media  *stubMedia
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
	room        func(r *Room)            // changes testRoom, if set
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
	clk := clock.NewFake(coretest.T0)
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
	r := testRoom()
	if tc.room != nil {
		tc.room(&r)
	}
	b := store.NewBatch()
	Genesis(b, r)
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

	c := &connectRoom{t: t, clk: clk, env: env, gate: &core.ProjectGate{}, credit: &core.CreditGate{}, media: newStubMedia()}
	c.gate.Record.Store(&core.Project{ID: "prj_1", AccountID: "acct_1", Status: core.ProjectActive, CreatedAt: coretest.T0})
	c.gate.Credit.Store(c.credit)
	env.Media.SetEngine(c.media)
	c.room = newRoomOn(env, "room_1", c.gate)
	if tc.setUp != nil {
		tc.setUp(c)
	}
	return c
}

// newRoomOn is room id's actor over env, recovered (its slots counted into
// gate) as at start-up.
func newRoomOn(env *core.Env, id string, gate *core.ProjectGate) *roomActor {
	a := New(env, id, "prj_1", gate, NewGate(id, gate, &env.Gauges.ActiveParticipants), nil).(*roomActor)
	a.recover()
	return a
}

// connect decides a connect for participant, as the request's goroutine
// does: on the room's Gate, at the clock's now.
func (c *connectRoom) connect(participant string) (ConnectSession, *apierr.Error) {
	return c.room.seats.Connect(c.env, participant, c.clk.Now())
}

// mustConnect connects participant and fails the test on a refusal.
func (c *connectRoom) mustConnect(participant string) ConnectSession {
	c.t.Helper()
	s, err := c.connect(participant)
	if err != nil {
		c.t.Fatalf("connect %s: %s (%s)", participant, err.Code, err.Message)
	}
	return s
}

// heldSlots counts the seats holding a slot, which the gate's word must
// equal.
func (g *Gate) heldSlots() int64 {
	var n int64
	g.seats.Range(func(_, v any) bool {
		if v.(*Seat).state.Load().holds() {
			n++
		}
		return true
	})
	return n
}

// Events of the cases' rooms: participants joined (recorded, holding
// their slots).
func joinedParticipants(ids ...string) []roomEvent {
	var evs []roomEvent
	for i, id := range ids {
		evs = append(evs, created(id, i+1), joinedAs(id, "cs_"+id, i+2))
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
	{name: "room that ended as expired: 410 room_expired",
		events:      []roomEvent{created("p1", 1), endingStarted(EndReasonExpired, 3600), ended(3600)},
		participant: "p1", want: apierr.RoomExpired, wantSlots: same},
	// 9: the participant's status.
	{name: "unknown participant: 404, before a full room",
		events:      joinedParticipants("p1", "p2", "p3"),
		participant: "p9", want: apierr.ParticipantNotFound, wantSlots: same},
	{name: "removed participant: 404 naming its status",
		events:      []roomEvent{created("p1", 1), joinedAs("p1", "cs_1", 2), left("p1", 3), removed("p1", 3)},
		participant: "p1", want: apierr.ParticipantNotFound, wantDetails: map[string]any{"participant_status": ParticipantRemoved}, wantSlots: same},
	{name: "participant of an ended room: 410 room_ended (the room answers first)",
		events:      []roomEvent{created("p1", 1), endingStarted(EndReasonDeleted, 5), ended(5)},
		participant: "p1", want: apierr.RoomEnded, wantSlots: same},
	// 10: the room's cap.
	{name: "full room: 409 max_participants, before a full project",
		events:      append(joinedParticipants("p1", "p2", "p3"), created("p4", 4)),
		setUp:       func(c *connectRoom) { c.gate.ActiveParticipants.Store(connectLimit) },
		participant: "p4", want: apierr.QuotaExceeded, wantDetails: map[string]any{"limit_name": "max_participants"}, wantSlots: same},
	{name: "a room full of reservations: 409 max_participants",
		events: []roomEvent{created("p1", 1), created("p2", 1), created("p3", 1), created("p4", 1)},
		setUp: func(c *connectRoom) {
			for _, id := range []string{"p1", "p2", "p3"} {
				c.mustConnect(id)
			}
		},
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
		events:      []roomEvent{created("p1", 1)},
		room:        func(r *Room) { r.ExpiresAt = coretest.T0.Add(time.Hour + 700*time.Millisecond) },
		setUp:       func(c *connectRoom) { c.clk.Advance(time.Hour + 200*time.Millisecond) },
		participant: "p1", want: apierr.RoomExpired, wantSlots: same},
	// A participant holding its slot skips 10 and 11, not 12.
	{name: "joined participant in a full room and project: a new session, no new slot",
		events:      joinedParticipants("p1", "p2", "p3"),
		setUp:       func(c *connectRoom) { c.gate.ActiveParticipants.Store(connectLimit) },
		participant: "p1", wantSlots: same},
	{name: "connected participant in a full room and project: a new session, no new slot",
		events: append(joinedParticipants("p2", "p3"), created("p1", 3)),
		setUp: func(c *connectRoom) {
			c.mustConnect("p1")
			c.gate.ActiveParticipants.Store(connectLimit)
		},
		participant: "p1", wantSlots: same},
	{name: "connected participant: still refused by a closed credit gate",
		events:      []roomEvent{created("p1", 1)},
		setUp:       func(c *connectRoom) { c.mustConnect("p1"); c.credit.Set(true) },
		participant: "p1", want: apierr.InsufficientCredit, wantSlots: same},
	// Everything passes: the slot is taken, last.
	{name: "created participant: a session, one slot taken",
		events:      []roomEvent{created("p1", 1)},
		participant: "p1", wantSlots: plusOne},
	{name: "left participant: a session, one slot taken",
		events:      []roomEvent{created("p1", 1), joinedAs("p1", "cs_1", 2), left("p1", 3)},
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
			journal := c.journalLength()
			s, err := c.connect(tc.participant)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused with %s (%s), want a connect session", err.Code, err.Message)
			case tc.want != "" && err == nil:
				t.Fatalf("answered %+v, want %s", s, tc.want)
			case tc.want != "" && err.Code != tc.want:
				t.Fatalf("refused with %s (%s), want %s", err.Code, err.Message, tc.want)
			}
			for k, v := range tc.wantDetails {
				if got := err.Details[k]; got != v {
					t.Fatalf("details[%q] = %v, want %v (%v)", k, got, v, err.Details)
				}
			}
			if got, want := c.gate.ActiveParticipants.Load(), tc.wantSlots(before); got != want {
				t.Fatalf("project slots %d after the decision, want %d (from %d)", got, want, before)
			}
			if got, held := c.room.seats.Slots(), c.room.seats.heldSlots(); got != held {
				t.Fatalf("the room counts %d slots and its seats hold %d", got, held)
			}
			if n := c.journalLength(); n != journal {
				t.Fatalf("a connect wrote to the journal: %d entries, was %d", n, journal)
			}
			if err == nil {
				if s.ExpiresAt != coretest.T0.Add(time.Minute) || s.Role != RolePublisher || s.RoomID != "room_1" || s.ProjectID != "prj_1" {
					t.Fatalf("session %+v", s)
				}
				if _, ok := c.room.seats.Reservation(tc.participant, c.clk.Now()); !ok && c.room.state.Participants[tc.participant].Status != ParticipantJoined {
					t.Fatal("the admitted connect holds no reservation")
				}
			}
		})
	}
}

// journalLength is the number of entries of room_1's journal.
func (c *connectRoom) journalLength() int {
	prefix := persistence.JournalKey(Journal("room_1"), 0)
	prefix = prefix[:len(prefix)-8] // without the sequence number
	n := 0
	if err := c.env.Store.Scan(prefix, 0, func(_, _ []byte) bool { n++; return true }); err != nil {
		c.t.Fatal(err)
	}
	return n
}

// Two rooms of one project racing for its last slot, each connect on its
// own goroutine: both pass every check, and the compare-and-swap lets
// exactly one take the slot; the other gets the quota's answer and holds
// nothing.
func TestConnectRaceForTheLastProjectSlot(t *testing.T) {
	for round := 0; round < 20; round++ {
		c := newConnectRoom(t, connectCase{events: []roomEvent{created("p1", 1)}})
		second := c.otherRoom("room_2", created("p1", 1))
		c.gate.ActiveParticipants.Store(connectLimit - 1)

		errs := make(chan *apierr.Error, 2)
		for _, a := range []*roomActor{c.room, second} {
			go func() {
				_, err := a.seats.Connect(c.env, "p1", c.clk.Now())
				errs <- err
			}()
		}
		ok, refused := 0, 0
		for i := 0; i < 2; i++ {
			switch err := <-errs; {
			case err == nil:
				ok++
			case err.Code == apierr.QuotaExceeded && err.Details["limit_name"] == "max_active_participants":
				refused++
			default:
				t.Fatalf("round %d: unexpected answer %+v", round, err)
			}
		}
		if ok != 1 || refused != 1 {
			t.Fatalf("round %d: %d connected and %d refused, want one of each", round, ok, refused)
		}
		if got := c.gate.ActiveParticipants.Load(); got != connectLimit {
			t.Fatalf("round %d: project slots %d, want %d", round, got, connectLimit)
		}
		if c.room.seats.Slots()+second.seats.Slots() != 1 {
			t.Fatalf("round %d: the rooms count %d and %d slots, want one between them", round, c.room.seats.Slots(), second.seats.Slots())
		}
	}
}

// otherRoom is another room of the same project, on the same Env and
// project gate, with events in its journal.
func (c *connectRoom) otherRoom(id string, events ...roomEvent) *roomActor {
	c.t.Helper()
	other := testRoom()
	other.ID = id
	b := c.env.Store.NewBatch()
	Genesis(b, other)
	if err := c.env.Store.CommitAndWait(b); err != nil {
		c.t.Fatal(err)
	}
	log, err := core.RecoverLog(c.env.Store, Journal(id), 1000, func() *roomState { return &roomState{} }, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	b = c.env.Store.NewBatch()
	for _, ev := range events {
		if ev.ParticipantCreated != nil {
			p := *ev.ParticipantCreated
			p.RoomID = id
			ev.ParticipantCreated = &p
		}
		log.Record(b, ev)
	}
	if err := c.env.Store.CommitAndWait(b); err != nil {
		c.t.Fatal(err)
	}
	return newRoomOn(c.env, id, c.gate)
}
