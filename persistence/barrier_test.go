package persistence

import (
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestAfterDurableWaitsForEarlierBatches takes a simulated power-loss image
// of the disk inside each barrier's callback: every batch committed before
// that barrier must be in it. Barriers are interleaved with the batches, so
// one whose callback ran before the earlier fsyncs fails the test.
func TestAfterDurableWaitsForEarlierBatches(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s := openStoreWith(t, "db", Options{FS: fs}, func(err error) { t.Errorf("fatal: %v", err) })
	const n = 40
	clones := make([]*vfs.MemFS, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		b := s.NewBatch()
		b.Set(seqKey(i), []byte("v"))
		s.Commit(b, nil)
		s.AfterDurable(func() {
			clones[i] = fs.CrashClone(vfs.CrashCloneCfg{})
			wg.Done()
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	all := make([][]byte, n)
	for i := range all {
		all[i] = seqKey(i)
	}
	for i, clone := range clones {
		found := keysOn(t, clone, "db", all)
		for j := 0; j <= i; j++ {
			if !found[string(seqKey(j))] {
				t.Fatalf("barrier %d ran its callback, but after a crash at that moment batch %d is lost", i, j)
			}
		}
	}
}

// TestAfterDurableWritesNothingReadable: a barrier leaves no key behind.
func TestAfterDurableWritesNothingReadable(t *testing.T) {
	s, _ := openTestStore(t)
	done := make(chan struct{})
	s.AfterDurable(func() { close(done) })
	<-done
	n := 0
	if err := s.Scan(nil, 0, func(_, _ []byte) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("a barrier left %d keys", n)
	}
}
