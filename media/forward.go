package media

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
	"rtcd/metrics"
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
	metrics   *metrics.Media         // the node's; nil counts nothing
	counts    *metrics.MediaKind     // metrics of the track's kind, resolved once

	codec webrtc.RTPCodecParameters // set before the track is published, then fixed

	mu        sync.Mutex
	layerRIDs []string   // a simulcast track's RIDs, lowest quality first; nil without simulcast
	layers    []*upLayer // by quality, lowest first; nil until that encoding arrives

	// Guarded by rtc.mu.
	ended   bool
	downSet map[*downTrack]struct{}
	// downs is the snapshot of downSet the forwarding loops read without a
	// lock; rewritten under rtc.mu on every attach and detach.
	downs atomic.Pointer[[]*downTrack]

	packetsIn atomic.Uint64

	// Audio loudness since the last speaker evaluation (noteAudioLevel).
	loudnessSum atomic.Uint64
	loudPackets atomic.Uint64
}

// upLayer is one encoding of an upTrack.
type upLayer struct {
	index  int // position in upTrack.layers: 0 is the lowest quality
	rid    string
	ssrc   uint32
	remote *webrtc.TrackRemote
	// lastKeyframeRequestNanos rate-limits keyframe requests for this layer
	// (keyframeRequestIntervalMillis).
	lastKeyframeRequestNanos atomic.Int64
	// audioLevelExtID is the audio level header extension's ID on the
	// publisher's connection; 0 when not negotiated.
	audioLevelExtID         uint8
	keyframeRequestDeferred atomic.Bool // a request waits for the interval's end
}

func newTrackID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "tr_" + hex.EncodeToString(b[:])
}

func newUpTrack(p *peer, clientID, source string, kind webrtc.RTPCodecType, codec webrtc.RTPCodecParameters, pc *webrtc.PeerConnection) *upTrack {
	u := &upTrack{id: newTrackID(), clientID: clientID, source: source, kind: kind, publisher: p, pc: pc, codec: codec,
		downSet: make(map[*downTrack]struct{})}
	if p != nil && p.r != nil {
		u.metrics = p.r.metrics
		u.counts = u.metrics.Kind(kind.String())
	}
	empty := []*downTrack{}
	u.downs.Store(&empty)
	return u
}

func (u *upTrack) info() TrackInfo {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, l := range u.layers {
		if l != nil {
			n++
		}
	}
	return TrackInfo{TrackID: u.id, Source: u.source, Kind: u.kind.String(), Layers: n}
}

// attach and detach change who receives the track, and the subscriptions
// gauge with it (endTrackLocked takes every copy away at once). Call with
// rtc.mu held.
func (u *upTrack) attach(d *downTrack) {
	if _, ok := u.downSet[d]; ok {
		return
	}
	u.downSet[d] = struct{}{}
	u.counts.Subscribed()
	u.publishDowns()
}

func (u *upTrack) detach(d *downTrack) {
	if _, ok := u.downSet[d]; !ok {
		return
	}
	delete(u.downSet, d)
	u.counts.Unsubscribed(1)
	u.publishDowns()
}

func (u *upTrack) publishDowns() {
	ds := make([]*downTrack, 0, len(u.downSet))
	for d := range u.downSet {
		ds = append(ds, d)
	}
	u.downs.Store(&ds)
}

// setLayers records a simulcast track's declared RIDs, lowest first.
// Called once, before the track is published.
func (u *upTrack) setLayers(rids []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(rids) > 1 {
		u.layerRIDs = rids
		u.layers = make([]*upLayer, len(rids))
	} else {
		u.layers = make([]*upLayer, 1)
	}
}

// simulcast says whether the track has several layers to choose from.
func (u *upTrack) simulcast() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.layerRIDs) > 1
}

// addLayer records a newly arrived encoding, or returns nil for one the
// publisher did not declare.
func (u *upTrack) addLayer(remote *webrtc.TrackRemote) *upLayer {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.layers) == 0 {
		u.layers = make([]*upLayer, 1)
	}
	index := 0
	if len(u.layerRIDs) > 1 {
		index = slices.Index(u.layerRIDs, remote.RID())
		if index < 0 {
			return nil
		}
	}
	l := &upLayer{index: index, rid: remote.RID(), ssrc: uint32(remote.SSRC()), remote: remote}
	u.layers[index] = l
	return l
}

