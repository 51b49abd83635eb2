package directory

import (
	"sort"
	"time"

	"rtcd/actors/core"
	"rtcd/actors/project"
	"rtcd/apierr"
	"rtcd/ids"
)

// The directory's commands: plain values the engine sends in an Envelope,
// each handled by one method below on the directory's goroutine. Checks
// that need no state (field rules, token formats, rate limits per source
// address) ran before the command was sent.
type (
	// StartSignIn records a sign-in link for Email (Hash is its token's
	// keyed hash). Deliverable says whether mail can go to the address.
	StartSignIn struct {
		Email, Hash, InvitationHash string
		Deliverable                 bool
	}
	// PeekSignIn reads the link with token hash Hash.
	PeekSignIn struct{ Hash string }
	// VerifySignIn exchanges the link with token hash Hash for a new
	// session (made by the caller: SessionToken and its hash).
	VerifySignIn struct {
		Hash, SessionToken, SessionHash string
		RequestID, SourceIP             string
	}
	// SignInWithGoogle signs in a verified Google identity (Email is its
	// normalized address, Name its checked display name).
	SignInWithGoogle struct {
		Identity                    GoogleIdentity
		Email, Name, InvitationHash string
		SessionToken, SessionHash   string
		RequestID, SourceIP         string
	}
	// EndSessions ends User's session, or all of User's sessions.
	EndSessions struct {
		User core.DashboardUser
		All  bool
	}
	ReadMe     struct{ User core.DashboardUser }
	RenameUser struct {
		User core.DashboardUser
		Name string
	}
	CreateAccount struct {
		User core.DashboardUser
		Name string
	}
	RenameAccount struct {
		User            core.DashboardUser
		AccountID, Name string
	}
	CreateProject struct {
		User            core.DashboardUser
		AccountID, Name string
	}
	ArchiveProject struct {
		User                 core.DashboardUser
		AccountID, ProjectID string
	}
	ListMembers struct {
		User      core.DashboardUser
		AccountID string
		Limit     int
	}
	UpdateMember struct {
		User                    core.DashboardUser
		AccountID, UserID, Role string
	}
	RemoveMember struct {
		User              core.DashboardUser
		AccountID, UserID string
	}
	// CreateInvitation invites Email (Hash is the keyed hash of the token
	// the caller made and will mail).
	CreateInvitation struct {
		User                         core.DashboardUser
		AccountID, Email, Role, Hash string
	}
	ListInvitations struct {
		User      core.DashboardUser
		AccountID string
		Limit     int
	}
	RevokeInvitation struct {
		User                    core.DashboardUser
		AccountID, InvitationID string
	}
	// AcceptInvitation accepts, for User, the invitation whose token hash
	// is Hash.
	AcceptInvitation struct {
		User core.DashboardUser
		Hash string
	}
	// ReadState answers the directory's state as its snapshot encodes it
	// (Reply.Value, []byte): for tests, the crash simulation and
	// debugging, never for a request.
	ReadState struct{}

	// archiveDone is the directory's own note that a project's archive
	// was answered, so the project no longer counts as being archived.
	archiveDone struct{ projectID string }
)

// Mail a command's answer asks the engine to send. The answer comes only
// once the change is durable, so only durable links and invitations are
// ever mailed; the engine queues the mail (never blocking) and answers.
type (
	// SignInMail is the sign-in link mail for a StartSignIn.
	SignInMail struct {
		To        string
		ExpiresAt time.Time
	}
	// InvitationMail is the mail of a CreateInvitation.
	InvitationMail struct {
		To, Workspace, Inviter string // Inviter: name and address, as the mail shows them
		ExpiresAt              time.Time
	}
)

