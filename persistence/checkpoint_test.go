package persistence

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// TestCheckpointHoldsEveryAcknowledgedWrite writes while a checkpoint is
// taken: the copy opens on its own and holds every batch acknowledged
// before the checkpoint began.
func TestCheckpointHoldsEveryAcknowledgedWrite(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(filepath.Join(dir, "db"), Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(key string) {
		b := s.NewBatch()
		b.Set([]byte(key), []byte("v"))
		done := make(chan struct{})
		s.Commit(b, func() { close(done) })
		<-done
	}
	const before = 200
	for i := 0; i < before; i++ {
		put(fmt.Sprintf("before/%04d", i))
	}
	// Writers keep going during the checkpoint.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				put(fmt.Sprintf("during/%d/%06d", w, i))
			}
		}()
	}
	copyDir := filepath.Join(dir, "backups", "one", "pebble")
	err = s.Checkpoint(copyDir)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(copyDir); err == nil {
		t.Fatal("a checkpoint into an existing directory succeeded")
	}

	c, err := OpenWith(copyDir, Options{ReadOnly: true}, Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatalf("opening the checkpoint: %v", err)
	}
	defer c.Close()
	for i := 0; i < before; i++ {
		if _, err := c.Get([]byte(fmt.Sprintf("before/%04d", i))); err != nil {
			t.Fatalf("before/%04d, acknowledged before the checkpoint: %v", i, err)
		}
	}
}
