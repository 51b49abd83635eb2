package main

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/goccy/go-json"
	"github.com/gorilla/websocket"
	"github.com/pion/ice/v4"
	"github.com/pion/interceptor"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
)

// The media scenario's generator: one pion participant per mediaPeer,
// publishing the synthetic stream and receiving the others', signalling
// with rtcd's media node in protocol 2 (docs/media-protocol.md).

// mediaClientAPI is the generator's pion: loopback only, no mDNS, pion's
// default interceptors (NACK, RTCP reports), as a client would have.
func mediaClientAPI() (*webrtc.API, error) {
	me := &webrtc.MediaEngine{}
	if err := me.RegisterDefaultCodecs(); err != nil {
		return nil, err
	}
	ir := &interceptor.Registry{}
	if err := webrtc.RegisterDefaultInterceptors(me, ir); err != nil {
		return nil, err
	}
	se := webrtc.SettingEngine{}
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	se.SetIncludeLoopbackCandidate(true)
	se.SetIPFilter(func(ip net.IP) bool { return ip.IsLoopback() })
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	return webrtc.NewAPI(webrtc.WithMediaEngine(me), webrtc.WithInterceptorRegistry(ir), webrtc.WithSettingEngine(se)), nil
}

// mediaStats is what every peer of a run counts.
type mediaStats struct {
	sent                     []atomic.Int64 // by participant index: packets sent (video and audio)
	skippedTicks             atomic.Int64
	packets, bytes           atomic.Int64 // received, every kind
	videoPackets, videoBytes atomic.Int64
	measure                  atomic.Bool // inside the measured window: record latency
	mu                       sync.Mutex
	latency                  *hdrhistogram.Histogram
}

func (s *mediaStats) noteReceived(pkt *rtp.Packet, video bool) {
	n := int64(len(pkt.Payload) + 12) // the RTP fixed header
	s.packets.Add(1)
	s.bytes.Add(n)
	if video {
		s.videoPackets.Add(1)
		s.videoBytes.Add(n)
	}
	if !s.measure.Load() || len(pkt.Payload) < mediaStampOffset+mediaStampBytes {
		return
	}
	sentAt := int64(binary.BigEndian.Uint64(pkt.Payload[mediaStampOffset:]))
	us := (time.Now().UnixNano() - sentAt) / 1000
	s.mu.Lock()
	_ = s.latency.RecordValue(min(max(us, 1), latencyMaxMicros))
	s.mu.Unlock()
}

// mediaPeer is one participant of the generator: a publish connection
// (when it publishes) and a subscribe connection.
type mediaPeer struct {
	index     int
	room      int
	publishes bool
	audio     bool
	stats     *mediaStats

	pub, sub         *webrtc.PeerConnection
	videoTr, audioTr *webrtc.TrackLocalStaticRTP
	tracks           atomic.Int32  // tracks received with at least one packet
	nodeError        atomic.Value  // string: the last error or refusal the node sent
	closed           chan struct{} // closed by close: the ping loop ends

	// rtcd signalling
	ws  *websocket.Conn
	wmu sync.Mutex
}

// newTracks makes the publish connection and its tracks.
func (p *mediaPeer) newTracks(api *webrtc.API) error {
	var err error
	if p.pub, err = api.NewPeerConnection(webrtc.Configuration{}); err != nil {
		return err
	}
	stream := fmt.Sprint("gen", p.index)
	if p.videoTr, err = webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8}, "video", stream); err != nil {
		return err
	}
	local := []*webrtc.TrackLocalStaticRTP{p.videoTr}
	if p.audio {
		if p.audioTr, err = webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus}, "audio", stream); err != nil {
			return err
		}
		local = append(local, p.audioTr)
	}
	for _, tr := range local {
		sender, err := p.pub.AddTrack(tr)
		if err != nil {
			return err
		}
		go drainRTCP(sender)
	}
	return nil
}

// drainRTCP reads a sender's RTCP so pion's interceptors see it.
func drainRTCP(sender *webrtc.RTPSender) {
	for {
		if _, _, err := sender.ReadRTCP(); err != nil {
			return
		}
	}
}

