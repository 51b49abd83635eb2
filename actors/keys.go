package actors

import (
	"github.com/goccy/go-json"
	"rtcd/actors/core"
	"rtcd/actors/project"
	"rtcd/apierr"
	"rtcd/ids"
	"rtcd/persistence"
	"rtcd/scopes"
)

// CreateAPIKey creates a key (POST /v1/api-keys).
func (e *Engine) CreateAPIKey(c *core.Caller, p *APIKeyParams, idem *IdempotencyRequest) (Result, *apierr.Error) {
	var name string
	if p.Name != nil {
		if err := checkOptionalText("name", p.Name, MaxAPIKeyNameBytes); err != nil {
			return Result{}, err
		}
		name = *p.Name
	}
	requested, err := parseScopes(p.Scopes)
	if err != nil {
		return Result{}, err
	}
	return e.createInProject(c, idem, func(ip *core.IdemPending) any {
		return project.CreateKey{Caller: *c, Name: name, Scopes: requested, Idem: ip}
	})
}

func parseScopes(names []string) (scopes.Set, *apierr.Error) {
	if len(names) == 0 {
		return 0, apierr.Invalid("scopes", "scopes must list at least one scope").WithDetails("allowed", scopes.All.Names())
	}
	if len(names) > scopes.MaxScopesPerKey {
		return 0, apierr.Invalid("scopes", "scopes may list at most %d scopes", scopes.MaxScopesPerKey)
	}
	var set scopes.Set
	for _, n := range names {
		s, ok := scopes.Parse(n)
		if !ok {
			return 0, apierr.Invalid("scopes", "unknown scope %q", n).WithDetails("allowed", scopes.All.Names())
		}
		if set.Has(s) {
			return 0, apierr.Invalid("scopes", "scope %q is listed twice", n)
		}
		set |= scopes.Set(s)
	}
	return set, nil
}

// ListAPIKeys lists the project's keys, active and revoked, newest first.
func (e *Engine) ListAPIKeys(c *core.Caller, limit int) ([]byte, *apierr.Error) {
	return e.listPage(persistence.IndexPrefix(persistence.PrefixKeyIdx, c.ProjectID), limit, false, upgradeKeyRecord)
}

// upgradeKeyRecord renders a stored ki/ record in the current shape of the
// API key object: records written before last_used_at existed lack the
// field, and the API never omits a field (it reads as null, never used).
func upgradeKeyRecord(record []byte) ([]byte, error) {
	var v project.APIKeyView
	if err := json.Unmarshal(record, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// RevokeAPIKey revokes a key (DELETE /v1/api-keys/{id}); idempotent.
func (e *Engine) RevokeAPIKey(c *core.Caller, keyID string) (Result, *apierr.Error) {
	if !ids.Valid(keyID, ids.APIKey) {
		return Result{}, apierr.New(apierr.APIKeyNotFound, "no API key %q in this project", keyID)
	}
	h, err := e.projectOf(c)
	if err != nil {
		return Result{}, err
	}
	return result(e.ask(h.pid, project.RevokeKey{Caller: *c, KeyID: keyID}))
}

// ProjectLimits returns the project's effective limits.
func (e *Engine) ProjectLimits(c *core.Caller) ([]byte, *apierr.Error) {
	h, err := e.projectOf(c)
	if err != nil {
		return nil, err
	}
	l := e.env.LimitsOf(h.gate.Record.Load())
	return core.MustJSON(struct {
		Object    string `json:"object"`
		ProjectID string `json:"project_id"`
		core.Limits
	}{"project_limits", c.ProjectID, l}), nil
}

// ListAuditLogs lists the project's audit log, newest first.
func (e *Engine) ListAuditLogs(c *core.Caller, limit int) ([]byte, *apierr.Error) {
	return e.listPage(persistence.IndexPrefix(persistence.PrefixAudit, c.ProjectID), limit, false, nil)
}
