package core

import (
	"time"

	"rtcd/money"
	"rtcd/scopes"
)

// Settings are the engine's configuration.
type Settings struct {
	Region                string
	MediaURL              string
	DefaultLimits         Limits // for projects without limits of their own
	ConnectPerIPPerMinute int
	MediaTokenTTL         time.Duration
	SnapshotEveryEvents   int
	Billing               Billing
	// MediaNodeRunsOnItsOwn is true for a media node run in another process
	// (rtcd media, reached through --media-control-url), false for the node
	// embedded in this one. It decides:
	//   - restart: an embedded node's sessions die with the process, so
	//     recovered joined participants are closed at once (at their last
	//     settled instant, so downtime is never billed); a node on its own
	//     keeps its sockets across a control plane restart, so its
	//     presence decides;
	//   - settlement: running sessions on a node on its own are charged no
	//     further than its last presence snapshot (see settleUntil);
	//   - silence: only a node on its own can die while this process runs,
	//     so only its silence (mediaPresenceTimeout) ends the joined
	//     sessions. The embedded node lives and dies with the process; its
	//     reports come through an in-process queue on a real-time ticker,
	//     while the clock it stamps and the engine measures with may be a
	//     test's fake one, running ahead of that ticker: silence it is not.
	MediaNodeRunsOnItsOwn bool
	// WebhookAllowPrivate lets endpoints use http:// and private addresses:
	// for local testing only.
	WebhookAllowPrivate bool
}

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

// Project is a project's own record.
type Project struct {
	ID        string    `json:"id"`
	AccountID string    `json:"account_id"`
	Name      string    `json:"name"`
	Status    string    `json:"status"`
	Limits    *Limits   `json:"limits,omitempty"` // nil: follow the server's current defaults
	CreatedAt time.Time `json:"created_at"`
	// ArchivedAt is when the project was archived (zero while active).
	ArchivedAt time.Time `json:"archived_at"`
}

// Actor is who performed an operation, for audit logs.
type Actor struct {
	Type string `json:"type"` // api_key, user or operator
	ID   string `json:"id"`
}

// Caller is the authenticated principal of a request.
type Caller struct {
	ProjectID string
	ActorType string // "api_key", or "user" for a dashboard session with X-Project-Id
	ActorID   string
	Scopes    scopes.Set
	Role      string // the user's workspace role when ActorType is "user"
	RequestID string
	SourceIP  string
}

func (c *Caller) AuditActor() Actor { return Actor{Type: c.ActorType, ID: c.ActorID} }

// DashboardUser is the authenticated person of a dashboard request.
type DashboardUser struct {
	UserID      string
	SessionHash string
	RequestID   string
	SourceIP    string
}

func (u *DashboardUser) AuditActor() Actor { return Actor{Type: "user", ID: u.UserID} }

// caller is u acting on one project (audit entries of project actors).
func (u *DashboardUser) AsCaller(projectID string) *Caller {
	return &Caller{ProjectID: projectID, ActorType: "user", ActorID: u.UserID, RequestID: u.RequestID, SourceIP: u.SourceIP}
}

// Billing is the pricing and credit policy, from configuration.
type Billing struct {
	Enabled                bool
	Currency               string
	ParticipantMinutePrice money.Micros
	LowCreditThreshold     money.Micros
	MinimumCreditToStart   money.Micros
	SettleInterval         time.Duration // how often active sessions are charged
	TopupExpiry            time.Duration // unpaid top-ups expire after this
	BootstrapCredit        money.Micros  // credited to the first workspace by rtcd init
}

// MediaEngine is what the control plane asks of the media engine. The
// reference media node implements it in process; an adapter can put an
// external SFU behind it. No call may block the caller (a room actor, or
// the syncer running a durable batch's callback).
//
// AdmitSession and CloseSession answer a join report: a session is served
// only once its join is recorded (AdmitSession, after the batch is
// durable), and a session the room refuses is closed with the media
// node's error code (CloseSession, which also ends a joined session and
// refuses that session's later joins).
type MediaEngine interface {
	CloseRoom(roomID, reason string)
	RemoveParticipant(roomID, participantID string)
	AdmitSession(roomID, participantID, sessionID string)
	CloseSession(roomID, participantID, sessionID, code string)
}

// RoomReleaser is a media engine that can end a room's sessions because
// its room moved to another rtcd node of a cluster, telling the clients to
// connect again (the reference node in process does; a node run on its
// own does not yet, docs/cluster.md).
type RoomReleaser interface {
	ReleaseRoom(roomID string)
}
