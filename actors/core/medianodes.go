package core

import (
	"sync/atomic"
	"time"

	"rtcd/internal/rendezvous"
)

// Media nodes run on their own that registered with a cluster
// (docs/cluster.md): each room is served by one of them, the one that
// holds its call (learned from the nodes' reports), else its rendezvous
// choice among the nodes registered now, so that a call is never split
// between two nodes while it lasts and rooms spread over the nodes. With
// none registered, the one MediaEngine of the MediaLink serves every room,
// as on a single node.

// MediaNode is a registered media node.
type MediaNode struct {
	ID           string
	URL          string      // where clients reach it (the connect answer's endpoint)
	EndpointJSON []byte      // URL as the connect answer encodes it
	Engine       MediaEngine // its commands
	presenceAt   atomic.Int64
	presenceSeen atomic.Int64 // the engine clock's Monotonic reading (see MediaLink.lastPresenceSeen)
}

type mediaNodeSet struct {
	list []*MediaNode
	byID map[string]*MediaNode
}

// SetNodes replaces the registered media nodes. A node already known keeps
// its last presence; a new one counts its silence from seen (its presence
// At: at), as the engine's start does for the one node.
func (m *MediaLink) SetNodes(nodes []*MediaNode, at time.Time, seen time.Duration) {
	set := &mediaNodeSet{byID: make(map[string]*MediaNode, len(nodes))}
	old := m.nodes.Load()
	for _, n := range nodes {
		if old != nil {
			if was, ok := old.byID[n.ID]; ok {
				n.presenceAt.Store(was.presenceAt.Load())
				n.presenceSeen.Store(was.presenceSeen.Load())
			} else {
				n.presence(at, seen)
			}
		} else {
			n.presence(at, seen)
		}
		set.list = append(set.list, n)
		set.byID[n.ID] = n
	}
	m.nodes.Store(set)
	// A node that left holds no call any more (if it comes back, its
	// presence says again what it holds).
	m.roomNodes.Range(func(k, v any) bool {
		if _, ok := set.byID[v.(string)]; !ok {
			m.roomNodes.CompareAndDelete(k, v)
		}
		return true
	})
}

func (n *MediaNode) presence(at time.Time, seen time.Duration) {
	n.presenceAt.Store(at.UnixNano())
	n.presenceSeen.Store(int64(seen))
}

// Registered tells whether any media node is registered.
func (m *MediaLink) Registered() bool {
	set := m.nodes.Load()
	return set != nil && len(set.list) > 0
}

// Node is the registered node id, nil when there is none of that id.
func (m *MediaLink) Node(id string) *MediaNode {
	set := m.nodes.Load()
	if set == nil {
		return nil
	}
	return set.byID[id]
}

// NodeOf is the registered node serving roomID, nil when none is
// registered (the MediaLink's one engine serves it).
func (m *MediaLink) NodeOf(roomID string) *MediaNode {
	set := m.nodes.Load()
	if set == nil || len(set.list) == 0 {
		return nil
	}
	if id, ok := m.roomNodes.Load(roomID); ok {
		if n, ok := set.byID[id.(string)]; ok {
			return n
		}
	}
	var best *MediaNode
	var bestScore uint64
	for _, n := range set.list {
		if s := rendezvous.Score(roomID, n.ID); best == nil || s > bestScore {
			best, bestScore = n, s
		}
	}
	return best
}

// NoteRoom records that nodeID holds sessions of roomID: the room stays on
// it while it does.
func (m *MediaLink) NoteRoom(roomID, nodeID string) {
	if m.Node(nodeID) != nil {
		m.roomNodes.Store(roomID, nodeID)
		m.unheld.Delete(roomID)
	}
}

// NodeAlive notes that a registered node reported at at (seen: the
// Monotonic reading), without what it holds; false for a node that is not
// registered.
func (m *MediaLink) NodeAlive(nodeID string, at time.Time, seen time.Duration) bool {
	n := m.Node(nodeID)
	if n == nil {
		return false
	}
	n.presence(at, seen)
	return true
}

