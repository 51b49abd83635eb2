package actors

import (
	"rtcd/actors/core"
	"rtcd/actors/directory"
	"rtcd/actors/project"
	"rtcd/apierr"
	"rtcd/auth"
	"rtcd/ids"
)

// --- projects ------------------------------------------------------------------

// CreateProject creates a project in a workspace (owners and admins).
func (e *Engine) CreateProject(u *core.DashboardUser, accountID string, p *NameParams) ([]byte, *apierr.Error) {
	name, err := checkDisplayName(p, true)
	if err != nil {
		return nil, err
	}
	r := e.ask(e.directory, directory.CreateProject{User: *u, AccountID: accountID, Name: name})
	return r.Body, r.Err
}

// projectInAccount checks that u is a member of accountID and that
// projectID belongs to it; anything else is a 404.
func (e *Engine) projectInAccount(u *core.DashboardUser, accountID, projectID string) (*projectHandle, string, *apierr.Error) {
	role, ok := e.sessions.RoleOf(u.UserID, accountID)
	if !ok {
		return nil, "", directory.ErrNoAccount(accountID)
	}
	if !ids.Valid(projectID, ids.Project) {
		return nil, "", directory.ErrNoProject(projectID)
	}
	h, ok := e.project(projectID)
	if !ok {
		return nil, "", directory.ErrNoProject(projectID)
	}
	if p := h.gate.Record.Load(); p == nil || p.AccountID != accountID {
		return nil, "", directory.ErrNoProject(projectID)
	}
	return h, role, nil
}

// RenameProject renames a project (owners and admins).
func (e *Engine) RenameProject(u *core.DashboardUser, accountID, projectID string, p *NameParams) ([]byte, *apierr.Error) {
	h, role, err := e.projectInAccount(u, accountID, projectID)
	if err != nil {
		return nil, err
	}
	if role != directory.RoleOwner && role != directory.RoleAdmin {
		return nil, apierr.New(apierr.PermissionDenied, "only owners and admins can rename projects").WithDetails("role", role)
	}
	name, err := checkDisplayName(p, true)
	if err != nil {
		return nil, err
	}
	r := e.ask(h.pid, project.Rename{User: *u, Name: name})
	return r.Body, r.Err
}

// ArchiveProject archives a project (owners): its API keys are revoked and
// its webhook endpoints disabled. The directory checks the last-project
// rule and marks the project as being archived, so that two archives in one
// workspace cannot both pass the check; the project actor does the work
// while the directory goes on serving (it never waits on another actor).
func (e *Engine) ArchiveProject(u *core.DashboardUser, accountID, projectID string) ([]byte, *apierr.Error) {
	r := e.ask(e.directory, directory.ArchiveProject{User: *u, AccountID: accountID, ProjectID: projectID})
	return r.Body, r.Err
}

// --- members -------------------------------------------------------------------

// ListMembers lists a workspace's members, newest first (any member).
func (e *Engine) ListMembers(u *core.DashboardUser, accountID string, limit int) ([]byte, *apierr.Error) {
	r := e.ask(e.directory, directory.ListMembers{User: *u, AccountID: accountID, Limit: limit})
	return r.Body, r.Err
}

func validRole(role string) bool {
	return role == directory.RoleOwner || role == directory.RoleAdmin || role == directory.RoleMember
}

// UpdateMember changes a member's role (owners and admins; only owners
// grant or take the owner role).
func (e *Engine) UpdateMember(u *core.DashboardUser, accountID, userID string, p *MemberParams) ([]byte, *apierr.Error) {
	if p.Role == nil || !validRole(*p.Role) {
		return nil, apierr.Invalid("role", "role must be one of owner, admin, member")
	}
	role := *p.Role
	r := e.ask(e.directory, directory.UpdateMember{User: *u, AccountID: accountID, UserID: userID, Role: role})
	return r.Body, r.Err
}

// RemoveMember removes a member (owners and admins; anyone may leave).
// Admins cannot remove owners, and the last owner cannot go.
func (e *Engine) RemoveMember(u *core.DashboardUser, accountID, userID string) ([]byte, *apierr.Error) {
	r := e.ask(e.directory, directory.RemoveMember{User: *u, AccountID: accountID, UserID: userID})
	return r.Body, r.Err
}

// --- invitations ---------------------------------------------------------------

// CreateInvitation invites an e-mail address to a workspace (owners and
// admins) and mails it the link. A pending invitation to the same address
// is replaced.
func (e *Engine) CreateInvitation(u *core.DashboardUser, accountID string, p *InvitationParams) ([]byte, *apierr.Error) {
	if p.Email == nil {
		return nil, apierr.Invalid("email", "email is required")
	}
	email, ok := deliverableEmail(*p.Email)
	if !ok {
		return nil, apierr.Invalid("email", "email must be an e-mail address")
	}
	role := directory.RoleMember
	if p.Role != nil {
		if *p.Role != directory.RoleAdmin && *p.Role != directory.RoleMember {
			return nil, apierr.Invalid("role", "role must be admin or member; make someone owner once they joined")
		}
		role = *p.Role
	}
	token, terr := auth.NewDashboardSecret(auth.InvitationTokenPrefix)
	if terr != nil {
		return nil, apierr.New(apierr.Internal, "could not create an invitation")
	}
	hash := directory.HashHex(e.env.Keys.HashDashboardSecret(token))
	r := e.ask(e.directory, directory.CreateInvitation{User: *u, AccountID: accountID, Email: email, Role: role, Hash: hash})
	if m, ok := r.Value.(directory.InvitationMail); ok {
		e.enqueueMail(e.invitationMail(m.To, token, m.Workspace, m.Inviter, m.ExpiresAt))
	}
	return r.Body, r.Err
}

// ListInvitations lists a workspace's invitations, newest first (owners and
// admins); closed ones stay listed for closedInvitationRetention.
func (e *Engine) ListInvitations(u *core.DashboardUser, accountID string, limit int) ([]byte, *apierr.Error) {
	r := e.ask(e.directory, directory.ListInvitations{User: *u, AccountID: accountID, Limit: limit})
	return r.Body, r.Err
}

// RevokeInvitation revokes a pending invitation (owners and admins);
// idempotent for one already closed.
func (e *Engine) RevokeInvitation(u *core.DashboardUser, accountID, invitationID string) ([]byte, *apierr.Error) {
	r := e.ask(e.directory, directory.RevokeInvitation{User: *u, AccountID: accountID, InvitationID: invitationID})
	return r.Body, r.Err
}

// AcceptInvitation adds the signed-in user to the invitation's workspace;
// the invitation must be addressed to the user's e-mail.
func (e *Engine) AcceptInvitation(u *core.DashboardUser, p *AcceptParams) ([]byte, *apierr.Error) {
	if p.InvitationToken == nil {
		return nil, apierr.Invalid("invitation_token", "invitation_token is required")
	}
	if !auth.CheckDashboardSecretFormat(auth.InvitationTokenPrefix, *p.InvitationToken) {
		return nil, directory.ErrBadInvitation
	}
	hash := directory.HashHex(e.env.Keys.HashDashboardSecret(*p.InvitationToken))
	r := e.ask(e.directory, directory.AcceptInvitation{User: *u, Hash: hash})
	return r.Body, r.Err
}
