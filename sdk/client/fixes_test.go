package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestSessionNeverPrintsTokens: neither fmt (the pointer or the
// dereferenced Session, any verb) nor slog shows a token.
func TestSessionNeverPrintsTokens(t *testing.T) {
	f := newFakeNode(t, nil)
	s := connectOK(t, f.srv.URL, "rtc_pt_secret")
	// A Session value, as a careless %v of *s prints it: a session of the
	// same shape that no goroutine uses (reflect, so vet's copylocks stays
	// quiet about the copy).
	idle := &Session{cfg: defaultConfig(), participantToken: newSecret("rtc_pt_secret"), mediaToken: newSecret("mt_1"),
		participants: map[string]Participant{}, ctx: context.Background()}
	val := reflect.ValueOf(idle).Elem().Interface()
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		outs = append(outs, fmt.Sprintf(verb, s), fmt.Sprintf(verb, val))
	}
	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&buf, nil), slog.NewJSONHandler(&buf, nil)} {
		slog.New(h).Info("session", "s", s, "v", val)
	}
	outs = append(outs, buf.String())
	for _, out := range outs {
		if strings.Contains(out, "rtc_pt_secret") || strings.Contains(out, "mt_1") {
			t.Fatalf("a session prints a token: %s", out)
		}
	}
}

// TestParticipantStateIsCopied: a handler changing an event's participant
// state changes neither the session's copy nor what Participants returns.
func TestParticipantStateIsCopied(t *testing.T) {
	s := &Session{cfg: defaultConfig(), events: newDispatcher(), participants: map[string]Participant{}, sm: newStateMachine()}
	got := make(chan struct{}, 2)
	s.events.on(EventParticipantUpdated, func(e Event) {
		for i := range e.Participant.State {
			e.Participant.State[i] = 'X'
		}
		got <- struct{}{}
	})
	s.remoteUpdated("p1", json.RawMessage(`{"a":1}`), nil, false)
	await(t, "participant.updated delivered", got)
	ps := s.Participants()
	if string(ps[0].State) != `{"a":1}` {
		t.Fatalf("a handler changed the session's state: %s", ps[0].State)
	}
	ps[0].State[0] = 'Y'
	if string(s.Participants()[0].State) != `{"a":1}` {
		t.Fatal("a caller of Participants changed the session's state")
	}
	s.events.close()
}

// TestDispatcherBoundsItsQueue: behind a stuck handler, participant
// updates and quality changes coalesce to their latest values, the queue
// never passes its bound, dropped events are reported by one error event,
// and connection events are never dropped.
func TestDispatcherBoundsItsQueue(t *testing.T) {
	d := newDispatcher()
	stuck := make(chan struct{})
	release := make(chan struct{})
	var mu sync.Mutex
	var got []Event
	for _, name := range EventNames() {
		d.on(name, func(e Event) {
			if e.Name == EventStateChanged && e.State == StateConnecting {
				close(stuck)
				<-release
			}
			mu.Lock()
			got = append(got, e)
			mu.Unlock()
		})
	}
	d.emit(Event{Name: EventStateChanged, State: StateConnecting, PreviousState: StateIdle})
	await(t, "the handler to take the first event", stuck) // it is stuck on it now
	qs := []Quality{QualityExcellent, QualityGood, QualityPoor}
	prev := QualityUnknown
	for i := 0; i < 5000; i++ {
		id := fmt.Sprintf("p%d", i%3)
		d.emit(Event{Name: EventParticipantUpdated, Participant: &Participant{ID: id, State: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}})
		q := qs[i%3]
		d.emit(Event{Name: EventQualityChanged, Quality: q, PreviousQuality: prev})
		prev = q
		if i < 2000 {
			d.emit(Event{Name: EventParticipantJoined, Participant: &Participant{ID: fmt.Sprintf("j%d", i)}})
		}
		d.mu.Lock()
		n := len(d.queue)
		d.mu.Unlock()
		if n > maxQueuedEvents+1 {
			t.Fatalf("the queue holds %d events", n)
		}
	}
	d.emit(Event{Name: EventStateChanged, State: StateConnected, PreviousState: StateConnecting})
	d.emit(Event{Name: EventDisconnected, Reason: ReasonLeft})
	close(release)
	d.close()
	await(t, "the dispatcher's end", d.done)

	last := map[string]string{}
	var errs []*Error
	quality := QualityUnknown
	for _, e := range got {
		switch e.Name {
		case EventParticipantUpdated:
			last[e.Participant.ID] = string(e.Participant.State)
		case EventQualityChanged:
			if e.PreviousQuality != quality || e.Quality == quality {
				t.Fatalf("quality %s -> %s after %s: the chain is broken", e.PreviousQuality, e.Quality, quality)
			}
			quality = e.Quality
		case EventError:
			errs = append(errs, e.Err)
		}
	}
	for id, n := range map[string]int{"p0": 4998, "p1": 4999, "p2": 4997} {
		if want := fmt.Sprintf(`{"n":%d}`, n); last[id] != want {
			t.Errorf("%s: last update %s, want %s", id, last[id], want)
		}
	}
	if quality != qs[4999%3] {
		t.Errorf("last quality %s", quality)
	}
	if len(errs) != 1 || errs[0].Debug["dropped_events"].(int) == 0 || errs[0].Debug["dropped"].(map[string]int)[EventParticipantJoined] == 0 {
		t.Fatalf("drop reports %v", errs)
	}
	if n := len(got); n > maxQueuedEvents+3 {
		t.Fatalf("%d events delivered", n)
	}
	end := got[len(got)-2:]
	if end[0].Name != EventStateChanged || end[0].State != StateConnected || end[1].Name != EventDisconnected {
		t.Fatalf("the connection events were dropped: %v", describe(end))
	}
}

