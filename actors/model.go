package actors

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
const (
	ParticipantCreated   = "created"
	ParticipantConnected = "connected"
	ParticipantRemoved   = "removed"
	ParticipantEnded     = "ended"
)

// Participant roles and what each may publish.
const (
	RolePublisher  = "publisher"
	RoleSubscriber = "subscriber"
)

// Project statuses.
const (
	ProjectActive   = "active"
	ProjectArchived = "archived"
)

// Limits are a project's plan-dependent limits (GET /v1/project/limits).
type Limits struct {
	MaxActiveRooms              int `json:"max_active_rooms"`
	MaxActiveParticipants       int `json:"max_active_participants"`
	MaxParticipantsPerRoom      int `json:"max_participants_per_room"`
	RoomCreatesPerMinute        int `json:"room_creates_per_minute"`
	ParticipantCreatesPerMinute int `json:"participant_creates_per_minute"`
	ConnectRequestsPerMinute    int `json:"connect_requests_per_minute"`
}

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
}

// counts reports whether the participant holds a slot of the caps.
func (p *Participant) counts() bool { return p.Status == ParticipantConnected }

// APIKey is a key record as the project actor keeps it. The secret itself
// is never kept, only its keyed hash.
type APIKey struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Scopes    uint32    `json:"scopes"`
	Last4     string    `json:"last4"`
	Hash      [32]byte  `json:"hash"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy Actor     `json:"created_by"`
	RevokedAt time.Time `json:"revoked_at"`
}

// Project is a project's own record.
type Project struct {
	ID        string    `json:"id"`
	AccountID string    `json:"account_id"`
	Name      string    `json:"name"`
	Status    string    `json:"status"`
	Limits    *Limits   `json:"limits,omitempty"` // nil: follow the server's current defaults
	CreatedAt time.Time `json:"created_at"`
}

// Actor is who performed an operation, for audit logs.
type Actor struct {
	Type string `json:"type"` // api_key, user or operator
	ID   string `json:"id"`
}
