package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	rtcdconfig "rtcd/config"
	"rtcd/server"
)

// TestConnectAndBaseline runs the connect and baseline scenarios for about
// a second each against an in-process server, so the suite keeps working.
// It asserts that requests were answered, not how fast.
func TestConnectAndBaseline(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load for a few seconds")
	}
	dir := t.TempDir()
	srv, creds := startInProcess(t, dir)
	lc := &config{
		Scenarios: []string{"baseline", "connect"}, Mode: modeClosed, Concurrency: 8, Duration: time.Second,
		Rooms: 4, Participants: 16, Projects: 1, JoinPerRoom: 10, CreatePerRoom: 4, WithBaseline: true,
		BaselineInProcess: true, Quiet: true, JSONPath: filepath.Join(dir, "report.json"),
		APIKeys: []string{creds.APIKey}, Addr: srv.APIAddr(), MetricsAddr: srv.MetricsAddr(),
	}
	if err := lc.validate(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tgt, err := openTarget(ctx, lc, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep, err := runWith(ctx, lc, tgt, &out, io.Discard)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("report:\n%s", out.String())
	if rep.Baseline == nil || rep.Baseline.Load.Total.OK == 0 {
		t.Fatalf("baseline answered nothing: %+v", rep.Baseline)
	}
	if len(rep.Runs) != 1 || rep.Runs[0].Scenario != "connect" {
		t.Fatalf("runs: %+v", rep.Runs)
	}
	r := rep.Runs[0]
	if r.Load.Total.OK == 0 || r.Load.Total.Errors != 0 {
		t.Fatalf("connect: %d ok, errors %v", r.Load.Total.OK, r.Load.Total.ErrorsByCode)
	}
	if r.Server == nil || r.Server.Counters["rtcd_connect_results_total"].Delta < float64(r.Load.Total.OK) {
		t.Fatalf("server figures do not count the connects: %+v", r.Server)
	}
	if r.Ratio == nil || r.Ratio.Throughput <= 0 {
		t.Fatalf("no ratio to the baseline: %+v", r.Ratio)
	}
	raw, err := os.ReadFile(lc.JSONPath)
	if err != nil {
		t.Fatal(err)
	}
	var back fullReport
	if err := json.Unmarshal(raw, &back); err != nil || len(back.Runs) != 1 {
		t.Fatalf("JSON report: %v", err)
	}
}

// startInProcess starts rtcd in the test's process on loopback, with the
// local server's generous limits, and returns it and its bootstrap
// credentials.
func startInProcess(t *testing.T, dir string) (*server.Server, credentials) {
	t.Helper()
	args := append([]string{"--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
		"--media-listen", "127.0.0.1:0", "--bootstrap-credit", localBootstrapCredit}, localServerFlags...)
	args = append(args, "--log-level=error")
	cfg, err := rtcdconfig.Parse("test", args, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	var boot bytes.Buffer
	srv, err := server.Start(cfg, server.Options{BootstrapOut: &boot, Fatal: func(err error) { t.Errorf("fatal storage error: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	var creds credentials
	if err := json.Unmarshal(boot.Bytes(), &creds); err != nil {
		t.Fatalf("bootstrap output %q: %v", boot.String(), err)
	}
	return srv, creds
}

// parseAndValidate reads the flags as main does: parsed, then checked.
func parseAndValidate(args ...string) (*config, error) {
	c, _, err := parseFlags(args, io.Discard)
	if err != nil {
		return nil, err
	}
	return c, c.validate()
}
