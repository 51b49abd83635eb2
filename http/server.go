package http

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/goccy/go-json"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"rtcd/actors"
	"rtcd/apierr"
	"rtcd/googleauth"
	"rtcd/ids"
	"rtcd/metrics"
	"rtcd/scopes"
)

// Named bounds of the HTTP layer. docs/api.md lists them.
const (
	// MaxRequestBodyBytes bounds every request body; larger bodies get 413.
	MaxRequestBodyBytes = 64 * 1024
	// MaxConcurrentRequests bounds requests served at once; past it the API
	// answers 503 service_unavailable in the envelope. It also bounds how
	// many commands can wait in actor mailboxes.
	MaxConcurrentRequests = 16384
	// fasthttpConcurrency is fasthttp's own hard cap, above ours so that our
	// envelope, not fasthttp's plain-text refusal, is what callers see.
	fasthttpConcurrency = 2 * MaxConcurrentRequests
	// MaxRequestIDBytes bounds a caller-supplied X-Request-Id.
	MaxRequestIDBytes = 64
	// MaxRequestHeaderBytes bounds the request head (request line and every
	// header, as sent); it is fasthttp's read buffer, which must hold the
	// whole head. A larger head is answered 431 in the envelope.
	MaxRequestHeaderBytes = 16 * 1024
	// MaxRequestTargetBytes bounds the request target (path and query);
	// longer is 414.
	MaxRequestTargetBytes = 8 * 1024
	// MaxHeaderFieldBytes bounds one header line (name, colon, value);
	// longer is 431. Like nginx's and Apache's 8 KiB per line, within the
	// 16 KiB of the whole head.
	MaxHeaderFieldBytes = 8 * 1024
	readTimeout         = 30 * time.Second
	writeTimeout        = 30 * time.Second
	idleTimeout         = 120 * time.Second
)

// Server is the API's HTTP front.
type Server struct {
	engine  *actors.Engine
	metrics *metrics.Metrics
	router  *router.Router
	// trustForwardedFor takes the source IP from X-Forwarded-For's last
	// hop, for deployments behind a proxy the operator controls.
	trustForwardedFor bool
	systemInfo        []byte               // the body of GET /v1/system/info, encoded once
	google            *googleauth.Provider // nil: Google sign-in is off
	inFlight          atomic.Int64         // requests being served (MaxConcurrentRequests)
	connectOK         prometheus.Counter   // rtcd_connect_results_total{code="ok"}, resolved once; nil without metrics
	// cors is each registered route's CORS policy (cors.go), by path.
	cors map[string]corsPolicy
	// dashboardOrigin is the origin of a dashboard served elsewhere than
	// the API ("" when it is the API's own): the one origin the session
	// routes answer CORS for (AllowDashboardOrigin).
	dashboardOrigin string
	// callCSP is the Content-Security-Policy of the dashboard's call page
	// (SetMediaEndpoint; "" until set: the dashboard's own).
	callCSP string
	// cluster places requests on their workspace's node (SetCluster); nil
	// on a single node.
	cluster Router
	// payments is the payment provider whose callbacks the server takes.
	payments Payments
	// clusterInternal runs the internal requests of other cluster nodes.
	clusterInternal fasthttp.RequestHandler
	// directoryRoutes are the routes the directory serves (dashboard
	// session routes and sign-in), which a cluster places on its node.
	directoryRoutes routePatterns
}

// SystemInfo is the body of GET /v1/system/info.
type SystemInfo struct {
	Object     string `json:"object"`
	Service    string `json:"service"`
	APIVersion string `json:"api_version"`
	Version    string `json:"version"`
	Region     string `json:"region"`
}

