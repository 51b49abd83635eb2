package media

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/pion/ice/v4"
	"github.com/pion/interceptor"
	"github.com/pion/logging"
	"github.com/pion/sdp/v3"
	"github.com/pion/transport/v5"
	"github.com/pion/webrtc/v4"
	"rtcd/metrics"
)

// Bounds of the WebRTC side. Each is part of the documented protocol
// (docs/media-protocol.md) or sizes an internal queue.
const (
	// maxSignalFrameBytes bounds one client frame once a socket has joined
	// with protocol 2: an SDP offer with three simulcast video layers and
	// audio is 6-10 KiB, so this leaves room without letting a client make
	// the node parse megabytes.
	maxSignalFrameBytes = 64 * 1024
	// maxTracksPerParticipant bounds what one participant publishes: one
	// microphone, one camera and one screen share.
	maxTracksPerParticipant = 3
	// maxCandidatesPerPeer bounds the trickled ICE candidates one socket may
	// send (both connections together); a browser sends a handful.
	maxCandidatesPerPeer = 64
	// peerOpsQueue bounds the signalling operations waiting for one
	// participant's signalling goroutine. A client that fills it is
	// flooding the node with frames and is dropped (bad_message).
	peerOpsQueue = 128
	// downTrackQueuePackets bounds the RTP packets waiting to be written to
	// one subscriber's copy of one track: about 1.3 s of 1.5 Mbit/s video.
	// A subscriber whose writes stall loses its own packets past this, and
	// nobody else notices.
	downTrackQueuePackets = 256
	// rtpPacketBytes is the read buffer of one RTP packet. Pion's own
	// receive MTU is 1460; packets are never larger on a UDP path.
	rtpPacketBytes = 1500
	// keyframeRequestIntervalMillis is the least time between two keyframe
	// requests the node sends a publisher for one layer, however many
	// subscribers ask: a keyframe costs the publisher's whole uplink for a
	// moment, and one per half second heals every subscriber.
	keyframeRequestIntervalMillis = 500
)

// Track sources a client may publish, and the connect feature each needs
// (spec: connect's features audio, video, screen_share).
const (
	SourceMicrophone  = "microphone"
	SourceCamera      = "camera"
	SourceScreenShare = "screen_share"
)

// WebRTCConfig turns on the node's WebRTC side: protocol 2, publish,
// subscribe and RTP forwarding. A node without it speaks protocol 1 only.
type WebRTCConfig struct {
	// UDP is the single socket every peer's ICE runs on (pion's UDP mux).
	// Host candidates carry its address unless AnnounceIPs says otherwise.
	// Required.
	UDP net.PacketConn
	// TCP, if set, carries ICE over TCP (passive candidates on its
	// address), the fallback for networks that block UDP.
	TCP net.Listener
	// AnnounceIPs, if set, replaces the host candidates' addresses (a node
	// bound to 0.0.0.0 behind a 1:1 NAT announces its public address).
	AnnounceIPs []string
	// TURN, if set, runs the embedded TURN server; its time-limited
	// credentials are handed to each client in joined.ice_servers.
	TURN *TURNConfig
	// Net is the network pion uses; nil means the host's. Tests pass a
	// pion vnet to inject loss, bandwidth limits and blocked ports.
	Net transport.Net
	// LoopbackCandidates lets host candidates carry loopback addresses.
	// Pion leaves them out by default; a node bound to 127.0.0.1 needs
	// them.
	LoopbackCandidates bool
}

// participantIdentity is what ICEServers learns about the joining client.
type participantIdentity struct {
	RoomID, ParticipantID, SessionID string
}

// ICEServer is one entry of joined.ice_servers, in the shape of the
// browser's RTCIceServer.
type ICEServer struct {
	URLs       []string `json:"urls"`
	Username   string   `json:"username,omitempty"`
	Credential string   `json:"credential,omitempty"`
}

// rtc is the node's WebRTC side: the pion API every peer connection is
// made from, and the rooms of published tracks. It lives beside the hub:
// the hub decides who is a member, rtc forwards media between members, and
// the hub tells rtc when a member comes or goes (addPeer, peer.close).
type rtc struct {
	api  *webrtc.API
	cfg  WebRTCConfig
	log  *slog.Logger
	mux  ice.UDPMux
	node *Node
	turn *turnServer // nil without TURNConfig
	// metrics counts tracks, subscriptions and RTP; nil counts nothing.
	metrics *metrics.Media

	stopSpeaker chan struct{}
	speakerDone chan struct{}

	mu    sync.Mutex
	rooms map[string]*sfuRoom
}

// sfuRoom is one room's media: its peers and its published tracks. Guarded
// by rtc.mu.
type sfuRoom struct {
	id     string
	peers  map[string]*peer    // by participant ID
	tracks map[string]*upTrack // by track ID

	// Active speaker: the participant told as speaking ("" for none), and
	// a challenger that must stay loudest speakerConfirmIntervals in a row.
	speaker          string
	speakerCandidate string
	speakerStreak    int
}

