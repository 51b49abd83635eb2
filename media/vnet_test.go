package media

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/pion/interceptor/pkg/report"
	"github.com/pion/logging"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/sdp/v3"
	"github.com/pion/transport/v5/vnet"
	"github.com/pion/turn/v5"
	"github.com/pion/webrtc/v4"

	"rtcd/metrics"
)

// Tests on pion's virtual network: the node and its clients exchange media
// over vnet, where a test can limit a client's bandwidth or drop its
// packets, while signalling stays on the real loopback WebSocket. vnet
// addresses are in TEST-NET-1 (192.0.2.0/24) and never leave the process.

const vnetNodeIP = "192.0.2.1"

// vnetWorld is a router with the node's network on it.
type vnetWorld struct {
	router  *vnet.Router
	nodeNet *vnet.Net
	// metrics are the node's collectors, for tests that read them.
	metrics *metrics.Node
}

func newVNetWorld(t *testing.T) *vnetWorld {
	t.Helper()
	lf := logging.NewDefaultLoggerFactory()
	lf.DefaultLogLevel = logging.LogLevelError
	router, err := vnet.NewRouter(&vnet.RouterConfig{CIDR: "192.0.2.0/24", LoggerFactory: lf})
	if err != nil {
		t.Fatal(err)
	}
	nodeNet, err := vnet.NewNet(&vnet.NetConfig{StaticIPs: []string{vnetNodeIP}})
	if err != nil {
		t.Fatal(err)
	}
	if err := router.AddNet(nodeNet); err != nil {
		t.Fatal(err)
	}
	return &vnetWorld{router: router, nodeNet: nodeNet, metrics: metrics.NewNode("test")}
}

// client adds a client network at ip; wrap (optional) puts a filter in
// front of its inbound traffic.
func (w *vnetWorld) client(t *testing.T, ip string, wrap func(*vnet.Net) vnet.NIC) *vnet.Net {
	t.Helper()
	n, err := vnet.NewNet(&vnet.NetConfig{StaticIPs: []string{ip}})
	if err != nil {
		t.Fatal(err)
	}
	var nic vnet.NIC = n
	if wrap != nil {
		nic = wrap(n)
	}
	if err := w.router.AddNet(nic); err != nil {
		t.Fatal(err)
	}
	return n
}

// start starts the router and a node whose WebRTC runs on the vnet.
func (w *vnetWorld) start(t *testing.T) *testNode {
	return w.startWith(t, nil)
}

// startWith is start, with the node's WebRTC config adjusted by mutate.
func (w *vnetWorld) startWith(t *testing.T, mutate func(*WebRTCConfig)) *testNode {
	t.Helper()
	if err := w.router.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.router.Stop() })
	udp, err := w.nodeNet.ListenPacket("udp4", vnetNodeIP+":5000")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &WebRTCConfig{UDP: udp, Net: w.nodeNet}
	if mutate != nil {
		mutate(cfg)
	}
	return newTestNode(t, func(c *NodeConfig) { c.WebRTC = cfg; c.Metrics = w.metrics.Media })
}

// vnetClientAPI is a client API on a vnet network, sending receiver
// reports every reportEvery.
func vnetClientAPI(t *testing.T, n *vnet.Net, reportEvery time.Duration) *webrtc.API {
	return testClientAPI(t, func(se *webrtc.SettingEngine) {
		se.SetNet(n)
		se.SetIPFilter(func(ip net.IP) bool { return !ip.IsLoopback() })
		se.SetIncludeLoopbackCandidate(false)
	}, webrtc.WithReportReceiverOptions(report.ReceiverInterval(reportEvery)))
}

// simulcastPublisher sends three VP8-shaped layers of one camera track,
// answering keyframe requests per layer.
type simulcastPublisher struct {
	c      *rtcClient
	tracks []*webrtc.TrackLocalStaticRTP
	rids   []string
	mid    string
	midID  uint8
	ridID  uint8

	mu         sync.Mutex
	keyPending map[string]bool
	seq        map[string]uint16
	counter    uint32
}

