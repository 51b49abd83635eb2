package actors

import (
	"errors"
	"log/slog"

	"rtcd/actors/core"
	"rtcd/auth"
	"rtcd/persistence"
)

// The key-hash index (kh/<hash> -> project id) lets a node that does not
// own a key's project find it, to send the request to its owner
// (docs/cluster.md). Keys created since it exists get their record in
// their creating batch; a store written before gets the records of its
// active keys once, at Start (revoked keys need none: a key without a
// record is refused where it arrives, as its owner would refuse it).

// keyHashIndexBatch bounds the records written per batch when the index is
// built.
const keyHashIndexBatch = 1024

// keyHashIndexBuilt marks a store whose kh/ index holds every active key.
var keyHashIndexBuilt = persistence.Key(persistence.PrefixMeta, "key-hash-index")

// ensureKeyHashIndex builds the index once, from the keys the projects
// published at recovery, in batches of keyHashIndexBatch or fewer on a
// store that takes fewer writes in a batch (one is kept for the mark).
func (e *Engine) ensureKeyHashIndex() error {
	store := e.env.Store
	if _, err := store.Get(keyHashIndexBuilt); !errors.Is(err, persistence.ErrNotFound) {
		return err // built (nil), or the store failed
	}
	perBatch := keyHashIndexBatch
	if m := store.MaxBatchWrites(); m > 0 {
		perBatch = max(1, min(perBatch, m-1))
	}
	b := store.NewBatch()
	n := 0
	var err error
	e.env.APIKeys.RangeHashes(func(hash [32]byte, rec *core.KeyRecord) {
		if err != nil {
			return
		}
		b.Set(core.KeyHashKey(hash), []byte(rec.ProjectID))
		if n++; n%perBatch == 0 {
			if err = store.CommitAndWait(b); err == nil {
				b = store.NewBatch()
			}
		}
	})
	if err != nil {
		return err
	}
	b.Set(keyHashIndexBuilt, nil)
	if err := store.CommitAndWait(b); err != nil {
		return err
	}
	if n > 0 {
		slog.Info("indexed the project of every active API key", "keys", n)
	}
	return nil
}

// ProjectOfAPIKey is the project an API key secret belongs to, read from
// the key-hash index (a store read, not the local registry), so that any
// node can tell which project's owner must decide a request. It says
// nothing about whether the key is active: the owner decides that. ok is
// false for a malformed secret or one that names no key.
func (e *Engine) ProjectOfAPIKey(secret string) (projectID string, ok bool, err error) {
	if !auth.CheckAPIKeyFormat(secret) {
		return "", false, nil
	}
	v, err := e.env.Store.Get(core.KeyHashKey(e.env.Keys.HashAPIKey(secret)))
	if errors.Is(err, persistence.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return string(v), true, nil
}
