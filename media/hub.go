package media

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"rtcd/auth"
	"rtcd/metrics"
)

// maxTombstones bounds the closed rooms and removed participants a node
// remembers. When full, the oldest is forgotten first; at ~100 bytes each
// this is a few megabytes at most.
const maxTombstones = 65536

// hub owns all of a node's state and is only ever touched by its own
// goroutine (run). Every method below runs there, so none needs a lock, and
// none may block: sends to clients are non-blocking and Reporter calls are
// non-blocking by contract.
//
// Invariants:
//   - a conn is in pending, or waits for admission (in admitting, by its
//     session), or is the conn of exactly one member, or is ended; never
//     two of these.
//   - a room in rooms has at least one member.
//   - reports happen before the client messages about the same change are
//     queued, so whoever sees the message can rely on the report having
//     been made.
type hub struct {
	n     *Node
	cfg   NodeConfig
	rooms map[string]*room

	pending     map[*conn]struct{}      // registered, not joined yet
	admitting   map[string]*waitingJoin // joins reported, waiting for the control plane's answer, by session
	connections int                     // registered and not yet released
	members     int                     // joined sessions over every room (the metrics' sessions)
	closed      bool                    // shut down: registrations refused

	tombstones tombstones
	// endedSessions remembers the media sessions that joined and left, so
	// their token cannot join again: a session that left has had its usage
	// closed by the control plane, and a second join with its token would
	// be on the node unmetered. Kept apart from tombstones so a churn of
	// sessions never pushes out a removal.
	endedSessions tombstones
	doomed        []*conn // slow consumers found while sending; see settle
}

type room struct {
	id      string
	members map[string]*member // by participant ID
}

// waitingJoin is a join a node that awaits admission holds: its socket
// gets nothing until the control plane answers.
type waitingJoin struct {
	c       *conn
	claims  auth.MediaClaims
	askedAt time.Time // when the join was reported (the session's start if admitted)
}

type member struct {
	c          *conn
	claims     auth.MediaClaims
	joinedAt   time.Time
	lastSeenAt time.Time
	state      json.RawMessage
	tracks     []TrackInfo // what it publishes (protocol 2)
	speaking   bool        // the room's active speaker (protocol 2)
}

func newHub(n *Node) *hub {
	return &hub{
		n:             n,
		cfg:           n.cfg,
		rooms:         make(map[string]*room),
		pending:       make(map[*conn]struct{}),
		admitting:     make(map[string]*waitingJoin),
		tombstones:    tombstones{at: make(map[string]time.Time)},
		endedSessions: tombstones{at: make(map[string]time.Time)},
	}
}

func (h *hub) run() {
	defer close(h.n.hubDone)
	for {
		select {
		case op := <-h.n.inbox:
			op(h)
			h.settle()
			h.cfg.Metrics.Sessions(h.members)
			h.cfg.Metrics.Connections(h.connections)
		case <-h.n.quit:
			return
		}
	}
}

func (h *hub) clockNow() time.Time { return h.cfg.Clock.Now() }

// register admits a new socket as pending, unless the node is full or shut
// down. An admitted socket is counted in n.conns until release.
func (h *hub) register(c *conn) bool {
	if h.closed || h.connections >= h.cfg.MaxConnections {
		return false
	}
	h.connections++
	h.n.conns.Add(1)
	c.openedAt = h.clockNow()
	h.pending[c] = struct{}{}
	return true
}

// release forgets a socket whose goroutines have finished.
func (h *hub) release(c *conn) {
	h.connections--
}

// join admits a verified client, speaking protocol, to its room, or (a
// node that awaits admission) reports the join and holds it for the
// control plane's answer (the socket keeps its protocol meanwhile). A
// second socket of a session already joined here replaces the first at
// once: that session was admitted.
func (h *hub) join(c *conn, claims auth.MediaClaims, protocol int) {
	if c.ended {
		return // timed out (or the node shut down) while the token was checked
	}
	c.protocol = protocol
	delete(h.pending, c)
	now := h.clockNow()
	if !h.joinable(c, claims) {
		return
	}
	r := h.rooms[claims.RoomID]
	if h.cfg.AwaitAdmission && (r == nil || r.members[claims.ParticipantID] == nil ||
		r.members[claims.ParticipantID].claims.SessionID != claims.SessionID) {
		h.ask(c, claims, now)
		return
	}
	h.seat(c, claims, now, true)
}

