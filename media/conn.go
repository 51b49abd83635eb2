package media

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"rtcd/auth"
)

// conn is one client socket. One goroutine serves it while it is held:
// the reader (readLoop). A writer goroutine (writeLoop), the only one that
// writes messages to the socket, runs only while there is something to
// write: the hub starts it when it queues a message for an idle socket,
// and it returns once the queue is drained. A held socket that is not
// being written to therefore costs one goroutine, and no queue or write
// buffer (see docs/performance.md, "Media signalling sockets"). The hub
// talks to it through queueMessage and end only, and never touches the
// socket, so it can never block on a client.
type conn struct {
	ws *websocket.Conn // set by attach, before a writer or the reader starts; used only by them

	readerDone chan struct{} // closed when readLoop returns
	closed     chan struct{} // closed once the socket is closed: after the final frames, or a failed write

	// mu guards what the hub and the writer share. It is held only to queue
	// or take one message, never across a socket write.
	mu      sync.Mutex
	queue   sendQueue   // messages for the writer, at most outboundQueueMessages
	writer  writerState // whether a writer runs, or may start
	stopped bool        // set by end: the writer writes the final frames and closes
	// The final frames, set by end with stopped.
	finalMessage []byte // error message, or nil
	closeCode    int    // close frame code
	closeText    string // close frame reason (an error code, ≤ 123 bytes)

	// Owned by the hub goroutine.
	openedAt time.Time    // registration time, for the join timeout
	member   *member      // nil until joined, and again once replaced
	waiting  *waitingJoin // its join, while it waits for admission
	ended    bool         // terminated: every later event about it is ignored
	doomed   bool         // queued for a slow_consumer disconnect
	protocol int          // the version this socket speaks: 1 until a join asks for 2 on a node with WebRTC
	peer     *peer        // its media, while it is the joined socket of a protocol 2 member
}

// writerState is where a conn's writer is.
type writerState uint8

const (
	writerNoSocket writerState = iota // before attach (forever if the upgrade fails): no writer may start
	writerIdle                        // attached, nothing to write: the next message starts a writer
	writerRunning                     // a writer goroutine runs; it takes what is queued
	writerFinished                    // the socket is closed (or was never opened): no writer starts again
)

func newConn() *conn {
	return &conn{
		protocol:   protocolPresence,
		queue:      sendQueue{limit: outboundQueueMessages},
		readerDone: make(chan struct{}),
		closed:     make(chan struct{}),
	}
}

// attach gives c its upgraded socket, and starts a writer if the hub has
// already queued a message or ended c meanwhile.
func (c *conn) attach(ws *websocket.Conn) {
	c.mu.Lock()
	c.ws = ws
	c.writer = writerIdle
	start := c.stopped || c.queue.len() > 0
	if start {
		c.writer = writerRunning
	}
	c.mu.Unlock()
	if start {
		go c.writeLoop()
	}
}

// queueMessage queues msg for the writer, starting one if none runs. It
// never blocks: it reports false when the queue is full (the client is too
// slow), and drops msg silently once c is ended or its socket closed.
func (c *conn) queueMessage(msg []byte) bool {
	c.mu.Lock()
	if c.stopped || c.writer == writerFinished {
		c.mu.Unlock()
		return true
	}
	if !c.queue.push(msg) {
		c.mu.Unlock()
		return false
	}
	start := c.writer == writerIdle
	if start {
		c.writer = writerRunning
	}
	c.mu.Unlock()
	if start {
		go c.writeLoop()
	}
	return true
}

// end has the writer send finalMessage (if not nil) and a close frame with
// closeCode and closeText, then close the socket. Messages still queued
// are dropped: the connection is over. Called once, by hub.terminate.
func (c *conn) end(finalMessage []byte, closeCode int, closeText string) {
	c.mu.Lock()
	c.stopped = true
	c.finalMessage, c.closeCode, c.closeText = finalMessage, closeCode, closeText
	c.queue.clear()
	start := c.writer == writerIdle
	if start {
		c.writer = writerRunning
	}
	c.mu.Unlock()
	if start {
		go c.writeLoop()
	}
}

