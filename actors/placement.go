package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"rtcd/actors/core"
	"rtcd/actors/project"
	"rtcd/auth"
	"rtcd/ids"
	"rtcd/persistence"
)

// A cluster places a workspace's wallet, projects and rooms together on
// one node (docs/cluster.md), so any node must tell a project's workspace
// without its actor (the p/<project> entry that lists the project names
// it), and the node placing a workspace must find its projects (the
// wp/<account>/<project> entries). Projects created since then get both in
// their Genesis batch; a store written before gets them once, at Start,
// from the recovered projects.

// projectIndexBatch bounds the projects indexed per batch when an index
// is built.
const projectIndexBatch = 512

// projectAccountIndexBuilt marks a store whose p/ entries all name their
// workspace and whose wp/ entries list every project;
// projectRecordIndexBuilt one where every project has its pr/ record.
var (
	projectAccountIndexBuilt = persistence.Key(persistence.PrefixMeta, "project-workspace-index")
	projectRecordIndexBuilt  = persistence.Key(persistence.PrefixMeta, "project-record-index")
)

// ensureProjectIndexes writes, for every recovered project, the entries a
// cluster reads of it on any node (p/ naming its workspace, wp/ listing it
// in its workspace, pr/ its record), once per store: each index is marked
// built by its own key.
func (e *Engine) ensureProjectIndexes() error {
	err := e.ensureProjectIndex(projectAccountIndexBuilt, 2, func(b *persistence.Batch, rec *core.Project) {
		b.Set(persistence.Key(persistence.PrefixProject, rec.ID), []byte(rec.AccountID))
		b.Set(project.WorkspaceKey(rec.AccountID, rec.ID), nil)
	})
	if err != nil {
		return fmt.Errorf("project-workspace index: %w", err)
	}
	if err := e.ensureProjectIndex(projectRecordIndexBuilt, 1, project.WriteRecord); err != nil {
		return fmt.Errorf("project-record index: %w", err)
	}
	return nil
}

// ensureProjectIndex writes, unless mark is set, write's entries for
// every recovered project (writesPerProject of them), in batches of
// projectIndexBatch projects or fewer on a store that takes fewer writes
// in a batch (one kept for the mark), then sets mark.
func (e *Engine) ensureProjectIndex(mark []byte, writesPerProject int, write func(*persistence.Batch, *core.Project)) error {
	store := e.env.Store
	if _, err := store.Get(mark); !errors.Is(err, persistence.ErrNotFound) {
		return err // built (nil), or the store failed
	}
	var projectIDs []string
	err := store.Scan([]byte(persistence.PrefixProject), 0, func(key, _ []byte) bool {
		projectIDs = append(projectIDs, string(key[len(persistence.PrefixProject):]))
		return true
	})
	if err != nil {
		return err
	}
	perBatch := projectIndexBatch
	if m := store.MaxBatchWrites(); m > 0 {
		perBatch = max(1, min(perBatch, (m-1)/writesPerProject))
	}
	b := store.NewBatch()
	n := 0
	for _, id := range projectIDs {
		h, ok := e.project(id)
		if !ok {
			continue
		}
		rec := h.gate.Record.Load()
		if rec == nil || rec.AccountID == "" {
			continue
		}
		write(b, rec)
		if n++; n%perBatch == 0 {
			if err := store.CommitAndWait(b); err != nil {
				return err
			}
			b = store.NewBatch()
		}
	}
	b.Set(mark, nil)
	if err := store.CommitAndWait(b); err != nil {
		return err
	}
	if n > 0 {
		slog.Info("indexed every project", "index", string(mark), "projects", n)
	}
	return nil
}

// AccountOfProject is the workspace a project belongs to, read from its
// p/ entry (a store read, not the project's actor), so that any node can
// tell where the project is placed. ok is false for a project that does
// not exist (or, on a store whose index is not built yet, one whose entry
// is empty).
func (e *Engine) AccountOfProject(projectID string) (accountID string, ok bool, err error) {
	if projectID == "" {
		return "", false, nil
	}
	v, err := e.env.Store.Get(persistence.Key(persistence.PrefixProject, projectID))
	if errors.Is(err, persistence.ErrNotFound) || (err == nil && len(v) == 0) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return string(v), true, nil
}

