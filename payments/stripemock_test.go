package payments

import (
	"bufio"
	"os/exec"
	"rtcd/internal/testtools"
	"strings"
	"testing"
	"time"
)

// stripe-mock, a fake Stripe API built from the OpenAPI spec, is a program
// the tests run, pinned in the tools module (../tools). The tests look for
// it in this order: $STRIPE_MOCK_BIN, stripe-mock in PATH,
// $(go env GOPATH)/bin/stripe-mock, then the build cache below; when none
// exists they build it from the tools module. When that build fails they
// skip loudly, except in CI, where they fail (testtools.Tool.Require).
const (
	stripeMockVersion = "v0.203.0"
	// stripeMockStartTimeout bounds stripe-mock loading its spec and
	// binding its port.
	stripeMockStartTimeout = 60 * time.Second
	// stripeMockListening is the line stripe-mock prints once its HTTP
	// listener is bound; the address follows it.
	stripeMockListening = "Listening for HTTP at address: "
)

// stripeMock is found or built once per test binary (see package testtools).
var stripeMock = &testtools.Tool{Name: "stripe-mock", Package: "github.com/stripe/stripe-mock", Version: stripeMockVersion,
	EnvVar: "STRIPE_MOCK_BIN", ToolsDir: "../tools", LookGOPATH: true}

// startStripeMock runs a private stripe-mock on free loopback ports and
// returns its HTTP base URL; the process ends with the test. Asking the
// kernel for the port (":0") and reading the bound address back from
// stripe-mock's output avoids both a fixed port and a pick-then-bind race.
func startStripeMock(t *testing.T) string {
	t.Helper()
	bin := stripeMock.Require(t)
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
