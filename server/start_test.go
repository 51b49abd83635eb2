package server

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"rtcd/clock"
	"rtcd/config"
	"rtcd/internal/testtools"
)

// startAddrs are the loopback addresses one test start binds, fixed
// beforehand so the test can check afterwards that each is free again.
type startAddrs struct{ api, private, media string }

func newStartAddrs(t *testing.T) startAddrs {
	return startAddrs{api: freeAddr(t), private: freeAddr(t), media: testtools.FreeMediaAddr(t)}
}

// freeAddr is a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// startConfig is the configuration of a test start on dataDir and a; extra
// are `rtcd serve` flags, later ones winning.
func startConfig(t *testing.T, dataDir string, a startAddrs, extra ...string) *config.Config {
	t.Helper()
	args := append([]string{"--data-dir", dataDir, "--listen", a.api, "--metrics-listen", a.private,
		"--media-listen", a.media, "--log-level", "error"}, extra...)
	cfg, err := config.Parse("test", args, func(string) string { return "" })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

func testOptions(t *testing.T) Options {
	return Options{Clock: clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), BootstrapOut: io.Discard,
		Fatal: func(err error) { t.Errorf("fatal storage error: %v", err) }}
}

// requireFree fails unless every address can be listened on again: a failed
// Start must not keep any of them bound.
func requireFree(t *testing.T, addrs ...string) {
	t.Helper()
	for _, addr := range addrs {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("%s is still bound after the failed start: %v", addr, err)
			continue
		}
		_ = ln.Close()
	}
}

// requireStarts starts cfg again and stops it: the failed start released the
// data directory's lock and every port, so a second start in the same
// process succeeds on the same addresses.
func requireStarts(t *testing.T, cfg *config.Config) {
	t.Helper()
	srv, err := Start(cfg, testOptions(t))
	if err != nil {
		t.Fatalf("start after the failed start: %v", err)
	}
	if got := srv.APIAddr(); got != cfg.Listen {
		t.Errorf("API on %s, want %s", got, cfg.Listen)
	}
	if got := srv.MetricsAddr(); got != cfg.MetricsListen {
		t.Errorf("private listener on %s, want %s", got, cfg.MetricsListen)
	}
	if cfg.MediaListen != "" && srv.MediaAddr() != cfg.MediaListen {
		t.Errorf("media node on %s, want %s", srv.MediaAddr(), cfg.MediaListen)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

var errInjected = errors.New("injected start failure")

// goroutineSettleTimeout bounds how long goroutines a failed start stopped
// may take to return.
const goroutineSettleTimeout = 5 * time.Second

// A failure after any step of Start releases what every earlier step took:
// no listener stays bound and the data directory is unlocked. Checked with
// the embedded media node and with a node run on its own, at every step.
func TestStartFailureAtEveryStepReleasesEverything(t *testing.T) {
	for _, media := range []string{"embedded", "remote"} {
		for _, step := range startSteps {
			t.Run(media+"/"+strings.ReplaceAll(step.name, " ", "_"), func(t *testing.T) {
				a := newStartAddrs(t)
				var extra []string
				if media == "remote" {
					// Nothing needs to answer there: commands are queued
					// and nothing is queued before the server serves.
					extra = []string{"--media-listen=", "--media-control-url=http://" + freeAddr(t), "--media-url=ws://127.0.0.1:1/rtc"}
				}
				cfg := startConfig(t, t.TempDir(), a, extra...)
				opts := testOptions(t)
				opts.afterStep = func(name string) error {
					if name == step.name {
						return errInjected
					}
					return nil
				}
				before := runtime.NumGoroutine()
				srv, err := Start(cfg, opts)
				if !errors.Is(err, errInjected) || srv != nil {
					t.Fatalf("Start = %v, %v; want the injected failure", srv, err)
				}
				requireFree(t, a.api, a.private, a.media)
				requireGoroutinesEnd(t, before)
				requireStarts(t, cfg)
			})
		}
	}
}

// Failures the configuration or the machine cause, at the steps that bind
// or hold something, leave every port free and the data directory
// unlocked; once the cause is gone the same configuration starts.
func TestStartFailureReleasesListeners(t *testing.T) {
	cases := []struct {
		name string
		// setUp returns the extra flags that make Start fail and undoes
		// whatever else it arranged once called.
		setUp   func(t *testing.T, dataDir string, a startAddrs) (flags []string, undo func())
		wantErr string
	}{
		{"unreadable webhook CA file", func(t *testing.T, dataDir string, _ startAddrs) ([]string, func()) {
			// A directory: unreadable as a file even for root.
			return []string{"--webhook-extra-ca-file=" + t.TempDir()}, nil
		}, "webhook client"},
		{"API port taken", func(t *testing.T, _ string, a startAddrs) ([]string, func()) {
			return nil, hold(t, a.api)
		}, "listen 127.0.0.1:"},
		{"private port taken", func(t *testing.T, _ string, a startAddrs) ([]string, func()) {
			return nil, hold(t, a.private)
		}, "metrics listen"},
		{"media port taken", func(t *testing.T, _ string, a startAddrs) ([]string, func()) {
			return nil, hold(t, a.media)
		}, "media listen"},
		{"SMTP CA file without certificates", func(t *testing.T, dataDir string, _ startAddrs) ([]string, func()) {
			ca := filepath.Join(t.TempDir(), "ca.pem")
			if err := os.WriteFile(ca, []byte("not a certificate\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			return []string{"--smtp-host=127.0.0.1", "--smtp-port=1", "--smtp-tls=starttls", "--smtp-ca-file=" + ca}, nil
		}, "smtp"},
		{"unreadable admin token", func(t *testing.T, dataDir string, _ startAddrs) ([]string, func()) {
			token := filepath.Join(dataDir, adminTokenFile)
			if err := os.MkdirAll(token, 0o700); err != nil {
				t.Fatal(err)
			}
			return nil, func() { _ = os.Remove(token) }
		}, adminTokenFile},
		{"media control URL with a path", func(t *testing.T, _ string, _ startAddrs) ([]string, func()) {
			return []string{"--media-listen=", "--media-control-url=http://127.0.0.1:1/not-an-origin", "--media-url=ws://127.0.0.1:1/rtc"}, nil
		}, "media control"},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			dataDir, a := t.TempDir(), newStartAddrs(t)
			flags, undo := c.setUp(t, dataDir, a)
			before := runtime.NumGoroutine()
			srv, err := Start(startConfig(t, dataDir, a, flags...), testOptions(t))
			if err == nil || srv != nil {
				t.Fatalf("Start = %v, %v; want a failure", srv, err)
			}
			if !strings.Contains(err.Error(), c.wantErr) || (c.name == "API port taken" && !strings.HasPrefix(err.Error(), "listen "+a.api)) {
				t.Errorf("error %q does not mention %q", err, c.wantErr)
			}
			if undo != nil {
				undo()
			}
			requireFree(t, a.api, a.private, a.media)
			requireGoroutinesEnd(t, before)
			requireStarts(t, startConfig(t, dataDir, a))
		})
	}
}

// requireGoroutinesEnd waits until no more goroutines run than before a
// failed start: the actors, the webhook dispatcher, the media node and the
// store's background work all stopped.
func requireGoroutinesEnd(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(goroutineSettleTimeout)
	for {
		n := runtime.NumGoroutine()
		if n <= before {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines run after the failed start, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hold binds addr until the returned function is called.
func hold(t *testing.T, addr string) func() {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return func() { _ = ln.Close() }
}
