package media

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pion/ice/v4"
	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/sdp/v3"
	"github.com/pion/webrtc/v4"
	"rtcd/auth"
)

// This file is a WebRTC test client built on pion: it speaks protocol 2
// over the node's WebSocket, publishes tracks with a payload that can be
// checked byte for byte, and counts what it receives.

// newWebRTCNode starts a test node with WebRTC on a loopback UDP port.
func newWebRTCNode(t *testing.T, mutate func(*NodeConfig)) *testNode {
	t.Helper()
	// Sockets as rtcd serve opens them for --media-listen=127.0.0.1:0.
	cfg, err := OpenWebRTC(NetworkOptions{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cfg.UDP.Close(); cfg.TCP.Close() })
	return newTestNode(t, func(c *NodeConfig) {
		c.WebRTC = cfg
		if mutate != nil {
			mutate(c)
		}
	})
}

// tokenAs is a media token with a role.
func (tn *testNode) tokenAs(room, participant, session, role string) string {
	c := tn.claims(room, participant, session)
	c.Role = role
	return tn.keys.SignMediaToken(c)
}

// testClientAPI is the pion API of a test client: loopback only, no mDNS,
// pion's default interceptors (NACK, reports).
func testClientAPI(t *testing.T, mutate func(*webrtc.SettingEngine), opts ...webrtc.InterceptorOption) *webrtc.API {
	t.Helper()
	me := &webrtc.MediaEngine{}
	if err := me.RegisterDefaultCodecs(); err != nil {
		t.Fatal(err)
	}
	if err := me.RegisterHeaderExtension(webrtc.RTPHeaderExtensionCapability{URI: sdp.AudioLevelURI}, webrtc.RTPCodecTypeAudio); err != nil {
		t.Fatal(err)
	}
	ir := &interceptor.Registry{}
	if err := webrtc.RegisterDefaultInterceptorsWithOptions(me, ir, opts...); err != nil {
		t.Fatal(err)
	}
	se := webrtc.SettingEngine{}
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	se.SetIncludeLoopbackCandidate(true)
	se.SetIPFilter(func(ip net.IP) bool { return ip.IsLoopback() })
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	if mutate != nil {
		mutate(&se)
	}
	return webrtc.NewAPI(webrtc.WithMediaEngine(me), webrtc.WithInterceptorRegistry(ir), webrtc.WithSettingEngine(se))
}

// v2Msg holds the fields of any protocol 2 server message.
type v2Msg struct {
	serverMsg
	SDP          string          `json:"sdp"`
	Target       string          `json:"target"`
	Candidate    json.RawMessage `json:"candidate"`
	TrackID      string          `json:"track_id"`
	Source       string          `json:"source"`
	Tracks       []TrackInfo     `json:"tracks"`
	Speaking     bool            `json:"speaking"`
	ICEServers   []ICEServer     `json:"ice_servers"`
	Quality      string          `json:"quality"`
	LossPercent  float64         `json:"loss_percent"`
	RTTMillis    float64         `json:"rtt_ms"`
	JitterMillis float64         `json:"jitter_ms"`
}

// rtcClient is one joined protocol 2 client.
type rtcClient struct {
	t      *testing.T
	name   string
	ws     *websocket.Conn
	api    *webrtc.API
	joined v2Msg
	config webrtc.Configuration // with the ICE servers joined named

	writeMu sync.Mutex
	pub     *webrtc.PeerConnection
	sub     *webrtc.PeerConnection
	local   []*localTrack

	events chan v2Msg // everything but signalling, in order
	done   chan struct{}

	keyframeRequests atomic.Int64 // PLI and FIR the node sent this publisher

	mu       sync.Mutex
	received map[string]*recvTrack // by the node's track ID
	remotes  map[string]*webrtc.TrackRemote
	// keyframeTimes is when each keyframe request reached this publisher.
	keyframeTimes []time.Time
	paused        chan struct{} // while non-nil, track readers wait on it
}

// localTrack is a published track and the tag its payloads carry.
type localTrack struct {
	track  *webrtc.TrackLocalStaticRTP
	source string
	tag    uint32
	seq    uint16
	ts     uint32

	audioLevelID uint8 // the audio level extension's ID, once looked up
}

// recvTrack counts what arrived on one subscribed track.
type recvTrack struct {
	publisher string
	kind      string
	packets   int
	bad       int               // payloads that did not match what was sent
	counters  map[uint32]uint32 // tag -> highest counter seen, for liveness
	byTag     map[uint32]map[uint32]bool
}

