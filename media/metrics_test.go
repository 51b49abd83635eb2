package media

import (
	"runtime"
	"testing"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
	"github.com/prometheus/client_golang/prometheus"

	"rtcd/metrics"
)

// metricValue reads the one series of name whose labels are exactly
// labels; -1 when there is none.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
	}
	return -1
}

func kindLabel(kind string) map[string]string { return map[string]string{"kind": kind} }

// TestRTPCountsInBatches: a subscriber copy's writer adds its packets to
// the shared counters once per metricsBatchPackets, and the rest when it
// stops; the published tracks and subscriptions gauges follow attach,
// detach and the track's end.
func TestRTPCountsInBatches(t *testing.T) {
	reg := metrics.NewNode("test")
	r := &rtc{metrics: reg.Media, rooms: map[string]*sfuRoom{}}
	up := newUpTrack(&peer{r: r}, "cam", SourceCamera, webrtc.RTPCodecTypeVideo, webrtc.RTPCodecParameters{}, nil)
	sr := r.roomLocked("room_1")
	sr.tracks[up.id] = up
	up.counts.TrackPublished()
	w := &countingWriter{}
	d := newDownTrack(up, nil, w, nil)
	other := newDownTrack(up, nil, &countingWriter{}, nil)
	up.attach(d)
	up.attach(d) // again: still one copy
	up.attach(other)
	if got := metricValue(t, reg.Registry, "rtcd_media_subscriptions", kindLabel("video")); got != 2 {
		t.Fatalf("subscriptions = %v, want 2", got)
	}
	up.detach(other)
	if got := metricValue(t, reg.Registry, "rtcd_media_subscriptions", kindLabel("video")); got != 1 {
		t.Fatalf("subscriptions after a detach = %v, want 1", got)
	}
	go d.writeLoop()

	const packets = metricsBatchPackets + 36
	payloadBytes := 0
	layer := &upLayer{}
	for i := range packets { // fewer than the copy's queue holds: none dropped
		payload := make([]byte, 100+i)
		payloadBytes += len(payload)
		if dropped := up.fanout(layer, &rtp.Packet{Header: rtp.Header{SequenceNumber: uint16(i)}, Payload: payload}); dropped != 0 {
			t.Fatalf("packet %d dropped by %d copies", i, dropped)
		}
	}
	waitFor(t, "the writer", func() bool { return w.n.Load() == packets })
	forwarded := func() float64 {
		return metricValue(t, reg.Registry, "rtcd_media_forwarded_packets_total", kindLabel("video"))
	}
	if got := forwarded(); got != metricsBatchPackets {
		t.Fatalf("forwarded packets while writing = %v, want one batch (%d)", got, metricsBatchPackets)
	}
	d.stop()
	<-d.exited
	if got := forwarded(); got != packets {
		t.Fatalf("forwarded packets after the copy stopped = %v, want %d", got, packets)
	}
	if got := metricValue(t, reg.Registry, "rtcd_media_forwarded_bytes_total", kindLabel("video")); got != float64(payloadBytes) {
		t.Fatalf("forwarded bytes = %v, want %d", got, payloadBytes)
	}
	if got := metricValue(t, reg.Registry, "rtcd_media_forwarded_packets_total", kindLabel("audio")); got != 0 {
		t.Fatalf("audio forwarded = %v, want 0", got)
	}

	r.mu.Lock()
	r.endTrackLocked(sr, up.id, up)
	r.endTrackLocked(sr, up.id, up) // ended once
	r.mu.Unlock()
	for _, name := range []string{"rtcd_media_published_tracks", "rtcd_media_subscriptions"} {
		if got := metricValue(t, reg.Registry, name, kindLabel("video")); got != 0 {
			t.Fatalf("%s after the track ended = %v, want 0", name, got)
		}
	}
}

// kindTotals adds up, by kind, what the node's own per-track atomics say
// it received and wrote.
type kindTotals struct{ received, forwarded uint64 }

