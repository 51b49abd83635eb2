package http

import (
	"bytes"
	"net/url"
	"slices"
	"strings"

	"rtcd/auth"
)

// Cross-origin requests (CORS). A browser lets a page of one origin read
// what another origin answers only when the answer says so. rtcd says so
// for exactly two kinds of routes (docs/api.md, "Browsers and CORS"):
//
//   - POST /v1/connect, from any origin: the participant token in the body
//     is the credential, so a web client on the customer's own site may
//     call it. No cookies or other credentials are involved, so the answer
//     is "*" and never Access-Control-Allow-Credentials.
//   - The routes that accept a dashboard session (the dashboard routes, the
//     sign-in routes, and project routes called with a session and
//     X-Project-Id), for the configured dashboard origin only, and only
//     when it differs from the API's own (a dashboard served by rtcd itself
//     is same-origin and needs nothing). A project route called with a
//     secret API key never answers CORS: the spec keeps secret keys out of
//     client applications, and a browser is one.
//
// Everything else (the payment provider's callbacks, the sandbox's pages,
// the dashboard's files) answers no CORS headers to anyone.

// corsPolicy is what a route answers to a cross-origin browser.
type corsPolicy int

const (
	corsNone      corsPolicy = iota // no CORS headers
	corsAnyOrigin                   // "*", no credentials: POST /v1/connect
	corsDashboard                   // the configured dashboard origin, for session callers
)

// Bounds and lists of the CORS answers.
const (
	// corsPreflightMaxAgeSeconds is how long a browser may reuse a
	// preflight's answer (Chromium caps it at 7200).
	corsPreflightMaxAgeSeconds = "600"
	// corsExposedHeaders are the response headers a page may read besides
	// the CORS-safelisted ones: the request id to quote to support, and
	// what a client needs to back off.
	corsExposedHeaders = "Retry-After, X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, Idempotent-Replayed"
	// connectAllowedHeaders are the request headers a page may send to
	// POST /v1/connect: its body's type and an optional request id.
	connectAllowedHeaders = "Content-Type, X-Request-Id"
	// dashboardAllowedHeaders are those the dashboard sends.
	dashboardAllowedHeaders = "Authorization, Content-Type, X-Project-Id, Idempotency-Key, X-Request-Id"
)

// corsOf is the policy of a route, from its path and what it authenticates.
func corsOf(route string, mode authMode) corsPolicy {
	switch {
	case route == connectPath:
		return corsAnyOrigin
	case mode == session || mode == apiKey || mode == apiKeyNo:
		// Every project route also takes a session with X-Project-Id.
		return corsDashboard
	case strings.HasPrefix(route, "/v1/auth/"):
		// Sign-in: the dashboard calls these before it has a session.
		return corsDashboard
	}
	return corsNone
}

// NormalizeOrigin returns the origin of an http(s) URL as a browser sends it
// in the Origin header (scheme://host[:port], lower case, no default port,
// no path), or "" when raw is not one.
func NormalizeOrigin(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	port := u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host
}

// AllowDashboardOrigin turns on CORS for the dashboard at dashboardOrigin,
// when it differs from apiOrigin (both http(s) origins; a path is ignored).
// It registers the preflight (OPTIONS) of every route that accepts a
// dashboard session. Call it before serving; without it, only
// POST /v1/connect answers browsers of other origins.
func (s *Server) AllowDashboardOrigin(dashboardOrigin, apiOrigin string) {
	d := NormalizeOrigin(dashboardOrigin)
	if s.dashboardOrigin != "" || d == "" || d == NormalizeOrigin(apiOrigin) {
		return
	}
	s.dashboardOrigin = d
	for _, path := range s.pathsWithPolicy(corsDashboard) {
		s.preflight(path, dashboardAllowedHeaders)
	}
}

// pathsWithPolicy lists the registered paths whose routes have policy p.
func (s *Server) pathsWithPolicy(p corsPolicy) []string {
	var out []string
	for path, policy := range s.cors {
		if policy == p {
			out = append(out, path)
		}
	}
	slices.Sort(out)
	return out
}

// preflight registers OPTIONS on path: the answer to a browser's preflight
// (and to a plain OPTIONS), 204 with Allow and, for an origin the path
// answers, the CORS headers (set by finish, like every response's).
func (s *Server) preflight(path, allowedHeaders string) {
	methods := s.methodsOf(path)
	allow := strings.Join(append(methods, "OPTIONS"), ", ")
	s.router.OPTIONS(path, s.wrap(path, noAuth, func(rc *reqCtx) {
		h := &rc.ctx.Response.Header
		h.Set("Allow", allow)
		if rc.ctx.Request.Header.Peek("Access-Control-Request-Method") != nil && s.corsOrigin(rc) != "" {
			h.Set("Access-Control-Allow-Methods", allow)
			h.Set("Access-Control-Allow-Headers", allowedHeaders)
			h.Set("Access-Control-Max-Age", corsPreflightMaxAgeSeconds)
		}
		rc.ctx.SetStatusCode(204)
	}))
}

// methodsOf lists the methods registered on path, sorted.
func (s *Server) methodsOf(path string) []string {
	var out []string
	for method, paths := range s.router.List() {
		if method != "OPTIONS" && slices.Contains(paths, path) {
			out = append(out, method)
		}
	}
	slices.Sort(out)
	return out
}

// corsOrigin is the value of Access-Control-Allow-Origin for this request,
// or "" when it gets no CORS headers.
func (s *Server) corsOrigin(rc *reqCtx) string {
	origin := rc.ctx.Request.Header.Peek("Origin")
	if len(origin) == 0 {
		return ""
	}
	switch s.cors[rc.route] {
	case corsAnyOrigin:
		return "*"
	case corsDashboard:
		if s.dashboardOrigin == "" || string(origin) != s.dashboardOrigin || carriesAPIKey(rc) {
			return ""
		}
		return s.dashboardOrigin
	}
	return ""
}

// carriesAPIKey reports whether the request's bearer credential is a secret
// API key: such a request gets no CORS headers, whatever its origin.
func carriesAPIKey(rc *reqCtx) bool {
	authz := rc.ctx.Request.Header.Peek("Authorization")
	_, token, ok := bytes.Cut(authz, []byte(" "))
	return ok && bytes.HasPrefix(bytes.TrimSpace(token), []byte(auth.APIKeyPrefix))
}

// applyCORS sets the CORS headers of the response to rc (finish calls it
// for every response, errors included, so a page can read the envelope).
func (s *Server) applyCORS(rc *reqCtx) {
	policy := s.cors[rc.route]
	if policy == corsNone {
		return
	}
	h := &rc.ctx.Response.Header
	if policy == corsDashboard {
		// The answer depends on Origin: caches must keep them apart.
		h.Add("Vary", "Origin")
	}
	origin := s.corsOrigin(rc)
	if origin == "" {
		return
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Expose-Headers", corsExposedHeaders)
}
