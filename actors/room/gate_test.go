package room

import (
	"sync"
	"testing"
	"time"

	"rtcd/actors/core"
	"rtcd/apierr"
)

// The gate under concurrency: connects decided on many goroutines at once
// against what the room publishes, and every path that gives a slot back.
// Run with -race: the gate is read and changed from every goroutine.

// withProjectLimit gives the project its own max_active_participants.
func withProjectLimit(c *connectRoom, limit int) {
	p := *c.gate.Record.Load()
	l := c.env.Settings.DefaultLimits
	l.MaxActiveParticipants = limit
	p.Limits = &l
	c.gate.Record.Store(&p)
}

// createdParticipants is n participants p000, p001, ... created.
func createdParticipants(n int) (ids []string, events []roomEvent) {
	for i := 0; i < n; i++ {
		id := participantName(i)
		ids = append(ids, id)
		events = append(events, created(id, 1))
	}
	return ids, events
}

func participantName(i int) string {
	return "p" + string(rune('0'+i/100)) + string(rune('0'+i/10%10)) + string(rune('0'+i%10))
}

// connectAtOnce connects every participant of ids on its own goroutine,
// all released together, and returns the answers in ids' order.
func connectAtOnce(c *connectRoom, g *Gate, ids []string) []*apierr.Error {
	errs := make([]*apierr.Error, len(ids))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = g.Connect(c.env, id, c.clk.Now())
		}()
	}
	close(start)
	wg.Wait()
	return errs
}

// 100 simultaneous connects into a room of cap K admit exactly K; the others
// are told the room's cap, and the room and project count exactly K.
func TestConnect100SimultaneousIntoCapK(t *testing.T) {
	for _, k := range []int{1, 10, 37, 100} {
		ids, events := createdParticipants(100)
		c := newConnectRoom(t, connectCase{events: events, room: func(r *Room) { r.MaxParticipants = k }})
		withProjectLimit(c, 1000)
		admitted := 0
		for i, err := range connectAtOnce(c, c.room.seats, ids) {
			switch {
			case err == nil:
				admitted++
			case err.Code != apierr.QuotaExceeded || err.Details["limit_name"] != "max_participants":
				t.Fatalf("cap %d: %s refused with %s %v", k, ids[i], err.Code, err.Details)
			}
		}
		if admitted != k {
			t.Fatalf("cap %d: %d admitted", k, admitted)
		}
		if s, held, p := c.room.seats.Slots(), c.room.seats.heldSlots(), c.gate.ActiveParticipants.Load(); s != int64(k) || held != int64(k) || p != int64(k) {
			t.Fatalf("cap %d: the room counts %d, its seats hold %d, the project counts %d", k, s, held, p)
		}
		if g := c.env.Gauges.ActiveParticipants.Load(); g != int64(k) {
			t.Fatalf("cap %d: the gauge says %d", k, g)
		}
	}
}

