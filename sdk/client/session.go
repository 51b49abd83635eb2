package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// tokenReuseMargin: a media token expiring sooner than this is not reused
// for a retry; the SDK exchanges the participant token again instead.
const tokenReuseMargin = time.Second

// maxStateBytes bounds UpdateState's object (the media node's bound).
const maxStateBytes = 4096

// Session is one participant's connection to a room: the connect session
// obtained at POST /v1/connect and the media node's WebSocket. It is safe
// for concurrent use. The media token it holds is never exposed.
type Session struct {
	cfg              config
	connectURL       string
	participantToken *secret
	events           *dispatcher

	// ctx lives as long as the session; Leave, Close and the terminal
	// states cancel it, which stops reconnects and in-flight attempts.
	ctx    context.Context
	cancel context.CancelFunc

	terminated chan struct{} // closed on reaching disconnected or failed

	// stateMu makes "set localState and write it" (UpdateState) and the
	// resend of a reconnect (adopt) mutually exclusive, so the node always
	// ends with the latest state. Lock order: stateMu, mu, events.mu.
	stateMu sync.Mutex

	// mu guards what follows. Events are queued while it is held, so they
	// are delivered in the order the state changed and none is queued
	// after the terminal events close the queue.
	mu           sync.Mutex
	sm           stateMachine
	closing      bool
	conn         *mediaConn
	sessionID    string
	roomID       string
	participant  string
	role         string
	features     Features
	endpoint     string
	mediaToken   *secret
	mediaExpires time.Time
	tokenUsed    bool // a join succeeded with mediaToken: its session is spent once the socket drops
	participants map[string]Participant
	localState   json.RawMessage
	quality      Quality
	lastPingAt   time.Time
	lastPongAt   time.Time
	pongPending  bool
	termErr      *Error

	// reuseSpentOnce (tests only) makes the next attempt join once with
	// the media token of a session that already joined, as a client that
	// missed the drop would.
	reuseSpentOnce bool
}