// onTrack counts and times what arrives.
func (p *mediaPeer) onTrack(remote *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
	video := remote.Kind() == webrtc.RTPCodecTypeVideo
	first := true
	for {
		pkt, _, err := remote.ReadRTP()
		if err != nil {
			return
		}
		if first {
			first = false
			p.tracks.Add(1)
		}
		p.stats.noteReceived(pkt, video)
	}
}

// sendLoop sends the synthetic tracks until stop, on a schedule: each
// wake-up sends every tick due since start, so a sender the scheduler
// starves keeps its average rate (at most mediaMaxCatchUpTicks at once).
func (p *mediaPeer) sendLoop(stop <-chan struct{}) {
	tick := time.NewTicker(mediaTick)
	defer tick.Stop()
	video := make([]byte, mediaVideoPayloadBytes)
	audio := make([]byte, mediaAudioPayloadBytes)
	var vseq, aseq uint16
	var counter uint32
	start := time.Now()
	var done int64 // ticks sent or skipped
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		due := int64(time.Since(start) / mediaTick)
		if behind := due - done; behind > mediaMaxCatchUpTicks {
			p.stats.skippedTicks.Add(behind - mediaMaxCatchUpTicks)
			done = due - mediaMaxCatchUpTicks
		}
		for ; done < due; done++ {
			key := done%mediaKeyframeTicks == 0
			for i := 0; i < mediaVideoPacketsPerTick; i++ {
				counter++
				vseq++
				stamp(video, i == 0, key, p.index, counter, 0)
				_ = p.videoTr.WriteRTP(&rtp.Packet{Header: rtp.Header{Version: 2, SequenceNumber: vseq,
					Timestamp: uint32(done * mediaVideoClockPerTick), Marker: i == mediaVideoPacketsPerTick-1}, Payload: video})
			}
			sent := int64(mediaVideoPacketsPerTick)
			if p.audioTr != nil {
				aseq++
				counter++
				stamp(audio, true, true, p.index, counter, 1)
				_ = p.audioTr.WriteRTP(&rtp.Packet{Header: rtp.Header{Version: 2, SequenceNumber: aseq,
					Timestamp: uint32(done * mediaAudioClockPerTick)}, Payload: audio})
				sent++
			}
			p.stats.sent[p.index].Add(sent)
		}
	}
}

// stamp writes the payload's VP8 descriptor and header byte and the stamp.
func stamp(b []byte, frameStart, key bool, index int, counter uint32, kind byte) {
	b[0], b[1] = 0, 1 // a continuation of an interframe
	if frameStart {
		b[0] = 0x10 // S: the start of partition 0
	}
	if key {
		b[1] = 0 // P=0: a keyframe
	}
	s := b[mediaStampOffset:]
	binary.BigEndian.PutUint64(s, uint64(time.Now().UnixNano()))
	binary.BigEndian.PutUint32(s[8:], uint32(index))
	binary.BigEndian.PutUint32(s[12:], counter)
	s[16] = kind
}

func (p *mediaPeer) close() {
	select {
	case <-p.closed:
	default:
		close(p.closed)
	}
	if p.ws != nil {
		_ = p.ws.Close()
	}
	if p.pub != nil {
		_ = p.pub.Close()
	}
	if p.sub != nil {
		_ = p.sub.Close()
	}
}

// --- rtcd: protocol 2 over the media node's WebSocket -------------------

func (p *mediaPeer) write(v any) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_ = p.ws.SetWriteDeadline(time.Now().Add(wsTimeout))
	return p.ws.WriteJSON(v)
}

