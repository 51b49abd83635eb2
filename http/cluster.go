package http

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/valyala/fasthttp"
	"rtcd/actors"
	"rtcd/apierr"
	"rtcd/cluster"
)

// On a cluster node (docs/cluster.md) each workspace's actors run on one
// node, its owner, and any node takes any request: the entry node finds
// the workspace a request belongs to (from its API key or, for a connect,
// its participant token: store indexes that never change, cached) and
// runs it where the workspace is placed, in this process or on the owner
// in one hop (raw HTTP, with the source IP the entry node saw). A request
// that names no workspace (a malformed or unknown credential, health,
// the system info) is answered here: any node answers it as its owner
// would. The owner authenticates and decides, so what it refuses (a
// revoked key) is refused through every node at once.

// Router runs a request where its placement key is owned (cluster.Node).
type Router interface {
	Route(key string, local func(), raw func() []byte) ([]byte, error)
}

// ClusterInternalHeader marks a request a node sends another on its own
// behalf (an operator command it authorized), which the owner runs with
// the handler SetClusterInternal gave, not the API's routes. The entry
// node drops any a client sent.
const ClusterInternalHeader = "X-Rtcd-Cluster-Internal"

// forwardedClientIPHeader carries, from the entry node to the owner, the
// source IP the entry node took for the request (its rate limit is per
// address). The entry node drops any a client sent.
const forwardedClientIPHeader = "X-Rtcd-Forwarded-Client-Ip"

// SetCluster makes the server a cluster node's: requests run where their
// workspace is placed. Call before NewFastHTTPServer.
func (s *Server) SetCluster(r Router) { s.cluster = r }

// SetClusterInternal sets the handler of the internal requests other
// nodes send (ClusterInternalHeader).
func (s *Server) SetClusterInternal(h fasthttp.RequestHandler) { s.clusterInternal = h }

// clusteredHandler is the API's handler on a cluster node.
func (s *Server) clusteredHandler(ctx *fasthttp.RequestCtx) {
	ctx.Request.Header.Del(forwardedClientIPHeader)
	ctx.Request.Header.Del(ClusterInternalHeader)
	key, ok, err := s.placementOf(ctx)
	if err != nil {
		s.failUnplaced(ctx, fmt.Errorf("%w: %w", errStoreLookup, err))
		return
	}
	if !ok {
		s.router.Handler(ctx)
		return
	}
	raw, err := s.cluster.Route(key, func() { s.router.Handler(ctx) }, func() []byte { return s.forwardable(ctx) })
	switch {
	case err != nil:
		s.failUnplaced(ctx, err)
	case raw != nil:
		if ctx.IsHead() {
			ctx.Response.SkipBody = true
		}
		if rerr := ReadRawResponse(raw, &ctx.Response); rerr != nil {
			s.failUnplaced(ctx, rerr)
		}
	}
}

// placementOf is the workspace a request must run on: its participant
// token's for a connect, its payment's for the payment provider's
// callback (a provider sends one event a callback), its API key's for a
// request that bears one; ok is false for a request that names none
// (answered on the entry node).
func (s *Server) placementOf(ctx *fasthttp.RequestCtx) (key string, ok bool, err error) {
	if ctx.IsPost() && string(ctx.Path()) == connectPath {
		var p actors.ConnectParams
		if decodeConnect(ctx.PostBody(), ctx.Request.Header.ContentType(), &p) != nil || p.Token == nil {
			return "", false, nil
		}
		return s.engine.WorkspaceOfParticipantToken(*p.Token)
	}
	if ctx.IsPost() && s.payments.Provider != nil && string(ctx.Path()) == paymentCallbackPath(s.payments.Provider.Name()) {
		// The wallet of the payment decides; a callback that does not
		// verify is refused here, as its owner would refuse it.
		events, err := s.parseCallback(ctx)
		if err != nil || len(events) == 0 {
			return "", false, nil
		}
		return s.engine.WorkspaceOfPayment(events[0].PaymentID)
	}
	if s.directoryRoutes.match(ctx.Path()) {
		return actors.DirectoryKey, true, nil
	}
	token, ok := bearerToken(ctx)
	if !ok {
		return "", false, nil
	}
	if isSessionToken(token) {
		// A session on a project route runs on the project's node, which
		// asks the directory's node about the session.
		projectID := ctx.Request.Header.Peek(projectIDHeader)
		if len(projectID) == 0 {
			return "", false, nil
		}
		return s.engine.WorkspaceOfProject(string(projectID))
	}
	return s.engine.WorkspaceOfAPIKey(string(token))
}

