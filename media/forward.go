package media

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
)

// upTrack is one track a participant publishes: one or more layers
// (simulcast encodings) of the same source, each read by its own goroutine
// and fanned out, undecoded, to the down tracks subscribed to it.
type upTrack struct {
	id        string // the node's ID, unique in the room; the msid track of every copy
	clientID  string // the publisher's own track ID from its offer
	source    string
	kind      webrtc.RTPCodecType
	publisher *peer
	pc        *webrtc.PeerConnection // the publisher's publish connection, for keyframe requests

	codec webrtc.RTPCodecParameters // set before the track is published, then fixed

	mu     sync.Mutex
	layers []*upLayer // by quality, lowest first

	// Guarded by rtc.mu.
	ended   bool
	downSet map[*downTrack]struct{}
	// downs is the snapshot of downSet the forwarding loops read without a
	// lock; rewritten under rtc.mu on every attach and detach.
	downs atomic.Pointer[[]*downTrack]

	packetsIn atomic.Uint64
}

// upLayer is one encoding of an upTrack.
type upLayer struct {
	rid    string
	ssrc   uint32
	remote *webrtc.TrackRemote
	// lastKeyframeRequestNanos rate-limits keyframe requests for this layer
	// (keyframeRequestIntervalMillis).
	lastKeyframeRequestNanos atomic.Int64
}

func newTrackID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "tr_" + hex.EncodeToString(b[:])
}

func newUpTrack(p *peer, clientID, source string, kind webrtc.RTPCodecType, codec webrtc.RTPCodecParameters, pc *webrtc.PeerConnection) *upTrack {
	u := &upTrack{id: newTrackID(), clientID: clientID, source: source, kind: kind, publisher: p, pc: pc, codec: codec,
		downSet: make(map[*downTrack]struct{})}
	empty := []*downTrack{}
	u.downs.Store(&empty)
	return u
}

func (u *upTrack) info() TrackInfo {
	u.mu.Lock()
	defer u.mu.Unlock()
	return TrackInfo{TrackID: u.id, Source: u.source, Kind: u.kind.String(), Layers: len(u.layers)}
}

// attach and detach change who receives the track. Call with rtc.mu held.
func (u *upTrack) attach(d *downTrack) {
	u.downSet[d] = struct{}{}
	u.publishDowns()
}

func (u *upTrack) detach(d *downTrack) {
	if _, ok := u.downSet[d]; !ok {
		return
	}
	delete(u.downSet, d)
	u.publishDowns()
}

func (u *upTrack) publishDowns() {
	ds := make([]*downTrack, 0, len(u.downSet))
	for d := range u.downSet {
		ds = append(ds, d)
	}
	u.downs.Store(&ds)
}

// addLayer records a new encoding of the track and returns its index.
func (u *upTrack) addLayer(remote *webrtc.TrackRemote) *upLayer {
	l := &upLayer{rid: remote.RID(), ssrc: uint32(remote.SSRC()), remote: remote}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.layers = append(u.layers, l)
	return l
}

// requestKeyframe asks the publisher for a keyframe on layer l, at most
// once per keyframeRequestIntervalMillis per layer.
func (u *upTrack) requestKeyframe(l *upLayer) {
	if u.kind != webrtc.RTPCodecTypeVideo || l == nil {
		return
	}
	now := time.Now().UnixNano()
	last := l.lastKeyframeRequestNanos.Load()
	if now-last < keyframeRequestIntervalMillis*int64(time.Millisecond) || !l.lastKeyframeRequestNanos.CompareAndSwap(last, now) {
		return
	}
	_ = u.pc.WriteRTCP([]rtcp.Packet{&rtcp.PictureLossIndication{MediaSSRC: l.ssrc}})
}

// firstLayer returns the lowest layer, or nil before any arrived.
func (u *upTrack) firstLayer() *upLayer {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.layers) == 0 {
		return nil
	}
	return u.layers[0]
}

