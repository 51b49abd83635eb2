package actors

import (
	"net/url"
	"strings"
	"time"

	"rtcd/actors/core"
	"rtcd/actors/directory"
	"rtcd/apierr"
	"rtcd/auth"
	"rtcd/ids"
	"rtcd/mail"
	"rtcd/persistence"
)

// Request bodies of the dashboard routes. Pointers tell absent from zero.
type (
	// EmailStartParams is the body of POST /v1/auth/email/start.
	EmailStartParams struct {
		Email           *string `json:"email"`
		InvitationToken *string `json:"invitation_token"`
	}
	// EmailTokenParams is the body of POST /v1/auth/email/peek and verify.
	EmailTokenParams struct {
		Token *string `json:"token"`
	}
	// NameParams is the body of PATCH /v1/me, POST and PATCH of accounts
	// and projects.
	NameParams struct {
		Name *string `json:"name"`
	}
	// MemberParams is the body of PATCH /v1/accounts/{id}/members/{user_id}.
	MemberParams struct {
		Role *string `json:"role"`
	}
	// InvitationParams is the body of POST /v1/accounts/{id}/invitations.
	InvitationParams struct {
		Email *string `json:"email"`
		Role  *string `json:"role"`
	}
	// AcceptParams is the body of POST /v1/invitations/accept.
	AcceptParams struct {
		InvitationToken *string `json:"invitation_token"`
	}
)

// Bounds of the dashboard's request fields.
const (
	// MaxDisplayNameBytes bounds user, workspace and project names.
	MaxDisplayNameBytes = 128
	// maxPlausibleEmailBytes: a longer "address" is not one (RFC 5321).
	maxPlausibleEmailBytes = mail.MaxAddressBytes
	// SignInStartsPerIPPerMinute limits POST /v1/auth/email/start per
	// source IP (429); the per-address limit is SignInMailsPerAddressPerHour.
	SignInStartsPerIPPerMinute = 10
	// SignInAttemptsPerIPPerMinute limits peek, verify and Google sign-in
	// per source IP (429).
	SignInAttemptsPerIPPerMinute = 30
)

// emailStartAccepted is the one body of POST /v1/auth/email/start: the same
// bytes whether or not the address has an account, is malformed but
// plausible, or is over its limit, so the answer tells nothing.
var emailStartAccepted = []byte(`{"object":"email_sign_in","status":"accepted","message":"If the address can sign in, a link is on its way."}`)

// EmailStartAccepted returns the 202 body of POST /v1/auth/email/start.
func EmailStartAccepted() []byte { return append([]byte(nil), emailStartAccepted...) }

// normalizeEmail trims and lowercases an address; ok is false when it is
// not even plausible (no @, too long, control characters): those get 400.
func normalizeEmail(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" || len(s) > maxPlausibleEmailBytes || strings.Count(s, "@") != 1 || strings.HasPrefix(s, "@") || strings.HasSuffix(s, "@") {
		return "", false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == ' ' {
			return "", false
		}
	}
	return s, true
}

// deliverableEmail normalizes an address and reports whether mail can be
// sent to it: plausible (normalizeEmail) and a valid bare address.
func deliverableEmail(s string) (string, bool) {
	email, ok := normalizeEmail(s)
	if !ok {
		return "", false
	}
	_, err := mail.ParseAddress(email)
	return email, err == nil
}

func checkDisplayName(p *NameParams, required bool) (string, *apierr.Error) {
	if p.Name == nil {
		if required {
			return "", apierr.Invalid("name", "name is required")
		}
		return "", nil
	}
	if err := checkText("name", p.Name, MaxDisplayNameBytes); err != nil {
		return "", err
	}
	name := strings.TrimSpace(*p.Name)
	if name == "" {
		return "", apierr.Invalid("name", "name must not be empty")
	}
	return name, nil
}

// --- authentication ----------------------------------------------------------

