package media

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"rtcd/auth"
)

func TestJoinWithValidToken(t *testing.T) {
	tn := newTestNode(t, nil)
	_, joined := tn.join(t, "1", "a", "1")
	if joined.Protocol != protocolPresence || joined.SessionID != "cs_1" || joined.RoomID != "room_1" ||
		joined.ParticipantID != "part_a" || joined.Role != "publisher" ||
		joined.HeartbeatIntervalMS != 5000 || joined.HeartbeatTimeoutMS != 15000 ||
		joined.Participants == nil || len(joined.Participants) != 0 {
		t.Fatalf("joined = %+v", joined)
	}
	want := JoinReport{NodeID: "node-1", SessionID: "cs_1", ProjectID: "prj_1", RoomID: "room_1", ParticipantID: "part_a", IssuedAt: testStart, At: testStart}
	if got := tn.rec.nextJoin(t); got != want {
		t.Fatalf("join report = %+v, want %+v", got, want)
	}
}

func TestJoinRefusesBadTokens(t *testing.T) {
	tn := newTestNode(t, nil)
	otherKeys, err := auth.DeriveKeys([]byte(strings.Repeat("x", auth.MinMasterKeyLength)))
	if err != nil {
		t.Fatal(err)
	}
	expired := tn.claims("1", "a", "1")
	expired.ExpiresAt = testStart // expiry is exclusive: a token at its expiry is expired
	tests := []struct {
		name      string
		token     string
		code      string
		closeCode int
	}{
		{"garbage", "rtc_mt_garbage", CodeTokenInvalid, CloseTokenInvalid},
		{"empty", "", CodeTokenInvalid, CloseTokenInvalid},
		{"participant token", tn.keys.SignParticipantToken(auth.ParticipantClaims{}), CodeTokenInvalid, CloseTokenInvalid},
		{"other key", otherKeys.SignMediaToken(tn.claims("1", "a", "1")), CodeTokenInvalid, CloseTokenInvalid},
		{"expired", tn.keys.SignMediaToken(expired), CodeTokenExpired, CloseTokenExpired},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tn.dial(t)
			c.send(map[string]any{"type": "join", "media_token": tc.token})
			c.expectEnd(tc.code, tc.closeCode)
		})
	}
	tn.rec.none(t)
}