// handle runs one directory command.
func (a *directoryActor) handle(req *core.Envelope) {
	switch c := req.Msg.(type) {
	case StartSignIn:
		a.startSignIn(c, req)
	case PeekSignIn:
		a.peekSignIn(c, req)
	case VerifySignIn:
		a.verifySignIn(c, req)
	case SignInWithGoogle:
		a.signInWithGoogle(c, req)
	case EndSessions:
		a.endSessions(c, req)
	case ReadMe:
		a.readMe(c, req)
	case RenameUser:
		a.renameUser(c, req)
	case CreateAccount:
		a.createAccount(c, req)
	case RenameAccount:
		a.renameAccount(c, req)
	case CreateProject:
		a.createProject(c, req)
	case ArchiveProject:
		a.archiveProject(c, req)
	case ListMembers:
		a.listMembers(c, req)
	case UpdateMember:
		a.updateMember(c, req)
	case RemoveMember:
		a.removeMember(c, req)
	case CreateInvitation:
		a.createInvitation(c, req)
	case ListInvitations:
		a.listInvitations(c, req)
	case RevokeInvitation:
		a.revokeInvitation(c, req)
	case AcceptInvitation:
		a.acceptInvitation(c, req)
	case ReadState:
		req.Respond(core.Reply{Value: core.Encode(a.state)})
	default:
		core.RefuseUnknown(req)
	}
}

// projectIn is projectID when it belongs to w; anything else is the 404.
func (a *directoryActor) projectIn(w *Workspace, projectID string) (project.ProjectView, *apierr.Error) {
	if !ids.Valid(projectID, ids.Project) {
		return project.ProjectView{}, ErrNoProject(projectID)
	}
	p, ok := a.projects(projectID)
	if !ok || p.AccountID != w.ID {
		return project.ProjectView{}, ErrNoProject(projectID)
	}
	return p, nil
}

// createProject creates a project in a workspace (owners and admins): its p/ key and
// first snapshot, project_added and the wa/ entry in one batch; the
// project actor starts before the answer.
func (a *directoryActor) createProject(c CreateProject, req *core.Envelope) {
	u, accountID, name := &c.User, c.AccountID, c.Name
	w, _, err := a.manager(u.UserID, accountID, "create projects")
	if err != nil {
		req.Respond(core.Reply{Err: err})
		return
	}
	if len(w.ProjectIDs) >= MaxProjectsPerAccount {
		req.Respond(core.Reply{Err: apierr.New(apierr.QuotaExceeded, "a workspace can have at most %d projects, archived ones included", MaxProjectsPerAccount).
			WithDetails("limit_name", "projects_per_account", "limit", MaxProjectsPerAccount)})
		return
	}
	now := a.env.CreatedAt()
	proj := core.Project{ID: ids.New(ids.Project), AccountID: w.ID, Name: name, Status: core.ProjectActive, CreatedAt: now}
	b := a.env.Store.NewBatch()
	project.Genesis(b, proj, nil)
	a.record(b, directoryEvent{ProjectAdded: &workspaceProject{AccountID: w.ID, ProjectID: proj.ID}})
	a.env.Audit.Account(b, w.ID, u, "project.created", core.AuditTarget{Type: "project", ID: proj.ID}, map[string]any{"name": name})
	body := core.MustJSON(project.ViewOf(&proj))
	a.commitAndStart(b, func() {
		a.env.Registry.SpawnProject(proj.ID, &proj, nil) // its snapshot was just written: nobody waits on it
	}, false, core.Reply{Status: 201, Body: body}, req.Respond)
}

// archiveProject checks the last-project rule and who may (owners), marks the
// project as being archived, so that two archives in one workspace cannot
// both pass the check, and hands the archive to the project actor: the
// directory never waits on another actor, so one slow project cannot hold
// sign-ins. The project's answer is relayed to the caller, and
// archiveDone clears the mark.
func (a *directoryActor) archiveProject(c ArchiveProject, req *core.Envelope) {
	u, accountID, projectID := &c.User, c.AccountID, c.ProjectID
	w, role, err := a.membership(u.UserID, accountID)
	if err != nil {
		req.Respond(core.Reply{Err: err})
		return
	}
	p, err := a.projectIn(w, projectID)
	if err != nil {
		req.Respond(core.Reply{Err: err})
		return
	}
	if role != RoleOwner {
		req.Respond(core.Reply{Err: apierr.New(apierr.PermissionDenied, "only owners can archive projects").WithDetails("role", role)})
		return
	}
	if a.archiving[projectID] {
		req.Respond(core.Reply{Err: apierr.New(apierr.Conflict, "the project is being archived; retry shortly").WithDetails("reason", "archive_in_progress")})
		return
	}
	if p.Status == core.ProjectActive {
		active := 0
		for _, id := range w.ProjectIDs {
			if p, ok := a.projects(id); ok && !a.archiving[id] && p.Status == core.ProjectActive {
				active++
			}
		}
		if active <= 1 {
			req.Respond(core.Reply{Err: apierr.New(apierr.LastProject, "a workspace keeps at least one active project; create another before archiving this one")})
			return
		}
	}
	a.archiving[projectID] = true
	registry := a.env.Registry
	registry.Request(core.ProjectAddress(projectID), core.ArchiveProject{User: *u}, func(r core.Reply) {
		// The project always answers (a stopped one through the dead
		// letter handler), so the mark is always cleared.
		registry.Send(core.DirectoryAddress(), archiveDone{projectID: projectID})
		if r.Gone {
			r = core.Reply{Err: core.ErrUnavailable}
		}
		req.Respond(r)
	})
}

