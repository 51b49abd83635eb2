package e2e

import (
	"errors"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"rtcd/actors"
)

// Sessions that end without a clean leave over the real server: a client
// that goes quiet, a socket that drops, a room or participant deleted while
// joined, and a reconnect while joined. Each must end the usage session at
// the right instant, exactly once.

// rcEnd reads until the node ends the socket and returns the code of the
// error message it sent ("" when none) and the close code.
func (c *mediaClient) rcEnd() (code string, closeCode int) {
	c.t.Helper()
	for {
		_ = c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		var m map[string]any
		err := c.conn.ReadJSON(&m)
		var ce *websocket.CloseError
		switch {
		case errors.As(err, &ce):
			return code, ce.Code
		case err != nil:
			c.t.Fatalf("socket ended without a close frame: %v", err)
		case m["type"] == "error":
			code, _ = m["code"].(string)
		}
	}
}

// rcAwaitBalance waits until the balance reads want: a session's last
// charge reaches the wallet just after the participant reads left.
func (e *env) rcAwaitBalance(want string) {
	e.t.Helper()
	w := blMicros(e.t, want)
	e.eventually("balance "+want, func() bool { return blMicros(e.t, e.blBalance()) == w })
}

// rcSeconds is the finalized participant-seconds of the test epoch's day.
func (e *env) rcSeconds() float64 {
	e.t.Helper()
	day := testEpoch.Format("2006-01-02")
	s, _ := e.do("GET", "/v1/usage/summary?from="+day+"&to="+day, e.Boot.APIKey, nil).must(e.t, 200).JSON["participant_seconds"].(float64)
	return s
}

// rcFinalized waits for n usage.finalized and n participant.left webhook
// events (and want more of other types) and returns them by participant,
// failing if a participant has more than one of either.
func (h *blHook) rcFinalized(e *env, n int, want map[string]int) (usage, left map[string]map[string]any, evs []actors.OutboxEvent) {
	e.t.Helper()
	if want == nil {
		want = map[string]int{}
	}
	want[actors.EventUsageFinalized], want[actors.EventParticipantLeft] = n, n
	evs = h.await(e, want)
	usage, left = make(map[string]map[string]any), make(map[string]map[string]any)
	for _, ev := range evs {
		var into map[string]map[string]any
		switch ev.Type {
		case actors.EventUsageFinalized:
			into = usage
		case actors.EventParticipantLeft:
			into = left
		default:
			continue
		}
		pid := ev.Data["participant_id"].(string)
		if into[pid] != nil {
			e.t.Fatalf("participant %s has two %s events: %v and %v", pid, ev.Type, into[pid], ev.Data)
		}
		into[pid] = ev.Data
	}
	return usage, left, evs
}

func TestReconcileHeartbeatTimeout(t *testing.T) {
	e := start(t, "--webhook-allow-private=true")
	hook := e.blWebhooks()
	room := e.createRoom(nil)
	pid, token := e.createParticipant(room, nil)
	c := e.joinMedia(token)
	e.eventually("joined", func() bool { return e.participantStatus(room, pid) == "joined" })
	e.stay(20*time.Second, c) // pinging: stays
	if st := e.participantStatus(room, pid); st != "joined" {
		t.Fatalf("a pinging client is %s", st)
	}

	// Quiet for 16 s (timeout 15 s, checked every second): dropped.
	e.clock.Advance(16 * time.Second)
	if code, cc := c.rcEnd(); code != "heartbeat_timeout" || cc != 4005 {
		t.Fatalf("silent client ended with %q %d, want heartbeat_timeout 4005", code, cc)
	}
	e.eventually("left", func() bool { return e.participantStatus(room, pid) == "left" })
	if s := e.rcSeconds(); s != 36 {
		t.Fatalf("usage %v participant-seconds, want 36 (joined 20 s, noticed silent 16 s later)", s)
	}
	e.rcAwaitBalance("9.997600") // floor(36 x 4000 / 60) = 2400 micro-units
	e.blCheckLedgerSum()
	usage, left, _ := hook.rcFinalized(e, 1, nil)
	if left[pid]["reason"] != actors.LeftReasonHeartbeatTimeout || usage[pid]["participant_seconds"] != float64(36) {
		t.Fatalf("left %v, usage %v", left[pid], usage[pid])
	}
}

