package server

import (
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"

	"rtcd/cluster"
	api "rtcd/http"
	"rtcd/metrics"
	"rtcd/persistence"
)

// joinCluster makes this server a node of the cluster --cluster-name names
// (docs/cluster.md): it registers in etcd, serves the requests other
// nodes forward for the workspaces placed here, places a workspace's
// actors here at its first request (PlaceWorkspace) and releases them
// when it moves (ReleaseWorkspace). apiSrv then sends every request to
// its workspace's node.
func (st *startup) joinCluster(apiSrv *api.Server) error {
	cfg := st.cfg
	secret := st.keys.ClusterSecret()
	engine := st.s.engine
	node, err := cluster.Join(cluster.Config{
		Name: cfg.ClusterName, EtcdEndpoints: cfg.EtcdEndpoints(),
		Listen: cfg.ClusterListen, Advertise: cfg.ClusterAdvertise,
		Secret:   hex.EncodeToString(secret[:]),
		Serve:    func(_ string, request []byte) []byte { return apiSrv.ServeForwarded(request) },
		OnPlaced: engine.PlaceWorkspace,
		OnMoved:  engine.ReleaseWorkspace,
	})
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	st.onFailure(node.Leave)
	st.s.node = node
	apiSrv.SetCluster(node)
	st.m.Cluster.SetMembers(func() int { return len(node.Members()) })
	return nil
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