func (c *rtcClient) publishSimulcast(rids []string) *simulcastPublisher {
	c.t.Helper()
	pc, err := c.api.NewPeerConnection(c.config)
	if err != nil {
		c.t.Fatal(err)
	}
	pc.OnICECandidate(func(cand *webrtc.ICECandidate) { c.sendCandidate(targetPublish, cand) })
	c.pub = pc
	sp := &simulcastPublisher{c: c, rids: rids, keyPending: map[string]bool{}, seq: map[string]uint16{}}
	var sender *webrtc.RTPSender
	for i, rid := range rids {
		tr, err := webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8}, c.name+"-camera", c.name, webrtc.WithRTPStreamID(rid))
		if err != nil {
			c.t.Fatal(err)
		}
		sp.tracks = append(sp.tracks, tr)
		sp.keyPending[rid] = true // every layer starts with a keyframe
		if i == 0 {
			if sender, err = pc.AddTrack(tr); err != nil {
				c.t.Fatal(err)
			}
		} else if err := sender.AddEncoding(tr); err != nil {
			c.t.Fatal(err)
		}
	}
	for _, rid := range rids {
		go func() {
			for {
				pkts, _, err := sender.ReadSimulcastRTCP(rid)
				if err != nil {
					return
				}
				for _, p := range pkts {
					if _, ok := p.(*rtcp.PictureLossIndication); ok {
						c.keyframeRequests.Add(1)
						sp.mu.Lock()
						sp.keyPending[rid] = true
						sp.mu.Unlock()
					}
				}
			}
		}()
	}
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := pc.SetLocalDescription(offer); err != nil {
		c.t.Fatal(err)
	}
	c.write(map[string]any{"type": typePublishOffer, "sdp": offer.SDP,
		"tracks": []trackDecl{{TrackID: c.name + "-camera", Source: SourceCamera, Layers: rids}}})
	for _, ext := range sender.GetParameters().HeaderExtensions {
		switch ext.URI {
		case sdp.SDESMidURI:
			sp.midID = uint8(ext.ID)
		case sdp.SDESRTPStreamIDURI:
			sp.ridID = uint8(ext.ID)
		}
	}
	for _, tr := range pc.GetTransceivers() {
		sp.mid = tr.Mid()
	}
	return sp
}

// simulcastPayloadBytes is each layer's payload per 20 ms tick: about 160
// kbit/s, 480 kbit/s and 1.4 Mbit/s.
var simulcastPayloadBytes = []int{400, 1200, 3 * 1200}

// tick sends 20 ms of every layer. A packet's payload is a VP8 payload
// descriptor (S=1, picture ID), the VP8 header byte (P=0 on a keyframe),
// the layer, and a counter.
func (sp *simulcastPublisher) tick() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.counter++
	for layer, rid := range sp.rids {
		remaining := simulcastPayloadBytes[layer]
		first := true
		for remaining > 0 {
			size := min(remaining, 1200)
			remaining -= size
			payload := make([]byte, size)
			payload[0], payload[1], payload[2] = 0x80, 0x80, byte(sp.counter&0x7F)
			if first {
				payload[0] |= 0x10 // S: the start of a frame
			}
			payload[3] = 1
			if first && sp.keyPending[rid] {
				payload[3] = 0
				sp.keyPending[rid] = false
			}
			payload[4] = byte(layer)
			binary.BigEndian.PutUint32(payload[5:], sp.counter)
			sp.seq[rid]++
			h := rtp.Header{Version: 2, SequenceNumber: sp.seq[rid], Timestamp: sp.counter * 1800, Marker: remaining == 0}
			if sp.midID != 0 && sp.ridID != 0 {
				_ = h.SetExtension(sp.midID, []byte(sp.mid))
				_ = h.SetExtension(sp.ridID, []byte(rid))
			}
			_ = sp.tracks[layer].WriteRTP(&rtp.Packet{Header: h, Payload: payload})
			first = false
		}
	}
}

