package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// These tests run against the real rtcd binary (built by TestMain) and its
// built-in media node.

func connectOK(t *testing.T, origin, token string, opts ...Option) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	s, err := Connect(ctx, origin, token, opts...)
	if err != nil {
		t.Fatalf("Connect(%s): %v", origin, err)
	}
	t.Cleanup(func() { closeOK(t, s) })
	return s
}

func connectErr(t *testing.T, origin, token string, opts ...Option) *Error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	s, err := Connect(ctx, origin, token, opts...)
	if err == nil {
		closeOK(t, s)
		t.Fatalf("Connect(%s) succeeded, want an error", origin)
	}
	if s != nil {
		t.Fatal("Connect returned a session with its error")
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Connect error %T %v is not an *Error", err, err)
	}
	return e
}

func leave(t *testing.T, s *Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	left := make(chan error, 1)
	go func() { left <- s.Leave(ctx) }()
	if err := await(t, "return from Leave", left); err != nil {
		t.Fatalf("Leave: %v", err)
	}
}

func isState(st State) func(Event) bool {
	return func(e Event) bool { return e.Name == EventStateChanged && e.State == st }
}

func TestConnectEventsUpdateAndLeave(t *testing.T) {
	t.Parallel()
	srv := startServer(t, serverOpts{})
	room := srv.createRoom()
	aID, aTok := srv.createParticipant(room, map[string]any{"name": "ann"})
	bID, bTok := srv.createParticipant(room, map[string]any{"role": "subscriber"})

	ra := newRecorder()
	a := connectOK(t, srv.Base, aTok, ra.options()...)
	if a.State() != StateConnected || a.RoomID() != room || a.ParticipantID() != aID || a.Role() != "publisher" ||
		!strings.HasPrefix(a.SessionID(), "cs_") || a.Features() != (Features{Audio: true, Video: true, ScreenShare: true}) {
		t.Fatalf("session after connect: %v role=%s features=%+v", a, a.Role(), a.Features())
	}
	ra.waitStates(t, "[connecting connected]")
	if first := ra.snapshot()[0]; first.PreviousState != StateIdle || first.State != StateConnecting {
		t.Fatalf("first event %+v, want idle -> connecting", first)
	}
	ra.wait(t, "quality from the first pong", func(e Event) bool {
		return e.Name == EventQualityChanged && e.PreviousQuality == QualityUnknown && e.Quality == QualityExcellent
	})
	eventually(t, "ann joined in the control plane", func() bool { return srv.participantStatus(room, aID) == "joined" })

	var removed, kept atomic.Int32
	unsub := a.On(EventParticipantLeft, func(Event) { removed.Add(1) })
	a.On(EventParticipantLeft, func(Event) { kept.Add(1) })
	unsub()

	rb := newRecorder()
	b := connectOK(t, srv.Base+"/", bTok, rb.options()...)
	if b.Role() != "subscriber" || b.Features() != (Features{}) {
		t.Fatalf("subscriber: role %s features %+v", b.Role(), b.Features())
	}
	rb.wait(t, "participant.joined for ann, already in the room", func(e Event) bool {
		return e.Name == EventParticipantJoined && e.Participant.ID == aID && string(e.Participant.State) == "{}"
	})
	if ps := b.Participants(); len(ps) != 1 || ps[0].ID != aID || ps[0].Role != "publisher" {
		t.Fatalf("b sees %+v", ps)
	}
	ra.wait(t, "participant.joined for b", func(e Event) bool {
		return e.Name == EventParticipantJoined && e.Participant.ID == bID && e.Participant.Role == "subscriber"
	})

	if err := b.UpdateState(context.Background(), map[string]any{"muted": true, "name": "bob"}); err != nil {
		t.Fatal(err)
	}
	ra.wait(t, "participant.updated for b", func(e Event) bool {
		return e.Name == EventParticipantUpdated && e.Participant.ID == bID && string(e.Participant.State) == `{"muted":true,"name":"bob"}`
	})
	if ps := a.Participants(); len(ps) != 1 || string(ps[0].State) != `{"muted":true,"name":"bob"}` {
		t.Fatalf("a sees %+v", ps)
	}
	var e *Error
	if err := b.UpdateState(context.Background(), []int{1}); !errors.As(err, &e) || e.Code != CodeInvalidRequest {
		t.Fatalf("UpdateState with an array: %v", err)
	}

	leave(t, b)
	if b.State() != StateDisconnected || b.Err() != nil {
		t.Fatalf("after Leave: %s %v", b.State(), b.Err())
	}
	awaitEnd(t, b, rb)
	rb.waitStates(t, "[connecting connected disconnecting disconnected]")
	d := rb.wait(t, "connection.disconnected", func(e Event) bool { return e.Name == EventDisconnected })
	if d.Reason != ReasonLeft || d.Err != nil {
		t.Fatalf("disconnected %+v", d)
	}
	if rb.count(EventError) != 0 {
		t.Fatalf("errors after a clean leave: %s", describe(rb.snapshot()))
	}
	ra.wait(t, "participant.left for b", func(e Event) bool {
		return e.Name == EventParticipantLeft && e.Participant.ID == bID && e.Reason == "left"
	})
	eventually(t, "b left in the control plane", func() bool { return srv.participantStatus(room, bID) == "left" })
	if len(a.Participants()) != 0 {
		t.Fatalf("a still sees %+v", a.Participants())
	}
	eventually(t, "the kept handler ran", func() bool { return kept.Load() == 1 })
	if removed.Load() != 0 || kept.Load() != 1 {
		t.Fatalf("unsubscribed handler ran %d times, kept one %d", removed.Load(), kept.Load())
	}
	// Leave again, and calls on an ended session.
	leave(t, b)
	if err := b.UpdateState(context.Background(), map[string]any{}); !errors.As(err, &e) || e.Code != CodeInvalidRequest {
		t.Fatalf("UpdateState after Leave: %v", err)
	}

	closeOK(t, a)
	awaitEnd(t, a, ra)
	eventually(t, "ann left in the control plane", func() bool { return srv.participantStatus(room, aID) == "left" })
}

