package testtools

import (
	"bufio"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// stripe-mock, a fake Stripe API built from Stripe's OpenAPI spec (it
// validates every parameter, keeps no state and sends no webhooks), is run
// by the payments and e2e tests as the real Stripe API.

// Bounds of running stripe-mock in tests.
const (
	StripeMockVersion = "v0.203.0"
	// stripeMockStartTimeout bounds stripe-mock loading its spec and
	// binding its port.
	stripeMockStartTimeout = 60 * time.Second
	// stripeMockListening is the line stripe-mock prints once its HTTP
	// listener is bound; the address follows it.
	stripeMockListening = "Listening for HTTP at address: "
)

// StripeMock is found or built once per test binary: $STRIPE_MOCK_BIN,
// PATH, $(go env GOPATH)/bin, the user cache, else a build from the tools
// module.
var StripeMock = &Tool{Name: "stripe-mock", Package: "github.com/stripe/stripe-mock", Version: StripeMockVersion,
	EnvVar: "STRIPE_MOCK_BIN", ToolsDir: "../tools", LookGOPATH: true}

// StartStripeMock runs a private stripe-mock on free loopback ports and
// returns its HTTP base URL (http://127.0.0.1:port); the process ends with
// the test. Asking the kernel for the port (":0") and reading the bound
// address back from stripe-mock's output avoids both a fixed port and a
// pick-then-bind race. Without a stripe-mock binary the test is skipped
// loudly, except in CI, where it fails (Tool.Require): CI builds it first
// (.ci/run).
func StartStripeMock(t testing.TB) string {
	t.Helper()
	bin := StripeMock.Require(t)
	// HTTPS is on by default on :12112 unless given an address of its own;
	// a free loopback port keeps parallel runs from colliding.
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})

	addr := make(chan string, 1)
	go func() {
		// Keep reading to EOF so stripe-mock never blocks on a full pipe.
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if a, ok := strings.CutPrefix(scanner.Text(), stripeMockListening); ok {
				select {
				case addr <- a:
				default:
				}
			}
		}
		close(addr)
	}()
	timer := time.NewTimer(stripeMockStartTimeout)
	defer timer.Stop()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatalf("stripe-mock (%s) exited before listening", bin)
		}
		return "http://" + a
	case <-timer.C:
		t.Fatalf("stripe-mock (%s) did not listen within %s", bin, stripeMockStartTimeout)
	}
	return ""
}
