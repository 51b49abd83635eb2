package media

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"rtcd/clock"
)

var (
	testKey  = [32]byte{1, 2, 3, 4, 5, 6, 7, 8}
	otherKey = [32]byte{9, 9, 9}
)

const testTolerance = DefaultSignatureToleranceSeconds * time.Second

func TestSignAndVerify(t *testing.T) {
	body := []byte(`{"type":"joined"}`)
	ts, sig := SignRequest(testKey, testStart, body)
	if ts != "1740830400" || !strings.HasPrefix(sig, "v1=") || len(sig) != 3+64 {
		t.Fatalf("SignRequest = %q, %q", ts, sig)
	}
	if err := VerifyReport(testKey, ts, sig, body, testStart, testTolerance); err != nil {
		t.Fatalf("valid signature: %v", err)
	}
	_, otherSig := SignRequest(otherKey, testStart, body)
	tsPlus, sigPlus := "+"+ts, "v1="+strings.Repeat("0", 64)
	tests := []struct {
		name    string
		key     [32]byte
		ts, sig string
		body    []byte
		now     time.Time
		want    error
	}{
		{name: "other key", key: testKey, ts: ts, sig: otherSig, body: body, now: testStart, want: ErrSignatureInvalid},
		{name: "zero key", key: [32]byte{}, ts: ts, sig: sig, body: body, now: testStart, want: ErrSignatureInvalid},
		{name: "altered body", key: testKey, ts: ts, sig: sig, body: []byte(`{"type":"left"}`), now: testStart, want: ErrSignatureInvalid},
		{name: "altered timestamp", key: testKey, ts: "1740830401", sig: sig, body: body, now: testStart, want: ErrSignatureInvalid},
		{name: "signed timestamp with sign", key: testKey, ts: tsPlus, sig: sigPlus, body: body, now: testStart, want: ErrSignatureInvalid},
		{name: "no timestamp", key: testKey, ts: "", sig: sig, body: body, now: testStart, want: ErrSignatureInvalid},
		{name: "no signature", key: testKey, ts: ts, sig: "", body: body, now: testStart, want: ErrSignatureInvalid},
		{name: "other scheme", key: testKey, ts: ts, sig: "v2=" + sig[3:], body: body, now: testStart, want: ErrSignatureInvalid},
		{name: "not hex", key: testKey, ts: ts, sig: "v1=" + strings.Repeat("z", 64), body: body, now: testStart, want: ErrSignatureInvalid},
		{name: "short", key: testKey, ts: ts, sig: sig[:40], body: body, now: testStart, want: ErrSignatureInvalid},
		{name: "too old", key: testKey, ts: ts, sig: sig, body: body, now: testStart.Add(testTolerance + time.Second), want: ErrSignatureExpired},
		{name: "too new", key: testKey, ts: ts, sig: sig, body: body, now: testStart.Add(-testTolerance - time.Second), want: ErrSignatureExpired},
		{name: "at the tolerance", key: testKey, ts: ts, sig: sig, body: body, now: testStart.Add(testTolerance), want: nil},
	}
	for _, tc := range tests {
		if err := VerifyReport(tc.key, tc.ts, tc.sig, tc.body, tc.now, testTolerance); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("%s: VerifyReport = %v, want %v", tc.name, err, tc.want)
		}
	}
}

// controlPlane is a test control plane: it verifies and decodes reports
// exactly as the real one must, and hands them to the test.
type controlPlane struct {
	srv     *httptest.Server
	reports chan Report
	clock   clock.Clock

	mu       sync.Mutex
	statuses []int // forced answers for the next requests, in order
	refused  int   // requests answered 401
}

func newControlPlane(t *testing.T, clk clock.Clock) *controlPlane {
	cp := &controlPlane{reports: make(chan Report, 100), clock: clk}
	cp.srv = httptest.NewServer(http.HandlerFunc(cp.serve))
	t.Cleanup(cp.srv.Close)
	return cp
}