// Connects into several rooms of one project at once: the project's quota
// holds exactly across them.
func TestConnectsAcrossRoomsHoldTheProjectQuota(t *testing.T) {
	ids, events := createdParticipants(30)
	c := newConnectRoom(t, connectCase{events: events, room: func(r *Room) { r.MaxParticipants = 30 }})
	withProjectLimit(c, 25)
	rooms := []*roomActor{c.room}
	for _, id := range []string{"room_2", "room_3", "room_4"} {
		r := c.otherRoom(id, events...)
		r.seats.maxParticipants.Store(30)
		rooms = append(rooms, r)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	start := make(chan struct{})
	for _, r := range rooms {
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := r.seats.Connect(c.env, id, c.clk.Now())
				switch {
				case err == nil:
					mu.Lock()
					admitted++
					mu.Unlock()
				case err.Details["limit_name"] != "max_active_participants":
					t.Errorf("refused with %s %v", err.Code, err.Details)
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	var held int64
	for _, r := range rooms {
		if r.seats.Slots() != r.seats.heldSlots() {
			t.Fatalf("%s counts %d slots, its seats hold %d", r.id, r.seats.Slots(), r.seats.heldSlots())
		}
		held += r.seats.Slots()
	}
	if admitted != 25 || held != 25 || c.gate.ActiveParticipants.Load() != 25 {
		t.Fatalf("%d admitted, rooms hold %d, project counts %d; want 25", admitted, held, c.gate.ActiveParticipants.Load())
	}
}

// One participant connecting many times at once holds one slot; each
// connect gets its own session, and the seat keeps the latest issued.
func TestManyConnectsOfOneParticipantHoldOneSlot(t *testing.T) {
	c := newConnectRoom(t, connectCase{events: []roomEvent{created("p1", 1)}})
	ids := make([]string, 50)
	for i := range ids {
		ids[i] = "p1"
	}
	for _, err := range connectAtOnce(c, c.room.seats, ids) {
		if err != nil {
			t.Fatalf("refused: %s", err.Message)
		}
	}
	if c.room.seats.Slots() != 1 || c.gate.ActiveParticipants.Load() != 1 {
		t.Fatalf("room %d, project %d slots; want 1", c.room.seats.Slots(), c.gate.ActiveParticipants.Load())
	}
	a, b := c.mustConnect("p1"), c.mustConnect("p1")
	if a.SessionID == b.SessionID || !b.IssuedAt.After(a.IssuedAt) {
		t.Fatalf("two connects at one instant: %+v then %+v; want new sessions, issued in order", a, b)
	}
}

// Every path that ends a reservation or a join gives its one slot back,
// through the same words: afterwards the room and the project hold nothing
// and a newcomer takes the slot again.
func TestEveryReleasePathGivesTheSlotBack(t *testing.T) {
	paths := []struct {
		name string
		end  func(c *connectRoom, s ConnectSession)
	}{
		{"the reservation lapses", func(c *connectRoom, _ ConnectSession) {
			c.clk.Advance(time.Minute)
			c.room.sweep()
		}},
		{"the reserved participant is removed", func(c *connectRoom, _ ConnectSession) {
			c.remove("p1")
		}},
		{"the joined participant is removed", func(c *connectRoom, s ConnectSession) {
			c.join(s)
			c.remove("p1")
		}},
		{"the joined participant leaves", func(c *connectRoom, s ConnectSession) {
			c.join(s)
			c.room.mediaLeft(MediaLeave{SessionID: s.SessionID, ProjectID: "prj_1", RoomID: "room_1", ParticipantID: "p1", At: c.clk.Now(), Reason: LeftReasonLeft})
		}},
		{"the room ends with a reservation", func(c *connectRoom, _ ConnectSession) {
			c.deleteRoom()
		}},
		{"the room ends with a join", func(c *connectRoom, s ConnectSession) {
			c.join(s)
			c.deleteRoom()
		}},
		{"a panic restart, then the lapse", func(c *connectRoom, _ ConnectSession) {
			c.room.recover() // the same gates, reloaded: the reservation is kept
			if c.room.seats.Slots() != 1 || c.gate.ActiveParticipants.Load() != 1 {
				c.t.Fatalf("a panic restart moved the slots: room %d, project %d", c.room.seats.Slots(), c.gate.ActiveParticipants.Load())
			}
			c.clk.Advance(time.Minute)
			c.room.sweep()
		}},
	}
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			c := newConnectRoom(t, connectCase{events: []roomEvent{created("p1", 1), created("p2", 1)},
				room: func(r *Room) { r.MaxParticipants = 1 }})
			s := c.mustConnect("p1")
			if _, err := c.connect("p2"); err == nil {
				t.Fatal("a second participant got the room's one slot")
			}
			journal := c.journalLength()
			path.end(c, s)
			if path.name == "the reservation lapses" && c.journalLength() != journal {
				t.Fatal("a lapse wrote to the journal")
			}
			if c.room.seats.Slots() != 0 || c.gate.ActiveParticipants.Load() != 0 || c.env.Gauges.ActiveParticipants.Load() != 0 {
				t.Fatalf("after the release: room %d, project %d, gauge %d slots", c.room.seats.Slots(),
					c.gate.ActiveParticipants.Load(), c.env.Gauges.ActiveParticipants.Load())
			}
			if c.room.admitting() {
				c.mustConnect("p2")
				if c.room.seats.Slots() != 1 || c.gate.ActiveParticipants.Load() != 1 {
					t.Fatal("the slot given back was not taken again exactly once")
				}
			}
		})
	}
}

// A join takes over its reservation's slot: no second slot, no slot lost.
func TestJoinTakesOverTheReservationsSlot(t *testing.T) {
	c := newConnectRoom(t, connectCase{events: []roomEvent{created("p1", 1)}})
	c.env.Settings.MediaNodeRunsOnItsOwn = false // an embedded node, which is never silent
	c.join(c.mustConnect("p1"))
	if c.room.seats.Slots() != 1 || c.gate.ActiveParticipants.Load() != 1 || c.room.seats.heldSlots() != 1 {
		t.Fatalf("after the join: room %d, project %d slots", c.room.seats.Slots(), c.gate.ActiveParticipants.Load())
	}
	c.clk.Advance(time.Hour - time.Second) // past the token's expiry: a joined participant does not lapse
	c.room.sweep()
	if c.room.seats.Slots() != 1 {
		t.Fatal("a joined participant's slot lapsed")
	}
}

