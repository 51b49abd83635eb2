package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// fakeClock is a Clock that moves only when the test advances it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c     *fakeClock
	at    time.Time
	ch    chan time.Time
	fired bool
	done  bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.fired = true
		t.ch <- c.now
	} else {
		c.timers = append(c.timers, t)
	}
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.fired && !t.done
	t.done = true
	return was
}

// Advance moves the clock and fires every timer that is due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.done:
		case !t.at.After(c.now):
			t.fired = true
			t.ch <- c.now
		default:
			kept = append(kept, t)
		}
	}
	c.timers = kept
}

// waitTimer waits until a pending timer is due exactly d after now.
func (c *fakeClock) waitTimer(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		for _, tm := range c.timers {
			if !tm.done && tm.at.Equal(c.now.Add(d)) {
				c.mu.Unlock()
				return
			}
		}
		c.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no timer of %v was started", d)
}

func TestStateMachineAllowsOnlyTheTable(t *testing.T) {
	all := []State{StateIdle, StateConnecting, StateConnected, StateReconnecting, StateDisconnecting, StateDisconnected, StateFailed}
	allowed := map[[2]State]bool{
		{StateIdle, StateConnecting}:             true,
		{StateConnecting, StateConnected}:        true,
		{StateConnecting, StateFailed}:           true,
		{StateConnected, StateReconnecting}:      true,
		{StateConnected, StateDisconnecting}:     true,
		{StateConnected, StateDisconnected}:      true,
		{StateConnected, StateFailed}:            true,
		{StateReconnecting, StateConnected}:      true,
		{StateReconnecting, StateDisconnecting}:  true,
		{StateReconnecting, StateDisconnected}:   true,
		{StateReconnecting, StateFailed}:         true,
		{StateDisconnecting, StateDisconnected}:  true,
		{StateDisconnected, StateDisconnected}:   false,
		{StateFailed, StateConnecting}:           false,
		{StateDisconnecting, StateReconnecting}:  false,
		{StateConnecting, StateDisconnecting}:    false,
		{StateIdle, StateConnected}:              false,
		{StateDisconnected, StateReconnecting}:   false,
		{StateReconnecting, StateReconnecting}:   false,
		{StateConnected, StateConnected}:         false,
		{StateDisconnecting, StateDisconnecting}: false,
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range all {
		for _, to := range all {
			want := allowed[[2]State{from, to}]
			if got := canTransition(from, to); got != want {
				t.Errorf("%s -> %s allowed=%v, want %v", from, to, got, want)
			}
			m := stateMachine{state: from}
			_, err := m.move(to)
			if (err == nil) != want {
				t.Errorf("move %s -> %s: err %v, want allowed=%v", from, to, err, want)
			}
			if err != nil && m.state != from {
				t.Errorf("a refused move %s -> %s changed the state to %s", from, to, m.state)
			}
			// The README's table and the package documentation list
			// exactly the allowed transitions.
			row := fmt.Sprintf("| `%s` | `%s` |", from, to)
			if strings.Contains(string(readme), row) != want {
				t.Errorf("README.md row %q present=%v, want %v", row, !want, want)
			}
			docRow := fmt.Sprintf("//\t%-14s %-14s ", from, to)
			if strings.Contains(string(docs), docRow) != want {
				t.Errorf("doc.go row %q present=%v, want %v", docRow, !want, want)
			}
		}
	}
	for _, s := range all {
		if s.Terminal() != (len(transitions[s]) == 0) {
			t.Errorf("%s: Terminal()=%v but %d transitions out", s, s.Terminal(), len(transitions[s]))
		}
	}
	if newStateMachine().state != StateIdle {
		t.Fatal("a new state machine is not idle")
	}
}

func TestConnectURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://h":                 "http://h/v1/connect",
		"http://h/":                "http://h/v1/connect",
		"http://h/v1":              "http://h/v1/connect",
		"http://h/v1/":             "http://h/v1/connect",
		"http://h//v1//":           "http://h/v1/connect",
		"https://h:8443/base/v1":   "https://h:8443/base/v1/connect",
		"https://api.example.com ": "https://api.example.com/v1/connect",
		"http://h/v2":              "http://h/v2/v1/connect",
	} {
		got, err := connectURL(in)
		if err != nil || got != want {
			t.Errorf("connectURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "api.example.com", "ftp://h", "http://", "http://h?x=1", "ws://h"} {
		_, err := connectURL(bad)
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeInvalidRequest {
			t.Errorf("connectURL(%q): %v, want invalid_request", bad, err)
		}
	}
}

func TestErrorFromAPI(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	body := func(code string, details map[string]any) []byte {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": "m", "request_id": "req_x", "details": details}})
		return b
	}
	cases := []struct {
		status int
		code   string
		want   string
	}{
		{401, "participant_token_invalid", CodeAuthenticationFailed},
		{401, "participant_token_expired", CodeTokenExpired},
		{403, "permission_denied", CodePermissionDenied},
		{404, "room_not_found", CodeRoomNotFound},
		{404, "participant_not_found", CodePermissionDenied},
		{410, "room_ended", CodeRoomEnded},
		{410, "room_expired", CodeRoomEnded},
		{409, "quota_exceeded", CodeParticipantLimitReached},
		{402, "insufficient_credit", CodeInsufficientCredit},
		{429, "rate_limited", CodeRateLimited},
		{400, "invalid_request", CodeInvalidRequest},
		{503, "service_unavailable", CodeServiceUnavailable},
		{500, "internal_error", CodeUnknown},
		{402, "", CodeInsufficientCredit}, // no envelope: the status decides
		{429, "", CodeRateLimited},
		{502, "", CodeServiceUnavailable},
		{404, "", CodeUnknown},
	}
	for _, c := range cases {
		raw := body(c.code, nil)
		if c.code == "" {
			raw = []byte("<html>proxy error</html>")
		}
		e := errorFromAPI(c.status, http.Header{}, raw, now)
		if e.Code != c.want || e.Debug["http_status"] != c.status {
			t.Errorf("%d %s -> %s (%v), want %s", c.status, c.code, e.Code, e.Debug, c.want)
		}
		if c.code != "" && (e.Debug["api_code"] != c.code || e.Debug["request_id"] != "req_x") {
			t.Errorf("%d %s: debug %v lacks the API's code and request id", c.status, c.code, e.Debug)
		}
	}
	h := http.Header{}
	h.Set("Retry-After", "17")
	if e := errorFromAPI(429, h, body("rate_limited", nil), now); e.RetryAfter != 17*time.Second {
		t.Errorf("Retry-After 17: %v", e.RetryAfter)
	}
	h.Set("Retry-After", now.Add(42*time.Second).Format(http.TimeFormat))
	if e := errorFromAPI(429, h, body("rate_limited", nil), now); e.RetryAfter != 42*time.Second {
		t.Errorf("Retry-After date: %v", e.RetryAfter)
	}
	if e := errorFromAPI(429, http.Header{}, body("rate_limited", map[string]any{"retry_after_seconds": 9}), now); e.RetryAfter != 9*time.Second {
		t.Errorf("details.retry_after_seconds: %v", e.RetryAfter)
	}
	// errors.As and errors.Is by code.
	var err error = errorFromAPI(410, http.Header{}, body("room_ended", nil), now)
	var ce *Error
	if !errors.As(fmt.Errorf("wrapped: %w", err), &ce) || ce.Code != CodeRoomEnded {
		t.Fatalf("errors.As: %v", err)
	}
	if !errors.Is(err, &Error{Code: CodeRoomEnded}) || errors.Is(err, &Error{Code: CodeTimeout}) {
		t.Fatal("errors.Is by code")
	}
}

func TestClassifyMedia(t *testing.T) {
	cases := map[string]struct {
		action mediaAction
		code   string
	}{
		mediaTokenInvalid:     {actionReExchange, CodeAuthenticationFailed},
		mediaTokenExpired:     {actionReExchange, CodeTokenExpired},
		mediaRoomFull:         {actionFail, CodeParticipantLimitReached},
		mediaBadMessage:       {actionFail, CodeUnknown},
		mediaReplaced:         {actionEnd, CodeConnectionLost},
		mediaRemoved:          {actionEnd, CodePermissionDenied},
		mediaRoomClosed:       {actionEnd, CodeRoomEnded},
		mediaNodeShutdown:     {actionReconnect, CodeServiceUnavailable},
		mediaHeartbeatTimeout: {actionReconnect, CodeConnectionLost},
		mediaJoinTimeout:      {actionReconnect, CodeConnectionLost},
		mediaSlowConsumer:     {actionReconnect, CodeConnectionLost},
		"something_new":       {actionReconnect, CodeConnectionLost},

		mediaParticipantLimitReached: {actionFail, CodeParticipantLimitReached},
		mediaInsufficientCredit:      {actionFail, CodeInsufficientCredit},
		mediaSessionSuperseded:       {actionEnd, CodeConnectionLost},
	}
	for code, want := range cases {
		a, e := classifyMedia(&mediaError{code: code, message: "raw text", closeCode: 4999})
		if a != want.action || e.Code != want.code {
			t.Errorf("%s: %v %s, want %v %s", code, a, e.Code, want.action, want.code)
		}
		// The raw media error is debug metadata only.
		if e.Debug["media_code"] != code || e.Debug["media_message"] != "raw text" || strings.Contains(e.Message, "raw text") {
			t.Errorf("%s: message %q debug %v", code, e.Message, e.Debug)
		}
	}
	// The session ends as "replaced" for both ways a newer session takes
	// over: a newer connection on the node, a newer connect recorded by
	// the control plane.
	for _, code := range []string{mediaReplaced, mediaSessionSuperseded} {
		_, e := classifyMedia(&mediaError{code: code, closeCode: 4999})
		if got := endReason(e); got != ReasonReplaced {
			t.Errorf("%s: end reason %q, want %q", code, got, ReasonReplaced)
		}
	}
	if len(mediaCodeOfClose) != 14 {
		t.Fatalf("%d close codes, want the protocol's 14", len(mediaCodeOfClose))
	}
}

func TestBackoff(t *testing.T) {
	p := DefaultReconnectPolicy()
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		n := i + 1
		if got := p.delay(n, 0); got != w {
			t.Errorf("attempt %d without jitter: %v, want %v", n, got, w)
		}
		if got := p.delay(n, 0.999999); got < w/2 || got > w {
			t.Errorf("attempt %d with full jitter: %v, want within [%v, %v]", n, got, w/2, w)
		}
	}
	if got := p.delay(1000, 0); got != p.MaxDelay {
		t.Errorf("attempt 1000: %v", got)
	}
	z := ReconnectPolicy{}.withDefaults()
	if z != DefaultReconnectPolicy() {
		t.Errorf("zero policy %+v, want defaults", z)
	}
	if (ReconnectPolicy{MaxAttempts: -1}).withDefaults().MaxAttempts != -1 {
		t.Error("negative MaxAttempts (no reconnect) was replaced")
	}
}

