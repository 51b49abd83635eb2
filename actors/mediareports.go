package actors

import (
	"encoding/json"
	"log/slog"

	"rtcd/actors/room"
)

// A media node run on its own reports to one control-plane node (its
// --control-url); on a cluster, that node passes each report on to where
// it applies (docs/cluster.md): a join or a leave to its room's
// workspace's node, a presence snapshot to every node, each with the
// sessions of the workspaces it owns (the server splits it, SendTo).

// Engine calls of media reports.
const (
	callMediaJoined = "media-joined"
	callMediaLeft   = "media-left"
	// MediaPresenceCall is the call of a presence part (PresencePart),
	// which the server sends to each member itself.
	MediaPresenceCall = "media-presence"
)

// forwardMediaReport sends a join or leave report of a room that does
// not run here to its workspace's node, and reports whether it did (or
// dropped it: false means apply it here: a single node, a room that runs
// here, or a project no workspace names).
func (e *Engine) forwardMediaReport(projectID, roomID, name string, report any) bool {
	if e.peers == nil {
		return false
	}
	if h, ok := e.room(roomID); ok && h.projectID == projectID {
		return false
	}
	accountID, ok, err := e.WorkspaceOfProject(projectID)
	if err != nil {
		// Not applied here, where its room is not: a join would be
		// refused. The node's presence recovers it.
		slog.Warn("cluster: a media report's workspace could not be read; the report is dropped", "call", name, "room_id", roomID, "error", err)
		return true
	}
	if !ok {
		return false
	}
	var answer struct{}
	if aerr := e.call(accountID, name, report, &answer); aerr != nil {
		// Joins are asked again by the node's presence (pending), leaves
		// found by it (reconciled): a lost report is recovered.
		slog.Warn("cluster: a media report could not reach its workspace's node", "call", name, "room_id", roomID, "error", aerr.Message)
	}
	return true
}

// PresencePart is a media node's presence snapshot as one cluster node
// takes it: the sessions of the workspaces it owns in the view whose
// fingerprint the sender had, or, Partial, only that the node is alive
// (the part did not fit one call).
type PresencePart struct {
	Presence    room.MediaPresence `json:"presence"`
	Fingerprint uint64             `json:"fingerprint"`
	Partial     bool               `json:"partial"`
}

// MediaPresencePart applies a part of a presence snapshot: in full when
// the sender saw the members this node sees (the part then holds every
// session of the rooms here), else only as the node being alive: with
// another view, the part may lack a room's sessions, and the rooms would
// take them as gone.
func (e *Engine) MediaPresencePart(p PresencePart) {
	if !p.Partial && e.peers != nil && e.peers.Fingerprint() == p.Fingerprint {
		e.MediaPresence(p.Presence)
		return
	}
	if !e.env.Media.NodeAlive(p.Presence.NodeID, p.Presence.At, e.env.Clock.Monotonic()) {
		e.env.Media.Presence(p.Presence.At, e.env.Clock.Monotonic())
	}
}

// serveMediaCall applies a media report another node passed on; handled
// is false for a call that is not a media report's.
func (e *Engine) serveMediaCall(name string, body []byte) (handled bool, err error) {
	switch name {
	case callMediaJoined:
		var r room.MediaJoin
		if err = json.Unmarshal(body, &r); err == nil {
			e.mediaJoinedHere(r)
		}
	case callMediaLeft:
		var r room.MediaLeave
		if err = json.Unmarshal(body, &r); err == nil {
			e.mediaLeftHere(r)
		}
	case MediaPresenceCall:
		var p PresencePart
		if err = json.Unmarshal(body, &p); err == nil {
			e.MediaPresencePart(p)
		}
	default:
		return false, nil
	}
	return true, err
}