// New builds the router over engine.
func New(engine *actors.Engine, m *metrics.Metrics, version string, trustForwardedFor bool, pay Payments) *Server {
	s := &Server{engine: engine, metrics: m, router: router.New(), trustForwardedFor: trustForwardedFor}
	if m != nil {
		s.connectOK = m.ConnectResults.WithLabelValues("ok")
	}
	s.systemInfo, _ = json.Marshal(SystemInfo{Object: "system_info", Service: "rtcd", APIVersion: "v0.1", Version: version, Region: engine.Region()})
	r := s.router
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleMethodNotAllowed = true
	r.HandleOPTIONS = false
	r.NotFound = s.wrap("unmatched", noAuth, func(rc *reqCtx) {
		rc.fail(apierr.New(apierr.InvalidRequest, "no route %s %s", rc.ctx.Method(), rc.ctx.Path()).WithStatus(404))
	})
	r.MethodNotAllowed = s.wrap("unmatched", noAuth, func(rc *reqCtx) {
		s.trimAllow(rc.ctx)
		rc.fail(apierr.New(apierr.InvalidRequest, "method %s is not allowed on %s", rc.ctx.Method(), rc.ctx.Path()).WithStatus(405))
	})
	r.PanicHandler = func(ctx *fasthttp.RequestCtx, v any) {
		slog.Error("handler panic", "panic", fmt.Sprint(v), "path", string(ctx.Path()))
		rc := &reqCtx{ctx: ctx, requestID: string(ctx.Response.Header.Peek("X-Request-Id"))}
		rc.fail(apierr.New(apierr.Internal, "internal error"))
	}
	s.routes()
	s.billingRoutes(pay)
	s.dashboardRoutes()
	s.dashboardPages()
	if m != nil {
		m.InitRoutes(s.Routes())
	}
	return s
}

// trimAllow drops OPTIONS from the Allow header the router set on a 405:
// the router always adds it, but a path without an OPTIONS route refuses
// OPTIONS itself, and Allow lists what the path really serves (RFC 9110
// section 10.2.1).
func (s *Server) trimAllow(ctx *fasthttp.RequestCtx) {
	if h, _ := s.router.Lookup(fasthttp.MethodOptions, string(ctx.Path()), nil); h != nil {
		return
	}
	var kept []string
	for _, m := range strings.Split(string(ctx.Response.Header.Peek("Allow")), ",") {
		if m = strings.TrimSpace(m); m != "" && m != fasthttp.MethodOptions {
			kept = append(kept, m)
		}
	}
	ctx.Response.Header.Set("Allow", strings.Join(kept, ", "))
}

// Handler is the fasthttp handler of the API: on a cluster node, the one
// that sends each request to its workspace's node (cluster.go).
func (s *Server) Handler() fasthttp.RequestHandler {
	if s.cluster != nil {
		return s.clusteredHandler
	}
	return s.router.Handler
}

// Routes lists the registered routes: method to paths, in the router's
// {param} syntax. The e2e suite compares it with docs/openapi.yaml. The
// result is a copy; changing it does not change the router.
func (s *Server) Routes() map[string][]string {
	out := make(map[string][]string, len(s.router.List()))
	for method, paths := range s.router.List() {
		out[method] = append([]string(nil), paths...)
	}
	return out
}