// joinRTCD connects p through rtcd: POST /v1/connect, the media socket,
// join with protocol 2, the subscribe connection, and (for a publisher)
// the publish offer.
func (p *mediaPeer) joinRTCD(api *webrtc.API, c *apiClient, part participant) error {
	r, err := c.call("POST", "/v1/connect", "", part.connect, true)
	if code := errCode(r, err); code != "" {
		return fmt.Errorf("connect: %s", code)
	}
	var cs struct {
		Endpoint   string `json:"endpoint"`
		MediaToken string `json:"media_token"`
	}
	if err := json.Unmarshal(r.Body, &cs); err != nil || cs.Endpoint == "" {
		return fmt.Errorf("connect session without endpoint")
	}
	ws, _, err := (&websocket.Dialer{HandshakeTimeout: wsTimeout}).Dial(cs.Endpoint, nil)
	if err != nil {
		return err
	}
	p.ws = ws
	if err := p.write(map[string]any{"type": "join", "media_token": cs.MediaToken, "protocol": 2}); err != nil {
		return err
	}
	var joined struct {
		Type     string `json:"type"`
		Protocol int    `json:"protocol"`
		Code     string `json:"code"`
	}
	_ = ws.SetReadDeadline(time.Now().Add(wsTimeout))
	if err := ws.ReadJSON(&joined); err != nil || joined.Type != "joined" || joined.Protocol != 2 {
		return fmt.Errorf("join: %+v %v", joined, err)
	}
	_ = ws.SetReadDeadline(time.Time{})
	// Both connections exist before the reader starts, which uses them.
	if p.sub, err = api.NewPeerConnection(webrtc.Configuration{}); err != nil {
		return err
	}
	p.sub.OnTrack(p.onTrack)
	p.sub.OnICECandidate(func(cand *webrtc.ICECandidate) { p.sendCandidate("subscribe", cand) })
	if p.publishes {
		if err := p.newTracks(api); err != nil {
			return err
		}
		p.pub.OnICECandidate(func(cand *webrtc.ICECandidate) { p.sendCandidate("publish", cand) })
	}
	go p.readRTCD()
	go p.pingRTCD()
	if !p.publishes {
		return nil
	}
	offer, err := p.pub.CreateOffer(nil)
	if err != nil {
		return err
	}
	if err := p.pub.SetLocalDescription(offer); err != nil {
		return err
	}
	tracks := []map[string]string{{"track_id": p.videoTr.ID(), "source": "camera"}}
	if p.audioTr != nil {
		tracks = append(tracks, map[string]string{"track_id": p.audioTr.ID(), "source": "microphone"})
	}
	return p.write(map[string]any{"type": "publish.offer", "sdp": offer.SDP, "tracks": tracks})
}

func (p *mediaPeer) sendCandidate(target string, cand *webrtc.ICECandidate) {
	if cand != nil {
		_ = p.write(map[string]any{"type": "candidate", "target": target, "candidate": cand.ToJSON()})
	}
}

// mediaPingInterval keeps the socket inside the node's heartbeat timeout.
const mediaPingInterval = 2 * time.Second

func (p *mediaPeer) pingRTCD() {
	t := time.NewTicker(mediaPingInterval)
	defer t.Stop()
	for {
		select {
		case <-p.closed:
			return
		case <-t.C:
		}
		if p.write(map[string]any{"type": "ping"}) != nil {
			return
		}
	}
}

// readRTCD answers the node's signalling.
func (p *mediaPeer) readRTCD() {
	early := map[string][]webrtc.ICECandidateInit{}
	for {
		var m struct {
			Type      string                   `json:"type"`
			SDP       string                   `json:"sdp"`
			Target    string                   `json:"target"`
			Code      string                   `json:"code"`
			Message   string                   `json:"message"`
			Candidate *webrtc.ICECandidateInit `json:"candidate"`
		}
		if err := p.ws.ReadJSON(&m); err != nil {
			return
		}
		pc := p.sub
		if m.Target == "publish" || m.Type == "publish.answer" {
			pc = p.pub
		}
		switch m.Type {
		case "error", "track.refused":
			p.nodeError.Store(m.Type + " " + m.Code + ": " + m.Message)
			continue
		case "publish.answer":
			if pc == nil {
				continue
			}
			_ = pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: m.SDP})
		case "subscribe.offer":
			if pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: m.SDP}) != nil {
				continue
			}
			answer, err := pc.CreateAnswer(nil)
			if err == nil && pc.SetLocalDescription(answer) == nil {
				_ = p.write(map[string]any{"type": "subscribe.answer", "sdp": answer.SDP})
			}
		case "candidate":
			if m.Candidate == nil || pc == nil {
				continue
			}
			if pc.RemoteDescription() == nil {
				early[m.Target] = append(early[m.Target], *m.Candidate)
				continue
			}
			_ = pc.AddICECandidate(*m.Candidate)
			continue
		default:
			continue
		}
		target := "subscribe"
		if pc == p.pub {
			target = "publish"
		}
		for _, c := range early[target] {
			_ = pc.AddICECandidate(c)
		}
		delete(early, target)
	}
}
