package media

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/metrics"
)

// Defaults of NodeConfig, used where a field is zero.
const (
	// DefaultHeartbeatIntervalSeconds is how often clients are told to ping.
	DefaultHeartbeatIntervalSeconds = 5
	// DefaultHeartbeatTimeoutSeconds is how long a joined client may stay
	// silent before it is dropped: three missed pings, so one lost or late
	// ping never drops anybody.
	DefaultHeartbeatTimeoutSeconds = 15
	// DefaultJoinTimeoutSeconds is how long a new socket may take to send
	// its join message.
	DefaultJoinTimeoutSeconds = 5
	// DefaultMaxParticipantsPerRoom bounds one room on one node.
	DefaultMaxParticipantsPerRoom = 100
	// DefaultMaxConnections bounds the sockets one node holds, joined or not.
	DefaultMaxConnections = 10000
	// DefaultTombstoneSeconds is how long a closed room or a removed
	// participant is remembered, so a media token issued before the
	// command cannot rejoin. It must exceed the control plane's media token
	// lifetime (60 seconds by default).
	DefaultTombstoneSeconds = 900
	// DefaultPresenceIntervalSeconds is how often Run sends a presence
	// snapshot. The control plane treats a node silent for 15 seconds as
	// gone (actors.mediaPresenceTimeout), so this stays well below that.
	DefaultPresenceIntervalSeconds = 5
	// DefaultAdmissionTimeoutSeconds is how long a node that awaits
	// admission holds a join for the control plane's answer (which comes
	// once the join is durable, or at the next presence snapshot if a
	// report or an answer was lost) before it ends the socket with
	// join_timeout.
	DefaultAdmissionTimeoutSeconds = 15
)

// Upper limits of NodeConfig values, so a typo cannot configure a node
// into unbounded memory or a frozen room.
const (
	maxConfigSeconds            = 3600
	maxParticipantsPerRoomLimit = 500   // joined message ≤ 500 × ~4.3 KiB
	maxConnectionsLimit         = 20000 // presence report ≤ MaxReportBodyBytes, see httpreporter.go
	maxNodeIDBytes              = 64
)

// Internal bounds of the node.
const (
	// hubInboxOps bounds the operations queued for the hub goroutine. A
	// connection reader blocks when it is full, which pushes back on that
	// one client through TCP; the hub itself never blocks.
	hubInboxOps = 1024
	// outboundQueueMessages bounds the messages waiting to be written to
	// one client. A client whose queue is full is too slow to keep up with
	// its room and is disconnected (slow_consumer) rather than buffered
	// without bound or allowed to stall the room. The queue grows to it on
	// demand (sendQueue).
	outboundQueueMessages = 256
	// readBufferBytes is a socket's read buffer, kept while it is held. A
	// frame header and a ping fit; a longer frame is read past it straight
	// into the message. (Without it the socket would keep net/http's 4 KiB
	// reader.)
	readBufferBytes = 512
	// writeBufferBytes is the size of the write buffers. Sockets share them
	// through the upgrader's WriteBufferPool and hold one only while they
	// write a message (a longer message goes out past it, in the same
	// frame), so a held socket keeps none.
	writeBufferBytes = 4096
	// writeTimeoutSeconds bounds one socket write, including the final
	// error and close frames.
	writeTimeoutSeconds = 10
	// closeHandshakeTimeoutMillis bounds how long the node waits, after
	// sending a close frame, for the client's close frame before it drops
	// the TCP connection. Waiting lets the error and close frames reach the
	// client before the socket is torn down.
	closeHandshakeTimeoutMillis = 1000
	// heartbeatCheckIntervalSeconds is how often Run calls CheckHeartbeats.
	// A silent client is therefore dropped at most this much after its
	// HeartbeatTimeoutSeconds have passed.
	heartbeatCheckIntervalSeconds = 1
	// httpReadHeaderTimeoutSeconds, httpReadTimeoutSeconds and
	// httpIdleTimeoutSeconds are the HTTP server timeouts of Serve. The
	// WebSocket upgrade clears them on the upgraded connection, whose
	// liveness the join and heartbeat timeouts bound instead.
	httpReadHeaderTimeoutSeconds = 10
	httpReadTimeoutSeconds       = 10
	httpIdleTimeoutSeconds       = 60
	httpMaxHeaderBytes           = 16 * 1024
	// shutdownTimeoutSeconds bounds Serve's graceful stop of the HTTP server.
	shutdownTimeoutSeconds = 10
)

