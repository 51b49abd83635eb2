package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goccy/go-json"
	"github.com/gorilla/websocket"
)

// Scenario bounds.
const (
	// spreadIPs synthetic source addresses (X-Forwarded-For) spread the
	// connects when the server trusts the header (the local server does).
	spreadIPs  = 4096
	hotspotIP  = "10.255.0.1"
	listLimit  = "10"
	wsTimeout  = 10 * time.Second
	wsBufBytes = 1024
	// joinDialers sockets are opened at a time in the join scenario.
	joinDialers = 32
	// maxJoinSockets bounds the join scenario (the media node's default
	// capacity is 10000 sockets).
	maxJoinSockets = 10000
	// defaultJoinGCWait bounds the join scenario's wait, after the hold, for
	// a GC of the media node's process, so that its live heap counts every
	// held socket: Go forces a GC at least every 2 minutes. maxJoinGCWait
	// bounds the flag.
	defaultJoinGCWait = 130 * time.Second
	maxJoinGCWait     = 10 * time.Minute
	// joinGCPoll is how often the node's metrics are read during that wait.
	joinGCPoll = 500 * time.Millisecond
	// mediaRoomCap is the media node's participants per room.
	mediaRoomCap = 100
	// webhookDrainTimeout bounds the wait for webhook deliveries after the
	// mixed scenario.
	webhookDrainTimeout = 15 * time.Second
	webhookMaxBodyBytes = 1 << 20
	// createdRoomTTL is the expires_in of rooms created under load, so they
	// do not hold max_active_rooms slots for long.
	createdRoomTTL = 600
)

// Where -local runs the media node (-media-node), and what the join
// scenario's figures per socket then describe.
const (
	mediaNodeBuiltin    = "builtin"
	mediaNodeOwn        = "own"
	mediaProcessBuiltin = "rtcd serve (its built-in media node and the control plane: per socket includes the control plane's state of the participant)"
	mediaProcessOwn     = "rtcd media (the node run on its own: the socket alone)"
)

var scenarioNames = []string{"connect", "join", "create", "mixed", "hotspot", "baseline", "media", "wrk", "store", "cluster"}

// heavyScenarios are left out of "all": they run only when named (wrk
// needs Debian's wrk and takes 2 × -wrk-rounds × -duration; store starts
// two servers and a NATS cluster, and takes 4 × -duration; cluster starts
// NATS, etcd, Redis and four servers, and takes 4 × -duration).
var heavyScenarios = []string{"media", "wrk", "store", "cluster"}

// synthIPs returns n distinct private addresses.
func synthIPs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("10.%d.%d.%d", (i>>16)&0xff, (i>>8)&0xff, i&0xff+1)
	}
	return out
}

// connectOp exchanges participant tokens round-robin, each from its
// synthetic source address.
func connectOp(c *apiClient, parts []participant, ips []string) opFunc {
	return func(w *worker, slot int64) (int, string) {
		p := &parts[slot%int64(len(parts))]
		r, err := c.call("POST", "/v1/connect", "", p.connect, false, "X-Forwarded-For", ips[slot%int64(len(ips))])
		return 0, errCode(r, err)
	}
}

// createOps: a room, then createPerRoom participants in it, repeated.
func createOp(t *target, nProjects, perRoom int) opFunc {
	roomBody := mustJSON(map[string]any{"name": "loadtest-create", "expires_in": createdRoomTTL})
	partBody := mustJSON(map[string]any{"name": "loadtest-create"})
	return func(w *worker, slot int64) (int, string) {
		key := t.projects[w.id%nProjects].Key
		if w.room == "" || w.inRoom >= perRoom {
			var out struct {
				ID string `json:"id"`
			}
			r, err := t.api.call("POST", "/v1/rooms", key, roomBody, true)
			if code := errCode(r, err); code != "" {
				return 0, code
			}
			if json.Unmarshal(r.Body, &out) != nil || out.ID == "" {
				return 0, "bad_response|room without id"
			}
			w.room, w.inRoom = out.ID, 0
			return 0, ""
		}
		w.inRoom++
		r, err := t.api.call("POST", "/v1/rooms/"+w.room+"/participants", key, partBody, false)
		return 1, errCode(r, err)
	}
}

// Operations of the mixed scenario, by slot % 100.
const (
	mixConnect     = 0
	mixParticipant = 1
	mixRoomCreate  = 2
	mixRoomList    = 3
	mixRoomDelete  = 4
)

