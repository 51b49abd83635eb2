package project

import (
	"time"

	"github.com/goccy/go-json"
	"rtcd/actors/core"
	"rtcd/scopes"
)

// APIKey is a key record as the project actor keeps it. The secret itself
// is never kept, only its keyed hash.
type APIKey struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Scopes    uint32     `json:"scopes"`
	Last4     string     `json:"last4"`
	Hash      [32]byte   `json:"hash"`
	CreatedAt time.Time  `json:"created_at"`
	CreatedBy core.Actor `json:"created_by"`
	RevokedAt time.Time  `json:"revoked_at"`
	// LastUsedAt is the last use written to the journal (api_key_used), at
	// most apiKeyTouchInterval behind the real last use; zero if never
	// used. Snapshots from before it existed decode it as zero.
	LastUsedAt time.Time `json:"last_used_at"`
}

// record is the key's record in the key registry (authentication).
func (k *APIKey) record(projectID string) *core.KeyRecord {
	return core.NewKeyRecord(k.ID, projectID, scopes.Set(k.Scopes), k.LastUsedAt)
}

// APIKeyView is the public API key object. The secret appears only in the
// create response.
type APIKeyView struct {
	Object    string   `json:"object"`
	ID        string   `json:"id"`
	Name      *string  `json:"name"`
	Scopes    []string `json:"scopes"`
	Last4     string   `json:"last4"`
	Status    string   `json:"status"`
	CreatedAt string   `json:"created_at"`
	RevokedAt *string  `json:"revoked_at"`
	// LastUsedAt is the last use as journaled: at most apiKeyTouchInterval
	// behind the real one (last use, recorded to the minute).
	LastUsedAt *string `json:"last_used_at"`
	Secret     string  `json:"secret,omitempty"`
}

func (k *APIKey) View() APIKeyView {
	status := "active"
	if !k.RevokedAt.IsZero() {
		status = "revoked"
	}
	return APIKeyView{
		Object: "api_key", ID: k.ID, Name: core.OptionalString(k.Name), Scopes: scopes.Set(k.Scopes).Names(),
		Last4: k.Last4, Status: status, CreatedAt: core.Timestamp(k.CreatedAt), RevokedAt: core.OptionalTimestamp(k.RevokedAt),
		LastUsedAt: core.OptionalTimestamp(k.LastUsedAt),
	}
}

// NewRoom is a room to create, as its request's checks (those that need
// no state) left it.
type NewRoom struct {
	Name             string
	MaxParticipants  int // 0: the project's max_participants_per_room
	ExpiresInSeconds int
	Region           string
	Metadata         json.RawMessage
}

// ProjectView is a project as the dashboard routes show it.
type ProjectView struct {
	Object     string  `json:"object"`
	ID         string  `json:"id"`
	AccountID  string  `json:"account_id"`
	Name       string  `json:"name"`
	Status     string  `json:"status"`
	CreatedAt  string  `json:"created_at"`
	ArchivedAt *string `json:"archived_at"`
}

func ViewOf(p *core.Project) ProjectView {
	return ProjectView{Object: "project", ID: p.ID, AccountID: p.AccountID, Name: p.Name, Status: p.Status,
		CreatedAt: core.Timestamp(p.CreatedAt), ArchivedAt: core.OptionalTimestamp(p.ArchivedAt)}
}
