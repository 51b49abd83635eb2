package actors

import (
	"sort"
	"time"

	"rtcd/apierr"
	"rtcd/auth"
	"rtcd/ids"
	"rtcd/persistence"
)

// --- projects ------------------------------------------------------------------

// CreateProject creates a project in a workspace (owners and admins).
func (e *Engine) CreateProject(u *DashboardUser, accountID string, p *NameParams) ([]byte, *apierr.Error) {
	name, err := checkDisplayName(p, true)
	if err != nil {
		return nil, err
	}
	r := e.askDirectory(func(a *directoryActor, respond func(Reply)) {
		w, _, err := a.manager(u.UserID, accountID, "create projects")
		if err != nil {
			respond(Reply{Err: err})
			return
		}
		if len(w.ProjectIDs) >= MaxProjectsPerAccount {
			respond(Reply{Err: apierr.New(apierr.QuotaExceeded, "a workspace can have at most %d projects, archived ones included", MaxProjectsPerAccount).
				WithDetails("limit_name", "projects_per_account", "limit", MaxProjectsPerAccount)})
			return
		}
		now := a.env.CreatedAt()
		project := Project{ID: ids.New(ids.Project), AccountID: w.ID, Name: name, Status: ProjectActive, CreatedAt: now}
		b := a.env.Store.NewBatch()
		b.Set(persistence.Key(persistence.PrefixProject, project.ID), nil)
		persistence.WriteSnapshotAt(b, projectJournal(project.ID), 0, encode(newProjectState(project)))
		a.record(b, directoryEvent{ProjectAdded: &workspaceProject{AccountID: w.ID, ProjectID: project.ID}})
		a.env.Audit.Account(b, w.ID, u, "project.created", AuditTarget{Type: "project", ID: project.ID}, map[string]any{"name": name})
		body := mustJSON(projectView(&project))
		a.commitAndStart(b, func() {
			a.env.Registry.SpawnProject(project.ID, &project, nil) // its snapshot was just written: nobody waits on it
		}, false, Reply{Status: 201, Body: body}, respond)
	})
	return r.Body, r.Err
}

// projectInAccount checks that u is a member of accountID and that
// projectID belongs to it; anything else is a 404.
func (e *Engine) projectInAccount(u *DashboardUser, accountID, projectID string) (*projectHandle, string, *apierr.Error) {
	role, ok := e.directoryShared.roleOf(u.UserID, accountID)
	if !ok {
		return nil, "", errNoAccount(accountID)
	}
	if !ids.Valid(projectID, ids.Project) {
		return nil, "", errNoProject(projectID)
	}
	h, ok := e.project(projectID)
	if !ok {
		return nil, "", errNoProject(projectID)
	}
	if p := h.gate.Record.Load(); p == nil || p.AccountID != accountID {
		return nil, "", errNoProject(projectID)
	}
	return h, role, nil
}

// RenameProject renames a project (owners and admins).
func (e *Engine) RenameProject(u *DashboardUser, accountID, projectID string, p *NameParams) ([]byte, *apierr.Error) {
	h, role, err := e.projectInAccount(u, accountID, projectID)
	if err != nil {
		return nil, err
	}
	if role != RoleOwner && role != RoleAdmin {
		return nil, apierr.New(apierr.PermissionDenied, "only owners and admins can rename projects").WithDetails("role", role)
	}
	name, err := checkDisplayName(p, true)
	if err != nil {
		return nil, err
	}
	r := e.ask(h.pid, renameProject{user: *u, name: name})
	return r.Body, r.Err
}

