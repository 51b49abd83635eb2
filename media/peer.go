package media

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/sdp/v3"

	"github.com/pion/webrtc/v4"
)

// peer is the media of one joined protocol 2 socket: a publish connection
// (the client offers, the node answers) and a subscribe connection (the
// node offers, the client answers). One connection per direction means
// only one side ever offers on each, so renegotiation never meets an offer
// coming the other way.
//
// A peer exists only while its socket is the joined connection of record
// of a member: the hub creates it at the join and closes it when the
// socket ends for any reason (left, replaced, removed, room closed, node
// shutdown). Closing detaches every track it publishes and receives at
// once, under rtc.mu, so no packet reaches or leaves it afterwards.
//
// Signalling runs on the peer's own goroutine (run): client messages
// arrive on ops, and kick asks it to bring its subscriptions in line with
// the room's published tracks (reconcile). Nothing ever waits on that
// goroutine, so a stuck client cannot stall anyone else.
type peer struct {
	r    *rtc
	node *Node
	c    *conn
	id   participantIdentity
	role string

	ops       chan func()
	kick      chan struct{}
	closed    chan struct{}
	closeOnce sync.Once

	// subConnected is set once the subscribe connection is up: a copy
	// starts only then, since pion drops what is written before, and the
	// keyframe it starts with would be lost.
	subConnected atomic.Bool

	// Owned by the run goroutine.
	pub, sub                 *webrtc.PeerConnection
	negotiating, renegotiate bool
	candidates               int
	quality                  qualityState
	// early holds candidates that arrived before their connection had a
	// remote description (a client's ICE agent can trickle before its SDP
	// message is sent); they are added once it has one.
	early map[string][]webrtc.ICECandidateInit

	// candMu orders the node's own candidates after the SDP they belong
	// to: pion can find a candidate before the offer or answer that
	// carries its ufrag has been queued for the client, and a client
	// cannot add a candidate to a connection with no remote description.
	candMu   sync.Mutex
	sdpSent  map[string]bool     // by target: its first SDP has been queued
	heldCand map[string][][]byte // by target: candidates waiting for it

	// mu guards declared and published, which pion's OnTrack goroutines
	// read.
	mu        sync.Mutex
	declared  map[string]trackDecl // by the client's track ID
	published map[string]*upTrack  // by the client's track ID

	// Guarded by rtc.mu.
	gone         bool
	downs        map[string]*downTrack // by track ID
	unsubscribed map[string]bool       // track IDs the client unsubscribed
}

// addPeer creates the media of a socket that just joined with protocol 2,
// registers it in its room and starts its goroutine. It runs on the hub
// goroutine and does not block.
func (r *rtc) addPeer(n *Node, c *conn, id participantIdentity, role string) *peer {
	p := &peer{
		r: r, node: n, c: c, id: id, role: role,
		ops:          make(chan func(), peerOpsQueue),
		early:        make(map[string][]webrtc.ICECandidateInit),
		sdpSent:      make(map[string]bool),
		heldCand:     make(map[string][][]byte),
		kick:         make(chan struct{}, 1),
		closed:       make(chan struct{}),
		declared:     make(map[string]trackDecl),
		published:    make(map[string]*upTrack),
		downs:        make(map[string]*downTrack),
		unsubscribed: make(map[string]bool),
	}
	r.mu.Lock()
	sr := r.roomLocked(id.RoomID)
	old := sr.peers[id.ParticipantID]
	sr.peers[id.ParticipantID] = p
	r.mu.Unlock()
	if old != nil {
		old.close() // the hub closes a replaced socket's peer too; this is a backstop
	}
	go p.run()
	p.poke()
	return p
}

// do queues a client message's handling. It never blocks (it runs on the
// hub goroutine); a client whose messages pile up is dropped.
func (p *peer) do(op func()) bool {
	select {
	case p.ops <- op:
		return true
	default:
		return false
	}
}