// NewFastHTTPServer returns a fasthttp server with the API's limits and
// timeouts, and an error handler that answers malformed and oversized
// requests in the error envelope.
func (s *Server) NewFastHTTPServer() *fasthttp.Server {
	return &fasthttp.Server{
		Handler:                       s.Handler(),
		Name:                          "rtcd",
		MaxRequestBodySize:            MaxRequestBodyBytes,
		ReadBufferSize:                MaxRequestHeaderBytes,
		Concurrency:                   fasthttpConcurrency,
		ReadTimeout:                   readTimeout,
		WriteTimeout:                  writeTimeout,
		IdleTimeout:                   idleTimeout,
		DisableHeaderNamesNormalizing: false,
		NoDefaultServerHeader:         false,
		NoDefaultContentType:          true,
		// No route takes multipart bodies: one is refused (415) as not
		// JSON, never parsed (and a malformed one is not a malformed
		// request).
		DisablePreParseMultipartForm: true,
		ErrorHandler: func(ctx *fasthttp.RequestCtx, err error) {
			rc := &reqCtx{ctx: ctx, requestID: requestID(ctx), route: "unmatched"}
			ctx.Response.Header.Set("X-Request-Id", rc.requestID)
			if string(ctx.Path()) == connectPath {
				// A browser must be able to read why its connect was refused.
				rc.route = connectPath
			}
			defer s.applyCORS(rc)
			var smallBuffer *fasthttp.ErrSmallBuffer
			if errors.Is(err, fasthttp.ErrBodyTooLarge) {
				drainRefusedBody(ctx)
				rc.fail(apierr.New(apierr.InvalidRequest, "request body exceeds %d bytes", MaxRequestBodyBytes).
					WithDetails("limit_bytes", MaxRequestBodyBytes).WithStatus(413))
			} else if errors.As(err, &smallBuffer) || errors.Is(err, fasthttp.ErrSmallReadBuffer) {
				// The head did not fit the read buffer (MaxRequestHeaderBytes).
				drainRefusedBody(ctx)
				rc.fail(apierr.New(apierr.InvalidRequest, "the request line and headers exceed %d bytes", MaxRequestHeaderBytes).
					WithDetails("limit_bytes", MaxRequestHeaderBytes).WithStatus(431))
			} else {
				rc.fail(apierr.New(apierr.InvalidRequest, "malformed HTTP request"))
			}
			if s.metrics != nil {
				// Refused before routing, so counted under the unmatched route.
				s.metrics.ObserveHTTP("unmatched", ctx.Method(), ctx.Response.StatusCode(), -1)
			}
		},
	}
}

// Bounds of draining a refused (oversized) request body; see drainRefusedBody.
const (
	drainMaxBytes = 4 << 20
	drainMaxWait  = 2 * time.Second
	drainIdleGap  = 100 * time.Millisecond
)

// drainRefusedBody reads and discards what the client is still sending of a
// body (or head) refused as too large, before the 413 (431) is written and
// the connection closed. Closing a socket with unread data makes the kernel
// reset the connection, and the reset can destroy the answer before the
// client reads it.
// Bounded: at most drainMaxBytes within drainMaxWait, stopping once the
// client pauses for drainIdleGap; a declared body larger than drainMaxBytes
// is not drained at all.
func drainRefusedBody(ctx *fasthttp.RequestCtx) {
	c := ctx.Conn()
	if c == nil || ctx.Request.Header.ContentLength() > drainMaxBytes {
		return
	}
	deadline := time.Now().Add(drainMaxWait)
	buf := make([]byte, 32*1024)
	for total := 0; total < drainMaxBytes; {
		d := time.Now().Add(drainIdleGap)
		if d.After(deadline) {
			d = deadline
		}
		if c.SetReadDeadline(d) != nil {
			return
		}
		n, err := c.Read(buf)
		total += n
		if err != nil {
			return
		}
	}
}

// projectIDHeader names the project a dashboard session acts on, on a
// project route.
const projectIDHeader = "X-Project-Id"

// authMode says what credential a route needs.
type authMode int

const (
	noAuth   authMode = iota // POST /v1/connect (token in the body), fallbacks
	apiKey                   // Bearer sk_live_…, or a session with X-Project-Id
	apiKeyNo                 // the same, no particular scope
	session                  // Bearer rtc_us_… (dashboard routes)
)

// reqCtx is one request's context.
type reqCtx struct {
	ctx       *fasthttp.RequestCtx
	requestID string
	route     string                // the route's path (its label in metrics)
	caller    *actors.Caller        // project routes
	user      *actors.DashboardUser // dashboard routes
}

