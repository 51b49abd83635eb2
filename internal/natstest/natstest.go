// Package natstest starts NATS JetStream clusters for tests: three
// embedded servers on loopback, as the replicated store (persistence/jsstore)
// runs on, for its own tests and the end-to-end ones. A test may stop one
// server or all three and start them again on the same ports and store
// directories, as an operator restarting a machine would.
package natstest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Cluster is three embedded NATS servers (nats-server v2, JetStream on),
// clustered on loopback: the smallest cluster whose R3 streams survive
// losing one. Tests start one (Start) and make streams of their own in it.
type Cluster struct {
	mu      sync.Mutex
	servers []*server.Server  // nil where a server is stopped
	opts    []*server.Options // each server's configuration, kept for a restart
	dir     string
	URLs    string // the servers' client URLs, comma-separated; the same after restarts
}

// clusterStartSeconds bounds the wait for the servers and for JetStream's
// meta leader.
const clusterStartSeconds = 30

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

// Start starts the three servers, in a temporary directory of their own,
// and waits until JetStream has a meta leader. Their client and cluster
// ports are fixed at start, so a server started again (StartServer) is
// found at the URL the clients already have.
func Start() (*Cluster, error) {
	dir, err := os.MkdirTemp("", "rtcd-jsstore-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir}
	ports, err := freePorts(6) // three client ports, then three cluster ports
	if err != nil {
		return nil, err
	}
	clientPorts, clusterPorts := ports[:3], ports[3:]
	var routes []*url.URL
	for _, p := range clusterPorts {
		routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	var clientURLs []string
	for i := range clientPorts {
		c.opts = append(c.opts, &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1),
			Host:       "127.0.0.1",
			Port:       clientPorts[i],
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			Cluster:    server.ClusterOpts{Name: "rtcd-test", Host: "127.0.0.1", Port: clusterPorts[i]},
			Routes:     routes,
			NoLog:      true,
			NoSigs:     true,
		})
		clientURLs = append(clientURLs, fmt.Sprintf("nats://127.0.0.1:%d", clientPorts[i]))
	}
	c.servers = make([]*server.Server, len(c.opts))
	c.URLs = strings.Join(clientURLs, ",")
	for i := range c.opts {
		if err := c.launch(i); err != nil {
			c.Shutdown()
			return nil, err
		}
	}
	if err := c.waitReady(); err != nil {
		c.Shutdown()
		return nil, err
	}
	return c, nil
}

// launch starts server i from its kept configuration, without waiting.
func (c *Cluster) launch(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.servers[i] != nil {
		return fmt.Errorf("nats server n%d already runs", i+1)
	}
	// A server copies what it needs of its options; a fresh copy for each
	// start keeps one run's defaults out of the next.
	opts := *c.opts[i]
	s, err := server.NewServer(&opts)
	if err != nil {
		return fmt.Errorf("nats server n%d: %w", i+1, err)
	}
	go s.Start()
	c.servers[i] = s
	return nil
}

// waitReady waits until every running server takes connections and
// JetStream has a meta leader that sees them all online.
func (c *Cluster) waitReady() error {
	running := c.running()
	for _, s := range running {
		if !s.ReadyForConnections(clusterStartSeconds * time.Second) {
			return fmt.Errorf("nats server %s not ready in %d s", s.Name(), clusterStartSeconds)
		}
	}
	// JetStream serves once the servers have elected a meta leader, and
	// places an R3 stream once that leader knows every server online (a
	// stream created before then is refused: "no suitable peers for
	// placement").
	deadline := time.Now().Add(clusterStartSeconds * time.Second)
	for {
		for _, s := range running {
			if s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) >= len(running) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no JetStream meta leader knowing the %d servers online in %d s", len(running), clusterStartSeconds)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) running() []*server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*server.Server
	for _, s := range c.servers {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// StopServer shuts server i (0, 1 or 2) down and waits until it is gone;
// its store directory stays for StartServer.
func (c *Cluster) StopServer(i int) {
	c.mu.Lock()
	s := c.servers[i]
	c.servers[i] = nil
	c.mu.Unlock()
	if s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// StartServer starts server i again, on its ports and store directory,
// and waits until it takes connections and the cluster has a meta leader.
func (c *Cluster) StartServer(i int) error {
	if err := c.launch(i); err != nil {
		return err
	}
	return c.waitReady()
}

// StopAll shuts every server down; their store directories stay.
func (c *Cluster) StopAll() {
	for i := range c.opts {
		c.StopServer(i)
	}
}

// StartAll starts every stopped server again and waits for a meta leader.
// The three start together: a lone server of an R3 cluster cannot elect
// anything.
func (c *Cluster) StartAll() error {
	for i := range c.opts {
		c.mu.Lock()
		stopped := c.servers[i] == nil
		c.mu.Unlock()
		if stopped {
			if err := c.launch(i); err != nil {
				return err
			}
		}
	}
	return c.waitReady()
}

// StreamLeader names the server leading stream's replicas, or "" while it
// has none that a running server knows of.
func (c *Cluster) StreamLeader(stream string) string {
	for _, s := range c.running() {
		if s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return s.Name()
		}
	}
	return ""
}

// Clients is how many client connections server i holds (0 if stopped).
func (c *Cluster) Clients(i int) int {
	c.mu.Lock()
	s := c.servers[i]
	c.mu.Unlock()
	if s == nil {
		return 0
	}
	return s.NumClients()
}

// stepDownAttempts bounds the stream leader step-downs of MoveStreamLeader.
const stepDownAttempts = 20

// MoveStreamLeader asks stream's leader to step down (JetStream's stream
// leader step-down API; the next leader is one of the others) until
// server i leads the stream (onto) or another server does (!onto).
func (c *Cluster) MoveStreamLeader(stream string, i int, onto bool) error {
	nc, err := nats.Connect(c.URLs)
	if err != nil {
		return err
	}
	defer nc.Close()
	name := c.opts[i].ServerName
	for range stepDownAttempts {
		deadline := time.Now().Add(clusterStartSeconds * time.Second)
		leader := c.StreamLeader(stream)
		for leader == "" && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			leader = c.StreamLeader(stream)
		}
		if leader != "" && (leader == name) == onto {
			return nil
		}
		if _, err := nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil, clusterStartSeconds*time.Second); err != nil {
			return fmt.Errorf("step the leader of %s down: %w", stream, err)
		}
	}
	return fmt.Errorf("the leader of %s is not where wanted (%s, onto %v) after %d step-downs", stream, name, onto, stepDownAttempts)
}

// ServerIndex is the index (for StopServer) of the server named name.
func (c *Cluster) ServerIndex(name string) int {
	for i, o := range c.opts {
		if o.ServerName == name {
			return i
		}
	}
	return -1
}

// Dir is the directory holding the servers' store directories (n1, n2,
// n3): what a test reads to see what JetStream keeps on disk.
func (c *Cluster) Dir() string { return c.dir }

// Shutdown stops the servers and removes their directory.
func (c *Cluster) Shutdown() {
	c.StopAll()
	_ = os.RemoveAll(c.dir)
}
