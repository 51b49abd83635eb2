package http

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/goccy/go-json"
	"rtcd/actors"
	"rtcd/apierr"
	"rtcd/auth"
	"rtcd/googleauth"
)

// Dashboard routes (spec section 4, "Dashboard session routes"): sign-in by
// e-mail link or Google, the session's user, workspaces, projects, members,
// invitations and the workspace audit log. The rules live in the directory
// actor; these handlers decode, authenticate and pass through.

// googleExchangeTimeout bounds one code exchange with the provider
// (discovery, token endpoint, signing keys).
const googleExchangeTimeout = 15 * time.Second

// GoogleSignInParams is the body of POST /v1/auth/google.
type GoogleSignInParams struct {
	Code            *string `json:"code"`
	State           *string `json:"state"`
	InvitationToken *string `json:"invitation_token"`
}

// SetGoogle turns Google sign-in on; nil leaves it off. Call before serving.
func (s *Server) SetGoogle(p *googleauth.Provider) { s.google = p }

// providersView is the body of GET /v1/auth/providers.
type providersView struct {
	Object    string   `json:"object"`
	Providers []string `json:"providers"`
}

func errGoogleOff() *apierr.Error {
	return apierr.New(apierr.InvalidRequest, "Google sign-in is not enabled on this server").
		WithDetails("reason", "provider_not_enabled").WithStatus(404)
}

