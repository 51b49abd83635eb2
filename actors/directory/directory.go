package directory

import (
	"encoding/hex"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"rtcd/actors/core"
	"rtcd/actors/project"
	"rtcd/persistence"
	"rtcd/scopes"
)

// Roles of a workspace member.
const (
	RoleOwner  = "owner"
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// Named bounds and durations of the dashboard (docs/dashboard.md lists them).
const (
	// SignInLinkTTL is how long an e-mailed sign-in link works.
	SignInLinkTTL = 15 * time.Minute
	// SessionLifetime is the absolute lifetime of a dashboard session.
	SessionLifetime = 14 * 24 * time.Hour
	// SessionIdleTimeout ends a session not used for this long.
	SessionIdleTimeout = 24 * time.Hour
	// SessionTouchInterval: a session's last use is written to disk at most
	// this often, so the idle timeout survives a restart without a write per
	// request (it may then end up to this much early, never late).
	SessionTouchInterval = time.Minute
	// MaxSessionsPerUser bounds a user's live sessions; a new sign-in past
	// it ends the oldest.
	MaxSessionsPerUser = 50
	// InvitationTTL is how long an invitation can be accepted.
	InvitationTTL = 7 * 24 * time.Hour
	// MaxOpenInvitationsPerAccount is the spec's 50 open invitations.
	MaxOpenInvitationsPerAccount = 50
	// InvitationsPerHourPerAccount and InvitationsPerHourPerUser are the
	// spec's 20 per hour, counted over a sliding hour from the durable
	// creation times, so a restart does not reset them.
	InvitationsPerHourPerAccount = 20
	InvitationsPerHourPerUser    = 20
	// closedInvitationRetention keeps accepted, revoked and expired
	// invitations listable for a while before they are dropped.
	closedInvitationRetention = 30 * 24 * time.Hour
	// MaxOwnedAccountsPerUser caps the workspaces one user owns (POST
	// /v1/accounts and sign-up).
	MaxOwnedAccountsPerUser = 10
	// MaxProjectsPerAccount caps a workspace's projects (archived count).
	MaxProjectsPerAccount = 100
	// MaxMembersPerAccount caps a workspace's members.
	MaxMembersPerAccount = 500
	// SignInMailsPerAddressPerHour: more sign-in requests for one address
	// within an hour still answer 202 but send nothing, so nobody can flood
	// a mailbox, and the answer does not tell either.
	SignInMailsPerAddressPerHour = 5
	// maxPendingSignInLinks bounds the links kept at once; past it new
	// requests still answer 202 but send nothing until old links expire.
	maxPendingSignInLinks = 100_000
	// maxTrackedSignInAddresses bounds the per-address counters in memory.
	maxTrackedSignInAddresses = 100_000
	// directorySweepInterval is how often expired sessions, links and old
	// invitations are dropped.
	directorySweepInterval = time.Minute
)

// User is a person who signs in to the dashboard.
type User struct {
	ID            string    `json:"id"`
	Email         string    `json:"email"`
	Name          string    `json:"name"`
	GoogleSubject string    `json:"google_subject,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
}

// Workspace is an account as the directory knows it: its name, members and
// invitations, and its projects' ids.
type Workspace struct {
	ID          string                 `json:"id"`
	Name        string                 `json:"name"`
	CreatedAt   time.Time              `json:"created_at"`
	Members     map[string]*Membership `json:"members"` // user id ->
	ProjectIDs  []string               `json:"project_ids"`
	Invitations map[string]*Invitation `json:"invitations"`
}

// Membership is a user's role in a workspace.
type Membership struct {
	Role     string    `json:"role"`
	JoinedAt time.Time `json:"joined_at"`
}

// Invitation statuses.
const (
	InvitationPending  = "pending"
	InvitationAccepted = "accepted"
	InvitationRevoked  = "revoked"
	InvitationExpired  = "expired"
)

// Invitation asks the holder of an e-mail address to join a workspace.
type Invitation struct {
	ID         string    `json:"id"`
	AccountID  string    `json:"account_id"`
	Email      string    `json:"email"`
	Role       string    `json:"role"`
	Status     string    `json:"status"`
	Hash       string    `json:"hash"` // hex keyed hash of the rtc_inv_ token
	InvitedBy  string    `json:"invited_by"`
	CreatedAt  time.Time `json:"created_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	ClosedAt   time.Time `json:"closed_at,omitempty"`
	AcceptedBy string    `json:"accepted_by,omitempty"`
}

// StatusAt is the invitation's status at now: a pending one past its
// expiry reads as expired.
func (inv *Invitation) StatusAt(now time.Time) string {
	if inv.Status == InvitationPending && !now.Before(inv.ExpiresAt) {
		return InvitationExpired
	}
	return inv.Status
}

// Session is a dashboard session; the token is kept only as its hash.
type Session struct {
	Hash       string    `json:"hash"` // hex keyed hash of the rtc_us_ token
	UserID     string    `json:"user_id"`
	Method     string    `json:"method"` // email or google
	CreatedAt  time.Time `json:"created_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	LastSeenAt time.Time `json:"last_seen_at"`
}

// SignInLink is an e-mailed sign-in link not yet used; the token is kept
// only as its hash.
type SignInLink struct {
	Hash           string    `json:"hash"`
	Email          string    `json:"email"`
	InvitationHash string    `json:"invitation_hash,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	ExpiresAt      time.Time `json:"expires_at"`
}

// directoryEvent is one entry of the directory's journal. Exactly one field
// is set.
type directoryEvent struct {
	UserCreated        *User               `json:"user_created,omitempty"`
	UserUpdated        *userUpdated        `json:"user_updated,omitempty"`
	WorkspaceCreated   *workspaceCreated   `json:"workspace_created,omitempty"`
	WorkspaceRenamed   *workspaceRenamed   `json:"workspace_renamed,omitempty"`
	ProjectAdded       *workspaceProject   `json:"project_added,omitempty"`
	MemberSet          *memberSet          `json:"member_set,omitempty"`
	MemberRemoved      *memberRemoved      `json:"member_removed,omitempty"`
	InvitationCreated  *Invitation         `json:"invitation_created,omitempty"`
	InvitationClosed   *invitationClosed   `json:"invitation_closed,omitempty"`
	InvitationsDropped *invitationsDropped `json:"invitations_dropped,omitempty"`
	SessionCreated     *Session            `json:"session_created,omitempty"`
	SessionsEnded      *sessionsEnded      `json:"sessions_ended,omitempty"`
	SessionTouched     *sessionTouched     `json:"session_touched,omitempty"`
	SignInLinkCreated  *SignInLink         `json:"sign_in_link_created,omitempty"`
	SignInLinksDropped *signInLinksDropped `json:"sign_in_links_dropped,omitempty"`
}

type userUpdated struct {
	UserID        string `json:"user_id"`
	Name          string `json:"name"`
	GoogleSubject string `json:"google_subject,omitempty"`
}

type workspaceCreated struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

type workspaceRenamed struct {
	AccountID string `json:"account_id"`
	Name      string `json:"name"`
}

type workspaceProject struct {
	AccountID string `json:"account_id"`
	ProjectID string `json:"project_id"`
}

// memberSet adds a member or changes a member's role.
type memberSet struct {
	AccountID string    `json:"account_id"`
	UserID    string    `json:"user_id"`
	Role      string    `json:"role"`
	At        time.Time `json:"at"`
}

type memberRemoved struct {
	AccountID string `json:"account_id"`
	UserID    string `json:"user_id"`
}

type invitationClosed struct {
	AccountID    string    `json:"account_id"`
	InvitationID string    `json:"invitation_id"`
	Status       string    `json:"status"`
	At           time.Time `json:"at"`
	By           string    `json:"by,omitempty"`
}

type invitationsDropped struct {
	AccountID string   `json:"account_id"`
	IDs       []string `json:"ids"`
}

type sessionsEnded struct {
	Hashes []string `json:"hashes"`
}

type sessionTouched struct {
	Hash string    `json:"hash"`
	At   time.Time `json:"at"`
}

type signInLinksDropped struct {
	Hashes []string `json:"hashes"`
}

// State is everything the directory owns. It is also its
// snapshot; the maps after the first five are indexes rebuilt on load.
type State struct {
	Users       map[string]*User       `json:"users"`
	Workspaces  map[string]*Workspace  `json:"workspaces"`
	Sessions    map[string]*Session    `json:"sessions"`      // hash ->
	SignInLinks map[string]*SignInLink `json:"sign_in_links"` // hash ->

	byEmail      map[string]string              // email -> user id
	byGoogle     map[string]string              // google subject -> user id
	invitations  map[string]*Invitation         // token hash -> invitation
	userAccounts map[string]map[string]struct{} // user id -> account ids
	userSessions map[string]map[string]struct{} // user id -> session hashes
}

func newState() *State {
	s := &State{
		Users: make(map[string]*User), Workspaces: make(map[string]*Workspace),
		Sessions: make(map[string]*Session), SignInLinks: make(map[string]*SignInLink),
	}
	s.index()
	return s
}

// Genesis writes the directory's first snapshot (sequence 0)
// into b, at bootstrap: the owner, the first workspace with the owner as
// its owner, and the workspace's project. Later workspaces are events of
// the running directory (newWorkspace).
func Genesis(b *persistence.Batch, owner User, accountID, workspaceName, projectID string, at time.Time) *State {
	s := core.ApplyAll(newState(),
		directoryEvent{UserCreated: &owner},
		directoryEvent{WorkspaceCreated: &workspaceCreated{ID: accountID, Name: workspaceName, CreatedAt: at}},
		directoryEvent{MemberSet: &memberSet{AccountID: accountID, UserID: owner.ID, Role: RoleOwner, At: at}},
		directoryEvent{ProjectAdded: &workspaceProject{AccountID: accountID, ProjectID: projectID}})
	persistence.WriteSnapshotAt(b, Journal(), 0, core.Encode(s))
	return s
}

// UserSessions is how many live sessions userID has.
func (s *State) UserSessions(userID string) int { return len(s.userSessions[userID]) }

// UserWorkspaces is how many workspaces userID is a member of.
func (s *State) UserWorkspaces(userID string) int { return len(s.userAccounts[userID]) }

// Loaded rebuilds the derived maps after a snapshot is decoded.
func (s *State) Loaded() { s.index() }

// index rebuilds the derived maps (after loading a snapshot).
func (s *State) index() {
	if s.Users == nil {
		s.Users = make(map[string]*User)
	}
	if s.Workspaces == nil {
		s.Workspaces = make(map[string]*Workspace)
	}
	if s.Sessions == nil {
		s.Sessions = make(map[string]*Session)
	}
	if s.SignInLinks == nil {
		s.SignInLinks = make(map[string]*SignInLink)
	}
	s.byEmail = make(map[string]string)
	s.byGoogle = make(map[string]string)
	s.invitations = make(map[string]*Invitation)
	s.userAccounts = make(map[string]map[string]struct{})
	s.userSessions = make(map[string]map[string]struct{})
	for _, u := range s.Users {
		s.byEmail[u.Email] = u.ID
		if u.GoogleSubject != "" {
			s.byGoogle[u.GoogleSubject] = u.ID
		}
	}
	for _, w := range s.Workspaces {
		if w.Members == nil {
			w.Members = make(map[string]*Membership)
		}
		if w.Invitations == nil {
			w.Invitations = make(map[string]*Invitation)
		}
		for uid := range w.Members {
			s.addUserAccount(uid, w.ID)
		}
		for _, inv := range w.Invitations {
			s.invitations[inv.Hash] = inv
		}
	}
	for h, ss := range s.Sessions {
		s.addUserSession(ss.UserID, h)
	}
}

func (s *State) addUserAccount(userID, accountID string) {
	m := s.userAccounts[userID]
	if m == nil {
		m = make(map[string]struct{})
		s.userAccounts[userID] = m
	}
	m[accountID] = struct{}{}
}

func (s *State) addUserSession(userID, hash string) {
	m := s.userSessions[userID]
	if m == nil {
		m = make(map[string]struct{})
		s.userSessions[userID] = m
	}
	m[hash] = struct{}{}
}

// Apply changes the state by one event; pure, and checking what it looks
// up, as the other owners' Apply.
func (s *State) Apply(e *directoryEvent) error {
	switch {
	case e.UserCreated != nil:
		u := *e.UserCreated
		if _, dup := s.Users[u.ID]; dup {
			return fmt.Errorf("user_created: user %s already exists", u.ID)
		}
		s.Users[u.ID] = &u
		s.byEmail[u.Email] = u.ID
		if u.GoogleSubject != "" {
			s.byGoogle[u.GoogleSubject] = u.ID
		}
	case e.UserUpdated != nil:
		u, ok := s.Users[e.UserUpdated.UserID]
		if !ok {
			return fmt.Errorf("user_updated: no user %s", e.UserUpdated.UserID)
		}
		u.Name = e.UserUpdated.Name
		if sub := e.UserUpdated.GoogleSubject; sub != "" {
			u.GoogleSubject = sub
			s.byGoogle[sub] = u.ID
		}
	case e.WorkspaceCreated != nil:
		w := e.WorkspaceCreated
		if _, dup := s.Workspaces[w.ID]; dup {
			return fmt.Errorf("workspace_created: workspace %s already exists", w.ID)
		}
		s.Workspaces[w.ID] = &Workspace{ID: w.ID, Name: w.Name, CreatedAt: w.CreatedAt,
			Members: make(map[string]*Membership), Invitations: make(map[string]*Invitation)}
	case e.WorkspaceRenamed != nil:
		w, err := s.workspace("workspace_renamed", e.WorkspaceRenamed.AccountID)
		if err != nil {
			return err
		}
		w.Name = e.WorkspaceRenamed.Name
	case e.ProjectAdded != nil:
		w, err := s.workspace("project_added", e.ProjectAdded.AccountID)
		if err != nil {
			return err
		}
		w.ProjectIDs = append(w.ProjectIDs, e.ProjectAdded.ProjectID)
	case e.MemberSet != nil:
		m := e.MemberSet
		w, err := s.workspace("member_set", m.AccountID)
		if err != nil {
			return err
		}
		if _, ok := s.Users[m.UserID]; !ok {
			return fmt.Errorf("member_set: no user %s", m.UserID)
		}
		if cur, ok := w.Members[m.UserID]; ok {
			cur.Role = m.Role
		} else {
			w.Members[m.UserID] = &Membership{Role: m.Role, JoinedAt: m.At}
			s.addUserAccount(m.UserID, m.AccountID)
		}
	case e.MemberRemoved != nil:
		w, err := s.workspace("member_removed", e.MemberRemoved.AccountID)
		if err != nil {
			return err
		}
		delete(w.Members, e.MemberRemoved.UserID)
		delete(s.userAccounts[e.MemberRemoved.UserID], e.MemberRemoved.AccountID)
	case e.InvitationCreated != nil:
		inv := *e.InvitationCreated
		w, err := s.workspace("invitation_created", inv.AccountID)
		if err != nil {
			return err
		}
		w.Invitations[inv.ID] = &inv
		s.invitations[inv.Hash] = &inv
	case e.InvitationClosed != nil:
		c := e.InvitationClosed
		w, err := s.workspace("invitation_closed", c.AccountID)
		if err != nil {
			return err
		}
		inv, ok := w.Invitations[c.InvitationID]
		if !ok {
			return fmt.Errorf("invitation_closed: workspace %s has no invitation %s", c.AccountID, c.InvitationID)
		}
		inv.Status = c.Status
		inv.ClosedAt = c.At
		inv.AcceptedBy = c.By
	case e.InvitationsDropped != nil:
		w, err := s.workspace("invitations_dropped", e.InvitationsDropped.AccountID)
		if err != nil {
			return err
		}
		for _, id := range e.InvitationsDropped.IDs {
			if inv, ok := w.Invitations[id]; ok {
				delete(s.invitations, inv.Hash)
				delete(w.Invitations, id)
			}
		}
	case e.SessionCreated != nil:
		ss := *e.SessionCreated
		s.Sessions[ss.Hash] = &ss
		s.addUserSession(ss.UserID, ss.Hash)
	case e.SessionsEnded != nil:
		for _, h := range e.SessionsEnded.Hashes {
			if ss, ok := s.Sessions[h]; ok {
				delete(s.userSessions[ss.UserID], h)
				delete(s.Sessions, h)
			}
		}
	case e.SessionTouched != nil:
		if ss, ok := s.Sessions[e.SessionTouched.Hash]; ok && e.SessionTouched.At.After(ss.LastSeenAt) {
			ss.LastSeenAt = e.SessionTouched.At
		}
	case e.SignInLinkCreated != nil:
		l := *e.SignInLinkCreated
		s.SignInLinks[l.Hash] = &l
	case e.SignInLinksDropped != nil:
		for _, h := range e.SignInLinksDropped.Hashes {
			delete(s.SignInLinks, h)
		}
	default:
		return core.ErrUnknownEvent
	}
	return nil
}

// workspace is the workspace an event of kind names.
func (s *State) workspace(kind, accountID string) (*Workspace, error) {
	w, ok := s.Workspaces[accountID]
	if !ok {
		return nil, fmt.Errorf("%s: no workspace %s", kind, accountID)
	}
	return w, nil
}

// ownerCount is the number of owners of w.
func (w *Workspace) ownerCount() int {
	n := 0
	for _, m := range w.Members {
		if m.Role == RoleOwner {
			n++
		}
	}
	return n
}

// --- published for readers that must not wait on the directory -----------

// RoleScopes are the scopes a workspace role grants on its projects' routes
// (spec 5.3): owners and admins everything; members run rooms and
// participants and read everything else, but do not top up, manage API keys
// or manage webhooks.
func RoleScopes(role string) scopes.Set {
	switch role {
	case RoleOwner, RoleAdmin:
		return scopes.All
	case RoleMember:
		return scopes.All &^ scopes.Set(scopes.BillingWrite|scopes.APIKeysWrite|scopes.WebhooksWrite)
	}
	return 0
}

// --- the actor --------------------------------------------------------------

type directoryActor struct {
	env       *core.Env
	sessions  *core.Sessions // what the directory publishes
	log       *core.Log[directoryEvent, *State]
	state     *State // log.State()
	recovery  *core.Recovery
	recovered bool
	// signInSends keeps, per address, when sign-in mails were sent within
	// the last hour (SignInMailsPerAddressPerHour). Memory only: losing it
	// at a restart only allows a few more mails.
	signInSends map[string][]time.Time
	// archiving marks projects whose archive the project actor is doing;
	// they count as archived for the last-project rule meanwhile.
	archiving map[string]bool
	lastSweep time.Time
	projects  ProjectRecords
}

// ProjectRecords reads a project as the dashboard shows it, wherever its
// actor runs (false when there is no such project). The directory reads
// projects, never waits on their actors.
type ProjectRecords func(projectID string) (project.ProjectView, bool)

// GateRecords reads projects from the gates their actors publish in this
// process: the directory's ProjectRecords where every actor runs here.
func GateRecords(r core.Registry) ProjectRecords {
	return func(projectID string) (project.ProjectView, bool) {
		gate, ok := r.ProjectGate(projectID)
		if !ok {
			return project.ProjectView{}, false
		}
		p := gate.Record.Load()
		if p == nil {
			return project.ProjectView{}, false
		}
		return project.ViewOf(p), true
	}
}

// New is the directory actor, which publishes sessions and reads projects
// through projects. It recovers from its snapshot and journal when it
// starts and tells rec.
func New(env *core.Env, sessions *core.Sessions, projects ProjectRecords, rec *core.Recovery) actor.Actor {
	return &directoryActor{env: env, sessions: sessions, projects: projects, recovery: rec}
}

// Receive runs one message on the directory's goroutine.
func (a *directoryActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.recover()
	case core.Sweep:
		a.sweep()
	case TouchSession:
		a.touch(m)
	case *core.Envelope:
		a.handle(m)
	case archiveDone:
		delete(a.archiving, m.projectID)
	}
}