var mixedOps = []string{"connect", "participant_create", "room_create", "room_list", "room_delete"}

// mixOf maps slot%100 to an operation: 70% connect, 20% participant
// create, 5% room create, 3% room list, 2% room delete (of a room this
// worker created, so the webhook endpoint receives room.ended).
func mixOf(slot int64) int {
	switch s := slot % 100; {
	case s < 70:
		return mixConnect
	case s < 90:
		return mixParticipant
	case s < 95:
		return mixRoomCreate
	case s < 98:
		return mixRoomList
	default:
		return mixRoomDelete
	}
}

func mixedOp(t *target, f *fixture, ips []string) opFunc {
	roomBody := mustJSON(map[string]any{"name": "loadtest-mixed", "expires_in": createdRoomTTL})
	partBody := mustJSON(map[string]any{"name": "loadtest-mixed"})
	return func(w *worker, slot int64) (int, string) {
		op := mixOf(slot)
		if op == mixRoomDelete && len(w.rooms) == 0 {
			op = mixRoomCreate
		}
		key := t.projects[w.id%len(t.projects)].Key
		switch op {
		case mixConnect:
			p := &f.participants[slot%int64(len(f.participants))]
			r, err := t.api.call("POST", "/v1/connect", "", p.connect, false, "X-Forwarded-For", ips[slot%int64(len(ips))])
			return op, errCode(r, err)
		case mixParticipant:
			rm := &f.rooms[slot%int64(len(f.rooms))]
			r, err := t.api.call("POST", "/v1/rooms/"+rm.id+"/participants", t.projects[rm.project].Key, partBody, false)
			return op, errCode(r, err)
		case mixRoomCreate:
			r, err := t.api.call("POST", "/v1/rooms", key, roomBody, true)
			if code := errCode(r, err); code != "" {
				return op, code
			}
			var out struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(r.Body, &out) == nil && out.ID != "" && len(w.rooms) < 1024 {
				w.rooms = append(w.rooms, out.ID)
			}
			return op, ""
		case mixRoomList:
			r, err := t.api.call("GET", "/v1/rooms?limit="+listLimit, key, nil, false)
			return op, errCode(r, err)
		default:
			id := w.rooms[len(w.rooms)-1]
			w.rooms = w.rooms[:len(w.rooms)-1]
			r, err := t.api.call("DELETE", "/v1/rooms/"+id, key, nil, false)
			return op, errCode(r, err)
		}
	}
}

// --- webhooks -------------------------------------------------------------

// webhookReceiver counts the deliveries it receives.
type webhookReceiver struct {
	srv    *http.Server
	ln     net.Listener
	URL    string
	mu     sync.Mutex
	total  int64
	byType map[string]int64
	ids    map[string]bool
}

func startWebhookReceiver(listen, publicURL string) (*webhookReceiver, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	wr := &webhookReceiver{ln: ln, byType: map[string]int64{}, ids: map[string]bool{}}
	wr.URL = publicURL
	if wr.URL == "" {
		wr.URL = "http://" + ln.Addr().String() + "/webhook"
	}
	wr.srv = &http.Server{Handler: http.HandlerFunc(wr.serve), ReadHeaderTimeout: wsTimeout}
	go func() { _ = wr.srv.Serve(ln) }()
	return wr, nil
}

func (wr *webhookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, webhookMaxBodyBytes))
	var ev struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}
	_ = json.Unmarshal(body, &ev)
	wr.mu.Lock()
	wr.total++
	wr.byType[ev.Type]++
	if ev.ID != "" && len(wr.ids) < maxTrackedEventIDs {
		wr.ids[ev.ID] = true
	}
	wr.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// maxTrackedEventIDs bounds the set of distinct event ids kept.
const maxTrackedEventIDs = 1_000_000

func (wr *webhookReceiver) count(typ string) int64 {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	return wr.byType[typ]
}

func (wr *webhookReceiver) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = wr.srv.Shutdown(ctx)
}

// webhookFigures is what the mixed scenario's receiver saw.
type webhookFigures struct {
	URL            string           `json:"url"`
	Endpoints      int              `json:"endpoints"`
	Received       int64            `json:"deliveries_received"`
	DistinctEvents int              `json:"distinct_events"`
	ByType         map[string]int64 `json:"by_type"`
	Expected       int64            `json:"expected_room_ended"`
	WaitedMs       float64          `json:"waited_after_load_ms"`
	Error          string           `json:"error,omitempty"`
}

// --- join -----------------------------------------------------------------