// checkStateSequence fails unless the state_changed events chain from idle
// by allowed moves, each starting where the previous ended, and end in
// disconnected, followed by connection.disconnected.
func checkStateSequence(t *testing.T, evs []Event) {
	t.Helper()
	prev := StateIdle
	for _, e := range evs {
		if e.Name != EventStateChanged {
			continue
		}
		if e.PreviousState != prev || !canTransition(prev, e.State) {
			t.Fatalf("state event %s -> %s after %s; events: %s", e.PreviousState, e.State, prev, describe(evs))
		}
		prev = e.State
	}
	if prev != StateDisconnected {
		t.Fatalf("ended in %s; events: %s", prev, describe(evs))
	}
	if evs[len(evs)-1].Name != EventDisconnected || evs[len(evs)-1].Reason != ReasonLeft {
		t.Fatalf("the last event is not disconnected (left); events: %s", describe(evs))
	}
}

// TestLeaveRacesReconnect: Leave at a random moment after a socket drop
// (during the backoff, the attempt, or just after it joined) ends the
// session through disconnecting, and every state event arrives in order.
func TestLeaveRacesReconnect(t *testing.T) {
	t.Parallel()
	srv, p := proxied(t)
	room := srv.createRoom()
	for i := 0; i < 12; i++ {
		_, tok := srv.createParticipant(room, nil)
		r := newRecorder()
		s := connectOK(t, srv.Base, tok, append(r.options(), WithReconnectPolicy(ReconnectPolicy{InitialDelay: time.Millisecond, Jitter: -1}))...)
		p.cut()
		if i%3 != 0 {
			r.wait(t, "reconnecting", isState(StateReconnecting))
		}
		// Leave at a random moment (the sleep picks it; it waits for
		// nothing), with a drop racing the Leave.
		time.Sleep(time.Duration(rand.IntN(4000)) * time.Microsecond)
		go p.cut()
		leave(t, s)
		awaitEnd(t, s, r)
		evs := r.snapshot()
		checkStateSequence(t, evs)
		if !strings.Contains(fmt.Sprint(r.states()), "disconnecting disconnected") {
			t.Fatalf("no disconnecting: %s", describe(evs))
		}
	}
}

// slowClock is the system clock whose Now takes a random while: the SDK
// reads the clock when it emits, so this widens any window between a state
// change and its event.
type slowClock struct{ systemClock }

func (slowClock) Now() time.Time {
	time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
	return time.Now()
}

// TestLeaveRacesReconnectFake is TestLeaveRacesReconnect against the fake
// node, many times, with a clock that widens the races.
func TestLeaveRacesReconnectFake(t *testing.T) {
	t.Parallel()
	f := newFakeNode(t, nil)
	for i := 0; i < 100; i++ {
		r := newRecorder()
		s := connectOK(t, f.srv.URL, "rtc_pt_x", append(r.options(), WithClock(slowClock{}),
			WithReconnectPolicy(ReconnectPolicy{InitialDelay: time.Millisecond, Jitter: -1}))...)
		f.drop()
		// Close at a random moment (the sleep picks it; it waits for
		// nothing), with a drop racing the Close.
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		go f.drop()
		closeOK(t, s)
		awaitEnd(t, s, r)
		checkStateSequence(t, r.snapshot())
	}
}