func (s *Server) wrap(route string, mode authMode, h func(rc *reqCtx), required ...scopes.Scope) fasthttp.RequestHandler {
	if s.cors == nil {
		s.cors = map[string]corsPolicy{}
	}
	if _, ok := s.cors[route]; !ok {
		// The first route registered on a path decides (a preflight, added
		// later, keeps the policy of the route it answers for).
		s.cors[route] = corsOf(route, mode)
	}
	if mode == session || strings.HasPrefix(route, "/v1/auth/") {
		s.directoryRoutes.add(route)
	}
	return func(ctx *fasthttp.RequestCtx) {
		start := time.Now()
		rc := &reqCtx{ctx: ctx, requestID: requestID(ctx), route: route}
		ctx.Response.Header.Set("X-Request-Id", rc.requestID)
		n := s.inFlight.Add(1)
		defer s.finish(rc, route, start) // also when h panics
		switch {
		case !supportedProtocol(ctx.Request.Header.Protocol()):
			// RFC 9110 section 15.6.6: a major version we do not speak.
			ctx.SetConnectionClose()
			rc.fail(apierr.New(apierr.InvalidRequest, "HTTP version %q is not supported; send HTTP/1.1", ctx.Request.Header.Protocol()).
				WithDetails("supported", []string{"HTTP/1.1", "HTTP/1.0"}).WithStatus(505))
		case ambiguousFraming(&ctx.Request.Header):
			// RFC 9112 section 6.1: a message with both Transfer-Encoding and
			// Content-Length may be refused, and the connection must then be
			// closed; a proxy in front could have framed it by the other
			// header (request smuggling).
			ctx.SetConnectionClose()
			rc.fail(apierr.New(apierr.InvalidRequest, "send either Content-Length or Transfer-Encoding, not both").
				WithDetails("header", "Transfer-Encoding"))
		case n > MaxConcurrentRequests:
			rc.ctx.Response.Header.Set("Retry-After", "1")
			rc.fail(apierr.New(apierr.ServiceUnavailable, "the server is at its limit of %d requests in flight; retry shortly", MaxConcurrentRequests))
		case len(ctx.Request.Header.RequestURI()) > MaxRequestTargetBytes:
			rc.fail(apierr.New(apierr.InvalidRequest, "the request target exceeds %d bytes", MaxRequestTargetBytes).
				WithDetails("limit_bytes", MaxRequestTargetBytes).WithStatus(414))
		case longestLine(ctx.Request.Header.RawHeaders()) > MaxHeaderFieldBytes:
			rc.fail(apierr.New(apierr.InvalidRequest, "a request header exceeds %d bytes", MaxHeaderFieldBytes).
				WithDetails("limit_bytes", MaxHeaderFieldBytes).WithStatus(431))
		case s.repeatedQueryParameter(rc):
		case s.authorize(rc, mode, required):
			h(rc)
		}
	}
}

// finish ends a request wrap started: it answers a panic of the handler with
// a 500 in the envelope, frees the request's in-flight slot and records the
// metrics with the status actually sent. It is deferred, so it runs however
// the handler returns.
func (s *Server) finish(rc *reqCtx, route string, start time.Time) {
	if v := recover(); v != nil {
		slog.Error("handler panic", "panic", fmt.Sprint(v), "path", string(rc.ctx.Path()), "request_id", rc.requestID)
		rc.ctx.Response.Reset()
		rc.ctx.Response.Header.Set("X-Request-Id", rc.requestID)
		rc.fail(apierr.New(apierr.Internal, "internal error"))
	}
	s.applyCORS(rc)
	s.inFlight.Add(-1)
	if s.metrics != nil {
		s.metrics.ObserveHTTP(route, rc.ctx.Method(), rc.ctx.Response.StatusCode(), time.Since(start).Seconds())
	}
}

// supportedProtocol reports whether proto is HTTP/1.x: fasthttp accepts any
// "HTTP/d.d" in the request line and would answer HTTP/9.9 as HTTP/1.1. A
// higher minor version of 1 is served as 1.1 (RFC 9110 section 2.5).
func supportedProtocol(proto []byte) bool {
	return len(proto) == len("HTTP/1.1") && bytes.HasPrefix(proto, []byte("HTTP/1."))
}

// ambiguousFraming reports whether the request carried both a
// Transfer-Encoding and a Content-Length header. fasthttp frames such a body
// by Transfer-Encoding and keeps only that one in the parsed header, so the
// raw head is what shows the second; it is read only for chunked requests,
// which are rare, so the common path pays nothing.
func ambiguousFraming(h *fasthttp.RequestHeader) bool {
	if h.ContentLength() != -1 {
		return false
	}
	for raw := h.RawHeaders(); len(raw) > 0; {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if name, _, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(bytes.TrimSpace(name), []byte("Content-Length")) {
			return true
		}
	}
	return false
}