// Connect exchanges participantToken for a media session at
// POST <apiOrigin>/v1/connect, opens the media node's WebSocket with the
// media token, joins, and returns the connected session.
//
// apiOrigin is the API's origin; trailing slashes and a trailing /v1 are
// stripped (spec 9.5). The whole connect has a deadline of ConnectTimeout
// (15 s, on the session's Clock) and stops early when ctx is done: the
// error is then an *Error with code timeout (deadline) or unknown wrapping
// context.Canceled. ctx bounds only the connect; the session lives until
// Leave, Close, or the server or the network ends it.
//
// Every error is an *Error (use errors.As).
func Connect(ctx context.Context, apiOrigin, participantToken string, opts ...Option) (*Session, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	cfg.reconnect = cfg.reconnect.withDefaults()
	s := &Session{
		cfg:              cfg,
		participantToken: newSecret(participantToken),
		events:           newDispatcher(),
		terminated:       make(chan struct{}),
		sm:               newStateMachine(),
		participants:     map[string]Participant{},
		quality:          QualityUnknown,
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	for _, h := range cfg.handlers {
		s.events.on(h.name, h.fn)
	}

	s.setState(StateConnecting, nil)
	u, err := connectURL(apiOrigin)
	if err != nil {
		return nil, s.failConnect(err.(*Error))
	}
	s.connectURL = u

	actx, done := s.deadline(ctx)
	mc, e := s.establish(actx)
	done()
	if e != nil {
		return nil, s.failConnect(e)
	}
	if !s.adopt(mc, false, 0) {
		// Only Leave can interrupt, and Leave needs the session: not here.
		return nil, s.failConnect(newError(CodeUnknown, "connect was interrupted", nil, nil))
	}
	go s.supervise(mc)
	return s, nil
}

// deadline derives the context of one connect attempt: done when parent is,
// or after ConnectTimeout on the session's clock (cause errTimeout).
func (s *Session) deadline(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	t := s.cfg.clock.NewTimer(ConnectTimeout)
	go func() {
		select {
		case <-t.C():
			cancel(errTimeout)
		case <-ctx.Done():
			t.Stop()
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

func (s *Session) failConnect(e *Error) error {
	s.terminate(StateFailed, "", e, false)
	return e
}

// establish gets a joined media connection: it exchanges the participant
// token when there is no reusable media token, dials and joins, and when
// the media node refuses the media token exchanges again (up to twice).
func (s *Session) establish(ctx context.Context) (*mediaConn, *Error) {
	var last *Error
	for try := 0; try < 3; try++ {
		if ctx.Err() != nil {
			return nil, errorFromTransport(ctx, ctx.Err(), false)
		}
		s.mu.Lock()
		need := s.mediaToken == nil || s.tokenUsed || !s.cfg.clock.Now().Before(s.mediaExpires.Add(-tokenReuseMargin))
		if need && s.reuseSpentOnce && s.mediaToken != nil {
			need, s.reuseSpentOnce = false, false
		}
		s.mu.Unlock()
		if need {
			cs, e := s.exchange(ctx)
			if e != nil {
				return nil, e
			}
			s.mu.Lock()
			s.sessionID, s.roomID, s.participant = cs.SessionID, cs.Room.ID, cs.Participant.ID
			s.features, s.endpoint = cs.Features, cs.Endpoint
			s.mediaToken, s.mediaExpires, s.tokenUsed = newSecret(cs.MediaToken), cs.ExpiresAt, false
			s.mu.Unlock()
		}
		s.mu.Lock()
		endpoint, token := s.endpoint, s.mediaToken.reveal()
		s.mu.Unlock()

		mc, err := s.dialJoin(ctx, endpoint, token)
		if err == nil {
			s.mu.Lock()
			s.tokenUsed = true
			s.mu.Unlock()
			return mc, nil
		}
		if ctx.Err() != nil {
			return nil, errorFromTransport(ctx, err, true)
		}
		var me *mediaError
		if errors.As(err, &me) {
			action, e := classifyMedia(me)
			if action == actionReExchange {
				s.cfg.logger.Debug("rtcd client: the media node refused the media token; exchanging again", "media_code", me.code)
				s.mu.Lock()
				s.mediaToken = nil
				s.mu.Unlock()
				last = e
				continue
			}
			return nil, e
		}
		return nil, errorFromTransport(ctx, err, true)
	}
	return nil, last
}

// adopt makes mc the session's connection and moves to connected. It
// reconciles the participant list with the joined message (emitting
// participant events) and sends the application state again after a
// reconnect, before the connection is published, so an UpdateState racing
// it writes after it (stateMu). It reports false (and leaves and closes mc)
// when the session is closing.
func (s *Session) adopt(mc *mediaConn, reconnected bool, attempt int) bool {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	s.mu.Lock()
	closing, state := s.closing, s.localState
	s.mu.Unlock()
	if !closing && state != nil {
		_ = mc.write(context.Background(), map[string]any{"type": "update", "state": state})
	}

	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		abandon(mc)
		return false
	}
	s.conn = mc
	s.sessionID, s.roomID, s.participant, s.role = mc.joined.SessionID, mc.joined.RoomID, mc.joined.ParticipantID, mc.joined.Role
	// The heartbeat bookkeeping belongs to the previous connection.
	s.pongPending, s.lastPingAt = false, time.Time{}
	from, err := s.sm.move(StateConnected)
	if err != nil {
		s.mu.Unlock()
		panic(err) // connecting and reconnecting both lead here: a bug
	}
	s.emitLocked(Event{Name: EventStateChanged, State: StateConnected, PreviousState: from})
	if reconnected {
		s.emitLocked(Event{Name: EventReconnected, Attempt: attempt})
	}
	seen := map[string]bool{}
	for _, p := range mc.joined.Participants {
		p := normalize(p)
		seen[p.ID] = true
		old, ok := s.participants[p.ID]
		s.participants[p.ID] = p
		switch {
		case !ok:
			s.emitLocked(Event{Name: EventParticipantJoined, Participant: p.clone()})
		case !bytes.Equal(old.State, p.State) || old.Role != p.Role:
			s.emitLocked(Event{Name: EventParticipantUpdated, Participant: p.clone()})
		}
	}
	for id := range s.participants {
		if !seen[id] {
			delete(s.participants, id)
			s.emitLocked(Event{Name: EventParticipantLeft, Participant: &Participant{ID: id}, Reason: "unknown"})
		}
	}
	s.mu.Unlock()

	s.cfg.logger.Info("rtcd client: connected", "room_id", mc.joined.RoomID, "participant_id", mc.joined.ParticipantID, "session_id", mc.joined.SessionID)
	go s.read(mc)
	go s.heartbeat(mc)
	return true
}

// abandon tells the node a joined connection the session will not use is
// leaving, then closes it.
func abandon(mc *mediaConn) {
	_ = mc.write(context.Background(), map[string]any{"type": "leave"})
	_ = mc.ws.Close()
}

func normalize(p Participant) Participant {
	if len(p.State) == 0 || string(p.State) == "null" {
		p.State = json.RawMessage(`{}`)
	}
	return p
}

// supervise watches the current connection and decides, when it ends,
// between reconnecting, disconnected and failed.
func (s *Session) supervise(mc *mediaConn) {
	for {
		<-mc.readerDone
		mc.stopHeartbeat()
		_ = mc.ws.Close()
		s.mu.Lock()
		closing := s.closing
		s.conn = nil
		s.mu.Unlock()
		if closing {
			s.terminate(StateDisconnected, ReasonLeft, nil, true)
			return
		}
		action, cause := actionReconnect, (*Error)(nil)
		if mc.mediaErr != nil {
			action, cause = classifyMedia(mc.mediaErr)
			if action == actionReExchange { // a refusal after the join cannot happen in protocol 1; be safe
				action = actionReconnect
			}
		} else {
			cause = newError(CodeConnectionLost, "the media connection was lost", mc.readErr, nil)
		}
		s.cfg.logger.Info("rtcd client: media connection ended", "code", cause.Code, "debug", cause.Debug)
		switch action {
		case actionEnd:
			s.terminate(StateDisconnected, endReason(cause), cause, true)
			return
		case actionFail:
			s.terminate(StateFailed, ReasonFailed, cause, true)
			return
		}
		if s.cfg.reconnect.MaxAttempts < 0 { // no reconnect: straight to failed
			s.terminate(StateFailed, ReasonFailed, cause, true)
			return
		}
		next, e := s.reconnect(cause)
		if next == nil {
			if e == nil { // Leave or Close during the reconnect
				s.terminate(StateDisconnected, ReasonLeft, nil, true)
			} else if r := endReason(e); r != "" {
				s.terminate(StateDisconnected, r, e, true)
			} else {
				s.terminate(StateFailed, ReasonFailed, e, true)
			}
			return
		}
		mc = next
	}
}

// endReason says whether an error means the server ended the session
// (disconnected, with this reason) rather than a failure ("").
func endReason(e *Error) string {
	switch {
	case e.Code == CodeRoomEnded:
		return ReasonRoomEnded
	case e.Debug["media_code"] == mediaRemoved || e.Debug["api_code"] == "participant_not_found":
		return ReasonRemoved
	case e.Debug["media_code"] == mediaReplaced || e.Debug["media_code"] == mediaSessionSuperseded:
		// A newer connect session of the participant took over before or
		// after this one joined: for the app it is the same as a newer
		// connection replacing this one.
		return ReasonReplaced
	}
	return ""
}

// retryable reports whether another reconnect attempt may succeed.
func retryable(e *Error) bool {
	switch e.Code {
	case CodeConnectionFailed, CodeConnectionLost, CodeNetworkUnavailable, CodeServiceUnavailable,
		CodeRateLimited, CodeTimeout:
		return true
	}
	return false
}

// reconnect moves to reconnecting and tries to get a connection back within
// the policy. It returns the adopted connection, or nil and the error that
// ended the attempts (nil error: the session is closing).
func (s *Session) reconnect(cause *Error) (*mediaConn, *Error) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, nil
	}
	from, err := s.sm.move(StateReconnecting)
	if err != nil {
		s.mu.Unlock()
		panic(err)
	}
	s.emitLocked(Event{Name: EventStateChanged, State: StateReconnecting, PreviousState: from})
	s.setQualityLocked(QualityLost, 0)
	s.mu.Unlock()

	p := s.cfg.reconnect
	start := s.cfg.clock.Now()
	last := cause
	for attempt := 1; ; attempt++ {
		if attempt > p.MaxAttempts {
			return nil, gaveUp(attempt-1, last)
		}
		d := p.delay(attempt, rand.Float64())
		if last.RetryAfter > d {
			d = last.RetryAfter
		}
		if s.cfg.clock.Now().Add(d).Sub(start) > p.MaxElapsed {
			return nil, gaveUp(attempt-1, last)
		}
		s.cfg.logger.Info("rtcd client: reconnecting", "attempt", attempt, "delay", d, "after", last.Code)
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			return nil, nil
		}
		s.emitLocked(Event{Name: EventReconnecting, Attempt: attempt, Delay: d, Err: last})
		s.mu.Unlock()
		t := s.cfg.clock.NewTimer(d)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return nil, nil
		case <-t.C():
		}
		actx, done := s.deadline(s.ctx)
		mc, e := s.establish(actx)
		done()
		if s.ctx.Err() != nil {
			if mc != nil {
				// Leave won the race with a successful attempt: the node
				// has joined this connection, so say leave (as adopt does).
				abandon(mc)
			}
			return nil, nil
		}
		if e == nil {
			if !s.adopt(mc, true, attempt) {
				return nil, nil
			}
			return mc, nil
		}
		if !retryable(e) {
			return nil, e
		}
		last = e
	}
}