func TestOriginForms(t *testing.T) {
	t.Parallel()
	srv := startServer(t, serverOpts{})
	room := srv.createRoom()
	_, tok := srv.createParticipant(room, nil)
	for _, origin := range []string{srv.Base, srv.Base + "/", srv.Base + "/v1", srv.Base + "/v1/"} {
		s := connectOK(t, origin, tok)
		if s.RoomID() != room {
			t.Fatalf("%s: room %s", origin, s.RoomID())
		}
		leave(t, s)
	}
	for _, origin := range []string{"", "127.0.0.1:1", "ws://" + strings.TrimPrefix(srv.Base, "http://")} {
		if e := connectErr(t, origin, tok); e.Code != CodeInvalidRequest {
			t.Fatalf("origin %q: %s", origin, e.Code)
		}
	}
	// An origin with another path is kept: the API answers 404.
	if e := connectErr(t, srv.Base+"/v2", tok); e.Debug["http_status"] != http.StatusNotFound {
		t.Fatalf("origin /v2: %v", e.Debug)
	}
}

func TestConnectErrors(t *testing.T) {
	t.Parallel()
	srv := startServer(t, serverOpts{})
	room := srv.createRoom()
	_, tok := srv.createParticipant(room, nil)

	t.Run("bad token", func(t *testing.T) {
		r := newRecorder()
		e := connectErr(t, srv.Base, tok[:len(tok)-2]+"xx", r.options()...)
		if e.Code != CodeAuthenticationFailed || e.Debug["api_code"] != "participant_token_invalid" || e.Debug["http_status"] != 401 ||
			!strings.HasPrefix(fmt.Sprint(e.Debug["request_id"]), "req_") {
			t.Fatalf("%s %v", e.Code, e.Debug)
		}
		if !errors.Is(e, &Error{Code: CodeAuthenticationFailed}) {
			t.Fatal("errors.Is by code")
		}
		r.waitStates(t, "[connecting failed]")
		ev := r.wait(t, "error event", func(e Event) bool { return e.Name == EventError })
		if ev.Err.Code != CodeAuthenticationFailed || r.count(EventDisconnected) != 0 {
			t.Fatalf("events %s", describe(r.snapshot()))
		}
		if e := connectErr(t, srv.Base, ""); e.Code != CodeAuthenticationFailed {
			t.Fatalf("empty token: %s", e.Code)
		}
	})

	t.Run("removed participant", func(t *testing.T) {
		pid, ptok := srv.createParticipant(room, nil)
		srv.mustCall("DELETE", "/v1/rooms/"+room+"/participants/"+pid, nil, 200)
		e := connectErr(t, srv.Base, ptok)
		if e.Code != CodePermissionDenied || e.Debug["api_code"] != "participant_not_found" {
			t.Fatalf("%s %v", e.Code, e.Debug)
		}
	})

	t.Run("ended room", func(t *testing.T) {
		room2 := srv.createRoom()
		_, tok2 := srv.createParticipant(room2, nil)
		srv.mustCall("DELETE", "/v1/rooms/"+room2, nil, 200)
		e := connectErr(t, srv.Base, tok2)
		if e.Code != CodeRoomEnded || e.Debug["api_code"] != "room_ended" || e.Debug["http_status"] != 410 {
			t.Fatalf("%s %v", e.Code, e.Debug)
		}
	})

	t.Run("network unavailable", func(t *testing.T) {
		e := connectErr(t, "http://"+freeAddr(t), tok)
		if e.Code != CodeNetworkUnavailable {
			t.Fatalf("%s %v", e.Code, e.Debug)
		}
	})
}

