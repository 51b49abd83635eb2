package persistence

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
	"rtcd/internal/testtools"
	"rtcd/internal/walgate"
)

// blockTimeout bounds each wait of these tests for something that must
// happen promptly (a commit parking, the syncer catching up).
const blockTimeout = 10 * time.Second

// doneLog records the order of done callbacks.
type doneLog struct {
	mu    sync.Mutex
	order []int
	all   sync.WaitGroup
}

func (l *doneLog) commit(s *Store, i int) {
	b := s.NewBatch()
	b.Set(seqKey(i), []byte("v"))
	s.Commit(b, func() {
		l.mu.Lock()
		l.order = append(l.order, i)
		l.mu.Unlock()
		l.all.Done()
	})
}

func (l *doneLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.order)
}

// checkInOrder waits for every done callback and checks they ran in commit order.
func (l *doneLog) checkInOrder(t *testing.T, n int) {
	t.Helper()
	waitGroup(t, &l.all, "the done callbacks")
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.order) != n {
		t.Fatalf("%d done callbacks ran, want %d", len(l.order), n)
	}
	for i, got := range l.order {
		if got != i {
			t.Fatalf("done #%d was for commit %d, want commit order", i, got)
		}
	}
}

// awaitSignal waits for a value on c, or for c to be closed.
func awaitSignal(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(blockTimeout):
		t.Fatalf("%s within %s", what, blockTimeout)
	}
}

// TestCommitBlocksWhenSyncQueueFull: the queue of batches waiting for the
// syncer is bounded. With the WAL sync held, the syncer waits on the first
// batch, the queue fills, and the next Commit blocks (the committing actor
// stops) until the sync completes and the syncer drains the queue; then
// every batch is acknowledged, in commit order.
func TestCommitBlocksWhenSyncQueueFull(t *testing.T) {
	gate := walgate.Wrap(vfs.NewMem())
	const capacity = 2
	s := openStoreWith(t, "db", Options{FS: gate.FS, SyncQueueCapacity: capacity}, func(err error) { t.Errorf("fatal: %v", err) })
	t.Cleanup(func() { gate.Release(); _ = s.Close() })
	if got := cap(s.syncQueue); got != capacity {
		t.Fatalf("sync queue capacity %d, want the injected %d", got, capacity)
	}

	gate.Hold()
	var log doneLog
	log.all.Add(capacity + 2)
	// The syncer takes batch 0 and waits for its fsync; batches 1 and 2 fill
	// the queue (Commit 2 may wait a moment for the syncer to take batch 0).
	for i := 0; i <= capacity; i++ {
		log.commit(s, i)
	}
	awaitSignal(t, gate.Waiting(), "no WAL sync reached the gate")
	returned := make(chan struct{})
	go func() {
		log.commit(s, capacity+1)
		close(returned)
	}()
	testtools.AwaitChanSend(t, blockTimeout, "rtcd/persistence.(*Store).Commit")
	select {
	case <-returned:
		t.Fatal("Commit returned with the sync queue full")
	default:
	}
	if n := log.count(); n != 0 {
		t.Fatalf("%d batches acknowledged while their WAL sync is held", n)
	}

	gate.Release()
	awaitSignal(t, returned, "the blocked Commit did not resume once the syncer drained the queue")
	log.checkInOrder(t, capacity+2)
}

// TestCommitBlocksWhenWALSyncStalls: with the named default queue (16384),
// what stops an actor when the disk stalls is Pebble itself: it admits at
// most record.SyncConcurrency-1 (4095) batches waiting for a WAL sync, and
// ApplyNoSyncWait blocks the next one. So the actor is held back after 4095
// unsynced batches, before the syncer's queue could fill, and resumes when
// the sync completes.
func TestCommitBlocksWhenWALSyncStalls(t *testing.T) {
	gate := walgate.Wrap(vfs.NewMem())
	s := openStoreWith(t, "db", Options{FS: gate.FS}, func(err error) { t.Errorf("fatal: %v", err) })
	t.Cleanup(func() { gate.Release(); _ = s.Close() })
	if got := cap(s.syncQueue); got != syncQueueCapacity {
		t.Fatalf("sync queue capacity %d, want the named default %d", got, syncQueueCapacity)
	}

	gate.Hold()
	const admitted = record.SyncConcurrency - 1
	const n = admitted + 10
	var log doneLog
	log.all.Add(n)
	var returned atomic.Int64
	finished := make(chan struct{})
	go func() {
		for i := 0; i < n; i++ {
			log.commit(s, i)
			returned.Add(1)
		}
		close(finished)
	}()
	testtools.AwaitChanSend(t, blockTimeout, "github.com/cockroachdb/pebble/v2.(*commitPipeline).Commit",
		"rtcd/persistence.(*Store).Commit")
	if got := returned.Load(); got != admitted {
		t.Fatalf("Commit blocked after %d unsynced batches, want %d", got, admitted)
	}
	if got := log.count(); got != 0 {
		t.Fatalf("%d batches acknowledged while their WAL sync is held", got)
	}

	gate.Release()
	awaitSignal(t, finished, fmt.Sprintf("the committer did not finish its %d batches once the sync completed", n))
	log.checkInOrder(t, n)
}