func gaveUp(attempts int, last *Error) *Error {
	e := newError(CodeConnectionLost, fmt.Sprintf("the media connection was lost and %d reconnect attempts failed", attempts), last,
		map[string]any{"attempts": attempts, "last_code": last.Code})
	if last.Debug != nil {
		e.Debug["last_debug"] = last.Debug
	}
	return e
}

// terminate moves to a final state (from disconnecting, failed becomes
// disconnected), emits the last events and stops the session.
func (s *Session) terminate(to State, reason string, e *Error, wasStarted bool) {
	s.mu.Lock()
	if s.sm.state.Terminal() {
		s.mu.Unlock()
		return
	}
	if s.sm.state == StateDisconnecting {
		to = StateDisconnected
	}
	from, err := s.sm.move(to)
	if err != nil {
		s.mu.Unlock()
		panic(err)
	}
	s.termErr = e
	s.conn = nil
	ev := Event{Name: EventStateChanged, State: to, PreviousState: from}
	if to == StateFailed {
		ev.Err = e
	}
	s.emitLocked(ev)
	s.setQualityLocked(QualityLost, 0)
	if e != nil {
		s.emitLocked(Event{Name: EventError, Err: e})
	}
	if wasStarted {
		r := reason
		if to == StateFailed {
			r = ReasonFailed
		}
		s.emitLocked(Event{Name: EventDisconnected, Reason: r, Err: e})
	}
	close(s.terminated)
	s.events.close()
	s.mu.Unlock()
	s.cancel()
	s.cfg.logger.Info("rtcd client: session ended", "state", to, "reason", reason)
}

