package persistence

import "fmt"

// barrierRecord is the WAL-only record of a durability barrier: it is
// written to the WAL and synced like any batch, but never reaches a memtable,
// so nothing reads it back.
var barrierRecord = []byte("rtcd/durability-barrier")

// AfterDurable calls done, on the syncer goroutine, once every batch
// committed before the call is durable. It is for a reply that reports a
// change an earlier batch made rather than one of its own, such as the
// repeat of a revocation whose first request is still waiting for its
// fsync: answered at once, it would acknowledge a change that a crash can
// still lose.
//
// The barrier is a batch of its own, holding only a WAL record: the WAL is
// written and synced in order, so once that batch is durable every batch
// applied before it is too, whatever order the syncer runs callbacks in.
func (s *Store) AfterDurable(done func()) {
	b := s.db.NewBatch()
	if err := b.LogData(barrierRecord, nil); err != nil {
		panic(fmt.Sprintf("persistence: assertion failed: barrier LogData: %v", err)) // as Batch.Set
	}
	s.Commit(NewBatchOf(pebbleBatch{pb: b}), done)
}
