package payments

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// stripe-mock, a fake Stripe API built from the OpenAPI spec, is a program
// the tests run, pinned in the tools module (../tools). The tests look for
// it in this order: $STRIPE_MOCK_BIN, stripe-mock in PATH,
// $(go env GOPATH)/bin/stripe-mock, then the build cache below; when none
// exists they build it from the tools module. They skip only when that
// build fails.
const (
	stripeMockVersion = "v0.203.0"
	// stripeMockBuildTimeout bounds building stripe-mock from a cold cache.
	stripeMockBuildTimeout = 5 * time.Minute
	// stripeMockStartTimeout bounds stripe-mock loading its spec and
	// binding its port.
	stripeMockStartTimeout = 60 * time.Second
	// stripeMockListening is the line stripe-mock prints once its HTTP
	// listener is bound; the address follows it.
	stripeMockListening = "Listening for HTTP at address: "
)

var (
	stripeMockOnce sync.Once
	stripeMockBin  string
	stripeMockErr  error
)

// stripeMockBinary finds or builds the stripe-mock binary, once per test
// binary.
func stripeMockBinary() (string, error) {
	stripeMockOnce.Do(func() {
		stripeMockBin, stripeMockErr = findOrBuildStripeMock()
	})
	return stripeMockBin, stripeMockErr
}

func findOrBuildStripeMock() (string, error) {
	if bin := os.Getenv("STRIPE_MOCK_BIN"); bin != "" {
		return bin, nil
	}
	if bin, err := exec.LookPath("stripe-mock"); err == nil {
		return bin, nil
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			bin := filepath.Join(dir, "bin", "stripe-mock")
			if isExecutable(bin) {
				return bin, nil
			}
		}
	}
	cacheDir, err := os.UserCacheDir()
	if err != nil {
		cacheDir = os.TempDir()
	}
	dir := filepath.Join(cacheDir, "rtcd-tools", "stripe-mock-"+stripeMockVersion)
	bin := filepath.Join(dir, "stripe-mock")
	if isExecutable(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	toolsDir, err := filepath.Abs(filepath.Join("..", "tools"))
	if err != nil {
		return "", err
	}
	// Build next to the target and rename, so a concurrent or interrupted
	// build never leaves a half-written binary at the cached path.
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), stripeMockBuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, "github.com/stripe/stripe-mock")
	cmd.Dir = toolsDir
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("go build github.com/stripe/stripe-mock in %s: %v\n%s", toolsDir, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// startStripeMock runs a private stripe-mock on free loopback ports and
// returns its HTTP base URL; the process ends with the test. Asking the
// kernel for the port (":0") and reading the bound address back from
// stripe-mock's output avoids both a fixed port and a pick-then-bind race.
func startStripeMock(t *testing.T) string {
	t.Helper()
	bin, err := stripeMockBinary()
	if err != nil {
		t.Skipf("\n\n*** SKIPPING: stripe-mock %s could not be built, so the Stripe API tests did not run ***\n%v\n"+
			"Install it with: (cd tools && go build -o \"$(go env GOPATH)/bin/stripe-mock\" github.com/stripe/stripe-mock) or set STRIPE_MOCK_BIN.\n\n",
			stripeMockVersion, err)
	}
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