// layerAt returns layer i, or nil when it has not arrived (or i is out of
// range).
func (u *upTrack) layerAt(i int) *upLayer {
	u.mu.Lock()
	defer u.mu.Unlock()
	if i < 0 || i >= len(u.layers) {
		return nil
	}
	return u.layers[i]
}

// layerCount is how many layers the track has (declared, arrived or not).
func (u *upTrack) layerCount() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.layers)
}

// requestKeyframe asks the publisher for a keyframe on layer l, at most
// once per keyframeRequestIntervalMillis per layer. A request inside the
// interval is not lost: one deferred request, sent when the interval ends,
// stands for all of them (a subscriber whose connection comes up just
// after it subscribed needs the second keyframe as much as the first).
func (u *upTrack) requestKeyframe(l *upLayer) {
	if u.kind != webrtc.RTPCodecTypeVideo || l == nil || u.pc == nil {
		return
	}
	interval := keyframeRequestIntervalMillis * int64(time.Millisecond)
	now := time.Now().UnixNano()
	last := l.lastKeyframeRequestNanos.Load()
	if now-last >= interval && l.lastKeyframeRequestNanos.CompareAndSwap(last, now) {
		if u.pc.WriteRTCP([]rtcp.Packet{&rtcp.PictureLossIndication{MediaSSRC: l.ssrc}}) == nil {
			u.metrics.KeyframeRequested()
		}
		return
	}
	if l.keyframeRequestDeferred.CompareAndSwap(false, true) {
		time.AfterFunc(time.Duration(max(interval-(now-last), 0)), func() {
			l.keyframeRequestDeferred.Store(false)
			u.requestKeyframe(l)
		})
	}
}

// metricsBatchPackets is how many packets a forwarding or writing
// goroutine tallies in plain integers before it adds them to the node's
// shared counters, and it adds what is left when it ends: the hot loops
// touch the counters (atomics every goroutine shares) once per batch, not
// per packet. The counters lag by at most this many packets per layer and
// per subscriber copy, about a second of audio.
const metricsBatchPackets = 64

// rtpTally is one goroutine's packets not counted in the metrics yet.
type rtpTally struct{ packets, bytes, dropped int }

// forward reads layer l until the publisher stops sending it and hands
// every packet to each attached down track. It never waits on a
// subscriber: enqueue drops for that subscriber alone when its queue is
// full. It returns when the layer's stream ends.
func (u *upTrack) forward(l *upLayer) {
	var in rtpTally
	defer func() { u.counts.Received(in.packets, in.bytes, in.dropped) }()
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
		if u.kind == webrtc.RTPCodecTypeAudio {
			u.noteAudioLevel(l, pkt)
		}
		// Header extensions are negotiated per connection, so the
		// publisher's extension IDs mean nothing on a subscriber's
		// connection; each subscriber's interceptors add their own.
		pkt.Extension = false
		pkt.Extensions = nil
		in.packets++
		in.bytes += len(pkt.Payload)
		in.dropped += u.fanout(l, pkt)
		if in.packets == metricsBatchPackets {
			u.counts.Received(in.packets, in.bytes, in.dropped)
			in = rtpTally{}
		}
	}
}

// fanout hands pkt to every attached down track without waiting on any,
// and returns how many of them dropped it (their queue was full).
func (u *upTrack) fanout(l *upLayer, pkt *rtp.Packet) (dropped int) {
	u.packetsIn.Add(1)
	for _, d := range *u.downs.Load() {
		if !d.enqueue(l, pkt) {
			dropped++
		}
	}
	return dropped
}

// rtpWriter writes one packet to a subscriber (a pion local track; a test
// double in unit tests).
type rtpWriter interface {
	WriteRTP(*rtp.Packet) error
}

