package actors

import (
	"rtcd/actors/core"
	"rtcd/scopes"
)

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

func (k *APIKey) view() APIKeyView {
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