// NodeConfig configures a Node. Zero numeric fields take their Default.
type NodeConfig struct {
	// NodeID names the node in every report (at most 64 bytes).
	NodeID string
	// Verifier checks media tokens offline (auth.NewMediaVerifier).
	Verifier auth.MediaVerifier
	// Clock is the node's time for token expiry, join and heartbeat
	// timeouts and report times; nil means clock.Real.
	Clock clock.Clock
	// Reporter receives joins and leaves (and presence snapshots when it
	// implements PresenceReporter). Required; it must never block.
	Reporter Reporter
	// Logger receives operational logs; nil means slog.Default().
	Logger *slog.Logger
	// AwaitAdmission makes the node serve a join only once the control
	// plane has answered its join report with AdmitSession (it records
	// the join first), and end it on CloseSession: the node serves nothing
	// the control plane has not recorded as joined. Without it the node
	// admits at once and reports (a node on its own with no control
	// channel, tests of the node alone).
	AwaitAdmission bool
	// Metrics counts sessions, joins, leaves and timeouts, and with WebRTC
	// tracks, subscriptions, RTP, layer switches, keyframe requests and
	// TURN allocations; nil counts nothing.
	Metrics *metrics.Media

	HeartbeatIntervalSeconds int // default 5
	HeartbeatTimeoutSeconds  int // default 15; at least twice the interval
	JoinTimeoutSeconds       int // default 5
	MaxParticipantsPerRoom   int // default 100, at most 500
	MaxConnections           int // default 10000, at most 20000
	TombstoneSeconds         int // default 900
	PresenceIntervalSeconds  int // default 5
	AdmissionTimeoutSeconds  int // default 15

	// WebRTC, if set, turns on protocol 2: publish, subscribe and RTP
	// forwarding. Nil keeps the node to presence (protocol 1).
	WebRTC *WebRTCConfig
}

// withDefaults returns c with zero fields defaulted.
func (c NodeConfig) withDefaults() NodeConfig {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.HeartbeatIntervalSeconds, DefaultHeartbeatIntervalSeconds)
	def(&c.HeartbeatTimeoutSeconds, DefaultHeartbeatTimeoutSeconds)
	def(&c.JoinTimeoutSeconds, DefaultJoinTimeoutSeconds)
	def(&c.MaxParticipantsPerRoom, DefaultMaxParticipantsPerRoom)
	def(&c.MaxConnections, DefaultMaxConnections)
	def(&c.TombstoneSeconds, DefaultTombstoneSeconds)
	def(&c.PresenceIntervalSeconds, DefaultPresenceIntervalSeconds)
	def(&c.AdmissionTimeoutSeconds, DefaultAdmissionTimeoutSeconds)
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c NodeConfig) validate() error {
	if c.NodeID == "" || len(c.NodeID) > maxNodeIDBytes {
		return fmt.Errorf("media: NodeID must be 1 to %d bytes", maxNodeIDBytes)
	}
	if c.Reporter == nil {
		return errors.New("media: Reporter is required")
	}
	seconds := []struct {
		name  string
		value int
	}{
		{"HeartbeatIntervalSeconds", c.HeartbeatIntervalSeconds},
		{"HeartbeatTimeoutSeconds", c.HeartbeatTimeoutSeconds},
		{"JoinTimeoutSeconds", c.JoinTimeoutSeconds},
		{"TombstoneSeconds", c.TombstoneSeconds},
		{"PresenceIntervalSeconds", c.PresenceIntervalSeconds},
		{"AdmissionTimeoutSeconds", c.AdmissionTimeoutSeconds},
	}
	for _, s := range seconds {
		if s.value < 1 || s.value > maxConfigSeconds {
			return fmt.Errorf("media: %s must be 1 to %d, got %d", s.name, maxConfigSeconds, s.value)
		}
	}
	if c.HeartbeatTimeoutSeconds < 2*c.HeartbeatIntervalSeconds {
		return fmt.Errorf("media: HeartbeatTimeoutSeconds (%d) must be at least twice HeartbeatIntervalSeconds (%d), so one late ping does not drop a client",
			c.HeartbeatTimeoutSeconds, c.HeartbeatIntervalSeconds)
	}
	if c.MaxParticipantsPerRoom < 1 || c.MaxParticipantsPerRoom > maxParticipantsPerRoomLimit {
		return fmt.Errorf("media: MaxParticipantsPerRoom must be 1 to %d, got %d", maxParticipantsPerRoomLimit, c.MaxParticipantsPerRoom)
	}
	if c.MaxConnections < 1 || c.MaxConnections > maxConnectionsLimit {
		return fmt.Errorf("media: MaxConnections must be 1 to %d, got %d", maxConnectionsLimit, c.MaxConnections)
	}
	return nil
}

// Node is the reference media node. It is an http.Handler serving the
// WebSocket protocol at RTCPath, and an Engine for the control plane.
//
// Its state lives in one hub goroutine started by NewNode; Close stops it.
// Time-driven checks (join and heartbeat timeouts) run when CheckHeartbeats
// is called: Run and Serve call it every second, tests call it after moving
// a clock.Fake.
type Node struct {
	cfg      NodeConfig
	upgrader websocket.Upgrader
	rtc      *rtc // nil without WebRTCConfig

	inbox     chan func(*hub)
	quit      chan struct{} // closed by Close once every connection is gone
	hubDone   chan struct{} // closed when the hub goroutine has returned
	conns     sync.WaitGroup
	closeOnce sync.Once
}