// TestInsufficientCredit: a workspace below minimum_credit_to_start gets
// 402, which the SDK reports as insufficient_credit.
func TestInsufficientCredit(t *testing.T) {
	t.Parallel()
	srv := startServer(t, serverOpts{
		initFlags:  []string{"--bootstrap-credit=0"},
		serveFlags: []string{"--bootstrap-credit=0", "--minimum-credit-to-start=1.00"},
	})
	room := srv.createRoom()
	// With no credit even the participant cannot be created (402), so
	// credit the workspace, create it, and take the credit back.
	if st, out := srv.call("POST", srv.Base+"/v1/rooms/"+room+"/participants", "", map[string]any{}); st != 402 {
		t.Fatalf("participant with no credit: %d %v", st, out)
	}
	srv.adjust("5.00")
	_, tok := srv.createParticipant(room, nil)
	srv.adjust("-5.00")
	e := connectErr(t, srv.Base, tok)
	if e.Code != CodeInsufficientCredit || e.Debug["http_status"] != 402 {
		t.Fatalf("%s %v", e.Code, e.Debug)
	}
}

// TestRateLimited: the per-IP connect limit answers 429 with Retry-After,
// reported as rate_limited with RetryAfter.
func TestRateLimited(t *testing.T) {
	t.Parallel()
	srv := startServer(t, serverOpts{serveFlags: []string{"--connect-per-ip-per-minute=1"}})
	room := srv.createRoom()
	_, tok := srv.createParticipant(room, nil)
	var e *Error
	// One connect per minute: the second (or, across a minute boundary,
	// the third) is refused.
	for i := 0; i < 3 && e == nil; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		s, err := Connect(ctx, srv.Base, tok)
		cancel()
		if err == nil {
			leave(t, s)
			continue
		}
		if !errors.As(err, &e) {
			t.Fatalf("%T %v", err, err)
		}
	}
	if e == nil || e.Code != CodeRateLimited || e.RetryAfter <= 0 || e.RetryAfter > time.Minute || e.Debug["http_status"] != 429 {
		t.Fatalf("err %v (retry after %v, debug %v), want rate_limited", e, e.RetryAfter, e.Debug)
	}
	if d, _ := e.Debug["details"].(map[string]any); d["limit_name"] != "connect_per_ip_per_minute" {
		t.Fatalf("details %v", e.Debug["details"])
	}
}

// TestNoMediaNode: a server without a media node answers 503, reported as
// service_unavailable.
func TestNoMediaNode(t *testing.T) {
	t.Parallel()
	srv := startServer(t, serverOpts{noMedia: true})
	room := srv.createRoom()
	_, tok := srv.createParticipant(room, nil)
	if e := connectErr(t, srv.Base, tok); e.Code != CodeServiceUnavailable || e.Debug["http_status"] != 503 {
		t.Fatalf("%s %v", e.Code, e.Debug)
	}
}

