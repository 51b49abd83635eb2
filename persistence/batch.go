package persistence

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Batch is the writes of one state change, applied atomically by Commit or
// CommitAndWait. It is owned by the goroutine that built it until then.
//
// Adding to a batch has no operating error to report: Pebble's Set, Delete
// and DeleteRange fail only on an indexed batch whose index is full, and
// NewBatch makes unindexed ones (a batch past 4 GiB panics inside Pebble).
// So the policy is that a failed write is a bug: it panics with an
// assertion, never returns an error for callers to drop. Operating errors
// (a disk that refuses the batch) come from Commit and CommitAndWait.
type Batch struct {
	pb *pebble.Batch
}

// Set adds key = value.
func (b *Batch) Set(key, value []byte) {
	if err := b.pb.Set(key, value, nil); err != nil {
		panic(fmt.Sprintf("persistence: assertion failed: batch Set: %v", err))
	}
}

// Delete adds the deletion of key.
func (b *Batch) Delete(key []byte) {
	if err := b.pb.Delete(key, nil); err != nil {
		panic(fmt.Sprintf("persistence: assertion failed: batch Delete: %v", err))
	}
}

// DeleteRange adds the deletion of every key in [start, end).
func (b *Batch) DeleteRange(start, end []byte) {
	if err := b.pb.DeleteRange(start, end, nil); err != nil {
		panic(fmt.Sprintf("persistence: assertion failed: batch DeleteRange: %v", err))
	}
}

// Empty reports whether nothing was added to b.
func (b *Batch) Empty() bool { return b.pb.Empty() }

// Discard releases a batch that will not be committed. Closing a batch
// that was never applied cannot fail (Pebble reports only a second close,
// a bug: it panics).
func (b *Batch) Discard() {
	if err := b.pb.Close(); err != nil {
		panic(fmt.Sprintf("persistence: assertion failed: batch discarded twice: %v", err))
	}
}