// wsMsg is the part of a media node frame the tool reads.
type wsMsg struct {
	Type              string `json:"type"`
	Code              string `json:"code"`
	TS                int64  `json:"ts"`
	HeartbeatInterval int64  `json:"heartbeat_interval_ms"`
}

// heldSocket is one joined participant's media connection.
type heldSocket struct {
	idx  int
	conn *websocket.Conn
	wmu  sync.Mutex // one writer at a time: pinger and close
	stop chan struct{}
	done chan struct{} // closed when the reader returns
}

func (h *heldSocket) write(v any) error {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	_ = h.conn.SetWriteDeadline(time.Now().Add(wsTimeout))
	return h.conn.WriteJSON(v)
}

// joinState is the join scenario in progress.
type joinState struct {
	mu       sync.Mutex
	sockets  []*heldSocket
	held     atomic.Int64
	dropped  atomic.Int64
	closing  atomic.Bool
	pings    *opStats
	connect  *opStats
	wsJoin   *opStats
	dropCode *opStats // count only: why sockets dropped
	interval time.Duration
}

// joinOp connects a participant, opens its media socket, joins and holds
// it; the latency is the whole: connect, dial and join until `joined`.
func joinOp(c *apiClient, parts []participant, ips []string, js *joinState) opFunc {
	dialer := &websocket.Dialer{HandshakeTimeout: wsTimeout, ReadBufferSize: wsBufBytes, WriteBufferSize: wsBufBytes}
	return func(w *worker, slot int64) (int, string) {
		p := &parts[slot%int64(len(parts))]
		t0 := time.Now()
		cs, code := connectForMedia(c, p, ips[slot%int64(len(ips))])
		js.connect.recordRaw(w.id, time.Since(t0), code)
		if code != "" {
			return 0, code
		}
		t1 := time.Now()
		conn, m, code := joinMedia(dialer, cs)
		if code != "" {
			js.wsJoin.recordRaw(w.id, time.Since(t1), code)
			return 0, code
		}
		js.wsJoin.record(w.id, time.Since(t1), "", "")
		interval := js.interval
		if interval == 0 && m.HeartbeatInterval > 0 {
			interval = time.Duration(m.HeartbeatInterval) * time.Millisecond
		}
		if interval <= 0 {
			interval = 5 * time.Second
		}
		h := &heldSocket{idx: int(slot), conn: conn, stop: make(chan struct{}), done: make(chan struct{})}
		js.mu.Lock()
		js.sockets = append(js.sockets, h)
		js.mu.Unlock()
		js.held.Add(1)
		go js.read(h)
		go js.ping(h, interval, w.rng.Int64N(int64(interval)))
		return 0, ""
	}
}

// mediaSession is what the media join needs of a connect session.
type mediaSession struct {
	Endpoint   string `json:"endpoint"`
	MediaToken string `json:"media_token"`
}

// connectForMedia exchanges p's token (from the synthetic source address
// ip) for a connect session; it returns the session, or an error code in
// the runner's "code|detail" form.
func connectForMedia(c *apiClient, p *participant, ip string) (mediaSession, string) {
	var cs mediaSession
	r, err := c.call("POST", "/v1/connect", "", p.connect, true, "X-Forwarded-For", ip)
	if code := errCode(r, err); code != "" {
		return cs, code
	}
	if err := json.Unmarshal(r.Body, &cs); err != nil || cs.Endpoint == "" {
		return cs, "bad_response|connect session without endpoint"
	}
	return cs, ""
}

// joinMedia opens the session's media socket and joins, reading until the
// node answers `joined`; it returns the socket (its read deadline
// cleared) and that message, or an error code ("code|detail") with the
// socket closed.
func joinMedia(dialer *websocket.Dialer, cs mediaSession) (*websocket.Conn, wsMsg, string) {
	var m wsMsg
	conn, _, err := dialer.Dial(cs.Endpoint, nil)
	if err != nil {
		return nil, m, "ws_dial_failed|" + err.Error()
	}
	fail := func(code string) (*websocket.Conn, wsMsg, string) {
		_ = conn.Close()
		return nil, m, code
	}
	_ = conn.SetWriteDeadline(time.Now().Add(wsTimeout))
	if err := conn.WriteJSON(map[string]any{"type": "join", "media_token": cs.MediaToken}); err != nil {
		return fail("ws_write_failed|" + err.Error())
	}
	_ = conn.SetReadDeadline(time.Now().Add(wsTimeout))
	for {
		if err := conn.ReadJSON(&m); err != nil {
			return fail("ws_read_failed|" + err.Error())
		}
		if m.Type == "error" {
			return fail("media_" + m.Code + "|media node refused the join")
		}
		if m.Type == "joined" {
			break
		}
	}
	_ = conn.SetReadDeadline(time.Time{})
	return conn, m, ""
}

