package media

import (
	"testing"
	"time"
)

// A node that awaits admission serves a join only once the control plane
// answered its join report: the node serves nothing the control plane has
// not recorded as joined.

func newAdmittingNode(t *testing.T) *testNode {
	return newTestNode(t, func(c *NodeConfig) { c.AwaitAdmission = true })
}

// ask dials and sends a join, and returns the client once the node has
// reported the join (the client has been sent nothing).
func (tn *testNode) ask(t *testing.T, room, participant, session string) (*client, JoinReport) {
	t.Helper()
	c := tn.dial(t)
	c.send(map[string]any{"type": "join", "media_token": tn.token(room, participant, session)})
	j := tn.rec.nextJoin(t)
	if j.SessionID != "cs_"+session || j.ParticipantID != "part_"+participant || !j.IssuedAt.Equal(tn.claims(room, participant, session).IssuedAt) {
		t.Fatalf("join report %+v", j)
	}
	return c, j
}

func TestAwaitAdmissionServesOnlyAdmittedJoins(t *testing.T) {
	tn := newAdmittingNode(t)
	a, _ := tn.ask(t, "1", "a", "1")
	p := tn.node.Presence()
	if len(p.Sessions) != 0 || len(p.Pending) != 1 || p.Pending[0].SessionID != "cs_1" {
		t.Fatalf("presence while waiting: %+v", p)
	}
	tn.node.AdmitSession("room_1", "part_a", "cs_1")
	if m := a.expect(typeJoined); m.SessionID != "cs_1" {
		t.Fatalf("joined %+v", m)
	}
	p = tn.node.Presence()
	if len(p.Sessions) != 1 || len(p.Pending) != 0 || !p.Sessions[0].JoinedAt.Equal(testStart) {
		t.Fatalf("presence once admitted: %+v", p)
	}
	// An answer for a join the node no longer holds, or for another
	// participant, does nothing.
	tn.node.AdmitSession("room_1", "part_a", "cs_1")
	tn.node.AdmitSession("room_1", "part_z", "cs_9")
	a.ping(1)
	tn.rec.none(t)
}

// A refused join is ended with the control plane's code (and its close
// code), reports nothing more, and its token never joins again.
func TestAwaitAdmissionRefusal(t *testing.T) {
	tn := newAdmittingNode(t)
	for _, tc := range []struct {
		code  string
		close int
	}{
		{CodeParticipantLimitReached, CloseParticipantLimitReached},
		{CodeInsufficientCredit, CloseInsufficientCredit},
		{CodeSessionSuperseded, CloseSessionSuperseded},
	} {
		session := tc.code
		a, _ := tn.ask(t, "1", "a", session)
		tn.node.CloseSession("room_1", "part_a", "cs_"+session, tc.code)
		a.expectEnd(tc.code, tc.close)
		again := tn.dial(t)
		again.send(map[string]any{"type": "join", "media_token": tn.token("1", "a", session)})
		again.expectEnd(CodeTokenExpired, CloseTokenExpired)
	}
	tn.rec.none(t)
}

// A joined session the control plane no longer admits (a newer session of
// the participant is recorded) is closed, and its leave reported.
func TestCloseSessionEndsAJoinedSession(t *testing.T) {
	tn := newAdmittingNode(t)
	a, _ := tn.ask(t, "1", "a", "1")
	tn.node.AdmitSession("room_1", "part_a", "cs_1")
	a.expect(typeJoined)
	b, _ := tn.ask(t, "1", "b", "2")
	tn.node.AdmitSession("room_1", "part_b", "cs_2")
	b.expect(typeJoined)
	a.expect(typeParticipantJoined)

	tn.node.CloseSession("room_1", "part_a", "cs_0", CodeSessionSuperseded) // another session: nothing
	tn.node.CloseSession("room_1", "part_a", "cs_1", CodeSessionSuperseded)
	a.expectEnd(CodeSessionSuperseded, CloseSessionSuperseded)
	if l := tn.rec.nextLeave(t); l.SessionID != "cs_1" || l.Reason != CodeSessionSuperseded {
		t.Fatalf("leave report %+v", l)
	}
	if m := b.expect(typeParticipantLeft); m.ParticipantID != "part_a" {
		t.Fatalf("b got %+v", m)
	}
}

// A reconnect with a new session while joined waits for its answer with
// the older socket still served; once admitted it replaces it (the
// participant never left: no leave, no second join report).
func TestAwaitAdmissionReconnectReplacesOnceAdmitted(t *testing.T) {
	tn := newAdmittingNode(t)
	a1, _ := tn.ask(t, "1", "a", "1")
	tn.node.AdmitSession("room_1", "part_a", "cs_1")
	a1.expect(typeJoined)

	tn.clock.Advance(time.Second)
	a2, _ := tn.ask(t, "1", "a", "2")
	a1.ping(1) // still served
	tn.node.AdmitSession("room_1", "part_a", "cs_2")
	a2.expect(typeJoined)
	a1.expectEnd(CodeReplaced, CloseReplaced)
	if p := tn.node.Presence(); len(p.Sessions) != 1 || p.Sessions[0].SessionID != "cs_2" || !p.Sessions[0].JoinedAt.Equal(testStart.Add(time.Second)) {
		t.Fatalf("presence %+v", p)
	}

	// A second socket of the admitted session replaces at once: that
	// session was admitted.
	a3, _ := tn.join(t, "1", "a", "2")
	a2.expectEnd(CodeReplaced, CloseReplaced)
	a3.ping(2)
	tn.rec.none(t)
}

// A join left unanswered for AdmissionTimeoutSeconds ends with
// join_timeout; a waiting socket that closes, or whose room closes, ends
// too. Each reports a leave, in case the control plane recorded the join.
func TestAwaitAdmissionEnds(t *testing.T) {
	tn := newAdmittingNode(t)
	a, _ := tn.ask(t, "1", "a", "1")
	tn.clock.Advance(DefaultAdmissionTimeoutSeconds * time.Second)
	tn.node.CheckHeartbeats()
	a.expectEnd(CodeJoinTimeout, CloseJoinTimeout)
	if l := tn.rec.nextLeave(t); l.SessionID != "cs_1" || l.Reason != ReasonJoinTimeout {
		t.Fatalf("leave report %+v", l)
	}
	tn.node.AdmitSession("room_1", "part_a", "cs_1") // too late: nothing

	b, _ := tn.ask(t, "1", "b", "2")
	b.ws.Close()
	if l := tn.rec.nextLeave(t); l.SessionID != "cs_2" || l.Reason != ReasonDisconnected {
		t.Fatalf("leave report %+v", l)
	}

	c, _ := tn.ask(t, "2", "c", "3")
	tn.node.CloseRoom("room_2", "deleted")
	c.expectEnd(CodeRoomClosed, CloseRoomClosed)
	if l := tn.rec.nextLeave(t); l.SessionID != "cs_3" || l.Reason != ReasonRoomClosed {
		t.Fatalf("leave report %+v", l)
	}

	d, _ := tn.ask(t, "3", "d", "4")
	tn.node.RemoveParticipant("room_3", "part_d")
	d.expectEnd(CodeRemoved, CloseRemoved)
	if l := tn.rec.nextLeave(t); l.SessionID != "cs_4" || l.Reason != ReasonRemoved {
		t.Fatalf("leave report %+v", l)
	}
	if p := tn.node.Presence(); len(p.Pending) != 0 || len(p.Sessions) != 0 {
		t.Fatalf("presence %+v", p)
	}
}