// layerWatch records what a simulcast subscriber receives: packets per
// layer, and layer changes that did not happen at a keyframe.
type layerWatch struct {
	mu          sync.Mutex
	perLayer    [3]int
	last        int
	badSwitches int
	switches    int
	timeline    []int // the layer of each second's last packet
}

func (w *layerWatch) watch(remote *webrtc.TrackRemote) {
	w.mu.Lock()
	w.last = -1
	w.mu.Unlock()
	var highest uint16
	started := false
	for {
		pkt, _, err := remote.ReadRTP()
		if err != nil {
			return
		}
		if len(pkt.Payload) < 9 {
			continue
		}
		// A retransmission (NACK) or a reordered packet is older than what
		// came before: it says nothing about where the stream switched.
		if started && int16(pkt.SequenceNumber-highest) <= 0 {
			continue
		}
		started, highest = true, pkt.SequenceNumber
		layer := int(pkt.Payload[4])
		key := pkt.Payload[0]&0x10 != 0 && pkt.Payload[3]&0x01 == 0
		w.mu.Lock()
		if layer >= 0 && layer < 3 {
			w.perLayer[layer]++
		}
		if layer != w.last {
			w.switches++
			if !key {
				w.badSwitches++
			}
			w.last = layer
		}
		w.mu.Unlock()
	}
}

func (w *layerWatch) current() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// TestMediaSimulcastLayerPerSubscriber: a publisher sends three simulcast
// layers; a subscriber with room to spare climbs to the top layer, while a
// subscriber whose link carries 250 kbit/s gets the low layer (it may
// probe the middle one, never the top), and neither sees a layer change
// anywhere but at a keyframe.
func TestMediaSimulcastLayerPerSubscriber(t *testing.T) {
	w := newVNetWorld(t)
	pubNet := w.client(t, "192.0.2.10", nil)
	freeNet := w.client(t, "192.0.2.11", nil)
	limitedNet := w.client(t, "192.0.2.12", func(n *vnet.Net) vnet.NIC {
		q, err := vnet.NewQueue(n, vnet.NewTBFQueue(250_000, 4000, 12_000))
		if err != nil {
			t.Fatal(err)
		}
		return q
	})
	tn := w.start(t)
	const reportEvery = 500 * time.Millisecond
	free := tn.joinRTC(t, "free", "1", "free", "free", "subscriber", vnetClientAPI(t, freeNet, reportEvery))
	limited := tn.joinRTC(t, "limited", "1", "limited", "limited", "subscriber", vnetClientAPI(t, limitedNet, reportEvery))
	watches := map[*rtcClient]*layerWatch{free: {}, limited: {}}
	for c, lw := range watches {
		c.sub.OnTrack(func(remote *webrtc.TrackRemote, _ *webrtc.RTPReceiver) { lw.watch(remote) })
	}
	pub := tn.joinRTC(t, "pubA", "1", "pubA", "pubA", "publisher", vnetClientAPI(t, pubNet, reportEvery))
	sp := pub.publishSimulcast([]string{"q", "h", "f"})

	stop := make(chan struct{})
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				sp.tick()
			}
		}
	}()
	defer func() { close(stop); <-sent }()

	m := free.next(typeParticipantUpdated, func(m v2Msg) bool { return len(m.Tracks) == 1 && m.Tracks[0].Layers == 3 })
	if m.Tracks[0].Source != SourceCamera {
		t.Fatalf("tracks %+v", m.Tracks)
	}
	// Reports every 0.5 s and three clean ones per step: the free
	// subscriber can reach the top within a few seconds.
	defer func() {
		tn.node.rtc.mu.Lock()
		for _, sr := range tn.node.rtc.rooms {
			for _, p := range sr.peers {
				for _, d := range p.downs {
					t.Logf("node copy for %s: current %d target %d sent %d dropped %d switches %d backoff %d", p.id.ParticipantID, d.current.Load(), d.target.Load(), d.sent.Load(), d.dropped.Load(), d.switches.Load(), d.upgradeBackoff)
				}
			}
		}
		tn.node.rtc.mu.Unlock()
	}()
	waitFor(t, "the free subscriber to reach the top layer", func() bool { return watches[free].current() == 2 })
	time.Sleep(3 * time.Second) // let the limited one probe and fall back
	type seen struct {
		perLayer      [3]int
		switches, bad int
	}
	snapshot := func(c *rtcClient) seen {
		lw := watches[c]
		lw.mu.Lock()
		defer lw.mu.Unlock()
		return seen{lw.perLayer, lw.switches, lw.badSwitches}
	}
	lim, fr := snapshot(limited), snapshot(free)
	t.Logf("limited subscriber: packets per layer %v, %d switches; free: %v, %d switches", lim.perLayer, lim.switches, fr.perLayer, fr.switches)
	if lim.perLayer[0] == 0 || lim.perLayer[2] != 0 || lim.perLayer[0] < lim.perLayer[1] {
		t.Fatalf("limited subscriber got packets per layer %v: want mostly the low layer, never the top", lim.perLayer)
	}
	for name, v := range map[string]seen{"limited": lim, "free": fr} {
		if v.bad != 0 {
			t.Errorf("%s: %d of %d layer changes were not at a keyframe", name, v.bad, v.switches)
		}
	}
	// The free subscriber climbed two layers at least: the metrics count
	// each switch up.
	if got := metricValue(t, w.metrics.Registry, "rtcd_media_layer_switches_total", map[string]string{"direction": metrics.MediaLayerUp}); got < 2 {
		t.Errorf("layer switches up = %v, want at least the free subscriber's 2", got)
	}
}

