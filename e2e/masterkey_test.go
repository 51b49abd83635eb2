package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rtcd/config"
	"rtcd/server"
)

// An initialised data directory keeps the master key it was initialised
// with: a missing key file or another key refuses to start, instead of
// coming up with a new key under which every API key answers 401.
func TestMasterKeyIsNeverSilentlyReplaced(t *testing.T) {
	dir := t.TempDir()
	e := startIn(t, dir, nil)
	e.Stop()

	startErr := func(extra ...string) error {
		t.Helper()
		args := append([]string{"--data-dir", dir, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
			"--media-listen=", "--log-level", "error"}, withStore(t, dir, extra...)...)
		cfg, err := config.Parse("test", args, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		srv, err := server.Start(cfg, server.Options{})
		if err == nil {
			_ = srv.Shutdown(t.Context())
		}
		return err
	}

	keyFile := filepath.Join(dir, "master.key")
	saved, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	if err := startErr(); err == nil || !strings.Contains(err.Error(), "master.key is missing") {
		t.Fatalf("start without the key file: %v", err)
	}
	if _, err := os.Stat(keyFile); !os.IsNotExist(err) {
		t.Fatalf("a new key file was created: %v", err)
	}
	if err := startErr("--master-key", strings.Repeat("cd", 32)); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("start with another key: %v", err)
	}
	if err := os.WriteFile(keyFile, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	e2 := startIn(t, dir, nil)
	e2.do("GET", "/v1/system/info", e.Boot.APIKey, nil).must(t, 200)
}
