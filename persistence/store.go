package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
)

// syncQueueCapacity bounds the number of applied batches waiting for the
// syncer (for their fsync, then for their done callback). When it is full,
// Commit blocks the committing actor. With a disk slower than the request
// rate, Pebble blocks it first: ApplyNoSyncWait admits at most
// record.SyncConcurrency-1 (4095) batches whose WAL sync has not completed.
// This queue fills only when the syncer falls behind on batches already
// synced (slow done callbacks). Either way memory stays bounded.
const syncQueueCapacity = 16384

// ErrNotFound is returned by Get when the key does not exist.
var ErrNotFound = errors.New("persistence: not found")

// Metrics are the store's latency observers. Nil fields are not observed.
type Metrics struct {
	ApplySeconds    prometheus.Observer // time to apply a batch to the memtable and WAL buffer
	SyncSeconds     prometheus.Observer // time from apply until the batch's WAL fsync completed
	SnapshotSeconds prometheus.Observer // time to encode a journal's snapshot and add it to its batch
}

// Store is the Pebble implementation of Storage: the database plus the
// group-commit syncer.
type Store struct {
	db      *pebble.DB
	metrics Metrics
	fatal   func(error)
	// writeStalls counts the write stalls Pebble began (its event
	// listener), for the metrics.
	writeStalls atomic.Int64

	syncQueue chan pendingSync
	syncDone  chan struct{}
	closeOnce sync.Once
}

type pendingSync struct {
	batch     *pebble.Batch
	appliedAt time.Time
	done      func()
}

// Options are what a store can be opened with beyond its directory. The
// zero value is production's: Open is OpenWith with Options{}, so a setting
// changed in OpenWith is seen by every test that opens a store.
type Options struct {
	// FS is the file system Pebble runs on; nil means the operating
	// system's. Tests pass a simulated one (power loss, held or failing
	// WAL syncs).
	FS vfs.FS
	// ReadOnly opens the database refusing every write.
	ReadOnly bool
	// SyncQueueCapacity bounds the batches waiting for the syncer; 0 means
	// syncQueueCapacity. Tests make it small to fill it.
	SyncQueueCapacity int
}

// Open opens (creating if needed) the database in dir. fatal is called, from
// the syncer goroutine, when a WAL fsync fails; it must not return normally
// in production (it should exit the process).
func Open(dir string, m Metrics, fatal func(error)) (*Store, error) {
	return OpenWith(dir, Options{}, m, fatal)
}

// OpenWith is Open with options; see Options.
func OpenWith(dir string, o Options, m Metrics, fatal func(error)) (*Store, error) {
	capacity := o.SyncQueueCapacity
	if capacity <= 0 {
		capacity = syncQueueCapacity
	}
	s := &Store{
		metrics:   m,
		fatal:     fatal,
		syncQueue: make(chan pendingSync, capacity),
		syncDone:  make(chan struct{}),
	}
	listener := &pebble.EventListener{WriteStallBegin: func(pebble.WriteStallBeginInfo) { s.writeStalls.Add(1) }}
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}, FS: o.FS, ReadOnly: o.ReadOnly, EventListener: listener})
	if err != nil {
		return nil, fmt.Errorf("persistence: open %s: %w", dir, err)
	}
	s.db = db
	go s.syncLoop()
	return s, nil
}

// PebbleMetrics is Pebble's own reading of the database (compactions,
// levels, WAL, disk usage) and the write stalls since it opened. It must
// not be called after Close.
func (s *Store) PebbleMetrics() (*pebble.Metrics, int64) {
	return s.db.Metrics(), s.writeStalls.Load()
}

// NewBatch returns an empty batch for one state change.
func (s *Store) NewBatch() *Batch { return NewBatchOf(pebbleBatch{pb: s.db.NewBatch()}) }

// ClaimJournal does nothing: one process writes a Pebble directory (the
// data directory lock), so no other writer can append to a journal.
func (s *Store) ClaimJournal(string) error { return nil }

// MaxBatchWrites is 0: a Pebble batch has no limit on its writes.
func (s *Store) MaxBatchWrites() int { return 0 }

// SnapshotSeconds is the observer of a journal's snapshot writes.
func (s *Store) SnapshotSeconds() prometheus.Observer { return s.metrics.SnapshotSeconds }

// Commit applies b without waiting for its fsync and calls done once the
// batch is durable. The writes are visible to readers as soon as Commit
// returns. done runs on the syncer goroutine and must not block for long.
// A batch that cannot be applied at all (a read-only or broken database) is
// reported to the fatal handler: the caller has already decided the change,
// and an actor must not continue with state the disk refused.
func (s *Store) Commit(b *Batch, done func()) {
	start := time.Now()
	pb := pebbleBatchOf(b)
	if err := s.db.ApplyNoSyncWait(pb, pebble.Sync); err != nil {
		_ = pb.Close() // the apply error is the one reported
		s.fatal(fmt.Errorf("persistence: apply: %w", err))
		return
	}
	now := time.Now()
	if s.metrics.ApplySeconds != nil {
		s.metrics.ApplySeconds.Observe(now.Sub(start).Seconds())
	}
	s.syncQueue <- pendingSync{batch: pb, appliedAt: now, done: done}
}