// readLoop reads client messages until the socket fails or closes, checks
// each one (token verification included: it is CPU only and keeps the hub
// fast) and posts what it found to the hub.
func (n *Node) readLoop(c *conn) {
	defer close(c.readerDone)
	c.ws.SetReadLimit(maxFrameBytes)
	// Socket read deadlines run on real time, not on the node's clock: the
	// runtime's network poller only knows the wall clock. The deadline is a
	// backstop equal to the clock-driven timeout that CheckHeartbeats
	// enforces: it frees a silent socket even if nothing calls
	// CheckHeartbeats, and both paths end it the same way (join_timeout
	// before the join, heartbeat_timeout after).
	_ = c.ws.SetReadDeadline(time.Now().Add(time.Duration(n.cfg.JoinTimeoutSeconds) * time.Second))
	heartbeatTimeout := time.Duration(n.cfg.HeartbeatTimeoutSeconds) * time.Second

	joinSent := false
	media := false    // joined asking for protocol 2 on a node with WebRTC
	finished := false // after a leave or a refusal: read only until the close completes
	for {
		kind, data, err := c.ws.ReadMessage()
		if err != nil {
			why := readClosed
			if isTimeout(err) {
				why = readTimedOut
			} else if errors.Is(err, websocket.ErrReadLimit) {
				why = readTooBig
			}
			n.post(func(h *hub) { h.gone(c, why) })
			return
		}
		if finished {
			continue
		}
		msg, code, text := parseClientMessage(kind, data, joinSent, media)
		if code == "" && msg.Type == typeJoin {
			protocol := protocolPresence
			if msg.Protocol >= protocolMedia && n.rtc != nil {
				protocol = protocolMedia
			}
			claims, err := n.cfg.Verifier.Verify(msg.MediaToken, n.cfg.Clock.Now())
			switch {
			case errors.Is(err, auth.ErrTokenExpired):
				code, text = CodeTokenExpired, "the media token has expired; connect again for a new one"
			case err != nil:
				code, text = CodeTokenInvalid, "the media token is not valid"
			default:
				joinSent = true
				if protocol == protocolMedia {
					// SDP offers and answers are larger than presence frames.
					media = true
					c.ws.SetReadLimit(maxSignalFrameBytes)
				}
				n.post(func(h *hub) { h.join(c, claims, protocol) })
			}
			if code != "" {
				finished = true
				n.post(func(h *hub) {
					if !c.ended {
						c.protocol = protocol
					}
					h.refuse(c, code, text)
				})
				continue
			}
		} else if code == "" {
			finished = msg.Type == typeLeave
			n.post(func(h *hub) { h.message(c, msg) })
		}
		if code != "" {
			finished = true
			n.post(func(h *hub) { h.refuse(c, code, text) })
			continue
		}
		_ = c.ws.SetReadDeadline(time.Now().Add(heartbeatTimeout))
	}
}