// poke asks the peer to reconcile its subscriptions; never blocks.
func (p *peer) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// close ends the peer: every track it publishes is unpublished and every
// track it receives detached, at once; its connections are closed by its
// goroutine. Safe from any goroutine, more than once.
func (p *peer) close() {
	first := false
	p.closeOnce.Do(func() { first = true; close(p.closed) })
	if !first {
		return
	}
	r := p.r
	r.mu.Lock()
	p.gone = true
	var subscribers []*peer
	if sr := r.rooms[p.id.RoomID]; sr != nil {
		if sr.peers[p.id.ParticipantID] == p {
			delete(sr.peers, p.id.ParticipantID)
		}
		for id, up := range sr.tracks {
			if up.publisher == p {
				subscribers = append(subscribers, r.endTrackLocked(sr, id, up)...)
			}
		}
		if len(sr.peers) == 0 && len(sr.tracks) == 0 {
			delete(r.rooms, sr.id)
		}
	}
	for _, d := range p.downs {
		d.up.detach(d)
		d.stop()
	}
	r.mu.Unlock()
	for _, s := range subscribers {
		s.poke()
	}
}

// endTrackLocked unpublishes up: it leaves the room, every copy stops at
// once, and the subscribers returned must be poked to renegotiate. Call
// with rtc.mu held.
func (r *rtc) endTrackLocked(sr *sfuRoom, id string, up *upTrack) []*peer {
	if up.ended {
		return nil
	}
	up.ended = true
	if sr.tracks[id] == up { // a track ended before it was ever published was never counted
		delete(sr.tracks, id)
		up.counts.TrackUnpublished()
	}
	var subs []*peer
	for d := range up.downSet {
		d.stop()
		subs = append(subs, d.sub)
	}
	up.counts.Unsubscribed(len(up.downSet))
	up.downSet = map[*downTrack]struct{}{}
	up.publishDowns()
	return subs
}

func (p *peer) run() {
	defer p.shutdown()
	var err error
	p.sub, err = p.r.api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		p.fail(fmt.Sprintf("the node could not create a peer connection: %v", err))
		return
	}
	p.sub.OnICECandidate(func(c *webrtc.ICECandidate) { p.sendCandidate(targetSubscribe, c) })
	p.sub.OnConnectionStateChange(func(s webrtc.PeerConnectionState) {
		if s == webrtc.PeerConnectionStateConnected && !p.subConnected.Swap(true) {
			p.requestKeyframes()
		}
	})
	quality := time.NewTicker(qualityIntervalMillis * time.Millisecond)
	defer quality.Stop()
	for {
		select {
		case <-p.closed:
			return
		case op := <-p.ops:
			op()
		case <-p.kick:
			p.reconcile()
		case <-quality.C:
			p.evaluateQuality()
		}
	}
}

// shutdown closes both connections once the peer has closed.
func (p *peer) shutdown() {
	p.close()
	r := p.r
	r.mu.Lock()
	downs := make([]*downTrack, 0, len(p.downs))
	for _, d := range p.downs {
		downs = append(downs, d)
	}
	r.mu.Unlock()
	for _, d := range downs {
		d.stop()
	}
	if p.pub != nil {
		_ = p.pub.Close()
	}
	if p.sub != nil {
		_ = p.sub.Close()
	}
}

// requestKeyframes asks every track this peer receives for a keyframe on
// the layer its copy waits for (its subscribe connection just came up).
func (p *peer) requestKeyframes() {
	p.r.mu.Lock()
	downs := make([]*downTrack, 0, len(p.downs))
	for _, d := range p.downs {
		downs = append(downs, d)
	}
	p.r.mu.Unlock()
	for _, d := range downs {
		d.up.requestKeyframe(d.up.layerAt(int(d.target.Load())))
	}
}