// downTrack is one subscriber's copy of one upTrack: a bounded queue and
// the goroutine that writes it to the subscriber's connection, so a
// subscriber whose writes stall loses its own packets and delays nobody.
//
// For a simulcast track it forwards one layer at a time (see
// docs/media-protocol.md, Simulcast): target is the layer the policy wants
// (adapt), current the one being forwarded; the writer moves current to
// target only at a keyframe of the target layer, rewriting sequence numbers
// and timestamps so the subscriber sees one continuous stream.
type downTrack struct {
	up     *upTrack
	sub    *peer
	w      rtpWriter
	sender *webrtc.RTPSender // nil in unit tests
	ssrc   uint32            // the SSRC the subscriber sees, for its receiver reports

	queue    chan queuedPacket
	done     chan struct{}
	stopOnce sync.Once
	exited   chan struct{}

	sent    atomic.Uint64
	dropped atomic.Uint64
	// nackedAt remembers when each sequence number the subscriber
	// reported missing (NACK) was first reported, and nackedNew counts
	// first reports since connection quality last looked (takeNacked):
	// pion's NACK generator repeats a request until the packet comes or
	// leaves its window, so counting requests would count one loss many
	// times.
	nackMu    sync.Mutex
	nackedAt  map[uint16]int64
	nackedNew int
	switches  atomic.Uint64 // layer changes made (simulcast)

	simulcast bool
	current   atomic.Int32 // layer being forwarded; -1 before the first keyframe
	target    atomic.Int32 // layer the policy wants

	// Owned by writeLoop.
	started   bool
	lastSeq   uint16
	lastTS    uint32
	seqOffset uint16
	tsOffset  uint32

	// Owned by the RTCP reader (adapt).
	cleanReports   int // consecutive receiver reports at or under layerCleanLossFraction
	reportsOnLayer int // receiver reports since the last upgrade
	upgradeBackoff int // multiplies layerUpgradeCleanReports after an upgrade failed
}

type queuedPacket struct {
	layer *upLayer
	pkt   *rtp.Packet
}

func newDownTrack(up *upTrack, sub *peer, w rtpWriter, sender *webrtc.RTPSender) *downTrack {
	d := &downTrack{up: up, sub: sub, w: w, sender: sender, simulcast: up.simulcast(), upgradeBackoff: 1, nackedAt: make(map[uint16]int64),
		queue: make(chan queuedPacket, downTrackQueuePackets), done: make(chan struct{}), exited: make(chan struct{})}
	if d.simulcast {
		d.current.Store(-1)
	}
	return d
}

// enqueue queues pkt for the subscriber, or drops it when the queue is
// full (and returns false). It never blocks: it runs on the publisher's
// forwarding loop. A simulcast copy takes only its current and target
// layers (a packet of another layer is not wanted, not dropped).
func (d *downTrack) enqueue(l *upLayer, pkt *rtp.Packet) bool {
	if d.simulcast {
		if i := int32(l.index); i != d.current.Load() && i != d.target.Load() {
			return true
		}
	}
	select {
	case d.queue <- queuedPacket{layer: l, pkt: pkt}:
		return true
	default:
		d.dropped.Add(1)
		return false
	}
}

// NACK memory: how long a reported sequence number is remembered (longer
// than pion's NACK generator keeps asking for one), and how many at most.
const (
	nackMemorySeconds = 10
	maxNackedSeqs     = 4096
)

// noteNack records the packets a NACK reports missing.
func (d *downTrack) noteNack(n *rtcp.TransportLayerNack) {
	now := time.Now().UnixNano()
	d.nackMu.Lock()
	defer d.nackMu.Unlock()
	for _, pair := range n.Nacks {
		for _, seq := range pair.PacketList() {
			if _, seen := d.nackedAt[seq]; seen || len(d.nackedAt) >= maxNackedSeqs {
				continue
			}
			d.nackedAt[seq] = now
			d.nackedNew++
		}
	}
}

// takeNacked returns how many distinct packets the subscriber first
// reported missing since the last call, and forgets reports older than
// nackMemorySeconds.
func (d *downTrack) takeNacked() int {
	cutoff := time.Now().Add(-nackMemorySeconds * time.Second).UnixNano()
	d.nackMu.Lock()
	defer d.nackMu.Unlock()
	for seq, at := range d.nackedAt {
		if at < cutoff {
			delete(d.nackedAt, seq)
		}
	}
	n := d.nackedNew
	d.nackedNew = 0
	return n
}

