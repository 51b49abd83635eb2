package actors

import (
	"rtcd/actors/core"
	"rtcd/actors/room"
)

// SetMedia connects the media engine; nil means none (rooms then close
// without asking a media engine).
func (e *Engine) SetMedia(m core.MediaEngine) { e.env.Media.SetEngine(m) }

// MediaJoined routes a join report to its room.
func (e *Engine) MediaJoined(r room.MediaJoin) {
	if h, ok := e.room(r.RoomID); ok && h.projectID == r.ProjectID {
		e.system.Root.Send(h.pid, room.MediaJoined{Report: r})
	}
}

// MediaLeft routes a leave report to its room.
func (e *Engine) MediaLeft(r room.MediaLeave) {
	if h, ok := e.room(r.RoomID); ok && h.projectID == r.ProjectID {
		e.system.Root.Send(h.pid, room.MediaLeft{Report: r})
	}
}

// MediaPresence hands a node's snapshot to every live room (a room absent
// from it has nobody on the node). One reference node serves all rooms.
func (e *Engine) MediaPresence(p room.MediaPresence) {
	byRoom := make(map[string]map[string]room.MediaJoin)
	for _, s := range p.Sessions {
		if byRoom[s.RoomID] == nil {
			byRoom[s.RoomID] = make(map[string]room.MediaJoin)
		}
		byRoom[s.RoomID][s.ParticipantID] = s
	}
	e.env.Media.Presence(p.At, e.env.Clock.Monotonic())
	e.rooms.Range(func(id, v any) bool {
		e.system.Root.Send(v.(*roomHandle).pid, room.Presence{At: p.At, Sessions: byRoom[id.(string)]})
		return true
	})
}
