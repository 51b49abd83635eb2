package room

import (
	"rtcd/actors/core/coretest"
	"strings"
	"testing"
	"time"

	"rtcd/actors/core"
	"rtcd/persistence"

	"github.com/goccy/go-json"
)

// The join is the point of record: the room's join decisions, its handler
// called directly with a media node's reports, and the media engine's
// answers recorded (stubMedia).

// report is the join report of session s at the clock's now.
func (c *connectRoom) report(s ConnectSession) MediaJoin {
	return MediaJoin{SessionID: s.SessionID, ProjectID: "prj_1", RoomID: "room_1", ParticipantID: s.ParticipantID, IssuedAt: s.IssuedAt, At: c.clk.Now()}
}

// refused reports j and expects the room to close it with code, recording
// nothing.
func (c *connectRoom) refused(j MediaJoin, code string) {
	c.t.Helper()
	journal := c.journalLength()
	before := string(core.Encode(c.room.state))
	c.room.join(j)
	if got, want := c.media.next(c.t), "close "+j.ParticipantID+" "+j.SessionID+" "+code; got != want {
		c.t.Fatalf("media command %q, want %q", got, want)
	}
	if c.journalLength() != journal || string(core.Encode(c.room.state)) != before {
		c.t.Fatal("a refused join changed the room")
	}
}

// outboxTypes lists the webhook events written, in order.
func (c *connectRoom) outboxTypes() []string {
	var out []string
	if err := c.env.Store.Scan([]byte(persistence.PrefixOutbox), 0, func(_, v []byte) bool {
		var ev core.OutboxEvent
		if err := json.Unmarshal(v, &ev); err != nil {
			c.t.Fatal(err)
		}
		out = append(out, ev.Type)
		return true
	}); err != nil {
		c.t.Fatal(err)
	}
	return out
}

// The defect of issue 15: a participant that connects twice must not join
// with the older session's media token. The older join is closed
// (session_superseded) and nothing is recorded; the latest joins, and the
// older is refused again while it is joined.
func TestStaleSessionJoinIsRefused(t *testing.T) {
	c := newConnectRoom(t, connectCase{events: []roomEvent{created("p1", 1)}})
	older := c.mustConnect("p1")
	c.clk.Advance(time.Second)
	latest := c.mustConnect("p1")
	c.refused(c.report(older), RefuseSessionSuperseded)
	if p := c.room.state.Participants["p1"]; p.Status != ParticipantCreated {
		t.Fatalf("after the stale join the participant is %s", p.Status)
	}
	c.join(latest)
	if p := c.room.state.Participants["p1"]; p.Status != ParticipantJoined || p.SessionID != latest.SessionID {
		t.Fatalf("after the latest join: %+v", p)
	}
	c.refused(c.report(older), RefuseSessionSuperseded)
	if got := strings.Join(c.outboxTypes(), ","); got != core.EventRoomStarted+","+core.EventParticipantJoined {
		t.Fatalf("webhook events %s", got)
	}
	if c.room.seats.Slots() != 1 || c.gate.ActiveParticipants.Load() != 1 {
		t.Fatal("the slots moved")
	}
}

// A join of the session already recorded (a repeated report, or a lost
// answer) is admitted again and records nothing.
func TestJoinOfTheRecordedSessionIsAdmittedAgain(t *testing.T) {
	c := newConnectRoom(t, connectCase{events: []roomEvent{created("p1", 1)}})
	s := c.mustConnect("p1")
	c.join(s)
	journal := c.journalLength()
	c.join(s)
	if c.journalLength() != journal {
		t.Fatal("a repeated join was recorded")
	}
}

// A session that joined and left never joins again, even with its token
// unexpired; an older one is stale.
func TestLeftSessionNeverJoinsAgain(t *testing.T) {
	c := newConnectRoom(t, connectCase{events: []roomEvent{created("p1", 1)}})
	older := c.mustConnect("p1")
	c.clk.Advance(time.Second)
	s := c.mustConnect("p1")
	c.join(s)
	c.room.mediaLeft(MediaLeave{SessionID: s.SessionID, ProjectID: "prj_1", RoomID: "room_1", ParticipantID: "p1", At: c.clk.Now(), Reason: LeftReasonLeft})
	c.refused(c.report(s), RefuseSessionEnded)
	c.refused(c.report(older), RefuseSessionSuperseded)
	if c.room.seats.Slots() != 0 {
		t.Fatal("a refused join holds a slot")
	}
	// After a restart too: the left session is on record.
	c.restart()
	c.refused(c.report(s), RefuseSessionEnded)
	c.refused(c.report(older), RefuseSessionSuperseded)
}

