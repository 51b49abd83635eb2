package persistence

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrFenced is the refusal of a batch that appends to a journal another
// writer has claimed or appended to since this writer claimed it
// (Storage.ClaimJournal): this process no longer owns that actor, and must
// stop serving it rather than write anything more for it. Nothing of the
// refused batch is written. Stores with one writer never return it.
var ErrFenced = errors.New("persistence: fenced: another writer owns this journal")

// ErrUnavailable wraps a read that the store could not answer for now (a
// replicated store with no reachable server or leader): a caller answers
// 503, retryable, not 500.
var ErrUnavailable = errors.New("persistence: the store is unavailable")

// Storage is everything the actors persist through: batches of sets and
// deletes committed all or nothing, point reads, prefix scans in key order,
// and the durability barrier. Store (Pebble, one node) is its first
// implementation; persistence/jsstore (NATS JetStream, replicated) the
// second. Both pass the shared suite in persistence/storetest, which is
// the contract written as tests; what follows is the contract in words.
//
//   - NewBatch returns an empty batch for one state change. Its writes are
//     invisible until committed, and then all visible, or, after a crash
//     or a refusal, none.
//   - Commit hands a batch over without waiting for it to be durable and
//     calls done once it is (on a goroutine of the store, in commit order).
//     Writes committed before a Get or Scan starts are seen by it. A batch
//     the store cannot take is reported to the store's fatal handler and
//     done never runs: the caller has already changed its state in memory.
//   - CommitAndWait is Commit for callers that hold no state ahead of the
//     store (bootstrap, the webhook dispatcher): it returns once the batch
//     is durable, or the error.
//   - AfterDurable calls done once every batch committed before the call is
//     durable.
//   - Get returns a copy of a key's value or ErrNotFound; Scan calls fn for
//     each key under a prefix in bytewise key order, at most limit times
//     (limit <= 0: no limit).
//   - ClaimJournal is called by a journal's recovery before it reads
//     anything: from then on this process is the journal's writer, and a
//     store that fences (JetStream) refuses this writer's appends to that
//     journal once another writer has claimed or appended to it since
//     (ErrFenced). Pebble has one writer per directory (the data directory
//     lock) and does nothing.
//   - MaxBatchWrites is the most writes one batch may hold (distinct keys,
//     plus one per journal it appends to), 0 for no limit: Pebble has
//     none, JetStream takes at most 1000 messages in an atomic batch. A
//     caller that gathers work into one batch (the webhook fan-out, say)
//     stops there and takes the rest in the next batch.
//   - SnapshotSeconds is where a journal reports the time to encode and add
//     a snapshot to its batch; nil observes nothing.
//   - Close waits for pending commits and releases the store. No Commit may
//     be running or start after it.
type Storage interface {
	NewBatch() *Batch
	Commit(b *Batch, done func())
	CommitAndWait(b *Batch) error
	AfterDurable(done func())
	Get(key []byte) ([]byte, error)
	Scan(prefix []byte, limit int, fn func(key, value []byte) bool) error
	ScanFrom(prefix, from []byte, limit int, fn func(key, value []byte) bool) error
	ClaimJournal(actorID string) error
	MaxBatchWrites() int
	SnapshotSeconds() prometheus.Observer
	Close() error
}

var _ Storage = (*Store)(nil)
