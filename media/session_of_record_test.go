package media

import (
	"errors"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// stalled checks that a subscriber's highest counter for tag stays put
// while the publisher keeps sending: nothing reaches it any more.
func stalled(t *testing.T, what string, pub *rtcClient, counter uint32, sub *rtcClient, tag uint32) uint32 {
	t.Helper()
	// Packets already in flight when the session ended may still land.
	time.Sleep(100 * time.Millisecond)
	before := sub.highest(tag)
	sendWindow([]*rtcClient{pub}, counter, 40)
	time.Sleep(200 * time.Millisecond)
	if after := sub.highest(tag); after != before {
		t.Fatalf("%s: packets still arrive (highest counter %d, then %d)", what, before, after)
	}
	return counter + 40
}

// callOf joins a publisher and a subscriber to room and starts the
// publisher's camera flowing to the subscriber.
func callOf(t *testing.T, tn *testNode, room string) (pub, sub *rtcClient, tag, counter uint32) {
	t.Helper()
	sub = tn.joinRTC(t, "sub"+room, room, "sub"+room, "sub"+room, "subscriber", nil)
	pub = tn.joinRTC(t, "pub"+room, room, "pub"+room, "pub"+room, "publisher", nil)
	pub.publish(SourceCamera)
	tag = pub.local[0].tag
	counter = pump(t, []*rtcClient{pub}, 1, "the call to flow", func() bool { return sub.highest(tag) > 0 })
	return pub, sub, tag, counter
}

// TestMediaStopsWhenTheSessionOfRecordEnds: media flows only for the joined
// socket of record. When a publisher's session is superseded or removed, or
// the room ends, its subscribers stop receiving at once; when a
// subscriber's session is removed, nothing more reaches it.
func TestMediaStopsWhenTheSessionOfRecordEnds(t *testing.T) {
	tn := newWebRTCNode(t, nil)

	t.Run("publisher superseded", func(t *testing.T) {
		pub, sub, tag, counter := callOf(t, tn, "a")
		// The same participant joins again on a new socket (a new connect).
		tn.joinRTC(t, "pubA2", "a", "puba", "puba-2", "publisher", nil)
		m := sub.next(typeTrackUnsubscribed, nil)
		if m.ParticipantID != "part_puba" || m.Reason != UnsubscribedUnpublished {
			t.Fatalf("track.unsubscribed = %+v", m)
		}
		stalled(t, "after the publisher's socket was replaced", pub, counter, sub, tag)
	})

	t.Run("publisher removed", func(t *testing.T) {
		pub, sub, tag, counter := callOf(t, tn, "b")
		tn.node.RemoveParticipant("room_b", "part_pubb")
		sub.next(typeTrackUnsubscribed, nil)
		stalled(t, "after the publisher was removed", pub, counter, sub, tag)
	})

	t.Run("subscriber removed", func(t *testing.T) {
		pub, sub, tag, counter := callOf(t, tn, "c")
		tn.node.RemoveParticipant("room_c", "part_subc")
		stalled(t, "after the subscriber was removed", pub, counter, sub, tag)
		if n := tn.node.rtc.copiesOf("room_c"); n != 0 {
			t.Fatalf("the node still holds %d copies of tracks in the room", n)
		}
	})

	t.Run("room closed", func(t *testing.T) {
		pub, sub, tag, counter := callOf(t, tn, "d")
		tn.node.CloseRoom("room_d", "ended")
		stalled(t, "after the room closed", pub, counter, sub, tag)
		if tn.node.rtc.hasRoom("room_d") {
			t.Fatal("the closed room still has media state")
		}
	})
}

// TestMediaNothingForASocketNotJoined: a socket whose join is refused, or
// that speaks protocol 1, never gets media: no peer exists for it.
func TestMediaNothingForASocketNotJoined(t *testing.T) {
	tn := newWebRTCNode(t, nil)
	tn.node.RemoveParticipant("room_1", "part_gone")
	c := tn.dial(t)
	c.send(map[string]any{"type": "join", "media_token": tn.tokenAs("1", "gone", "s1", "publisher"), "protocol": 2})
	m := c.expect(typeError)
	if m.Code != CodeRemoved || m.Protocol != protocolMedia {
		t.Fatalf("refused join answered %+v", m)
	}
	// Signalling before a join is refused outright.
	c2 := tn.dial(t)
	c2.send(map[string]any{"type": typePublishOffer, "sdp": "v=0", "tracks": []trackDecl{{TrackID: "x", Source: SourceCamera}}})
	c2.expectEnd(CodeBadMessage, CloseBadMessage)
	// A protocol 1 member may not signal.
	v1, _ := tn.join(t, "1", "v1", "s2")
	v1.send(map[string]any{"type": typePublishOffer, "sdp": "v=0", "tracks": []trackDecl{{TrackID: "x", Source: SourceCamera}}})
	v1.expectEnd(CodeBadMessage, CloseBadMessage)
	if tn.node.rtc.hasRoom("room_1") {
		t.Fatal("media state exists for sockets that never joined with media")
	}
}

// TestMediaShutdownTellsClientsToReconnect: closing a node under a call
// (what SIGTERM does) tells each client node_shutdown, whose documented
// meaning is "connect again, then reconnect", reports every leave, and
// stops the media; the clients rejoin a node that took its place and the
// tracks flow again.
func TestMediaShutdownTellsClientsToReconnect(t *testing.T) {
	tn := newWebRTCNode(t, nil)
	pub, sub, tag, _ := callOf(t, tn, "1")
	tn.node.Close()
	for _, c := range []*rtcClient{pub, sub} {
		m := c.next(typeError, nil)
		if m.Code != CodeNodeShutdown {
			t.Fatalf("%s: %+v", c.name, m)
		}
	}
	left := map[string]string{}
	for len(left) < 2 {
		if l, ok := tn.rec.next(t).(LeaveReport); ok {
			left[l.ParticipantID] = l.Reason
		}
	}
	if left["part_pub1"] != ReasonNodeShutdown || left["part_sub1"] != ReasonNodeShutdown {
		t.Fatalf("leaves %v", left)
	}
	// The replacement node: the clients come back with new sessions and
	// the publisher publishes again.
	tn2 := newWebRTCNode(t, nil)
	sub2 := tn2.joinRTC(t, "sub1", "1", "sub1", "sub1-2", "subscriber", nil)
	pub2 := tn2.joinRTC(t, "pub1", "1", "pub1", "pub1-2", "publisher", nil)
	pub2.publish(SourceCamera)
	if pub2.local[0].tag != tag {
		t.Fatal("tags differ between the runs")
	}
	pump(t, []*rtcClient{pub2}, 1000, "the tracks to flow after the restart", func() bool { return sub2.highest(tag) >= 1000 })
}

// TestMediaOnlyForTheSessionOfRecord: on a node that awaits the control
// plane's answer to each join (as rtcd serve runs its node), real tracks
// reach only sockets the control plane recorded as joined. A socket whose
// join is still unanswered, or was refused, gets no copy of any track; a
// joined subscriber or publisher whose session the control plane closes
// (a newer session was recorded) stops receiving or being forwarded at
// once.
func TestMediaOnlyForTheSessionOfRecord(t *testing.T) {
	tn := newWebRTCNode(t, func(c *NodeConfig) { c.AwaitAdmission = true })
	pub, sub, tag, counter := callOf(t, tn, "1")
	if n := tn.node.rtc.copiesOf("room_1"); n != 1 {
		t.Fatalf("%d copies of the camera, want the admitted subscriber's", n)
	}

	// A join the control plane has not answered yet: no copy while the
	// publisher sends, and none once it is refused.
	waiting := tn.dial(t)
	waiting.send(map[string]any{"type": "join", "media_token": tn.tokenAs("1", "w", "w", "subscriber"), "protocol": 2})
	tn.rec.joinOf(t, "w")
	start := counter
	counter = pump(t, []*rtcClient{pub}, counter, "the call to go on", func() bool { return sub.highest(tag) >= start+20 })
	if n := tn.node.rtc.copiesOf("room_1"); n != 1 {
		t.Fatalf("%d copies of the camera while a join waits for its answer, want 1", n)
	}
	tn.node.CloseSession("room_1", "part_w", "cs_w", CodeParticipantLimitReached)
	if m := waiting.expect(typeError); m.Code != CodeParticipantLimitReached || m.Protocol != protocolMedia {
		t.Fatalf("the refused join was answered %+v", m)
	}
	var ce *websocket.CloseError
	if _, err := waiting.read(); !errors.As(err, &ce) || ce.Code != CloseParticipantLimitReached {
		t.Fatalf("the refused join's socket ended with %v, want close %d", err, CloseParticipantLimitReached)
	}
	if n := tn.node.rtc.copiesOf("room_1"); n != 1 {
		t.Fatalf("%d copies of the camera after a refused join, want 1", n)
	}

	// The control plane closes the subscriber's session: nothing more
	// reaches it.
	tn.node.CloseSession("room_1", "part_sub1", "cs_sub1", CodeSessionSuperseded)
	counter = stalled(t, "after the subscriber's session was closed", pub, counter, sub, tag)
	if n := tn.node.rtc.copiesOf("room_1"); n != 0 {
		t.Fatalf("%d copies of the camera once its only subscriber was closed", n)
	}

	// A newer subscriber gets the camera; then the control plane closes
	// the publisher's session: nothing it sends is forwarded any more.
	sub2 := tn.joinRTC(t, "sub1-2", "1", "sub1", "sub1-2", "subscriber", nil)
	from := counter
	counter = pump(t, []*rtcClient{pub}, counter, "the camera to reach the newer subscriber", func() bool { return sub2.highest(tag) > from })
	tn.node.CloseSession("room_1", "part_pub1", "cs_pub1", CodeSessionSuperseded)
	if m := sub2.next(typeTrackUnsubscribed, nil); m.ParticipantID != "part_pub1" {
		t.Fatalf("track.unsubscribed = %+v", m)
	}
	stalled(t, "after the publisher's session was closed", pub, counter, sub2, tag)
	if tn.node.rtc.hasRoom("room_1") && tn.node.rtc.copiesOf("room_1") != 0 {
		t.Fatal("the closed publisher's track still has copies")
	}
}
