package actors

import (
	"errors"
	"log/slog"

	"rtcd/persistence"
)

// A cluster places a workspace's wallet, projects and rooms together on
// one node (docs/cluster.md), so any node must tell a project's workspace
// without its actor: the p/<project> entry that lists the project names
// it. Projects created since then get it in their Genesis batch; a store
// written before gets it once, at Start, from the recovered projects.

// projectAccountIndexBatch bounds the entries written per batch when the
// index is built.
const projectAccountIndexBatch = 1024

// projectAccountIndexBuilt marks a store whose p/ entries all name their
// workspace.
var projectAccountIndexBuilt = persistence.Key(persistence.PrefixMeta, "project-account-index")

// ensureProjectAccountIndex fills the p/ entries left empty by an older
// store from the records the recovered projects published, in batches of
// projectAccountIndexBatch or fewer on a store that takes fewer writes in
// a batch (one is kept for the mark).
func (e *Engine) ensureProjectAccountIndex() error {
	store := e.env.Store
	if _, err := store.Get(projectAccountIndexBuilt); !errors.Is(err, persistence.ErrNotFound) {
		return err // built (nil), or the store failed
	}
	var empty []string
	err := store.Scan([]byte(persistence.PrefixProject), 0, func(key, value []byte) bool {
		if len(value) == 0 {
			empty = append(empty, string(key[len(persistence.PrefixProject):]))
		}
		return true
	})
	if err != nil {
		return err
	}
	perBatch := projectAccountIndexBatch
	if m := store.MaxBatchWrites(); m > 0 {
		perBatch = max(1, min(perBatch, m-1))
	}
	b := store.NewBatch()
	n := 0
	for _, id := range empty {
		h, ok := e.project(id)
		if !ok {
			continue
		}
		rec := h.gate.Record.Load()
		if rec == nil || rec.AccountID == "" {
			continue
		}
		b.Set(persistence.Key(persistence.PrefixProject, id), []byte(rec.AccountID))
		if n++; n%perBatch == 0 {
			if err := store.CommitAndWait(b); err != nil {
				return err
			}
			b = store.NewBatch()
		}
	}
	b.Set(projectAccountIndexBuilt, nil)
	if err := store.CommitAndWait(b); err != nil {
		return err
	}
	if n > 0 {
		slog.Info("named the workspace of every project", "projects", n)
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