// send queues a message for the client through the hub, which owns the
// socket's queue; it is dropped if the socket is no longer this peer's.
func (p *peer) send(msg []byte) {
	p.node.post(func(h *hub) {
		if p.c.peer == p {
			h.enqueue(p.c, msg)
		}
	})
}

// fail ends the socket with bad_message: the client broke the signalling.
func (p *peer) fail(text string) {
	p.node.post(func(h *hub) {
		if p.c.peer == p {
			h.refuse(p.c, CodeBadMessage, text)
		}
	})
}

func (p *peer) sendCandidate(target string, c *webrtc.ICECandidate) {
	if c == nil {
		return // end of gathering; clients do not need it
	}
	b, err := json.Marshal(c.ToJSON())
	if err != nil {
		return
	}
	msg := encode(candidateMessage{Type: typeCandidate, Target: target, Candidate: b})
	p.candMu.Lock()
	defer p.candMu.Unlock()
	if !p.sdpSent[target] {
		p.heldCand[target] = append(p.heldCand[target], msg)
		return
	}
	p.send(msg)
}

// sendSDP queues an offer or answer for target, then the candidates held
// for it.
func (p *peer) sendSDP(target string, msg []byte) {
	p.candMu.Lock()
	defer p.candMu.Unlock()
	p.send(msg)
	p.sdpSent[target] = true
	for _, c := range p.heldCand[target] {
		p.send(c)
	}
	delete(p.heldCand, target)
}

// tracksChanged tells the hub this participant's published tracks
// changed, so the room hears participant.updated.
func (p *peer) tracksChanged() {
	r := p.r
	r.mu.Lock()
	var tracks []*upTrack
	if sr := r.rooms[p.id.RoomID]; sr != nil && !p.gone {
		for _, up := range sr.tracks {
			if up.publisher == p {
				tracks = append(tracks, up)
			}
		}
	}
	r.mu.Unlock()
	infos := make([]TrackInfo, 0, len(tracks))
	for _, up := range tracks {
		infos = append(infos, up.info())
	}
	slices.SortFunc(infos, func(a, b TrackInfo) int { return strings.Compare(a.Source, b.Source) })
	p.node.post(func(h *hub) {
		if p.c.peer == p {
			h.tracksChanged(p.c, infos)
		}
	})
}

// handle runs one client signalling message on the peer's goroutine.
func (p *peer) handle(msg clientMessage) {
	switch msg.Type {
	case typePublishOffer:
		p.publishOffer(msg.SDP, msg.Tracks)
	case typeSubscribeAnswer:
		p.subscribeAnswer(msg.SDP)
	case typeCandidate:
		p.candidate(msg.Target, msg.Candidate)
	case typeTrackSubscribe, typeTrackUnsubscribe:
		p.r.mu.Lock()
		if msg.Type == typeTrackUnsubscribe {
			p.unsubscribed[msg.TrackID] = true
		} else {
			delete(p.unsubscribed, msg.TrackID)
		}
		p.r.mu.Unlock()
		p.reconcile()
	}
}

// checkDecls checks a publish.offer's track list (shape only; permission
// is checked per track).
func checkDecls(decls []trackDecl) string {
	if len(decls) > maxTracksPerParticipant {
		return fmt.Sprintf("publish.offer declares %d tracks; at most %d", len(decls), maxTracksPerParticipant)
	}
	ids := map[string]bool{}
	sources := map[string]bool{}
	for _, d := range decls {
		if d.TrackID == "" || len(d.TrackID) > maxClientTrackIDBytes {
			return fmt.Sprintf("a declared track_id must be 1 to %d bytes", maxClientTrackIDBytes)
		}
		switch d.Source {
		case SourceMicrophone, SourceCamera, SourceScreenShare:
		default:
			return fmt.Sprintf("track %q: source must be %s, %s or %s", d.TrackID, SourceMicrophone, SourceCamera, SourceScreenShare)
		}
		if ids[d.TrackID] || sources[d.Source] {
			return "each declared track needs its own track_id and source"
		}
		if text := checkLayers(d); text != "" {
			return text
		}
		ids[d.TrackID], sources[d.Source] = true, true
	}
	return ""
}

