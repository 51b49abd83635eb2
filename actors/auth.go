package actors

import (
	"rtcd/actors/core"
	"rtcd/actors/directory"
	"rtcd/actors/project"
	"rtcd/apierr"
	"rtcd/auth"
	"rtcd/ids"
)

// Authenticate resolves a bearer secret to its caller. Malformed secrets
// (wrong prefix, length, alphabet or checksum) are refused without a lookup.
func (e *Engine) Authenticate(secret string) (*core.Caller, *apierr.Error) {
	if !auth.CheckAPIKeyFormat(secret) {
		return nil, core.ErrBadCredential
	}
	rec := e.env.APIKeys.Lookup(e.env.Keys.HashAPIKey(secret))
	if rec == nil {
		return nil, core.ErrBadCredential
	}
	h, ok := e.project(rec.ProjectID)
	if !ok || h.gate.Record.Load().Status != core.ProjectActive {
		return nil, core.ErrBadCredential
	}
	if now := e.env.Clock.Now(); rec.NoteUse(now) {
		// Without waiting: the project journals it (touchKey) when it gets
		// to it, and only one such message per key is ever on its way.
		e.system.Root.Send(h.pid, project.TouchKey{KeyID: rec.KeyID, UsedAt: now})
	}
	return &core.Caller{ProjectID: rec.ProjectID, ActorType: "api_key", ActorID: rec.KeyID, Scopes: rec.Scopes}, nil
}

func (e *Engine) projectOf(c *core.Caller) (*projectHandle, *apierr.Error) {
	h, ok := e.project(c.ProjectID)
	if !ok {
		return nil, core.ErrBadCredential
	}
	return h, nil
}

// lookupSession resolves a session token, checking expiry and idle time,
// and notes its use.
func (e *Engine) lookupSession(token string) (*core.LiveSession, *apierr.Error) {
	pid := e.directory.Load()
	if pid == nil {
		return nil, errDirectoryElsewhere() // a cluster node, reached while the directory moved
	}
	if !auth.CheckDashboardSecretFormat(auth.SessionTokenPrefix, token) {
		return nil, directory.ErrBadSession
	}
	ls, ok := e.sessions.Lookup(e.env.Keys.HashDashboardSecret(token))
	if !ok {
		return nil, directory.ErrBadSession
	}
	now := e.env.Clock.Now()
	if !now.Before(ls.ExpiresAt()) || now.Sub(ls.LastSeen()) >= directory.SessionIdleTimeout {
		return nil, directory.ErrBadSession
	}
	if ls.NoteUse(now, directory.SessionTouchInterval) {
		e.system.Root.Send(pid, directory.TouchSession{Hash: ls.Hash(), At: now})
	}
	return ls, nil
}

// AuthenticateSession resolves a dashboard session token (rtc_us_).
func (e *Engine) AuthenticateSession(token string) (*core.DashboardUser, *apierr.Error) {
	ls, err := e.lookupSession(token)
	if err != nil {
		return nil, err
	}
	return &core.DashboardUser{UserID: ls.UserID(), SessionHash: ls.Hash()}, nil
}

// AuthenticateSessionForProject resolves a session used on a project route
// with X-Project-Id: the scopes come from the user's role in the project's
// workspace. A project that does not exist, is archived, or belongs to a
// workspace the user is not a member of is a 404, so ids do not leak.
func (e *Engine) AuthenticateSessionForProject(token, projectID string) (*core.Caller, *apierr.Error) {
	if e.env.Clustered {
		return e.sessionForProject(token, projectID)
	}
	ls, err := e.lookupSession(token)
	if err != nil {
		return nil, err
	}
	notFound := directory.ErrNoProject(projectID).WithDetails("header", "X-Project-Id")
	if !ids.Valid(projectID, ids.Project) {
		return nil, notFound
	}
	h, ok := e.project(projectID)
	if !ok {
		return nil, notFound
	}
	p := h.gate.Record.Load()
	if p == nil || p.Status != core.ProjectActive {
		return nil, notFound
	}
	role, ok := e.sessions.RoleOf(ls.UserID(), p.AccountID)
	if !ok {
		return nil, notFound
	}
	return &core.Caller{ProjectID: projectID, ActorType: "user", ActorID: ls.UserID(), Scopes: directory.RoleScopes(role), Role: role}, nil
}