func TestFirstMessageMustBeJoin(t *testing.T) {
	tn := newTestNode(t, nil)
	tests := []struct {
		name string
		kind int
		data string
	}{
		{"ping first", websocket.TextMessage, `{"type":"ping","ts":1}`},
		{"not json", websocket.TextMessage, `hello`},
		{"json array", websocket.TextMessage, `[1]`},
		{"binary", websocket.BinaryMessage, `{"type":"join"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tn.dial(t)
			c.sendRaw(tc.kind, []byte(tc.data))
			c.expectEnd(CodeBadMessage, CloseBadMessage)
		})
	}
	tn.rec.none(t)
}

// The join timeout is clock-driven: it fires when CheckHeartbeats runs
// after JoinTimeoutSeconds of the node's clock, whatever the wall clock says.
func TestJoinTimeoutByClock(t *testing.T) {
	tn := newTestNode(t, nil)
	silent := tn.dial(t) // registered at testStart, before Dial returned
	late := tn.dial(t)

	tn.clock.Advance(4 * time.Second)
	tn.node.CheckHeartbeats()
	late.send(map[string]any{"type": "join", "media_token": tn.token("1", "a", "1")})
	late.expect(typeJoined) // 4 s is within the timeout: still admitted

	tn.clock.Advance(time.Second)
	tn.node.CheckHeartbeats()
	silent.expectEnd(CodeJoinTimeout, CloseJoinTimeout)
	late.ping(1) // a joined client is not subject to the join timeout
	tn.rec.nextJoin(t)
	tn.rec.none(t)
}

// The socket read deadline is the real-time backstop of the join timeout,
// for a node whose CheckHeartbeats is not being called. Socket deadlines run
// on the wall clock (the runtime's network poller knows no other), so this
// test waits one real second.
func TestJoinTimeoutBySocketDeadline(t *testing.T) {
	tn := newTestNode(t, func(c *NodeConfig) { c.JoinTimeoutSeconds = 1 })
	c := tn.dial(t)
	c.expectEnd(CodeJoinTimeout, CloseJoinTimeout)
	tn.rec.none(t)
}

func TestParticipantsSeeEachOther(t *testing.T) {
	tn := newTestNode(t, nil)
	a, _ := tn.join(t, "1", "a", "1")
	tn.rec.nextJoin(t)

	tn.clock.Advance(time.Second)
	b, joinedB := tn.join(t, "1", "b", "2")
	if len(joinedB.Participants) != 1 || joinedB.Participants[0].ParticipantID != "part_a" ||
		joinedB.Participants[0].Role != "publisher" || string(joinedB.Participants[0].State) != "{}" {
		t.Fatalf("b's joined participants = %+v", joinedB.Participants)
	}
	if j := tn.rec.nextJoin(t); j.ParticipantID != "part_b" || !j.At.Equal(testStart.Add(time.Second)) {
		t.Fatalf("join report = %+v", j)
	}
	pj := a.expect(typeParticipantJoined)
	if pj.Participant.ParticipantID != "part_b" || pj.Participant.Role != "publisher" || string(pj.Participant.State) != "{}" {
		t.Fatalf("participant.joined = %+v", pj)
	}

	a.send(map[string]any{"type": "update", "state": map[string]any{"muted": true, "name": "Ann"}})
	up := b.expect(typeParticipantUpdated)
	if up.ParticipantID != "part_a" || string(up.State) != `{"muted":true,"name":"Ann"}` {
		t.Fatalf("participant.updated = %+v (state %s)", up, up.State)
	}

	// A newcomer sees the state already set.
	c, joinedC := tn.join(t, "1", "c", "3")
	if len(joinedC.Participants) != 2 || string(joinedC.Participants[0].State) != `{"muted":true,"name":"Ann"}` {
		t.Fatalf("c's joined participants = %+v", joinedC.Participants)
	}
	tn.rec.nextJoin(t)
	a.expect(typeParticipantJoined)
	b.expect(typeParticipantJoined)

	tn.clock.Advance(time.Second)
	b.send(map[string]any{"type": "leave"})
	b.expectEnd("", CloseNormal)
	for _, other := range []*client{a, c} {
		left := other.expect(typeParticipantLeft)
		if left.ParticipantID != "part_b" || left.Reason != ReasonLeft {
			t.Fatalf("participant.left = %+v", left)
		}
	}
	want := LeaveReport{NodeID: "node-1", SessionID: "cs_2", ProjectID: "prj_1", RoomID: "room_1", ParticipantID: "part_b",
		At: testStart.Add(2 * time.Second), Reason: ReasonLeft}
	if got := tn.rec.nextLeave(t); got != want {
		t.Fatalf("leave report = %+v, want %+v", got, want)
	}
	tn.rec.none(t)
}

func TestRoomsAreSeparate(t *testing.T) {
	tn := newTestNode(t, nil)
	a, _ := tn.join(t, "1", "a", "1")
	_, joined := tn.join(t, "2", "b", "2")
	if len(joined.Participants) != 0 {
		t.Fatalf("room 2 shows %+v", joined.Participants)
	}
	a.ping(7) // the first message a gets is the pong: nothing about room 2
}

func TestPingPong(t *testing.T) {
	tn := newTestNode(t, nil)
	a, _ := tn.join(t, "1", "a", "1")
	a.ping(1_700_000_000_123)
	a.send(map[string]any{"type": "ping"})
	if m := a.expect(typePong); m.TS != nil {
		t.Fatalf("pong without ts = %+v", m)
	}
}

func TestHeartbeatTimeout(t *testing.T) {
	tn := newTestNode(t, nil)
	a, _ := tn.join(t, "1", "a", "1")
	b, _ := tn.join(t, "1", "b", "2")
	a.expect(typeParticipantJoined)
	tn.rec.nextJoin(t)
	tn.rec.nextJoin(t)

	tn.clock.Advance(14 * time.Second)
	b.ping(1) // b's last message is now at 14 s; a's is its join at 0 s
	tn.node.CheckHeartbeats()
	tn.rec.none(t) // 14 s of silence is within the 15 s timeout

	tn.clock.Advance(time.Second)
	tn.node.CheckHeartbeats()
	a.expectEnd(CodeHeartbeatTimeout, CloseHeartbeatTimeout)
	left := b.expect(typeParticipantLeft)
	if left.ParticipantID != "part_a" || left.Reason != ReasonHeartbeatTimeout {
		t.Fatalf("participant.left = %+v", left)
	}
	l := tn.rec.nextLeave(t)
	if l.ParticipantID != "part_a" || l.Reason != ReasonHeartbeatTimeout || !l.At.Equal(testStart.Add(15*time.Second)) {
		t.Fatalf("leave report = %+v", l)
	}
	b.ping(2)
	tn.rec.none(t)
}

func TestDroppedSocketReportsLeave(t *testing.T) {
	tn := newTestNode(t, nil)
	a, _ := tn.join(t, "1", "a", "1")
	b, _ := tn.join(t, "1", "b", "2")
	a.expect(typeParticipantJoined)
	tn.rec.nextJoin(t)
	tn.rec.nextJoin(t)

	a.ws.NetConn().Close() // no close frame: the network just goes away
	left := b.expect(typeParticipantLeft)
	if left.ParticipantID != "part_a" || left.Reason != ReasonDisconnected {
		t.Fatalf("participant.left = %+v", left)
	}
	if l := tn.rec.nextLeave(t); l.ParticipantID != "part_a" || l.Reason != ReasonDisconnected {
		t.Fatalf("leave report = %+v", l)
	}

	// A clean close without leave counts as disconnected as well.
	_ = b.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	if l := tn.rec.nextLeave(t); l.ParticipantID != "part_b" || l.Reason != ReasonDisconnected {
		t.Fatalf("leave report = %+v", l)
	}
	if p := tn.node.Presence(); len(p.Sessions) != 0 {
		t.Fatalf("presence after everyone left = %+v", p)
	}
}

func TestBadMessageAfterJoin(t *testing.T) {
	tn := newTestNode(t, nil)
	b, _ := tn.join(t, "1", "b", "2")
	tn.rec.nextJoin(t)
	tests := []struct {
		name string
		msg  string
	}{
		{"state not an object", `{"type":"update","state":[1,2]}`},
		{"state missing", `{"type":"update"}`},
		{"state too large", `{"type":"update","state":{"x":"` + strings.Repeat("y", maxStateBytes) + `"}}`},
		{"unknown type", `{"type":"dance"}`},
		{"second join", `{"type":"join","media_token":"x"}`},
		{"ts not an integer", `{"type":"ping","ts":"soon"}`},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := tn.join(t, "1", "a", "1"+string(rune('a'+i)))
			tn.rec.nextJoin(t)
			b.expect(typeParticipantJoined)
			a.sendRaw(websocket.TextMessage, []byte(tc.msg))
			a.expectEnd(CodeBadMessage, CloseBadMessage)
			if left := b.expect(typeParticipantLeft); left.Reason != ReasonBadMessage {
				t.Fatalf("participant.left = %+v", left)
			}
			if l := tn.rec.nextLeave(t); l.ParticipantID != "part_a" || l.Reason != ReasonBadMessage {
				t.Fatalf("leave report = %+v", l)
			}
		})
	}
}

func TestOversizedFrameIsRefused(t *testing.T) {
	tn := newTestNode(t, nil)
	a, _ := tn.join(t, "1", "a", "1")
	tn.rec.nextJoin(t)
	a.sendRaw(websocket.TextMessage, []byte(`{"type":"update","state":{"x":"`+strings.Repeat("y", maxFrameBytes)+`"}}`))
	// The WebSocket layer refuses the frame itself, with close 1009.
	a.expectEnd("", websocket.CloseMessageTooBig)
	if l := tn.rec.nextLeave(t); l.Reason != ReasonBadMessage {
		t.Fatalf("leave report = %+v", l)
	}
}

func TestReplacement(t *testing.T) {
	tn := newTestNode(t, nil)
	a1, _ := tn.join(t, "1", "a", "1")
	b, _ := tn.join(t, "1", "b", "9")
	a1.expect(typeParticipantJoined)
	tn.rec.nextJoin(t)
	tn.rec.nextJoin(t)

	// Same participant, same media session (a reconnect with the same
	// token): the old socket is replaced and nothing is reported.
	tn.clock.Advance(time.Second)
	a2, joined := tn.join(t, "1", "a", "1")
	if len(joined.Participants) != 1 || joined.Participants[0].ParticipantID != "part_b" {
		t.Fatalf("a2's joined participants = %+v", joined.Participants)
	}
	a1.expectEnd(CodeReplaced, CloseReplaced)
	tn.rec.none(t)

	// Same participant, new media session (a new connect): a join of the
	// new session is reported, and still no leave.
	tn.clock.Advance(time.Second)
	a3, _ := tn.join(t, "1", "a", "2")
	a2.expectEnd(CodeReplaced, CloseReplaced)
	if j := tn.rec.nextJoin(t); j.SessionID != "cs_2" || j.ParticipantID != "part_a" || !j.At.Equal(testStart.Add(2*time.Second)) {
		t.Fatalf("join report = %+v", j)
	}
	tn.rec.none(t)

	// b was told nothing: the next thing it hears about a is a's update.
	a3.send(map[string]any{"type": "update", "state": map[string]any{"v": 3}})
	if up := b.expect(typeParticipantUpdated); up.ParticipantID != "part_a" {
		t.Fatalf("b got %+v", up)
	}
	p := tn.node.Presence()
	if len(p.Sessions) != 2 || p.Sessions[0].SessionID != "cs_2" || !p.Sessions[0].JoinedAt.Equal(testStart.Add(2*time.Second)) {
		t.Fatalf("presence = %+v", p)
	}
	// The replaced socket's later fate does not touch the participant.
	a2.ws.NetConn().Close()
	a3.ping(1)
	tn.rec.none(t)
}

func TestRoomFull(t *testing.T) {
	tn := newTestNode(t, func(c *NodeConfig) { c.MaxParticipantsPerRoom = 2 })
	tn.join(t, "1", "a", "1")
	tn.join(t, "1", "b", "2")
	c := tn.dial(t)
	c.send(map[string]any{"type": "join", "media_token": tn.token("1", "c", "3")})
	c.expectEnd(CodeRoomFull, CloseRoomFull)
	// A replacement is not a new participant, so a full room admits it.
	tn.join(t, "1", "a", "4")
}

func TestCloseRoom(t *testing.T) {
	tn := newTestNode(t, nil)
	a, _ := tn.join(t, "1", "a", "1")
	b, _ := tn.join(t, "1", "b", "2")
	other, _ := tn.join(t, "2", "c", "3")
	for range 3 {
		tn.rec.nextJoin(t)
	}
	a.expect(typeParticipantJoined)

	tn.clock.Advance(time.Second)
	tn.node.CloseRoom("room_1", "deleted")
	for _, id := range []string{"part_a", "part_b"} { // reported in participant order
		l := tn.rec.nextLeave(t)
		if l.ParticipantID != id || l.Reason != ReasonRoomClosed || !l.At.Equal(testStart.Add(time.Second)) {
			t.Fatalf("leave report = %+v", l)
		}
	}
	for _, c := range []*client{a, b} {
		if m := c.expectEnd(CodeRoomClosed, CloseRoomClosed); !strings.Contains(m.Message, "deleted") {
			t.Fatalf("error message = %+v", m)
		}
	}
	other.ping(1) // another room is untouched

	// A token issued before the close cannot rejoin the room.
	late := tn.dial(t)
	late.send(map[string]any{"type": "join", "media_token": tn.token("1", "d", "4")})
	late.expectEnd(CodeRoomClosed, CloseRoomClosed)

	// Closing again, or closing a room the node never saw, is harmless.
	tn.node.CloseRoom("room_1", "deleted")
	tn.node.CloseRoom("room_9", "")
	never := tn.dial(t)
	never.send(map[string]any{"type": "join", "media_token": tn.token("9", "e", "5")})
	never.expectEnd(CodeRoomClosed, CloseRoomClosed)
	tn.rec.none(t)

	// Tombstones are forgotten after TombstoneSeconds.
	tn.clock.Advance(DefaultTombstoneSeconds * time.Second)
	tn.node.CheckHeartbeats() // also drops the silent member of room 2
	tn.rec.nextLeave(t)
	tn.join(t, "1", "f", "6")
}

func TestRemoveParticipant(t *testing.T) {
	tn := newTestNode(t, nil)
	a, _ := tn.join(t, "1", "a", "1")
	b, _ := tn.join(t, "1", "b", "2")
	a.expect(typeParticipantJoined)
	tn.rec.nextJoin(t)
	tn.rec.nextJoin(t)

	tn.node.RemoveParticipant("room_1", "part_a")
	if l := tn.rec.nextLeave(t); l.ParticipantID != "part_a" || l.Reason != ReasonRemoved {
		t.Fatalf("leave report = %+v", l)
	}
	a.expectEnd(CodeRemoved, CloseRemoved)
	if left := b.expect(typeParticipantLeft); left.ParticipantID != "part_a" || left.Reason != ReasonRemoved {
		t.Fatalf("participant.left = %+v", left)
	}

	// The removed participant cannot come back, even with a new session.
	again := tn.dial(t)
	again.send(map[string]any{"type": "join", "media_token": tn.token("1", "a", "3")})
	again.expectEnd(CodeRemoved, CloseRemoved)
	// A removal before the participant ever joined takes effect too.
	tn.node.RemoveParticipant("room_1", "part_z")
	z := tn.dial(t)
	z.send(map[string]any{"type": "join", "media_token": tn.token("1", "z", "4")})
	z.expectEnd(CodeRemoved, CloseRemoved)
	b.ping(1)
	tn.rec.none(t)
}

// smallBufferListener shrinks the send buffer of every accepted socket, so
// a client that stops reading stalls the node's writes after kilobytes
// rather than megabytes of kernel buffering.
type smallBufferListener struct{ net.Listener }

func (l smallBufferListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(socketBufferBytes)
	}
	return c, err
}

// socketBufferBytes is the kernel buffer size the slow-reader test asks for
// on both ends of the slow client's socket.
const socketBufferBytes = 4096

// A client that stops reading fills its outbound queue and is disconnected;
// the room keeps flowing for everyone else meanwhile.
func TestSlowReaderIsDisconnected(t *testing.T) {
	tn := newTestNode(t, nil)
	srv := httptest.NewUnstartedServer(tn.node)
	srv.Listener = smallBufferListener{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(tn.node.Close) // before srv.Close: the node ends its hijacked sockets
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + RTCPath
	slowDialer := &websocket.Dialer{NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(socketBufferBytes)
		}
		return c, err
	}}
	joinAt := func(d *websocket.Dialer, participant, session string) *client {
		c := dialWith(t, d, url)
		c.send(map[string]any{"type": "join", "media_token": tn.token("1", participant, session)})
		c.expect(typeJoined)
		return c
	}
	joinAt(slowDialer, "slow", "1") // and never reads again
	sender := joinAt(websocket.DefaultDialer, "sender", "2")
	watcher := joinAt(websocket.DefaultDialer, "watcher", "3")
	sender.expect(typeParticipantJoined)
	for range 3 {
		tn.rec.nextJoin(t)
	}

	// The sender sends updates in rounds; the watcher reads each round
	// before the next, so only the slow client falls behind. Both ping
	// every round, as live clients do.
	const roundUpdates = 50
	const maxRounds = 200 // 10000 updates of ~4 KiB: far beyond the buffers and the queue
	state := map[string]any{"pad": strings.Repeat("p", maxStateBytes-20)}
	leftSeen := false
	rounds := 0
	for ; rounds < maxRounds && !leftSeen; rounds++ {
		for range roundUpdates {
			sender.send(map[string]any{"type": "update", "state": state})
		}
		// The sender hears the slow client leave too; anything else
		// before its pong would be a bug.
		sender.send(map[string]any{"type": "ping", "ts": rounds})
		for {
			m, err := sender.read()
			if err != nil {
				t.Fatalf("sender: %v", err)
			}
			if m.Type == typePong {
				break
			}
			if m.Type != typeParticipantLeft || m.ParticipantID != "part_slow" {
				t.Fatalf("sender got %+v", m)
			}
		}
		for seen := 0; seen < roundUpdates; {
			m, err := watcher.read()
			if err != nil {
				t.Fatalf("watcher: %v", err)
			}
			switch {
			case m.Type == typeParticipantUpdated && m.ParticipantID == "part_sender":
				seen++
			case m.Type == typeParticipantLeft && m.ParticipantID == "part_slow":
				if m.Reason != ReasonSlowConsumer {
					t.Fatalf("participant.left = %+v", m)
				}
				leftSeen = true
			default:
				t.Fatalf("watcher got %+v", m)
			}
		}
		watcher.ping(int64(rounds))
	}
	if !leftSeen {
		t.Fatal("the slow client was never disconnected")
	}
	t.Logf("slow client disconnected after %d rounds of %d updates", rounds, roundUpdates)
	if l := tn.rec.nextLeave(t); l.ParticipantID != "part_slow" || l.Reason != ReasonSlowConsumer {
		t.Fatalf("leave report = %+v", l)
	}
	sender.ping(-1)
	tn.rec.none(t)
}

func TestPresence(t *testing.T) {
	tn := newTestNode(t, nil)
	tn.join(t, "2", "c", "3")
	tn.clock.Advance(time.Second)
	tn.join(t, "1", "b", "2")
	tn.join(t, "1", "a", "1")
	tn.dial(t) // not joined: not in presence

	tn.clock.Advance(time.Second)
	p := tn.node.Presence()
	want := []SessionInfo{
		{SessionID: "cs_1", ProjectID: "prj_1", RoomID: "room_1", ParticipantID: "part_a", IssuedAt: testStart.Add(time.Second), JoinedAt: testStart.Add(time.Second)},
		{SessionID: "cs_2", ProjectID: "prj_1", RoomID: "room_1", ParticipantID: "part_b", IssuedAt: testStart.Add(time.Second), JoinedAt: testStart.Add(time.Second)},
		{SessionID: "cs_3", ProjectID: "prj_1", RoomID: "room_2", ParticipantID: "part_c", IssuedAt: testStart, JoinedAt: testStart},
	}
	if p.NodeID != "node-1" || !p.At.Equal(testStart.Add(2*time.Second)) || len(p.Sessions) != len(want) {
		t.Fatalf("presence = %+v", p)
	}
	for i := range want {
		if p.Sessions[i] != want[i] {
			t.Fatalf("session %d = %+v, want %+v", i, p.Sessions[i], want[i])
		}
	}

	for range 3 {
		tn.rec.nextJoin(t)
	}
	tn.node.ReportPresence()
	if got, ok := tn.rec.next(t).(PresenceReport); !ok || len(got.Sessions) != 3 {
		t.Fatalf("presence report = %+v", got)
	}
}

func TestCloseShutsEveryoneDown(t *testing.T) {
	tn := newTestNode(t, nil)
	a, _ := tn.join(t, "1", "a", "1")
	pending := tn.dial(t)
	tn.rec.nextJoin(t)

	aEnd := a.endAsync(CodeNodeShutdown, CloseNodeShutdown)
	pendingEnd := pending.endAsync(CodeNodeShutdown, CloseNodeShutdown)
	tn.node.Close()
	if l := tn.rec.nextLeave(t); l.ParticipantID != "part_a" || l.Reason != ReasonNodeShutdown {
		t.Fatalf("leave report = %+v", l)
	}
	for _, end := range []<-chan error{aEnd, pendingEnd} {
		if err := <-end; err != nil {
			t.Fatal(err)
		}
	}

	_, resp, err := websocket.DefaultDialer.Dial(tn.url, nil)
	if err == nil {
		t.Fatal("dial after Close succeeded")
	}
	expectHTTPStatus(t, resp, http.StatusServiceUnavailable)
	tn.node.Close() // idempotent
	tn.node.CheckHeartbeats()
	if p := tn.node.Presence(); len(p.Sessions) != 0 {
		t.Fatalf("presence after Close = %+v", p)
	}
}

func TestMaxConnections(t *testing.T) {
	tn := newTestNode(t, func(c *NodeConfig) { c.MaxConnections = 1 })
	first := tn.dial(t)
	_, resp, err := websocket.DefaultDialer.Dial(tn.url, nil)
	if err == nil {
		t.Fatal("second connection admitted")
	}
	expectHTTPStatus(t, resp, http.StatusServiceUnavailable)
	first.send(map[string]any{"type": "join", "media_token": tn.token("1", "a", "1")})
	first.expect(typeJoined)
}

func TestHTTPSurface(t *testing.T) {
	tn := newTestNode(t, nil)
	get := func(path string) *http.Response {
		resp, err := http.Get(tn.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	expectHTTPStatus(t, get("/other"), http.StatusNotFound)
	expectHTTPStatus(t, get(RTCPath), http.StatusUpgradeRequired)
	resp, err := http.Post(tn.srv.URL+RTCPath, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	expectHTTPStatus(t, resp, http.StatusMethodNotAllowed)
}

func TestNodeConfigValidation(t *testing.T) {
	base := func() NodeConfig { return NodeConfig{NodeID: "n", Reporter: newRecorder()} }
	bad := map[string]func(*NodeConfig){
		"no node id":           func(c *NodeConfig) { c.NodeID = "" },
		"long node id":         func(c *NodeConfig) { c.NodeID = strings.Repeat("n", maxNodeIDBytes+1) },
		"no reporter":          func(c *NodeConfig) { c.Reporter = nil },
		"negative interval":    func(c *NodeConfig) { c.HeartbeatIntervalSeconds = -1 },
		"timeout < 2×interval": func(c *NodeConfig) { c.HeartbeatIntervalSeconds, c.HeartbeatTimeoutSeconds = 5, 9 },
		"too many per room":    func(c *NodeConfig) { c.MaxParticipantsPerRoom = maxParticipantsPerRoomLimit + 1 },
		"too many connections": func(c *NodeConfig) { c.MaxConnections = maxConnectionsLimit + 1 },
		"huge join timeout":    func(c *NodeConfig) { c.JoinTimeoutSeconds = maxConfigSeconds + 1 },
	}
	for name, mutate := range bad {
		cfg := base()
		mutate(&cfg)
		if n, err := NewNode(cfg); err == nil {
			n.Close()
			t.Errorf("%s: NewNode accepted %+v", name, cfg)
		}
	}
	n, err := NewNode(base())
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
}

func TestRunChecksHeartbeats(t *testing.T) {
	// Run's ticker is real time, but what it checks uses the node's clock:
	// with the fake clock already past the timeout, the first tick (one
	// real second) drops the silent client.
	tn := newTestNode(t, nil)
	a, _ := tn.join(t, "1", "a", "1")
	tn.rec.nextJoin(t)
	tn.clock.Advance(DefaultHeartbeatTimeoutSeconds * time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go tn.node.Run(ctx)
	a.expectEnd(CodeHeartbeatTimeout, CloseHeartbeatTimeout)
}

func TestServe(t *testing.T) {
	keys, err := auth.DeriveKeys(make([]byte, auth.MinMasterKeyLength))
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	n, err := NewNode(NodeConfig{NodeID: "n", Verifier: keys.MediaVerifier(), Reporter: rec})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- n.Serve(ctx, ln, nil) }()

	c := dialWith(t, websocket.DefaultDialer, "ws://"+ln.Addr().String()+RTCPath)
	c.send(map[string]any{"type": "join", "media_token": keys.SignMediaToken(auth.MediaClaims{
		SessionID: "cs_1", ProjectID: "prj_1", RoomID: "room_1", ParticipantID: "part_a", Role: "publisher",
		ExpiresAt: time.Now().Add(time.Minute)})})
	c.expect(typeJoined)
	end := c.endAsync(CodeNodeShutdown, CloseNodeShutdown)
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve = %v", err)
	}
	if err := <-end; err != nil {
		t.Fatal(err)
	}
	rec.nextJoin(t)
	if l := rec.nextLeave(t); l.Reason != ReasonNodeShutdown {
		t.Fatalf("leave report = %+v", l)
	}
}

func TestAsyncReporter(t *testing.T) {
	rec := newRecorder()
	r := NewAsyncReporter(rec, nil)
	r.Joined(JoinReport{ParticipantID: "part_a"})
	r.Left(LeaveReport{ParticipantID: "part_a", Reason: ReasonLeft})
	r.Presence(PresenceReport{NodeID: "n"})
	r.Close()
	if j := rec.nextJoin(t); j.ParticipantID != "part_a" {
		t.Fatalf("join = %+v", j)
	}
	rec.nextLeave(t)
	if _, ok := rec.next(t).(PresenceReport); !ok {
		t.Fatal("presence not passed on")
	}
	r.Joined(JoinReport{}) // after Close: dropped, never blocks
	if r.Dropped() != 1 {
		t.Fatalf("Dropped = %d", r.Dropped())
	}
}

func TestTruncate(t *testing.T) {
	if got := truncate("héllo", 2); got != "h" { // never splits the two-byte é
		t.Fatalf("truncate = %q", got)
	}
	if got := truncate("abc", 5); got != "abc" {
		t.Fatalf("truncate = %q", got)
	}
}

// FuzzParseClientMessage checks that no frame a client can send makes the
// parser panic, and that whatever it accepts keeps the protocol's bounds.
func FuzzParseClientMessage(f *testing.F) {
	for _, seed := range []string{
		`{"type":"join","media_token":"rtc_mt_x"}`, `{"type":"ping","ts":1}`, `{"type":"leave"}`,
		`{"type":"update","state":{"a":[1,{"b":null}]}}`, `{"type":"update","state":"x"}`, ` {"type":"ping"}`,
		`{"type":"ping","ts":1e400}`, `{"type":"update","state":{"a":"\ud800"}}`, `{`, `[]`, `null`,
	} {
		f.Add([]byte(seed), true, false)
		f.Add([]byte(seed), false, false)
	}
	for _, seed := range []string{
		`{"type":"publish.offer","sdp":"v=0","tracks":[{"track_id":"a","source":"camera"}]}`,
		`{"type":"subscribe.answer","sdp":"v=0"}`, `{"type":"candidate","target":"publish","candidate":{"candidate":""}}`,
		`{"type":"track.unsubscribe","track_id":"tr_1"}`, `{"type":"candidate","target":"x","candidate":{}}`,
	} {
		f.Add([]byte(seed), true, true)
		f.Add([]byte(seed), true, false)
	}
	f.Fuzz(func(t *testing.T, data []byte, joinSent, media bool) {
		msg, code, _ := parseClientMessage(websocket.TextMessage, data, joinSent, media)
		if code != "" {
			if code != CodeBadMessage {
				t.Fatalf("code %q", code)
			}
			return
		}
		switch msg.Type {
		case typeJoin:
			if joinSent {
				t.Fatal("second join accepted")
			}
		case typeUpdate:
			if len(msg.State) > maxStateBytes || msg.State[0] != '{' {
				t.Fatalf("accepted state %q", msg.State)
			}
		case typePing, typeLeave:
		case typePublishOffer, typeSubscribeAnswer:
			if !media || msg.SDP == "" {
				t.Fatalf("accepted %q (media %v)", msg.Type, media)
			}
		case typeCandidate:
			if !media || (msg.Target != targetPublish && msg.Target != targetSubscribe) {
				t.Fatalf("accepted candidate %+v (media %v)", msg, media)
			}
		case typeTrackSubscribe, typeTrackUnsubscribe:
			if !media || msg.TrackID == "" {
				t.Fatalf("accepted %q (media %v)", msg.Type, media)
			}
		default:
			t.Fatalf("accepted type %q", msg.Type)
		}
		if !joinSent && msg.Type != typeJoin {
			t.Fatalf("accepted %q before join", msg.Type)
		}
	})
}

// TestReleaseRoom: the room's workspace moved to another rtcd node, so
// this media node stops serving it: every member's leave is reported and
// its socket ended with node_shutdown (connect again), other rooms are
// untouched, and, unlike a close, the room may join again here (it lives
// on and may come back).
func TestReleaseRoom(t *testing.T) {
	tn := newTestNode(t, nil)
	a, _ := tn.join(t, "1", "a", "1")
	b, _ := tn.join(t, "1", "b", "2")
	other, _ := tn.join(t, "2", "c", "3")
	for range 3 {
		tn.rec.nextJoin(t)
	}
	a.expect(typeParticipantJoined)

	tn.clock.Advance(time.Second)
	tn.node.ReleaseRoom("room_1")
	for _, id := range []string{"part_a", "part_b"} {
		l := tn.rec.nextLeave(t)
		if l.ParticipantID != id || l.Reason != ReasonNodeShutdown || !l.At.Equal(testStart.Add(time.Second)) {
			t.Fatalf("leave report = %+v", l)
		}
	}
	for _, c := range []*client{a, b} {
		c.expectEnd(CodeNodeShutdown, CloseNodeShutdown)
	}
	other.ping(1)
	tn.node.ReleaseRoom("room_9") // a room the node never saw: nothing
	tn.rec.none(t)
	// A new session of the room joins again: no tombstone.
	tn.join(t, "1", "d", "4")
	tn.rec.nextJoin(t)
}