// TestServerEndsSession: removing the participant and deleting the room
// end connected sessions: disconnected with the reason, no reconnect.
func TestServerEndsSession(t *testing.T) {
	t.Parallel()
	srv := startServer(t, serverOpts{})
	room := srv.createRoom()
	_, aTok := srv.createParticipant(room, nil)
	bID, bTok := srv.createParticipant(room, nil)
	ra, rb := newRecorder(), newRecorder()
	a := connectOK(t, srv.Base, aTok, ra.options()...)
	b := connectOK(t, srv.Base, bTok, rb.options()...)

	srv.mustCall("DELETE", "/v1/rooms/"+room+"/participants/"+bID, nil, 200)
	d := rb.wait(t, "b disconnected", func(e Event) bool { return e.Name == EventDisconnected })
	if d.Reason != ReasonRemoved || d.Err == nil || d.Err.Code != CodePermissionDenied || d.Err.Debug["media_code"] != "removed" {
		t.Fatalf("b: %s", describe(rb.snapshot()))
	}
	awaitEnd(t, b, rb)
	if b.State() != StateDisconnected || slices.Contains(rb.states(), StateReconnecting) {
		t.Fatalf("b: %s %v", b.State(), rb.states())
	}
	ra.wait(t, "participant.left removed", func(e Event) bool {
		return e.Name == EventParticipantLeft && e.Participant.ID == bID && e.Reason == "removed"
	})

	srv.mustCall("DELETE", "/v1/rooms/"+room, nil, 200)
	d = ra.wait(t, "a disconnected", func(e Event) bool { return e.Name == EventDisconnected })
	if d.Reason != ReasonRoomEnded || d.Err.Code != CodeRoomEnded || d.Err.Debug["media_code"] != "room_closed" || d.Err.Debug["close_code"] != 4009 {
		t.Fatalf("a: %s", describe(ra.snapshot()))
	}
	var e *Error
	if !errors.As(a.Err(), &e) || e.Code != CodeRoomEnded {
		t.Fatalf("a.Err() %v", a.Err())
	}
	ra.waitStates(t, "[connecting connected disconnected]")
}

// TestReplaced: a second connect of the same participant replaces the
// first connection, which ends as disconnected (replaced), not reconnecting.
func TestReplaced(t *testing.T) {
	t.Parallel()
	srv := startServer(t, serverOpts{})
	room := srv.createRoom()
	_, tok := srv.createParticipant(room, nil)
	r1 := newRecorder()
	s1 := connectOK(t, srv.Base, tok, r1.options()...)
	s2 := connectOK(t, srv.Base, tok)
	d := r1.wait(t, "s1 disconnected", func(e Event) bool { return e.Name == EventDisconnected })
	if d.Reason != ReasonReplaced || d.Err.Debug["media_code"] != "replaced" {
		t.Fatalf("%s", describe(r1.snapshot()))
	}
	if s1.State() != StateDisconnected || s2.State() != StateConnected {
		t.Fatalf("s1 %s s2 %s", s1.State(), s2.State())
	}
}

// proxied starts a server whose connect sessions point at a TCP proxy in
// front of its media node.
func proxied(t *testing.T, serveFlags ...string) (*server, *proxy) {
	p := newProxy(t)
	srv := startServer(t, serverOpts{
		serveFlags: serveFlags,
		mediaURL: func(media string) string {
			p.setTarget(media)
			return "ws://" + p.Addr() + "/rtc"
		},
	})
	return srv, p
}