func newRTC(cfg WebRTCConfig, logger *slog.Logger, m *metrics.Media) (*rtc, error) {
	if cfg.UDP == nil {
		return nil, errors.New("media: WebRTCConfig.UDP is required")
	}
	me := &webrtc.MediaEngine{}
	if err := me.RegisterDefaultCodecs(); err != nil {
		return nil, fmt.Errorf("media: registering codecs: %w", err)
	}
	ir := &interceptor.Registry{}
	// NACK generation and answering, sender and receiver reports, TWCC
	// feedback and the simulcast header extensions: the node relies on
	// pion's interceptors for RTCP rather than doing its own.
	if err := webrtc.RegisterDefaultInterceptors(me, ir); err != nil {
		return nil, fmt.Errorf("media: registering interceptors: %w", err)
	}
	// Audio levels (RFC 6464) pick the active speaker without decoding.
	if err := me.RegisterHeaderExtension(webrtc.RTPHeaderExtensionCapability{URI: sdp.AudioLevelURI}, webrtc.RTPCodecTypeAudio); err != nil {
		return nil, fmt.Errorf("media: registering the audio level extension: %w", err)
	}
	se := webrtc.SettingEngine{}
	lf := logging.NewDefaultLoggerFactory()
	lf.DefaultLogLevel = logging.LogLevelError
	se.LoggerFactory = lf
	if cfg.Net != nil {
		se.SetNet(cfg.Net)
	}
	mux := webrtc.NewICEUDPMux(lf.NewLogger("udpmux"), cfg.UDP)
	se.SetICEUDPMux(mux)
	networks := []webrtc.NetworkType{webrtc.NetworkTypeUDP4, webrtc.NetworkTypeUDP6}
	if cfg.TCP != nil {
		se.SetICETCPMux(webrtc.NewICETCPMux(lf.NewLogger("tcpmux"), cfg.TCP, iceTCPReadBufferPackets))
		networks = append(networks, webrtc.NetworkTypeTCP4, webrtc.NetworkTypeTCP6)
		// Host TCP candidates are gathered per interface address; keep
		// only the listener's own address so none point elsewhere.
		if ta, ok := cfg.TCP.Addr().(*net.TCPAddr); ok && !ta.IP.IsUnspecified() {
			want := ta.IP
			se.SetIPFilter(func(ip net.IP) bool { return ip.Equal(want) })
		}
	}
	se.SetNetworkTypes(networks)
	// A peer's connections are closed by its own goroutine only, the one
	// that also samples their stats (quality.go): pion's own close on a
	// DTLS close_notify runs on a goroutine of its own and clears state
	// GetStats reads without a lock (a data race in pion v4.2.26). The
	// signalling socket and ICE failure end a peer instead.
	se.DisableCloseByDTLS(true)
	// mDNS candidates would send multicast queries; the node announces
	// plain addresses.
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	se.SetIncludeLoopbackCandidate(cfg.LoopbackCandidates)
	if len(cfg.AnnounceIPs) > 0 {
		se.SetNAT1To1IPs(cfg.AnnounceIPs, webrtc.ICECandidateTypeHost)
	}
	api := webrtc.NewAPI(webrtc.WithMediaEngine(me), webrtc.WithInterceptorRegistry(ir), webrtc.WithSettingEngine(se))
	r := &rtc{api: api, cfg: cfg, log: logger, mux: mux, rooms: make(map[string]*sfuRoom), metrics: m,
		stopSpeaker: make(chan struct{}), speakerDone: make(chan struct{})}
	if cfg.TURN != nil {
		t, err := startTURN(*cfg.TURN)
		if err != nil {
			_ = mux.Close()
			return nil, err
		}
		r.turn = t
		m.SetTURNAllocations(t.server.AllocationCount)
	}
	return r, nil
}

// iceTCPReadBufferPackets bounds the packets pion buffers per ICE-TCP
// connection before its reader blocks.
const iceTCPReadBufferPackets = 64

// start runs the room-wide loops (active speaker) for node n.
func (r *rtc) start(n *Node) {
	r.node = n
	go r.speakerLoop()
}

// close stops the loops and closes the mux and the node's media sockets.
func (r *rtc) close() {
	close(r.stopSpeaker)
	<-r.speakerDone
	if r.turn != nil {
		r.metrics.SetTURNAllocations(nil)
		r.turn.close()
	}
	_ = r.mux.Close()
	_ = r.cfg.UDP.Close()
	if r.cfg.TCP != nil {
		_ = r.cfg.TCP.Close()
	}
}

// room returns the room's media state, creating it. Call with r.mu held.
func (r *rtc) roomLocked(id string) *sfuRoom {
	sr := r.rooms[id]
	if sr == nil {
		sr = &sfuRoom{id: id, peers: make(map[string]*peer), tracks: make(map[string]*upTrack)}
		r.rooms[id] = sr
	}
	return sr
}

// iceServers is joined.ice_servers for a client: the embedded TURN
// server's, with fresh credentials, if it runs.
func (r *rtc) iceServers(id participantIdentity) []ICEServer {
	if r.turn == nil {
		return nil
	}
	return r.turn.iceServers(id)
}

// featureAllows says whether role may publish source. It mirrors the
// control plane's features of a role (connect's features): a publisher may
// publish audio, video and screen share; a subscriber nothing.
func featureAllows(role, source string) bool {
	switch source {
	case SourceMicrophone, SourceCamera, SourceScreenShare:
		return role == "publisher"
	}
	return false
}

// kindOfSource is the media kind a source's track carries.
func kindOfSource(source string) webrtc.RTPCodecType {
	if source == SourceMicrophone {
		return webrtc.RTPCodecTypeAudio
	}
	return webrtc.RTPCodecTypeVideo
}

// hasRoom says whether the room has any media state (tests).
func (r *rtc) hasRoom(roomID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.rooms[roomID]
	return ok
}

// copiesOf counts the subscriber copies attached to the room's tracks
// (tests).
func (r *rtc) copiesOf(roomID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	if sr := r.rooms[roomID]; sr != nil {
		for _, up := range sr.tracks {
			n += len(up.downSet)
		}
	}
	return n
}
