package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Start-up traps, run as the built binary: a first start that cannot bind
// one of its ports changes nothing (no API key printed and lost), a second
// rtcd on the same data directory is told which process holds it, and the
// start log line names every listener.

func TestStartupRealBinary(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("builds and runs the rtcd binary")
	}
	bin := binBuild(t)
	t.Run("a port in use changes nothing", func(t *testing.T) { startupTestPortInUse(t, bin) })
	t.Run("a second rtcd on the same data directory", func(t *testing.T) { startupTestSecondProcess(t, bin) })
}

func startupTestPortInUse(t *testing.T, bin string) {
	for _, flag := range []string{"--listen", "--metrics-listen", "--media-listen"} {
		t.Run(flag, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()
			addrs := map[string]string{"--listen": binFreePort(t), "--metrics-listen": binFreePort(t), "--media-listen": "127.0.0.1:0"}
			addrs[flag] = taken.Addr().String()
			stdout, stderr, code := cliRun(t, bin, nil, "serve", "--data-dir", dir, "--listen", addrs["--listen"],
				"--metrics-listen", addrs["--metrics-listen"], "--media-listen", addrs["--media-listen"])
			if code == 0 {
				t.Fatalf("rtcd serve with %s on a taken port exited 0\n%s", flag, stderr)
			}
			if stdout != "" {
				t.Fatalf("a start that failed printed %q: a first-start key printed now would be lost", stdout)
			}
			if !strings.Contains(stderr, taken.Addr().String()) || !strings.Contains(stderr, flag) || !strings.Contains(stderr, "address already in use") {
				t.Errorf("the error does not name the address, the setting and the cause: %s", stderr)
			}
			for _, name := range []string{"pebble", "master.key", "admin.token"} {
				if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
					t.Errorf("the failed start created %s (%v)", name, err)
				}
			}
			if flag != "--listen" {
				return
			}
			// With the port free again, the next start is a first start: it
			// bootstraps and prints the key, which works.
			taken.Close()
			p := binLaunch(t, bin, dir)
			boot := startupBootstrapLine(t, p)
			if err := p.waitReady(boot.APIKey, 30*time.Second); err != nil {
				t.Fatalf("the start after the failed one: %v\n%s", err, p.logTail())
			}
		})
	}
}

// startupBootstrapLine waits for the first-start JSON line in p's output.
func startupBootstrapLine(t *testing.T, p *binProc) bootstrap {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		f, err := os.Open(p.logPath)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var b bootstrap
			if strings.HasPrefix(sc.Text(), "{") && json.Unmarshal(sc.Bytes(), &b) == nil && strings.HasPrefix(b.APIKey, "sk_") {
				f.Close()
				return b
			}
		}
		f.Close()
		select {
		case <-p.exited:
			t.Fatalf("rtcd exited without printing the first-start key\n%s", p.logTail())
		default:
		}
		time.Sleep(20 * time.Millisecond) // polling a starting process's output
	}
	t.Fatalf("no first-start key printed\n%s", p.logTail())
	return bootstrap{}
}

func startupTestSecondProcess(t *testing.T, bin string) {
	dir := t.TempDir()
	boot := binInit(t, bin, dir)
	first := binServe(t, bin, dir, boot.APIKey)

	// The start line names every listener, the media node's included.
	line := regexp.MustCompile(`msg="rtcd serving" api=127\.0\.0\.1:\d+ metrics=127\.0\.0\.1:\d+ media=127\.0\.0\.1:\d+ `)
	if !first.waitLog(line, 10*time.Second) {
		t.Errorf("the start line does not name the API, private and media listeners:\n%s", first.logTail())
	}

	held := fmt.Sprintf("another rtcd (pid %d) holds the data directory", first.cmd.Process.Pid)
	_, stderr, code := cliRun(t, bin, nil, "serve", "--data-dir", dir, "--listen", binFreePort(t),
		"--metrics-listen", binFreePort(t), "--media-listen", "127.0.0.1:0")
	if code == 0 || !strings.Contains(stderr, held) {
		t.Errorf("a second rtcd serve on the same data directory: exit %d, %q; want it to say %q", code, stderr, held)
	}
	_, stderr, code = cliRun(t, bin, nil, "init", "--data-dir", dir)
	if code == 0 || !strings.Contains(stderr, held) {
		t.Errorf("rtcd init on a served data directory: exit %d, %q; want it to say %q", code, stderr, held)
	}
	if err := first.waitReady(boot.APIKey, 5*time.Second); err != nil {
		t.Fatalf("the first rtcd stopped serving: %v", err)
	}

	// kill -9 leaves no stale claim: the kernel drops the lock.
	first.kill()
	binServe(t, bin, dir, boot.APIKey)
}

// waitLog waits until p's output matches re (a line logged just after the
// listeners start serving can follow the first answered request).
func (p *binProc) waitLog(re *regexp.Regexp, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		b, _ := os.ReadFile(p.logPath)
		if re.Match(b) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond) // polling a process's output
	}
}
