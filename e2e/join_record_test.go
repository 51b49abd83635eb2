package e2e

import (
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// The join is the point of record (issue 15), over the real server and its
// embedded media node: a connect only reserves, and the node serves a
// session only once the room recorded its join.

// jrDial opens a socket at endpoint and sends a join with mediaToken.
func (e *env) jrDial(endpoint, mediaToken string) *mediaClient {
	e.t.Helper()
	conn, _, err := websocket.DefaultDialer.Dial(endpoint, nil)
	if err != nil {
		e.t.Fatalf("dial %s: %v", endpoint, err)
	}
	e.t.Cleanup(func() { _ = conn.Close() })
	c := &mediaClient{t: e.t, conn: conn}
	c.send(map[string]any{"type": "join", "media_token": mediaToken})
	return c
}

// The defect this closes: a participant that connects twice joined the
// node with the older session's media token and stayed there unmetered and
// outside the caps (the control plane ignored that join as stale, the node
// kept serving it). Now the older join is closed session_superseded before
// the node serves it, nothing is recorded, and the latest session joins.
func TestStaleSessionJoinIsRefused(t *testing.T) {
	e := start(t)
	room := e.createRoom(map[string]any{"max_participants": 1})
	pid, token := e.createParticipant(room, nil)
	older := e.connect(token).must(t, 200)
	e.clock.Advance(time.Second)
	latest := e.connect(token).must(t, 200)

	stale := e.jrDial(older.Str("endpoint"), older.Str("media_token"))
	if code, closeCode := stale.rcEnd(); code != "session_superseded" || closeCode != 4011 {
		t.Fatalf("the older session's join ended with %q (close %d), want session_superseded (4011)", code, closeCode)
	}
	// Nothing was recorded: the participant is connected (its latest
	// session's reservation, from the room's memory), not joined.
	if s := e.participantStatus(room, pid); s != "connected" {
		t.Fatalf("after the stale join the participant is %s, want connected", s)
	}
	if s := e.getRoomStatus(room); s != "waiting" {
		t.Fatalf("a refused join started the room: %s", s)
	}

	c := e.jrDial(latest.Str("endpoint"), latest.Str("media_token"))
	if m := c.read(); m["type"] != "joined" || m["session_id"] != latest.Str("session_id") {
		t.Fatalf("the latest session's join answered %v", m)
	}
	if s := e.participantStatus(room, pid); s != "joined" {
		t.Fatalf("after the latest join the participant is %s", s)
	}
	// The older token stays refused: the node remembers the session it
	// closed (a closed session never joins again).
	again := e.jrDial(older.Str("endpoint"), older.Str("media_token"))
	if code, _ := again.rcEnd(); code != "token_expired" {
		t.Fatalf("the older session's second join ended with %q, want token_expired", code)
	}
	e.stay(30*time.Second, c)
	c.send(map[string]any{"type": "leave"})
	e.eventually("participant left", func() bool { return e.participantStatus(room, pid) == "left" })
	if s := e.rcSeconds(); s != 30 {
		t.Fatalf("usage %v participant-seconds, want the latest session's 30", s)
	}
}

// A join whose reservation a restart lost is re-checked: admitted while the
// room has a slot, and, once a newcomer took it, closed
// participant_limit_reached with nothing recorded.
func TestJoinLostInARestartIsRechecked(t *testing.T) {
	// The media node keeps its address across the restart, as a
	// deployment's does: the media tokens name it.
	flags := []string{"--media-listen=" + binFreePort(t)}
	e := startIn(t, t.TempDir(), nil, flags...)
	room := e.createRoom(map[string]any{"max_participants": 1})
	pid, token := e.createParticipant(room, nil)
	_, other := e.createParticipant(room, nil)
	cs := e.connect(token).must(t, 200)
	e = e.rsRestart(t, flags...)
	if s := e.participantStatus(room, pid); s != "created" {
		t.Fatalf("after the restart the participant is %s; its reservation lived in memory only", s)
	}
	c := e.jrDial(cs.Str("endpoint"), cs.Str("media_token"))
	if m := c.read(); m["type"] != "joined" {
		t.Fatalf("the join of a connect the restart forgot answered %v", m)
	}
	e.eventually("joined", func() bool { return e.participantStatus(room, pid) == "joined" })
	mustQuota(t, e.connect(other), "max_participants", 1)
	c.send(map[string]any{"type": "leave"})
	e.eventually("left", func() bool { return e.participantStatus(room, pid) == "left" })

	// Again, but a newcomer takes the room's one slot first.
	cs = e.connect(token).must(t, 200)
	e = e.rsRestart(t, flags...)
	e.connect(other).must(t, 200)
	refused := e.jrDial(cs.Str("endpoint"), cs.Str("media_token"))
	if code, closeCode := refused.rcEnd(); code != "participant_limit_reached" || closeCode != 4012 {
		t.Fatalf("the join into a full room ended with %q (close %d), want participant_limit_reached (4012)", code, closeCode)
	}
	if s := e.participantStatus(room, pid); s != "left" {
		t.Fatalf("after the refused join the participant is %s, want left (as recorded)", s)
	}
}

// Connects racing the room's deletion and a participant's removal over
// HTTP: each connect is admitted (before) or refused room_ended /
// participant_not_found (after); afterwards no slot is held.
func TestConnectsRacingDeletes(t *testing.T) {
	e := start(t, "--connect-per-ip-per-minute=100000", "--default-connect-requests-per-minute=100000")
	room := e.createRoom(map[string]any{"max_participants": 50})
	var ids, toks []string
	for i := 0; i < 20; i++ {
		id, tok := e.createParticipant(room, nil)
		ids, toks = append(ids, id), append(toks, tok)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, tok := range toks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for n := 0; n < 5; n++ {
				r, err := e.send("POST", "/v1/connect", "", map[string]any{"token": tok})
				if err != nil {
					t.Errorf("connect: %v", err)
					return
				}
				switch {
				case r.Status == 200:
				case i == 0 && r.Status == 404 && r.ErrCode() == "participant_not_found":
				case r.Status == 410 && r.ErrCode() == "room_ended":
				default:
					t.Errorf("connect of %s answered %d %s", ids[i], r.Status, r.Raw)
				}
			}
		}()
	}
	close(start)
	e.do("DELETE", "/v1/rooms/"+room+"/participants/"+ids[0], e.Boot.APIKey, nil).must(t, 200)
	e.do("DELETE", "/v1/rooms/"+room, e.Boot.APIKey, nil).must(t, 200)
	wg.Wait()
	e.waitRoomEnded(room)
	e.rsWaitGauge("rtcd_active_participants", 0)
	for _, id := range ids {
		if s := e.participantStatus(room, id); s != "ended" && s != "removed" {
			t.Fatalf("participant %s is %s after the room's end", id, s)
		}
	}
}