// lookupSession resolves a session token, checking expiry and idle time,
// and notes its use.
func (e *Engine) lookupSession(token string) (*core.LiveSession, *apierr.Error) {
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
		e.system.Root.Send(e.directory, directory.TouchSession{Hash: ls.Hash(), At: now})
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
	r := e.ask(e.directory, directory.StartSignIn{Email: email, Hash: hash, InvitationHash: invitationHash, Deliverable: deliverable})
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
	r := e.ask(e.directory, directory.PeekSignIn{Hash: hash})
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
	r := e.ask(e.directory, directory.VerifySignIn{Hash: hash, SessionToken: sessionToken, SessionHash: sessionHash, RequestID: requestID, SourceIP: sourceIP})
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
	r := e.ask(e.directory, directory.SignInWithGoogle{Identity: id, Email: email, Name: name, InvitationHash: invitationHash, SessionToken: sessionToken, SessionHash: sessionHash, RequestID: requestID, SourceIP: sourceIP})
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
	r := e.ask(e.directory, directory.EndSessions{User: *u, All: all})
	return r.Err
}

// --- me and workspaces --------------------------------------------------------

// Me answers GET /v1/me.
func (e *Engine) Me(u *core.DashboardUser) ([]byte, *apierr.Error) {
	r := e.ask(e.directory, directory.ReadMe{User: *u})
	return r.Body, r.Err
}

// UpdateMe changes the user's display name (PATCH /v1/me).
func (e *Engine) UpdateMe(u *core.DashboardUser, p *NameParams) ([]byte, *apierr.Error) {
	name, err := checkDisplayName(p, true)
	if err != nil {
		return nil, err
	}
	r := e.ask(e.directory, directory.RenameUser{User: *u, Name: name})
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
	r := e.ask(e.directory, directory.CreateAccount{User: *u, Name: name})
	return r.Body, r.Err
}

// RenameAccount renames a workspace (owners and admins).
func (e *Engine) RenameAccount(u *core.DashboardUser, accountID string, p *NameParams) ([]byte, *apierr.Error) {
	name, err := checkDisplayName(p, true)
	if err != nil {
		return nil, err
	}
	r := e.ask(e.directory, directory.RenameAccount{User: *u, AccountID: accountID, Name: name})
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

// --- the mail ------------------------------------------------------------------

// signInMail is the sign-in message with the link; its token is the link's
// token query parameter.
func (e *Engine) signInMail(to, token string, expiresAt time.Time) outgoingMail {
	link := e.dashboardLink("/sign-in/email", url.Values{"token": {token}})
	text := "Use this link to sign in to rtcd:\n\n" + link +
		"\n\nIt works once and expires at " + core.Timestamp(expiresAt) + " (" + directory.SignInLinkTTL.String() + ").\n" +
		"If you did not ask for it, ignore this message.\n"
	return outgoingMail{kind: "sign_in", link: link, msg: mail.Message{To: to, Subject: "Your rtcd sign-in link", Text: text}}
}

// invitationMail is the invitation message with its link.
func (e *Engine) invitationMail(to, token, workspace, inviter string, expiresAt time.Time) outgoingMail {
	link := e.dashboardLink("/invitations/accept", url.Values{"invitation_token": {token}})
	text := inviter + " invited you to the rtcd workspace \"" + workspace + "\".\n\nOpen this link to join:\n\n" + link +
		"\n\nThe invitation is for this address only and expires at " + core.Timestamp(expiresAt) + ".\n"
	return outgoingMail{kind: "invitation", link: link, msg: mail.Message{To: to, Subject: "You are invited to an rtcd workspace", Text: text}}
}

// dashboardLink builds a link on the configured dashboard origin, never
// on a request's Host header.
func (e *Engine) dashboardLink(path string, q url.Values) string {
	return strings.TrimRight(e.mailSettings().DashboardURL, "/") + path + "?" + q.Encode()
}