// TestQualityRecoversAfterReconnect: a ping unanswered when the socket
// dropped does not keep the quality lost after the reconnect: the first
// pong of the new connection grades it.
func TestQualityRecoversAfterReconnect(t *testing.T) {
	f := newFakeNode(t, nil)
	f.noPong.Store(true)
	clk := newFakeClock()
	r := newRecorder()
	s := connectOK(t, f.srv.URL, "rtc_pt_x", append(r.options(), WithClock(clk),
		WithReconnectPolicy(ReconnectPolicy{InitialDelay: time.Second, Jitter: -1}))...)
	eventually(t, "the first ping", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.pongPending })
	f.noPong.Store(false)
	f.drop()
	r.wait(t, "reconnecting", func(e Event) bool { return e.Name == EventReconnecting })
	clk.waitTimer(t, time.Second)
	clk.Advance(time.Second)
	r.wait(t, "reconnected", func(e Event) bool { return e.Name == EventReconnected })
	r.wait(t, "quality back", func(e Event) bool {
		return e.Name == EventQualityChanged && e.PreviousQuality == QualityLost && e.Quality == QualityExcellent
	})
}

// TestNoReconnectPolicyFailsAtOnce: with a negative MaxAttempts a drop goes
// straight to failed, with no reconnecting state.
func TestNoReconnectPolicyFailsAtOnce(t *testing.T) {
	f := newFakeNode(t, nil)
	r := newRecorder()
	s := connectOK(t, f.srv.URL, "rtc_pt_x", append(r.options(), WithReconnectPolicy(ReconnectPolicy{MaxAttempts: -1}))...)
	f.drop()
	awaitEnd(t, s, r)
	if got := fmt.Sprint(r.states()); got != "[connecting connected failed]" {
		t.Fatalf("states %s", got)
	}
	var e *Error
	if !errors.As(s.Err(), &e) || e.Code != CodeConnectionLost || r.count(EventReconnecting) != 0 || f.exchanges.Load() != 1 {
		t.Fatalf("err %v; events %s", s.Err(), describe(r.snapshot()))
	}
}

// TestWriteHonoursContext: a write to a node that reads nothing gives up
// when ctx is cancelled or its deadline passes, not after writeTimeout.
func TestWriteHonoursContext(t *testing.T) {
	hold := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		<-hold // never reads
	}))
	defer srv.Close()
	defer close(hold)
	big := strings.Repeat("a", 16<<20) // far more than the socket buffers take
	for _, mk := range []func() (context.Context, context.CancelFunc){
		func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(200*time.Millisecond, cancel)
			return ctx, cancel
		},
		func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		},
	} {
		ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
		if err != nil {
			t.Fatal(err)
		}
		mc := &mediaConn{ws: ws}
		ctx, cancel := mk()
		start := time.Now()
		err = mc.write(ctx, map[string]any{"type": "update", "state": map[string]string{"x": big}})
		cancel()
		_ = ws.Close()
		if err == nil || time.Since(start) > writeTimeout/2 {
			t.Fatalf("write: %v after %v, want an error at ctx's end", err, time.Since(start))
		}
	}
}

// TestSpentMediaTokenIsExchangedAgain: against the real node. After a
// drop, the first attempt joins once with the media token of the session
// that already joined and left; the node refuses it (token_expired, close
// 4002) and the SDK exchanges the participant token again and connects.
func TestSpentMediaTokenIsExchangedAgain(t *testing.T) {
	t.Parallel()
	srv, p := proxied(t)
	room := srv.createRoom()
	pid, tok := srv.createParticipant(room, nil)
	counter := &countingTransport{}
	logs := &syncBuffer{}
	r := newRecorder()
	s := connectOK(t, srv.Base, tok, append(r.options(), WithHTTPClient(&http.Client{Transport: counter}),
		WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		WithReconnectPolicy(ReconnectPolicy{InitialDelay: 300 * time.Millisecond, Jitter: -1}))...)
	eventually(t, "joined", func() bool { return srv.participantStatus(room, pid) == "joined" })
	s.mu.Lock()
	s.reuseSpentOnce = true
	s.mu.Unlock()
	before := counter.n.Load()
	p.cut()
	rc := r.wait(t, "reconnected", func(e Event) bool { return e.Name == EventReconnected })
	if rc.Attempt != 1 {
		t.Fatalf("reconnected at attempt %d; events %s", rc.Attempt, describe(r.snapshot()))
	}
	if n := counter.n.Load() - before; n != 1 {
		t.Fatalf("%d exchanges after the drop, want 1 (after the refusal)", n)
	}
	if out := logs.String(); !strings.Contains(out, "refused the media token") || !strings.Contains(out, "media_code=token_expired") {
		t.Fatalf("the node did not refuse the spent token as expired; log:\n%s", out)
	}
	r.waitStates(t, "[connecting connected reconnecting connected]")
	eventually(t, "joined again", func() bool { return srv.participantStatus(room, pid) == "joined" })
	leave(t, s)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