// maxClientTrackIDBytes bounds a client's own track ID.
const maxClientTrackIDBytes = 64

// Simulcast bounds: layers of one track, and the length of a RID (RFC 8851
// allows alphanumerics, '-' and '_'; 16 bytes is far more than any client
// uses).
const (
	maxSimulcastLayers = 3
	maxRIDBytes        = 16
)

func checkLayers(d trackDecl) string {
	if len(d.Layers) == 0 {
		return ""
	}
	if kindOfSource(d.Source) != webrtc.RTPCodecTypeVideo {
		return fmt.Sprintf("track %q: only video has simulcast layers", d.TrackID)
	}
	if len(d.Layers) < 2 || len(d.Layers) > maxSimulcastLayers {
		return fmt.Sprintf("track %q: a simulcast track has 2 to %d layers", d.TrackID, maxSimulcastLayers)
	}
	seen := map[string]bool{}
	for _, rid := range d.Layers {
		if rid == "" || len(rid) > maxRIDBytes || seen[rid] || strings.Trim(rid, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
			return fmt.Sprintf("track %q: layers must be distinct RIDs of 1 to %d letters, digits, - or _", d.TrackID, maxRIDBytes)
		}
		seen[rid] = true
	}
	return ""
}

func (p *peer) publishOffer(sdp string, decls []trackDecl) {
	if text := checkDecls(decls); text != "" {
		p.fail(text)
		return
	}
	allowed := make(map[string]trackDecl)
	for _, d := range decls {
		if featureAllows(p.role, d.Source) {
			allowed[d.TrackID] = d
			continue
		}
		p.send(encode(trackRefusedMessage{Type: typeTrackRefused, TrackID: d.TrackID, Source: d.Source, Code: CodePublishNotAllowed,
			Message: fmt.Sprintf("role %q may not publish %s; the node drops this track's packets", p.role, d.Source)}))
	}
	// A track the client no longer declares is unpublished now, before the
	// answer: its subscribers stop receiving at once.
	p.mu.Lock()
	p.declared = allowed
	var gone []*upTrack
	for cid, up := range p.published {
		if d, ok := allowed[cid]; !ok || d.Source != up.source {
			gone = append(gone, up)
			delete(p.published, cid)
		}
	}
	p.mu.Unlock()
	if len(gone) > 0 {
		p.unpublish(gone)
	}

	if p.pub == nil {
		pc, err := p.r.api.NewPeerConnection(webrtc.Configuration{})
		if err != nil {
			p.fail(fmt.Sprintf("the node could not create a peer connection: %v", err))
			return
		}
		p.pub = pc
		pc.OnICECandidate(func(c *webrtc.ICECandidate) { p.sendCandidate(targetPublish, c) })
		pc.OnTrack(func(remote *webrtc.TrackRemote, receiver *webrtc.RTPReceiver) { p.onTrack(pc, remote, receiver) })
	}
	if err := p.pub.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: sdp}); err != nil {
		p.fail("publish.offer: the SDP offer was refused: " + err.Error())
		return
	}
	p.addEarlyCandidates(targetPublish, p.pub)
	answer, err := p.pub.CreateAnswer(nil)
	if err == nil {
		err = p.pub.SetLocalDescription(answer)
	}
	if err != nil {
		p.fail("publish.offer: no answer could be made: " + err.Error())
		return
	}
	p.sendSDP(targetPublish, encode(sdpMessage{Type: typePublishAnswer, SDP: answer.SDP}))
}

func (p *peer) unpublish(ups []*upTrack) {
	r := p.r
	r.mu.Lock()
	var subs []*peer
	if sr := r.rooms[p.id.RoomID]; sr != nil {
		for _, up := range ups {
			subs = append(subs, r.endTrackLocked(sr, up.id, up)...)
		}
	}
	r.mu.Unlock()
	for _, s := range subs {
		s.poke()
	}
	p.tracksChanged()
}

