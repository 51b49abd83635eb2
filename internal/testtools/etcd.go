package testtools

import (
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// etcd (etcd's own server, pinned in the tools module: Debian's 3.4 is too
// old) is run by the cluster tests as the real membership store.

// Bounds of running etcd in tests.
const (
	EtcdVersion = "v3.7.3"
	// etcdStartTimeout bounds etcd electing itself and serving clients.
	etcdStartTimeout = 30 * time.Second
	// etcdPollInterval is how often its client port is tried.
	etcdPollInterval = 20 * time.Millisecond
)

// Etcd is found or built once per test binary: $ETCD_BIN, PATH, the user
// cache, else a build from the tools module (tools/etcd).
var Etcd = &Tool{Name: "etcd", Package: "rtcd/tools/etcd", Version: EtcdVersion,
	EnvVar: "ETCD_BIN", ToolsDir: "../tools"}

// EtcdServer is one private single-member etcd started by a test.
type EtcdServer struct {
	Endpoint string // 127.0.0.1:port, the client endpoint
}

// StartEtcd runs a private single-member etcd with its own data directory
// on free loopback ports; it ends with the test. Without an etcd binary the
// test is skipped loudly, except in CI, where it fails (.ci/run builds it).
func StartEtcd(t testing.TB) *EtcdServer {
	t.Helper()
	bin := Etcd.Require(t)
	clientURL := "http://127.0.0.1:" + strconv.Itoa(freePort(t))
	peerURL := "http://127.0.0.1:" + strconv.Itoa(freePort(t))
	_, exited, output := startUntilTestEnds(t, bin,
		"--name", "test", "--data-dir", filepath.Join(t.TempDir(), "etcd"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "test="+peerURL, "--log-level", "error")
	e := &EtcdServer{Endpoint: clientURL[len("http://"):]}
	ticker := time.NewTicker(etcdPollInterval)
	defer ticker.Stop()
	deadline := time.NewTimer(etcdStartTimeout)
	defer deadline.Stop()
	for {
		// /health answers true once the member has a leader (itself).
		if res, err := http.Get(clientURL + "/health"); err == nil {
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK && strings.Contains(string(body), `"health":"true"`) {
				return e
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("etcd exited before serving: %v\n%s", err, output.String())
		case <-deadline.C:
			t.Fatalf("etcd did not serve within %s\n%s", etcdStartTimeout, output.String())
		case <-ticker.C:
		}
	}
}