func TestReconcileDroppedSocket(t *testing.T) {
	e := start(t, "--webhook-allow-private=true")
	hook := e.blWebhooks()
	room := e.createRoom(nil)
	pid, token := e.createParticipant(room, nil)
	c := e.joinMedia(token)
	e.eventually("joined", func() bool { return e.participantStatus(room, pid) == "joined" })
	e.stay(20*time.Second, c)
	_ = c.conn.Close() // no leave, no close frame
	e.eventually("left", func() bool { return e.participantStatus(room, pid) == "left" })
	if s := e.rcSeconds(); s != 20 {
		t.Fatalf("usage %v participant-seconds, want 20", s)
	}
	// 20 s at 0.004000 a minute: floor(20 x 4000 / 60) = 1333 micro-units.
	e.rcAwaitBalance("9.998667")
	if got := blSumByType(t, e.blCheckLedgerSum())["usage"]; got != -1333 {
		t.Fatalf("usage charged %v, want -0.001333", got)
	}
	usage, left, _ := hook.rcFinalized(e, 1, nil)
	if left[pid]["reason"] != actors.LeftReasonDisconnected || usage[pid]["participant_seconds"] != float64(20) ||
		usage[pid]["amount"] != "0.001333" {
		t.Fatalf("left %v, usage %v", left[pid], usage[pid])
	}
}

func TestReconcileDeleteRoomFinalizesUsageFirst(t *testing.T) {
	e := start(t, "--webhook-allow-private=true")
	hook := e.blWebhooks()
	room := e.createRoom(nil)
	aID, aToken := e.createParticipant(room, nil)
	bID, bToken := e.createParticipant(room, nil)
	a := e.joinMedia(aToken)
	e.stay(10*time.Second, a)
	b := e.joinMedia(bToken)
	e.eventually("both joined", func() bool {
		return e.participantStatus(room, aID) == "joined" && e.participantStatus(room, bID) == "joined"
	})
	e.stay(30*time.Second, a, b)

	e.do("DELETE", "/v1/rooms/"+room, e.Boot.APIKey, nil).must(t, 200)
	for name, c := range map[string]*mediaClient{"a": a, "b": b} {
		if code, cc := c.rcEnd(); code != "room_closed" || cc != 4009 {
			t.Fatalf("%s ended with %q %d, want room_closed 4009", name, code, cc)
		}
	}
	e.eventually("room ended", func() bool { return e.getRoomStatus(room) == "ended" })
	for _, id := range []string{aID, bID} {
		if st := e.participantStatus(room, id); st != "ended" {
			t.Fatalf("participant %s is %s after its room ended", id, st)
		}
	}
	// The moment the room reads ended, its usage is final: 40 + 30 s.
	if s := e.rcSeconds(); s != 70 {
		t.Fatalf("usage %v participant-seconds, want 70", s)
	}
	// floor(40 x 4000 / 60) + floor(30 x 4000 / 60) = 2666 + 2000.
	e.eventually("usage charged", func() bool { return e.blBalance() == "9.995334" })
	e.blCheckLedgerSum()

	usage, left, evs := hook.rcFinalized(e, 2, map[string]int{actors.EventRoomEnded: 1})
	ended := blEventsOf(evs, actors.EventRoomEnded)
	if len(ended) != 1 || ended[0].Data["reason"] != "deleted" {
		t.Fatalf("room.ended events %+v", ended)
	}
	endSeq := ended[0].Data["sequence"].(float64)
	for id, secs := range map[string]float64{aID: 40, bID: 30} {
		u := usage[id]
		if u == nil || u["participant_seconds"] != secs || left[id]["reason"] != actors.LeftReasonRoomEnded {
			t.Fatalf("participant %s: usage %v, left %v", id, u, left[id])
		}
		if seq := u["sequence"].(float64); seq >= endSeq {
			t.Fatalf("usage.finalized of %s has sequence %v, not before room.ended's %v", id, seq, endSeq)
		}
	}
}