// splitCode splits the runner's "code|detail" form.
func splitCode(s string) (string, string) {
	if i := strings.IndexByte(s, '|'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

func (js *joinState) read(h *heldSocket) {
	defer close(h.done)
	var m wsMsg
	for {
		if err := h.conn.ReadJSON(&m); err != nil {
			if !js.closing.Load() {
				js.dropped.Add(1)
				js.held.Add(-1)
				js.dropCode.record(h.idx, 0, "read_failed", err.Error())
			}
			return
		}
		switch m.Type {
		case "pong":
			if m.TS > 0 {
				js.pings.record(h.idx, time.Since(time.Unix(0, m.TS)), "", "")
			}
		case "error":
			if !js.closing.Load() {
				js.dropCode.record(h.idx, 0, "media_"+m.Code, "")
			}
		}
		m = wsMsg{}
	}
}

func (js *joinState) ping(h *heldSocket, interval time.Duration, offsetNs int64) {
	select {
	case <-h.stop:
		return
	case <-time.After(time.Duration(offsetNs)):
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := h.write(map[string]any{"type": "ping", "ts": time.Now().UnixNano()}); err != nil {
			if !js.closing.Load() {
				js.pings.record(h.idx, 0, "ping_write_failed", err.Error())
			}
			return
		}
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
	}
}

// closeAll leaves and closes every socket.
func (js *joinState) closeAll() {
	js.closing.Store(true)
	js.mu.Lock()
	socks := js.sockets
	js.mu.Unlock()
	var wg sync.WaitGroup
	for i := 0; i < joinDialers && i < len(socks); i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := i; j < len(socks); j += joinDialers {
				h := socks[j]
				close(h.stop)
				_ = h.write(map[string]string{"type": "leave"})
				h.wmu.Lock()
				_ = h.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
				h.wmu.Unlock()
				_ = h.conn.Close()
				<-h.done
			}
		}(i)
	}
	wg.Wait()
}

// joinFigures is what the join scenario adds to its report.
type joinFigures struct {
	Target            int     `json:"sockets_target"`
	Held              int64   `json:"sockets_held_at_end"`
	Dropped           int64   `json:"sockets_dropped"`
	RampSeconds       float64 `json:"ramp_seconds"`
	HoldSeconds       float64 `json:"hold_seconds"`
	PingIntervalMs    float64 `json:"ping_interval_ms"`
	RSSBefore         float64 `json:"server_rss_before_bytes"`
	RSSPeak           float64 `json:"server_rss_held_bytes"`
	RSSAfter          float64 `json:"server_rss_after_bytes"`
	RSSPerParticipant float64 `json:"server_rss_per_participant_bytes"`
	GoroutinesBefore  float64 `json:"server_goroutines_before"`
	GoroutinesPeak    float64 `json:"server_goroutines_held"`
	HeapPeak          float64 `json:"server_heap_inuse_held_bytes"`
	HeapPerPart       float64 `json:"server_heap_per_participant_bytes"`
	// PerSocket is the memory of one held socket in the process that holds
	// them (nil without its metrics).
	PerSocket *socketMemory `json:"per_socket,omitempty"`
}

// socketMemory is the memory per held media socket, from the metrics of
// the process holding them: while every socket is held, less before the
// first one opened, over the sockets held.
type socketMemory struct {
	Process       string  `json:"process"`
	Sockets       int64   `json:"sockets"`
	Settled       bool    `json:"settled"` // a GC completed after the ramp, so the live heap counts every socket
	GCWaitSeconds float64 `json:"gc_wait_seconds"`
	HeapSource    string  `json:"heap_source"`
	// Bytes is the headline: HeapBytes + StackBytes.
	Bytes          float64 `json:"bytes"`
	HeapBytes      float64 `json:"heap_bytes"`
	StackBytes     float64 `json:"stack_bytes"`
	RSSBytes       float64 `json:"rss_bytes"`        // with the GC's headroom and what the runtime keeps
	HeapInuseBytes float64 `json:"heap_inuse_bytes"` // live and garbage not yet collected
	Goroutines     float64 `json:"goroutines"`
}
