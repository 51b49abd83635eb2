package testtools

import (
	"bufio"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// redis-server (Debian's package) is run by the rate-limit and cluster
// tests as the real shared counter store.

// Bounds of running redis-server in tests.
const (
	// redisStartTimeout bounds redis-server answering PING.
	redisStartTimeout = 20 * time.Second
	// redisPollInterval is how often it is asked whether it is up.
	redisPollInterval = 20 * time.Millisecond
)

// RedisServer is one private redis-server started by a test, without
// persistence (the counters are meant to be lost with it).
type RedisServer struct {
	Addr string // 127.0.0.1:port
	URL  string // redis://127.0.0.1:port/0
	cmd  *exec.Cmd
}

// StartRedis runs a private redis-server on a free loopback port; it ends
// with the test. Without redis-server on PATH the test is skipped loudly,
// except in CI, where it fails (.ci/run installs Debian's redis-server).
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	bin := RequireOnPath(t, "redis-server", "apt-get install redis-server")
	port := freePort(t)
	cmd, exited, output := startUntilTestEnds(t, bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no", "--dir", t.TempDir())
	r := &RedisServer{Addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd}
	r.URL = "redis://" + r.Addr + "/0"
	ticker := time.NewTicker(redisPollInterval)
	defer ticker.Stop()
	deadline := time.NewTimer(redisStartTimeout)
	defer deadline.Stop()
	for {
		if r.ping() {
			return r
		}
		select {
		case err := <-exited:
			t.Fatalf("redis-server exited before answering: %v\n%s", err, output.String())
		case <-deadline.C:
			t.Fatalf("redis-server did not answer within %s\n%s", redisStartTimeout, output.String())
		case <-ticker.C:
		}
	}
}

// ping sends PING in the inline protocol and reports whether +PONG came
// back.
func (r *RedisServer) ping() bool {
	conn, err := net.DialTimeout("tcp", r.Addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && strings.TrimSpace(line) == "+PONG"
}

// Pause stops the server with SIGSTOP: connections stay open and nothing
// answers, as with a hung server or a dropped network.
func (r *RedisServer) Pause(t testing.TB) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}

// Resume continues a paused server.
func (r *RedisServer) Resume(t testing.TB) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}