// setState is for the first move (idle → connecting).
func (s *Session) setState(to State, e *Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	from, err := s.sm.move(to)
	if err != nil {
		panic(err)
	}
	s.emitLocked(Event{Name: EventStateChanged, State: to, PreviousState: from, Err: e})
}

// emitLocked queues ev; s.mu is held, so events are queued in the order of
// the changes they report (dispatcher.emit never blocks).
func (s *Session) emitLocked(ev Event) {
	ev.Time = s.cfg.clock.Now()
	s.events.emit(ev)
}

// Participant bookkeeping, called by the reader.

func (s *Session) remoteJoined(p Participant) {
	p = normalize(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.participants[p.ID] = p
	s.emitLocked(Event{Name: EventParticipantJoined, Participant: p.clone()})
}

func (s *Session) remoteUpdated(id string, state json.RawMessage, tracks []TrackInfo, speaking bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == s.participant {
		return // the node confirming this participant's own tracks
	}
	p, ok := s.participants[id]
	if !ok {
		p = Participant{ID: id}
	}
	p.State, p.Tracks, p.Speaking = state, tracks, speaking
	p = normalize(p)
	s.participants[id] = p
	s.emitLocked(Event{Name: EventParticipantUpdated, Participant: p.clone()})
}

func (s *Session) remoteLeft(id, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.participants[id]
	if !ok {
		p = Participant{ID: id}
	}
	delete(s.participants, id)
	s.emitLocked(Event{Name: EventParticipantLeft, Participant: p.clone(), Reason: reason})
}

// Quality, from the heartbeat.

func (s *Session) notePing(now time.Time) {
	s.mu.Lock()
	if !s.pongPending {
		s.lastPingAt = now
	}
	s.pongPending = true
	s.mu.Unlock()
}

func (s *Session) pong(ts *int64) {
	now := s.cfg.clock.Now()
	s.mu.Lock()
	pending, sent := s.pongPending, s.lastPingAt
	s.pongPending = false
	s.lastPongAt = now
	s.mu.Unlock()
	if !pending || ts == nil || *ts != sent.UnixMilli() {
		return // not the answer to the outstanding ping
	}
	if s.cfg.media != nil {
		return // with media, quality is the node's measure of the media path
	}
	rtt := now.Sub(sent)
	if rtt < 0 {
		rtt = 0
	}
	q := QualityPoor
	switch {
	case rtt < 150*time.Millisecond:
		q = QualityExcellent
	case rtt < 400*time.Millisecond:
		q = QualityGood
	}
	s.setQuality(q, rtt)
}

// checkLatePong grades a ping still unanswered at the next tick as poor,
// and as lost once lostAfter has passed since it was sent.
func (s *Session) checkLatePong(now time.Time, interval, lostAfter time.Duration) {
	s.mu.Lock()
	pending, since := s.pongPending, now.Sub(s.lastPingAt)
	s.mu.Unlock()
	if s.cfg.media != nil && since < lostAfter {
		return // with media, the node grades quality; a silent node is still lost
	}
	switch {
	case !pending:
	case since >= lostAfter:
		s.setQuality(QualityLost, 0)
	case since >= interval:
		s.setQuality(QualityPoor, 0)
	}
}

func (s *Session) setQuality(q Quality, rtt time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setQualityLocked(q, rtt)
}

func (s *Session) setQualityLocked(q Quality, rtt time.Duration) {
	prev := s.quality
	if prev == q || s.sm.state.Terminal() && q != QualityLost {
		return
	}
	s.quality = q
	s.emitLocked(Event{Name: EventQualityChanged, Quality: q, PreviousQuality: prev, RTT: rtt})
}

// The public methods.

// On registers handler for the event name (one of EventNames; On panics on
// any other name, which is a typo) and returns a function that removes it.
// Handlers run on the session's own event goroutine, one at a time in the
// order the events happened, never on the connection's reader, so a slow
// handler delays later events but never the connection. A handler may call
// any Session method; it should not wait on Done, which closes only after
// the last handler has returned. Events emitted before On are not replayed:
// use WithHandler to see them all.
func (s *Session) On(event string, handler func(Event)) (unsubscribe func()) {
	mustKnowEvent(event)
	return s.events.on(event, handler)
}

// State returns the current connection state.
func (s *Session) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sm.state
}

