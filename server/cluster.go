package server

import (
	"encoding/hex"
	"fmt"

	"rtcd/cluster"
	api "rtcd/http"
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
	return nil
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