// ArchiveProject archives a project (owners): its API keys are revoked and
// its webhook endpoints disabled. The directory checks the last-project
// rule and marks the project as being archived, so that two archives in one
// workspace cannot both pass the check; the project actor does the work
// while the directory goes on serving (it never waits on another actor).
func (e *Engine) ArchiveProject(u *DashboardUser, accountID, projectID string) ([]byte, *apierr.Error) {
	r := e.askDirectory(func(a *directoryActor, respond func(Reply)) {
		w, role, err := a.membership(u.UserID, accountID)
		if err != nil {
			respond(Reply{Err: err})
			return
		}
		h, _, err := e.projectInAccount(u, accountID, projectID)
		if err != nil {
			respond(Reply{Err: err})
			return
		}
		if role != RoleOwner {
			respond(Reply{Err: apierr.New(apierr.PermissionDenied, "only owners can archive projects").WithDetails("role", role)})
			return
		}
		if a.archiving[projectID] {
			respond(Reply{Err: apierr.New(apierr.Conflict, "the project is being archived; retry shortly").WithDetails("reason", "archive_in_progress")})
			return
		}
		if p := h.gate.Record.Load(); p != nil && p.Status == ProjectActive {
			active := 0
			for _, id := range w.ProjectIDs {
				if gate, ok := a.env.Registry.ProjectGate(id); ok && !a.archiving[id] {
					if p := gate.Record.Load(); p != nil && p.Status == ProjectActive {
						active++
					}
				}
			}
			if active <= 1 {
				respond(Reply{Err: apierr.New(apierr.LastProject, "a workspace keeps at least one active project; create another before archiving this one")})
				return
			}
		}
		a.archiving[projectID] = true
		a.env.Registry.Request(ProjectAddress(h.gate.Record.Load().ID), archiveProject{user: *u}, func(r Reply) {
			// The project always answers (a stopped one through the dead
			// letter handler), so the mark is always cleared.
			e.tellDirectory(func(a *directoryActor) { delete(a.archiving, projectID) })
			if r.Gone {
				r = Reply{Err: errUnavailable}
			}
			respond(r)
		})
	})
	return r.Body, r.Err
}

// --- members -------------------------------------------------------------------

func (a *directoryActor) memberView(w *Workspace, userID string) MemberView {
	u, m := a.state.Users[userID], w.Members[userID]
	return MemberView{Object: "member", UserID: userID, Email: u.Email, Name: u.Name, Role: m.Role, JoinedAt: Timestamp(m.JoinedAt)}
}

// ListMembers lists a workspace's members, newest first (any member).
func (e *Engine) ListMembers(u *DashboardUser, accountID string, limit int) ([]byte, *apierr.Error) {
	r := e.askDirectory(func(a *directoryActor, respond func(Reply)) {
		w, _, err := a.membership(u.UserID, accountID)
		if err != nil {
			respond(Reply{Err: err})
			return
		}
		uids := make([]string, 0, len(w.Members))
		for uid := range w.Members {
			uids = append(uids, uid)
		}
		sort.Slice(uids, func(i, j int) bool {
			ti, tj := w.Members[uids[i]].JoinedAt, w.Members[uids[j]].JoinedAt
			return ti.After(tj) || ti.Equal(tj) && uids[i] > uids[j]
		})
		records := make([][]byte, 0, min(len(uids), limit+1))
		for _, uid := range uids[:min(len(uids), limit+1)] {
			records = append(records, mustJSON(a.memberView(w, uid)))
		}
		respond(Reply{Status: 200, Body: pageOf(records, limit)})
	})
	return r.Body, r.Err
}

func validRole(role string) bool { return role == RoleOwner || role == RoleAdmin || role == RoleMember }

func errNoMember(id string) *apierr.Error {
	return apierr.New(apierr.InvalidRequest, "no member %q in this workspace", id).WithDetails("reason", "member_not_found").WithStatus(404)
}

var errLastOwner = apierr.New(apierr.Conflict, "a workspace always keeps an owner; make another member owner first").
	WithDetails("reason", "last_owner")

