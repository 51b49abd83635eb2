package server

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"rtcd/actors"
	"rtcd/cluster"
	"rtcd/media"
)

// clusterMediaFlush bounds how long commands queued for a media node that
// left the cluster are still tried.
const clusterMediaFlush = 5 * time.Second

// clusterMedia follows the media nodes registered with the cluster
// (`rtcd media --cluster-name`) and hands the engine one command sender
// per node; the engine chooses a node for each room.
type clusterMedia struct {
	engine *actors.Engine
	key    [32]byte
	st     *startup
	watch  *cluster.MediaWatch

	mu      sync.Mutex
	senders map[string]*mediaSender // by node id
	closing sync.WaitGroup
}

type mediaSender struct {
	member cluster.MediaMember
	engine *media.HTTPEngine
}

// watchClusterMedia starts following the cluster's media nodes.
func (st *startup) watchClusterMedia() (*clusterMedia, error) {
	cm := &clusterMedia{engine: st.s.engine, key: MediaReportKey(st.keys.MediaToken()), st: st, senders: map[string]*mediaSender{}}
	w, err := cluster.WatchMedia(st.cfg.ClusterName, st.cfg.EtcdEndpoints(), cm.update)
	if err != nil {
		return nil, fmt.Errorf("cluster media nodes: %w", err)
	}
	cm.watch = w
	return cm, nil
}

// update takes the registered list: a sender per node, kept while the
// node stays registered at the same control URL.
func (cm *clusterMedia) update(members []cluster.MediaMember) {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	next := make(map[string]*mediaSender, len(members))
	nodes := make([]actors.MediaNode, 0, len(members))
	for _, m := range members {
		s, ok := cm.senders[m.ID]
		if !ok || s.member != m {
			e, err := media.NewHTTPEngine(media.HTTPConfig{BaseURL: strings.TrimRight(m.ControlURL, "/"), Key: cm.key, Clock: cm.st.clk})
			if err != nil {
				slog.Warn("cluster: a registered media node is left out", "node_id", m.ID, "control_url", m.ControlURL, "error", err)
				continue
			}
			s = &mediaSender{member: m, engine: e}
		}
		next[m.ID] = s
		nodes = append(nodes, actors.MediaNode{ID: m.ID, URL: m.MediaURL, Engine: s.engine})
	}
	cm.engine.SetMediaNodes(nodes)
	for id, s := range cm.senders {
		if next[id] != s {
			cm.closing.Add(1)
			go func() {
				defer cm.closing.Done()
				ctx, cancel := context.WithTimeout(context.Background(), clusterMediaFlush)
				defer cancel()
				_ = s.engine.Close(ctx)
			}()
		}
	}
	cm.senders = next
	slog.Info("cluster: media nodes", "registered", len(nodes))
}

// stop ends the watch and flushes every sender's queued commands, within
// ctx.
func (cm *clusterMedia) stop(ctx context.Context) {
	cm.watch.Close()
	cm.mu.Lock()
	for _, s := range cm.senders {
		_ = s.engine.Close(ctx)
	}
	cm.senders = nil
	cm.mu.Unlock()
	cm.closing.Wait()
}
