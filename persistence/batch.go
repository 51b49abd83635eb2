package persistence

import "fmt"

// Batch is the writes of one state change, applied atomically by Commit or
// CommitAndWait of the store that made it (Storage.NewBatch). It is owned
// by the goroutine that built it until then.
//
// Adding to a batch has no operating error to report: Pebble's Set, Delete
// and DeleteRange fail only on an indexed batch whose index is full, and
// NewBatch makes unindexed ones (a batch past 4 GiB panics inside Pebble);
// a batch of another store only records the writes. So the policy is that
// a failed write is a bug: it panics with an assertion, never returns an
// error for callers to drop. Operating errors (a disk or a cluster that
// refuses the batch) come from Commit and CommitAndWait.
type Batch struct {
	w      BatchWriter
	writes int
}

// BatchWriter is where a Batch's writes go: a Pebble batch, or the record
// of another store's batch. Each store makes its own (NewBatchOf) and takes
// it back at commit (Batch.Writer).
type BatchWriter interface {
	Set(key, value []byte) error
	Delete(key []byte) error
	// TruncateJournal drops actorID's journal entries up to and including
	// throughSeq, which a snapshot in the same batch covers. A store may
	// apply it within the batch (Pebble: a range deletion) or after the
	// batch is durable (JetStream: a purge): recovery skips entries a
	// snapshot covers either way, so a truncation lost in a crash costs
	// space, never state.
	TruncateJournal(actorID string, throughSeq uint64) error
	Empty() bool
	// Close releases a batch that will not be committed.
	Close() error
}

// NewBatchOf wraps a store's writer into a Batch.
func NewBatchOf(w BatchWriter) *Batch { return &Batch{w: w} }

// Writer is the store's writer inside b, for the store's Commit.
func (b *Batch) Writer() BatchWriter { return b.w }

// Set adds key = value.
func (b *Batch) Set(key, value []byte) {
	if err := b.w.Set(key, value); err != nil {
		panic(fmt.Sprintf("persistence: assertion failed: batch Set: %v", err))
	}
	b.writes++
}

// Delete adds the deletion of key.
func (b *Batch) Delete(key []byte) {
	if err := b.w.Delete(key); err != nil {
		panic(fmt.Sprintf("persistence: assertion failed: batch Delete: %v", err))
	}
	b.writes++
}

// Writes is how many sets and deletes were added to b (a key written
// twice counts twice), to hold a batch to Storage.MaxBatchWrites.
func (b *Batch) Writes() int { return b.writes }

// TruncateJournal adds the removal of actorID's journal entries up to and
// including throughSeq (see BatchWriter.TruncateJournal).
func (b *Batch) TruncateJournal(actorID string, throughSeq uint64) {
	if err := b.w.TruncateJournal(actorID, throughSeq); err != nil {
		panic(fmt.Sprintf("persistence: assertion failed: batch TruncateJournal: %v", err))
	}
}

// Empty reports whether nothing was added to b.
func (b *Batch) Empty() bool { return b.w.Empty() }

// Discard releases a batch that will not be committed. Closing a batch
// that was never applied cannot fail (Pebble reports only a second close,
// a bug: it panics).
func (b *Batch) Discard() {
	if err := b.w.Close(); err != nil {
		panic(fmt.Sprintf("persistence: assertion failed: batch discarded twice: %v", err))
	}
}