// onTrack runs on pion's goroutine for each arriving encoding of a remote
// track, and forwards it until it ends.
func (p *peer) onTrack(pc *webrtc.PeerConnection, remote *webrtc.TrackRemote, receiver *webrtc.RTPReceiver) {
	p.mu.Lock()
	d, ok := p.declared[remote.ID()]
	if !ok || kindOfSource(d.Source) != remote.Kind() {
		p.mu.Unlock()
		drain(remote) // undeclared, refused or of the wrong kind: never forwarded
		return
	}
	up := p.published[d.TrackID]
	isNew := up == nil
	if isNew {
		up = newUpTrack(p, d.TrackID, d.Source, remote.Kind(), remote.Codec(), pc)
		up.setLayers(d.Layers)
		p.published[d.TrackID] = up
	}
	p.mu.Unlock()
	layer := up.addLayer(remote)
	if layer == nil {
		drain(remote) // an encoding the declaration does not name
		return
	}
	for _, ext := range receiver.GetParameters().HeaderExtensions {
		if ext.URI == sdp.AudioLevelURI {
			layer.audioLevelExtID = uint8(ext.ID)
		}
	}
	if isNew {
		r := p.r
		r.mu.Lock()
		sr := r.rooms[p.id.RoomID]
		// A track the client took back (publishOffer ended it) between
		// its first packet and here is not published after all.
		ok := sr != nil && !p.gone && !up.ended && sr.peers[p.id.ParticipantID] == p && len(sr.tracks) < maxTracksPerRoom
		var others []*peer
		if ok {
			sr.tracks[up.id] = up
			up.counts.TrackPublished()
			for _, o := range sr.peers {
				if o != p {
					others = append(others, o)
				}
			}
		}
		r.mu.Unlock()
		if !ok {
			drain(remote)
			return
		}
		for _, o := range others {
			o.poke()
		}
		p.tracksChanged()
	} else {
		p.tracksChanged() // a new simulcast layer
	}
	up.forward(layer)
	// The encoding ended: the publisher removed the track or closed.
	p.mu.Lock()
	if p.published[d.TrackID] == up {
		delete(p.published, d.TrackID)
	}
	p.mu.Unlock()
	p.unpublish([]*upTrack{up})
}

// maxTracksPerRoom bounds the published tracks of one room:
// maxTracksPerParticipant for every participant a room may hold.
const maxTracksPerRoom = maxTracksPerParticipant * maxParticipantsPerRoomLimit

// drain reads and discards a track the node will not forward, so pion's
// buffers and interceptors keep working until the publisher stops it.
func drain(remote *webrtc.TrackRemote) {
	buf := make([]byte, rtpPacketBytes)
	for {
		if _, _, err := remote.Read(buf); err != nil {
			return
		}
	}
}

func (p *peer) subscribeAnswer(sdp string) {
	if !p.negotiating {
		p.fail("subscribe.answer without a subscribe.offer waiting for it")
		return
	}
	if err := p.sub.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: sdp}); err != nil {
		p.fail("subscribe.answer: the SDP answer was refused: " + err.Error())
		return
	}
	p.addEarlyCandidates(targetSubscribe, p.sub)
	p.negotiating = false
	if p.renegotiate {
		p.renegotiate = false
		p.negotiate()
	}
}

func (p *peer) candidate(target string, raw json.RawMessage) {
	p.candidates++
	if p.candidates > maxCandidatesPerPeer {
		p.fail(fmt.Sprintf("more than %d ICE candidates", maxCandidatesPerPeer))
		return
	}
	var init webrtc.ICECandidateInit
	if json.Unmarshal(raw, &init) != nil {
		p.fail("candidate.candidate must be an RTCIceCandidateInit object")
		return
	}
	pc := p.sub
	if target == targetPublish {
		pc = p.pub
	}
	if pc == nil || pc.RemoteDescription() == nil {
		p.early[target] = append(p.early[target], init)
		return
	}
	// A candidate pion cannot use is ignored: ICE works with the others.
	_ = pc.AddICECandidate(init)
}

