package persistence

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Checkpoint writes a consistent copy of the open database into dir, which
// must not exist yet (its parents are created). Every batch applied before
// the call is in the copy, acknowledged writes included: the WAL is flushed
// and synced first. SSTables are hard-linked when dir is on the same file
// system, copied otherwise; the WAL and the manifest are copied. The copy
// is a database of its own that Open accepts; writers are not paused.
func (s *Store) Checkpoint(dir string) error {
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("persistence: checkpoint into %s: %w", dir, err)
	}
	return nil
}
