package actors

import (
	"rtcd/actors/core"
	"rtcd/actors/directory"
	"rtcd/actors/project"
	"rtcd/apierr"
	"rtcd/auth"
	"rtcd/ids"
	"rtcd/persistence"
)

// --- e-mail sign-in --------------------------------------------------------

// StartEmailSignIn records a sign-in link for the address and queues its
// mail. The answer (202, EmailStartAccepted) is the same whatever the
// address: no lookup of the user happens here, and the mail is sent off the
// request path.
func (e *Engine) StartEmailSignIn(p *EmailStartParams, sourceIP string) *apierr.Error {
	if p.Email == nil {
		return apierr.Invalid("email", "email is required")
	}
	email, ok := normalizeEmail(*p.Email)
	if !ok {
		return apierr.Invalid("email", "email must be an e-mail address")
	}
	invitationHash := ""
	if p.InvitationToken != nil {
		if !auth.CheckDashboardSecretFormat(auth.InvitationTokenPrefix, *p.InvitationToken) {
			return apierr.Invalid("invitation_token", "invitation_token is malformed")
		}
		invitationHash = directory.HashHex(e.env.Keys.HashDashboardSecret(*p.InvitationToken))
	}
	if err := e.env.AllowRate("sign_in_start_ip:"+sourceIP, "sign_in_starts_per_ip_per_minute", SignInStartsPerIPPerMinute); err != nil {
		return err
	}
	// Malformed but plausible: the same answer, and nothing is sent.
	_, deliverable := deliverableEmail(email)
	token, err := auth.NewDashboardSecret(auth.SignInTokenPrefix)
	if err != nil {
		return apierr.New(apierr.Internal, "could not create a sign-in link")
	}
	hash := directory.HashHex(e.env.Keys.HashDashboardSecret(token))
	r := e.askDirectory(directory.StartSignIn{Email: email, Hash: hash, InvitationHash: invitationHash, Deliverable: deliverable})
	if m, ok := r.Value.(directory.SignInMail); ok {
		e.enqueueMail(e.signInMail(m.To, token, m.ExpiresAt))
	}
	return r.Err
}

func (e *Engine) linkHash(p *EmailTokenParams, sourceIP string) (string, *apierr.Error) {
	if p.Token == nil {
		return "", apierr.Invalid("token", "token is required")
	}
	if err := e.env.AllowRate("sign_in_attempt_ip:"+sourceIP, "sign_in_attempts_per_ip_per_minute", SignInAttemptsPerIPPerMinute); err != nil {
		return "", err
	}
	if !auth.CheckDashboardSecretFormat(auth.SignInTokenPrefix, *p.Token) {
		return "", directory.ErrBadLink
	}
	return directory.HashHex(e.env.Keys.HashDashboardSecret(*p.Token)), nil
}

// PeekEmailSignIn tells which address a link is for, without using it.
func (e *Engine) PeekEmailSignIn(p *EmailTokenParams, sourceIP string) ([]byte, *apierr.Error) {
	hash, err := e.linkHash(p, sourceIP)
	if err != nil {
		return nil, err
	}
	r := e.askDirectory(directory.PeekSignIn{Hash: hash})
	return r.Body, r.Err
}

// VerifyEmailSignIn exchanges a link for a session, once: the directory
// deletes the link in the same step that creates the session.
func (e *Engine) VerifyEmailSignIn(p *EmailTokenParams, requestID, sourceIP string) ([]byte, *apierr.Error) {
	hash, err := e.linkHash(p, sourceIP)
	if err != nil {
		return nil, err
	}
	sessionToken, sessionHash, serr := e.newSessionToken()
	if serr != nil {
		return nil, serr
	}
	r := e.askDirectory(directory.VerifySignIn{Hash: hash, SessionToken: sessionToken, SessionHash: sessionHash, RequestID: requestID, SourceIP: sourceIP})
	return r.Body, r.Err
}

// newSessionToken makes a session token and its hex keyed hash. It is
// made before asking the directory, so the actor does no crypto/rand.
func (e *Engine) newSessionToken() (token, hash string, err *apierr.Error) {
	token, rerr := auth.NewDashboardSecret(auth.SessionTokenPrefix)
	if rerr != nil {
		return "", "", apierr.New(apierr.Internal, "could not create a session")
	}
	return token, directory.HashHex(e.env.Keys.HashDashboardSecret(token)), nil
}