// TestMediaThroughEmbeddedTURN: the network lets clients reach the node
// only on its TURN port; with the credentials joined hands them, they
// publish and receive through relayed candidates.
func TestMediaThroughEmbeddedTURN(t *testing.T) {
	const turnPort = 3478
	w := newVNetWorld(t)
	pubNet := w.client(t, "192.0.2.10", nil)
	subNet := w.client(t, "192.0.2.11", nil)
	node := net.ParseIP(vnetNodeIP)
	w.router.AddChunkFilter(func(c vnet.Chunk) bool {
		src, dst := c.SourceAddr().(*net.UDPAddr), c.DestinationAddr().(*net.UDPAddr)
		if src == nil || dst == nil {
			return false
		}
		switch {
		case src.IP.Equal(node) && dst.IP.Equal(node):
			return true // the TURN server's relays talking to the node's media port
		case dst.IP.Equal(node):
			return dst.Port == turnPort
		case src.IP.Equal(node):
			return src.Port == turnPort
		}
		return true
	})
	turnConn, err := w.nodeNet.ListenPacket("udp4", net.JoinHostPort(vnetNodeIP, "3478"))
	if err != nil {
		t.Fatal(err)
	}
	tn := w.startWith(t, func(c *WebRTCConfig) {
		c.TURN = &TURNConfig{UDP: turnConn, Host: vnetNodeIP, Port: turnPort, RelayIP: node, PeerIPs: []net.IP{node}, Net: w.nodeNet}
	})
	sub := tn.joinRTC(t, "sub", "1", "sub", "sub", "subscriber", vnetClientAPI(t, subNet, time.Second))
	if len(sub.joined.ICEServers) != 1 || len(sub.joined.ICEServers[0].URLs) != 1 ||
		sub.joined.ICEServers[0].URLs[0] != "turn:192.0.2.1:3478?transport=udp" || sub.joined.ICEServers[0].Credential == "" {
		t.Fatalf("joined.ice_servers = %+v", sub.joined.ICEServers)
	}
	pub := tn.joinRTC(t, "pubA", "1", "pubA", "pubA", "publisher", vnetClientAPI(t, pubNet, time.Second))
	pub.publish(SourceCamera)
	tag := pub.local[0].tag
	counter := pump(t, []*rtcClient{pub}, 1, "media through TURN", func() bool { return sub.highest(tag) > 0 })
	sendWindow([]*rtcClient{pub}, counter, 50)
	waitFor(t, "a window through TURN", func() bool { got, _ := sub.countIn(tag, counter, counter+49); return got == 50 })
	for _, pc := range []*webrtc.PeerConnection{pub.pub, sub.sub} {
		pair, err := pc.SCTP().Transport().ICETransport().GetSelectedCandidatePair()
		if err != nil || pair == nil || pair.Local.Typ != webrtc.ICECandidateTypeRelay {
			t.Fatalf("selected pair %v (%v), want a relayed local candidate", pair, err)
		}
	}
	// Both relayed connections hold an allocation on the node's TURN
	// server (the publisher's idle subscribe connection may hold one too).
	turnAllocations := func() float64 { return metricValue(t, w.metrics.Registry, "rtcd_media_turn_allocations", nil) }
	if got := turnAllocations(); got < 2 {
		t.Fatalf("rtcd_media_turn_allocations = %v during a relayed call, want at least 2", got)
	}
	pub.close()
	sub.close()
	waitFor(t, "the clients' allocations to be released", func() bool { return turnAllocations() == 0 })
}