// restart is a crash and a new process on the same store: a new project
// gate (its counts start again) and a new room actor recovering.
func (c *connectRoom) restart() {
	gate := &core.ProjectGate{}
	gate.Record.Store(c.gate.Record.Load())
	gate.Credit.Store(c.credit)
	c.gate = gate
	c.env.Gauges.ActiveParticipants.Store(0)
	c.room = newRoomOn(c.env, "room_1", gate)
}

// A join with no matching reservation (lost in a restart, or lapsed) is
// re-checked as its connect was: admitted and recorded when it passes,
// closed with the check's code when it does not, recording nothing.
func TestJoinWithoutAReservationIsRechecked(t *testing.T) {
	t.Run("lost in a restart, capacity left: admitted", func(t *testing.T) {
		c := newConnectRoom(t, connectCase{events: []roomEvent{created("p1", 1)}})
		s := c.mustConnect("p1")
		c.restart()
		if c.room.seats.Slots() != 0 {
			t.Fatal("a reservation survived the restart")
		}
		c.join(s)
		if p := c.room.state.Participants["p1"]; p.Status != ParticipantJoined || !p.ConnectedAt.Equal(c.clk.Now()) {
			t.Fatalf("after the re-checked join: %+v", p)
		}
		if c.room.seats.Slots() != 1 || c.gate.ActiveParticipants.Load() != 1 {
			t.Fatal("the re-checked join holds no slot")
		}
	})
	t.Run("lost in a restart, the room filled meanwhile: participant_limit_reached", func(t *testing.T) {
		c := newConnectRoom(t, connectCase{events: append(joinedParticipants("p1", "p2"), created("p3", 3), created("p4", 3))})
		s := c.mustConnect("p3")
		c.restart()
		c.mustConnect("p4") // takes the slot p3's lost reservation held
		c.refused(c.report(s), RefuseParticipantLimit)
		if c.room.seats.Slots() != 3 || c.gate.ActiveParticipants.Load() != 3 {
			t.Fatalf("room %d, project %d slots; want 3", c.room.seats.Slots(), c.gate.ActiveParticipants.Load())
		}
	})
	t.Run("the project filled: participant_limit_reached", func(t *testing.T) {
		c := newConnectRoom(t, connectCase{events: []roomEvent{created("p1", 1)}})
		s := c.mustConnect("p1")
		c.restart()
		c.gate.ActiveParticipants.Store(connectLimit)
		c.refused(c.report(s), RefuseParticipantLimit)
	})
	t.Run("the credit gate closed: insufficient_credit", func(t *testing.T) {
		c := newConnectRoom(t, connectCase{events: []roomEvent{created("p1", 1)}})
		s := c.mustConnect("p1")
		c.restart()
		c.credit.Set(true)
		c.refused(c.report(s), RefuseInsufficientCredit)
		if c.room.seats.Slots() != 0 || c.gate.ActiveParticipants.Load() != 0 {
			t.Fatal("a refused join holds a slot")
		}
	})
	t.Run("the reservation lapsed: admitted", func(t *testing.T) {
		c := newConnectRoom(t, connectCase{events: []roomEvent{created("p1", 1)}})
		s := c.mustConnect("p1")
		j := c.report(s) // the node saw it before the token expired
		c.clk.Advance(time.Minute)
		c.room.sweep()
		if c.room.seats.Slots() != 0 {
			t.Fatal("the reservation did not lapse")
		}
		c.room.join(j)
		if got := c.media.next(t); got != "admit p1 "+s.SessionID {
			t.Fatalf("media command %q", got)
		}
	})
	t.Run("removed: removed", func(t *testing.T) {
		c := newConnectRoom(t, connectCase{events: []roomEvent{created("p1", 1)}})
		s := c.mustConnect("p1")
		c.remove("p1")
		c.refused(c.report(s), RefuseRemoved)
	})
	t.Run("the room ended: room_closed", func(t *testing.T) {
		c := newConnectRoom(t, connectCase{events: []roomEvent{created("p1", 1)}})
		s := c.mustConnect("p1")
		c.deleteRoom()
		c.room.join(c.report(s))
		if got := c.media.next(t); got != "close p1 "+s.SessionID+" "+RefuseRoomClosed {
			t.Fatalf("media command %q", got)
		}
	})
}