func (a *directoryActor) recover() {
	first := !a.recovered
	a.recovered = true
	err := a.load()
	switch {
	case first:
		a.recovery.Done(err)
	case err != nil:
		slog.Error("directory recovery after a restart failed", "error", err)
	}
}

// load recovers the directory's state and publishes its live sessions and
// the roles.
func (a *directoryActor) load() error {
	a.signInSends = make(map[string][]time.Time)
	a.archiving = make(map[string]bool)
	a.log, a.state = nil, nil // nothing in memory survives a failed recovery
	// A data directory initialised before the dashboard existed has no
	// snapshot of the directory: it starts empty.
	log, err := core.RecoverLog(a.env.Store, Journal(), a.env.Settings.SnapshotEveryEvents,
		func() *State { return &State{} }, newState)
	if err != nil {
		return err
	}
	a.log, a.state = log, log.State()
	a.sessions.WithdrawAll()
	for _, ss := range a.state.Sessions {
		a.publishSession(ss)
	}
	a.publishRoles()
	return nil
}

// record appends events to the directory's journal in b and applies them
// (eventLog.record); the caller commits b.
func (a *directoryActor) record(b *persistence.Batch, events ...directoryEvent) {
	a.log.Record(b, events...)
}

func hashKey(h string) ([32]byte, bool) {
	var k [32]byte
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != len(k) {
		return k, false
	}
	copy(k[:], b)
	return k, true
}