func (tn *testNode) joinRTC(t *testing.T, name, room, participant, session, role string, api *webrtc.API) *rtcClient {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.Dial(tn.url, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	resp.Body.Close()
	if api == nil {
		api = testClientAPI(t, nil)
	}
	c := &rtcClient{t: t, name: name, ws: ws, api: api, events: make(chan v2Msg, 1024), done: make(chan struct{}),
		received: make(map[string]*recvTrack), remotes: make(map[string]*webrtc.TrackRemote)}
	c.write(map[string]any{"type": "join", "media_token": tn.tokenAs(room, participant, session, role), "protocol": 2})
	if tn.awaitAdmission {
		tn.admit(t, session)
	}
	_ = ws.SetReadDeadline(time.Now().Add(testWaitSeconds * time.Second))
	if err := ws.ReadJSON(&c.joined); err != nil || c.joined.Type != typeJoined {
		t.Fatalf("%s: join: %+v %v", name, c.joined, err)
	}
	_ = ws.SetReadDeadline(time.Time{})
	for _, s := range c.joined.ICEServers {
		c.config.ICEServers = append(c.config.ICEServers, webrtc.ICEServer{URLs: s.URLs, Username: s.Username, Credential: s.Credential})
	}
	c.sub, err = api.NewPeerConnection(c.config)
	if err != nil {
		t.Fatal(err)
	}
	c.sub.OnICECandidate(func(cand *webrtc.ICECandidate) { c.sendCandidate(targetSubscribe, cand) })
	c.sub.OnTrack(c.onTrack)
	go c.readLoop()
	go c.pingLoop()
	t.Cleanup(c.close)
	return c
}

func (c *rtcClient) close() {
	select {
	case <-c.done:
	default:
		close(c.done)
	}
	c.resume()
	_ = c.ws.Close()
	if c.pub != nil {
		_ = c.pub.Close()
	}
	_ = c.sub.Close()
}

func (c *rtcClient) write(v any) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(testWaitSeconds * time.Second))
	_ = c.ws.WriteJSON(v)
}

func (c *rtcClient) sendCandidate(target string, cand *webrtc.ICECandidate) {
	if cand == nil {
		return
	}
	c.write(map[string]any{"type": typeCandidate, "target": target, "candidate": cand.ToJSON()})
}

// pingLoop keeps the socket alive past the heartbeat timeout (real time).
func (c *rtcClient) pingLoop() {
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
			c.write(map[string]any{"type": typePing})
		}
	}
}

// readLoop answers signalling and queues every other message on events.
func (c *rtcClient) readLoop() {
	defer close(c.events)
	fail := func(format string, args ...any) {
		select {
		case <-c.done: // the test is over; its connections are closing
		default:
			c.t.Errorf(format, args...)
		}
	}
	for {
		var m v2Msg
		if err := c.ws.ReadJSON(&m); err != nil {
			return
		}
		switch m.Type {
		case typePong:
		case typePublishAnswer:
			if err := c.pub.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: m.SDP}); err != nil {
				fail("%s: publish answer: %v", c.name, err)
			}
		case typeSubscribeOffer:
			if err := c.sub.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: m.SDP}); err != nil {
				fail("%s: subscribe offer: %v", c.name, err)
				continue
			}
			answer, err := c.sub.CreateAnswer(nil)
			if err == nil {
				err = c.sub.SetLocalDescription(answer)
			}
			if err != nil {
				fail("%s: subscribe answer: %v", c.name, err)
				continue
			}
			c.write(map[string]any{"type": typeSubscribeAnswer, "sdp": answer.SDP})
		case typeCandidate:
			var init webrtc.ICECandidateInit
			_ = json.Unmarshal(m.Candidate, &init)
			pc := c.sub
			if m.Target == targetPublish {
				pc = c.pub
			}
			if pc != nil {
				_ = pc.AddICECandidate(init)
			}
		default:
			select {
			case c.events <- m:
			default:
				fail("%s: events queue full", c.name)
			}
		}
	}
}

// publish adds tracks (by source) and sends the publish offer.
func (c *rtcClient) publish(sources ...string) {
	c.t.Helper()
	if c.pub == nil {
		pc, err := c.api.NewPeerConnection(c.config)
		if err != nil {
			c.t.Fatal(err)
		}
		pc.OnICECandidate(func(cand *webrtc.ICECandidate) { c.sendCandidate(targetPublish, cand) })
		c.pub = pc
	}
	for _, s := range sources {
		mime := webrtc.MimeTypeVP8
		if s == SourceMicrophone {
			mime = webrtc.MimeTypeOpus
		}
		tag := uint32(len(c.local)+1) | uint32(c.name[len(c.name)-1])<<8
		tr, err := webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: mime}, fmt.Sprintf("%s-%s", c.name, s), c.name)
		if err != nil {
			c.t.Fatal(err)
		}
		sender, err := c.pub.AddTrack(tr)
		if err != nil {
			c.t.Fatal(err)
		}
		go func() { // read RTCP so the interceptors run, counting keyframe requests
			for {
				pkts, _, err := sender.ReadRTCP()
				if err != nil {
					return
				}
				for _, p := range pkts {
					switch p.(type) {
					case *rtcp.PictureLossIndication, *rtcp.FullIntraRequest:
						c.keyframeRequests.Add(1)
						c.mu.Lock()
						c.keyframeTimes = append(c.keyframeTimes, time.Now())
						c.mu.Unlock()
					}
				}
			}
		}()
		c.local = append(c.local, &localTrack{track: tr, source: s, tag: tag})
	}
	c.offer()
}