// listMembers lists a workspace's members, newest first (any member).
func (a *directoryActor) listMembers(c ListMembers, req *core.Envelope) {
	u, accountID, limit := &c.User, c.AccountID, c.Limit
	w, _, err := a.membership(u.UserID, accountID)
	if err != nil {
		req.Respond(core.Reply{Err: err})
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
		records = append(records, core.MustJSON(a.memberView(w, uid)))
	}
	req.Respond(core.Reply{Status: 200, Body: pageOf(records, limit)})
}

// updateMember changes a member's role (owners and admins; only owners grant or
// take the owner role).
func (a *directoryActor) updateMember(c UpdateMember, req *core.Envelope) {
	u, accountID, userID, role := &c.User, c.AccountID, c.UserID, c.Role
	w, callerRole, err := a.manager(u.UserID, accountID, "change roles")
	if err != nil {
		req.Respond(core.Reply{Err: err})
		return
	}
	m, ok := w.Members[userID]
	if !ok {
		req.Respond(core.Reply{Err: errNoMember(userID)})
		return
	}
	if (role == RoleOwner || m.Role == RoleOwner) && callerRole != RoleOwner {
		req.Respond(core.Reply{Err: apierr.New(apierr.PermissionDenied, "only owners can grant or take the owner role").WithDetails("role", callerRole)})
		return
	}
	if m.Role == role {
		req.Respond(core.Reply{Status: 200, Body: core.MustJSON(a.memberView(w, userID))})
		return
	}
	if m.Role == RoleOwner && w.ownerCount() == 1 {
		req.Respond(core.Reply{Err: errLastOwner})
		return
	}
	from := m.Role
	b := a.env.Store.NewBatch()
	events := []directoryEvent{{MemberSet: &memberSet{AccountID: w.ID, UserID: userID, Role: role, At: a.env.Clock.Now()}}}
	if role == RoleMember {
		events = append(events, a.dropInvitationsBy(b, w, userID, u)...)
	}
	a.record(b, events...)
	a.env.Audit.Account(b, w.ID, u, "member.role_changed", core.AuditTarget{Type: "user", ID: userID}, map[string]any{"from": from, "to": role})
	body := core.MustJSON(a.memberView(w, userID))
	a.publishRoles() // at once: a demotion takes effect before it is durable
	a.env.Store.Commit(b, func() { req.Respond(core.Reply{Status: 200, Body: body}) })
}