// parseClientMessage checks one client frame. It returns the message, or an
// error code (bad_message) and a text for the client. joinSent says whether
// this socket has already sent its join; media whether it speaks protocol
// 2, whose signalling messages are refused on a protocol 1 socket.
func parseClientMessage(kind int, data []byte, joinSent, media bool) (clientMessage, string, string) {
	var msg clientMessage
	if kind != websocket.TextMessage {
		return msg, CodeBadMessage, "messages must be text frames"
	}
	data = bytes.TrimLeft(data, " \t\r\n") // JSON allows leading whitespace
	if len(data) == 0 || data[0] != '{' || json.Unmarshal(data, &msg) != nil {
		return msg, CodeBadMessage, "a message must be a JSON object with the documented fields"
	}
	if !joinSent {
		if msg.Type != typeJoin {
			return msg, CodeBadMessage, "the first message must be join"
		}
		return msg, "", ""
	}
	switch msg.Type {
	case typePing, typeLeave:
		return msg, "", ""
	case typeUpdate:
		var compact bytes.Buffer
		if len(msg.State) == 0 || msg.State[0] != '{' || json.Compact(&compact, msg.State) != nil {
			return msg, CodeBadMessage, "update.state must be a JSON object"
		}
		if compact.Len() > maxStateBytes {
			return msg, CodeBadMessage, "update.state is larger than 4096 bytes"
		}
		msg.State = compact.Bytes()
		return msg, "", ""
	case typePublishOffer, typeSubscribeAnswer:
		if !media {
			break
		}
		if msg.SDP == "" {
			return msg, CodeBadMessage, msg.Type + ".sdp is required"
		}
		return msg, "", ""
	case typeCandidate:
		if !media {
			break
		}
		if msg.Target != targetPublish && msg.Target != targetSubscribe {
			return msg, CodeBadMessage, `candidate.target must be "publish" or "subscribe"`
		}
		if len(msg.Candidate) == 0 || msg.Candidate[0] != '{' {
			return msg, CodeBadMessage, "candidate.candidate must be an object"
		}
		return msg, "", ""
	case typeTrackSubscribe, typeTrackUnsubscribe:
		if !media {
			break
		}
		if msg.TrackID == "" || len(msg.TrackID) > maxClientTrackIDBytes {
			return msg, CodeBadMessage, msg.Type + ".track_id is required"
		}
		return msg, "", ""
	case typeJoin:
		return msg, CodeBadMessage, "already joined"
	}
	if media {
		return msg, CodeBadMessage, "unknown message type"
	}
	switch msg.Type {
	case typePublishOffer, typeSubscribeAnswer, typeCandidate, typeTrackSubscribe, typeTrackUnsubscribe:
		return msg, CodeBadMessage, "this message needs protocol 2: join with \"protocol\":2 on a node with media"
	default:
		return msg, CodeBadMessage, "unknown message type"
	}
}

// writeLoop writes queued messages until the queue is empty (it then
// returns, and the next queued message starts another), the hub ends the
// connection or a write fails. After end it writes the final frames and
// closes the socket, which also ends readLoop. Only one runs at a time per
// conn (writerRunning).
func (c *conn) writeLoop() {
	for {
		c.mu.Lock()
		if c.stopped {
			c.mu.Unlock()
			c.writeFinal()
			return
		}
		msg, ok := c.queue.pop()
		if !ok {
			c.writer = writerIdle
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		_ = c.ws.SetWriteDeadline(time.Now().Add(writeTimeoutSeconds * time.Second))
		if err := c.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
			// The socket is broken; closing it ends readLoop, which
			// reports the connection gone. No writer starts again.
			c.closeSocket()
			return
		}
	}
}

// writeFinal writes the final frames set by end and closes the socket.
func (c *conn) writeFinal() {
	deadline := time.Now().Add(writeTimeoutSeconds * time.Second)
	if c.finalMessage != nil {
		_ = c.ws.SetWriteDeadline(deadline)
		_ = c.ws.WriteMessage(websocket.TextMessage, c.finalMessage)
	}
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(c.closeCode, c.closeText), deadline)
	// Let the client answer with its close frame (readLoop then ends)
	// before the TCP connection goes, so the frames above are not lost to
	// a reset.
	wait := time.NewTimer(closeHandshakeTimeoutMillis * time.Millisecond)
	select {
	case <-c.readerDone:
	case <-wait.C:
	}
	wait.Stop()
	c.closeSocket()
}

// closeSocket closes the socket for good; only the running writer calls
// it.
func (c *conn) closeSocket() {
	_ = c.ws.Close()
	c.mu.Lock()
	c.writer = writerFinished
	c.queue.clear()
	c.mu.Unlock()
	close(c.closed)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