func (s *Server) dashboardRoutes() {
	r := s.router
	e := s.engine

	r.GET("/v1/auth/providers", s.wrap("/v1/auth/providers", noAuth, func(rc *reqCtx) {
		v := providersView{Object: "auth_providers", Providers: []string{"email"}}
		if s.google != nil {
			v.Providers = append(v.Providers, "google")
		}
		body, _ := json.Marshal(v)
		rc.ok(200, body)
	}))
	r.POST("/v1/auth/email/start", s.wrap("/v1/auth/email/start", noAuth, decoded(false, 202, func(rc *reqCtx, p *actors.EmailStartParams) ([]byte, *apierr.Error) {
		return actors.EmailStartAccepted(), e.StartEmailSignIn(p, s.sourceIP(rc.ctx))
	})))
	r.POST("/v1/auth/email/peek", s.wrap("/v1/auth/email/peek", noAuth, decoded(false, 200, func(rc *reqCtx, p *actors.EmailTokenParams) ([]byte, *apierr.Error) {
		return e.PeekEmailSignIn(p, s.sourceIP(rc.ctx))
	})))
	r.POST("/v1/auth/email/verify", s.wrap("/v1/auth/email/verify", noAuth, decoded(false, 200, func(rc *reqCtx, p *actors.EmailTokenParams) ([]byte, *apierr.Error) {
		return e.VerifyEmailSignIn(p, rc.requestID, s.sourceIP(rc.ctx))
	})))
	r.GET("/v1/auth/google/url", s.wrap("/v1/auth/google/url", noAuth, func(rc *reqCtx) {
		if s.google == nil {
			rc.fail(errGoogleOff())
			return
		}
		state := string(rc.ctx.QueryArgs().Peek("state"))
		if !googleauth.ValidState(state) {
			rc.fail(apierr.Invalid("state", "state must be 16 to 512 characters of A-Z, a-z, 0-9, '.', '_', '~' and '-'; bind it to the browser and send the same state to POST /v1/auth/google"))
			return
		}
		// Counted with sign-in attempts: the first call after a start asks
		// the provider for its discovery document.
		if err := e.CheckSignInAttempt(s.sourceIP(rc.ctx)); err != nil {
			rc.fail(err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), googleExchangeTimeout)
		defer cancel()
		u, err := s.google.AuthURL(ctx, state)
		if err != nil {
			rc.fail(googleError(err))
			return
		}
		body, _ := json.Marshal(struct {
			Object string `json:"object"`
			URL    string `json:"url"`
		}{"google_authorization_url", u})
		rc.ok(200, body)
	}))
	r.POST("/v1/auth/google", s.wrap("/v1/auth/google", noAuth, func(rc *reqCtx) {
		if s.google == nil {
			rc.fail(errGoogleOff())
			return
		}
		var p GoogleSignInParams
		if err := rc.decode(&p, false); err != nil {
			rc.fail(err)
			return
		}
		if p.Code == nil || *p.Code == "" || len(*p.Code) > maxGoogleCodeBytes {
			rc.fail(apierr.Invalid("code", "code is required: the provider's authorization code, at most %d bytes", maxGoogleCodeBytes))
			return
		}
		if p.State == nil || !googleauth.ValidState(*p.State) {
			rc.fail(apierr.Invalid("state", "state is required: the state the sign-in was started with"))
			return
		}
		// Checked before the exchange: the provider's code works once, so a
		// request refused afterwards would burn it.
		if p.InvitationToken != nil && !auth.CheckDashboardSecretFormat(auth.InvitationTokenPrefix, *p.InvitationToken) {
			rc.fail(apierr.Invalid("invitation_token", "invitation_token is malformed"))
			return
		}
		ip := s.sourceIP(rc.ctx)
		if err := e.CheckSignInAttempt(ip); err != nil {
			rc.fail(err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), googleExchangeTimeout)
		defer cancel()
		id, err := s.google.Exchange(ctx, *p.Code, *p.State)
		if err != nil {
			rc.fail(googleError(err))
			return
		}
		if !id.EmailVerified {
			rc.fail(apierr.New(apierr.AuthenticationFailed, "the provider has not verified this account's e-mail address"))
			return
		}
		rc.respondBody(e.GoogleSignIn(actors.GoogleIdentity{Subject: id.Subject, Email: id.Email, Name: id.Name},
			p.InvitationToken, rc.requestID, ip))
	}))

	r.POST("/v1/auth/logout", s.wrap("/v1/auth/logout", session, func(rc *reqCtx) {
		if err := e.Logout(rc.user); err != nil {
			rc.fail(err)
			return
		}
		rc.ctx.SetStatusCode(204)
	}))
	r.POST("/v1/auth/logout-all", s.wrap("/v1/auth/logout-all", session, func(rc *reqCtx) {
		if err := e.LogoutAll(rc.user); err != nil {
			rc.fail(err)
			return
		}
		rc.ctx.SetStatusCode(204)
	}))
	r.GET("/v1/me", s.wrap("/v1/me", session, func(rc *reqCtx) {
		rc.respondBody(e.Me(rc.user))
	}))
	r.PATCH("/v1/me", s.wrap("/v1/me", session, decoded(false, 200, func(rc *reqCtx, p *actors.NameParams) ([]byte, *apierr.Error) {
		return e.UpdateMe(rc.user, p)
	})))
	r.POST("/v1/accounts", s.wrap("/v1/accounts", session, decoded(true, 201, func(rc *reqCtx, p *actors.NameParams) ([]byte, *apierr.Error) {
		return e.CreateAccount(rc.user, p)
	})))
	const account = "/v1/accounts/{account_id}"
	r.PATCH(account, s.wrap(account, session, decoded(false, 200, func(rc *reqCtx, p *actors.NameParams) ([]byte, *apierr.Error) {
		return e.RenameAccount(rc.user, rc.param("account_id"), p)
	})))
	const projects = account + "/projects"
	r.POST(projects, s.wrap(projects, session, decoded(false, 201, func(rc *reqCtx, p *actors.NameParams) ([]byte, *apierr.Error) {
		return e.CreateProject(rc.user, rc.param("account_id"), p)
	})))
	const project = projects + "/{project_id}"
	r.PATCH(project, s.wrap(project, session, decoded(false, 200, func(rc *reqCtx, p *actors.NameParams) ([]byte, *apierr.Error) {
		return e.RenameProject(rc.user, rc.param("account_id"), rc.param("project_id"), p)
	})))
	r.DELETE(project, s.wrap(project, session, func(rc *reqCtx) {
		rc.respondBody(e.ArchiveProject(rc.user, rc.param("account_id"), rc.param("project_id")))
	}))

	const members = account + "/members"
	const member = members + "/{user_id}"
	r.GET(members, s.wrap(members, session, listed(func(rc *reqCtx, limit int) ([]byte, *apierr.Error) {
		return e.ListMembers(rc.user, rc.param("account_id"), limit)
	})))
	r.PATCH(member, s.wrap(member, session, decoded(false, 200, func(rc *reqCtx, p *actors.MemberParams) ([]byte, *apierr.Error) {
		return e.UpdateMember(rc.user, rc.param("account_id"), rc.param("user_id"), p)
	})))
	r.DELETE(member, s.wrap(member, session, func(rc *reqCtx) {
		rc.respondBody(e.RemoveMember(rc.user, rc.param("account_id"), rc.param("user_id")))
	}))

	const invitations = account + "/invitations"
	const invitation = invitations + "/{invitation_id}"
	r.GET(invitations, s.wrap(invitations, session, listed(func(rc *reqCtx, limit int) ([]byte, *apierr.Error) {
		return e.ListInvitations(rc.user, rc.param("account_id"), limit)
	})))
	r.POST(invitations, s.wrap(invitations, session, decoded(false, 201, func(rc *reqCtx, p *actors.InvitationParams) ([]byte, *apierr.Error) {
		return e.CreateInvitation(rc.user, rc.param("account_id"), p)
	})))
	r.DELETE(invitation, s.wrap(invitation, session, func(rc *reqCtx) {
		rc.respondBody(e.RevokeInvitation(rc.user, rc.param("account_id"), rc.param("invitation_id")))
	}))
	r.POST("/v1/invitations/accept", s.wrap("/v1/invitations/accept", session, decoded(false, 200, func(rc *reqCtx, p *actors.AcceptParams) ([]byte, *apierr.Error) {
		return e.AcceptInvitation(rc.user, p)
	})))
	const audit = account + "/audit-logs"
	r.GET(audit, s.wrap(audit, session, listed(func(rc *reqCtx, limit int) ([]byte, *apierr.Error) {
		return e.ListAccountAuditLogs(rc.user, rc.param("account_id"), limit)
	})))
}

// maxGoogleCodeBytes bounds the authorization code passed to the provider.
const maxGoogleCodeBytes = 2048

// googleError maps the provider's error classes to the envelope.
func googleError(err error) *apierr.Error {
	switch {
	case errors.Is(err, googleauth.ErrInvalidState):
		return apierr.Invalid("state", "state is not valid")
	case errors.Is(err, googleauth.ErrRejected):
		return apierr.New(apierr.AuthenticationFailed, "the identity provider did not confirm this sign-in; start again")
	default:
		return apierr.New(apierr.ServiceUnavailable, "the identity provider could not be reached; retry shortly")
	}
}

// sessionPrefix is the dashboard session token's prefix.
var sessionPrefix = []byte(auth.SessionTokenPrefix)

func isSessionToken(token []byte) bool { return bytes.HasPrefix(token, sessionPrefix) }