// TestReconnectAfterCut: the network drops (the proxy cuts every TCP
// connection); both sessions go reconnecting and connected again with new
// connect sessions, and the control plane sees them joined again.
func TestReconnectAfterCut(t *testing.T) {
	t.Parallel()
	srv, p := proxied(t)
	room := srv.createRoom()
	aID, aTok := srv.createParticipant(room, nil)
	bID, bTok := srv.createParticipant(room, nil)
	exchanges := &countingTransport{}
	ra, rb := newRecorder(), newRecorder()
	a := connectOK(t, srv.Base, aTok, append(ra.options(), WithHTTPClient(&http.Client{Transport: exchanges}))...)
	b := connectOK(t, srv.Base, bTok, rb.options()...)
	ra.wait(t, "b joined", func(e Event) bool { return e.Name == EventParticipantJoined && e.Participant.ID == bID })
	if err := a.UpdateState(context.Background(), map[string]any{"hand": "up"}); err != nil {
		t.Fatal(err)
	}
	rb.wait(t, "a's state", func(e Event) bool { return e.Name == EventParticipantUpdated && e.Participant.ID == aID })
	first := a.SessionID()
	eventually(t, "both joined", func() bool {
		return srv.participantStatus(room, aID) == "joined" && srv.participantStatus(room, bID) == "joined"
	})

	p.cut()
	r := ra.wait(t, "reconnecting", func(e Event) bool { return e.Name == EventReconnecting })
	if r.Attempt != 1 || r.Err == nil || r.Err.Code != CodeConnectionLost || r.Delay <= 0 {
		t.Fatalf("reconnecting %+v", r)
	}
	ra.wait(t, "quality lost", func(e Event) bool { return e.Name == EventQualityChanged && e.Quality == QualityLost })
	rc := ra.wait(t, "reconnected", func(e Event) bool { return e.Name == EventReconnected })
	if rc.Attempt != 1 {
		t.Fatalf("reconnected %+v", rc)
	}
	rb.wait(t, "b reconnected", func(e Event) bool { return e.Name == EventReconnected })
	ra.waitStates(t, "[connecting connected reconnecting connected]")
	if a.State() != StateConnected || a.SessionID() == first || !strings.HasPrefix(a.SessionID(), "cs_") {
		t.Fatalf("after the reconnect: %v (first session %s)", a, first)
	}
	if n := exchanges.n.Load(); n != 2 {
		t.Fatalf("%d token exchanges, want 2 (connect, then the reconnect after the drop)", n)
	}
	// The rejoin is a new media session the control plane meters.
	eventually(t, "both joined again", func() bool {
		return srv.participantStatus(room, aID) == "joined" && srv.participantStatus(room, bID) == "joined"
	})
	// Each sees the other again, with a's state sent again after its reconnect.
	eventually(t, "a and b see each other", func() bool {
		pa, pb := a.Participants(), b.Participants()
		return len(pa) == 1 && pa[0].ID == bID && len(pb) == 1 && pb[0].ID == aID && string(pb[0].State) == `{"hand":"up"}`
	})
	ra.wait(t, "quality back", func(e Event) bool {
		return e.Name == EventQualityChanged && e.PreviousQuality == QualityLost && e.Quality == QualityExcellent
	})

	leave(t, b)
	ra.wait(t, "b left", func(e Event) bool {
		return e.Name == EventParticipantLeft && e.Participant.ID == bID && e.Reason == "left"
	})
	leave(t, a)
	ra.waitStates(t, "[connecting connected reconnecting connected disconnecting disconnected]")
}

// reconnectThroughOutage cuts the proxy and keeps it refusing connections
// until the third reconnect attempt is announced, then lets it through. It
// returns the token exchanges made after the cut and the attempts.
func reconnectThroughOutage(t *testing.T, srv *server, p *proxy, policy ReconnectPolicy) (exchanges int32, s *Session) {
	room := srv.createRoom()
	pid, tok := srv.createParticipant(room, nil)
	counter := &countingTransport{}
	r := newRecorder()
	s = connectOK(t, srv.Base, tok, append(r.options(), WithHTTPClient(&http.Client{Transport: counter}), WithReconnectPolicy(policy))...)
	before := counter.n.Load()

	p.down.Store(true)
	p.cut()
	r.wait(t, "attempt 3", func(e Event) bool { return e.Name == EventReconnecting && e.Attempt == 3 })
	p.down.Store(false)
	r.wait(t, "reconnected", func(e Event) bool { return e.Name == EventReconnected })
	for _, e := range r.snapshot() {
		if e.Name == EventReconnecting && e.Attempt > 1 && (e.Err == nil || e.Err.Code != CodeConnectionFailed) {
			t.Fatalf("attempt %d after %v, want connection_failed", e.Attempt, e.Err)
		}
	}
	if r.count(EventReconnecting) != 3 {
		t.Fatalf("%s", describe(r.snapshot()))
	}
	eventually(t, "joined again", func() bool { return srv.participantStatus(room, pid) == "joined" })
	return counter.n.Load() - before, s
}