// PresenceOf notes a registered node's presence report and what it says
// of the rooms it holds (rooms: the ones with sessions on it), and returns
// the rooms it held before and holds no more; ok is false for a node that
// is not registered.
func (m *MediaLink) PresenceOf(nodeID string, at time.Time, seen time.Duration, rooms map[string]bool) (dropped []string, ok bool) {
	n := m.Node(nodeID)
	if n == nil {
		return nil, false
	}
	n.presence(at, seen)
	m.roomNodes.Range(func(k, v any) bool {
		if v.(string) == nodeID && !rooms[k.(string)] && m.roomNodes.CompareAndDelete(k, v) {
			dropped = append(dropped, k.(string))
		}
		return true
	})
	for id := range rooms {
		m.roomNodes.Store(id, nodeID)
		m.unheld.Delete(id)
	}
	return dropped, true
}

// HeldBy is the registered node known to hold roomID's call, nil when
// none is.
func (m *MediaLink) HeldBy(roomID string) *MediaNode {
	if id, ok := m.roomNodes.Load(roomID); ok {
		return m.Node(id.(string))
	}
	return nil
}

// ForgetRoom drops what the link knows of a room that stopped here.
func (m *MediaLink) ForgetRoom(roomID string) {
	m.roomNodes.Delete(roomID)
	m.unheld.Delete(roomID)
}

// unheldSince is when a room was first found held by no registered node.
type unheldSince struct {
	at   time.Time
	seen time.Duration
}

// LastPresenceOf is the last presence report that speaks for roomID: its
// time and the Monotonic reading when it arrived (now, mono: the engine's
// clock). registered is false when the link's one engine serves the room
// (LastPresenceAt). A room no registered node is known to hold counts its
// silence from when it was first found so: a node holding its call says
// so within its presence interval, so a room no node claims for
// MediaPresenceTimeout has nobody on any (a node that held it died while
// its workspace moved).
func (m *MediaLink) LastPresenceOf(roomID string, now time.Time, mono time.Duration) (at time.Time, seen time.Duration, registered bool) {
	if !m.Registered() {
		return m.LastPresenceAt(), m.LastPresenceSeen(), false
	}
	if n := m.HeldBy(roomID); n != nil {
		return time.Unix(0, n.presenceAt.Load()).UTC(), time.Duration(n.presenceSeen.Load()), true
	}
	v, _ := m.unheld.LoadOrStore(roomID, unheldSince{at: now, seen: mono})
	u := v.(unheldSince)
	return u.at, u.seen, true
}

// routedEngine is the MediaLink's engine while nodes are registered: each
// command goes to the node serving its room.
type routedEngine struct{ m *MediaLink }

func (r routedEngine) engineOf(roomID string) MediaEngine {
	if n := r.m.NodeOf(roomID); n != nil && n.Engine != nil {
		return n.Engine
	}
	if p := r.m.engine.Load(); p != nil && *p != nil {
		return *p
	}
	return noMedia{}
}

func (r routedEngine) CloseRoom(roomID, reason string) { r.engineOf(roomID).CloseRoom(roomID, reason) }
func (r routedEngine) RemoveParticipant(roomID, participantID string) {
	r.engineOf(roomID).RemoveParticipant(roomID, participantID)
}
func (r routedEngine) AdmitSession(roomID, participantID, sessionID string) {
	r.engineOf(roomID).AdmitSession(roomID, participantID, sessionID)
}
func (r routedEngine) CloseSession(roomID, participantID, sessionID, code string) {
	r.engineOf(roomID).CloseSession(roomID, participantID, sessionID, code)
}

// noMedia drops commands: no engine serves the room.
type noMedia struct{}

func (noMedia) CloseRoom(string, string)                    {}
func (noMedia) RemoveParticipant(string, string)            {}
func (noMedia) AdmitSession(string, string, string)         {}
func (noMedia) CloseSession(string, string, string, string) {}