func (cp *controlPlane) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != ReportsPath {
		http.NotFound(w, r)
		return
	}
	cp.mu.Lock()
	if len(cp.statuses) > 0 {
		status := cp.statuses[0]
		cp.statuses = cp.statuses[1:]
		cp.mu.Unlock()
		w.WriteHeader(status)
		return
	}
	cp.mu.Unlock()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxReportBodyBytes))
	if err != nil {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
		return
	}
	if err := VerifyReport(testKey, r.Header.Get(HeaderTimestamp), r.Header.Get(HeaderSignature), body, cp.clock.Now(), testTolerance); err != nil {
		cp.mu.Lock()
		cp.refused++
		cp.mu.Unlock()
		http.Error(w, "signature refused", http.StatusUnauthorized)
		return
	}
	rep, err := DecodeReport(body)
	if err != nil {
		http.Error(w, "bad report", http.StatusBadRequest)
		return
	}
	cp.reports <- rep
	w.WriteHeader(http.StatusNoContent)
}

func (cp *controlPlane) next(t *testing.T) Report {
	t.Helper()
	select {
	case r := <-cp.reports:
		return r
	case <-time.After(testWaitSeconds * time.Second):
		t.Fatal("no report reached the control plane")
		return Report{}
	}
}

func TestHTTPReporterDeliversSignedReports(t *testing.T) {
	var reporter *HTTPReporter
	var cp *controlPlane
	tn := newTestNode(t, func(c *NodeConfig) {
		cp = newControlPlane(t, c.Clock)
		var err error
		reporter, err = NewHTTPReporter(HTTPConfig{BaseURL: cp.srv.URL, Key: testKey, Clock: c.Clock})
		if err != nil {
			t.Fatal(err)
		}
		c.Reporter = reporter
	})
	a, _ := tn.join(t, "1", "a", "1")
	tn.clock.Advance(time.Second)
	a.send(map[string]any{"type": "leave"})
	a.expectEnd("", CloseNormal)
	tn.node.ReportPresence()

	if r := cp.next(t); r.Type != ReportJoined || *r.Joined != (JoinReport{NodeID: "node-1", SessionID: "cs_1", ProjectID: "prj_1",
		RoomID: "room_1", ParticipantID: "part_a", IssuedAt: testStart, At: testStart}) {
		t.Fatalf("first report = %+v", r)
	}
	if r := cp.next(t); r.Type != ReportLeft || r.Left.Reason != ReasonLeft || !r.Left.At.Equal(testStart.Add(time.Second)) {
		t.Fatalf("second report = %+v", r)
	}
	if r := cp.next(t); r.Type != ReportPresence || r.Presence.NodeID != "node-1" || r.Presence.Sessions == nil || len(r.Presence.Sessions) != 0 {
		t.Fatalf("third report = %+v", r)
	}
	if err := reporter.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if reporter.Dropped() != 0 {
		t.Fatalf("Dropped = %d", reporter.Dropped())
	}
}

func TestHTTPReporterRetriesTemporaryFailures(t *testing.T) {
	cp := newControlPlane(t, clock.NewFake(testStart))
	cp.statuses = []int{http.StatusServiceUnavailable, http.StatusTooManyRequests}
	r, err := NewHTTPReporter(HTTPConfig{BaseURL: cp.srv.URL, Key: testKey, Clock: clock.NewFake(testStart)})
	if err != nil {
		t.Fatal(err)
	}
	r.Joined(JoinReport{NodeID: "n", ParticipantID: "part_a"})
	r.Left(LeaveReport{NodeID: "n", ParticipantID: "part_a", Reason: ReasonLeft})
	// Both arrive, in order, after two failed attempts of the first.
	if got := cp.next(t); got.Type != ReportJoined {
		t.Fatalf("first = %+v", got)
	}
	if got := cp.next(t); got.Type != ReportLeft {
		t.Fatalf("second = %+v", got)
	}
	if err := r.Close(context.Background()); err != nil || r.Dropped() != 0 {
		t.Fatalf("Close = %v, Dropped = %d", err, r.Dropped())
	}
}