// removeMember removes a member (owners and admins; anyone may leave). Admins
// cannot remove owners, and the last owner cannot go.
func (a *directoryActor) removeMember(c RemoveMember, req *core.Envelope) {
	u, accountID, userID := &c.User, c.AccountID, c.UserID
	w, callerRole, err := a.membership(u.UserID, accountID)
	if err != nil {
		req.Respond(core.Reply{Err: err})
		return
	}
	self := userID == u.UserID
	if !self && callerRole != RoleOwner && callerRole != RoleAdmin {
		req.Respond(core.Reply{Err: apierr.New(apierr.PermissionDenied, "only owners and admins can remove members").WithDetails("role", callerRole)})
		return
	}
	m, ok := w.Members[userID]
	if !ok {
		req.Respond(core.Reply{Err: errNoMember(userID)})
		return
	}
	if m.Role == RoleOwner && !self && callerRole != RoleOwner {
		req.Respond(core.Reply{Err: apierr.New(apierr.PermissionDenied, "only owners can remove an owner").WithDetails("role", callerRole)})
		return
	}
	if m.Role == RoleOwner && w.ownerCount() == 1 {
		req.Respond(core.Reply{Err: errLastOwner})
		return
	}
	body := core.MustJSON(a.memberView(w, userID))
	b := a.env.Store.NewBatch()
	events := append(a.dropInvitationsBy(b, w, userID, u), directoryEvent{MemberRemoved: &memberRemoved{AccountID: w.ID, UserID: userID}})
	a.record(b, events...)
	a.env.Audit.Account(b, w.ID, u, "member.removed", core.AuditTarget{Type: "user", ID: userID}, map[string]any{"role": m.Role})
	a.publishRoles() // at once: failing safe
	a.env.Store.Commit(b, func() { req.Respond(core.Reply{Status: 200, Body: body}) })
}