// StartClustered starts the engine as one node of a cluster (Start
// recovers everything; this recovers nothing): a workspace's wallet,
// projects and rooms run here from PlaceWorkspace to ReleaseWorkspace,
// while the cluster places it here. The store's indexes must be built, as
// every node reads them to place requests: a store written before them is
// started once without a cluster first.
func (e *Engine) StartClustered() error {
	for _, mark := range [][]byte{keyHashIndexBuilt, projectAccountIndexBuilt, projectRecordIndexBuilt} {
		if _, err := e.env.Store.Get(mark); errors.Is(err, persistence.ErrNotFound) {
			return fmt.Errorf("actors: the store's index %s is not built: start it once without a cluster to build it", mark)
		} else if err != nil {
			return err
		}
	}
	e.env.Clustered = true
	e.system.EventStream.Subscribe(e.onDeadLetter)
	e.startLoops()
	return nil
}

// PlaceWorkspace recovers a workspace's wallet, then its projects with
// their live rooms, and returns once they serve (at once if they already
// run here). Its recoveries claim their journals, so a node that ran
// them before is fenced from then on. A workspace the store does not
// hold places nothing. On an error nothing of the workspace runs here.
func (e *Engine) PlaceWorkspace(accountID string) error {
	e.placing.Lock()
	defer e.placing.Unlock()
	if _, ok := e.wallet(accountID); ok {
		return nil
	}
	if _, err := e.env.Store.Get(persistence.Key(persistence.PrefixAccount, accountID)); errors.Is(err, persistence.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	var projectIDs []string
	prefix := project.WorkspaceKey(accountID, "")
	err := e.env.Store.Scan(prefix, 0, func(key, _ []byte) bool {
		projectIDs = append(projectIDs, string(key[len(prefix):]))
		return true
	})
	if err != nil {
		return err
	}
	// The wallet first: every project links to its credit gate.
	wallets := &core.Recovery{}
	e.spawnWallet(accountID, wallets)
	if err := wallets.Wait(); err != nil {
		e.releaseWorkspaceLocked(accountID, nil)
		return fmt.Errorf("actors: place workspace %s: %w", accountID, err)
	}
	projects := &core.Recovery{}
	for _, id := range projectIDs {
		e.spawnProject(id, nil, projects)
	}
	if err := projects.Wait(); err != nil {
		e.releaseWorkspaceLocked(accountID, projectIDs)
		return fmt.Errorf("actors: place workspace %s: %w", accountID, err)
	}
	return nil
}

// ReleaseWorkspace ends its rooms' sessions on this node's media node
// (the clients connect again, through the new owner), stops a
// workspace's actors as Stop stops all of them (rooms drained first, then
// projects, then the wallet), forgets their
// handles and what they published (API keys, webhook workers), and
// returns once every batch they committed is durable, so that what they
// acknowledged is in the store before another node recovers them.
func (e *Engine) ReleaseWorkspace(accountID string) {
	e.placing.Lock()
	defer e.placing.Unlock()
	var projectIDs []string
	e.projects.Range(func(k, v any) bool {
		if rec := v.(*projectHandle).gate.Record.Load(); rec != nil && rec.AccountID == accountID {
			projectIDs = append(projectIDs, k.(string))
		}
		return true
	})
	e.releaseWorkspaceLocked(accountID, projectIDs)
}

// releaseWorkspaceLocked is ReleaseWorkspace of the wallet and the given
// projects; e.placing is held.
func (e *Engine) releaseWorkspaceLocked(accountID string, projectIDs []string) {
	owned := make(map[string]bool, len(projectIDs))
	for _, id := range projectIDs {
		owned[id] = true
	}
	var roomIDs []string
	e.rooms.Range(func(k, v any) bool {
		if owned[v.(*roomHandle).projectID] {
			roomIDs = append(roomIDs, k.(string))
		}
		return true
	})
	// The media node here stops serving the rooms first: their sessions'
	// leaves reach the rooms before they drain (recorded, unless the new
	// owner has fenced them), and the clients connect again, through the
	// room's new node.
	if releaser, ok := e.env.Media.Engine().(core.RoomReleaser); ok {
		for _, id := range roomIDs {
			releaser.ReleaseRoom(id)
		}
	}
	var rooms []*actor.PID
	var draining []*actor.Future
	for _, id := range roomIDs {
		if h, ok := e.room(id); ok {
			rooms = append(rooms, h.pid)
			draining = append(draining, e.system.Root.PoisonFuture(h.pid))
			e.rooms.Delete(id)
			e.env.Media.ForgetRoom(id)
		}
	}
	for i, f := range draining {
		if f.Wait() != nil {
			_ = e.system.Root.StopFuture(rooms[i]).Wait()
		}
	}
	var stopping []*actor.Future
	var idle []*core.WebhookEndpoint
	for _, id := range projectIDs {
		if h, ok := e.project(id); ok {
			if eps := h.gate.Endpoints.Load(); eps != nil {
				idle = append(idle, *eps...)
			}
			stopping = append(stopping, e.system.Root.StopFuture(h.pid))
			e.projects.Delete(id)
		}
	}
	if h, ok := e.wallet(accountID); ok {
		stopping = append(stopping, e.system.Root.StopFuture(h.pid))
		e.wallets.Delete(accountID)
	}
	for _, f := range stopping {
		_ = f.Wait()
	}
	e.env.APIKeys.Update(func(m map[[32]byte]*core.KeyRecord) {
		for hash, rec := range m {
			if owned[rec.ProjectID] {
				delete(m, hash)
			}
		}
	})
	e.dispatcher.IdleWorkers(idle)
	durable := make(chan struct{})
	e.env.Store.AfterDurable(func() { close(durable) })
	<-durable
}

// maxPlacementCacheEntries bounds each of the engine's placement caches
// (key hash -> workspace, project -> workspace). Both mappings never
// change once written, so a cached entry is never stale; a full cache is
// emptied and fills again from the store.
const maxPlacementCacheEntries = 65536

// placementCache is one bounded cache of an immutable mapping, read on
// every placed request (a read lock), written on a miss.
type placementCache struct {
	mu      sync.RWMutex
	entries map[string]string
}

func (c *placementCache) get(k string) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.entries[k]
	return v, ok
}