// NewNode validates cfg and starts a node.
func NewNode(cfg NodeConfig) (*Node, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg: cfg,
		upgrader: websocket.Upgrader{
			HandshakeTimeout: httpReadHeaderTimeoutSeconds * time.Second,
			ReadBufferSize:   readBufferBytes,
			WriteBufferSize:  writeBufferBytes,
			WriteBufferPool:  &sync.Pool{},
			// Clients authenticate with the media token inside the socket,
			// never with cookies, so a cross-origin page gains nothing by
			// opening a socket: any origin may connect.
			CheckOrigin: func(*http.Request) bool { return true },
		},
		inbox:   make(chan func(*hub), hubInboxOps),
		quit:    make(chan struct{}),
		hubDone: make(chan struct{}),
	}
	if cfg.WebRTC != nil {
		r, err := newRTC(*cfg.WebRTC, cfg.Logger, cfg.Metrics)
		if err != nil {
			return nil, err
		}
		n.rtc = r
	}
	h := newHub(n)
	go h.run()
	if n.rtc != nil {
		n.rtc.start(n)
	}
	return n, nil
}

// ServeHTTP upgrades a GET of RTCPath to a WebSocket and returns; the
// protocol runs on the socket's own goroutine (serveSocket) until it
// closes. Anything else is 404 or 405.
func (n *Node) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != RTCPath {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !websocket.IsWebSocketUpgrade(r) {
		http.Error(w, "this endpoint speaks WebSocket only", http.StatusUpgradeRequired)
		return
	}
	c := newConn()
	// Registered before the upgrade completes, so the join timeout runs from
	// before the client can see the socket open (which also makes a test
	// that dials and then checks timeouts deterministic).
	admitted := false
	if !n.do(func(h *hub) { admitted = h.register(c) }) || !admitted {
		http.Error(w, "media node at capacity or shutting down", http.StatusServiceUnavailable)
		return
	}
	ws, err := n.upgrader.Upgrade(w, r, nil)
	if err != nil {
		// The upgrader has answered the request; forget the connection
		// (never attached, it gets no writer).
		n.do(func(h *hub) { h.gone(c, readClosed); h.release(c) })
		n.conns.Done() // register added this connection to n.conns
		return
	}
	c.attach(ws)
	// The handler returns now, so net/http's goroutine ends and frees the
	// request, the response and its buffers; the socket keeps one goroutine
	// of its own.
	go n.serveSocket(c)
}

// serveSocket reads c until it closes, waits for its socket to be closed
// (the writer's final frames) and forgets it.
func (n *Node) serveSocket(c *conn) {
	defer n.conns.Done() // register added this connection to n.conns
	n.readLoop(c)
	<-c.closed
	n.do(func(h *hub) { h.release(c) })
}

// CheckHeartbeats drops every joined client silent for
// HeartbeatTimeoutSeconds (error heartbeat_timeout, leave reason
// "heartbeat_timeout") and every socket that has not joined within
// JoinTimeoutSeconds (error join_timeout), by the node's clock. It also
// forgets tombstones older than TombstoneSeconds. Run calls it every
// second; it returns once the checks are done and their reports made.
func (n *Node) CheckHeartbeats() {
	n.do(func(h *hub) { h.checkTimeouts(n.cfg.Clock.Now()) })
}

// Presence returns a snapshot of every joined session on the node.
func (n *Node) Presence() PresenceReport {
	p := PresenceReport{NodeID: n.cfg.NodeID, At: n.cfg.Clock.Now(), Sessions: []SessionInfo{}}
	n.do(func(h *hub) { p = h.presence(n.cfg.Clock.Now()) })
	return p
}

// ReportPresence sends a Presence snapshot to the Reporter if it implements
// PresenceReporter. Run calls it every PresenceIntervalSeconds.
func (n *Node) ReportPresence() {
	if pr, ok := n.cfg.Reporter.(PresenceReporter); ok {
		pr.Presence(n.Presence())
	}
}

// CloseRoom implements Engine. It returns once every participant of the room
// has been told and its leave reported. reason is shown to clients in the
// error message (cut to 128 bytes); the leave reason is always
// "room_closed".
func (n *Node) CloseRoom(roomID, reason string) {
	n.do(func(h *hub) { h.closeRoom(roomID, truncate(reason, maxReasonBytes), n.cfg.Clock.Now()) })
}

