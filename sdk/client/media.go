package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Media node protocol versions this SDK speaks (docs/media-protocol.md):
// presence only, and with WebRTC media (a Session WithMedia).
const (
	mediaProtocol      = 1
	mediaProtocolMedia = 2
)

// Socket-level timeouts. They run on real time (the network poller knows no
// other clock).
const (
	writeTimeout          = 10 * time.Second
	closeHandshakeTimeout = time.Second
	// defaults when the joined message has no heartbeat fields
	defaultHeartbeatInterval = 5 * time.Second
	defaultHeartbeatTimeout  = 15 * time.Second
)

// serverMessage is any server → client message.
type serverMessage struct {
	Type                string          `json:"type"`
	Protocol            int             `json:"protocol"`
	SessionID           string          `json:"session_id"`
	RoomID              string          `json:"room_id"`
	ParticipantID       string          `json:"participant_id"`
	Role                string          `json:"role"`
	HeartbeatIntervalMS int64           `json:"heartbeat_interval_ms"`
	HeartbeatTimeoutMS  int64           `json:"heartbeat_timeout_ms"`
	Participants        []Participant   `json:"participants"`
	Participant         *Participant    `json:"participant"`
	Tracks              []TrackInfo     `json:"tracks"`
	Speaking            bool            `json:"speaking"`
	ICEServers          []ICEServer     `json:"ice_servers"`
	State               json.RawMessage `json:"state"`
	Reason              string          `json:"reason"`
	Code                string          `json:"code"`
	Message             string          `json:"message"`
	TS                  *int64          `json:"ts"`
}

// mediaConn is one joined WebSocket to the media node.
type mediaConn struct {
	ws     *websocket.Conn
	joined serverMessage

	wmu sync.Mutex // one writer at a time

	stop       chan struct{} // closed to stop the heartbeat
	stopOnce   sync.Once
	readerDone chan struct{} // closed when the reader returns

	// Set by the reader before readerDone is closed.
	mediaErr *mediaError
	readErr  error
}

func (mc *mediaConn) heartbeatInterval() time.Duration {
	if mc.joined.HeartbeatIntervalMS > 0 {
		return time.Duration(mc.joined.HeartbeatIntervalMS) * time.Millisecond
	}
	return defaultHeartbeatInterval
}

func (mc *mediaConn) heartbeatTimeout() time.Duration {
	if mc.joined.HeartbeatTimeoutMS > 0 {
		return time.Duration(mc.joined.HeartbeatTimeoutMS) * time.Millisecond
	}
	return defaultHeartbeatTimeout
}

// write sends one message. It gives up at the earlier of ctx's deadline and
// writeTimeout, and at once when ctx is cancelled (the socket's deadline is
// then moved to now, which cuts a blocked write short; the connection is
// not usable after a cut write and the caller closes it).
func (mc *mediaConn) write(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	mc.wmu.Lock()
	defer mc.wmu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline := time.Now().Add(writeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = mc.ws.SetWriteDeadline(deadline)
	if ctx.Done() != nil {
		// net.Conn deadlines are safe to move from another goroutine; the
		// next write sets its own again.
		stop := context.AfterFunc(ctx, func() { _ = mc.ws.NetConn().SetWriteDeadline(time.Now()) })
		defer stop()
	}
	return mc.ws.WriteMessage(websocket.TextMessage, b)
}

func (mc *mediaConn) stopHeartbeat() { mc.stopOnce.Do(func() { close(mc.stop) }) }

// dialJoin opens the media node's WebSocket and joins with the media token.
// It returns a joined connection, a *mediaError when the node refused the
// join, or another error (transport, cancellation).
func (s *Session) dialJoin(ctx context.Context, endpoint, mediaToken string) (*mediaConn, error) {
	ws, res, err := s.cfg.dialer.DialContext(ctx, endpoint, nil)
	if err != nil {
		if res != nil && res.StatusCode == http.StatusServiceUnavailable {
			return nil, newError(CodeServiceUnavailable, "the media node is at capacity or shutting down", err,
				map[string]any{"http_status": res.StatusCode})
		}
		return nil, err
	}
	// The dial honoured ctx; the join's write and read do not, so a
	// cancellation closes the socket under them.
	stop := context.AfterFunc(ctx, func() { _ = ws.Close() })
	fail := func(err error) (*mediaConn, error) {
		stop()
		_ = ws.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	mc := &mediaConn{ws: ws, stop: make(chan struct{}), readerDone: make(chan struct{})}
	protocol := mediaProtocol
	if s.cfg.media != nil {
		protocol = mediaProtocolMedia
	}
	if err := mc.write(ctx, map[string]any{"type": "join", "media_token": mediaToken, "protocol": protocol}); err != nil {
		return fail(err)
	}
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				if code, ok := mediaCodeOfClose[ce.Code]; ok {
					return fail(&mediaError{code: code, message: ce.Text, closeCode: ce.Code})
				}
			}
			return fail(err)
		}
		var m serverMessage
		if json.Unmarshal(data, &m) != nil {
			return fail(errors.New("media node sent a frame that is not JSON"))
		}
		switch m.Type {
		case "joined":
			if !stop() {
				return fail(ctx.Err())
			}
			mc.joined = m
			return mc, nil
		case "error":
			me := &mediaError{code: m.Code, message: m.Message}
			// The close frame follows; its code confirms the error.
			_ = ws.SetReadDeadline(time.Now().Add(closeHandshakeTimeout))
			if _, _, err := ws.ReadMessage(); err != nil {
				var ce *websocket.CloseError
				if errors.As(err, &ce) {
					me.closeCode = ce.Code
				}
			}
			return fail(me)
		default:
			// Nothing else is sent before joined; ignore what a newer node
			// may add.
		}
	}
}

