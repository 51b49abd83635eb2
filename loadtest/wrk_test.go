package main

import (
	"bytes"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const wrkSample = `Running 30s test @ http://127.0.0.1:40001/v1/connect
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     2.10ms    1.20ms  30.00ms   90.00%
    Req/Sec    30.00k     2.00k   35.00k    70.00%
  Latency Distribution
     50%  812.00us
     75%    2.50ms
     90%    3.20ms
     99%    1.02s
  900000 requests in 30.00s, 500.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 3
  Non-2xx or 3xx responses: 12
Requests/sec:  30000.50
Transfer/sec:     16.67MB
`

func TestParseWrk(t *testing.T) {
	r, err := parseWrk(wrkSample)
	if err != nil {
		t.Fatal(err)
	}
	want := wrkRun{RPS: 30000.5, Requests: 900000, Non2xx: 12, SocketErrors: 5, P50Ms: 0.812, P99Ms: 1020}
	if r != want {
		t.Fatalf("parsed %+v, want %+v", r, want)
	}
	if _, err := parseWrk("unable to connect to 127.0.0.1:1 Connection refused\n"); err == nil {
		t.Fatal("a report without figures parsed")
	}
	if _, err := parseWrk(strings.Replace(wrkSample, "1.02s", "1.02x", 1)); err == nil {
		t.Fatal("a latency with an unknown unit parsed")
	}
}

// TestWrkScenario runs the wrk scenario (one round of a second each)
// against an in-process server when Debian's wrk is installed: every
// request of the Lua script is a connect rtcd answers with 200.
func TestWrkScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load for a few seconds")
	}
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Skip("wrk is not installed (apt-get install wrk)")
	}
	dir := t.TempDir()
	srv, creds := startInProcess(t, dir)
	lc := &config{
		Scenarios: []string{"wrk"}, Mode: modeClosed, Concurrency: 8, Duration: time.Second,
		Rooms: 4, Participants: 16, Projects: 1, JoinPerRoom: 10, CreatePerRoom: 4,
		BaselineInProcess: true, Quiet: true, JSONPath: filepath.Join(dir, "report.json"),
		APIKeys: []string{creds.APIKey}, Addr: srv.APIAddr(), MetricsAddr: srv.MetricsAddr(),
		WrkBin: "wrk", WrkRounds: 1, WrkThreads: 1,
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
	if len(rep.Runs) != 1 || rep.Runs[0].Wrk == nil || len(rep.Runs[0].Wrk.Rounds) != 1 {
		t.Fatalf("runs: %+v", rep.Runs)
	}
	rd := rep.Runs[0].Wrk.Rounds[0]
	for _, run := range []wrkRun{rd.Baseline, rd.Connect} {
		if run.Requests == 0 || run.Non2xx != 0 || run.SocketErrors != 0 {
			t.Fatalf("%s: %+v", run.Target, run)
		}
	}
	if rd.Ratio <= 0 || rd.Connect.ServerCPUMicros <= 0 {
		t.Fatalf("round %+v", rd)
	}
}