// joinable refuses (and ends) a join of a closed room, a removed
// participant, an ended session, or one that would overfill its room on
// this node.
func (h *hub) joinable(c *conn, claims auth.MediaClaims) bool {
	switch {
	case h.tombstones.has(roomTombstone(claims.RoomID)):
		h.terminate(c, CodeRoomClosed, "the room is closed")
		return false
	case h.tombstones.has(participantTombstone(claims.RoomID, claims.ParticipantID)):
		h.terminate(c, CodeRemoved, "the participant was removed from the room")
		return false
	case h.endedSessions.has(claims.SessionID):
		h.terminate(c, CodeTokenExpired, "this media token's session has ended; connect again for a new one")
		return false
	}
	if r := h.rooms[claims.RoomID]; r != nil && r.members[claims.ParticipantID] == nil && len(r.members) >= h.cfg.MaxParticipantsPerRoom {
		h.terminate(c, CodeRoomFull, fmt.Sprintf("the room has %d participants on this node, its limit", h.cfg.MaxParticipantsPerRoom))
		return false
	}
	return true
}

// ask reports a join and holds its socket until the control plane answers
// (admit, closeSession) or AdmissionTimeoutSeconds pass. A second socket
// waiting with the same session replaces the first.
func (h *hub) ask(c *conn, claims auth.MediaClaims, now time.Time) {
	w := &waitingJoin{c: c, claims: claims, askedAt: now}
	if old := h.admitting[claims.SessionID]; old != nil {
		old.c.waiting = nil
		h.terminate(old.c, CodeReplaced, "a newer connection of this participant replaced this one")
		w.askedAt = old.askedAt // the same join, asked once
	}
	c.waiting = w
	h.admitting[claims.SessionID] = w
	h.cfg.Reporter.Joined(JoinReport{
		NodeID: h.cfg.NodeID, SessionID: claims.SessionID, ProjectID: claims.ProjectID,
		RoomID: claims.RoomID, ParticipantID: claims.ParticipantID, IssuedAt: claims.IssuedAt, At: w.askedAt,
	})
}

// admit serves a join the control plane recorded.
func (h *hub) admit(roomID, participantID, sessionID string) {
	w := h.admitting[sessionID]
	if w == nil || w.claims.RoomID != roomID || w.claims.ParticipantID != participantID {
		return // answered already, ended, or not this node's
	}
	delete(h.admitting, sessionID)
	w.c.waiting = nil
	if w.c.ended {
		return
	}
	if r := h.rooms[roomID]; r != nil && r.members[participantID] == nil && len(r.members) >= h.cfg.MaxParticipantsPerRoom {
		// The room filled up on this node meanwhile; the control plane
		// recorded the join, so the leave is reported.
		h.endedSessions.add(sessionID, h.clockNow())
		h.reportLeftSession(w.claims, ReasonRoomFull, h.clockNow())
		h.terminate(w.c, CodeRoomFull, fmt.Sprintf("the room has %d participants on this node, its limit", h.cfg.MaxParticipantsPerRoom))
		return
	}
	h.seat(w.c, w.claims, w.askedAt, false)
}

// closeSession ends a session the control plane refused or no longer
// admits, waiting or joined, with code; its later joins are refused.
func (h *hub) closeSession(roomID, participantID, sessionID, code string, now time.Time) {
	h.endedSessions.add(sessionID, now)
	text := closeSessionText(code)
	if w := h.admitting[sessionID]; w != nil && w.claims.RoomID == roomID && w.claims.ParticipantID == participantID {
		delete(h.admitting, sessionID)
		w.c.waiting = nil // refused: nothing was recorded, no leave to report
		h.terminate(w.c, code, text)
	}
	if r := h.rooms[roomID]; r != nil {
		if m := r.members[participantID]; m != nil && m.claims.SessionID == sessionID {
			h.drop(m, code, code, text)
		}
	}
}

