package sim

import (
	"sync"
)

// mediaNode is the embedded media node as the rooms see it (the
// core.MediaEngine of one generation: it dies with the process). Like a
// node that awaits admission, it holds each join it reported until the
// room answers: AdmitSession serves the session (the participant's one
// session on the node), CloseSession refuses it or ends it. Removals and
// room ends end what they name. Every answer is kept, in order, for the
// world to take (takeMediaAnswers) and check.
//
// AdmitSession comes from the store's syncer (a join is admitted once its
// record is durable), while the simulation waits for a durable point; the
// rest from the rooms, on the simulation's goroutine. mu orders the two.
type mediaNode struct {
	mu sync.Mutex
	// dead: the process crashed; the old generation's late answers (its
	// syncer runs the callbacks of batches the crash clone does not hold)
	// reach nobody.
	dead bool
	// waiting are the joins reported and not answered, by session.
	waiting map[string]nodeSession
	// serving is the session served for each participant (room/participant).
	serving map[string]string
	answers []nodeAnswer
	// durableWait is set while the simulation waits for a durable point:
	// only then do batches become durable, so an admission at any other
	// time is of a join recorded before (or of one not durable: a bug).
	durableWait bool
	// context reads, when a room refuses a join, what the refusal must
	// rest on (the caps and the credit gate, as published then).
	context func(roomID string) refusalContext
}

// nodeSession is a join the node reported.
type nodeSession struct{ room, participant string }

// nodeAnswer is one answer of a room to a join: admitted (code ""), or
// closed with code and what the gates published then.
type nodeAnswer struct {
	room, participant, session string
	code                       string
	at                         refusalContext
	outsideDurableWait         bool // an admission while no batch became durable
}

// refusalContext is what the gates published when a room refused a join.
type refusalContext struct {
	roomSlots, projectSlots, projectLimit int64
	creditClosed                          bool
}

func newMediaNode() *mediaNode {
	return &mediaNode{waiting: map[string]nodeSession{}, serving: map[string]string{}}
}

func servingKey(roomID, participantID string) string { return roomID + "/" + participantID }

// ask holds a join the node reports to the room.
func (m *mediaNode) ask(roomID, participantID, sessionID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.waiting[sessionID] = nodeSession{room: roomID, participant: participantID}
}

// served is the session the node serves for a participant ("" for none).
func (m *mediaNode) served(roomID, participantID string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.serving[servingKey(roomID, participantID)]
}

// left ends the session the node serves for a participant (the client
// left); it reports the leave.
func (m *mediaNode) left(roomID, participantID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.serving, servingKey(roomID, participantID))
}

// servingNow is every session served, by room/participant.
func (m *mediaNode) servingNow() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]string, len(m.serving))
	for k, v := range m.serving {
		out[k] = v
	}
	return out
}

// takeAnswers returns the answers since the last take, in order.
func (m *mediaNode) takeAnswers() []nodeAnswer {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.answers
	m.answers = nil
	return out
}

// waitingForDurable marks the simulation's waits for a durable point.
func (m *mediaNode) waitingForDurable(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.durableWait = on
}

func (m *mediaNode) kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dead = true
}

// --- core.MediaEngine ------------------------------------------------------

func (m *mediaNode) CloseRoom(roomID, _ string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for s, w := range m.waiting {
		if w.room == roomID {
			delete(m.waiting, s)
		}
	}
	for k := range m.serving {
		if len(k) > len(roomID) && k[:len(roomID)] == roomID && k[len(roomID)] == '/' {
			delete(m.serving, k)
		}
	}
}

func (m *mediaNode) RemoveParticipant(roomID, participantID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for s, w := range m.waiting {
		if w.room == roomID && w.participant == participantID {
			delete(m.waiting, s)
		}
	}
	delete(m.serving, servingKey(roomID, participantID))
}

// AdmitSession serves a join the node holds (a join it no longer holds,
// answered already or ended since, is ignored, as by media.Node).
func (m *mediaNode) AdmitSession(roomID, participantID, sessionID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead {
		return
	}
	if w, ok := m.waiting[sessionID]; !ok || w.room != roomID || w.participant != participantID {
		return
	}
	delete(m.waiting, sessionID)
	m.serving[servingKey(roomID, participantID)] = sessionID // a newer session replaces the older socket
	m.answers = append(m.answers, nodeAnswer{room: roomID, participant: participantID, session: sessionID, outsideDurableWait: !m.durableWait})
}

// CloseSession refuses a join the node holds, or ends the session it
// serves.
func (m *mediaNode) CloseSession(roomID, participantID, sessionID, code string) {
	var at refusalContext
	if m.context != nil {
		at = m.context(roomID) // the rooms' goroutine, the simulation's: the gates hold still
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead {
		return
	}
	delete(m.waiting, sessionID)
	if k := servingKey(roomID, participantID); m.serving[k] == sessionID {
		delete(m.serving, k)
	}
	m.answers = append(m.answers, nodeAnswer{room: roomID, participant: participantID, session: sessionID, code: code, at: at})
}
