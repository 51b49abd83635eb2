package project

import (
	"sort"
	"time"

	"rtcd/actors/core"
	"rtcd/apierr"
	"rtcd/persistence"
)

// Dashboard commands a project actor runs on its own record: rename and
// archive. The directory decides who may (roles, the last project); the
// project decides what its own state allows (no active rooms) and revokes
// what it owns (API keys, webhook endpoints).

// Rename renames the project (from the dashboard; the engine checked
// the caller's role).
type Rename struct {
	User core.DashboardUser
	Name string
}

type projectRenamed struct {
	Name string `json:"name"`
}

func (a *projectActor) renameProject(m Rename, r *core.Envelope) {
	env := a.env
	p := a.state.Project
	if p.Status != core.ProjectActive {
		r.Respond(core.Reply{Err: apierr.New(apierr.Conflict, "an archived project cannot be renamed").WithDetails("reason", "project_archived")})
		return
	}
	old := p.Name
	b := env.Store.NewBatch()
	a.record(b, projectEvent{ProjectRenamed: &projectRenamed{Name: m.Name}})
	details := map[string]any{"name": m.Name, "previous_name": old}
	env.Audit.Project(b, a.id, m.User.AsCaller(a.id), "project.renamed", core.AuditTarget{Type: "project", ID: a.id}, details)
	env.Audit.Account(b, p.AccountID, &m.User, "project.renamed", core.AuditTarget{Type: "project", ID: a.id}, details)
	a.publish()
	p = a.state.Project
	WriteRecord(b, &p)
	body := core.MustJSON(ViewOf(&p))
	env.Store.Commit(b, func() { r.Respond(core.Reply{Status: 200, Body: body}) })
}

// archiveProject refuses while rooms are active (their participants would
// lose the project under them), then revokes every active API key and
// disables every webhook endpoint. Both take effect at once, before the
// archive is durable: failing safe, like a single key's revocation.
func (a *projectActor) archiveProject(m core.ArchiveProject, r *core.Envelope) {
	env := a.env
	p := a.state.Project
	if p.Status != core.ProjectActive {
		// DELETE is idempotent, and answered once the archive is durable
		// (the directory lets no second archive in while the first runs;
		// this does not rely on it).
		body := core.MustJSON(ViewOf(&p))
		env.Store.AfterDurable(func() { r.Respond(core.Reply{Status: 200, Body: body}) })
		return
	}
	if n := len(a.state.ActiveRooms) - int(a.gate.EndedRooms.Load()); n > 0 {
		r.Respond(core.Reply{Err: apierr.New(apierr.ProjectHasActiveRooms, "the project has %d active room(s); end them before archiving it", n).
			WithDetails("active_rooms", n)})
		return
	}
	now := env.Clock.Now()
	caller := m.User.AsCaller(a.id)
	b := env.Store.NewBatch()
	var revoked [][32]byte
	keyIDs := make([]string, 0, len(a.state.Keys))
	for id := range a.state.Keys {
		keyIDs = append(keyIDs, id)
	}
	sort.Strings(keyIDs) // a deterministic journal
	for _, id := range keyIDs {
		key := a.state.Keys[id]
		if !key.RevokedAt.IsZero() {
			continue
		}
		revoked = append(revoked, key.Hash)
		a.record(b, projectEvent{APIKeyRevoked: &apiKeyRevoke{KeyID: key.ID, At: now}})
		b.Set(persistence.IndexKey(persistence.PrefixKeyIdx, a.id, key.CreatedAt.UnixNano(), key.ID), core.MustJSON(key.View()))
		env.Audit.Project(b, a.id, caller, "api_key.revoked", core.AuditTarget{Type: "api_key", ID: key.ID},
			map[string]any{"name": key.Name, "reason": "project_archived"})
	}
	epIDs := make([]string, 0, len(a.state.Endpoints))
	for id := range a.state.Endpoints {
		epIDs = append(epIDs, id)
	}
	sort.Strings(epIDs)
	for _, id := range epIDs {
		ep := a.state.Endpoints[id]
		if ep.Status != core.EndpointEnabled {
			continue
		}
		a.record(b, projectEvent{EndpointDisabled: &endpointDisabled{EndpointID: ep.ID, At: now}})
		b.Set(persistence.IndexKey(persistence.PrefixEndpoint, a.id, ep.CreatedAt.UnixNano(), ep.ID), core.MustJSON(endpointView(ep)))
		env.Audit.Project(b, a.id, caller, "webhook_endpoint.disabled", core.AuditTarget{Type: "webhook_endpoint", ID: ep.ID},
			map[string]any{"url": ep.URL, "reason": "project_archived"})
	}
	a.record(b, projectEvent{ProjectArchived: &projectArchived{At: now}})
	details := map[string]any{"name": p.Name, "revoked_api_keys": len(revoked)}
	env.Audit.Project(b, a.id, caller, "project.archived", core.AuditTarget{Type: "project", ID: a.id}, details)
	env.Audit.Account(b, p.AccountID, &m.User, "project.archived", core.AuditTarget{Type: "project", ID: a.id}, details)

	env.APIKeys.Update(func(reg map[[32]byte]*core.KeyRecord) {
		for _, h := range revoked {
			delete(reg, h)
		}
	})
	a.publish() // sessions stop reaching the project at once too
	a.publishEndpoints()
	p = a.state.Project
	WriteRecord(b, &p)
	body := core.MustJSON(ViewOf(&p))
	env.Store.Commit(b, func() { r.Respond(core.Reply{Status: 200, Body: body}) })
}

type projectArchived struct {
	At time.Time `json:"at"`
}