// UpdateMember changes a member's role (owners and admins; only owners
// grant or take the owner role).
func (e *Engine) UpdateMember(u *DashboardUser, accountID, userID string, p *MemberParams) ([]byte, *apierr.Error) {
	if p.Role == nil || !validRole(*p.Role) {
		return nil, apierr.Invalid("role", "role must be one of owner, admin, member")
	}
	role := *p.Role
	r := e.askDirectory(func(a *directoryActor, respond func(Reply)) {
		w, callerRole, err := a.manager(u.UserID, accountID, "change roles")
		if err != nil {
			respond(Reply{Err: err})
			return
		}
		m, ok := w.Members[userID]
		if !ok {
			respond(Reply{Err: errNoMember(userID)})
			return
		}
		if (role == RoleOwner || m.Role == RoleOwner) && callerRole != RoleOwner {
			respond(Reply{Err: apierr.New(apierr.PermissionDenied, "only owners can grant or take the owner role").WithDetails("role", callerRole)})
			return
		}
		if m.Role == role {
			respond(Reply{Status: 200, Body: mustJSON(a.memberView(w, userID))})
			return
		}
		if m.Role == RoleOwner && w.ownerCount() == 1 {
			respond(Reply{Err: errLastOwner})
			return
		}
		from := m.Role
		b := a.env.Store.NewBatch()
		events := []directoryEvent{{MemberSet: &memberSet{AccountID: w.ID, UserID: userID, Role: role, At: a.env.Clock.Now()}}}
		if role == RoleMember {
			events = append(events, a.dropInvitationsBy(b, w, userID, u)...)
		}
		a.record(b, events...)
		a.env.Audit.Account(b, w.ID, u, "member.role_changed", AuditTarget{Type: "user", ID: userID}, map[string]any{"from": from, "to": role})
		body := mustJSON(a.memberView(w, userID))
		a.publishRoles() // at once: a demotion takes effect before it is durable
		a.env.Store.Commit(b, func() { respond(Reply{Status: 200, Body: body}) })
	})
	return r.Body, r.Err
}

// RemoveMember removes a member (owners and admins; anyone may leave).
// Admins cannot remove owners, and the last owner cannot go.
func (e *Engine) RemoveMember(u *DashboardUser, accountID, userID string) ([]byte, *apierr.Error) {
	r := e.askDirectory(func(a *directoryActor, respond func(Reply)) {
		w, callerRole, err := a.membership(u.UserID, accountID)
		if err != nil {
			respond(Reply{Err: err})
			return
		}
		self := userID == u.UserID
		if !self && callerRole != RoleOwner && callerRole != RoleAdmin {
			respond(Reply{Err: apierr.New(apierr.PermissionDenied, "only owners and admins can remove members").WithDetails("role", callerRole)})
			return
		}
		m, ok := w.Members[userID]
		if !ok {
			respond(Reply{Err: errNoMember(userID)})
			return
		}
		if m.Role == RoleOwner && !self && callerRole != RoleOwner {
			respond(Reply{Err: apierr.New(apierr.PermissionDenied, "only owners can remove an owner").WithDetails("role", callerRole)})
			return
		}
		if m.Role == RoleOwner && w.ownerCount() == 1 {
			respond(Reply{Err: errLastOwner})
			return
		}
		body := mustJSON(a.memberView(w, userID))
		b := a.env.Store.NewBatch()
		events := append(a.dropInvitationsBy(b, w, userID, u), directoryEvent{MemberRemoved: &memberRemoved{AccountID: w.ID, UserID: userID}})
		a.record(b, events...)
		a.env.Audit.Account(b, w.ID, u, "member.removed", AuditTarget{Type: "user", ID: userID}, map[string]any{"role": m.Role})
		a.publishRoles() // at once: failing safe
		a.env.Store.Commit(b, func() { respond(Reply{Status: 200, Body: body}) })
	})
	return r.Body, r.Err
}

// --- invitations ---------------------------------------------------------------

