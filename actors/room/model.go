package room

import (
	"time"

	"github.com/goccy/go-json"
)

// Room statuses.
const (
	RoomWaiting = "waiting"
	RoomActive  = "active"
	RoomEnding  = "ending"
	RoomEnded   = "ended"
)

// Why a room ended.
const (
	EndReasonDeleted = "deleted"
	EndReasonExpired = "expired"
)

// Participant statuses. A participant counts against the room's and the
// project's participant caps from its first connect until it is removed or
// its room ends.
//
//	created --connect--> connected --media join--> joined --leave--> left
//	left --connect--> connected (a participant may rejoin while its token is valid)
//	connected --no join before the media token expires--> left
//	any but removed/ended --DELETE--> removed; --room ends--> ended
const (
	ParticipantCreated   = "created"
	ParticipantConnected = "connected"
	ParticipantJoined    = "joined"
	ParticipantLeft      = "left"
	ParticipantRemoved   = "removed"
	ParticipantEnded     = "ended"
)

// Participant roles and what each may publish.
const (
	RolePublisher  = "publisher"
	RoleSubscriber = "subscriber"
)

// Room is a room's state.
type Room struct {
	ID              string          `json:"id"`
	ProjectID       string          `json:"project_id"`
	Name            string          `json:"name"`
	Status          string          `json:"status"`
	Region          string          `json:"region"`
	MaxParticipants int             `json:"max_participants"`
	Metadata        json.RawMessage `json:"metadata"`
	CreatedAt       time.Time       `json:"created_at"`
	ExpiresAt       time.Time       `json:"expires_at"`
	EndedAt         time.Time       `json:"ended_at"`
	EndReason       string          `json:"end_reason"`
}

// Participant is a participant session's state.
type Participant struct {
	ID          string          `json:"id"`
	RoomID      string          `json:"room_id"`
	ExternalID  string          `json:"external_id"`
	Name        string          `json:"name"`
	Role        string          `json:"role"`
	Status      string          `json:"status"`
	Metadata    json.RawMessage `json:"metadata"`
	CreatedAt   time.Time       `json:"created_at"`
	ExpiresAt   time.Time       `json:"expires_at"`
	ConnectedAt time.Time       `json:"connected_at"`
	EndedAt     time.Time       `json:"ended_at"`

	// SessionID is the latest connect session; ConnectExpiresAt is when its
	// media token expires (a connected participant that has not joined by
	// then gives its slot back).
	SessionID        string    `json:"session_id,omitempty"`
	ConnectExpiresAt time.Time `json:"connect_expires_at"`
	JoinedAt         time.Time `json:"joined_at"`
	LeftAt           time.Time `json:"left_at"`
	LeftReason       string    `json:"left_reason,omitempty"`
	// Usage is the open usage session while joined.
	Usage *UsageSession `json:"usage,omitempty"`
	// ParticipantSeconds is the finalized usage of all its closed sessions.
	ParticipantSeconds int64 `json:"participant_seconds"`
}

// UsageSession is one media join of a participant: it starts at the join and
// is finalized at the leave. Settled* say how much of it has been charged.
type UsageSession struct {
	SessionID      string    `json:"session_id"`
	StartedAt      time.Time `json:"started_at"`
	SettledSeconds int64     `json:"settled_seconds"` // participant-seconds charged so far
	ChargedMicros  int64     `json:"charged_micros"`  // total charged so far for this session
}

// counts reports whether the participant holds a slot of the caps.
func (p *Participant) counts() bool {
	return p.Status == ParticipantConnected || p.Status == ParticipantJoined
}

// NewParticipant is a participant to create, as its request's checks
// left it.
type NewParticipant struct {
	ExternalID       string
	Name             string
	Role             string
	ExpiresInSeconds int
	Metadata         json.RawMessage
}
