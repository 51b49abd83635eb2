package persistence

import "github.com/cockroachdb/pebble/v2"

// pebbleBatch is Store's BatchWriter: the writes go straight into a Pebble
// batch, so a state change is built once, with no copy of its records.
type pebbleBatch struct{ pb *pebble.Batch }

func (w pebbleBatch) Set(key, value []byte) error { return w.pb.Set(key, value, nil) }
func (w pebbleBatch) Delete(key []byte) error     { return w.pb.Delete(key, nil) }
func (w pebbleBatch) Empty() bool                 { return w.pb.Empty() }
func (w pebbleBatch) Close() error                { return w.pb.Close() }

// TruncateJournal is a range deletion in the same batch as the snapshot.
func (w pebbleBatch) TruncateJournal(actorID string, throughSeq uint64) error {
	return w.pb.DeleteRange(JournalKey(actorID, 0), JournalKey(actorID, throughSeq+1), nil)
}

// pebbleBatchOf is the Pebble batch inside b. A batch of another store
// handed to Store is a bug.
func pebbleBatchOf(b *Batch) *pebble.Batch {
	w, ok := b.Writer().(pebbleBatch)
	if !ok {
		panic("persistence: assertion failed: a batch of another store committed to Pebble")
	}
	return w.pb
}