// Connects racing the room's deletion: each is admitted before the room
// closes (and its reservation dropped by the end) or told room_ended; at
// the end no slot is held and every seat is closed.
func TestConnectsRacingARoomDelete(t *testing.T) {
	for round := 0; round < 20; round++ {
		ids, events := createdParticipants(20)
		c := newConnectRoom(t, connectCase{events: events, room: func(r *Room) { r.MaxParticipants = 20 }})
		withProjectLimit(c, 100)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := 0; i < 5; i++ {
					if _, err := c.room.seats.Connect(c.env, id, c.clk.Now()); err != nil && err.Code != apierr.RoomEnded {
						t.Errorf("round %d: %s refused with %s", round, id, err.Code)
					}
				}
			}()
		}
		close(start)
		c.deleteRoom()
		wg.Wait()
		if c.room.seats.Slots() != 0 || c.gate.ActiveParticipants.Load() != 0 {
			t.Fatalf("round %d: after the room's end: room %d, project %d slots", round, c.room.seats.Slots(), c.gate.ActiveParticipants.Load())
		}
		c.room.seats.seats.Range(func(id, v any) bool {
			if s := v.(*Seat).state.Load(); s.status != seatClosed {
				t.Fatalf("round %d: %s's seat is %d after the room's end", round, id, s.status)
			}
			return true
		})
		if _, err := c.connect("p000"); err == nil || err.Code != apierr.RoomEnded {
			t.Fatalf("round %d: a connect after the end: %v", round, err)
		}
	}
}

// Connects racing the participant's removal: admitted before it (and the
// reservation dropped by it) or told participant_not_found; no slot is
// left held.
func TestConnectsRacingAParticipantRemoval(t *testing.T) {
	for round := 0; round < 20; round++ {
		c := newConnectRoom(t, connectCase{events: []roomEvent{created("p1", 1), created("p2", 1)}})
		c.mustConnect("p2")
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := 0; i < 10; i++ {
					if _, err := c.room.seats.Connect(c.env, "p1", c.clk.Now()); err != nil && err.Code != apierr.ParticipantNotFound {
						t.Errorf("round %d: refused with %s", round, err.Code)
					}
				}
			}()
		}
		close(start)
		c.remove("p1")
		wg.Wait()
		if c.room.seats.Slots() != 1 || c.gate.ActiveParticipants.Load() != 1 {
			t.Fatalf("round %d: room %d, project %d slots; want p2's one", round, c.room.seats.Slots(), c.gate.ActiveParticipants.Load())
		}
		if _, err := c.connect("p1"); err == nil || err.Code != apierr.ParticipantNotFound {
			t.Fatalf("round %d: a connect after the removal: %v", round, err)
		}
	}
}

// --- helpers driving the room's handlers, as its actor would -----------------

// join reports s's join and waits until the room admitted it (its record
// durable).
func (c *connectRoom) join(s ConnectSession) {
	c.t.Helper()
	c.room.join(MediaJoin{SessionID: s.SessionID, ProjectID: "prj_1", RoomID: "room_1", ParticipantID: s.ParticipantID,
		IssuedAt: s.IssuedAt, At: c.clk.Now()})
	if got, want := c.media.next(c.t), "admit "+s.ParticipantID+" "+s.SessionID; got != want {
		c.t.Fatalf("media command %q, want %q", got, want)
	}
}

func (c *connectRoom) remove(id string) {
	c.t.Helper()
	req, answer := core.NewEnvelope(RemoveParticipant{ParticipantID: id})
	c.room.removeParticipant(req.Msg.(RemoveParticipant), req)
	if r := <-answer; r.Err != nil {
		c.t.Fatalf("remove %s: %v", id, r.Err)
	}
	c.drainMedia()
}

func (c *connectRoom) deleteRoom() {
	c.t.Helper()
	req, answer := core.NewEnvelope(Delete{Caller: core.Caller{ProjectID: "prj_1", ActorType: "api_key", ActorID: "key_1"}})
	c.room.deleteRoom(req.Msg.(Delete), req)
	if r := <-answer; r.Err != nil {
		c.t.Fatalf("delete: %v", r.Err)
	}
	c.drainMedia()
}

// drainMedia forgets the commands given so far (removals, closures).
func (c *connectRoom) drainMedia() {
	for {
		select {
		case <-c.media.calls:
		default:
			return
		}
	}
}