// ReleaseRoom ends the room's sessions on this node because the control
// plane that serves the room moved to another node (core.RoomReleaser):
// their leaves are reported and the clients told node_shutdown, so they
// connect again. It returns once that is done.
func (n *Node) ReleaseRoom(roomID string) {
	n.do(func(h *hub) { h.releaseRoom(roomID, n.cfg.Clock.Now()) })
}

// RemoveParticipant implements Engine. It returns once the participant has
// been told and its leave reported.
func (n *Node) RemoveParticipant(roomID, participantID string) {
	n.do(func(h *hub) { h.removeParticipant(roomID, participantID, n.cfg.Clock.Now()) })
}

// AdmitSession implements Engine: the control plane recorded the join of
// this session, which the node now serves (it may have replaced an older
// session of the participant). An answer for a join the node no longer
// holds does nothing. It does not wait for the hub.
func (n *Node) AdmitSession(roomID, participantID, sessionID string) {
	n.post(func(h *hub) { h.admit(roomID, participantID, sessionID) })
}

// CloseSession implements Engine: the control plane refused this session
// (or ended it), so the node ends it, waiting or joined, with the error
// code (one of the control plane's: ValidSessionCloseCode; any other is
// sent as token_expired), and refuses its later joins. It does not wait
// for the hub.
func (n *Node) CloseSession(roomID, participantID, sessionID, code string) {
	if !ValidSessionCloseCode(code) {
		code = CodeTokenExpired
	}
	n.post(func(h *hub) { h.closeSession(roomID, participantID, sessionID, code, n.cfg.Clock.Now()) })
}

// Run calls CheckHeartbeats every second and ReportPresence every
// PresenceIntervalSeconds, until ctx is done or the node is closed. These
// tickers use real time because they only decide when to look; what the
// checks decide uses the node's clock.
func (n *Node) Run(ctx context.Context) {
	heartbeats := time.NewTicker(heartbeatCheckIntervalSeconds * time.Second)
	defer heartbeats.Stop()
	presence := time.NewTicker(time.Duration(n.cfg.PresenceIntervalSeconds) * time.Second)
	defer presence.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.hubDone:
			return
		case <-heartbeats.C:
			n.CheckHeartbeats()
		case <-presence.C:
			n.ReportPresence()
		}
	}
}

// Serve serves the node on ln until ctx is done, running Run alongside. If
// control is not nil (see NewControlHandler) it is mounted under
// /internal/. When ctx is done, or serving fails, Serve stops the HTTP
// server, closes the node (every client gets node_shutdown and its leave is
// reported) and returns; the error is nil after a cancellation.
func (n *Node) Serve(ctx context.Context, ln net.Listener, control http.Handler) error {
	mux := http.NewServeMux()
	mux.Handle(RTCPath, n)
	if control != nil {
		mux.Handle("/internal/", control)
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: httpReadHeaderTimeoutSeconds * time.Second,
		ReadTimeout:       httpReadTimeoutSeconds * time.Second,
		IdleTimeout:       httpIdleTimeoutSeconds * time.Second,
		MaxHeaderBytes:    httpMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(n.cfg.Logger.Handler(), slog.LevelWarn),
	}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	go n.Run(runCtx)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeoutSeconds*time.Second)
		defer cancel()
		// Shutdown does not wait for hijacked (WebSocket) connections;
		// Close below ends those.
		_ = srv.Shutdown(shutdownCtx)
		<-served
	case err = <-served:
		_ = srv.Close()
	}
	n.Close()
	return err
}

// Close disconnects every client (error node_shutdown; each joined one's
// leave reported with reason "node_shutdown"), waits for their sockets to
// close (bounded by the write and close-handshake timeouts), and stops the
// node. New connections are refused with 503 from the moment Close starts.
// It is safe to call more than once.
func (n *Node) Close() {
	n.closeOnce.Do(func() {
		n.do(func(h *hub) { h.shutdown(n.cfg.Clock.Now()) })
		// No connection can be added from here on (the hub refuses them
		// once shut down), so Wait cannot race an Add.
		n.conns.Wait()
		close(n.quit)
		<-n.hubDone
		if n.rtc != nil {
			n.rtc.close()
		}
	})
}

// do runs op on the hub goroutine and waits for it. It reports false when
// the hub has stopped, in which case op did not run (or its end could not
// be observed).
func (n *Node) do(op func(*hub)) bool {
	done := make(chan struct{})
	select {
	case n.inbox <- func(h *hub) { op(h); close(done) }:
	case <-n.hubDone:
		return false
	}
	select {
	case <-done:
		return true
	case <-n.hubDone:
		return false
	}
}

// post queues op for the hub goroutine without waiting for it to run.
// Readers use it for frames: order is kept (one reader, one FIFO inbox) and
// the reader goes back to its socket at once.
func (n *Node) post(op func(*hub)) {
	select {
	case n.inbox <- op:
	case <-n.hubDone:
	}
}