// forward reads layer l until the publisher stops sending it and hands
// every packet to each attached down track. It never waits on a
// subscriber: enqueue drops for that subscriber alone when its queue is
// full. It returns when the layer's stream ends.
func (u *upTrack) forward(l *upLayer) {
	for {
		buf := make([]byte, rtpPacketBytes)
		n, _, err := l.remote.Read(buf)
		if err != nil {
			return
		}
		pkt := &rtp.Packet{}
		if pkt.Unmarshal(buf[:n]) != nil {
			continue
		}
		// Header extensions are negotiated per connection, so the
		// publisher's extension IDs mean nothing on a subscriber's
		// connection; each subscriber's interceptors add their own.
		pkt.Extension = false
		pkt.Extensions = nil
		u.fanout(l, pkt)
	}
}

// fanout hands pkt to every attached down track without waiting on any.
func (u *upTrack) fanout(l *upLayer, pkt *rtp.Packet) {
	u.packetsIn.Add(1)
	for _, d := range *u.downs.Load() {
		d.enqueue(l, pkt)
	}
}

// rtpWriter writes one packet to a subscriber (a pion local track; a test
// double in unit tests).
type rtpWriter interface {
	WriteRTP(*rtp.Packet) error
}

// downTrack is one subscriber's copy of one upTrack: a bounded queue and
// the goroutine that writes it to the subscriber's connection, so a
// subscriber whose writes stall loses its own packets and delays nobody.
type downTrack struct {
	up     *upTrack
	sub    *peer
	w      rtpWriter
	sender *webrtc.RTPSender // nil in unit tests

	queue    chan queuedPacket
	done     chan struct{}
	stopOnce sync.Once
	exited   chan struct{}

	sent    atomic.Uint64
	dropped atomic.Uint64
}

type queuedPacket struct {
	layer *upLayer
	pkt   *rtp.Packet
}

func newDownTrack(up *upTrack, sub *peer, w rtpWriter, sender *webrtc.RTPSender) *downTrack {
	return &downTrack{up: up, sub: sub, w: w, sender: sender,
		queue: make(chan queuedPacket, downTrackQueuePackets), done: make(chan struct{}), exited: make(chan struct{})}
}

// enqueue queues pkt for the subscriber, or drops it when the queue is
// full. It never blocks: it runs on the publisher's forwarding loop.
func (d *downTrack) enqueue(l *upLayer, pkt *rtp.Packet) {
	select {
	case d.queue <- queuedPacket{layer: l, pkt: pkt}:
	default:
		d.dropped.Add(1)
	}
}

// stop ends the writer; packets still queued are never written. Safe to
// call more than once and from any goroutine.
func (d *downTrack) stop() {
	d.stopOnce.Do(func() { close(d.done) })
}

// writeLoop writes queued packets until stop. The packet is shared by
// every subscriber of the track, so it is copied (header only; the payload
// is never written to) before pion rewrites its SSRC and payload type.
func (d *downTrack) writeLoop() {
	defer close(d.exited)
	for {
		select {
		case <-d.done:
			return
		case q := <-d.queue:
			out := *q.pkt
			if err := d.w.WriteRTP(&out); err != nil && errors.Is(err, io.ErrClosedPipe) {
				return
			}
			d.sent.Add(1)
		}
	}
}

// readRTCP reads the subscriber's RTCP for this track (pion's interceptors
// have already answered NACKs from their send buffer) and relays keyframe
// requests to the publisher. It ends when the sender stops.
func (d *downTrack) readRTCP() {
	for {
		pkts, _, err := d.sender.ReadRTCP()
		if err != nil {
			return
		}
		for _, p := range pkts {
			switch p.(type) {
			case *rtcp.PictureLossIndication, *rtcp.FullIntraRequest:
				d.up.requestKeyframe(d.up.firstLayer())
			}
		}
	}
}