// offer sends a publish offer declaring every local track.
func (c *rtcClient) offer() {
	c.t.Helper()
	decls := []trackDecl{}
	for _, l := range c.local {
		decls = append(decls, trackDecl{TrackID: l.track.ID(), Source: l.source})
	}
	offer, err := c.pub.CreateOffer(nil)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := c.pub.SetLocalDescription(offer); err != nil {
		c.t.Fatal(err)
	}
	c.write(map[string]any{"type": typePublishOffer, "sdp": offer.SDP, "tracks": decls})
}

// payloadFor is the payload of packet counter on the track tagged tag: a
// header (tag, counter) and bytes derived from both, so a receiver can
// check every byte.
func payloadFor(tag, counter uint32, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint32(b[0:], tag)
	binary.BigEndian.PutUint32(b[4:], counter)
	for i := 8; i < size; i++ {
		b[i] = byte(uint32(i)*7 + tag*13 + counter*31)
	}
	return b
}

// payloadSize varies by counter so sizes differ across packets.
func payloadSize(counter uint32) int { return 200 + int(counter%5)*150 }

// send writes counter's packet on every local track.
func (c *rtcClient) send(counter uint32) {
	for _, l := range c.local {
		l.seq++
		l.ts += 3000
		pkt := &rtp.Packet{Header: rtp.Header{Version: 2, SequenceNumber: l.seq, Timestamp: l.ts, Marker: true},
			Payload: payloadFor(l.tag, counter, payloadSize(counter))}
		_ = l.track.WriteRTP(pkt)
	}
}

func (c *rtcClient) onTrack(remote *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
	c.mu.Lock()
	rt := c.received[remote.ID()]
	if rt == nil {
		rt = &recvTrack{publisher: remote.StreamID(), kind: remote.Kind().String(), counters: map[uint32]uint32{}, byTag: map[uint32]map[uint32]bool{}}
		c.received[remote.ID()] = rt
	}
	c.remotes[remote.ID()] = remote
	c.mu.Unlock()
	for {
		pkt, _, err := remote.ReadRTP()
		if err != nil {
			return
		}
		c.mu.Lock()
		paused := c.paused
		c.mu.Unlock()
		if paused != nil {
			<-paused
		}
		c.mu.Lock()
		rt.packets++
		if len(pkt.Payload) >= 8 {
			tag := binary.BigEndian.Uint32(pkt.Payload[0:])
			counter := binary.BigEndian.Uint32(pkt.Payload[4:])
			if !bytes.Equal(pkt.Payload, payloadFor(tag, counter, payloadSize(counter))) {
				rt.bad++
			} else {
				if rt.byTag[tag] == nil {
					rt.byTag[tag] = map[uint32]bool{}
				}
				rt.byTag[tag][counter] = true
				if counter > rt.counters[tag] {
					rt.counters[tag] = counter
				}
			}
		} else {
			rt.bad++
		}
		c.mu.Unlock()
	}
}

// pause makes this client stop reading its tracks until resume.
func (c *rtcClient) pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused == nil {
		c.paused = make(chan struct{})
	}
}

func (c *rtcClient) resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused != nil {
		close(c.paused)
		c.paused = nil
	}
}

// snapshot returns, per publisher tag, the counters received in [from, to].
func (c *rtcClient) countIn(tag, from, to uint32) (got int, bad int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rt := range c.received {
		bad += rt.bad
		for counter := range rt.byTag[tag] {
			if counter >= from && counter <= to {
				got++
			}
		}
	}
	return got, bad
}

// highest is the highest counter received for tag, on any track.
func (c *rtcClient) highest(tag uint32) uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var h uint32
	for _, rt := range c.received {
		if rt.counters[tag] > h {
			h = rt.counters[tag]
		}
	}
	return h
}

// next returns the next non-signalling message of the given type,
// skipping others for which skip returns true.
func (c *rtcClient) next(typ string, match func(v2Msg) bool) v2Msg {
	c.t.Helper()
	deadline := time.After(testWaitSeconds * time.Second)
	for {
		select {
		case m, ok := <-c.events:
			if !ok {
				c.t.Fatalf("%s: socket closed waiting for %s", c.name, typ)
			}
			if (typ == "" || m.Type == typ) && (match == nil || match(m)) {
				return m
			}
		case <-deadline:
			c.t.Fatalf("%s: no %s within %d s", c.name, typ, testWaitSeconds)
		}
	}
}

// waitFor polls cond (driven by packets arriving on real networks) until it
// holds or the wait bound passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * testWaitSeconds * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var _ = auth.MediaClaims{}
