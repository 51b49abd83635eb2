package media

import "encoding/json"

// ProtocolVersion is the highest version of the client protocol this node
// speaks. It travels in the "protocol" field of the first message the
// server sends (joined or error), never in the URL, so the media engine's
// version is not part of any public address (spec 9.2).
//
// Version 1 is presence only (join, heartbeats, state updates). Version 2
// adds WebRTC signalling: publish, subscribe and trickle ICE. A client gets
// version 2 only when its join asks for it and the node has WebRTC on
// (NodeConfig.WebRTC); everyone else is answered in version 1, exactly as
// before.
const ProtocolVersion = 2

// Protocol versions a socket can speak.
const (
	protocolPresence = 1
	protocolMedia    = 2
)

// RTCPath is the one path the node serves WebSocket connections on.
const RTCPath = "/rtc"

// Bounds of the client protocol. Each is part of the documented protocol
// (docs/media-protocol.md).
const (
	// maxFrameBytes bounds one client frame. The largest legitimate frame is
	// an update carrying maxStateBytes of state plus its envelope; anything
	// bigger is refused by the WebSocket reader before it is buffered.
	maxFrameBytes = 8 * 1024
	// maxStateBytes bounds a participant's state object (compacted JSON).
	// Every member's state is repeated in each newcomer's joined message, so
	// this times the participants per room bounds that message.
	maxStateBytes = 4 * 1024
	// maxReasonBytes bounds the free-text reason the control plane passes to
	// CloseRoom before it is shown to clients.
	maxReasonBytes = 128
)

// Client → server message types.
const (
	typeJoin   = "join"
	typePing   = "ping"
	typeUpdate = "update"
	typeLeave  = "leave"

	// Version 2 only.
	typePublishOffer     = "publish.offer"
	typeSubscribeAnswer  = "subscribe.answer"
	typeCandidate        = "candidate" // both directions
	typeTrackSubscribe   = "track.subscribe"
	typeTrackUnsubscribe = "track.unsubscribe"
)

// Server → client message types.
const (
	typeJoined             = "joined"
	typeError              = "error"
	typePong               = "pong"
	typeParticipantJoined  = "participant.joined"
	typeParticipantUpdated = "participant.updated"
	typeParticipantLeft    = "participant.left"

	// Version 2 only.
	typePublishAnswer     = "publish.answer"
	typeSubscribeOffer    = "subscribe.offer"
	typeTrackRefused      = "track.refused"
	typeTrackUnsubscribed = "track.unsubscribed"
	typeQualityChanged    = "connection.quality"
)

// Codes of track.refused, which refuses one track and ends nothing else.
const (
	CodePublishNotAllowed = "publish_not_allowed"
)

// Reasons of track.unsubscribed.
const (
	UnsubscribedUnpublished = "unpublished"  // the publisher stopped the track or left
	UnsubscribedByClient    = "unsubscribed" // the client sent track.unsubscribe
)

// Targets of candidate: which of the socket's two peer connections.
const (
	targetPublish   = "publish"
	targetSubscribe = "subscribe"
)

// Error codes of the "error" message. Every error is final: the server
// sends one error message, then a close frame with the matching close code
// (closeCodeOf), then closes the socket.
const (
	CodeBadMessage       = "bad_message"
	CodeTokenInvalid     = "token_invalid"
	CodeTokenExpired     = "token_expired"
	CodeJoinTimeout      = "join_timeout"
	CodeRoomFull         = "room_full"
	CodeHeartbeatTimeout = "heartbeat_timeout"
	CodeSlowConsumer     = "slow_consumer"
	CodeReplaced         = "replaced"
	CodeRemoved          = "removed"
	CodeRoomClosed       = "room_closed"
	CodeNodeShutdown     = "node_shutdown"
	// The control plane's refusals of a join (CloseSession): the join is
	// its point of record, and it admits only the participant's latest
	// session, within the caps and the credit gate.
	CodeSessionSuperseded       = "session_superseded"
	CodeParticipantLimitReached = "participant_limit_reached"
	CodeInsufficientCredit      = "insufficient_credit"
)

