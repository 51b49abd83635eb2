package media

import (
	"testing"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/sdp/v3"
	"github.com/pion/transport/v5/vnet"
)

func TestQualityLevel(t *testing.T) {
	for _, c := range []struct {
		s    linkSample
		want string
	}{
		{linkSample{}, QualityUnknown},
		{linkSample{iceDown: true}, QualityLost},
		{linkSample{measured: true, iceDown: true}, QualityLost},
		{linkSample{measured: true}, QualityExcellent},
		{linkSample{measured: true, lossFraction: 0.019, rttMillis: 149, jitterMillis: 29}, QualityExcellent},
		{linkSample{measured: true, lossFraction: 0.02}, QualityGood},
		{linkSample{measured: true, rttMillis: 150}, QualityGood},
		{linkSample{measured: true, jitterMillis: 30}, QualityGood},
		{linkSample{measured: true, lossFraction: 0.079, rttMillis: 299, jitterMillis: 59}, QualityGood},
		{linkSample{measured: true, lossFraction: 0.08}, QualityPoor},
		{linkSample{measured: true, rttMillis: 300}, QualityPoor},
		{linkSample{measured: true, jitterMillis: 60}, QualityPoor},
		{linkSample{measured: true, lossFraction: 1}, QualityPoor},
	} {
		if got := qualityLevel(c.s); got != c.want {
			t.Errorf("%+v: %s, want %s", c.s, got, c.want)
		}
	}
}

// TestQualityStateConfirmsChanges: a new level is told once it held two
// evaluations in a row; lost is told at once; a level equal to the told
// one is never repeated.
func TestQualityStateConfirmsChanges(t *testing.T) {
	var q qualityState
	steps := []struct{ level, told string }{
		{QualityUnknown, ""}, // clients start at unknown: nothing to tell
		{QualityExcellent, ""}, {QualityExcellent, QualityExcellent},
		{QualityPoor, ""}, {QualityExcellent, ""}, // one bad second: nothing
		{QualityPoor, ""}, {QualityPoor, QualityPoor},
		{QualityPoor, ""},
		{QualityLost, QualityLost}, // at once
		{QualityGood, ""}, {QualityGood, QualityGood},
	}
	for i, s := range steps {
		if got := q.observe(s.level); got != s.told {
			t.Fatalf("step %d (%s): told %q, want %q", i, s.level, got, s.told)
		}
	}
}

// TestMediaQualityFollowsLoss: a subscriber whose network starts dropping
// a quarter of its packets is told its quality is poor, and told it is
// good or excellent again once the loss stops.
func TestMediaQualityFollowsLoss(t *testing.T) {
	w := newVNetWorld(t)
	pubNet := w.client(t, "192.0.2.10", nil)
	var loss *vnet.LossFilter
	subNet := w.client(t, "192.0.2.11", func(n *vnet.Net) vnet.NIC {
		f, err := vnet.NewLossFilter(n, 0)
		if err != nil {
			t.Fatal(err)
		}
		loss = f
		return f
	})
	tn := w.start(t)
	sub := tn.joinRTC(t, "sub", "1", "sub", "sub", "subscriber", vnetClientAPI(t, subNet, 500*time.Millisecond))
	pub := tn.joinRTC(t, "pubA", "1", "pubA", "pubA", "publisher", vnetClientAPI(t, pubNet, 500*time.Millisecond))
	pub.publish(SourceCamera)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint32(1); ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				pub.send(i)
			}
		}
	}()
	defer func() { close(stop); <-done }()

	isGood := func(m v2Msg) bool { return m.Quality == QualityExcellent || m.Quality == QualityGood }
	first := sub.next(typeQualityChanged, nil)
	if !isGood(first) {
		t.Fatalf("first quality %+v on a clean network", first)
	}
	if err := loss.SetLossRate(25, true); err != nil {
		t.Fatal(err)
	}
	poor := sub.next(typeQualityChanged, func(m v2Msg) bool { return m.Quality == QualityPoor })
	t.Logf("under 25%% loss: %s loss %.1f%% rtt %.0f ms jitter %.0f ms", poor.Quality, poor.LossPercent, poor.RTTMillis, poor.JitterMillis)
	if err := loss.SetLossRate(0, true); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		m := sub.next(typeQualityChanged, nil)
		t.Logf("after the loss stopped: %s loss %.1f%% rtt %.0f ms jitter %.0f ms", m.Quality, m.LossPercent, m.RTTMillis, m.JitterMillis)
		if isGood(m) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("quality never recovered")
		}
	}
}

// TestMediaActiveSpeaker: of two publishers sending audio levels, the
// louder one is marked speaking in participant.updated; when the other
// gets louder the mark moves.
func TestMediaActiveSpeaker(t *testing.T) {
	tn := newWebRTCNode(t, nil)
	watcher := tn.joinRTC(t, "watcher", "1", "w", "w", "subscriber", nil)
	pubA := tn.joinRTC(t, "pubA", "1", "pubA", "pubA", "publisher", nil)
	pubB := tn.joinRTC(t, "pubB", "1", "pubB", "pubB", "publisher", nil)
	pubA.publish(SourceMicrophone)
	pubB.publish(SourceMicrophone)
	levels := map[*rtcClient]uint8{pubA: 60, pubB: 20} // dBov: B is louder
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint32(1); ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				<-mu
				for c, level := range levels {
					c.sendAudioLevel(i, level)
				}
				mu <- struct{}{}
			}
		}
	}()
	defer func() { close(stop); <-done }()

	speaking := func(who string) func(v2Msg) bool {
		return func(m v2Msg) bool { return m.ParticipantID == who && m.Speaking }
	}
	watcher.next(typeParticipantUpdated, speaking("part_pubB"))
	<-mu
	levels[pubA], levels[pubB] = 10, 60
	mu <- struct{}{}
	watcher.next(typeParticipantUpdated, func(m v2Msg) bool { return m.ParticipantID == "part_pubB" && !m.Speaking })
	watcher.next(typeParticipantUpdated, speaking("part_pubA"))
	// Silence: nobody speaks.
	<-mu
	levels[pubA], levels[pubB] = 127, 127
	mu <- struct{}{}
	watcher.next(typeParticipantUpdated, func(m v2Msg) bool { return m.ParticipantID == "part_pubA" && !m.Speaking })
}

// sendAudioLevel sends one packet on the client's microphone track with an
// RFC 6464 audio level.
func (c *rtcClient) sendAudioLevel(counter uint32, level uint8) {
	for _, l := range c.local {
		if l.source != SourceMicrophone {
			continue
		}
		if l.audioLevelID == 0 {
			for _, tr := range c.pub.GetTransceivers() {
				if s := tr.Sender(); s != nil && s.Track() == l.track {
					for _, ext := range s.GetParameters().HeaderExtensions {
						if ext.URI == sdp.AudioLevelURI {
							l.audioLevelID = uint8(ext.ID)
						}
					}
				}
			}
		}
		l.seq++
		l.ts += 960
		h := rtp.Header{Version: 2, SequenceNumber: l.seq, Timestamp: l.ts}
		if l.audioLevelID != 0 {
			raw, _ := rtp.AudioLevelExtension{Level: level, Voice: level < 127}.Marshal()
			_ = h.SetExtension(l.audioLevelID, raw)
		}
		_ = l.track.WriteRTP(&rtp.Packet{Header: h, Payload: payloadFor(l.tag, counter, 100)})
	}
}