// Quality returns the current connection quality.
func (s *Session) Quality() Quality {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.quality
}

// SessionID returns the current connect session's id (cs_…); a reconnect
// that exchanged the token again changes it.
func (s *Session) SessionID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessionID
}

// RoomID returns the room's id.
func (s *Session) RoomID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.roomID
}

// ParticipantID returns this participant's id.
func (s *Session) ParticipantID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.participant
}

// Role returns this participant's role (publisher or subscriber).
func (s *Session) Role() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.role
}

// Features returns what this participant may publish.
func (s *Session) Features() Features {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.features
}

// Participants returns the other participants in the room, sorted by id.
func (s *Session) Participants() []Participant {
	s.mu.Lock()
	out := make([]Participant, 0, len(s.participants))
	for _, p := range s.participants {
		out = append(out, *p.clone())
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Participant) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// UpdateState replaces this participant's application state, which the
// others get as participant.updated. state must marshal to a JSON object of
// at most 4096 bytes. It is kept and sent again after every reconnect.
func (s *Session) UpdateState(ctx context.Context, state any) error {
	raw, err := json.Marshal(state)
	if err != nil {
		return newError(CodeInvalidRequest, "the state does not marshal to JSON", err, nil)
	}
	var compact bytes.Buffer
	if json.Compact(&compact, raw) != nil || compact.Len() == 0 || compact.Bytes()[0] != '{' {
		return newError(CodeInvalidRequest, "the state must be a JSON object", nil, nil)
	}
	if compact.Len() > maxStateBytes {
		return newError(CodeInvalidRequest, fmt.Sprintf("the state is larger than %d bytes", maxStateBytes), nil, nil)
	}
	if err := ctx.Err(); err != nil {
		return errorFromTransport(ctx, err, true)
	}
	// Setting the state and writing it is one step against a reconnect's
	// resend (adopt), so the node cannot end with an older state.
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	s.mu.Lock()
	if s.sm.state.Terminal() || s.closing {
		st := s.sm.state
		s.mu.Unlock()
		return newError(CodeInvalidRequest, "the session is ending or has ended", nil, map[string]any{"state": string(st)})
	}
	s.localState = compact.Bytes()
	mc := s.conn
	s.mu.Unlock()
	if mc == nil {
		return nil // reconnecting: sent once connected again
	}
	if err := mc.write(ctx, map[string]any{"type": "update", "state": json.RawMessage(compact.Bytes())}); err != nil {
		if ctx.Err() != nil {
			// The write was cut short, perhaps mid-frame: the connection
			// cannot be used any more. The session reconnects and sends
			// the state (kept) again.
			_ = mc.ws.Close()
			return errorFromTransport(ctx, ctx.Err(), true)
		}
		return nil // the connection is dropping: sent again after the reconnect
	}
	return nil
}

// Leave leaves the room: the state moves to disconnecting, the media node
// is told (so the others see participant.left with reason "left" at once),
// and once the socket is closed the state is disconnected. It stops a
// reconnect in progress. It returns when the session is disconnected, or
// when ctx is done (the socket is then closed at once, and the session
// still ends). Calling it again, or on an ended session, returns nil.
func (s *Session) Leave(ctx context.Context) error {
	s.mu.Lock()
	switch {
	case s.sm.state.Terminal():
		s.mu.Unlock()
		return nil
	case s.closing:
		s.mu.Unlock()
	default:
		s.closing = true
		from, err := s.sm.move(StateDisconnecting)
		if err != nil {
			s.mu.Unlock()
			panic(err)
		}
		mc := s.conn
		s.emitLocked(Event{Name: EventStateChanged, State: StateDisconnecting, PreviousState: from})
		s.mu.Unlock()
		s.cancel() // stops a reconnect wait or attempt
		if mc != nil {
			if err := mc.write(ctx, map[string]any{"type": "leave"}); err != nil {
				_ = mc.ws.Close()
			} else {
				// The node answers leave with a close frame; the reader
				// ends then. Do not wait for a silent node for long.
				t := time.AfterFunc(closeHandshakeTimeout, func() { _ = mc.ws.Close() })
				defer t.Stop()
			}
		}
	}
	select {
	case <-s.terminated:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	mc := s.conn
	s.mu.Unlock()
	if mc != nil {
		_ = mc.ws.Close()
	}
	<-s.terminated
	return errorFromTransport(ctx, ctx.Err(), true)
}

// Close is Leave without a caller's deadline: it leaves the room and waits
// (briefly: the node has a second to close the socket) for disconnected.
func (s *Session) Close() error {
	return s.Leave(context.Background())
}

// Done is closed once the session has ended (disconnected or failed) and
// every handler has run for its last event.
func (s *Session) Done() <-chan struct{} { return s.events.done }

// Err returns why the session ended: nil while it runs and after Leave or
// Close, else the *Error of the failure or of the server's ending.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.termErr == nil {
		return nil
	}
	return s.termErr
}

// String describes the session without its tokens.
func (s *Session) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("client.Session{room=%s participant=%s session=%s state=%s}", s.roomID, s.participant, s.sessionID, s.sm.state)
}

// GoString keeps %#v from printing the tokens.
func (s *Session) GoString() string { return s.String() }

// LogValue keeps slog from printing the tokens.
func (s *Session) LogValue() slog.Value { return slog.StringValue(s.String()) }
