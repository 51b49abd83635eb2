package media

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"rtcd/auth"
	"rtcd/clock"
)

// testWaitSeconds bounds every wait for something asynchronous (a message,
// a report). It is a failure timeout, never how a test moves time: tests
// move the node's time with clock.Fake and call CheckHeartbeats.
const testWaitSeconds = 5

var testStart = time.Date(2025, time.March, 1, 12, 0, 0, 0, time.UTC)

// recorder is a Reporter and PresenceReporter that records reports in
// order. It never blocks, as the contract requires.
type recorder struct {
	ch chan any
}

func newRecorder() *recorder { return &recorder{ch: make(chan any, 1024)} }

func (r *recorder) Joined(j JoinReport)       { r.put(j) }
func (r *recorder) Left(l LeaveReport)        { r.put(l) }
func (r *recorder) Presence(p PresenceReport) { r.put(p) }

func (r *recorder) put(v any) {
	select {
	case r.ch <- v:
	default:
		panic("test recorder full")
	}
}

func (r *recorder) next(t *testing.T) any {
	t.Helper()
	select {
	case v := <-r.ch:
		return v
	case <-time.After(testWaitSeconds * time.Second):
		t.Fatal("no report arrived")
		return nil
	}
}

func (r *recorder) nextJoin(t *testing.T) JoinReport {
	t.Helper()
	v := r.next(t)
	j, ok := v.(JoinReport)
	if !ok {
		t.Fatalf("report = %#v, want a JoinReport", v)
	}
	return j
}

func (r *recorder) nextLeave(t *testing.T) LeaveReport {
	t.Helper()
	v := r.next(t)
	l, ok := v.(LeaveReport)
	if !ok {
		t.Fatalf("report = %#v, want a LeaveReport", v)
	}
	return l
}

// joinOf skips reports until the join report of session (cs_<session>).
func (r *recorder) joinOf(t *testing.T, session string) JoinReport {
	t.Helper()
	for {
		if j, ok := r.next(t).(JoinReport); ok && j.SessionID == "cs_"+session {
			return j
		}
	}
}

// admit answers the join report of session as the control plane does
// when it recorded the join.
func (tn *testNode) admit(t *testing.T, session string) {
	t.Helper()
	j := tn.rec.joinOf(t, session)
	tn.node.AdmitSession(j.RoomID, j.ParticipantID, j.SessionID)
}

// none checks that no report is waiting. Reports are made before the
// messages about the same change are queued, so after a client has seen a
// message this is exact.
func (r *recorder) none(t *testing.T) {
	t.Helper()
	select {
	case v := <-r.ch:
		t.Fatalf("unexpected report %#v", v)
	default:
	}
}

type testNode struct {
	node  *Node
	srv   *httptest.Server
	url   string // ws://…/rtc
	clock *clock.Fake
	rec   *recorder
	keys  auth.Keys
	// awaitAdmission: the node waits for the control plane's answer to
	// each join, and the test helpers that join (joinRTC) give it.
	awaitAdmission bool
}

func newTestNode(t *testing.T, mutate func(*NodeConfig)) *testNode {
	t.Helper()
	keys, err := auth.DeriveKeys(bytes.Repeat([]byte{7}, auth.MinMasterKeyLength))
	if err != nil {
		t.Fatal(err)
	}
	tn := &testNode{clock: clock.NewFake(testStart), rec: newRecorder(), keys: keys}
	cfg := NodeConfig{NodeID: "node-1", Verifier: keys.MediaVerifier(), Clock: tn.clock, Reporter: tn.rec}
	if mutate != nil {
		mutate(&cfg)
	}
	tn.awaitAdmission = cfg.AwaitAdmission
	tn.node, err = NewNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tn.srv = httptest.NewServer(tn.node)
	tn.url = "ws" + strings.TrimPrefix(tn.srv.URL, "http") + RTCPath
	// Cleanups run last-in first-out: the node closes its (hijacked)
	// sockets first, so the server's Close does not wait on them.
	t.Cleanup(tn.srv.Close)
	t.Cleanup(tn.node.Close)
	return tn
}

// claims returns valid claims for short names: room "1" is room_1 and so on.
func (tn *testNode) claims(room, participant, session string) auth.MediaClaims {
	return auth.MediaClaims{
		SessionID: "cs_" + session, ProjectID: "prj_1", RoomID: "room_" + room,
		ParticipantID: "part_" + participant, Role: "publisher", ExpiresAt: tn.clock.Now().Add(time.Minute),
		IssuedAt: tn.clock.Now(),
	}
}

func (tn *testNode) token(room, participant, session string) string {
	return tn.keys.SignMediaToken(tn.claims(room, participant, session))
}

