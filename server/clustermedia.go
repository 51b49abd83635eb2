package server

import (
	"context"
	"encoding/json"
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
	cm.st.m.Cluster.SetMediaNodes(len(nodes))
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

// mediaReporter is what takes the reports of media nodes run on their
// own: the engine, or on a cluster node the engine with presence
// snapshots split over the members.
func (st *startup) mediaReporter() reportReceiver {
	rep := engineReporter{st.s.engine}
	if st.s.node == nil {
		return rep
	}
	return clusterReporter{engineReporter: rep, node: st.s.node}
}

// clusterReporter is a cluster node's reportReceiver. Joins and leaves go
// through the engine, which passes each to its room's workspace's node;
// a presence snapshot goes to every member, each with the sessions of the
// workspaces it owns in this node's view (maybe none: it still tells the
// member that the media node is alive).
type clusterReporter struct {
	engineReporter
	node *cluster.Node
}

// maxPresencePartBytes bounds one member's part of a presence snapshot
// (below cluster.MaxForwardedBytes with room for the request's head); a
// larger part is sent as Partial: the node alive, no reconciliation by
// it this time (joins and leaves still come as reports).
const maxPresencePartBytes = cluster.MaxForwardedBytes - 64<<10

func (r clusterReporter) Presence(p media.PresenceReport) {
	members, fingerprint := r.node.View()
	parts := make(map[string]*actors.PresencePart, len(members))
	for _, m := range members {
		parts[m.ID] = &actors.PresencePart{Presence: actors.MediaPresence{NodeID: p.NodeID, At: p.At}, Fingerprint: fingerprint}
	}
	lookupFailed := false
	partOf := func(s media.SessionInfo) *actors.PresencePart {
		accountID, ok, err := r.e.WorkspaceOfProject(s.ProjectID)
		if err != nil {
			lookupFailed = true
			return nil
		}
		if !ok {
			return nil // a project no workspace names: nobody's room
		}
		owner, ok := cluster.OwnerIn(members, accountID)
		if !ok {
			return nil
		}
		return parts[owner.ID]
	}
	for _, s := range p.Sessions {
		if part := partOf(s); part != nil {
			part.Presence.Sessions = append(part.Presence.Sessions, sessionJoin(s))
		}
	}
	for _, s := range p.Pending {
		if part := partOf(s); part != nil {
			part.Presence.Pending = append(part.Presence.Pending, sessionJoin(s))
		}
	}
	if lookupFailed {
		// A session whose workspace the store did not name may be in no
		// part: every member takes the snapshot as the node being alive.
		slog.Warn("cluster: the store did not name a session's workspace; a media node's presence is passed on as the node being alive", "node_id", p.NodeID)
	}
	var sending sync.WaitGroup
	for _, m := range members {
		if lookupFailed {
			parts[m.ID].Partial, parts[m.ID].Presence.Sessions, parts[m.ID].Presence.Pending = true, nil, nil
		}
		body, err := json.Marshal(parts[m.ID])
		if err == nil && len(body) > maxPresencePartBytes {
			slog.Warn("cluster: a media node's presence part is too large to pass on; sent as the node being alive", "node_id", p.NodeID, "member", m.Address, "bytes", len(body))
			parts[m.ID].Partial, parts[m.ID].Presence.Sessions, parts[m.ID].Presence.Pending = true, nil, nil
			body, err = json.Marshal(parts[m.ID])
		}
		if err != nil {
			continue
		}
		sending.Add(1)
		go func() {
			defer sending.Done()
			raw, err := r.node.SendTo(m, internalRequest(engineCallPath+"?call="+actors.MediaPresenceCall, body))
			if err == nil {
				_, err = internalAnswer(raw)
			}
			if err != nil {
				slog.Warn("cluster: a media node's presence did not reach a member", "node_id", p.NodeID, "member", m.Address, "error", err)
			}
		}()
	}
	sending.Wait()
}
