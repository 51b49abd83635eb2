package http

import (
	"net/url"
	"regexp"
	"strings"

	"rtcd/apierr"
	"rtcd/web/dashboard"
)

// The web dashboard's pages, served on the API listener (docs/dashboard.md,
// "The web dashboard"). It is a client of the public API like any other:
// these routes serve its files and nothing else.

// TopupReturnPath is the dashboard's page of one top-up (followed by its
// payment id): where a payer comes back to from the provider's checkout.
const TopupReturnPath = "/billing/topups/"

// dashboardPagePaths are the addresses the dashboard draws; each answers
// with the same page, whose script draws what the address names. Anything
// else outside /v1 is a 404 as before.
var dashboardPagePaths = []string{
	"/",
	"/sign-in",
	"/sign-in/{page}",
	"/invitations/accept",
	"/account",
	"/p/{project_id}/{page:*}",
	"/a/{account_id}/{page:*}",
	TopupReturnPath + "{payment_id}",
}

// dashboardCSP allows the page's own script, style and API calls and
// nothing else: no inline script or style, no other origin, no framing.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; manifest-src 'self'; form-action 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'"

// The call page (/p/{project}/rooms/{room}/call) is the one dashboard page
// that holds a call through the web SDK: its document may use the camera,
// the microphone and screen sharing of its own origin, and reach the media
// node's WebSocket; every other page keeps them off. The browser applies a
// document's policies for its whole life, so the dashboard opens the call
// page with a full page load, never by its in-page router.
var callPagePath = regexp.MustCompile(`^/p/[^/]+/rooms/[^/]+/call/?$`)

const (
	dashboardPermissions = "camera=(), microphone=(), geolocation=(), payment=()"
	callPagePermissions  = "camera=(self), microphone=(self), display-capture=(self), geolocation=(), payment=()"
)

// SetMediaEndpoint names the media endpoint POST /v1/connect returns (a
// ws:// or wss:// address), which the call page's Content-Security-Policy
// lets it reach. Call it before serving; without it the call page reaches
// its own origin only.
func (s *Server) SetMediaEndpoint(endpoint string) {
	s.callCSP = callPageCSP(endpoint)
}

// callPageCSP is dashboardCSP whose connect-src adds the media endpoint's
// origin.
func callPageCSP(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return dashboardCSP
	}
	return strings.Replace(dashboardCSP, "connect-src 'self';", "connect-src 'self' "+u.Scheme+"://"+u.Host+";", 1)
}

// assetMaxAgeSeconds is how long a browser keeps a versioned asset: a new
// build changes its URL (?v=), so it can be kept for a year.
const assetMaxAgeSeconds = "31536000"

func (s *Server) dashboardPages() {
	r := s.router
	page := s.wrap("dashboard_page", noAuth, func(rc *reqCtx) {
		h := &rc.ctx.Response.Header
		setDashboardSecurityHeaders(rc)
		if callPagePath.Match(rc.ctx.Path()) {
			csp := s.callCSP
			if csp == "" {
				csp = dashboardCSP
			}
			h.Set("Content-Security-Policy", csp)
			h.Set("Permissions-Policy", callPagePermissions)
		}
		h.Set("Cache-Control", "no-cache")
		rc.ctx.SetStatusCode(200)
		rc.ctx.SetContentType("text/html; charset=utf-8")
		rc.ctx.SetBody(dashboard.Index())
	})
	for _, p := range dashboardPagePaths {
		r.GET(p, page)
		r.HEAD(p, page)
	}
	asset := s.wrap("dashboard_asset", noAuth, func(rc *reqCtx) {
		a, ok := dashboard.Lookup(rc.param("file"))
		if !ok {
			rc.fail(apierr.New(apierr.InvalidRequest, "no dashboard asset %q", rc.param("file")).WithStatus(404))
			return
		}
		h := &rc.ctx.Response.Header
		setDashboardSecurityHeaders(rc)
		h.Set("ETag", `"`+a.Version+`"`)
		if string(rc.ctx.QueryArgs().Peek("v")) == a.Version {
			h.Set("Cache-Control", "public, max-age="+assetMaxAgeSeconds+", immutable")
		} else {
			h.Set("Cache-Control", "no-cache")
		}
		if match := rc.ctx.Request.Header.Peek("If-None-Match"); string(match) == `"`+a.Version+`"` {
			rc.ctx.SetStatusCode(304)
			return
		}
		rc.ctx.SetStatusCode(200)
		rc.ctx.SetContentType(a.ContentType)
		rc.ctx.SetBody(a.Body)
	})
	r.GET("/assets/{file}", asset)
	r.HEAD("/assets/{file}", asset)
}

// setDashboardSecurityHeaders sets what every dashboard file is served
// with (docs/dashboard.md, "Security").
func setDashboardSecurityHeaders(rc *reqCtx) {
	h := &rc.ctx.Response.Header
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", dashboardPermissions)
}