func TestControlPlaneRefusesForgedReports(t *testing.T) {
	cp := newControlPlane(t, clock.NewFake(testStart))
	// A reporter with the wrong key is refused, and does not retry a 401.
	forger, err := NewHTTPReporter(HTTPConfig{BaseURL: cp.srv.URL, Key: otherKey, Clock: clock.NewFake(testStart),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	forger.Joined(JoinReport{NodeID: "n", ParticipantID: "part_a"})
	if err := forger.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if forger.Dropped() != 1 {
		t.Fatalf("Dropped = %d, want 1", forger.Dropped())
	}
	cp.mu.Lock()
	refused := cp.refused
	cp.mu.Unlock()
	if refused != 1 {
		t.Fatalf("refused %d requests, want exactly 1 (no retries)", refused)
	}

	body := []byte(`{"type":"joined","joined":{"node_id":"n"}}`)
	post := func(ts, sig string) int {
		req, _ := http.NewRequest(http.MethodPost, cp.srv.URL+ReportsPath, bytes.NewReader(body))
		req.Header.Set(HeaderTimestamp, ts)
		req.Header.Set(HeaderSignature, sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	ts, sig := SignRequest(testKey, testStart, body)
	staleTS, staleSig := SignRequest(testKey, testStart.Add(-testTolerance-time.Second), body)
	forgedTS, forgedSig := SignRequest(otherKey, testStart, body)
	if got := post(forgedTS, forgedSig); got != http.StatusUnauthorized {
		t.Fatalf("forged: HTTP %d", got)
	}
	if got := post(staleTS, staleSig); got != http.StatusUnauthorized {
		t.Fatalf("replayed: HTTP %d", got)
	}
	if got := post("", ""); got != http.StatusUnauthorized {
		t.Fatalf("unsigned: HTTP %d", got)
	}
	if got := post(ts, sig); got != http.StatusNoContent {
		t.Fatalf("genuine: HTTP %d", got)
	}
}

func TestDecodeReport(t *testing.T) {
	bad := []string{
		``,
		`{}`,
		`{"type":"joined"}`,
		`{"type":"joined","left":{"reason":"left"}}`,
		`{"type":"joined","joined":{},"left":{"reason":"left"}}`,
		`{"type":"left","left":{}}`,
		`{"type":"presence","presence":{},"extra":1}`,
		`{"type":"joined","joined":{"surprise":1}}`,
		`{"type":"joined","joined":{}} {}`,
		`{"type":"close_room","room_id":"room_1"}`,
	}
	for _, body := range bad {
		if _, err := DecodeReport([]byte(body)); !errors.Is(err, ErrBadReport) {
			t.Errorf("DecodeReport(%s) = %v, want ErrBadReport", body, err)
		}
	}
	r, err := DecodeReport([]byte(`{"type":"left","left":{"participant_id":"part_a","reason":"left","at":"2025-03-01T12:00:00Z"}}`))
	if err != nil || r.Left.ParticipantID != "part_a" || !r.Left.At.Equal(testStart) {
		t.Fatalf("DecodeReport = %+v, %v", r, err)
	}
}

func TestHTTPEngineRoundTrip(t *testing.T) {
	tn := newTestNode(t, nil)
	ctl := httptest.NewServer(NewControlHandler(tn.node, testKey, tn.clock))
	t.Cleanup(ctl.Close)
	engine, err := NewHTTPEngine(HTTPConfig{BaseURL: ctl.URL, Key: testKey, Clock: tn.clock})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := tn.join(t, "1", "a", "1")
	b, _ := tn.join(t, "1", "b", "2")
	a.expect(typeParticipantJoined)
	tn.rec.nextJoin(t)
	tn.rec.nextJoin(t)

	engine.RemoveParticipant("room_1", "part_a")
	a.expectEnd(CodeRemoved, CloseRemoved)
	if left := b.expect(typeParticipantLeft); left.ParticipantID != "part_a" || left.Reason != ReasonRemoved {
		t.Fatalf("participant.left = %+v", left)
	}
	if l := tn.rec.nextLeave(t); l.ParticipantID != "part_a" || l.Reason != ReasonRemoved {
		t.Fatalf("leave report = %+v", l)
	}

	engine.CloseRoom("room_1", "deleted")
	if m := b.expectEnd(CodeRoomClosed, CloseRoomClosed); !strings.Contains(m.Message, "deleted") {
		t.Fatalf("error = %+v", m)
	}
	if l := tn.rec.nextLeave(t); l.ParticipantID != "part_b" || l.Reason != ReasonRoomClosed {
		t.Fatalf("leave report = %+v", l)
	}

	// Send is synchronous: when it returns, the node has acted.
	c, _ := tn.join(t, "2", "c", "3")
	tn.rec.nextJoin(t)
	if err := engine.Send(context.Background(), Command{Command: CommandCloseRoom, RoomID: "room_2"}); err != nil {
		t.Fatalf("Send = %v", err)
	}
	if l := tn.rec.nextLeave(t); l.ParticipantID != "part_c" || l.Reason != ReasonRoomClosed {
		t.Fatalf("leave report = %+v", l)
	}
	c.expectEnd(CodeRoomClosed, CloseRoomClosed)
	if err := engine.Send(context.Background(), Command{Command: "reboot"}); err == nil {
		t.Fatal("Send of an unknown command succeeded")
	}
	if err := engine.Close(context.Background()); err != nil || engine.Dropped() != 0 {
		t.Fatalf("Close = %v, Dropped = %d", err, engine.Dropped())
	}
	tn.rec.none(t)
}

// The control plane's answers to joins travel as signed commands too.
func TestHTTPEngineAdmitAndCloseSession(t *testing.T) {
	tn := newAdmittingNode(t)
	ctl := httptest.NewServer(NewControlHandler(tn.node, testKey, tn.clock))
	t.Cleanup(ctl.Close)
	engine, err := NewHTTPEngine(HTTPConfig{BaseURL: ctl.URL, Key: testKey, Clock: tn.clock})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := tn.ask(t, "1", "a", "1")
	b, _ := tn.ask(t, "1", "b", "2")
	engine.AdmitSession("room_1", "part_a", "cs_1")
	a.expect(typeJoined)
	engine.CloseSession("room_1", "part_b", "cs_2", CodeParticipantLimitReached)
	b.expectEnd(CodeParticipantLimitReached, CloseParticipantLimitReached)
	if err := engine.Close(context.Background()); err != nil || engine.Dropped() != 0 {
		t.Fatalf("Close = %v, Dropped = %d", err, engine.Dropped())
	}
	tn.rec.none(t)
}

// fakeEngine records the commands it is given.
type fakeEngine struct {
	mu    sync.Mutex
	calls []string
}

func (e *fakeEngine) CloseRoom(roomID, reason string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, "close "+roomID+" "+reason)
}

func (e *fakeEngine) RemoveParticipant(roomID, participantID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, "remove "+roomID+" "+participantID)
}

func (e *fakeEngine) AdmitSession(roomID, participantID, sessionID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, "admit "+roomID+" "+participantID+" "+sessionID)
}

func (e *fakeEngine) CloseSession(roomID, participantID, sessionID, code string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, "close_session "+roomID+" "+participantID+" "+sessionID+" "+code)
}