// TestMediaMetricsFollowTheCall: a publisher (microphone and camera) and two
// subscribers hold a real call over loopback. While it runs the gauges say
// two tracks and four copies and the counters move; when the publisher
// leaves, the gauges go back to zero and the packet counters equal, by
// kind, what the node's tracks and copies counted one by one; the bytes
// cover every payload the subscribers received; the keyframe requests
// cover the ones the publisher got.
func TestMediaMetricsFollowTheCall(t *testing.T) {
	reg := metrics.NewNode("test")
	tn := newWebRTCNode(t, func(c *NodeConfig) { c.Metrics = reg.Media })
	value := func(name, kind string) float64 {
		if kind == "" {
			return metricValue(t, reg.Registry, name, nil)
		}
		return metricValue(t, reg.Registry, name, kindLabel(kind))
	}
	subs := []*rtcClient{
		tn.joinRTC(t, "sub1", "1", "sub1", "sub1", "subscriber", nil),
		tn.joinRTC(t, "sub2", "1", "sub2", "sub2", "subscriber", nil),
	}
	pub := tn.joinRTC(t, "pubA", "1", "pubA", "pubA", "publisher", nil)
	pub.publish(SourceMicrophone, SourceCamera)
	pubs := []*rtcClient{pub}
	tags := tagsOf(pubs)
	counter := pump(t, pubs, 1, "both subscribers to receive both tracks", func() bool {
		for _, s := range subs {
			for _, tag := range tags {
				if s.highest(tag) == 0 {
					return false
				}
			}
		}
		return true
	})
	for _, kind := range metrics.MediaKinds {
		waitFor(t, kind+" track published and subscribed twice", func() bool {
			return value("rtcd_media_published_tracks", kind) == 1 && value("rtcd_media_subscriptions", kind) == 2
		})
	}

	// A window of 2 batches per track, all of it received.
	const window = 2 * metricsBatchPackets
	from := counter
	sendWindow(pubs, counter, window)
	for _, s := range subs {
		waitFor(t, s.name+" to receive the window", func() bool {
			for _, tag := range tags {
				if got, _ := s.countIn(tag, from, from+window-1); got != window {
					return false
				}
			}
			return true
		})
	}
	for _, kind := range metrics.MediaKinds {
		for _, name := range []string{"rtcd_media_received_packets_total", "rtcd_media_forwarded_packets_total"} {
			if got := value(name, kind); got < metricsBatchPackets {
				t.Errorf("%s{kind=%q} = %v during the call, want at least a batch", name, kind, got)
			}
		}
	}
	waitFor(t, "the keyframe requests the publisher got to be counted", func() bool {
		got := pub.keyframeRequests.Load()
		return got > 0 && value("rtcd_media_keyframe_requests_total", "") >= float64(got)
	})

	// The node's tracks and copies, to compare with once they are gone.
	tn.node.rtc.mu.Lock()
	var ups []*upTrack
	var downs []*downTrack
	for _, up := range tn.node.rtc.rooms["room_1"].tracks {
		ups = append(ups, up)
		for d := range up.downSet {
			downs = append(downs, d)
		}
	}
	tn.node.rtc.mu.Unlock()
	if len(ups) != 2 || len(downs) != 4 {
		t.Fatalf("the node holds %d tracks and %d copies, want 2 and 4", len(ups), len(downs))
	}

	pub.close()
	for _, kind := range metrics.MediaKinds {
		waitFor(t, kind+" gauges back to zero", func() bool {
			return value("rtcd_media_published_tracks", kind) == 0 && value("rtcd_media_subscriptions", kind) == 0
		})
	}
	own := func() map[string]kindTotals {
		totals := map[string]kindTotals{}
		for _, up := range ups {
			k := totals[up.kind.String()]
			k.received += up.packetsIn.Load()
			totals[up.kind.String()] = k
		}
		for _, d := range downs {
			k := totals[d.up.kind.String()]
			k.forwarded += d.sent.Load()
			totals[d.up.kind.String()] = k
		}
		return totals
	}
	// Each forwarding loop and copy adds its last partial batch as it ends.
	for _, kind := range metrics.MediaKinds {
		waitFor(t, kind+" counters to equal the node's own counts", func() bool {
			k := own()[kind]
			return value("rtcd_media_received_packets_total", kind) == float64(k.received) &&
				value("rtcd_media_forwarded_packets_total", kind) == float64(k.forwarded)
		})
	}

	// Bytes: every distinct payload a subscriber received was written by
	// the node (payloads are 200 to 800 bytes, so the means fall there).
	delivered := map[string]int{}
	for _, s := range subs {
		s.mu.Lock()
		for _, rt := range s.received {
			for _, counters := range rt.byTag {
				for c := range counters {
					delivered[rt.kind] += payloadSize(c)
				}
			}
		}
		s.mu.Unlock()
	}
	for _, kind := range metrics.MediaKinds {
		fwdBytes, fwdPackets := value("rtcd_media_forwarded_bytes_total", kind), value("rtcd_media_forwarded_packets_total", kind)
		inBytes, inPackets := value("rtcd_media_received_bytes_total", kind), value("rtcd_media_received_packets_total", kind)
		if fwdBytes < float64(delivered[kind]) {
			t.Errorf("%s: forwarded %v bytes, but the subscribers received %d", kind, fwdBytes, delivered[kind])
		}
		for name, mean := range map[string]float64{"forwarded": fwdBytes / fwdPackets, "received": inBytes / inPackets} {
			if mean < 200 || mean > 800 {
				t.Errorf("%s: %s %v bytes per packet, want the payloads' 200 to 800", kind, name, mean)
			}
		}
		if got := value("rtcd_media_dropped_packets_total", kind); got != 0 {
			t.Errorf("%s: %v packets dropped on loopback", kind, got)
		}
	}
	if got := value("rtcd_media_turn_allocations", ""); got != 0 {
		t.Errorf("TURN allocations = %v on a node without TURN", got)
	}
}