// closeSessionText is what a client is told when the control plane closes
// its session with code.
func closeSessionText(code string) string {
	switch code {
	case CodeSessionSuperseded:
		return "a newer session of this participant exists; use the media token of its latest connect"
	case CodeParticipantLimitReached:
		return "the room or the project has no participant slot left"
	case CodeInsufficientCredit:
		return "the workspace's prepaid balance is too low to start a session"
	case CodeRemoved:
		return "the participant was removed from the room"
	case CodeRoomClosed:
		return "the room is closed"
	}
	return "this media token's session has ended; connect again for a new one"
}

// seat makes c the participant's connection in its room, at now: a new
// member, or the replacement of its older connection (the participant
// never left: nobody is told, and a new session is reported as a join
// only when report is set, the join not having been reported yet).
func (h *hub) seat(c *conn, claims auth.MediaClaims, now time.Time, report bool) {
	r := h.rooms[claims.RoomID]
	if r == nil {
		r = &room{id: claims.RoomID, members: make(map[string]*member)}
		h.rooms[r.id] = r
	}
	if m := r.members[claims.ParticipantID]; m != nil {
		old := m.c
		old.member = nil
		h.terminate(old, CodeReplaced, "a newer connection of this participant replaced this one")
		newSession := m.claims.SessionID != claims.SessionID
		m.c, m.claims, m.lastSeenAt = c, claims, h.clockNow()
		c.member = m
		if newSession {
			m.joinedAt = now
			h.cfg.Metrics.Joined()
			if report {
				h.reportJoined(m)
			}
		}
		// The old socket's tracks went with it (terminate closed its
		// peer); the new socket publishes afresh.
		hadMedia := m.tracks != nil || m.speaking
		m.tracks, m.speaking = nil, false
		h.enqueue(c, h.joinedMessage(r, m))
		if hadMedia {
			h.broadcastMedia(r, m)
		}
		h.startMedia(c, m)
		return
	}
	m := &member{c: c, claims: claims, joinedAt: now, lastSeenAt: h.clockNow(), state: emptyState}
	r.members[claims.ParticipantID] = m
	h.members++
	c.member = m
	h.cfg.Metrics.Joined() // a session joined this node, whether reported now or admitted after its report
	if report {
		h.reportJoined(m)
	}
	h.enqueue(c, h.joinedMessage(r, m))
	h.broadcast(r, m, encode(participantJoinedMessage{Type: typeParticipantJoined, Participant: m.view()}))
	h.startMedia(c, m)
}

// startMedia gives a protocol 2 member's socket its media. Only the joined
// socket of record of a member ever has a peer, so nothing is forwarded
// to or from a socket that has not joined or has ended.
func (h *hub) startMedia(c *conn, m *member) {
	if c.protocol < protocolMedia || h.n.rtc == nil {
		return
	}
	c.peer = h.n.rtc.addPeer(h.n, c, participantIdentity{RoomID: m.claims.RoomID, ParticipantID: m.claims.ParticipantID, SessionID: m.claims.SessionID}, m.claims.Role)
}

// tracksChanged records what c's member publishes and tells the room.
func (h *hub) tracksChanged(c *conn, tracks []TrackInfo) {
	m := c.member
	if c.ended || m == nil {
		return
	}
	m.tracks = tracks
	h.broadcastMedia(h.rooms[m.claims.RoomID], m)
}

// activeSpeaker marks participantID ("" for nobody) as the room's one
// speaking member and tells the room about each member whose flag changed.
func (h *hub) activeSpeaker(roomID, participantID string) {
	r := h.rooms[roomID]
	if r == nil {
		return
	}
	// The one who stopped speaking first, then the one who started, so a
	// client never sees two speakers at once.
	for _, turnOn := range []bool{false, true} {
		for _, m := range sortedMembers(r) {
			speaking := m.claims.ParticipantID == participantID
			if m.speaking != speaking && speaking == turnOn {
				m.speaking = speaking
				h.broadcastMedia(r, m)
			}
		}
	}
}

// broadcastMedia tells the protocol 2 members of r (m included: a client
// learns that the node accepted its tracks) about m's tracks and speaking.
// Protocol 1 members are not told: their protocol has no media.
func (h *hub) broadcastMedia(r *room, m *member) {
	if r == nil {
		return
	}
	msg := encode(participantUpdatedMessage{Type: typeParticipantUpdated, ParticipantID: m.claims.ParticipantID,
		State: m.state, Tracks: m.tracks, Speaking: m.speaking})
	for _, o := range r.members {
		if o.c.protocol >= protocolMedia {
			h.enqueue(o.c, msg)
		}
	}
}

