package media

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"

	"rtcd/metrics"
)

// countingWriter counts packets; while block is open, every write waits on
// it (a subscriber whose connection stalls).
type countingWriter struct {
	n     atomic.Int64
	block chan struct{}
}

func (w *countingWriter) WriteRTP(*rtp.Packet) error {
	if w.block != nil {
		<-w.block
	}
	w.n.Add(1)
	return nil
}

// TestStalledSubscriberDropsOnlyItsOwnPackets: one subscriber's writes
// block forever; the publisher's fan-out never waits, the other subscriber
// gets every packet, and the stalled one holds at most its bounded queue
// (fanout says how many it dropped, for the metrics).
func TestStalledSubscriberDropsOnlyItsOwnPackets(t *testing.T) {
	up := newUpTrack(nil, "cam", SourceCamera, webrtc.RTPCodecTypeVideo, webrtc.RTPCodecParameters{}, nil)
	stalled := &countingWriter{block: make(chan struct{})}
	healthy := &countingWriter{}
	dStalled := newDownTrack(up, nil, stalled, nil)
	dHealthy := newDownTrack(up, nil, healthy, nil)
	up.attach(dStalled)
	up.attach(dHealthy)
	go dStalled.writeLoop()
	go dHealthy.writeLoop()
	defer func() {
		close(stalled.block)
		dStalled.stop()
		dHealthy.stop()
	}()

	const packets = 4 * downTrackQueuePackets
	layer := &upLayer{}
	dropped := 0
	for i := range packets {
		dropped += up.fanout(layer, &rtp.Packet{Header: rtp.Header{SequenceNumber: uint16(i)}, Payload: []byte{byte(i)}})
		if i == 0 {
			waitFor(t, "the stalled writer to take its first packet", func() bool { return len(dStalled.queue) == 0 })
		}
		if i%downTrackQueuePackets == 0 {
			// Let the healthy writer drain, as a real stream's pacing would.
			waitFor(t, "the healthy subscriber to catch up", func() bool { return healthy.n.Load() == int64(i+1) })
		}
	}
	waitFor(t, "the healthy subscriber to get every packet", func() bool { return healthy.n.Load() == packets })
	if dHealthy.dropped.Load() != 0 {
		t.Fatalf("healthy subscriber dropped %d", dHealthy.dropped.Load())
	}
	// The stalled writer holds one packet in its write; the queue the rest.
	if got, want := dStalled.dropped.Load(), uint64(packets-downTrackQueuePackets-1); got != want || dropped != int(want) {
		t.Fatalf("stalled subscriber dropped %d (fanout said %d), want %d", got, dropped, want)
	}
	if stalled.n.Load() != 0 {
		t.Fatal("a blocked write completed")
	}
}

// recordingWriter keeps every packet written.
type recordingWriter struct {
	mu   sync.Mutex
	pkts []rtp.Packet
}

func (w *recordingWriter) WriteRTP(p *rtp.Packet) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pkts = append(w.pkts, *p)
	return nil
}

func (w *recordingWriter) written() []rtp.Packet {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.pkts)
}

// vp8Payload is a VP8 payload: descriptor with S=1 (and a 7-bit picture
// ID), then the payload header's first byte (P=0 for a keyframe), then
// marker bytes naming the layer and a counter.
func vp8Payload(key bool, layer, n byte) []byte {
	p := byte(1)
	if key {
		p = 0
	}
	return []byte{0x90, 0x80, n & 0x7F, p, layer, n}
}

func TestKeyframeDetection(t *testing.T) {
	for _, c := range []struct {
		name    string
		mime    string
		payload []byte
		key     bool
	}{
		{"vp8 key", webrtc.MimeTypeVP8, []byte{0x10, 0x00}, true},
		{"vp8 delta", webrtc.MimeTypeVP8, []byte{0x10, 0x01}, false},
		{"vp8 not a start", webrtc.MimeTypeVP8, []byte{0x00, 0x00}, false},
		{"vp8 later partition", webrtc.MimeTypeVP8, []byte{0x11, 0x00}, false},
		{"vp8 key with picture id", webrtc.MimeTypeVP8, vp8Payload(true, 0, 1), true},
		{"vp8 key with 15-bit picture id, tl0, tid", webrtc.MimeTypeVP8, []byte{0x90, 0xE0, 0x81, 0x02, 0x03, 0x20, 0x00}, true},
		{"vp8 truncated", webrtc.MimeTypeVP8, []byte{0x90, 0x80}, false},
		{"h264 idr", webrtc.MimeTypeH264, []byte{0x65, 0x00}, true},
		{"h264 sps in stap-a", webrtc.MimeTypeH264, []byte{0x78, 0x00, 0x02, 0x67, 0x00, 0x00, 0x01, 0x68}, true},
		{"h264 fu-a start of idr", webrtc.MimeTypeH264, []byte{0x7C, 0x85}, true},
		{"h264 fu-a middle of idr", webrtc.MimeTypeH264, []byte{0x7C, 0x05}, false},
		{"h264 non-idr slice", webrtc.MimeTypeH264, []byte{0x41, 0x00}, false},
	} {
		if key, known := isKeyframeStart(c.mime, c.payload); key != c.key || !known {
			t.Errorf("%s: key %v known %v, want %v", c.name, key, known, c.key)
		}
	}
	if _, known := isKeyframeStart(webrtc.MimeTypeVP9, []byte{0}); known {
		t.Error("VP9 keyframes are not read; known must be false")
	}
}

