// Package natstest starts NATS JetStream clusters for tests: three
// embedded servers on loopback, as the replicated store (persistence/jsstore)
// runs on, for its own tests and the end-to-end ones.
package natstest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster is three embedded NATS servers (nats-server v2, JetStream on),
// clustered on loopback: the smallest cluster whose R3 streams survive
// losing one. Tests start one (Start) and make streams of their own in it.
type Cluster struct {
	servers []*server.Server
	dir     string
	URLs    string // the servers' client URLs, comma-separated
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
// and waits until JetStream has a meta leader.
func Start() (*Cluster, error) {
	dir, err := os.MkdirTemp("", "rtcd-jsstore-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir}
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
			c.Shutdown()
			return nil, fmt.Errorf("nats server %d: %w", i+1, err)
		}
		go s.Start()
		c.servers = append(c.servers, s)
	}
	for _, s := range c.servers {
		if !s.ReadyForConnections(clusterStartSeconds * time.Second) {
			c.Shutdown()
			return nil, fmt.Errorf("nats server %s not ready in %d s", s.Name(), clusterStartSeconds)
		}
		clientURLs = append(clientURLs, s.ClientURL())
	}
	c.URLs = strings.Join(clientURLs, ",")
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
			c.Shutdown()
			return nil, fmt.Errorf("no JetStream meta leader in %d s", clusterStartSeconds)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Shutdown stops the servers and removes their directory.
func (c *Cluster) Shutdown() {
	for _, s := range c.servers {
		s.Shutdown()
		s.WaitForShutdown()
	}
	_ = os.RemoveAll(c.dir)
}