// CommitAndWait applies b and waits until it is durable. For callers that
// are not actors (bootstrap, sweepers), where blocking is fine. Such a caller
// holds no in-memory state ahead of the disk, so a batch that cannot be
// applied or synced is returned as an error (not sent to the fatal handler,
// which may return, leaving the caller waiting forever).
func (s *Store) CommitAndWait(b *Batch) error {
	pb := pebbleBatchOf(b)
	err := s.db.Apply(pb, pebble.Sync)
	if cerr := pb.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("persistence: commit: %w", err)
	}
	return nil
}

// syncLoop waits for the fsync of each applied batch in commit order. Pebble
// syncs the WAL in order, so waiting in order loses no concurrency: one
// fsync covers every batch applied before it (group commit).
func (s *Store) syncLoop() {
	defer close(s.syncDone)
	for p := range s.syncQueue {
		err := p.batch.SyncWait()
		if s.metrics.SyncSeconds != nil {
			s.metrics.SyncSeconds.Observe(time.Since(p.appliedAt).Seconds())
		}
		closeErr := p.batch.Close()
		if err == nil && closeErr != nil {
			err = closeErr // a batch closed twice: never expected, and not acknowledged
		}
		if err != nil {
			s.fatal(fmt.Errorf("persistence: WAL fsync failed, state in memory is ahead of disk: %w", err))
			continue
		}
		if p.done != nil {
			p.done()
		}
	}
}

// FlushIfWALOver flushes the memtable to an sstable, which starts a new
// memtable and a new WAL file, when the live WAL files hold more than
// walBytes, and waits for the flush; it reports whether it flushed. For
// the crash simulation (package sim): it holds the WAL's fsyncs between
// its durable points, and Pebble rotates the WAL when the memtable fills,
// which waits for the old WAL's fsyncs. Flushing at a durable point, when
// they pass, keeps the memtable from filling while they are held.
func (s *Store) FlushIfWALOver(walBytes uint64) (bool, error) {
	if s.db.Metrics().WAL.Size <= walBytes {
		return false, nil
	}
	if err := s.db.Flush(); err != nil {
		return false, fmt.Errorf("persistence: flush: %w", err)
	}
	return true, nil
}

// Get returns a copy of the value at key, or ErrNotFound.
func (s *Store) Get(key []byte) ([]byte, error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("persistence: get: %w", err)
	}
	out := append([]byte(nil), v...)
	_ = closer.Close()
	return out, nil
}

// Scan calls fn for each key with the given prefix in key order, at most
// limit times (limit <= 0 means no limit). fn's arguments are only valid
// during the call. fn returns false to stop early.
func (s *Store) Scan(prefix []byte, limit int, fn func(key, value []byte) bool) error {
	return s.ScanFrom(prefix, prefix, limit, fn)
}

// ScanFrom is Scan starting at the first key with prefix not before from
// (from before prefix: at prefix). A scan that knows where its live keys
// start skips what lies before: deleted keys there are stepped over one
// by one until a compaction drops them.
func (s *Store) ScanFrom(prefix, from []byte, limit int, fn func(key, value []byte) bool) error {
	lower := prefix
	if bytes.Compare(from, prefix) > 0 {
		lower = from
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return fmt.Errorf("persistence: iter: %w", err)
	}
	n := 0
	for valid := it.First(); valid; valid = it.Next() {
		if limit > 0 && n >= limit {
			break
		}
		n++
		if !fn(it.Key(), it.Value()) {
			break
		}
	}
	if err := it.Error(); err != nil {
		_ = it.Close()
		return fmt.Errorf("persistence: scan: %w", err)
	}
	return it.Close()
}

// Close waits for pending syncs, then closes the database. No Commit may be
// running or start after Close is called.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.syncQueue)
		<-s.syncDone
		err = s.db.Close()
	})
	return err
}

// quietLogger routes Pebble's informational logs to slog at debug level and
// its errors at error level.
type quietLogger struct{}

func (quietLogger) Infof(format string, args ...any) {
	slog.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}
func (quietLogger) Errorf(format string, args ...any) {
	slog.Error(fmt.Sprintf(format, args...), "component", "pebble")
}
func (quietLogger) Fatalf(format string, args ...any) {
	slog.Error(fmt.Sprintf(format, args...), "component", "pebble")
	panic(fmt.Sprintf(format, args...))
}