func TestControlHandlerRefuses(t *testing.T) {
	clk := clock.NewFake(testStart)
	engine := &fakeEngine{}
	ctl := httptest.NewServer(NewControlHandler(engine, testKey, clk))
	t.Cleanup(ctl.Close)

	send := func(method, path string, key [32]byte, at time.Time, body []byte) int {
		t.Helper()
		req, _ := http.NewRequest(method, ctl.URL+path, bytes.NewReader(body))
		ts, sig := SignRequest(key, at, body)
		req.Header.Set(HeaderTimestamp, ts)
		req.Header.Set(HeaderSignature, sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	mustJSON := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	closeRoom1 := mustJSON(Command{Command: CommandCloseRoom, RoomID: "room_1", Reason: "deleted"})
	removeA := mustJSON(Command{Command: CommandRemoveParticipant, RoomID: "room_1", ParticipantID: "part_a"})
	admitA := mustJSON(Command{Command: CommandAdmitSession, RoomID: "room_1", ParticipantID: "part_a", SessionID: "cs_1"})
	closeA := mustJSON(Command{Command: CommandCloseSession, RoomID: "room_1", ParticipantID: "part_a", SessionID: "cs_1", Code: CodeSessionSuperseded})
	const sessionA = "/internal/rooms/room_1/participants/part_a/sessions/cs_1"
	tests := []struct {
		name   string
		method string
		path   string
		key    [32]byte
		at     time.Time
		body   []byte
		want   int
	}{
		{"forged", "POST", "/internal/rooms/room_1/close", otherKey, testStart, closeRoom1, http.StatusUnauthorized},
		{"stale", "POST", "/internal/rooms/room_1/close", testKey, testStart.Add(-testTolerance - time.Second), closeRoom1, http.StatusUnauthorized},
		{"other room in path", "POST", "/internal/rooms/room_2/close", testKey, testStart, closeRoom1, http.StatusBadRequest},
		{"remove body on close", "POST", "/internal/rooms/room_1/close", testKey, testStart, removeA, http.StatusBadRequest},
		{"other participant", "POST", "/internal/rooms/room_1/participants/part_b/remove", testKey, testStart, removeA, http.StatusBadRequest},
		{"report replayed as command", "POST", "/internal/rooms/room_1/close", testKey, testStart,
			[]byte(`{"type":"left","left":{"room_id":"room_1","reason":"left"}}`), http.StatusBadRequest},
		{"unknown field", "POST", "/internal/rooms/room_1/close", testKey, testStart,
			[]byte(`{"command":"close_room","room_id":"room_1","force":true}`), http.StatusBadRequest},
		{"too large", "POST", "/internal/rooms/room_1/close", testKey, testStart, bytes.Repeat([]byte(" "), maxCommandBodyBytes+1), http.StatusRequestEntityTooLarge},
		{"GET", "GET", "/internal/rooms/room_1/close", testKey, testStart, nil, http.StatusMethodNotAllowed},
		{"unknown path", "POST", "/internal/rooms/room_1/explode", testKey, testStart, closeRoom1, http.StatusNotFound},
		{"admit of another session", "POST", "/internal/rooms/room_1/participants/part_a/sessions/cs_2/admit", testKey, testStart, admitA, http.StatusBadRequest},
		{"admit with a code", "POST", sessionA + "/admit", testKey, testStart,
			mustJSON(Command{Command: CommandAdmitSession, RoomID: "room_1", ParticipantID: "part_a", SessionID: "cs_1", Code: CodeRemoved}), http.StatusBadRequest},
		{"close without a code", "POST", sessionA + "/close", testKey, testStart,
			mustJSON(Command{Command: CommandCloseSession, RoomID: "room_1", ParticipantID: "part_a", SessionID: "cs_1"}), http.StatusBadRequest},
		{"close with an unknown code", "POST", sessionA + "/close", testKey, testStart,
			mustJSON(Command{Command: CommandCloseSession, RoomID: "room_1", ParticipantID: "part_a", SessionID: "cs_1", Code: CodeNodeShutdown}), http.StatusBadRequest},
		{"close body on admit", "POST", sessionA + "/admit", testKey, testStart, closeA, http.StatusBadRequest},
	}
	for _, tc := range tests {
		if got := send(tc.method, tc.path, tc.key, tc.at, tc.body); got != tc.want {
			t.Errorf("%s: HTTP %d, want %d", tc.name, got, tc.want)
		}
	}
	engine.mu.Lock()
	if len(engine.calls) != 0 {
		t.Fatalf("refused requests reached the engine: %v", engine.calls)
	}
	engine.mu.Unlock()

	if got := send("POST", "/internal/rooms/room_1/close", testKey, testStart, closeRoom1); got != http.StatusNoContent {
		t.Fatalf("close: HTTP %d", got)
	}
	if got := send("POST", "/internal/rooms/room_1/participants/part_a/remove", testKey, testStart, removeA); got != http.StatusNoContent {
		t.Fatalf("remove: HTTP %d", got)
	}
	if got := send("POST", sessionA+"/admit", testKey, testStart, admitA); got != http.StatusNoContent {
		t.Fatalf("admit: HTTP %d", got)
	}
	if got := send("POST", sessionA+"/close", testKey, testStart, closeA); got != http.StatusNoContent {
		t.Fatalf("close session: HTTP %d", got)
	}
	engine.mu.Lock()
	defer engine.mu.Unlock()
	if want := []string{"close room_1 deleted", "remove room_1 part_a", "admit room_1 part_a cs_1", "close_session room_1 part_a cs_1 session_superseded"}; strings.Join(engine.calls, "|") != strings.Join(want, "|") {
		t.Fatalf("engine calls = %v, want %v", engine.calls, want)
	}
}

func TestHTTPConfigValidation(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "http://", "http://x/path", "http://x?q=1", "::"} {
		if _, err := NewHTTPReporter(HTTPConfig{BaseURL: u, Key: testKey}); err == nil {
			t.Errorf("BaseURL %q accepted", u)
		}
	}
	if _, err := NewHTTPEngine(HTTPConfig{BaseURL: "http://x"}); err == nil {
		t.Error("zero key accepted")
	}
	r, err := NewHTTPReporter(HTTPConfig{BaseURL: "http://127.0.0.1:1/", Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