func TestReconcileDeleteJoinedParticipant(t *testing.T) {
	e := start(t, "--webhook-allow-private=true")
	hook := e.blWebhooks()
	room := e.createRoom(nil)
	aID, aToken := e.createParticipant(room, nil)
	bID, bToken := e.createParticipant(room, nil)
	a, b := e.joinMedia(aToken), e.joinMedia(bToken)
	e.eventually("both joined", func() bool {
		return e.participantStatus(room, aID) == "joined" && e.participantStatus(room, bID) == "joined"
	})
	e.stay(40*time.Second, a, b)

	r := e.do("DELETE", "/v1/rooms/"+room+"/participants/"+aID, e.Boot.APIKey, nil).must(t, 200)
	if r.Str("status") != "removed" {
		t.Fatalf("DELETE answered %s", r.Raw)
	}
	if code, cc := a.rcEnd(); code != "removed" || cc != 4008 {
		t.Fatalf("removed participant's socket ended with %q %d, want removed 4008", code, cc)
	}
	// Its usage is final at once; the other's is still open.
	if s := e.rcSeconds(); s != 40 {
		t.Fatalf("usage %v participant-seconds, want 40", s)
	}
	erRequireEnvelope(t, e.connect(aToken), 404, "participant_not_found")
	if st := e.participantStatus(room, bID); st != "joined" {
		t.Fatalf("the other participant is %s", st)
	}
	b.crPingPong(1)
	e.stay(5*time.Second, b)
	b.send(map[string]any{"type": "leave"})
	e.eventually("b left", func() bool { return e.participantStatus(room, bID) == "left" })
	if s := e.rcSeconds(); s != 85 {
		t.Fatalf("usage %v participant-seconds, want 40 + 45", s)
	}
	e.rcAwaitBalance("9.994334") // 2666 + 3000 micro-units
	e.blCheckLedgerSum()
	usage, left, _ := hook.rcFinalized(e, 2, nil)
	if left[aID]["reason"] != actors.LeftReasonRemoved || usage[aID]["participant_seconds"] != float64(40) ||
		left[bID]["reason"] != actors.LeftReasonLeft || usage[bID]["participant_seconds"] != float64(45) {
		t.Fatalf("a: %v %v; b: %v %v", left[aID], usage[aID], left[bID], usage[bID])
	}
}

func TestReconcileReconnectWhileJoinedKeepsOneSlot(t *testing.T) {
	e := start(t, "--webhook-allow-private=true")
	hook := e.blWebhooks()
	room := e.createRoom(map[string]any{"max_participants": 1})
	aID, aToken := e.createParticipant(room, nil)
	bID, bToken := e.createParticipant(room, nil)
	first := e.joinMedia(aToken)
	e.eventually("joined", func() bool { return e.participantStatus(room, aID) == "joined" })
	e.stay(10*time.Second, first)

	// A new connect and join while joined: the same slot, the old socket replaced.
	second := e.joinMedia(aToken)
	if code, cc := first.rcEnd(); code != "replaced" || cc != 4007 {
		t.Fatalf("the older socket ended with %q %d, want replaced 4007", code, cc)
	}
	if st := e.participantStatus(room, aID); st != "joined" {
		t.Fatalf("after the reconnect the participant is %s", st)
	}
	d := erRequireEnvelope(t, e.connect(bToken), 409, "quota_exceeded")
	if d["limit_name"] != "max_participants" {
		t.Fatalf("details %v", d)
	}
	e.stay(10*time.Second, second)
	second.send(map[string]any{"type": "leave"})
	e.eventually("left", func() bool { return e.participantStatus(room, aID) == "left" })
	// One usage session from the first join to the leave.
	if s := e.rcSeconds(); s != 20 {
		t.Fatalf("usage %v participant-seconds, want 20", s)
	}
	e.rcAwaitBalance("9.998667") // one session of 20 s: 1333 micro-units
	e.blCheckLedgerSum()
	// The slot is free again.
	e.connect(bToken).must(t, 200)
	// One join, one leave: the reconnect is not a second session.
	usage, _, evs := hook.rcFinalized(e, 1, map[string]int{actors.EventParticipantJoined: 1})
	if usage[aID]["participant_seconds"] != float64(20) || usage[bID] != nil {
		t.Fatalf("events %+v", evs)
	}
}
