package directory

import (
	"encoding/hex"
	"sort"
	"strings"
	"time"

	"rtcd/actors/core"
	"rtcd/actors/project"
	"rtcd/actors/wallet"
	"rtcd/apierr"
	"rtcd/ids"
	"rtcd/persistence"
)

// ErrNoAccount is the answer for a workspace the user is not a member of,
// or that does not exist: 404, never 403, so ids do not leak.
func ErrNoAccount(id string) *apierr.Error {
	return apierr.New(apierr.InvalidRequest, "no workspace %q for this user", id).
		WithDetails("reason", "account_not_found").WithStatus(404)
}

func ErrNoProject(id string) *apierr.Error {
	return apierr.New(apierr.InvalidRequest, "no project %q in this workspace", id).
		WithDetails("reason", "project_not_found").WithStatus(404)
}

// --- views -----------------------------------------------------------------

// UserView is a user as the dashboard routes show it.
type UserView struct {
	Object    string `json:"object"`
	ID        string `json:"id"`
	Email     string `json:"email"`
	Name      string `json:"name"`
	CreatedAt string `json:"created_at"`
}

// AccountView is a workspace with the viewer's role and its projects.
type AccountView struct {
	Object    string                `json:"object"`
	ID        string                `json:"id"`
	Name      string                `json:"name"`
	Role      string                `json:"role"`
	CreatedAt string                `json:"created_at"`
	Projects  []project.ProjectView `json:"projects"`
}

// MemberView is one member of a workspace.
type MemberView struct {
	Object   string `json:"object"`
	UserID   string `json:"user_id"`
	Email    string `json:"email"`
	Name     string `json:"name"`
	Role     string `json:"role"`
	JoinedAt string `json:"joined_at"`
}

// InvitationView is an invitation; its token is only ever in the e-mail.
type InvitationView struct {
	Object    string  `json:"object"`
	ID        string  `json:"id"`
	AccountID string  `json:"account_id"`
	Email     string  `json:"email"`
	Role      string  `json:"role"`
	Status    string  `json:"status"`
	InvitedBy string  `json:"invited_by"`
	CreatedAt string  `json:"created_at"`
	ExpiresAt string  `json:"expires_at"`
	ClosedAt  *string `json:"closed_at"`
}

// SessionView answers a sign-in: the session token (shown once), its
// expiry, the user, and the workspace joined through an invitation.
type SessionView struct {
	Object             string       `json:"object"`
	Token              string       `json:"token"`
	ExpiresAt          string       `json:"expires_at"`
	IdleTimeoutSeconds int          `json:"idle_timeout_seconds"`
	User               UserView     `json:"user"`
	JoinedAccount      *AccountView `json:"joined_account"`
	CreatedAccount     *AccountView `json:"created_account"`
}

func (u *User) view() UserView {
	return UserView{Object: "user", ID: u.ID, Email: u.Email, Name: u.Name, CreatedAt: core.Timestamp(u.CreatedAt)}
}

func (inv *Invitation) view(now time.Time) InvitationView {
	return InvitationView{Object: "invitation", ID: inv.ID, AccountID: inv.AccountID, Email: inv.Email, Role: inv.Role,
		Status: inv.StatusAt(now), InvitedBy: inv.InvitedBy, CreatedAt: core.Timestamp(inv.CreatedAt),
		ExpiresAt: core.Timestamp(inv.ExpiresAt), ClosedAt: core.OptionalTimestamp(inv.ClosedAt)}
}

// accountView renders w for a member with role. Project records come from
// a.projects.
func (a *directoryActor) accountView(w *Workspace, role string) AccountView {
	v := AccountView{Object: "account", ID: w.ID, Name: w.Name, Role: role, CreatedAt: core.Timestamp(w.CreatedAt), Projects: []project.ProjectView{}}
	for _, id := range w.ProjectIDs {
		if p, ok := a.projects(id); ok {
			v.Projects = append(v.Projects, p)
		}
	}
	return v
}

// pageOf renders records (newest first) as a page envelope of at most
// limit items, as the stored lists are (pagination rules).
func pageOf(records [][]byte, limit int) []byte {
	hasMore := len(records) > limit
	if hasMore {
		records = records[:limit]
	}
	var b strings.Builder
	b.WriteString(`{"object":"list","data":[`)
	for i, r := range records {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(r)
	}
	if hasMore {
		b.WriteString(`],"page":{"has_more":true}}`)
	} else {
		b.WriteString(`],"page":{"has_more":false}}`)
	}
	return []byte(b.String())
}

// --- shared steps ------------------------------------------------------------