// message handles a joined client's ping, update or leave.
func (h *hub) message(c *conn, msg clientMessage) {
	m := c.member
	if c.ended || m == nil {
		return
	}
	m.lastSeenAt = h.clockNow() // any valid message proves the client alive
	switch msg.Type {
	case typePing:
		h.enqueue(c, encode(pongMessage{Type: typePong, TS: msg.TS}))
	case typeUpdate:
		m.state = msg.State
		// Tracks and speaking ride along (absent for a member without
		// media), so a state update never reads as tracks gone.
		h.broadcast(h.rooms[m.claims.RoomID], m, encode(participantUpdatedMessage{
			Type: typeParticipantUpdated, ParticipantID: m.claims.ParticipantID, State: m.state, Tracks: m.tracks, Speaking: m.speaking}))
	case typeLeave:
		h.drop(m, ReasonLeft, "", "")
	case typePublishOffer, typeSubscribeAnswer, typeCandidate, typeTrackSubscribe, typeTrackUnsubscribe:
		p := c.peer
		if p == nil {
			return
		}
		if !p.do(func() { p.handle(msg) }) {
			h.drop(m, ReasonBadMessage, CodeBadMessage, "too many signalling messages waiting")
		}
	}
}

// refuse ends a socket whose client broke the protocol or sent a bad token.
func (h *hub) refuse(c *conn, code, text string) {
	if c.ended {
		return
	}
	if c.member != nil {
		h.drop(c.member, code, code, text) // only bad_message can happen after the join
		return
	}
	h.terminate(c, code, text)
}

// readEnd is why a socket's reader stopped.
type readEnd int

const (
	readClosed   readEnd = iota // the client closed the socket, or the network failed
	readTimedOut                // the socket read deadline passed (see readLoop)
	readTooBig                  // a frame exceeded maxFrameBytes; the WebSocket layer already sent close 1009
)

// gone handles a socket whose reader stopped.
func (h *hub) gone(c *conn, why readEnd) {
	if c.ended {
		return
	}
	m := c.member
	switch {
	case m != nil && why == readTimedOut:
		h.cfg.Metrics.TimedOut(metrics.MediaTimeoutHeartbeat)
		h.drop(m, ReasonHeartbeatTimeout, CodeHeartbeatTimeout, "no message within the heartbeat timeout")
	case m != nil && why == readTooBig:
		h.drop(m, ReasonBadMessage, "", "")
	case m != nil:
		h.drop(m, ReasonDisconnected, "", "")
	case why == readTimedOut && c.waiting == nil:
		h.cfg.Metrics.TimedOut(metrics.MediaTimeoutJoin)
		h.terminate(c, CodeJoinTimeout, "no join message within the join timeout")
	default:
		h.terminate(c, "", "") // a waiting join's leave is reported as disconnected
	}
}

// checkTimeouts drops silent members and pending sockets, and forgets old
// tombstones, as of now.
func (h *hub) checkTimeouts(now time.Time) {
	joinTimeout := time.Duration(h.cfg.JoinTimeoutSeconds) * time.Second
	heartbeatTimeout := time.Duration(h.cfg.HeartbeatTimeoutSeconds) * time.Second
	var late []*conn
	for c := range h.pending {
		if now.Sub(c.openedAt) >= joinTimeout {
			late = append(late, c)
		}
	}
	for _, c := range late {
		h.cfg.Metrics.TimedOut(metrics.MediaTimeoutJoin)
		h.terminate(c, CodeJoinTimeout, "no join message within the join timeout")
	}
	var silent []*member
	for _, r := range h.rooms {
		for _, m := range r.members {
			if now.Sub(m.lastSeenAt) >= heartbeatTimeout {
				silent = append(silent, m)
			}
		}
	}
	for _, m := range silent {
		h.cfg.Metrics.TimedOut(metrics.MediaTimeoutHeartbeat)
		h.drop(m, ReasonHeartbeatTimeout, CodeHeartbeatTimeout, "no message within the heartbeat timeout")
	}
	admissionTimeout := time.Duration(h.cfg.AdmissionTimeoutSeconds) * time.Second
	var unanswered []*waitingJoin
	for _, w := range h.admitting {
		if now.Sub(w.askedAt) >= admissionTimeout {
			unanswered = append(unanswered, w)
		}
	}
	for _, w := range unanswered {
		h.cfg.Metrics.TimedOut(metrics.MediaTimeoutJoin) // joined too late, as a socket that never asked
		h.terminate(w.c, CodeJoinTimeout, "the join was not admitted in time; connect again")
	}
	h.tombstones.prune(now, time.Duration(h.cfg.TombstoneSeconds)*time.Second)
	h.endedSessions.prune(now, time.Duration(h.cfg.TombstoneSeconds)*time.Second)
}