// repeatedQueryParameter answers 400 when a query parameter appears more
// than once (?limit=1&limit=500): which of the values counts is a guess a
// client cannot see, so neither is taken. It reports whether it answered.
func (s *Server) repeatedQueryParameter(rc *reqCtx) bool {
	args := rc.ctx.QueryArgs()
	if args.Len() < 2 {
		return false
	}
	seen := make(map[string]struct{}, args.Len())
	repeated := ""
	for key := range args.All() {
		if _, dup := seen[string(key)]; dup && repeated == "" {
			repeated = string(key)
		}
		seen[string(key)] = struct{}{}
	}
	if repeated == "" {
		return false
	}
	rc.fail(apierr.Invalid(repeated, "query parameter %s may appear once", repeated))
	return true
}

// longestLine is the length of the longest line of a raw header block,
// without its line ending.
func longestLine(b []byte) int {
	longest := 0
	for len(b) > 0 {
		n := bytes.IndexByte(b, '\n')
		if n < 0 {
			n = len(b)
		}
		l := n
		if l > 0 && b[l-1] == '\r' {
			l--
		}
		longest = max(longest, l)
		b = b[min(n+1, len(b)):]
	}
	return longest
}

// authorize authenticates the bearer credential and checks scopes.
func (s *Server) authorize(rc *reqCtx, mode authMode, required []scopes.Scope) bool {
	if mode == noAuth {
		return true
	}
	token, ok := bearerToken(rc.ctx)
	if !ok {
		rc.ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="rtcd"`)
		if mode == session {
			rc.fail(apierr.New(apierr.AuthenticationFailed, "send a dashboard session as Authorization: Bearer rtc_us_…"))
		} else {
			rc.fail(apierr.New(apierr.AuthenticationFailed, "send an API key as Authorization: Bearer sk_live_…"))
		}
		return false
	}
	if mode == session {
		return s.authorizeSession(rc, token)
	}
	var caller *actors.Caller
	var err *apierr.Error
	if isSessionToken(token) {
		// A dashboard session on a project route names its project.
		projectID := rc.ctx.Request.Header.Peek(projectIDHeader)
		if len(projectID) == 0 {
			rc.fail(apierr.New(apierr.InvalidRequest, "a dashboard session on a project route needs the X-Project-Id header").
				WithDetails("header", "X-Project-Id"))
			return false
		}
		caller, err = s.engine.AuthenticateSessionForProject(string(token), string(projectID))
	} else {
		caller, err = s.engine.Authenticate(string(token))
	}
	if err != nil {
		if err.Code == apierr.AuthenticationFailed {
			rc.ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="rtcd", error="invalid_token"`)
		}
		rc.fail(err)
		return false
	}
	for _, sc := range required {
		if !caller.Scopes.Has(sc) {
			msg := apierr.New(apierr.PermissionDenied, "this API key lacks the %s scope", sc.Name())
			if caller.ActorType == "user" {
				msg = apierr.New(apierr.PermissionDenied, "the %s role does not allow this (it needs the %s scope)", caller.Role, sc.Name()).
					WithDetails("role", caller.Role)
			}
			rc.fail(msg.WithDetails("required_scope", sc.Name()))
			return false
		}
	}
	caller.RequestID = rc.requestID
	caller.SourceIP = s.sourceIP(rc.ctx)
	rc.caller = caller
	return true
}

// bearerToken is the credential of the request's Authorization header
// ("Bearer <token>"; the scheme is case-insensitive, RFC 9110 section
// 11.1, so "bearer" works); ok is false without one.
func bearerToken(ctx *fasthttp.RequestCtx) (token []byte, ok bool) {
	authz := ctx.Request.Header.Peek("Authorization")
	const bearer = "Bearer "
	if len(authz) <= len(bearer) || !bytes.EqualFold(authz[:len(bearer)-1], []byte(bearer[:len(bearer)-1])) || authz[len(bearer)-1] != ' ' {
		return nil, false
	}
	return authz[len(bearer):], true
}