// WebSocket close codes, one per error code. 4000-4999 is the range RFC
// 6455 leaves to applications. A client that sees the close frame but
// missed the error message (it can race a socket teardown) still knows why.
const (
	CloseNormal           = 1000 // the client said leave
	CloseBadMessage       = 4000
	CloseTokenInvalid     = 4001
	CloseTokenExpired     = 4002
	CloseJoinTimeout      = 4003
	CloseRoomFull         = 4004
	CloseHeartbeatTimeout = 4005
	CloseSlowConsumer     = 4006
	CloseReplaced         = 4007
	CloseRemoved          = 4008
	CloseRoomClosed       = 4009
	CloseNodeShutdown     = 4010
	// The control plane's refusals.
	CloseSessionSuperseded       = 4011
	CloseParticipantLimitReached = 4012
	CloseInsufficientCredit      = 4013
)

// closeCodeOf maps an error code to its close code: the one table of them.
func closeCodeOf(code string) int {
	switch code {
	case CodeBadMessage:
		return CloseBadMessage
	case CodeTokenInvalid:
		return CloseTokenInvalid
	case CodeTokenExpired:
		return CloseTokenExpired
	case CodeJoinTimeout:
		return CloseJoinTimeout
	case CodeRoomFull:
		return CloseRoomFull
	case CodeHeartbeatTimeout:
		return CloseHeartbeatTimeout
	case CodeSlowConsumer:
		return CloseSlowConsumer
	case CodeReplaced:
		return CloseReplaced
	case CodeRemoved:
		return CloseRemoved
	case CodeRoomClosed:
		return CloseRoomClosed
	case CodeNodeShutdown:
		return CloseNodeShutdown
	case CodeSessionSuperseded:
		return CloseSessionSuperseded
	case CodeParticipantLimitReached:
		return CloseParticipantLimitReached
	case CodeInsufficientCredit:
		return CloseInsufficientCredit
	}
	panic("media: no close code for error code " + code) // a bug: every code is in the table
}

// sessionCloseCodes are the codes the control plane may close a session
// with (CloseSession): its refusals, and the endings it already had.
var sessionCloseCodes = map[string]bool{
	CodeSessionSuperseded: true, CodeParticipantLimitReached: true, CodeInsufficientCredit: true,
	CodeTokenExpired: true, CodeRemoved: true, CodeRoomClosed: true,
}

// ValidSessionCloseCode reports whether code may close a session
// (CloseSession).
func ValidSessionCloseCode(code string) bool { return sessionCloseCodes[code] }

// Leave reasons, in LeaveReport.Reason and in participant.left. A leave the
// server forces carries the error code it sent the client; the two reasons
// of a client's own doing are "left" and "disconnected".
const (
	ReasonLeft             = "left"         // the client sent leave
	ReasonDisconnected     = "disconnected" // the socket closed or failed
	ReasonHeartbeatTimeout = CodeHeartbeatTimeout
	ReasonSlowConsumer     = CodeSlowConsumer
	ReasonBadMessage       = CodeBadMessage
	ReasonRemoved          = CodeRemoved
	ReasonRoomClosed       = CodeRoomClosed
	ReasonNodeShutdown     = CodeNodeShutdown
	// A join the node held for the control plane's answer, which did not
	// come within AdmissionTimeoutSeconds (reported in case it was
	// recorded after all).
	ReasonJoinTimeout = CodeJoinTimeout
	// A join admitted into a room that filled up on this node while it
	// waited.
	ReasonRoomFull = CodeRoomFull
)

// clientMessage is any client → server message. Unknown fields are ignored
// so a newer client can add optional fields; unknown types are refused.
type clientMessage struct {
	Type       string          `json:"type"`
	MediaToken string          `json:"media_token,omitempty"` // join
	TS         *int64          `json:"ts,omitempty"`          // ping
	State      json.RawMessage `json:"state,omitempty"`       // update
	Protocol   int             `json:"protocol,omitempty"`    // join

	// Version 2.
	SDP       string          `json:"sdp,omitempty"`       // publish.offer, subscribe.answer
	Tracks    []trackDecl     `json:"tracks,omitempty"`    // publish.offer
	Target    string          `json:"target,omitempty"`    // candidate
	Candidate json.RawMessage `json:"candidate,omitempty"` // candidate
	TrackID   string          `json:"track_id,omitempty"`  // track.subscribe, track.unsubscribe
}