// read is the connection's reader: it turns frames into state and events
// until the socket ends. It never blocks on handlers (events are queued).
// With a Media, it attaches it first and hands it the media messages.
func (s *Session) read(mc *mediaConn) {
	defer close(mc.readerDone)
	var link *mediaLink
	if m := s.cfg.media; m != nil && mc.joined.Protocol >= mediaProtocolMedia {
		link = &mediaLink{s: s, mc: mc}
		m.Attach(link)
		defer func() {
			link.detach()
			m.Detach()
		}()
	}
	timeout := mc.heartbeatTimeout()
	for {
		// A node that has sent nothing (not even a pong) for its own
		// heartbeat timeout is gone.
		_ = mc.ws.SetReadDeadline(time.Now().Add(timeout))
		_, data, err := mc.ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				if mc.mediaErr != nil {
					mc.mediaErr.closeCode = ce.Code
				} else if code, ok := mediaCodeOfClose[ce.Code]; ok {
					mc.mediaErr = &mediaError{code: code, message: ce.Text, closeCode: ce.Code}
				}
			}
			mc.readErr = err
			return
		}
		var m serverMessage
		if json.Unmarshal(data, &m) != nil {
			s.cfg.logger.Warn("rtcd client: ignoring a media frame that is not JSON")
			continue
		}
		switch m.Type {
		case "pong":
			s.pong(m.TS)
		case "participant.joined":
			if m.Participant != nil {
				s.remoteJoined(*m.Participant)
			}
		case "participant.updated":
			s.remoteUpdated(m.ParticipantID, m.State, m.Tracks, m.Speaking)
		case "connection.quality":
			if q, ok := parseQuality(data); ok {
				s.setQuality(q, 0)
			}
		case "participant.left":
			s.remoteLeft(m.ParticipantID, m.Reason)
		case "error":
			mc.mediaErr = &mediaError{code: m.Code, message: m.Message}
		default:
			if link != nil && mediaMessageTypes[m.Type] {
				s.cfg.media.Handle(m.Type, data)
			}
			// Additive protocol changes may add message types a client
			// may ignore.
		}
	}
}

// heartbeat pings every heartbeat interval and grades the connection's
// quality from the pongs, until the connection stops.
func (s *Session) heartbeat(mc *mediaConn) {
	interval := mc.heartbeatInterval()
	lostAfter := mc.heartbeatTimeout() / 2
	for {
		now := s.cfg.clock.Now()
		s.checkLatePong(now, interval, lostAfter)
		s.notePing(now)
		if err := mc.write(context.Background(), map[string]any{"type": "ping", "ts": now.UnixMilli()}); err != nil {
			_ = mc.ws.Close() // the reader ends and the session reconnects
			return
		}
		t := s.cfg.clock.NewTimer(interval)
		select {
		case <-mc.stop:
			t.Stop()
			return
		case <-t.C():
		}
	}
}