// TestTURNRelaysOnlyToTheNode: the embedded TURN server refuses a
// permission for any peer but the node's media address.
func TestTURNRelaysOnlyToTheNode(t *testing.T) {
	cfg := TURNConfig{RelayIP: net.IPv4(127, 0, 0, 1), PeerIPs: []net.IP{net.IPv4(127, 0, 0, 1)}}
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.UDP, cfg.Host, cfg.Port = udp, "127.0.0.1", udp.LocalAddr().(*net.UDPAddr).Port
	ts, err := startTURN(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ts.close()
	creds := ts.iceServers(participantIdentity{ParticipantID: "part_a"})[0]
	clientConn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer clientConn.Close()
	client, err := turn.NewClient(&turn.ClientConfig{
		STUNServerAddr: udp.LocalAddr().String(), TURNServerAddr: udp.LocalAddr().String(),
		Conn: clientConn, Username: creds.Username, Password: creds.Credential, Realm: turnRealm,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.Listen(); err != nil {
		t.Fatal(err)
	}
	relay, err := client.Allocate()
	if err != nil {
		t.Fatalf("allocate with the handed-out credentials: %v", err)
	}
	defer relay.Close()
	if err := client.CreatePermission(&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}); err != nil {
		t.Fatalf("permission to the node: %v", err)
	}
	if err := client.CreatePermission(&net.UDPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 9}); err == nil {
		t.Fatal("the TURN server granted a permission to an address that is not the node")
	}
	// Credentials for another secret are refused.
	other, err := startTURN(cfg2(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.close()
	bad := other.iceServers(participantIdentity{ParticipantID: "part_a"})[0]
	c2conn, _ := net.ListenPacket("udp4", "127.0.0.1:0")
	defer c2conn.Close()
	c2, err := turn.NewClient(&turn.ClientConfig{TURNServerAddr: udp.LocalAddr().String(), Conn: c2conn, Username: bad.Username, Password: bad.Credential, Realm: turnRealm})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := c2.Listen(); err != nil {
		t.Fatal(err)
	}
	if r, err := c2.Allocate(); err == nil {
		r.Close()
		t.Fatal("an allocation with forged credentials succeeded")
	}
}

// cfg2 is a TURN config on a fresh loopback port (its own secret).
func cfg2(t *testing.T) TURNConfig {
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return TURNConfig{UDP: udp, Host: "127.0.0.1", Port: udp.LocalAddr().(*net.UDPAddr).Port, RelayIP: net.IPv4(127, 0, 0, 1), PeerIPs: []net.IP{net.IPv4(127, 0, 0, 1)}}
}
