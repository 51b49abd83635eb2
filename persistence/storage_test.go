package persistence_test

import (
	"testing"

	"rtcd/persistence"
	"rtcd/persistence/storetest"
)

// TestPebbleStorage holds Pebble to the storage contract every store
// passes (package storetest). The kill -9 case re-runs this test as the
// writer it kills.
func TestPebbleStorage(t *testing.T) {
	storetest.Run(t, storetest.Target{
		New: func(t testing.TB) string { return t.TempDir() },
		Open: func(dir string, fatal func(error)) (persistence.Storage, error) {
			return persistence.Open(dir, persistence.Metrics{}, fatal)
		},
	})
}
