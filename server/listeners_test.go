package server

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rtcd/datadir"
)

// A first start that cannot bind one of its listeners changes nothing: it
// prints no first-start key (which would be lost) and creates no database,
// master key or admin token, so the next start is still the first.
func TestStartBindsEveryListenerBeforeBootstrapping(t *testing.T) {
	for _, which := range []string{"api", "private", "media"} {
		t.Run(which, func(t *testing.T) {
			dataDir, a := filepath.Join(t.TempDir(), "data"), newStartAddrs(t)
			taken := map[string]string{"api": a.api, "private": a.private, "media": a.media}[which]
			release := hold(t, taken)
			var out bytes.Buffer
			opts := testOptions(t)
			opts.BootstrapOut = &out
			if srv, err := Start(startConfig(t, dataDir, a), opts); err == nil || srv != nil || !strings.Contains(err.Error(), taken) {
				t.Fatalf("Start with %s taken = %v, %v", taken, srv, err)
			}
			if out.Len() != 0 {
				t.Fatalf("the failed start printed %q", out.String())
			}
			for _, name := range []string{"pebble", masterKeyFile, adminTokenFile} {
				if _, err := os.Stat(filepath.Join(dataDir, name)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the failed start created %s (%v)", name, err)
				}
			}
			release()
			opts.BootstrapOut = &out
			srv, err := Start(startConfig(t, dataDir, a), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = srv.Shutdown(t.Context()) }()
			if !strings.Contains(out.String(), `"api_key":"sk_`) {
				t.Errorf("the next start printed %q, want the first-start key", out.String())
			}
		})
	}
}

// A second Start on a data directory that a running server holds says so
// (in one process the pid is this one's).
func TestStartRefusesAHeldDataDirectory(t *testing.T) {
	dataDir := t.TempDir()
	first, err := Start(startConfig(t, dataDir, newStartAddrs(t)), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Shutdown(t.Context()) }()
	second, err := Start(startConfig(t, dataDir, newStartAddrs(t)), testOptions(t))
	if !errors.Is(err, datadir.ErrHeld) || second != nil {
		t.Fatalf("second Start = %v, %v; want datadir.ErrHeld", second, err)
	}
}