func (h *hub) closeRoom(roomID, reason string, now time.Time) {
	h.tombstones.add(roomTombstone(roomID), now)
	h.endWaiting(func(c auth.MediaClaims) bool { return c.RoomID == roomID }, CodeRoomClosed, "the room is closed")
	r := h.rooms[roomID]
	if r == nil {
		return
	}
	text := "the room was closed"
	if reason != "" {
		text += ": " + reason
	}
	h.endRoom(r, ReasonRoomClosed, CodeRoomClosed, text, now)
}

// endRoom removes a room and all its members at once: each member's
// leave is reported with reason and its socket ended with code. Everyone
// goes, so nobody is told about the others leaving.
func (h *hub) endRoom(r *room, reason, code, text string, now time.Time) {
	delete(h.rooms, r.id)
	h.members -= len(r.members)
	for _, m := range sortedMembers(r) {
		h.reportLeft(m, reason, now)
		h.terminate(m.c, code, text)
	}
}

// releaseRoom ends every socket of a room this node no longer serves for
// the control plane (its workspace moved to another rtcd node of a
// cluster): each joined member's leave is reported and its socket ended
// with node_shutdown, which tells a client to connect again (it reaches
// the room's new node); a join waiting for admission ends the same way.
// Unlike closeRoom it leaves no tombstone: the room lives on, and may come
// back to this node.
func (h *hub) releaseRoom(roomID string, now time.Time) {
	const text = "this media node no longer serves the room; connect again"
	h.endWaiting(func(c auth.MediaClaims) bool { return c.RoomID == roomID }, CodeNodeShutdown, text)
	if r := h.rooms[roomID]; r != nil {
		h.endRoom(r, ReasonNodeShutdown, CodeNodeShutdown, text, now)
	}
}

// endWaiting ends the joins waiting for admission that match, with code.
func (h *hub) endWaiting(match func(auth.MediaClaims) bool, code, text string) {
	var ending []*waitingJoin
	for _, w := range h.admitting {
		if match(w.claims) {
			ending = append(ending, w)
		}
	}
	for _, w := range ending {
		h.terminate(w.c, code, text)
	}
}

func (h *hub) removeParticipant(roomID, participantID string, now time.Time) {
	h.tombstones.add(participantTombstone(roomID, participantID), now)
	h.endWaiting(func(c auth.MediaClaims) bool { return c.RoomID == roomID && c.ParticipantID == participantID },
		CodeRemoved, "the participant was removed from the room")
	if r := h.rooms[roomID]; r != nil {
		if m := r.members[participantID]; m != nil {
			h.drop(m, ReasonRemoved, CodeRemoved, "the participant was removed from the room")
		}
	}
}