// trackDecl is one track a publish.offer declares: the client's own track
// ID (the msid track of its m-section) and what it carries.
type trackDecl struct {
	TrackID string `json:"track_id"`
	Source  string `json:"source"`
	// Layers are the RIDs of a simulcast track's encodings, lowest quality
	// first (2 or 3); empty without simulcast.
	Layers []string `json:"layers,omitempty"`
}

// TrackInfo is one published track as the others in the room see it.
type TrackInfo struct {
	TrackID string `json:"track_id"`
	Source  string `json:"source"`
	Kind    string `json:"kind"`
	// Layers is how many simulcast encodings have arrived (1 without
	// simulcast).
	Layers int `json:"layers"`
}

// participantView is how one participant is shown to the others.
type participantView struct {
	ParticipantID string          `json:"participant_id"`
	Role          string          `json:"role"`
	State         json.RawMessage `json:"state"`
	// Version 2 fields, absent for a participant without media.
	Tracks   []TrackInfo `json:"tracks,omitempty"`
	Speaking bool        `json:"speaking,omitempty"`
}

type joinedMessage struct {
	Type                string            `json:"type"`
	Protocol            int               `json:"protocol"`
	SessionID           string            `json:"session_id"`
	RoomID              string            `json:"room_id"`
	ParticipantID       string            `json:"participant_id"`
	Role                string            `json:"role"`
	HeartbeatIntervalMS int64             `json:"heartbeat_interval_ms"`
	HeartbeatTimeoutMS  int64             `json:"heartbeat_timeout_ms"`
	Participants        []participantView `json:"participants"`
	ICEServers          []ICEServer       `json:"ice_servers,omitempty"` // version 2
}

// errorMessage carries the protocol version too: it can be the first (and
// only) message a client gets, and the version belongs in the first message.
type errorMessage struct {
	Type     string `json:"type"`
	Protocol int    `json:"protocol"`
	Code     string `json:"code"`
	Message  string `json:"message"`
}

type pongMessage struct {
	Type string `json:"type"`
	TS   *int64 `json:"ts,omitempty"`
}

type participantJoinedMessage struct {
	Type        string          `json:"type"`
	Participant participantView `json:"participant"`
}

type participantUpdatedMessage struct {
	Type          string          `json:"type"`
	ParticipantID string          `json:"participant_id"`
	State         json.RawMessage `json:"state"`
	// Version 2: sent to version 2 sockets only.
	Tracks   []TrackInfo `json:"tracks,omitempty"`
	Speaking bool        `json:"speaking,omitempty"`
}

type sdpMessage struct {
	Type string `json:"type"`
	SDP  string `json:"sdp"`
}

type candidateMessage struct {
	Type      string          `json:"type"`
	Target    string          `json:"target"`
	Candidate json.RawMessage `json:"candidate"`
}

type trackRefusedMessage struct {
	Type    string `json:"type"`
	TrackID string `json:"track_id"`
	Source  string `json:"source"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

type trackUnsubscribedMessage struct {
	Type          string `json:"type"`
	TrackID       string `json:"track_id"`
	ParticipantID string `json:"participant_id"`
	Reason        string `json:"reason"`
}

type participantLeftMessage struct {
	Type          string `json:"type"`
	ParticipantID string `json:"participant_id"`
	Reason        string `json:"reason"`
}

// emptyState is the state of a participant that has not sent an update.
var emptyState = json.RawMessage(`{}`)

// encode marshals a server message. Every message is a plain struct of
// strings, numbers and already-valid raw JSON, so failure is a bug.
func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("media: encoding a server message: " + err.Error())
	}
	return b
}

func encodeError(protocol int, code, message string) []byte {
	return encode(errorMessage{Type: typeError, Protocol: protocol, Code: code, Message: message})
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 { // s[n] continues a sequence: back off to its start
		n--
	}
	return s[:n]
}
