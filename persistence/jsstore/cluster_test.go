package jsstore

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"rtcd/internal/natstest"
)

// One cluster serves the whole test binary, started on first use (a helper
// process the kill test re-executes starts none: it connects to its
// parent's); every test makes streams of its own in it.
var (
	sharedCluster     *natstest.Cluster
	sharedClusterErr  error
	sharedClusterOnce sync.Once
	streamCounter     atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedCluster != nil {
		sharedCluster.Shutdown()
	}
	os.Exit(code)
}

// cluster is the test binary's cluster, started on first use.
func cluster(t testing.TB) *natstest.Cluster {
	t.Helper()
	sharedClusterOnce.Do(func() { sharedCluster, sharedClusterErr = natstest.Start() })
	if sharedClusterErr != nil {
		t.Fatalf("start the NATS cluster: %v", sharedClusterErr)
	}
	return sharedCluster
}

// newSpec names a fresh stream on the cluster: "<stream>@<urls>".
func newSpec(t testing.TB) string {
	c := cluster(t)
	return fmt.Sprintf("T%d@%s", streamCounter.Add(1), c.URLs)
}

func openSpec(spec string, fatal func(error)) (*Store, error) {
	stream, urls, ok := strings.Cut(spec, "@")
	if !ok {
		return nil, fmt.Errorf("spec %q is not <stream>@<urls>", spec)
	}
	return Open(Config{URL: urls, Stream: stream, Replicas: 3}, fatal)
}

// openTorn is openSpec with batches published one message at a time.
func openTorn(spec string, fatal func(error)) (*Store, error) {
	stream, urls, _ := strings.Cut(spec, "@")
	return Open(Config{URL: urls, Stream: stream, Replicas: 3, publishOneByOne: true}, fatal)
}
