package server

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync/atomic"

	"github.com/valyala/fasthttp"
	"rtcd/actors"
	"rtcd/apierr"
	"rtcd/cluster"
	api "rtcd/http"
	"rtcd/ids"
	"rtcd/metrics"
	"rtcd/persistence"
)

// joinCluster makes this server a node of the cluster --cluster-name names
// (docs/cluster.md): it registers in etcd, serves the requests other
// nodes forward for the workspaces (and the directory) placed here,
// places a workspace's actors here at its first request (Place) and
// releases them when it moves (Release). apiSrv then sends every request
// to its workspace's node, and the engine its calls to other nodes.
func (st *startup) joinCluster(apiSrv *api.Server) error {
	cfg := st.cfg
	secret := st.keys.ClusterSecret()
	engine := st.s.engine
	// The engine's peers and the internal requests' handler are in place
	// before Join: other nodes may send here as soon as it registers.
	peers := &enginePeers{engine: engine}
	engine.SetPeers(peers)
	// What the other nodes send here besides API requests: operator
	// commands, authorized where the operator sent them, and the engine's
	// calls.
	apiSrv.SetClusterInternal(func(ctx *fasthttp.RequestCtx) {
		switch string(ctx.Path()) {
		case adjustPath:
			adjustHandler(engine)(ctx)
		case engineCallPath:
			ctx.SetBody(engine.ServeCall(string(ctx.QueryArgs().Peek("call")), ctx.PostBody()))
		default:
			ctx.SetStatusCode(fasthttp.StatusNotFound)
		}
	})
	node, err := cluster.Join(cluster.Config{
		Name: cfg.ClusterName, EtcdEndpoints: cfg.EtcdEndpoints(),
		Listen: cfg.ClusterListen, Advertise: cfg.ClusterAdvertise,
		Secret:   hex.EncodeToString(secret[:]),
		Serve:    func(_ string, request []byte) []byte { return apiSrv.ServeForwarded(request) },
		OnPlaced: engine.Place,
		OnMoved:  engine.Release,
	})
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	st.onFailure(node.Leave)
	st.s.node = node
	peers.node.Store(node)
	apiSrv.SetCluster(node)
	st.m.Cluster.SetMembers(func() int { return len(node.Members()) })
	cm, err := st.watchClusterMedia()
	if err != nil {
		return err
	}
	st.onFailure(func() {
		ctx, cancel := context.WithTimeout(context.Background(), remoteMediaFlushOnFailure)
		defer cancel()
		cm.stop(ctx)
	})
	st.s.clusterMedia = cm
	return nil
}

// engineCallPath is the internal route of the engine's calls to another
// node (actors.Peers).
const engineCallPath = "/cluster/engine-call"

// enginePeers is actors.Peers over the cluster node: a call runs where its
// key is placed, in process or as an internal request one hop away. Until
// Join returns it has no node, and every call fails (a 503 to retry).
type enginePeers struct {
	node   atomic.Pointer[cluster.Node]
	engine *actors.Engine
}

// errNotJoined: a call before this node joined the cluster.
var errNotJoined = errors.New("cluster: this node is joining the cluster")

func (p *enginePeers) Fingerprint() uint64 {
	n := p.node.Load()
	if n == nil {
		return 0
	}
	_, fp := n.View()
	return fp
}

func (p *enginePeers) Owns(key string) bool {
	n := p.node.Load()
	if n == nil {
		return false
	}
	owner, ok := n.Owner(key)
	return ok && owner.ID == n.ID()
}

// Call runs a call where key is placed. It is made while a request holds
// another key's placement (a session on a project route asks the
// directory's node), so it does not wait for key to finish moving: two
// such calls in opposite directions would wait on each other's moves.
func (p *enginePeers) Call(key, name string, body []byte) ([]byte, error) {
	n := p.node.Load()
	if n == nil {
		return nil, errNotJoined
	}
	var answer []byte
	raw, err := n.RouteNested(key, func() { answer = p.engine.ServeCall(name, body) }, func() []byte {
		return internalRequest(engineCallPath+"?call="+url.QueryEscape(name), body)
	})
	if err != nil || raw == nil {
		return answer, err
	}
	return internalAnswer(raw)
}

// internalAnswer is the body of a raw answer to an internal request, which
// must be a 200.
func internalAnswer(raw []byte) ([]byte, error) {
	var res fasthttp.Response
	if err := api.ReadRawResponse(raw, &res); err != nil {
		return nil, err
	}
	if res.StatusCode() != fasthttp.StatusOK {
		return nil, fmt.Errorf("cluster: an internal request answered %d: %s", res.StatusCode(), res.Body())
	}
	return append([]byte(nil), res.Body()...), nil
}

// internalRequest is a raw internal request (api.ClusterInternalHeader)
// of body to path, for the node that owns its key.
func internalRequest(path string, body []byte) []byte {
	var r fasthttp.Request
	r.Header.SetMethod(fasthttp.MethodPost)
	r.SetRequestURI(path)
	r.Header.SetHost("rtcd-cluster") // HTTP/1.1 requires one; nothing reads it
	r.Header.Set(api.ClusterInternalHeader, "1")
	r.Header.SetContentType("application/json")
	r.SetBody(body)
	return []byte(r.String())
}

// fencedIsNotFatal is a cluster node's storage failure handler: a batch
// refused because another node took over its journal (ErrFenced: the
// workspace moved while this node still wrote for it, as after a pause
// past its lease) was never acknowledged, and only the actors of the moved
// workspace wrote it, which the node stops when it learns of the move; the
// node goes on serving its other workspaces and rejoins. Any other refusal
// goes to fatal.
func fencedIsNotFatal(fatal func(error), m func() *metrics.Metrics) func(error) {
	return func(err error) {
		if !errors.Is(err, persistence.ErrFenced) {
			fatal(err)
			return
		}
		slog.Warn("cluster: a write for a workspace that moved to another node was refused (fenced); nothing of it was acknowledged", "error", err)
		if mm := m(); mm != nil {
			mm.Cluster.Fenced()
		}
	}
}

// ClusterAddr is the node-to-node listener's address ("" on a single
// node).
func (s *Server) ClusterAddr() string {
	if s.node == nil {
		return ""
	}
	return s.node.Address()
}

// ClusterMembers is the number of members this node sees (0 on a single
// node).
func (s *Server) ClusterMembers() int {
	if s.node == nil {
		return 0
	}
	return len(s.node.Members())
}

// clusterAdjust runs an authorized `rtcd billing adjust` on the node whose
// wallet it adjusts: here (local), or on the workspace's owner in one hop,
// as an internal request the owner runs without asking for its own admin
// token (the hop carries the cluster's secret).
func clusterAdjust(node *cluster.Node, local fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		req, aerr := readAdjust(ctx)
		if aerr != nil {
			privateFail(ctx, aerr)
			return
		}
		if !ids.Valid(req.AccountID, ids.Account) {
			local(ctx) // no such workspace anywhere: answered here, placing nothing
			return
		}
		raw, err := node.Route(req.AccountID, func() { local(ctx) }, func() []byte {
			return internalRequest(adjustPath, ctx.PostBody())
		})
		switch {
		case err != nil:
			privateFail(ctx, apierr.New(apierr.ServiceUnavailable, "the workspace's node could not be reached (%v); retry shortly", err))
		case raw != nil:
			if rerr := api.ReadRawResponse(raw, &ctx.Response); rerr != nil {
				privateFail(ctx, apierr.New(apierr.ServiceUnavailable, "the workspace's node answered unreadably; retry"))
			}
		}
	}
}
