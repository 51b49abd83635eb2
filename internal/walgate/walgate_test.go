package walgate

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"rtcd/persistence"
)

// The gate holds the syncs of every WAL, recycled ones included: Pebble
// reuses an obsolete WAL file for a new WAL after a memtable flush, and
// errorfs hands such a file back without its injector. A batch committed
// while the gate is held is neither acknowledged nor in a crash image.
func TestHoldsTheSyncsOfRecycledWALs(t *testing.T) {
	fs := vfs.NewCrashableMem()
	g := Wrap(fs)
	s, err := persistence.OpenWith("db", persistence.Options{FS: g.FS}, persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Release(); _ = s.Close() })
	// Flushes make WALs obsolete; the next WALs reuse their files.
	for i := 0; i < 4; i++ {
		b := s.NewBatch()
		b.Set([]byte(fmt.Sprintf("k%d", i)), bytes.Repeat([]byte("v"), 4096))
		if err := s.CommitAndWait(b); err != nil {
			t.Fatal(err)
		}
		if _, err := s.FlushIfWALOver(0); err != nil {
			t.Fatal(err)
		}
	}

	g.Hold()
	done := make(chan struct{})
	b := s.NewBatch()
	b.Set([]byte("held"), []byte("v"))
	s.Commit(b, func() { close(done) })
	select {
	case <-g.Waiting():
	case <-done:
		t.Fatal("a batch was acknowledged while the gate held the WAL's sync")
	case <-time.After(10 * time.Second):
		t.Fatal("the WAL's sync never reached the gate")
	}
	clone := fs.CrashClone(vfs.CrashCloneCfg{})
	g.Release()
	<-done

	crashed, err := persistence.OpenWith("db", persistence.Options{FS: clone}, persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer crashed.Close()
	if _, err := crashed.Get([]byte("held")); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("a batch whose sync was held is in the crash image (%v)", err)
	}
	if _, err := crashed.Get([]byte("k3")); err != nil {
		t.Fatalf("a durable batch is not in the crash image: %v", err)
	}
}
