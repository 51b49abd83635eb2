package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"rtcd/internal/natstest"
	"rtcd/persistence"
	"rtcd/persistence/jsstore"
)

// The store the suite's servers keep their state in. E2E_STORE unset (or
// "pebble") runs every server on its data directory's Pebble store, the
// default; E2E_STORE=jetstream runs them on NATS JetStream (docs/cluster.md):
// one cluster of three embedded servers for the whole test binary, and an
// R3 stream of its own for each data directory, so a test that restarts a
// server on the same data directory finds its state, and tests never see
// each other's records. `make test` runs the suite both ways.
const (
	e2eStoreVar       = "E2E_STORE"
	e2eStorePebble    = "pebble"
	e2eStoreJetStream = "jetstream"
)

// e2eStore is E2E_STORE, checked by TestMain.
var e2eStore = os.Getenv(e2eStoreVar)

// onJetStream reports whether the suite runs on JetStream.
func onJetStream() bool { return e2eStore == e2eStoreJetStream }

// skipOnJetStream skips a test that is about the Pebble store itself (its
// files, its power-loss images, its backup), with the reason.
func skipOnJetStream(t *testing.T, why string) {
	t.Helper()
	if onJetStream() {
		t.Skip("Pebble only: " + why)
	}
}

// jsSuite is the suite's NATS cluster, started on first use, and the
// stream of each data directory.
var jsSuite struct {
	once    sync.Once
	cluster *natstest.Cluster
	err     error

	mu      sync.Mutex
	streams map[string]string // data directory (cleaned) -> stream
	next    int
}

// checkE2EStore refuses an E2E_STORE the suite does not know.
func checkE2EStore() error {
	switch e2eStore {
	case "", e2eStorePebble, e2eStoreJetStream:
		return nil
	}
	return fmt.Errorf("%s=%q: want %s or %s", e2eStoreVar, e2eStore, e2eStorePebble, e2eStoreJetStream)
}

// stopJSSuite shuts the suite's cluster down (TestMain, after the tests).
func stopJSSuite() {
	if jsSuite.cluster != nil {
		jsSuite.cluster.Shutdown()
	}
}

// withStore is own, a test's `rtcd serve` / `rtcd init` flags, after the
// flags that put dataDir's state in the suite's store: none on Pebble, and
// none when own already chooses a store (the JetStream tests that start a
// cluster of their own). On JetStream the first use of a data directory
// names its stream, and the test that made it deletes the stream when it
// ends.
func withStore(t testing.TB, dataDir string, own ...string) []string {
	t.Helper()
	if !onJetStream() || slices.ContainsFunc(own, func(f string) bool { return f == "--store" || strings.HasPrefix(f, "--store=") }) {
		return own
	}
	jsSuite.once.Do(func() { jsSuite.cluster, jsSuite.err = natstest.Start() })
	if jsSuite.err != nil {
		t.Fatalf("start the suite's NATS cluster: %v", jsSuite.err)
	}
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	jsSuite.mu.Lock()
	if jsSuite.streams == nil {
		jsSuite.streams = map[string]string{}
	}
	stream, ok := jsSuite.streams[dir]
	if !ok {
		jsSuite.next++
		stream = fmt.Sprintf("E2E_%d", jsSuite.next)
		jsSuite.streams[dir] = stream
	}
	jsSuite.mu.Unlock()
	if !ok {
		// Registered before the server's own cleanup, so it runs after the
		// server stopped (cleanups run last first).
		t.Cleanup(func() { deleteSuiteStream(t, stream) })
	}
	return append([]string{"--store", e2eStoreJetStream, "--nats-url", jsSuite.cluster.URLs, "--nats-stream", stream}, own...)
}

// openSuiteStore opens the suite's JetStream stream of dataDir, where a
// stopped server left its state, for a test to read it.
func openSuiteStore(t *testing.T, dataDir string) persistence.Storage {
	t.Helper()
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	jsSuite.mu.Lock()
	stream, ok := jsSuite.streams[dir]
	jsSuite.mu.Unlock()
	if !ok {
		t.Fatalf("no server ran on %s: it has no stream", dataDir)
	}
	s, err := jsstore.Open(jsstore.Config{URL: jsSuite.cluster.URLs, Stream: stream}, func(err error) {
		t.Errorf("fatal storage error: %v", err)
	})
	if err != nil {
		t.Fatalf("open stream %s: %v", stream, err)
	}
	return s
}

// streamDeleteSeconds bounds the deletion of a test's stream.
const streamDeleteSeconds = 10

// deleteSuiteStream deletes a finished test's stream, so the cluster does
// not carry a stream per test for the rest of the run.
func deleteSuiteStream(t testing.TB, stream string) {
	nc, err := nats.Connect(jsSuite.cluster.URLs)
	if err != nil {
		t.Logf("delete stream %s: %v", stream, err)
		return
	}
	defer nc.Close()
	if _, err := nc.Request("$JS.API.STREAM.DELETE."+stream, nil, streamDeleteSeconds*time.Second); err != nil {
		t.Logf("delete stream %s: %v", stream, err)
	}
}