// membership returns the workspace and u's role in it, or the 404.
func (a *directoryActor) membership(userID, accountID string) (*Workspace, string, *apierr.Error) {
	w, ok := a.state.Workspaces[accountID]
	if !ok {
		return nil, "", ErrNoAccount(accountID)
	}
	m, ok := w.Members[userID]
	if !ok {
		return nil, "", ErrNoAccount(accountID)
	}
	return w, m.Role, nil
}

// manager is membership for an operation owners and admins may do.
func (a *directoryActor) manager(userID, accountID, what string) (*Workspace, string, *apierr.Error) {
	w, role, err := a.membership(userID, accountID)
	if err != nil {
		return nil, "", err
	}
	if role != RoleOwner && role != RoleAdmin {
		return nil, "", apierr.New(apierr.PermissionDenied, "only owners and admins can %s", what).WithDetails("role", role)
	}
	return w, role, nil
}

func (a *directoryActor) ownedCount(userID string) int {
	n := 0
	for acct := range a.state.userAccounts[userID] {
		if m := a.state.Workspaces[acct].Members[userID]; m != nil && m.Role == RoleOwner {
			n++
		}
	}
	return n
}

// newWorkspace adds to b a new workspace owned by ownerID with its wallet
// and a first project, and returns its view (as its owner sees it), the
// directory events and a function that starts the wallet and project
// actors (call it once b is applied).
func (a *directoryActor) newWorkspace(b *persistence.Batch, ownerID, name string, u *core.DashboardUser, now time.Time) (AccountView, []directoryEvent, func()) {
	env := a.env
	accountID := ids.New(ids.Account)
	proj := core.Project{ID: ids.New(ids.Project), AccountID: accountID, Name: DefaultProjectName, Status: core.ProjectActive, CreatedAt: now}
	account := wallet.Account{ID: accountID, Name: name, ProjectIDs: []string{proj.ID}, CreatedAt: now}
	wallet.Genesis(b, account, env.Settings.Billing, 0, now)
	project.Genesis(b, proj, nil)
	if u == nil {
		u = &core.DashboardUser{UserID: ownerID}
	}
	env.Audit.Account(b, accountID, u, "account.created", core.AuditTarget{Type: "account", ID: accountID}, map[string]any{"name": name})
	env.Audit.Account(b, accountID, u, "project.created", core.AuditTarget{Type: "project", ID: proj.ID}, map[string]any{"name": proj.Name})
	events := []directoryEvent{
		{WorkspaceCreated: &workspaceCreated{ID: accountID, Name: name, CreatedAt: now}},
		{MemberSet: &memberSet{AccountID: accountID, UserID: ownerID, Role: RoleOwner, At: now}},
		{ProjectAdded: &workspaceProject{AccountID: accountID, ProjectID: proj.ID}},
	}
	start := func() {
		// Their snapshots were just written: nobody waits on their recovery.
		env.Registry.SpawnWallet(accountID, nil)
		env.Registry.SpawnProject(proj.ID, &proj, nil)
	}
	view := AccountView{Object: "account", ID: accountID, Name: name, Role: RoleOwner, CreatedAt: core.Timestamp(now),
		Projects: []project.ProjectView{project.ViewOf(&proj)}}
	return view, events, start
}

// DefaultProjectName and DefaultWorkspaceName name what a sign-up creates.
const (
	DefaultProjectName   = "Default project"
	DefaultWorkspaceName = "My workspace"
)

// signInRequest is a verified identity about to get a session.
type signInRequest struct {
	email          string
	googleSubject  string
	name           string
	method         string // email or google
	invitationHash string // "" when none
	sessionToken   string
	sessionHash    string
	user           *core.DashboardUser // request id and source ip for audits
}