// CheckSignInAttempt applies the per-IP limit of sign-in attempts; the
// Google route calls it before contacting the provider.
func (e *Engine) CheckSignInAttempt(sourceIP string) *apierr.Error {
	return e.env.AllowRate("sign_in_attempt_ip:"+sourceIP, "sign_in_attempts_per_ip_per_minute", SignInAttemptsPerIPPerMinute)
}

// GoogleSignIn creates a session for a verified Google identity, joining
// the workspace of invitationToken when it is addressed to that e-mail.
func (e *Engine) GoogleSignIn(id directory.GoogleIdentity, invitationToken *string, requestID, sourceIP string) ([]byte, *apierr.Error) {
	email, ok := normalizeEmail(id.Email)
	if !ok || id.Subject == "" {
		return nil, apierr.New(apierr.AuthenticationFailed, "the identity provider gave no usable e-mail address")
	}
	invitationHash := ""
	if invitationToken != nil {
		if !auth.CheckDashboardSecretFormat(auth.InvitationTokenPrefix, *invitationToken) {
			return nil, apierr.Invalid("invitation_token", "invitation_token is malformed")
		}
		invitationHash = directory.HashHex(e.env.Keys.HashDashboardSecret(*invitationToken))
	}
	name := id.Name
	if len(name) > MaxDisplayNameBytes || checkText("name", &name, MaxDisplayNameBytes) != nil {
		name = ""
	}
	sessionToken, sessionHash, serr := e.newSessionToken()
	if serr != nil {
		return nil, serr
	}
	r := e.askDirectory(directory.SignInWithGoogle{Identity: id, Email: email, Name: name, InvitationHash: invitationHash, SessionToken: sessionToken, SessionHash: sessionHash, RequestID: requestID, SourceIP: sourceIP})
	return r.Body, r.Err
}

// Logout ends the request's session at once.
func (e *Engine) Logout(u *core.DashboardUser) *apierr.Error {
	return e.endSessions(u, false)
}

// LogoutAll ends every session of the user at once.
func (e *Engine) LogoutAll(u *core.DashboardUser) *apierr.Error {
	return e.endSessions(u, true)
}

func (e *Engine) endSessions(u *core.DashboardUser, all bool) *apierr.Error {
	r := e.askDirectory(directory.EndSessions{User: *u, All: all})
	return r.Err
}

// --- me and workspaces --------------------------------------------------------

// Me answers GET /v1/me.
func (e *Engine) Me(u *core.DashboardUser) ([]byte, *apierr.Error) {
	r := e.askDirectory(directory.ReadMe{User: *u})
	return r.Body, r.Err
}

// UpdateMe changes the user's display name (PATCH /v1/me).
func (e *Engine) UpdateMe(u *core.DashboardUser, p *NameParams) ([]byte, *apierr.Error) {
	name, err := checkDisplayName(p, true)
	if err != nil {
		return nil, err
	}
	r := e.askDirectory(directory.RenameUser{User: *u, Name: name})
	return r.Body, r.Err
}

// CreateAccount creates another workspace owned by the user, with a first
// project (POST /v1/accounts).
func (e *Engine) CreateAccount(u *core.DashboardUser, p *NameParams) ([]byte, *apierr.Error) {
	name, err := checkDisplayName(p, false)
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = directory.DefaultWorkspaceName
	}
	r := e.askDirectory(directory.CreateAccount{User: *u, Name: name})
	return r.Body, r.Err
}

// RenameAccount renames a workspace (owners and admins).
func (e *Engine) RenameAccount(u *core.DashboardUser, accountID string, p *NameParams) ([]byte, *apierr.Error) {
	name, err := checkDisplayName(p, true)
	if err != nil {
		return nil, err
	}
	r := e.askDirectory(directory.RenameAccount{User: *u, AccountID: accountID, Name: name})
	return r.Body, r.Err
}

// ListAccountAuditLogs lists a workspace's audit log (owners and admins).
func (e *Engine) ListAccountAuditLogs(u *core.DashboardUser, accountID string, limit int) ([]byte, *apierr.Error) {
	role, ok := e.sessions.RoleOf(u.UserID, accountID)
	if !ok {
		return nil, directory.ErrNoAccount(accountID)
	}
	if role != directory.RoleOwner && role != directory.RoleAdmin {
		return nil, apierr.New(apierr.PermissionDenied, "only owners and admins can read the workspace audit log").WithDetails("role", role)
	}
	return e.listPage(persistence.IndexPrefix(persistence.PrefixAccountAudit, accountID), limit, false, nil)
}

// --- projects ------------------------------------------------------------------