// BenchmarkFanoutCounted: one track fanned out to 8 copies whose writers
// discard, with and without the node's metrics, so the cost of counting
// on the forwarding path (the copies' writers tally every packet) is
// measured rather than assumed.
func BenchmarkFanoutCounted(b *testing.B) {
	for _, counted := range []bool{false, true} {
		name := "metrics=off"
		if counted {
			name = "metrics=on"
		}
		b.Run(name, func(b *testing.B) {
			r := &rtc{rooms: map[string]*sfuRoom{}}
			if counted {
				r.metrics = metrics.NewNode("bench").Media
			}
			up := newUpTrack(&peer{r: r}, "cam", SourceCamera, webrtc.RTPCodecTypeVideo, webrtc.RTPCodecParameters{}, nil)
			type copyOf struct {
				d *downTrack
				w *countingWriter
			}
			var copies []copyOf
			for range 8 {
				c := copyOf{w: &countingWriter{}}
				c.d = newDownTrack(up, nil, c.w, nil)
				up.attach(c.d)
				copies = append(copies, c)
				go c.d.writeLoop()
			}
			// done: every packet written or dropped by every copy.
			done := func(n int) bool {
				for _, c := range copies {
					if c.w.n.Load()+int64(c.d.dropped.Load()) < int64(n) {
						return false
					}
				}
				return true
			}
			layer := &upLayer{}
			pkt := &rtp.Packet{Payload: make([]byte, 1000)}
			b.ResetTimer()
			for i := range b.N {
				pkt.SequenceNumber = uint16(i)
				up.fanout(layer, pkt)
				if i%64 == 63 { // pace like a stream: let the writers catch up
					for !done(i + 1) {
						runtime.Gosched()
					}
				}
			}
			for !done(b.N) {
				runtime.Gosched()
			}
			b.StopTimer()
			for _, c := range copies {
				c.d.stop()
			}
		})
	}
}
