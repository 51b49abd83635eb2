package media

import (
	"sync/atomic"
	"testing"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
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
// gets every packet, and the stalled one holds at most its bounded queue.
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
	for i := range packets {
		up.fanout(layer, &rtp.Packet{Header: rtp.Header{SequenceNumber: uint16(i)}, Payload: []byte{byte(i)}})
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
	if got, want := dStalled.dropped.Load(), uint64(packets-downTrackQueuePackets-1); got != want {
		t.Fatalf("stalled subscriber dropped %d, want %d", got, want)
	}
	if stalled.n.Load() != 0 {
		t.Fatal("a blocked write completed")
	}
}