func (a *directoryActor) publishSession(ss *Session) {
	k, ok := hashKey(ss.Hash)
	if !ok {
		return
	}
	a.sessions.Publish(k, core.NewLiveSession(ss.Hash, ss.UserID, ss.ExpiresAt, ss.LastSeenAt))
}

// unpublishSessions makes sessions unusable at once, before their end is
// durable: failing safe, like an API key's revocation.
func (a *directoryActor) unpublishSessions(hashes []string) {
	for _, h := range hashes {
		if k, ok := hashKey(h); ok {
			a.sessions.Withdraw(k)
		}
	}
}

// publishRoles republishes the user → workspace → role map (copy on write;
// membership changes are rare next to the requests that read it).
func (a *directoryActor) publishRoles() { a.sessions.SetRoles(a.state.roles()) }

// roles is every user's role in each of their workspaces.
func (s *State) roles() map[string]map[string]string {
	m := make(map[string]map[string]string, len(s.userAccounts))
	for _, w := range s.Workspaces {
		for uid, mem := range w.Members {
			if m[uid] == nil {
				m[uid] = make(map[string]string)
			}
			m[uid][w.ID] = mem.Role
		}
	}
	return m
}

// TouchSession records a session's last use (sent by authentication at
// most once per SessionTouchInterval per session, holding the published
// session's touching flag, which the directory clears).
type TouchSession struct {
	Hash string
	At   time.Time
}