// simulcastTrack is a VP8 track with three arrived layers.
func simulcastTrack() *upTrack {
	up := newUpTrack(nil, "cam", SourceCamera, webrtc.RTPCodecTypeVideo,
		webrtc.RTPCodecParameters{RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8}}, nil)
	up.setLayers([]string{"q", "h", "f"})
	for i, rid := range []string{"q", "h", "f"} {
		up.layers[i] = &upLayer{index: i, rid: rid}
	}
	return up
}

// TestSimulcastSwitchesOnlyAtKeyframes: a copy starts at the lowest
// layer's first keyframe, moves to a new target only at that layer's
// keyframe, keeps the old layer until then, and the subscriber's sequence
// numbers run on without a gap across the switch. The metrics count the
// switches by direction, the first layer not being one.
func TestSimulcastSwitchesOnlyAtKeyframes(t *testing.T) {
	up := simulcastTrack()
	reg := metrics.NewNode("test")
	up.metrics = reg.Media
	w := &recordingWriter{}
	d := newDownTrack(up, nil, w, nil)
	up.attach(d)
	go d.writeLoop()
	defer d.stop()
	seq := [3]uint16{100, 5000, 9000}
	ts := [3]uint32{1000, 777777, 123}
	send := func(layer int, key bool, n byte) {
		seq[layer]++
		ts[layer] += 3000
		up.fanout(up.layers[layer], &rtp.Packet{Header: rtp.Header{SequenceNumber: seq[layer], Timestamp: ts[layer]}, Payload: vp8Payload(key, byte(layer), n)})
	}
	send(0, false, 1) // before the first keyframe: nothing
	send(2, true, 2)  // not the target layer
	send(0, true, 3)  // start here
	send(0, false, 4)
	waitFor(t, "the first keyframe to be written", func() bool { return len(w.written()) == 2 })
	d.target.Store(2)
	send(2, false, 5) // target, but no keyframe yet
	send(0, false, 6) // still on the current layer
	send(2, true, 7)  // switch here
	send(0, false, 8) // left behind
	send(2, false, 9)
	waitFor(t, "the writer", func() bool { return len(d.queue) == 0 && len(w.written()) >= 5 })
	d.target.Store(1)
	send(1, true, 10) // down to the middle layer
	waitFor(t, "the writer", func() bool { return len(d.queue) == 0 && len(w.written()) >= 6 })
	got := w.written()
	var order []byte
	for i, p := range got {
		order = append(order, p.Payload[5])
		if i > 0 && p.SequenceNumber != got[i-1].SequenceNumber+1 {
			t.Errorf("sequence gap: %d after %d", p.SequenceNumber, got[i-1].SequenceNumber)
		}
		if i > 0 && p.Timestamp-got[i-1].Timestamp != 3000 {
			t.Errorf("timestamp step %d, want 3000", p.Timestamp-got[i-1].Timestamp)
		}
	}
	if !slices.Equal(order, []byte{3, 4, 6, 7, 9, 10}) {
		t.Fatalf("forwarded %v, want [3 4 6 7 9 10]", order)
	}
	if d.current.Load() != 1 || d.switches.Load() != 3 {
		t.Fatalf("current %d after %d switches, want layer 1 after 3", d.current.Load(), d.switches.Load())
	}
	for dir, want := range map[string]float64{metrics.MediaLayerUp: 1, metrics.MediaLayerDown: 1} {
		if got := metricValue(t, reg.Registry, "rtcd_media_layer_switches_total", map[string]string{"direction": dir}); got != want {
			t.Errorf("layer switches %s = %v, want %v", dir, got, want)
		}
	}
}

// TestSimulcastLayerPolicy walks the documented policy: up one layer after
// three clean reports, down at once on 10% loss, and an upgrade that
// failed makes the next one wait twice as long.
func TestSimulcastLayerPolicy(t *testing.T) {
	d := newDownTrack(simulcastTrack(), nil, &recordingWriter{}, nil)
	d.adapt(0) // not started: ignored
	d.adapt(0)
	d.adapt(0)
	if d.target.Load() != 0 {
		t.Fatal("reports before the copy started moved the target")
	}
	d.current.Store(0)
	steps := []struct {
		loss   float64
		target int32
	}{
		{0, 0}, {0.01, 0}, {0.02, 1}, // three clean reports: up
		{0.05, 1},                // between the thresholds: nothing, and the clean run restarts
		{0, 1}, {0, 1}, {0.3, 0}, // loss soon after the upgrade: down, backoff doubles
		{0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 1}, // six clean reports now
		{0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 2}, // still six
		{0, 2}, {0, 2}, {0, 2}, // the top layer: nowhere to go
		{0.5, 1}, {0.5, 0}, {0.5, 0}, // heavy loss: down to the bottom, and no further
	}
	for i, s := range steps {
		d.adapt(s.loss)
		if got := d.target.Load(); got != s.target {
			t.Fatalf("step %d (loss %.2f): target %d, want %d", i, s.loss, got, s.target)
		}
	}
	// A track without simulcast ignores reports.
	plain := newDownTrack(newUpTrack(nil, "mic", SourceMicrophone, webrtc.RTPCodecTypeAudio, webrtc.RTPCodecParameters{}, nil), nil, &recordingWriter{}, nil)
	for range 10 {
		plain.adapt(0)
	}
	if plain.target.Load() != 0 {
		t.Fatal("a single-layer copy changed layers")
	}
}