// dropInvitationsBy revokes the pending invitations userID sent in w: an
// invitation carries its sender's authority, which ends when they leave or
// become a plain member. It returns the events and adds the audits to b.
func (a *directoryActor) dropInvitationsBy(b *persistence.Batch, w *Workspace, userID string, u *DashboardUser) []directoryEvent {
	now := a.env.Clock.Now()
	var ids []string
	for id, inv := range w.Invitations {
		if inv.InvitedBy == userID && inv.statusAt(now) == InvitationPending {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids) // a deterministic journal
	events := make([]directoryEvent, 0, len(ids))
	for _, id := range ids {
		events = append(events, directoryEvent{InvitationClosed: &invitationClosed{AccountID: w.ID, InvitationID: id, Status: InvitationRevoked, At: now, By: u.UserID}})
		a.env.Audit.Account(b, w.ID, u, "invitation.revoked", AuditTarget{Type: "invitation", ID: id},
			map[string]any{"email": w.Invitations[id].Email, "reason": "inviter_lost_role"})
	}
	return events
}

// invitationRate is the 429 of an hourly invitation limit, with the wait
// until the oldest creation in the window leaves it.
func invitationRate(what string, limit int, times []time.Time, now time.Time) *apierr.Error {
	oldest := times[0]
	for _, t := range times {
		if t.Before(oldest) {
			oldest = t
		}
	}
	wait := int(oldest.Add(time.Hour).Sub(now)/time.Second) + 1
	err := apierr.New(apierr.RateLimited, "rate limit for %s exceeded (%d per hour)", what, limit).
		WithDetails("limit_name", what, "limit_per_hour", limit, "retry_after_seconds", wait)
	err.RetryAfterSeconds = wait
	err.RateLimit = limit
	return err
}

// CreateInvitation invites an e-mail address to a workspace (owners and
// admins) and mails it the link. A pending invitation to the same address
// is replaced.
func (e *Engine) CreateInvitation(u *DashboardUser, accountID string, p *InvitationParams) ([]byte, *apierr.Error) {
	if p.Email == nil {
		return nil, apierr.Invalid("email", "email is required")
	}
	email, ok := deliverableEmail(*p.Email)
	if !ok {
		return nil, apierr.Invalid("email", "email must be an e-mail address")
	}
	role := RoleMember
	if p.Role != nil {
		if *p.Role != RoleAdmin && *p.Role != RoleMember {
			return nil, apierr.Invalid("role", "role must be admin or member; make someone owner once they joined")
		}
		role = *p.Role
	}
	token, terr := auth.NewDashboardSecret(auth.InvitationTokenPrefix)
	if terr != nil {
		return nil, apierr.New(apierr.Internal, "could not create an invitation")
	}
	hash := hexHash(e.env.Keys.HashDashboardSecret(token))
	r := e.askDirectory(func(a *directoryActor, respond func(Reply)) {
		w, _, err := a.manager(u.UserID, accountID, "invite people")
		if err != nil {
			respond(Reply{Err: err})
			return
		}
		if uid, ok := a.state.byEmail[email]; ok {
			if _, member := w.Members[uid]; member {
				respond(Reply{Err: apierr.New(apierr.Conflict, "%s is already a member of this workspace", email).WithDetails("reason", "already_member")})
				return
			}
		}
		now := a.env.CreatedAt()
		var open, replaced []*Invitation
		var accountHour, userHour []time.Time
		for _, inv := range w.Invitations {
			if now.Sub(inv.CreatedAt) < time.Hour {
				accountHour = append(accountHour, inv.CreatedAt)
			}
			if inv.statusAt(now) == InvitationPending {
				open = append(open, inv)
				if inv.Email == email {
					replaced = append(replaced, inv)
				}
			}
		}
		for _, other := range a.state.Workspaces {
			for _, inv := range other.Invitations {
				if inv.InvitedBy == u.UserID && now.Sub(inv.CreatedAt) < time.Hour {
					userHour = append(userHour, inv.CreatedAt)
				}
			}
		}
		if len(accountHour) >= InvitationsPerHourPerAccount {
			respond(Reply{Err: invitationRate("invitations_per_hour_per_account", InvitationsPerHourPerAccount, accountHour, now)})
			return
		}
		if len(userHour) >= InvitationsPerHourPerUser {
			respond(Reply{Err: invitationRate("invitations_per_hour_per_user", InvitationsPerHourPerUser, userHour, now)})
			return
		}
		if len(open)-len(replaced) >= MaxOpenInvitationsPerAccount {
			respond(Reply{Err: apierr.New(apierr.QuotaExceeded, "a workspace can have at most %d open invitations; revoke one first", MaxOpenInvitationsPerAccount).
				WithDetails("limit_name", "open_invitations_per_account", "limit", MaxOpenInvitationsPerAccount)})
			return
		}
		if len(w.Members)+len(open)-len(replaced) >= MaxMembersPerAccount {
			respond(Reply{Err: apierr.New(apierr.QuotaExceeded, "a workspace can have at most %d members, open invitations included", MaxMembersPerAccount).
				WithDetails("limit_name", "members_per_account", "limit", MaxMembersPerAccount)})
			return
		}
		inv := Invitation{ID: ids.New(ids.Invitation), AccountID: w.ID, Email: email, Role: role, Status: InvitationPending,
			Hash: hash, InvitedBy: u.UserID, CreatedAt: now, ExpiresAt: now.Add(InvitationTTL)}
		b := a.env.Store.NewBatch()
		var events []directoryEvent
		for _, old := range replaced {
			events = append(events, directoryEvent{InvitationClosed: &invitationClosed{AccountID: w.ID, InvitationID: old.ID, Status: InvitationRevoked, At: now}})
			a.env.Audit.Account(b, w.ID, u, "invitation.revoked", AuditTarget{Type: "invitation", ID: old.ID}, map[string]any{"email": old.Email, "reason": "replaced"})
		}
		events = append(events, directoryEvent{InvitationCreated: &inv})
		a.record(b, events...)
		a.env.Audit.Account(b, w.ID, u, "invitation.created", AuditTarget{Type: "invitation", ID: inv.ID}, map[string]any{"email": email, "role": role})
		inviter := a.state.Users[u.UserID]
		from := inviter.Email
		if inviter.Name != "" {
			from = inviter.Name + " (" + inviter.Email + ")"
		}
		msg := e.invitationMail(email, token, w.Name, from, inv.ExpiresAt)
		body := mustJSON(inv.view(now))
		a.env.Store.Commit(b, func() {
			e.enqueueMail(msg)
			respond(Reply{Status: 201, Body: body})
		})
	})
	return r.Body, r.Err
}

// ListInvitations lists a workspace's invitations, newest first (owners and
// admins); closed ones stay listed for closedInvitationRetention.
func (e *Engine) ListInvitations(u *DashboardUser, accountID string, limit int) ([]byte, *apierr.Error) {
	r := e.askDirectory(func(a *directoryActor, respond func(Reply)) {
		w, _, err := a.manager(u.UserID, accountID, "see invitations")
		if err != nil {
			respond(Reply{Err: err})
			return
		}
		invs := make([]*Invitation, 0, len(w.Invitations))
		for _, inv := range w.Invitations {
			invs = append(invs, inv)
		}
		sort.Slice(invs, func(i, j int) bool {
			return invs[i].CreatedAt.After(invs[j].CreatedAt) || invs[i].CreatedAt.Equal(invs[j].CreatedAt) && invs[i].ID > invs[j].ID
		})
		now := a.env.Clock.Now()
		records := make([][]byte, 0, min(len(invs), limit+1))
		for _, inv := range invs[:min(len(invs), limit+1)] {
			records = append(records, mustJSON(inv.view(now)))
		}
		respond(Reply{Status: 200, Body: pageOf(records, limit)})
	})
	return r.Body, r.Err
}

// RevokeInvitation revokes a pending invitation (owners and admins);
// idempotent for one already closed.
func (e *Engine) RevokeInvitation(u *DashboardUser, accountID, invitationID string) ([]byte, *apierr.Error) {
	r := e.askDirectory(func(a *directoryActor, respond func(Reply)) {
		w, _, err := a.manager(u.UserID, accountID, "revoke invitations")
		if err != nil {
			respond(Reply{Err: err})
			return
		}
		inv, ok := w.Invitations[invitationID]
		if !ok {
			respond(Reply{Err: apierr.New(apierr.InvalidRequest, "no invitation %q in this workspace", invitationID).
				WithDetails("reason", "invitation_not_found").WithStatus(404)})
			return
		}
		now := a.env.Clock.Now()
		if inv.statusAt(now) != InvitationPending {
			respond(Reply{Status: 200, Body: mustJSON(inv.view(now))})
			return
		}
		b := a.env.Store.NewBatch()
		a.record(b, directoryEvent{InvitationClosed: &invitationClosed{AccountID: w.ID, InvitationID: inv.ID, Status: InvitationRevoked, At: now}})
		a.env.Audit.Account(b, w.ID, u, "invitation.revoked", AuditTarget{Type: "invitation", ID: inv.ID}, map[string]any{"email": inv.Email})
		body := mustJSON(inv.view(now))
		a.env.Store.Commit(b, func() { respond(Reply{Status: 200, Body: body}) })
	})
	return r.Body, r.Err
}

// InvitationAcceptance answers POST /v1/invitations/accept.
type InvitationAcceptance struct {
	Object        string      `json:"object"`
	InvitationID  string      `json:"invitation_id"`
	JoinedAccount AccountView `json:"joined_account"`
}

var errBadInvitation = apierr.New(apierr.InvalidRequest, "the invitation is invalid, expired, revoked or already used").
	WithDetails("reason", "invitation_invalid").WithStatus(404)

// AcceptInvitation adds the signed-in user to the invitation's workspace;
// the invitation must be addressed to the user's e-mail.
func (e *Engine) AcceptInvitation(u *DashboardUser, p *AcceptParams) ([]byte, *apierr.Error) {
	if p.InvitationToken == nil {
		return nil, apierr.Invalid("invitation_token", "invitation_token is required")
	}
	if !auth.CheckDashboardSecretFormat(auth.InvitationTokenPrefix, *p.InvitationToken) {
		return nil, errBadInvitation
	}
	hash := hexHash(e.env.Keys.HashDashboardSecret(*p.InvitationToken))
	r := e.askDirectory(func(a *directoryActor, respond func(Reply)) {
		now := a.env.Clock.Now()
		inv, ok := a.state.invitations[hash]
		user, uok := a.state.Users[u.UserID]
		if !uok {
			respond(Reply{Err: errBadSession})
			return
		}
		if !ok || inv.statusAt(now) != InvitationPending {
			respond(Reply{Err: errBadInvitation})
			return
		}
		if inv.Email != user.Email {
			respond(Reply{Err: apierr.New(apierr.PermissionDenied, "this invitation is addressed to another e-mail address; sign in as that address to accept it").
				WithDetails("reason", "invitation_email_mismatch")})
			return
		}
		w := a.state.Workspaces[inv.AccountID]
		_, member := w.Members[user.ID]
		if !member && len(w.Members) >= MaxMembersPerAccount {
			respond(Reply{Err: apierr.New(apierr.QuotaExceeded, "the workspace has %d members, the maximum", MaxMembersPerAccount).
				WithDetails("limit_name", "members_per_account", "limit", MaxMembersPerAccount)})
			return
		}
		b := a.env.Store.NewBatch()
		events := []directoryEvent{{InvitationClosed: &invitationClosed{AccountID: w.ID, InvitationID: inv.ID, Status: InvitationAccepted, At: now, By: user.ID}}}
		if !member {
			events = append(events, directoryEvent{MemberSet: &memberSet{AccountID: w.ID, UserID: user.ID, Role: inv.Role, At: now}})
			a.env.Audit.Account(b, w.ID, u, "member.added", AuditTarget{Type: "user", ID: user.ID}, map[string]any{"role": inv.Role, "invitation_id": inv.ID})
		}
		a.env.Audit.Account(b, w.ID, u, "invitation.accepted", AuditTarget{Type: "invitation", ID: inv.ID}, map[string]any{"email": inv.Email})
		a.record(b, events...)
		body := mustJSON(InvitationAcceptance{Object: "invitation_acceptance", InvitationID: inv.ID,
			JoinedAccount: a.accountView(w, w.Members[user.ID].Role)})
		a.commitAndStart(b, func() {}, true, Reply{Status: 200, Body: body}, respond)
	})
	return r.Body, r.Err
}
