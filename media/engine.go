package media

// Engine is what the control plane asks of a media engine. It is the whole
// seam: the control plane depends on this interface (and on Reporter
// reports flowing back), never on the reference node, so an external SFU can
// replace the node behind an adapter.
//
// *Node implements it in process; HTTPEngine implements it against a node
// running on its own. Implementations must not block the caller on network
// I/O (the caller is a room actor): they act at once or queue the command.
// Both commands are idempotent and final, and their effect is observed
// through LeaveReports, not return values:
//
//   - CloseRoom disconnects everyone in the room (each gets error
//     room_closed; each leave is reported with reason "room_closed") and
//     refuses later joins to it, even with a still-valid media token.
//   - RemoveParticipant disconnects that participant (error removed, leave
//     reason "removed") and refuses its later joins to the room.
//   - AdmitSession answers a join report: the control plane recorded the
//     join, and the session may be served (a node that awaits admission
//     holds it until then).
//   - CloseSession answers a join report with a refusal, or ends a session
//     the control plane no longer admits (superseded, left): the session
//     is ended with the error code, waiting or joined, and its later joins
//     are refused.
//
// A command for a room, participant or session the engine does not hold is
// not an error; a close still takes effect for later joins.
type Engine interface {
	CloseRoom(roomID, reason string)
	RemoveParticipant(roomID, participantID string)
	AdmitSession(roomID, participantID, sessionID string)
	CloseSession(roomID, participantID, sessionID, code string)
}

// Compile-time checks that both implementations satisfy Engine.
var (
	_ Engine = (*Node)(nil)
	_ Engine = (*HTTPEngine)(nil)
)