// TestReconnectReusesUnexpiredMediaToken: after the drop the first attempt
// exchanges the token (the dropped session is spent); its join never
// happened, so the following attempts reuse that media token while it is
// valid (60 s here).
func TestReconnectReusesUnexpiredMediaToken(t *testing.T) {
	t.Parallel()
	srv, p := proxied(t)
	n, s := reconnectThroughOutage(t, srv, p, ReconnectPolicy{InitialDelay: 200 * time.Millisecond, MaxDelay: 200 * time.Millisecond, Jitter: -1})
	if n != 1 {
		t.Fatalf("%d exchanges after the drop, want 1", n)
	}
	leave(t, s)
}

// TestReconnectExchangesExpiredMediaToken: with one-second media tokens
// and attempts 1.2 s apart, every attempt's media token has expired by the
// next one, so each attempt exchanges the participant token again, and the
// last one joins.
func TestReconnectExchangesExpiredMediaToken(t *testing.T) {
	t.Parallel()
	srv, p := proxied(t, "--media-token-ttl-seconds=1")
	n, s := reconnectThroughOutage(t, srv, p, ReconnectPolicy{InitialDelay: 1200 * time.Millisecond, MaxDelay: 1200 * time.Millisecond, Jitter: -1})
	if n != 3 {
		t.Fatalf("%d exchanges after the drop, want 3 (one per attempt)", n)
	}
	leave(t, s)
}

// TestReconnectGivesUp: with the network down for good the session fails
// after its attempts, with connection_lost.
func TestReconnectGivesUp(t *testing.T) {
	t.Parallel()
	srv, p := proxied(t)
	room := srv.createRoom()
	_, tok := srv.createParticipant(room, nil)
	r := newRecorder()
	s := connectOK(t, srv.Base, tok, append(r.options(), WithReconnectPolicy(ReconnectPolicy{MaxAttempts: 2, InitialDelay: 20 * time.Millisecond}))...)
	p.down.Store(true)
	p.cut()
	awaitEnd(t, s, r)
	if s.State() != StateFailed {
		t.Fatalf("state %s", s.State())
	}
	var e *Error
	if !errors.As(s.Err(), &e) || e.Code != CodeConnectionLost || e.Debug["attempts"] != 2 || e.Debug["last_code"] != CodeConnectionFailed {
		t.Fatalf("err %v %v", s.Err(), e.Debug)
	}
	r.waitStates(t, "[connecting connected reconnecting failed]")
	d := r.wait(t, "disconnected", func(e Event) bool { return e.Name == EventDisconnected })
	if d.Reason != ReasonFailed || d.Err.Code != CodeConnectionLost || r.count(EventError) != 1 || r.count(EventReconnecting) != 2 {
		t.Fatalf("%s", describe(r.snapshot()))
	}
	// Leave on a failed session is a no-op.
	leave(t, s)
}

// TestLeaveDuringReconnect: Leave stops a reconnect in progress.
func TestLeaveDuringReconnect(t *testing.T) {
	t.Parallel()
	srv, p := proxied(t)
	room := srv.createRoom()
	_, tok := srv.createParticipant(room, nil)
	r := newRecorder()
	s := connectOK(t, srv.Base, tok, append(r.options(), WithReconnectPolicy(ReconnectPolicy{InitialDelay: time.Hour, MaxElapsed: 2 * time.Hour}))...)
	p.cut()
	r.wait(t, "reconnecting", isState(StateReconnecting))
	leave(t, s)
	r.waitStates(t, "[connecting connected reconnecting disconnecting disconnected]")
	d := r.wait(t, "disconnected", func(e Event) bool { return e.Name == EventDisconnected })
	if d.Reason != ReasonLeft || d.Err != nil {
		t.Fatalf("%+v", d)
	}
}