func TestDispatcherOrderUnsubscribeAndNonBlocking(t *testing.T) {
	d := newDispatcher()
	release := make(chan struct{})
	var got []int
	var mu sync.Mutex
	first := true
	d.on(EventError, func(e Event) {
		if first {
			first = false
			<-release // a slow handler
		}
		mu.Lock()
		got = append(got, e.Attempt)
		mu.Unlock()
	})
	var other atomic.Int32
	unsub := d.on(EventError, func(Event) { other.Add(1) })
	emitted := make(chan struct{})
	go func() {
		for i := 0; i < 1000; i++ {
			d.emit(Event{Name: EventError, Attempt: i})
		}
		close(emitted)
	}()
	select {
	case <-emitted: // emit never waits for handlers
	case <-time.After(5 * time.Second):
		t.Fatal("emit blocked behind a slow handler")
	}
	unsub()
	unsub() // idempotent
	close(release)
	d.close()
	await(t, "the dispatcher's end", d.done)
	if len(got) != 1000 {
		t.Fatalf("%d events delivered", len(got))
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("event %d delivered as %d: out of order", i, v)
		}
	}
	if n := other.Load(); n > 1 {
		t.Fatalf("an unsubscribed handler ran %d times", n)
	}
	d.emit(Event{Name: EventError}) // after close: dropped, no panic
}

func TestOnUnknownEventPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("WithHandler with an unknown name did not panic")
		}
	}()
	WithHandler("participant_joined", func(Event) {})
}

func TestEventNamesAreTheSpecs(t *testing.T) {
	want := "connection.state_changed, connection.quality_changed, connection.reconnecting, connection.reconnected, connection.disconnected, participant.joined, participant.updated, participant.left, track.subscribed, track.unsubscribed, error"
	if got := strings.Join(EventNames(), ", "); got != want {
		t.Fatalf("event names %s", got)
	}
}

// TestConnectTimeoutOnInjectedClock: a token exchange that never answers
// fails with timeout once 15 s have passed on the session's clock, and not
// before.
func TestConnectTimeoutOnInjectedClock(t *testing.T) {
	stall := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(stall)

	clk := newFakeClock()
	r := newRecorder()
	result := make(chan error, 1)
	go func() {
		_, err := Connect(context.Background(), srv.URL, "rtc_pt_x", append(r.options(), WithClock(clk))...)
		result <- err
	}()
	clk.waitTimer(t, ConnectTimeout)
	clk.Advance(ConnectTimeout - time.Millisecond)
	select {
	case err := <-result:
		t.Fatalf("connect ended before its deadline: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	clk.Advance(time.Millisecond)
	err := await(t, "end of connect at its deadline", result)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeTimeout {
		t.Fatalf("err %v, want timeout", err)
	}
	// The events are delivered asynchronously, after Connect returned.
	r.waitStates(t, "[connecting failed]")
}

func TestConnectCancelled(t *testing.T) {
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // then the server notices the client going away
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	}))
	defer srv.Close()
	// Cancelled while the exchange is in flight.
	ctx, cancel := context.WithCancel(context.Background())
	inFlight := make(chan bool, 1)
	go func() {
		select {
		case <-arrived:
			inFlight <- true
		case <-time.After(waitLimit):
			inFlight <- false
		}
		cancel()
	}()
	_, err := Connect(ctx, srv.URL, "rtc_pt_x", WithClock(newFakeClock()))
	if !await(t, "the cancel", inFlight) {
		t.Fatalf("the token exchange never reached the server (Connect: %v)", err)
	}
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, context.Canceled) || e.Code == CodeTimeout {
		t.Fatalf("err %v, want a cancelled connect", err)
	}
	// A caller's own deadline is a timeout.
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = Connect(ctx, srv.URL, "rtc_pt_x")
	if !errors.As(err, &e) || e.Code != CodeTimeout {
		t.Fatalf("err %v, want timeout", err)
	}
}