// routePatterns is a set of route paths in the router's syntax, each
// "{param}" segment matching any one segment.
type routePatterns struct {
	seen     map[string]bool
	patterns [][]string // split at '/'
}

func (r *routePatterns) add(route string) {
	if r.seen == nil {
		r.seen = make(map[string]bool)
	}
	if !r.seen[route] {
		r.seen[route] = true
		r.patterns = append(r.patterns, strings.Split(route, "/"))
	}
}

// match tells whether path is one of the routes.
func (r *routePatterns) match(path []byte) bool {
	for _, p := range r.patterns {
		if matchSegments(p, path) {
			return true
		}
	}
	return false
}

func matchSegments(pattern []string, path []byte) bool {
	for i, seg := range pattern {
		var part []byte
		if j := bytes.IndexByte(path, '/'); j >= 0 {
			part, path = path[:j], path[j+1:]
		} else {
			part, path = path, nil
			if i != len(pattern)-1 {
				return false
			}
		}
		if strings.HasPrefix(seg, "{") {
			if len(part) == 0 {
				return false
			}
		} else if string(part) != seg {
			return false
		}
	}
	return path == nil
}

// ReadRawResponse reads a raw HTTP response another node answered into
// res.
func ReadRawResponse(raw []byte, res *fasthttp.Response) error {
	return res.Read(bufio.NewReader(bytes.NewReader(raw)))
}

// forwardable is the request as raw HTTP for its owner, carrying the
// source IP this node took.
func (s *Server) forwardable(ctx *fasthttp.RequestCtx) []byte {
	ctx.Request.Header.Set(forwardedClientIPHeader, s.sourceIP(ctx))
	var b bytes.Buffer
	_, _ = ctx.Request.WriteTo(&b) // a bytes.Buffer takes every write
	return b.Bytes()
}

// ServeForwarded runs a raw request another node forwarded here (this
// node owns its workspace) as if it had arrived here from the source IP
// the entry node took, and returns the raw response.
func (s *Server) ServeForwarded(raw []byte) []byte {
	var req fasthttp.Request
	// The entry node bounded an API request's body (MaxRequestBodyBytes);
	// a node's internal request (a media node's presence part) may be
	// larger, up to what the cluster carries.
	if err := req.ReadLimitBody(bufio.NewReader(bytes.NewReader(raw)), cluster.MaxForwardedBytes); err != nil {
		// The entry node sent what it parsed itself: a bug, not a client's.
		slog.Error("cluster: a forwarded request does not parse", "error", err)
		var res fasthttp.Response
		res.SetStatusCode(fasthttp.StatusBadRequest)
		return []byte(res.String())
	}
	ip := net.ParseIP(string(req.Header.Peek(forwardedClientIPHeader)))
	req.Header.Del(forwardedClientIPHeader)
	internal := len(req.Header.Peek(ClusterInternalHeader)) > 0
	req.Header.Del(ClusterInternalHeader)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: ip}, nil)
	switch {
	case !internal:
		s.router.Handler(&ctx)
	case s.clusterInternal != nil:
		s.clusterInternal(&ctx)
	default:
		ctx.SetStatusCode(fasthttp.StatusNotFound)
	}
	var b bytes.Buffer
	_, _ = ctx.Response.WriteTo(&b)
	return b.Bytes()
}

// failUnplaced answers a request that could not reach its workspace's
// node (the members are changing, this node lost its lease, or the owner
// could not place it): 503, to be retried.
func (s *Server) failUnplaced(ctx *fasthttp.RequestCtx, err error) {
	rc := &reqCtx{ctx: ctx, requestID: requestID(ctx), route: "unmatched"}
	if string(ctx.Path()) == connectPath {
		rc.route = connectPath // a browser must read why its connect was refused
	}
	ctx.Response.Reset()
	ctx.Response.Header.Set("X-Request-Id", rc.requestID)
	defer s.applyCORS(rc)
	slog.Warn("cluster: a request could not reach its workspace's node", "path", string(ctx.Path()), "request_id", rc.requestID, "error", err)
	e := apierr.New(apierr.ServiceUnavailable, "the node serving this project is changing; retry shortly")
	e.RetryAfterSeconds = 1
	if errors.Is(err, errStoreLookup) {
		e.Message = "the store did not answer; retry shortly"
	}
	rc.fail(e)
	if s.metrics != nil {
		s.metrics.ObserveHTTP("unmatched", ctx.Method(), ctx.Response.StatusCode(), -1)
	}
}

// errStoreLookup marks a placement the store did not answer.
var errStoreLookup = errors.New("placement lookup failed")