// stop ends the writer; packets still queued are never written. Safe to
// call more than once and from any goroutine.
func (d *downTrack) stop() {
	d.stopOnce.Do(func() { close(d.done) })
}

// switchGapTicks is how far the timestamp moves across a layer switch:
// one frame at 30 frames/s of video's 90 kHz clock. The layers' own
// timestamps have unrelated random bases, so the writer makes one up.
const switchGapTicks = 90000 / 30

// writeLoop writes queued packets until stop. The packet is shared by
// every subscriber of the track, so it is copied (header only; the payload
// is never written to) before pion rewrites its SSRC and payload type.
func (d *downTrack) writeLoop() {
	defer close(d.exited)
	var sent rtpTally
	defer func() { d.up.counts.Forwarded(sent.packets, sent.bytes) }()
	for {
		select {
		case <-d.done:
			return
		case q := <-d.queue:
			out := *q.pkt
			if d.simulcast && !d.follow(q.layer, &out) {
				continue
			}
			if err := d.w.WriteRTP(&out); err != nil && errors.Is(err, io.ErrClosedPipe) {
				return
			}
			d.started = true
			d.lastSeq, d.lastTS = out.SequenceNumber, out.Timestamp
			d.sent.Add(1)
			sent.packets++
			sent.bytes += len(out.Payload)
			if sent.packets == metricsBatchPackets {
				d.up.counts.Forwarded(sent.packets, sent.bytes)
				sent = rtpTally{}
			}
		}
	}
}

// follow decides whether a simulcast packet is forwarded, switching layers
// at a keyframe of the target layer, and rewrites its sequence number and
// timestamp into the subscriber's one stream.
func (d *downTrack) follow(l *upLayer, out *rtp.Packet) bool {
	i := int32(l.index)
	if i != d.current.Load() {
		if i != d.target.Load() {
			return false // a late packet of a layer left behind
		}
		if d.sub != nil && !d.sub.subConnected.Load() {
			return false // the keyframe would be lost; start once connected
		}
		key, known := isKeyframeStart(d.up.codec.MimeType, out.Payload)
		if !key && (known || d.current.Load() >= 0) {
			return false // wait for the target layer's keyframe
		}
		if d.started {
			d.seqOffset = d.lastSeq + 1 - out.SequenceNumber
			d.tsOffset = d.lastTS + switchGapTicks - out.Timestamp
		}
		if from := d.current.Load(); from >= 0 {
			d.up.metrics.LayerSwitch(i > from) // the first layer a copy starts on is no switch
		}
		d.current.Store(i)
		d.switches.Add(1)
	}
	out.SequenceNumber += d.seqOffset
	out.Timestamp += d.tsOffset
	return true
}

// Simulcast layer policy (docs/media-protocol.md, Simulcast). Each receiver
// report the subscriber sends for its copy (about one a second) is a vote:
// loss at or above layerDownLossFraction moves the target one layer down
// at once; layerUpgradeCleanReports reports in a row at or below
// layerCleanLossFraction move it one layer up. An upgrade that meets loss
// within layerUpgradeFailReports reports doubles the clean reports the
// next upgrade needs (up to layerMaxBackoff times), so a subscriber whose
// link cannot carry the next layer probes it less and less often.
const (
	layerDownLossFraction    = 0.10
	layerCleanLossFraction   = 0.02
	layerUpgradeCleanReports = 3
	layerUpgradeFailReports  = 5
	layerMaxBackoff          = 8
)