// CreateProject creates a project in a workspace (owners and admins).
func (e *Engine) CreateProject(u *core.DashboardUser, accountID string, p *NameParams) ([]byte, *apierr.Error) {
	name, err := checkDisplayName(p, true)
	if err != nil {
		return nil, err
	}
	r := e.askDirectory(directory.CreateProject{User: *u, AccountID: accountID, Name: name})
	return r.Body, r.Err
}

// projectInAccount checks that u is a member of accountID and that
// projectID belongs to it (anything else is a 404), and returns u's role.
func (e *Engine) projectInAccount(u *core.DashboardUser, accountID, projectID string) (string, *apierr.Error) {
	role, ok := e.sessions.RoleOf(u.UserID, accountID)
	if !ok {
		return "", directory.ErrNoAccount(accountID)
	}
	if !ids.Valid(projectID, ids.Project) {
		return "", directory.ErrNoProject(projectID)
	}
	if p, ok := e.projectRecord(projectID); !ok || p.AccountID != accountID {
		return "", directory.ErrNoProject(projectID)
	}
	return role, nil
}

// RenameProject renames a project (owners and admins).
func (e *Engine) RenameProject(u *core.DashboardUser, accountID, projectID string, p *NameParams) ([]byte, *apierr.Error) {
	role, err := e.projectInAccount(u, accountID, projectID)
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
	r := e.askProject(projectID, project.Rename{User: *u, Name: name})
	if r.Gone {
		return nil, core.ErrUnavailable
	}
	return r.Body, r.Err
}

// ArchiveProject archives a project (owners): its API keys are revoked and
// its webhook endpoints disabled. The directory checks the last-project
// rule and marks the project as being archived, so that two archives in one
// workspace cannot both pass the check; the project actor does the work
// while the directory goes on serving (it never waits on another actor).
func (e *Engine) ArchiveProject(u *core.DashboardUser, accountID, projectID string) ([]byte, *apierr.Error) {
	r := e.askDirectory(directory.ArchiveProject{User: *u, AccountID: accountID, ProjectID: projectID})
	return r.Body, r.Err
}

// --- members -------------------------------------------------------------------

// ListMembers lists a workspace's members, newest first (any member).
func (e *Engine) ListMembers(u *core.DashboardUser, accountID string, limit int) ([]byte, *apierr.Error) {
	r := e.askDirectory(directory.ListMembers{User: *u, AccountID: accountID, Limit: limit})
	return r.Body, r.Err
}

// UpdateMember changes a member's role (owners and admins; only owners
// grant or take the owner role).
func (e *Engine) UpdateMember(u *core.DashboardUser, accountID, userID string, p *MemberParams) ([]byte, *apierr.Error) {
	if p.Role == nil || !validRole(*p.Role) {
		return nil, apierr.Invalid("role", "role must be one of owner, admin, member")
	}
	role := *p.Role
	r := e.askDirectory(directory.UpdateMember{User: *u, AccountID: accountID, UserID: userID, Role: role})
	return r.Body, r.Err
}

// RemoveMember removes a member (owners and admins; anyone may leave).
// Admins cannot remove owners, and the last owner cannot go.
func (e *Engine) RemoveMember(u *core.DashboardUser, accountID, userID string) ([]byte, *apierr.Error) {
	r := e.askDirectory(directory.RemoveMember{User: *u, AccountID: accountID, UserID: userID})
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
	r := e.askDirectory(directory.CreateInvitation{User: *u, AccountID: accountID, Email: email, Role: role, Hash: hash})
	if m, ok := r.Value.(directory.InvitationMail); ok {
		e.enqueueMail(e.invitationMail(m.To, token, m.Workspace, m.Inviter, m.ExpiresAt))
	}
	return r.Body, r.Err
}

// ListInvitations lists a workspace's invitations, newest first (owners and
// admins); closed ones stay listed for closedInvitationRetention.
func (e *Engine) ListInvitations(u *core.DashboardUser, accountID string, limit int) ([]byte, *apierr.Error) {
	r := e.askDirectory(directory.ListInvitations{User: *u, AccountID: accountID, Limit: limit})
	return r.Body, r.Err
}

// RevokeInvitation revokes a pending invitation (owners and admins);
// idempotent for one already closed.
func (e *Engine) RevokeInvitation(u *core.DashboardUser, accountID, invitationID string) ([]byte, *apierr.Error) {
	r := e.askDirectory(directory.RevokeInvitation{User: *u, AccountID: accountID, InvitationID: invitationID})
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
	r := e.askDirectory(directory.AcceptInvitation{User: *u, Hash: hash})
	return r.Body, r.Err
}
