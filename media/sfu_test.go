package media

import (
	"net"
	"testing"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/webrtc/v4"
)

// pump sends packets from every publisher, one counter at a time, until
// done holds; it returns the next unused counter.
func pump(t *testing.T, pubs []*rtcClient, counter uint32, what string, done func() bool) uint32 {
	t.Helper()
	deadline := time.Now().Add(3 * testWaitSeconds * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		for _, p := range pubs {
			p.send(counter)
		}
		counter++
		time.Sleep(10 * time.Millisecond)
	}
	return counter
}

// sendWindow sends counters [from, from+n) from every publisher, paced like
// a 100 packets/s stream per track.
func sendWindow(pubs []*rtcClient, from, n uint32) {
	for c := from; c < from+n; c++ {
		for _, p := range pubs {
			p.send(c)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func tagsOf(pubs []*rtcClient) []uint32 {
	var tags []uint32
	for _, p := range pubs {
		for _, l := range p.local {
			tags = append(tags, l.tag)
		}
	}
	return tags
}

// TestMediaForwardsEveryTrackToEverySubscriber: two publishers (microphone
// and camera each) and three subscribers in one room. Every subscriber
// receives every published track, every packet of a measured window, each
// payload equal byte for byte to what was sent; a subscriber that stops
// reading does not cost the others a packet; and when a publisher leaves
// every subscriber is told its tracks are unsubscribed.
func TestMediaForwardsEveryTrackToEverySubscriber(t *testing.T) {
	tn := newWebRTCNode(t, nil)
	var subs []*rtcClient
	for _, name := range []string{"sub1", "sub2", "sub3"} {
		subs = append(subs, tn.joinRTC(t, name, "1", name, name, "subscriber", nil))
	}
	pubA := tn.joinRTC(t, "pubA", "1", "pubA", "pubA", "publisher", nil)
	pubB := tn.joinRTC(t, "pubB", "1", "pubB", "pubB", "publisher", nil)
	pubs := []*rtcClient{pubA, pubB}
	for _, p := range pubs {
		p.publish(SourceMicrophone, SourceCamera)
	}
	// A track is published once its media arrives.
	tags := tagsOf(pubs)
	counter := pump(t, pubs, 1, "every subscriber to receive every track", func() bool {
		for _, s := range subs {
			for _, tag := range tags {
				if s.highest(tag) == 0 {
					return false
				}
			}
		}
		return true
	})
	// The publisher hears its own tracks accepted, the others see them.
	for _, c := range append(subs, pubs...) {
		seen := map[string]bool{}
		for len(seen) < 2 {
			m := c.next(typeParticipantUpdated, func(m v2Msg) bool { return len(m.Tracks) == 2 })
			if m.Tracks[0].Source != SourceCamera || m.Tracks[0].Kind != "video" || m.Tracks[1].Source != SourceMicrophone || m.Tracks[1].Kind != "audio" {
				t.Fatalf("%s sees %s's tracks as %+v", c.name, m.ParticipantID, m.Tracks)
			}
			seen[m.ParticipantID] = true
		}
		if !seen["part_pubA"] || !seen["part_pubB"] {
			t.Fatalf("%s saw tracks of %v", c.name, seen)
		}
	}

	// A measured window: every packet reaches every subscriber intact.
	const window = 100
	from := counter + 10
	sendWindow(pubs, counter, 10+window)
	counter += 10 + window
	for _, s := range subs {
		waitFor(t, s.name+" to receive the whole window", func() bool {
			for _, tag := range tags {
				if got, _ := s.countIn(tag, from, from+window-1); got != window {
					return false
				}
			}
			return true
		})
		for _, tag := range tags {
			if _, bad := s.countIn(tag, from, from+window-1); bad != 0 {
				t.Fatalf("%s: %d payloads differ from what was sent", s.name, bad)
			}
		}
		s.mu.Lock()
		if len(s.received) != 4 {
			t.Fatalf("%s receives %d tracks, want 4", s.name, len(s.received))
		}
		for id, rt := range s.received {
			if rt.publisher != "part_pubA" && rt.publisher != "part_pubB" {
				t.Fatalf("%s: track %s from %q", s.name, id, rt.publisher)
			}
		}
		s.mu.Unlock()
	}

	// sub3 stops reading; the two others still get every packet.
	subs[2].pause()
	from = counter
	sendWindow(pubs, counter, window)
	counter += window
	for _, s := range subs[:2] {
		waitFor(t, s.name+" to receive the window sent while sub3 stalled", func() bool {
			for _, tag := range tags {
				if got, _ := s.countIn(tag, from, from+window-1); got != window {
					return false
				}
			}
			return true
		})
	}
	subs[2].resume()

	// pubA leaves: its two tracks are unsubscribed everywhere, with the
	// reason, and the participant is gone.
	pubA.write(map[string]any{"type": typeLeave})
	for _, s := range subs {
		gone, left := map[string]bool{}, false
		for len(gone) < 2 || !left {
			m := s.next("", func(m v2Msg) bool { return m.Type == typeTrackUnsubscribed || m.Type == typeParticipantLeft })
			if m.ParticipantID != "part_pubA" {
				t.Fatalf("%s: %+v", s.name, m)
			}
			if m.Type == typeParticipantLeft {
				left = true
				continue
			}
			if m.Reason != UnsubscribedUnpublished {
				t.Fatalf("%s: %+v", s.name, m)
			}
			gone[m.TrackID] = true
		}
	}
	// pubB still flows to everyone.
	highest := subs[0].highest(tags[2])
	pump(t, pubs[1:], counter, "pubB to keep flowing", func() bool {
		for _, s := range subs {
			if s.highest(tags[2]) <= highest {
				return false
			}
		}
		return true
	})
}

// TestMediaRefusesWhatTheRoleMayNotPublish: a subscriber's camera is
// refused with track.refused and reaches nobody; its socket stays up.
func TestMediaRefusesWhatTheRoleMayNotPublish(t *testing.T) {
	tn := newWebRTCNode(t, nil)
	watcher := tn.joinRTC(t, "watcher", "1", "w", "w", "publisher", nil)
	sneaky := tn.joinRTC(t, "sneaky", "1", "s", "s", "subscriber", nil)
	sneaky.publish(SourceCamera)
	m := sneaky.next(typeTrackRefused, nil)
	if m.Code != CodePublishNotAllowed || m.Source != SourceCamera || m.TrackID != "sneaky-camera" || m.Message == "" {
		t.Fatalf("track.refused = %+v", m)
	}
	// The refused track is sent for a while; nothing reaches the watcher.
	for i := uint32(1); i < 50; i++ {
		sneaky.send(i)
		time.Sleep(5 * time.Millisecond)
	}
	sneaky.write(map[string]any{"type": typePing, "ts": 7})
	watcher.write(map[string]any{"type": typePing, "ts": 8})
	time.Sleep(200 * time.Millisecond)
	watcher.mu.Lock()
	n := len(watcher.received)
	watcher.mu.Unlock()
	if n != 0 {
		t.Fatalf("watcher receives %d tracks from a refused publisher", n)
	}
}

// TestMediaUnsubscribeAndResubscribe: a client drops one track and gets it
// back.
func TestMediaUnsubscribeAndResubscribe(t *testing.T) {
	tn := newWebRTCNode(t, nil)
	sub := tn.joinRTC(t, "sub", "1", "sub", "sub", "subscriber", nil)
	pub := tn.joinRTC(t, "pubA", "1", "pubA", "pubA", "publisher", nil)
	pub.publish(SourceCamera)
	tag := pub.local[0].tag
	counter := pump(t, []*rtcClient{pub}, 1, "the first packet", func() bool { return sub.highest(tag) > 0 })
	up := sub.next(typeParticipantUpdated, func(m v2Msg) bool { return len(m.Tracks) == 1 })
	trackID := up.Tracks[0].TrackID

	sub.write(map[string]any{"type": typeTrackUnsubscribe, "track_id": trackID})
	m := sub.next(typeTrackUnsubscribed, nil)
	if m.TrackID != trackID || m.Reason != UnsubscribedByClient || m.ParticipantID != "part_pubA" {
		t.Fatalf("track.unsubscribed = %+v", m)
	}
	// Nothing arrives while unsubscribed.
	before := sub.highest(tag)
	sendWindow([]*rtcClient{pub}, counter, 30)
	counter += 30
	time.Sleep(100 * time.Millisecond)
	if after := sub.highest(tag); after != before {
		t.Fatalf("received up to %d after unsubscribing at %d", after, before)
	}

	sub.write(map[string]any{"type": typeTrackSubscribe, "track_id": trackID})
	pump(t, []*rtcClient{pub}, counter, "packets after resubscribing", func() bool { return sub.highest(tag) > counter })
}

// TestMediaRelaysKeyframeRequests: a new subscriber makes the node ask the
// publisher for a keyframe, a subscriber's PLI is relayed, and a burst of
// PLIs reaches the publisher spaced at least keyframeRequestIntervalMillis
// apart, none lost: at most two requests, the first within an interval.
func TestMediaRelaysKeyframeRequests(t *testing.T) {
	tn := newWebRTCNode(t, nil)
	pub := tn.joinRTC(t, "pubA", "1", "pubA", "pubA", "publisher", nil)
	pub.publish(SourceCamera)
	tag := pub.local[0].tag
	pump(t, []*rtcClient{pub}, 1, "the track to be published", func() bool { return len(pub.events) > 0 })
	before := pub.keyframeRequests.Load()
	sub := tn.joinRTC(t, "sub", "1", "sub", "sub", "subscriber", nil)
	counter := pump(t, []*rtcClient{pub}, 100, "the subscriber's first packet", func() bool { return sub.highest(tag) > 0 })
	waitFor(t, "the keyframe request for the new subscriber", func() bool { return pub.keyframeRequests.Load() > before })

	// Let the requests of the join settle, then a burst of PLIs.
	counter = pump(t, []*rtcClient{pub}, counter, "a quiet interval", func() bool {
		pub.mu.Lock()
		defer pub.mu.Unlock()
		return time.Since(pub.keyframeTimes[len(pub.keyframeTimes)-1]) > 2*keyframeRequestIntervalMillis*time.Millisecond
	})
	sub.mu.Lock()
	var ssrc uint32
	for _, r := range sub.remotes {
		ssrc = uint32(r.SSRC())
	}
	sub.mu.Unlock()
	before = pub.keyframeRequests.Load()
	burstAt := time.Now()
	for range 10 {
		if err := sub.sub.WriteRTCP([]rtcp.Packet{&rtcp.PictureLossIndication{MediaSSRC: ssrc}}); err != nil {
			t.Fatal(err)
		}
	}
	pump(t, []*rtcClient{pub}, counter, "the relayed keyframe request", func() bool {
		return time.Since(burstAt) > 3*keyframeRequestIntervalMillis*time.Millisecond
	})
	pub.mu.Lock()
	times := pub.keyframeTimes[before:]
	pub.mu.Unlock()
	if len(times) < 1 || len(times) > 2 {
		t.Fatalf("a burst of 10 PLIs reached the publisher as %d requests, want 1 or 2", len(times))
	}
	if first := times[0].Sub(burstAt); first > keyframeRequestIntervalMillis*time.Millisecond+200*time.Millisecond {
		t.Fatalf("the first request came %v after the burst", first)
	}
	if len(times) == 2 && times[1].Sub(times[0]) < keyframeRequestIntervalMillis*time.Millisecond*9/10 {
		t.Fatalf("two requests %v apart", times[1].Sub(times[0]))
	}
}

// TestMediaICEOverTCPWhenUDPIsBlocked: clients that cannot use UDP at all
// (their ICE agents gather TCP only) publish and receive over the node's
// ICE-TCP port.
func TestMediaICEOverTCPWhenUDPIsBlocked(t *testing.T) {
	tn := newWebRTCNode(t, nil)
	tcpOnly := testClientAPI(t, func(se *webrtc.SettingEngine) {
		se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeTCP4})
	})
	sub := tn.joinRTC(t, "sub", "1", "sub", "sub", "subscriber", tcpOnly)
	pub := tn.joinRTC(t, "pubA", "1", "pubA", "pubA", "publisher", tcpOnly)
	pub.publish(SourceCamera)
	tag := pub.local[0].tag
	counter := pump(t, []*rtcClient{pub}, 1, "media over ICE-TCP", func() bool { return sub.highest(tag) > 0 })
	sendWindow([]*rtcClient{pub}, counter, 50)
	waitFor(t, "a window over ICE-TCP", func() bool { got, _ := sub.countIn(tag, counter, counter+49); return got == 50 })
	for _, pc := range []*webrtc.PeerConnection{pub.pub, sub.sub} {
		pair, err := pc.SCTP().Transport().ICETransport().GetSelectedCandidatePair()
		if err != nil || pair == nil || pair.Local.Protocol != webrtc.ICEProtocolTCP {
			t.Fatalf("selected pair %v (%v), want TCP", pair, err)
		}
	}
}

func TestOpenWebRTCRefusesBadOptions(t *testing.T) {
	lo := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}
	for _, o := range []NetworkOptions{{NodeIP: "not-an-ip"}, {UDPPort: -1}, {UDPPort: 70000}, {TCPPort: -2}} {
		if _, err := OpenWebRTC(o, lo, true); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	cfg, err := OpenWebRTC(NetworkOptions{TCPPort: DisabledICETCP}, lo, true)
	if err != nil {
		t.Fatal(err)
	}
	defer cfg.UDP.Close()
	if cfg.TCP != nil || !cfg.LoopbackCandidates {
		t.Fatalf("config %+v: want no ICE-TCP, loopback candidates", cfg)
	}
}
