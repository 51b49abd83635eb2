package jsstore

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// testCluster is three embedded NATS servers with JetStream, clustered on
// loopback: the smallest cluster whose R3 streams survive losing one. One
// is started for the test binary, on first use (a helper process the kill
// test re-executes starts none: it connects to its parent's), and every
// test makes streams of its own in it.
type testCluster struct {
	servers []*server.Server
	dir     string
	urls    string
}

const clusterStartSeconds = 30

var (
	sharedCluster     *testCluster
	sharedClusterErr  error
	sharedClusterOnce sync.Once
	streamCounter     atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedCluster != nil {
		sharedCluster.shutdown()
	}
	os.Exit(code)
}

// freePorts reserves n loopback ports by binding and releasing them: the
// servers' routes must name each other's cluster ports before they start.
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

func startCluster() (*testCluster, error) {
	dir, err := os.MkdirTemp("", "rtcd-jsstore-")
	if err != nil {
		return nil, err
	}
	c := &testCluster{dir: dir}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	var routes []*url.URL
	for _, p := range ports {
		routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	var clientURLs []string
	for i, p := range ports {
		opts := &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1),
			Host:       "127.0.0.1",
			Port:       -1,
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			Cluster:    server.ClusterOpts{Name: "rtcd-test", Host: "127.0.0.1", Port: p},
			Routes:     routes,
			NoLog:      true,
			NoSigs:     true,
		}
		s, err := server.NewServer(opts)
		if err != nil {
			c.shutdown()
			return nil, fmt.Errorf("nats server %d: %w", i+1, err)
		}
		go s.Start()
		c.servers = append(c.servers, s)
	}
	for _, s := range c.servers {
		if !s.ReadyForConnections(clusterStartSeconds * time.Second) {
			c.shutdown()
			return nil, fmt.Errorf("nats server %s not ready in %d s", s.Name(), clusterStartSeconds)
		}
		clientURLs = append(clientURLs, s.ClientURL())
	}
	c.urls = strings.Join(clientURLs, ",")
	// JetStream serves once the servers have elected a meta leader.
	deadline := time.Now().Add(clusterStartSeconds * time.Second)
	for {
		leader := false
		for _, s := range c.servers {
			leader = leader || s.JetStreamIsLeader()
		}
		if leader {
			return c, nil
		}
		if time.Now().After(deadline) {
			c.shutdown()
			return nil, fmt.Errorf("no JetStream meta leader in %d s", clusterStartSeconds)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *testCluster) shutdown() {
	for _, s := range c.servers {
		s.Shutdown()
		s.WaitForShutdown()
	}
	_ = os.RemoveAll(c.dir)
}

// cluster is the test binary's cluster, started on first use.
func cluster(t testing.TB) *testCluster {
	t.Helper()
	sharedClusterOnce.Do(func() { sharedCluster, sharedClusterErr = startCluster() })
	if sharedClusterErr != nil {
		t.Fatalf("start the NATS cluster: %v", sharedClusterErr)
	}
	return sharedCluster
}

// newSpec names a fresh stream on the cluster: "<stream>@<urls>".
func newSpec(t testing.TB) string {
	c := cluster(t)
	return fmt.Sprintf("T%d@%s", streamCounter.Add(1), c.urls)
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
