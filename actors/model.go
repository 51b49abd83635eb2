package actors

import (
	"time"

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