// adapt feeds one receiver report's loss fraction to the policy and moves
// the target layer; a new target gets a keyframe request.
func (d *downTrack) adapt(loss float64) {
	if !d.simulcast || d.current.Load() < 0 {
		return // reports before the copy started say nothing about its link
	}
	target := int(d.target.Load())
	next := target
	d.reportsOnLayer++
	switch {
	case loss >= layerDownLossFraction:
		d.cleanReports = 0
		if target > 0 {
			next = target - 1
			if d.reportsOnLayer <= layerUpgradeFailReports {
				d.upgradeBackoff = min(2*d.upgradeBackoff, layerMaxBackoff)
			}
		}
	case loss <= layerCleanLossFraction:
		d.cleanReports++
		if d.cleanReports >= layerUpgradeCleanReports*d.upgradeBackoff && target+1 < d.up.layerCount() && d.up.layerAt(target+1) != nil {
			next = target + 1
			d.cleanReports = 0
			d.reportsOnLayer = 0
		}
	default:
		d.cleanReports = 0
	}
	if next != target {
		d.target.Store(int32(next))
		d.up.requestKeyframe(d.up.layerAt(next))
	}
}

// readRTCP reads the subscriber's RTCP for this track (pion's interceptors
// have already answered NACKs from their send buffer), relays keyframe
// requests to the publisher and feeds receiver reports to the layer
// policy. It ends when the sender stops.
func (d *downTrack) readRTCP() {
	for {
		pkts, _, err := d.sender.ReadRTCP()
		if err != nil {
			return
		}
		for _, p := range pkts {
			switch p := p.(type) {
			case *rtcp.PictureLossIndication, *rtcp.FullIntraRequest:
				layer := int(d.current.Load())
				if layer < 0 {
					layer = 0
				}
				d.up.requestKeyframe(d.up.layerAt(layer))
			case *rtcp.TransportLayerNack:
				d.noteNack(p)
			case *rtcp.ReceiverReport:
				for _, r := range p.Reports {
					if r.SSRC == d.ssrc {
						d.adapt(float64(r.FractionLost) / 256)
					}
				}
			}
		}
	}
}

// isKeyframeStart says whether an RTP payload starts a keyframe, for the
// codecs whose payload format the node reads (VP8, H.264); known is false
// for others. It reads only payload headers, never decodes.
func isKeyframeStart(mimeType string, p []byte) (key, known bool) {
	switch {
	case strings.EqualFold(mimeType, webrtc.MimeTypeVP8):
		return isVP8KeyframeStart(p), true
	case strings.EqualFold(mimeType, webrtc.MimeTypeH264):
		return isH264Keyframe(p), true
	}
	return false, false
}

// isVP8KeyframeStart reads the VP8 payload descriptor (RFC 7741 4.2) and
// the first byte of the VP8 payload header: a keyframe's first packet has
// S=1, partition 0, and P=0.
func isVP8KeyframeStart(p []byte) bool {
	if len(p) < 1 || p[0]&0x10 == 0 || p[0]&0x07 != 0 {
		return false
	}
	i := 1
	if p[0]&0x80 != 0 { // X: extension byte follows
		if len(p) < 2 {
			return false
		}
		ext := p[1]
		i = 2
		if ext&0x80 != 0 { // I: picture ID, 7 or 15 bits
			if len(p) <= i {
				return false
			}
			if p[i]&0x80 != 0 {
				i += 2
			} else {
				i++
			}
		}
		if ext&0x40 != 0 { // L: TL0PICIDX
			i++
		}
		if ext&0x30 != 0 { // T or K: TID/KEYIDX byte
			i++
		}
	}
	return len(p) > i && p[i]&0x01 == 0
}

// isH264Keyframe says whether an H.264 payload (RFC 6184) carries an IDR
// slice or a sequence parameter set, alone, in a STAP-A, or as the first
// fragment of a FU-A.
func isH264Keyframe(p []byte) bool {
	if len(p) < 2 {
		return false
	}
	isKey := func(nalType byte) bool { return nalType == 5 || nalType == 7 }
	switch nal := p[0] & 0x1F; nal {
	case 24: // STAP-A: 2-byte sizes, then NAL units
		for i := 1; i+2 < len(p); {
			size := int(p[i])<<8 | int(p[i+1])
			if isKey(p[i+2] & 0x1F) {
				return true
			}
			i += 2 + size
		}
		return false
	case 28: // FU-A: start bit and the fragment's type
		return p[1]&0x80 != 0 && isKey(p[1]&0x1F)
	default:
		return isKey(nal)
	}
}