// A joined participant that connects again and joins with the new session
// moves to it (session_renewed): its usage goes on, it holds one slot, and
// the older session is stale from then on. Had it left first, a newer live
// reservation keeps the slot.
func TestReconnectWhileJoinedRenewsTheSession(t *testing.T) {
	c := newConnectRoom(t, connectCase{events: []roomEvent{created("p1", 1)}})
	first := c.mustConnect("p1")
	c.join(first)
	c.clk.Advance(10 * time.Second)
	second := c.mustConnect("p1")
	c.join(second)
	p := c.room.state.Participants["p1"]
	if p.Status != ParticipantJoined || p.SessionID != second.SessionID || p.Usage.SessionID != first.SessionID {
		t.Fatalf("after the renewal: %+v (usage %+v)", p, p.Usage)
	}
	c.refused(c.report(first), RefuseSessionSuperseded)
	if c.room.seats.Slots() != 1 || c.gate.ActiveParticipants.Load() != 1 {
		t.Fatal("a renewal moved the slots")
	}

	third := c.mustConnect("p1")
	c.room.mediaLeft(MediaLeave{SessionID: second.SessionID, ProjectID: "prj_1", RoomID: "room_1", ParticipantID: "p1", At: c.clk.Now(), Reason: LeftReasonDisconnected})
	if _, ok := c.room.seats.Reservation("p1", c.clk.Now()); !ok || c.room.seats.Slots() != 1 {
		t.Fatal("the leave dropped the newer live reservation's slot")
	}
	c.join(third)
	if p := c.room.state.Participants["p1"]; p.Status != ParticipantJoined || p.SessionID != third.SessionID {
		t.Fatalf("after joining the reservation: %+v", p)
	}
}

// A connect is never recorded: the participant's record says created, and
// GET shows the reservation from the room's memory.
func TestShowReservationIsTheRecordWithTheReservation(t *testing.T) {
	c := newConnectRoom(t, connectCase{events: []roomEvent{created("p1", 1)}})
	c.mustConnect("p1")
	record := core.MustJSON(c.room.state.Participants["p1"].view()) // its record, as the room writes it
	if !strings.Contains(string(record), `"status":"created"`) {
		t.Fatalf("the record on disk: %s", record)
	}
	connectedAt, ok := c.room.seats.Reservation("p1", c.clk.Now())
	if !ok {
		t.Fatal("no reservation")
	}
	shown := string(ShowReservation(record, connectedAt, ok))
	if !strings.Contains(shown, `"status":"connected"`) || !strings.Contains(shown, `"connected_at":"`+core.Timestamp(coretest.T0)+`"`) {
		t.Fatalf("shown: %s", shown)
	}
}

// The connect session appended without reflection is, byte for byte, what
// encoding its view gives, for both roles and any endpoint.
func TestAppendConnectBodyIsTheEncodedView(t *testing.T) {
	sessions := []ConnectSession{
		{SessionID: "cs_abcdefghijklmnopqrstuvwx", RoomID: "room_abcdefghijklmnopqrstuvwx", ParticipantID: "part_abcdefghijklmnopqrstuvwx",
			Role: RolePublisher, ExpiresAt: coretest.At(61)},
		{SessionID: "cs_x", RoomID: "room_<&>", ParticipantID: "part_\"q\\", Role: RoleSubscriber, ExpiresAt: coretest.At(3600).Add(999 * time.Millisecond)},
	}
	for _, endpoint := range []string{"ws://127.0.0.1:8081/rtc", "wss://media.example.com/rtc?a=1&b=<2>", "wss://médias.example/rtc"} {
		for _, s := range sessions {
			for _, token := range []string{"rtc_mt_AQID.BAUG-_", "rtc_mt_\u2028"} {
				want := ConnectBody(s, endpoint, token)
				got := AppendConnectBody([]byte("prefix"), s, EncodeEndpoint(endpoint), token)
				if string(got) != "prefix"+string(want) {
					t.Fatalf("appended:\n%s\nencoded:\nprefix%s", got, want)
				}
			}
		}
	}
}