func (c *placementCache) put(k, v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= maxPlacementCacheEntries {
		c.entries = make(map[string]string)
	}
	c.entries[k] = v
}

// WorkspaceOfProject is AccountOfProject through the engine's cache: the
// workspace that places a project's requests in a cluster.
func (e *Engine) WorkspaceOfProject(projectID string) (accountID string, ok bool, err error) {
	if v, ok := e.projectWorkspaces.get(projectID); ok {
		return v, true, nil
	}
	accountID, ok, err = e.AccountOfProject(projectID)
	if ok {
		e.projectWorkspaces.put(projectID, accountID)
	}
	return accountID, ok, err
}

// WorkspaceOfAPIKey is the workspace whose node decides a request made
// with an API key secret (ProjectOfAPIKey, then its project's workspace);
// ok is false for a secret that names no key.
func (e *Engine) WorkspaceOfAPIKey(secret string) (accountID string, ok bool, err error) {
	if !auth.CheckAPIKeyFormat(secret) {
		return "", false, nil
	}
	hash := e.env.Keys.HashAPIKey(secret)
	if v, ok := e.keyWorkspaces.get(string(hash[:])); ok {
		return v, true, nil
	}
	projectID, ok, err := e.ProjectOfAPIKey(secret)
	if !ok || err != nil {
		return "", ok, err
	}
	accountID, ok, err = e.WorkspaceOfProject(projectID)
	if ok {
		e.keyWorkspaces.put(string(hash[:]), accountID)
	}
	return accountID, ok, err
}

// WorkspaceOfParticipantToken is the workspace whose node decides a
// connect made with a participant token; ok is false for a token that
// does not verify (any node refuses it as its owner would).
func (e *Engine) WorkspaceOfParticipantToken(token string) (accountID string, ok bool, err error) {
	claims, verr := e.env.Keys.VerifyParticipantToken(token, e.env.Clock.Now())
	if verr != nil {
		return "", false, nil
	}
	return e.WorkspaceOfProject(claims.ProjectID)
}

// WorkspaceOfPayment is the workspace whose wallet a payment tops up (the
// pd/ index), for the payment provider's callbacks; ok is false for an id
// that names no payment.
func (e *Engine) WorkspaceOfPayment(paymentID string) (accountID string, ok bool, err error) {
	if !ids.Valid(paymentID, ids.Payment) {
		return "", false, nil
	}
	v, err := e.env.Store.Get(persistence.Key(persistence.PrefixPayment, paymentID))
	if errors.Is(err, persistence.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return string(v), true, nil
}