// addEarlyCandidates adds the candidates held for target now that its
// connection has a remote description.
func (p *peer) addEarlyCandidates(target string, pc *webrtc.PeerConnection) {
	for _, c := range p.early[target] {
		_ = pc.AddICECandidate(c)
	}
	delete(p.early, target)
}

// reconcile brings the subscribe connection in line with the room: a copy
// of every other participant's track the client has not unsubscribed, and
// nothing else. Then it renegotiates if anything changed.
func (p *peer) reconcile() {
	if p.sub == nil {
		return
	}
	r := p.r
	var add []*upTrack
	var remove []*downTrack
	var reasons []string
	r.mu.Lock()
	if p.gone {
		r.mu.Unlock()
		return
	}
	if sr := r.rooms[p.id.RoomID]; sr != nil {
		for id, up := range sr.tracks {
			if up.publisher != p && !p.unsubscribed[id] && p.downs[id] == nil {
				add = append(add, up)
			}
		}
	}
	for id, d := range p.downs {
		reason := ""
		switch {
		case d.up.ended:
			reason = UnsubscribedUnpublished
		case p.unsubscribed[id]:
			reason = UnsubscribedByClient
		default:
			continue
		}
		delete(p.downs, id)
		d.up.detach(d)
		d.stop()
		remove = append(remove, d)
		reasons = append(reasons, reason)
	}
	r.mu.Unlock()
	slices.SortFunc(add, func(a, b *upTrack) int { return strings.Compare(a.id, b.id) })

	for i, d := range remove {
		_ = p.sub.RemoveTrack(d.sender)
		p.send(encode(trackUnsubscribedMessage{Type: typeTrackUnsubscribed, TrackID: d.up.id,
			ParticipantID: d.up.publisher.id.ParticipantID, Reason: reasons[i]}))
	}
	changed := len(remove) > 0
	for _, up := range add {
		local, err := webrtc.NewTrackLocalStaticRTP(up.codec.RTPCodecCapability, up.id, up.publisher.id.ParticipantID)
		if err != nil {
			continue
		}
		sender, err := p.sub.AddTrack(local)
		if err != nil {
			continue
		}
		d := newDownTrack(up, p, local, sender)
		if params := sender.GetParameters(); len(params.Encodings) > 0 {
			d.ssrc = uint32(params.Encodings[0].SSRC)
		}
		r.mu.Lock()
		live := !up.ended && !p.gone
		if live {
			p.downs[up.id] = d
			up.attach(d)
		}
		r.mu.Unlock()
		if !live {
			_ = p.sub.RemoveTrack(sender)
			continue
		}
		changed = true
		go d.writeLoop()
		go d.readRTCP()
		// A new subscriber can decode nothing until the next keyframe.
		up.requestKeyframe(up.layerAt(int(d.target.Load())))
	}
	if changed {
		p.negotiate()
	}
}

// negotiate sends a subscribe offer, or remembers to once the one waiting
// for its answer is answered.
func (p *peer) negotiate() {
	if p.negotiating {
		p.renegotiate = true
		return
	}
	offer, err := p.sub.CreateOffer(nil)
	if err == nil {
		err = p.sub.SetLocalDescription(offer)
	}
	if err != nil {
		p.r.log.Warn("media: subscribe offer failed", "participant_id", p.id.ParticipantID, "err", err)
		return
	}
	p.negotiating = true
	p.sendSDP(targetSubscribe, encode(sdpMessage{Type: typeSubscribeOffer, SDP: offer.SDP}))
}