// completeSignIn finds or creates the user, applies an invitation addressed
// to them, creates the session, and adds it all to b. New people get their
// own workspace unless a valid invitation addressed to them brings them
// into one; an open invitation alone never replaces their workspace.
func (a *directoryActor) completeSignIn(b *persistence.Batch, r signInRequest, now time.Time) (func(), SessionView) {
	var events []directoryEvent
	start := func() {}
	userID, exists := "", false
	if r.googleSubject != "" {
		userID, exists = a.state.byGoogle[r.googleSubject]
	}
	if !exists {
		userID, exists = a.state.byEmail[r.email]
	}
	var user User
	if exists {
		user = *a.state.Users[userID]
		if r.googleSubject != "" && user.GoogleSubject == "" {
			events = append(events, directoryEvent{UserUpdated: &userUpdated{UserID: user.ID, Name: user.Name, GoogleSubject: r.googleSubject}})
		}
	} else {
		user = User{ID: ids.New(ids.User), Email: r.email, Name: r.name, GoogleSubject: r.googleSubject, CreatedAt: now}
		events = append(events, directoryEvent{UserCreated: &user})
	}
	actor := &core.DashboardUser{UserID: user.ID, RequestID: r.user.RequestID, SourceIP: r.user.SourceIP}

	var joined *AccountView
	var joinedWorkspace *Workspace
	if inv := a.usableInvitation(r.invitationHash, user.Email, now); inv != nil {
		w := a.state.Workspaces[inv.AccountID]
		if _, member := w.Members[user.ID]; !member && len(w.Members) < MaxMembersPerAccount {
			events = append(events, directoryEvent{MemberSet: &memberSet{AccountID: w.ID, UserID: user.ID, Role: inv.Role, At: now}})
			a.env.Audit.Account(b, w.ID, actor, "member.added", core.AuditTarget{Type: "user", ID: user.ID}, map[string]any{"role": inv.Role, "invitation_id": inv.ID})
		}
		if _, member := w.Members[user.ID]; member || len(w.Members) < MaxMembersPerAccount {
			events = append(events, directoryEvent{InvitationClosed: &invitationClosed{AccountID: w.ID, InvitationID: inv.ID, Status: InvitationAccepted, At: now, By: user.ID}})
			a.env.Audit.Account(b, w.ID, actor, "invitation.accepted", core.AuditTarget{Type: "invitation", ID: inv.ID}, map[string]any{"email": inv.Email})
			joinedWorkspace = w
		}
	}
	var created *AccountView
	if !exists && joinedWorkspace == nil {
		v, wsEvents, startWorkspace := a.newWorkspace(b, user.ID, DefaultWorkspaceName, actor, now)
		events = append(events, wsEvents...)
		created, start = &v, startWorkspace
	}
	// A user keeps at most MaxSessionsPerUser sessions: the oldest go.
	if live := a.state.userSessions[user.ID]; len(live) >= MaxSessionsPerUser {
		hashes := make([]string, 0, len(live))
		for h := range live {
			hashes = append(hashes, h)
		}
		sort.Slice(hashes, func(i, j int) bool {
			return a.state.Sessions[hashes[i]].CreatedAt.Before(a.state.Sessions[hashes[j]].CreatedAt)
		})
		old := hashes[:len(hashes)-MaxSessionsPerUser+1]
		a.unpublishSessions(old)
		events = append(events, directoryEvent{SessionsEnded: &sessionsEnded{Hashes: old}})
	}
	session := Session{Hash: r.sessionHash, UserID: user.ID, Method: r.method, CreatedAt: now,
		ExpiresAt: now.Add(SessionLifetime), LastSeenAt: now}
	events = append(events, directoryEvent{SessionCreated: &session})

	a.record(b, events...)
	a.publishSession(a.state.Sessions[r.sessionHash]) // its token is only handed out once durable
	if joinedWorkspace != nil {
		v := a.accountView(joinedWorkspace, joinedWorkspace.Members[user.ID].Role)
		joined = &v
	}
	view := SessionView{Object: "session", Token: r.sessionToken, ExpiresAt: core.Timestamp(session.ExpiresAt),
		IdleTimeoutSeconds: int(SessionIdleTimeout / time.Second), User: a.state.Users[user.ID].view(),
		JoinedAccount: joined, CreatedAccount: created}
	return start, view
}

// usableInvitation is the pending, unexpired invitation with token hash h
// addressed to email, or nil.
func (a *directoryActor) usableInvitation(h, email string, now time.Time) *Invitation {
	if h == "" {
		return nil
	}
	inv, ok := a.state.invitations[h]
	if !ok || inv.StatusAt(now) != InvitationPending || inv.Email != email {
		return nil
	}
	return inv
}

// commitAndStart commits b, then starts a new workspace's actors and, when
// memberships changed, republishes the roles; it answers once b is
// durable. The answer waits for start: a caller told about a new project
// may use it at once, so its actor must be registered first.
func (a *directoryActor) commitAndStart(b *persistence.Batch, start func(), rolesChanged bool, answer core.Reply, respond func(core.Reply)) {
	started := make(chan struct{})
	a.env.Store.Commit(b, func() {
		<-started
		respond(answer)
	})
	start()
	if rolesChanged {
		a.publishRoles()
	}
	close(started)
}

func HashHex(h [32]byte) string { return hex.EncodeToString(h[:]) }