func (a *directoryActor) touch(m TouchSession) {
	var ls *core.LiveSession
	if k, ok := hashKey(m.Hash); ok {
		ls, _ = a.sessions.Lookup(k)
	}
	if _, ok := a.state.Sessions[m.Hash]; !ok {
		if ls != nil {
			ls.Touched(time.Time{})
		}
		return
	}
	b := a.env.Store.NewBatch()
	a.record(b, directoryEvent{SessionTouched: &sessionTouched{Hash: m.Hash, At: m.At}})
	a.env.Store.Commit(b, nil)
	if ls != nil {
		ls.Touched(m.At)
	}
}

// sweep drops expired sessions and sign-in links, invitations closed longer
// than closedInvitationRetention, and old per-address counters.
func (a *directoryActor) sweep() {
	now := a.env.Clock.Now()
	if now.Sub(a.lastSweep) < directorySweepInterval {
		return
	}
	a.lastSweep = now
	var events []directoryEvent
	var ended []string
	for h, ss := range a.state.Sessions {
		if a.sessionOver(ss, now) {
			ended = append(ended, h)
		}
	}
	if len(ended) > 0 {
		sort.Strings(ended)
		a.unpublishSessions(ended)
		events = append(events, directoryEvent{SessionsEnded: &sessionsEnded{Hashes: ended}})
	}
	var links []string
	for h, l := range a.state.SignInLinks {
		if !now.Before(l.ExpiresAt) {
			links = append(links, h)
		}
	}
	if len(links) > 0 {
		sort.Strings(links)
		events = append(events, directoryEvent{SignInLinksDropped: &signInLinksDropped{Hashes: links}})
	}
	for _, w := range a.state.Workspaces {
		var drop []string
		for id, inv := range w.Invitations {
			closedAt := inv.ClosedAt
			if inv.StatusAt(now) == InvitationExpired && inv.Status == InvitationPending {
				closedAt = inv.ExpiresAt
			}
			if inv.StatusAt(now) != InvitationPending && now.Sub(closedAt) >= closedInvitationRetention {
				drop = append(drop, id)
			}
		}
		if len(drop) > 0 {
			sort.Strings(drop)
			events = append(events, directoryEvent{InvitationsDropped: &invitationsDropped{AccountID: w.ID, IDs: drop}})
		}
	}
	for addr, sends := range a.signInSends {
		if len(recentWithin(sends, now, time.Hour)) == 0 {
			delete(a.signInSends, addr)
		}
	}
	if len(events) == 0 {
		return
	}
	b := a.env.Store.NewBatch()
	a.record(b, events...)
	a.env.Store.Commit(b, nil)
}

// sessionOver reports whether ss is past its lifetime or idle timeout. The
// last use is the later of the durable one and the published one.
func (a *directoryActor) sessionOver(ss *Session, now time.Time) bool {
	last := ss.LastSeenAt
	if k, ok := hashKey(ss.Hash); ok {
		if ls, ok := a.sessions.Lookup(k); ok && ls.LastSeen().After(last) {
			last = ls.LastSeen()
		}
	}
	return !now.Before(ss.ExpiresAt) || now.Sub(last) >= SessionIdleTimeout
}

// recentWithin returns the times of ts within window before now.
func recentWithin(ts []time.Time, now time.Time, window time.Duration) []time.Time {
	out := ts[:0:0]
	for _, t := range ts {
		if now.Sub(t) < window {
			out = append(out, t)
		}
	}
	return out
}

// Replay is the state recovery rebuilds for the directory from store,
// encoded as ReadState answers; it starts no actor and writes nothing
// (core.ReplayLog).
func Replay(store persistence.Storage) ([]byte, error) {
	return core.ReplayLog(store, Journal(), func() *State { return &State{} }, newState)
}

// Journal names the directory's journal, snapshot and actor.
func Journal() string { return "directory" }