// createInvitation records an invitation (owners and admins), replacing a pending
// one to the same address, and answers, once durable, with the mail to
// send (InvitationMail in Reply.Value).
func (a *directoryActor) createInvitation(c CreateInvitation, req *core.Envelope) {
	u, accountID, email, role, hash := &c.User, c.AccountID, c.Email, c.Role, c.Hash
	w, _, err := a.manager(u.UserID, accountID, "invite people")
	if err != nil {
		req.Respond(core.Reply{Err: err})
		return
	}
	if uid, ok := a.state.byEmail[email]; ok {
		if _, member := w.Members[uid]; member {
			req.Respond(core.Reply{Err: apierr.New(apierr.Conflict, "%s is already a member of this workspace", email).WithDetails("reason", "already_member")})
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
		if inv.StatusAt(now) == InvitationPending {
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
		a.env.Metrics.RateLimits.Rejected("invitations_per_hour_per_account")
		req.Respond(core.Reply{Err: invitationRate("invitations_per_hour_per_account", InvitationsPerHourPerAccount, accountHour, now)})
		return
	}
	if len(userHour) >= InvitationsPerHourPerUser {
		a.env.Metrics.RateLimits.Rejected("invitations_per_hour_per_user")
		req.Respond(core.Reply{Err: invitationRate("invitations_per_hour_per_user", InvitationsPerHourPerUser, userHour, now)})
		return
	}
	if len(open)-len(replaced) >= MaxOpenInvitationsPerAccount {
		req.Respond(core.Reply{Err: apierr.New(apierr.QuotaExceeded, "a workspace can have at most %d open invitations; revoke one first", MaxOpenInvitationsPerAccount).
			WithDetails("limit_name", "open_invitations_per_account", "limit", MaxOpenInvitationsPerAccount)})
		return
	}
	if len(w.Members)+len(open)-len(replaced) >= MaxMembersPerAccount {
		req.Respond(core.Reply{Err: apierr.New(apierr.QuotaExceeded, "a workspace can have at most %d members, open invitations included", MaxMembersPerAccount).
			WithDetails("limit_name", "members_per_account", "limit", MaxMembersPerAccount)})
		return
	}
	inv := Invitation{ID: ids.New(ids.Invitation), AccountID: w.ID, Email: email, Role: role, Status: InvitationPending,
		Hash: hash, InvitedBy: u.UserID, CreatedAt: now, ExpiresAt: now.Add(InvitationTTL)}
	b := a.env.Store.NewBatch()
	var events []directoryEvent
	for _, old := range replaced {
		events = append(events, directoryEvent{InvitationClosed: &invitationClosed{AccountID: w.ID, InvitationID: old.ID, Status: InvitationRevoked, At: now}})
		a.env.Audit.Account(b, w.ID, u, "invitation.revoked", core.AuditTarget{Type: "invitation", ID: old.ID}, map[string]any{"email": old.Email, "reason": "replaced"})
	}
	events = append(events, directoryEvent{InvitationCreated: &inv})
	a.record(b, events...)
	a.env.Audit.Account(b, w.ID, u, "invitation.created", core.AuditTarget{Type: "invitation", ID: inv.ID}, map[string]any{"email": email, "role": role})
	inviter := a.state.Users[u.UserID]
	from := inviter.Email
	if inviter.Name != "" {
		from = inviter.Name + " (" + inviter.Email + ")"
	}
	mail := InvitationMail{To: email, Workspace: w.Name, Inviter: from, ExpiresAt: inv.ExpiresAt}
	body := core.MustJSON(inv.view(now))
	a.env.Store.Commit(b, func() { req.Respond(core.Reply{Status: 201, Body: body, Value: mail}) })
}

// listInvitations lists a workspace's invitations, newest first (owners and
// admins); closed ones stay listed for closedInvitationRetention.
func (a *directoryActor) listInvitations(c ListInvitations, req *core.Envelope) {
	u, accountID, limit := &c.User, c.AccountID, c.Limit
	w, _, err := a.manager(u.UserID, accountID, "see invitations")
	if err != nil {
		req.Respond(core.Reply{Err: err})
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
		records = append(records, core.MustJSON(inv.view(now)))
	}
	req.Respond(core.Reply{Status: 200, Body: pageOf(records, limit)})
}

// revokeInvitation revokes a pending invitation (owners and admins); idempotent
// for one already closed.
func (a *directoryActor) revokeInvitation(c RevokeInvitation, req *core.Envelope) {
	u, accountID, invitationID := &c.User, c.AccountID, c.InvitationID
	w, _, err := a.manager(u.UserID, accountID, "revoke invitations")
	if err != nil {
		req.Respond(core.Reply{Err: err})
		return
	}
	inv, ok := w.Invitations[invitationID]
	if !ok {
		req.Respond(core.Reply{Err: apierr.New(apierr.InvalidRequest, "no invitation %q in this workspace", invitationID).
			WithDetails("reason", "invitation_not_found").WithStatus(404)})
		return
	}
	now := a.env.Clock.Now()
	if inv.StatusAt(now) != InvitationPending {
		req.Respond(core.Reply{Status: 200, Body: core.MustJSON(inv.view(now))})
		return
	}
	b := a.env.Store.NewBatch()
	a.record(b, directoryEvent{InvitationClosed: &invitationClosed{AccountID: w.ID, InvitationID: inv.ID, Status: InvitationRevoked, At: now}})
	a.env.Audit.Account(b, w.ID, u, "invitation.revoked", core.AuditTarget{Type: "invitation", ID: inv.ID}, map[string]any{"email": inv.Email})
	body := core.MustJSON(inv.view(now))
	a.env.Store.Commit(b, func() { req.Respond(core.Reply{Status: 200, Body: body}) })
}

// acceptInvitation adds the signed-in user to the invitation's workspace; the
// invitation must be addressed to the user's e-mail.
func (a *directoryActor) acceptInvitation(c AcceptInvitation, req *core.Envelope) {
	u, hash := &c.User, c.Hash
	now := a.env.Clock.Now()
	inv, ok := a.state.invitations[hash]
	user, uok := a.state.Users[u.UserID]
	if !uok {
		req.Respond(core.Reply{Err: ErrBadSession})
		return
	}
	if !ok || inv.StatusAt(now) != InvitationPending {
		req.Respond(core.Reply{Err: ErrBadInvitation})
		return
	}
	if inv.Email != user.Email {
		req.Respond(core.Reply{Err: apierr.New(apierr.PermissionDenied, "this invitation is addressed to another e-mail address; sign in as that address to accept it").
			WithDetails("reason", "invitation_email_mismatch")})
		return
	}
	w := a.state.Workspaces[inv.AccountID]
	_, member := w.Members[user.ID]
	if !member && len(w.Members) >= MaxMembersPerAccount {
		req.Respond(core.Reply{Err: apierr.New(apierr.QuotaExceeded, "the workspace has %d members, the maximum", MaxMembersPerAccount).
			WithDetails("limit_name", "members_per_account", "limit", MaxMembersPerAccount)})
		return
	}
	b := a.env.Store.NewBatch()
	events := []directoryEvent{{InvitationClosed: &invitationClosed{AccountID: w.ID, InvitationID: inv.ID, Status: InvitationAccepted, At: now, By: user.ID}}}
	if !member {
		events = append(events, directoryEvent{MemberSet: &memberSet{AccountID: w.ID, UserID: user.ID, Role: inv.Role, At: now}})
		a.env.Audit.Account(b, w.ID, u, "member.added", core.AuditTarget{Type: "user", ID: user.ID}, map[string]any{"role": inv.Role, "invitation_id": inv.ID})
	}
	a.env.Audit.Account(b, w.ID, u, "invitation.accepted", core.AuditTarget{Type: "invitation", ID: inv.ID}, map[string]any{"email": inv.Email})
	a.record(b, events...)
	body := core.MustJSON(InvitationAcceptance{Object: "invitation_acceptance", InvitationID: inv.ID,
		JoinedAccount: a.accountView(w, w.Members[user.ID].Role)})
	a.commitAndStart(b, func() {}, true, core.Reply{Status: 200, Body: body}, req.Respond)
}

// peekSignIn tells which address a link is for, without using it.
func (a *directoryActor) peekSignIn(c PeekSignIn, req *core.Envelope) {
	hash := c.Hash
	now := a.env.Clock.Now()
	link, ok := a.state.SignInLinks[hash]
	if !ok || !now.Before(link.ExpiresAt) {
		req.Respond(core.Reply{Err: ErrBadLink})
		return
	}
	v := SignInLinkView{Object: "email_sign_in_link", Email: link.Email, ExpiresAt: core.Timestamp(link.ExpiresAt)}
	if inv := a.usableInvitation(link.InvitationHash, link.Email, now); inv != nil {
		w := a.state.Workspaces[inv.AccountID]
		v.Invitation = &InvitationPeek{AccountID: w.ID, AccountName: w.Name, Role: inv.Role}
	}
	req.Respond(core.Reply{Status: 200, Body: core.MustJSON(v)})
}

// verifySignIn exchanges a link for a session, once: the link is deleted in the
// same step that creates the session.
func (a *directoryActor) verifySignIn(c VerifySignIn, req *core.Envelope) {
	hash, sessionToken, sessionHash, requestID, sourceIP := c.Hash, c.SessionToken, c.SessionHash, c.RequestID, c.SourceIP
	now := a.env.Clock.Now()
	link, ok := a.state.SignInLinks[hash]
	if !ok || !now.Before(link.ExpiresAt) {
		req.Respond(core.Reply{Err: ErrBadLink})
		return
	}
	b := a.env.Store.NewBatch()
	a.record(b, directoryEvent{SignInLinksDropped: &signInLinksDropped{Hashes: []string{hash}}})
	start, view := a.completeSignIn(b, signInRequest{
		email: link.Email, method: "email", invitationHash: link.InvitationHash,
		sessionToken: sessionToken, sessionHash: sessionHash,
		user: &core.DashboardUser{RequestID: requestID, SourceIP: sourceIP},
	}, now)
	a.commitAndStart(b, start, view.JoinedAccount != nil || view.CreatedAccount != nil, core.Reply{Status: 200, Body: core.MustJSON(view)}, req.Respond)
}

// signInWithGoogle creates a session for a verified Google identity, joining the
// workspace of an invitation addressed to its e-mail.
func (a *directoryActor) signInWithGoogle(c SignInWithGoogle, req *core.Envelope) {
	id, email, name, invitationHash, sessionToken, sessionHash, requestID, sourceIP := c.Identity, c.Email, c.Name, c.InvitationHash, c.SessionToken, c.SessionHash, c.RequestID, c.SourceIP
	// Users are keyed on the provider's subject: an address already
	// linked to another Google account (addresses get reused) does
	// not sign in to it.
	if _, linked := a.state.byGoogle[id.Subject]; !linked {
		if uid, ok := a.state.byEmail[email]; ok && a.state.Users[uid].GoogleSubject != "" {
			req.Respond(core.Reply{Err: apierr.New(apierr.AuthenticationFailed, "this e-mail address is linked to another Google account; sign in with that account or by e-mail link")})
			return
		}
	}
	b := a.env.Store.NewBatch()
	start, view := a.completeSignIn(b, signInRequest{
		email: email, googleSubject: id.Subject, name: name, method: "google", invitationHash: invitationHash,
		sessionToken: sessionToken, sessionHash: sessionHash,
		user: &core.DashboardUser{RequestID: requestID, SourceIP: sourceIP},
	}, a.env.Clock.Now())
	a.commitAndStart(b, start, view.JoinedAccount != nil || view.CreatedAccount != nil, core.Reply{Status: 200, Body: core.MustJSON(view)}, req.Respond)
}

// endSessions ends the request's session, or every session of the user,
// withdrawing them from authentication at once.
func (a *directoryActor) endSessions(c EndSessions, req *core.Envelope) {
	u, all := &c.User, c.All
	hashes := []string{u.SessionHash}
	if all {
		hashes = hashes[:0]
		for h := range a.state.userSessions[u.UserID] {
			hashes = append(hashes, h)
		}
	}
	var live []string
	for _, h := range hashes {
		if _, ok := a.state.Sessions[h]; ok {
			live = append(live, h)
		}
	}
	a.unpublishSessions(hashes) // at once, before durable: failing safe
	if len(live) == 0 {
		// Already ended, perhaps by a batch still on its way to disk (a
		// concurrent logout): answer once that is durable.
		a.env.Store.AfterDurable(func() { req.Respond(core.Reply{}) })
		return
	}
	b := a.env.Store.NewBatch()
	a.record(b, directoryEvent{SessionsEnded: &sessionsEnded{Hashes: live}})
	a.env.Store.Commit(b, func() { req.Respond(core.Reply{}) })
}

// readMe answers GET /v1/me.
func (a *directoryActor) readMe(c ReadMe, req *core.Envelope) {
	u := &c.User
	if _, ok := a.state.Users[u.UserID]; !ok {
		req.Respond(core.Reply{Err: ErrBadSession})
		return
	}
	req.Respond(core.Reply{Status: 200, Body: a.me(u.UserID)})
}

// renameUser changes the user's display name.
func (a *directoryActor) renameUser(c RenameUser, req *core.Envelope) {
	u, name := &c.User, c.Name
	if _, ok := a.state.Users[u.UserID]; !ok {
		req.Respond(core.Reply{Err: ErrBadSession})
		return
	}
	b := a.env.Store.NewBatch()
	a.record(b, directoryEvent{UserUpdated: &userUpdated{UserID: u.UserID, Name: name}})
	body := a.me(u.UserID)
	a.env.Store.Commit(b, func() { req.Respond(core.Reply{Status: 200, Body: body}) })
}

// createAccount creates another workspace owned by the user, with a first
// project.
func (a *directoryActor) createAccount(c CreateAccount, req *core.Envelope) {
	u, name := &c.User, c.Name
	if n := a.ownedCount(u.UserID); n >= MaxOwnedAccountsPerUser {
		req.Respond(core.Reply{Err: apierr.New(apierr.QuotaExceeded, "a user can own at most %d workspaces", MaxOwnedAccountsPerUser).
			WithDetails("limit_name", "owned_accounts_per_user", "limit", MaxOwnedAccountsPerUser)})
		return
	}
	now := a.env.CreatedAt()
	b := a.env.Store.NewBatch()
	view, events, start := a.newWorkspace(b, u.UserID, name, u, now)
	a.record(b, events...)
	a.commitAndStart(b, start, true, core.Reply{Status: 201, Body: core.MustJSON(view)}, req.Respond)
}

// renameAccount renames a workspace (owners and admins).
func (a *directoryActor) renameAccount(c RenameAccount, req *core.Envelope) {
	u, accountID, name := &c.User, c.AccountID, c.Name
	w, role, err := a.manager(u.UserID, accountID, "rename a workspace")
	if err != nil {
		req.Respond(core.Reply{Err: err})
		return
	}
	b := a.env.Store.NewBatch()
	old := w.Name
	a.record(b, directoryEvent{WorkspaceRenamed: &workspaceRenamed{AccountID: w.ID, Name: name}})
	a.env.Audit.Account(b, w.ID, u, "account.renamed", core.AuditTarget{Type: "account", ID: w.ID}, map[string]any{"from": old, "to": name})
	body := core.MustJSON(a.accountView(w, role))
	a.env.Store.Commit(b, func() { req.Respond(core.Reply{Status: 200, Body: body}) })
}