// authorizeSession authenticates a dashboard route's session token.
func (s *Server) authorizeSession(rc *reqCtx, token []byte) bool {
	if !isSessionToken(token) {
		rc.ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="rtcd", error="invalid_token"`)
		rc.fail(apierr.New(apierr.AuthenticationFailed, "dashboard routes take a session token (rtc_us_…), not an API key"))
		return false
	}
	user, err := s.engine.AuthenticateSession(string(token))
	if err != nil {
		rc.ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="rtcd", error="invalid_token"`)
		rc.fail(err)
		return false
	}
	user.RequestID = rc.requestID
	user.SourceIP = s.sourceIP(rc.ctx)
	rc.user = user
	return true
}

// requestID is the caller's X-Request-Id when it is a short token of safe
// characters (prefixed with req_ if it lacks it), else a fresh id; a bare
// "req_" gets a fresh id too.
func requestID(ctx *fasthttp.RequestCtx) string {
	v := ctx.Request.Header.Peek("X-Request-Id")
	if len(v) == 0 || len(v) > MaxRequestIDBytes {
		return ids.New(ids.Request)
	}
	for _, c := range v {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return ids.New(ids.Request)
		}
	}
	if len(v) >= len(ids.Request) && string(v[:len(ids.Request)]) == ids.Request {
		if len(v) == len(ids.Request) {
			// A bare "req_" names nothing: neither kept (an empty id) nor
			// prefixed again (req_req_).
			return ids.New(ids.Request)
		}
		return string(v)
	}
	return ids.Request + string(v)
}

func (s *Server) sourceIP(ctx *fasthttp.RequestCtx) string {
	if s.trustForwardedFor {
		if xff := ctx.Request.Header.Peek("X-Forwarded-For"); len(xff) > 0 {
			last := xff
			for i := len(xff) - 1; i >= 0; i-- {
				if xff[i] == ',' {
					last = xff[i+1:]
					break
				}
			}
			if ip := net.ParseIP(string(trimSpace(last))); ip != nil {
				return ip.String()
			}
		}
	}
	return ctx.RemoteIP().String()
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// errorEnvelope is the spec's error object.
type errorEnvelope struct {
	Error errorBody `json:"error"`
}

type errorBody struct {
	Code      apierr.Code    `json:"code"`
	Message   string         `json:"message"`
	RequestID string         `json:"request_id"`
	Details   map[string]any `json:"details"`
}

func (rc *reqCtx) fail(err *apierr.Error) {
	details := err.Details
	if details == nil {
		details = map[string]any{}
	}
	if err.RetryAfterSeconds > 0 {
		rc.ctx.Response.Header.Set("Retry-After", strconv.Itoa(err.RetryAfterSeconds))
	}
	if err.RateLimit > 0 || err.Code == apierr.RateLimited {
		rc.ctx.Response.Header.Set("X-RateLimit-Limit", strconv.Itoa(err.RateLimit))
		rc.ctx.Response.Header.Set("X-RateLimit-Remaining", "0")
	}
	if err.Code == apierr.Internal {
		slog.Error("internal error", "request_id", rc.requestID, "error", err.Message)
	}
	body, _ := json.Marshal(errorEnvelope{Error: errorBody{Code: err.Code, Message: err.Message, RequestID: rc.requestID, Details: details}})
	rc.ctx.SetStatusCode(apierr.StatusOf(err))
	rc.ctx.SetContentType("application/json")
	rc.ctx.SetBody(body)
}

func (rc *reqCtx) ok(status int, body []byte) {
	rc.ctx.SetStatusCode(status)
	rc.ctx.SetContentType("application/json")
	rc.ctx.SetBody(body)
}

func (rc *reqCtx) respond(res actors.Result, err *apierr.Error) {
	if err != nil {
		rc.fail(err)
		return
	}
	if res.Replayed {
		rc.ctx.Response.Header.Set("Idempotent-Replayed", "true")
	}
	rc.ok(res.Status, res.Body)
}

func (rc *reqCtx) respondBody(body []byte, err *apierr.Error) {
	if err != nil {
		rc.fail(err)
		return
	}
	rc.ok(200, body)
}

func (rc *reqCtx) param(name string) string {
	v, _ := rc.ctx.UserValue(name).(string)
	return v
}