func (h *hub) presence(now time.Time) PresenceReport {
	p := PresenceReport{NodeID: h.cfg.NodeID, At: now, Sessions: []SessionInfo{}}
	for _, r := range h.rooms {
		for _, m := range r.members {
			p.Sessions = append(p.Sessions, SessionInfo{
				SessionID: m.claims.SessionID, ProjectID: m.claims.ProjectID, RoomID: m.claims.RoomID,
				ParticipantID: m.claims.ParticipantID, IssuedAt: m.claims.IssuedAt, JoinedAt: m.joinedAt,
			})
		}
	}
	slices.SortFunc(p.Sessions, func(a, b SessionInfo) int {
		if c := strings.Compare(a.RoomID, b.RoomID); c != 0 {
			return c
		}
		return strings.Compare(a.ParticipantID, b.ParticipantID)
	})
	for _, w := range h.admitting {
		p.Pending = append(p.Pending, SessionInfo{
			SessionID: w.claims.SessionID, ProjectID: w.claims.ProjectID, RoomID: w.claims.RoomID,
			ParticipantID: w.claims.ParticipantID, IssuedAt: w.claims.IssuedAt, JoinedAt: w.askedAt,
		})
	}
	slices.SortFunc(p.Pending, func(a, b SessionInfo) int { return strings.Compare(a.SessionID, b.SessionID) })
	return p
}

// shutdown refuses new sockets and ends every existing one.
func (h *hub) shutdown(now time.Time) {
	h.closed = true
	for c := range h.pending {
		h.terminate(c, CodeNodeShutdown, "the media node is shutting down")
	}
	h.endWaiting(func(auth.MediaClaims) bool { return true }, CodeNodeShutdown, "the media node is shutting down")
	for _, r := range h.rooms {
		h.endRoom(r, ReasonNodeShutdown, CodeNodeShutdown, "the media node is shutting down", now)
	}
}

// drop removes a member from its room: its leave is reported, the others
// are told, and its socket is ended with code (or a normal close when code
// is empty).
func (h *hub) drop(m *member, reason, code, text string) {
	r := h.rooms[m.claims.RoomID]
	if r == nil || r.members[m.claims.ParticipantID] != m {
		panic("media: dropping a member that is not in its room") // a bug: callers pass current members only
	}
	delete(r.members, m.claims.ParticipantID)
	h.members--
	if len(r.members) == 0 {
		delete(h.rooms, r.id)
	}
	h.reportLeft(m, reason, h.clockNow())
	h.broadcast(r, m, encode(participantLeftMessage{Type: typeParticipantLeft, ParticipantID: m.claims.ParticipantID, Reason: reason}))
	h.terminate(m.c, code, text)
}

// terminate ends a socket: the writer sends the error message for code and
// the matching close frame (only a normal close frame when code is empty),
// then closes it. It changes no room: callers handle membership.
func (h *hub) terminate(c *conn, code, text string) {
	if c.ended {
		return
	}
	c.ended = true
	c.member = nil
	if c.peer != nil {
		// Media stops with the socket, whatever ended it.
		c.peer.close()
		c.peer = nil
	}
	delete(h.pending, c)
	if w := c.waiting; w != nil {
		// A join still waiting for its answer: the control plane may have
		// recorded it already, so its leave is reported (ignored if not).
		c.waiting = nil
		delete(h.admitting, w.claims.SessionID)
		reason := code
		if reason == "" {
			reason = ReasonDisconnected
		}
		h.reportLeftSession(w.claims, reason, h.clockNow())
	}
	if code == "" {
		c.end(nil, CloseNormal, "")
	} else {
		c.end(encodeError(c.protocol, code, text), closeCodeOf(code), code)
	}
}

// enqueue queues msg for c without blocking. A full queue marks c as a slow
// consumer, disconnected by settle once the current operation is done
// (doing it here could change a room while a caller ranges over it).
func (h *hub) enqueue(c *conn, msg []byte) {
	if c.ended || c.doomed {
		return
	}
	if !c.queueMessage(msg) {
		c.doomed = true
		h.doomed = append(h.doomed, c)
	}
}

// broadcast queues msg for every member of r except from.
func (h *hub) broadcast(r *room, from *member, msg []byte) {
	if r == nil {
		return
	}
	for _, m := range r.members {
		if m != from {
			h.enqueue(m.c, msg)
		}
	}
}

// settle disconnects the slow consumers found by the last operation. Each
// drop tells the rest of the room, which can find more; the loop ends
// because every round removes a member.
func (h *hub) settle() {
	for len(h.doomed) > 0 {
		c := h.doomed[0]
		h.doomed = h.doomed[1:]
		switch {
		case c.ended:
		case c.member != nil:
			h.drop(c.member, ReasonSlowConsumer, CodeSlowConsumer, "too slow reading messages")
		default:
			h.terminate(c, CodeSlowConsumer, "too slow reading messages")
		}
	}
	h.doomed = nil
}

