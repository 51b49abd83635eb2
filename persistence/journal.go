package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// snapshotHeaderBytes is the size of the sequence number that precedes the
// encoded state in a snapshot value.
const snapshotHeaderBytes = 8

// Journal is one actor's append-only event log plus its latest snapshot. It
// is owned by that actor and must only be used from the actor's goroutine.
type Journal struct {
	store               Storage
	actorID             string
	seq                 uint64 // sequence number of the last appended event
	eventsSinceSnapshot uint64
	snapshotEveryEvents uint64
}

// NewJournal returns actorID's journal. A snapshot is due every
// snapshotEveryEvents events (at least 1).
func NewJournal(s Storage, actorID string, snapshotEveryEvents int) *Journal {
	if snapshotEveryEvents < 1 {
		snapshotEveryEvents = 1
	}
	return &Journal{store: s, actorID: actorID, snapshotEveryEvents: uint64(snapshotEveryEvents)}
}

// Name is the journal's actor name.
func (j *Journal) Name() string { return j.actorID }

// Seq is the sequence number of the last event appended or replayed.
func (j *Journal) Seq() uint64 { return j.seq }

// Recover claims the journal for this writer (Storage.ClaimJournal), loads
// the latest snapshot, if any, through loadSnapshot and then hands every
// later event, in order, to replay. Replayed events are not written again.
// It returns how many events were replayed.
func (j *Journal) Recover(loadSnapshot func(state []byte) error, replay func(event []byte) error) (int, error) {
	if err := j.store.ClaimJournal(j.actorID); err != nil {
		return 0, err
	}
	return j.Replay(loadSnapshot, replay)
}

// Replay is Recover without the claim: it reads the snapshot and the tail
// and takes nothing over, so the journal's writer keeps writing. For a
// reader that only looks (the crash simulation comparing a live owner
// with what recovery would find); a journal replayed so must not be
// appended to.
func (j *Journal) Replay(loadSnapshot func(state []byte) error, replay func(event []byte) error) (int, error) {
	snap, err := j.store.Get(SnapshotKey(j.actorID))
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return 0, err
	default:
		if len(snap) < snapshotHeaderBytes {
			return 0, fmt.Errorf("persistence: snapshot of %s is %d bytes, shorter than its header", j.actorID, len(snap))
		}
		j.seq = binary.BigEndian.Uint64(snap)
		if err := loadSnapshot(snap[snapshotHeaderBytes:]); err != nil {
			return 0, fmt.Errorf("persistence: load snapshot of %s: %w", j.actorID, err)
		}
	}
	replayed := 0
	var replayErr error
	prefix := journalPrefix(j.actorID)
	err = j.store.Scan(prefix, 0, func(key, value []byte) bool {
		seq := binary.BigEndian.Uint64(key[len(prefix):])
		if seq <= j.seq {
			return true // covered by the snapshot; deleted lazily
		}
		if seq != j.seq+1 {
			replayErr = fmt.Errorf("persistence: journal of %s jumps from %d to %d", j.actorID, j.seq, seq)
			return false
		}
		if err := replay(value); err != nil {
			replayErr = fmt.Errorf("persistence: replay %s #%d: %w", j.actorID, seq, err)
			return false
		}
		j.seq = seq
		replayed++
		return true
	})
	if err != nil {
		return replayed, err
	}
	j.eventsSinceSnapshot = uint64(replayed)
	return replayed, replayErr
}

// Append writes event as the next entry of the journal into b.
func (j *Journal) Append(b *Batch, event []byte) {
	j.seq++
	j.eventsSinceSnapshot++
	b.Set(JournalKey(j.actorID, j.seq), event)
}

// SnapshotDue reports whether enough events were appended since the last
// snapshot that the next batch should carry one.
func (j *Journal) SnapshotDue() bool { return j.eventsSinceSnapshot >= j.snapshotEveryEvents }

// WriteSnapshot writes state as of the last appended event into b, and
// deletes the journal entries it covers, so recovery reads the snapshot and
// only the tail after it.
func (j *Journal) WriteSnapshot(b *Batch, state []byte) {
	WriteSnapshotAt(b, j.actorID, j.seq, state)
	b.TruncateJournal(j.actorID, j.seq)
	j.eventsSinceSnapshot = 0
}

// WriteSnapshotOf is WriteSnapshot of the state encode returns; the time
// encoding and writing take is observed as the store's SnapshotSeconds.
func (j *Journal) WriteSnapshotOf(b *Batch, encode func() []byte) {
	start := time.Now()
	j.WriteSnapshot(b, encode())
	if o := j.store.SnapshotSeconds(); o != nil {
		o.Observe(time.Since(start).Seconds())
	}
}

// WriteSnapshotAt writes a snapshot of actorID at seq into b. Used to create
// an actor's initial state in the same batch as the event that creates it.
func WriteSnapshotAt(b *Batch, actorID string, seq uint64, state []byte) {
	v := make([]byte, snapshotHeaderBytes, snapshotHeaderBytes+len(state))
	binary.BigEndian.PutUint64(v, seq)
	b.Set(SnapshotKey(actorID), append(v, state...))
}