// fakeNode is a minimal API + media node: /v1/connect hands out numbered
// media tokens, /rtc refuses the tokens listed in refuse with the given
// media error.
type fakeNode struct {
	srv       *httptest.Server
	exchanges atomic.Int32
	refuse    map[string]string // media token -> media error code
	bodies    chan map[string]any
	noPong    atomic.Bool // do not answer pings
	mu        sync.Mutex
	conns     map[*websocket.Conn]bool // sockets whose join was accepted
}

// drop closes every joined socket without a close frame.
func (f *fakeNode) drop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		_ = c.Close()
	}
}

func newFakeNode(t *testing.T, refuse map[string]string) *fakeNode {
	f := &fakeNode{refuse: refuse, bodies: make(chan map[string]any, 16), conns: map[*websocket.Conn]bool{}}
	up := websocket.Upgrader{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/connect", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		select {
		case f.bodies <- body:
		default:
		}
		n := f.exchanges.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"object": "connect_session", "session_id": fmt.Sprintf("cs_%d", n),
			"endpoint": "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/rtc", "media_token": fmt.Sprintf("mt_%d", n),
			"expires_at": time.Now().Add(time.Minute).UTC().Format(time.RFC3339), "room": map[string]any{"id": "room_1"},
			"participant": map[string]any{"id": "part_1"}, "features": map[string]any{"audio": true, "video": true, "screen_share": true},
		})
	})
	mux.HandleFunc("GET /rtc", func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		var join struct {
			Type       string `json:"type"`
			MediaToken string `json:"media_token"`
		}
		if ws.ReadJSON(&join) != nil {
			return
		}
		if code, ok := f.refuse[join.MediaToken]; ok {
			_ = ws.WriteJSON(map[string]any{"type": "error", "protocol": 1, "code": code, "message": "refused"})
			closeCode := map[string]int{"token_expired": 4002, "token_invalid": 4001, "room_full": 4004}[code]
			_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(closeCode, code), time.Now().Add(time.Second))
			return
		}
		// Recorded before joined is sent: once the SDK has joined (Connect
		// returned, or reconnected), drop reaches this socket.
		f.mu.Lock()
		f.conns[ws] = true
		f.mu.Unlock()
		defer func() { f.mu.Lock(); delete(f.conns, ws); f.mu.Unlock() }()
		_ = ws.WriteJSON(map[string]any{"type": "joined", "protocol": 1, "session_id": "cs_x", "room_id": "room_1",
			"participant_id": "part_1", "role": "publisher", "heartbeat_interval_ms": 5000, "heartbeat_timeout_ms": 15000,
			"participants": []any{}})
		for {
			var m map[string]any
			if ws.ReadJSON(&m) != nil {
				return
			}
			switch m["type"] {
			case "ping":
				if f.noPong.Load() {
					continue
				}
				_ = ws.WriteJSON(map[string]any{"type": "pong", "ts": m["ts"]})
			case "leave":
				_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(1000, ""), time.Now().Add(time.Second))
				return
			}
		}
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// TestMediaTokenRefusedIsExchangedAgain: when the media node refuses the
// media token (expired), the SDK exchanges the participant token again and
// joins with the new media token, within the same connect.
func TestMediaTokenRefusedIsExchangedAgain(t *testing.T) {
	f := newFakeNode(t, map[string]string{"mt_1": "token_expired"})
	connectOK(t, f.srv.URL+"/v1/", "rtc_pt_x")
	if n := f.exchanges.Load(); n != 2 {
		t.Fatalf("%d exchanges, want 2", n)
	}
	body := await(t, "the connect body", f.bodies)
	sdk, _ := body["sdk"].(map[string]any)
	if body["token"] != "rtc_pt_x" || sdk["name"] != SDKName || sdk["version"] != Version || sdk["platform"] == "" {
		t.Fatalf("connect body %v", body)
	}
	// Refused every time (token_invalid): the error is authentication_failed
	// after three tries.
	f2 := newFakeNode(t, map[string]string{"mt_1": "token_invalid", "mt_2": "token_invalid", "mt_3": "token_invalid"})
	e := connectErr(t, f2.srv.URL, "rtc_pt_x")
	if e.Code != CodeAuthenticationFailed || e.Debug["media_code"] != "token_invalid" || e.Debug["close_code"] != 4001 {
		t.Fatalf("err %v (%v), want authentication_failed from the media node", e, e.Debug)
	}
	if n := f2.exchanges.Load(); n != 3 {
		t.Fatalf("%d exchanges, want 3", n)
	}
	// room_full is final at once.
	f3 := newFakeNode(t, map[string]string{"mt_1": "room_full"})
	if e := connectErr(t, f3.srv.URL, "rtc_pt_x"); e.Code != CodeParticipantLimitReached {
		t.Fatalf("err %v, want participant_limit_reached", e)
	}
}