func (h *hub) reportJoined(m *member) {
	h.cfg.Reporter.Joined(JoinReport{
		NodeID: h.cfg.NodeID, SessionID: m.claims.SessionID, ProjectID: m.claims.ProjectID,
		RoomID: m.claims.RoomID, ParticipantID: m.claims.ParticipantID, IssuedAt: m.claims.IssuedAt, At: m.joinedAt,
	})
}

func (h *hub) reportLeft(m *member, reason string, now time.Time) {
	h.cfg.Metrics.Left(reason) // a session that joined this node (a waiting join never did)
	h.reportLeftSession(m.claims, reason, now)
}

// reportLeftSession reports that session claims ended at now; it never
// joins again.
func (h *hub) reportLeftSession(claims auth.MediaClaims, reason string, now time.Time) {
	h.endedSessions.add(claims.SessionID, now)
	h.cfg.Reporter.Left(LeaveReport{
		NodeID: h.cfg.NodeID, SessionID: claims.SessionID, ProjectID: claims.ProjectID,
		RoomID: claims.RoomID, ParticipantID: claims.ParticipantID, At: now, Reason: reason,
	})
}

// joinedMessage is m's welcome: who it is and who else is in r, sorted by
// participant ID.
func (h *hub) joinedMessage(r *room, m *member) []byte {
	others := make([]participantView, 0, len(r.members))
	for _, o := range sortedMembers(r) {
		if o != m {
			others = append(others, o.view())
		}
	}
	var iceServers []ICEServer
	if m.c.protocol >= protocolMedia && h.n.rtc != nil {
		iceServers = h.n.rtc.iceServers(participantIdentity{RoomID: m.claims.RoomID, ParticipantID: m.claims.ParticipantID, SessionID: m.claims.SessionID})
	}
	return encode(joinedMessage{
		Type: typeJoined, Protocol: m.c.protocol, ICEServers: iceServers,
		SessionID: m.claims.SessionID, RoomID: m.claims.RoomID, ParticipantID: m.claims.ParticipantID, Role: m.claims.Role,
		HeartbeatIntervalMS: int64(h.cfg.HeartbeatIntervalSeconds) * 1000,
		HeartbeatTimeoutMS:  int64(h.cfg.HeartbeatTimeoutSeconds) * 1000,
		Participants:        others,
	})
}

func (m *member) view() participantView {
	return participantView{ParticipantID: m.claims.ParticipantID, Role: m.claims.Role, State: m.state, Tracks: m.tracks, Speaking: m.speaking}
}

// sortedMembers returns r's members by participant ID, so messages and
// reports come out in a deterministic order.
func sortedMembers(r *room) []*member {
	ms := make([]*member, 0, len(r.members))
	for _, m := range r.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int { return strings.Compare(a.claims.ParticipantID, b.claims.ParticipantID) })
	return ms
}

// tombstones remembers closed rooms and removed participants for a while,
// so that a media token issued before the command cannot rejoin. order is
// oldest first and holds exactly the keys of at.
type tombstones struct {
	at    map[string]time.Time
	order []tombstone
}

type tombstone struct {
	key string
	at  time.Time
}

func roomTombstone(roomID string) string { return "room\x00" + roomID }

func participantTombstone(roomID, participantID string) string {
	return "participant\x00" + roomID + "\x00" + participantID
}

func (t *tombstones) has(key string) bool {
	_, ok := t.at[key]
	return ok
}

// add remembers key from now on. A key already remembered keeps its first
// time: a command is final, and the first time is the one that matters.
func (t *tombstones) add(key string, now time.Time) {
	if t.has(key) {
		return
	}
	if len(t.order) >= maxTombstones {
		delete(t.at, t.order[0].key)
		t.order = t.order[1:]
	}
	t.at[key] = now
	t.order = append(t.order, tombstone{key: key, at: now})
}

// prune forgets tombstones at least ttl old.
func (t *tombstones) prune(now time.Time, ttl time.Duration) {
	for len(t.order) > 0 && now.Sub(t.order[0].at) >= ttl {
		delete(t.at, t.order[0].key)
		t.order = t.order[1:]
	}
}