type client struct {
	t  *testing.T
	ws *websocket.Conn
}

func (tn *testNode) dial(t *testing.T) *client {
	t.Helper()
	return dialWith(t, websocket.DefaultDialer, tn.url)
}

func dialWith(t *testing.T, d *websocket.Dialer, url string) *client {
	t.Helper()
	ws, resp, err := d.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	resp.Body.Close()
	t.Cleanup(func() { ws.Close() })
	return &client{t: t, ws: ws}
}

// join dials and joins, and returns the client and its joined message.
func (tn *testNode) join(t *testing.T, room, participant, session string) (*client, serverMsg) {
	t.Helper()
	c := tn.dial(t)
	c.send(map[string]any{"type": "join", "media_token": tn.token(room, participant, session)})
	return c, c.expect(typeJoined)
}

// serverMsg holds the fields of any server message.
type serverMsg struct {
	Type                string            `json:"type"`
	Protocol            int               `json:"protocol"`
	Code                string            `json:"code"`
	Message             string            `json:"message"`
	SessionID           string            `json:"session_id"`
	RoomID              string            `json:"room_id"`
	ParticipantID       string            `json:"participant_id"`
	Role                string            `json:"role"`
	HeartbeatIntervalMS int64             `json:"heartbeat_interval_ms"`
	HeartbeatTimeoutMS  int64             `json:"heartbeat_timeout_ms"`
	Participants        []participantView `json:"participants"`
	Participant         participantView   `json:"participant"`
	State               json.RawMessage   `json:"state"`
	Reason              string            `json:"reason"`
	TS                  *int64            `json:"ts"`
}

func (c *client) send(v any) {
	c.t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(websocket.TextMessage, data)
}

func (c *client) sendRaw(kind int, data []byte) {
	c.t.Helper()
	_ = c.ws.SetWriteDeadline(time.Now().Add(testWaitSeconds * time.Second))
	if err := c.ws.WriteMessage(kind, data); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// read returns the next message, or the error that ended the socket.
func (c *client) read() (serverMsg, error) {
	_ = c.ws.SetReadDeadline(time.Now().Add(testWaitSeconds * time.Second))
	kind, data, err := c.ws.ReadMessage()
	if err != nil {
		return serverMsg{}, err
	}
	var m serverMsg
	if kind != websocket.TextMessage {
		return m, errors.New("binary message from server")
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, err
	}
	return m, nil
}

func (c *client) expect(typ string) serverMsg {
	c.t.Helper()
	m, err := c.read()
	if err != nil {
		c.t.Fatalf("waiting for %s: %v", typ, err)
	}
	if m.Type != typ {
		c.t.Fatalf("got message %+v, want type %s", m, typ)
	}
	return m
}

// expectEnd checks that the server sends error code (if not empty) and
// then closes with closeCode.
func (c *client) expectEnd(code string, closeCode int) serverMsg {
	c.t.Helper()
	var m serverMsg
	if code != "" {
		m = c.expect(typeError)
		if m.Code != code || m.Protocol != protocolPresence || m.Message == "" {
			c.t.Fatalf("error message = %+v, want code %s", m, code)
		}
	}
	_, err := c.read()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != closeCode {
		c.t.Fatalf("after %q: read error %v, want close code %d", code, err, closeCode)
	}
	return m
}

// endAsync reads, on its own goroutine, what expectEnd checks, so the client
// answers the server's close frame at once (the server otherwise waits
// closeHandshakeTimeoutMillis for it). The channel yields nil or what was
// wrong.
func (c *client) endAsync(code string, closeCode int) <-chan error {
	result := make(chan error, 1)
	go func() {
		m, err := c.read()
		if err != nil || m.Type != typeError || m.Code != code {
			result <- fmt.Errorf("want error %s, got %+v (%v)", code, m, err)
			return
		}
		_, err = c.read()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != closeCode {
			result <- fmt.Errorf("want close %d, got %v", closeCode, err)
			return
		}
		result <- nil
	}()
	return result
}

// ping sends a ping and waits for its pong: afterwards the node has
// processed everything this client sent before.
func (c *client) ping(ts int64) {
	c.t.Helper()
	c.send(map[string]any{"type": "ping", "ts": ts})
	m := c.expect(typePong)
	if m.TS == nil || *m.TS != ts {
		c.t.Fatalf("pong = %+v, want ts %d", m, ts)
	}
}

func expectHTTPStatus(t *testing.T, resp *http.Response, want int) {
	t.Helper()
	if resp == nil || resp.StatusCode != want {
		t.Fatalf("response %v, want HTTP %d", resp, want)
	}
}
