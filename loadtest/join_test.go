package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSocketFigures: the memory per socket is the live heap and the stacks
// held less before, over the sockets; before the process's first GC its
// allocated heap stands for the live one; without the live heap metric,
// the heap in use does, and the report says which.
func TestSocketFigures(t *testing.T) {
	scrapeOf := func(v map[string]float64) *scrape { return &scrape{Values: v} }
	held := scrapeOf(map[string]float64{
		"go_gc_heap_live_bytes": 12_000_000, "go_memstats_stack_inuse_bytes": 5_000_000, "go_memstats_heap_inuse_bytes": 30_000_000,
		"go_memstats_heap_alloc_bytes": 25_000_000, "process_resident_memory_bytes": 90_000_000, "go_goroutines": 1_017, gcCountMetric: 7,
	})
	before := scrapeOf(map[string]float64{
		"go_gc_heap_live_bytes": 2_000_000, "go_memstats_stack_inuse_bytes": 1_000_000, "go_memstats_heap_inuse_bytes": 4_000_000,
		"go_memstats_heap_alloc_bytes": 3_000_000, "process_resident_memory_bytes": 40_000_000, "go_goroutines": 17, gcCountMetric: 1,
	})
	m := socketFigures(before, held, 1000, "p")
	if m.HeapBytes != 10_000 || m.StackBytes != 4_000 || m.Bytes != 14_000 || m.RSSBytes != 50_000 || m.Goroutines != 1 ||
		m.HeapInuseBytes != 26_000 || m.HeapSource != "live" || m.Sockets != 1000 || m.Process != "p" {
		t.Fatalf("figures %+v", m)
	}

	before.Values[gcCountMetric] = 0 // no GC yet: the live heap reads 0
	before.Values["go_gc_heap_live_bytes"] = 0
	if m = socketFigures(before, held, 1000, "p"); m.HeapBytes != 9_000 || !strings.Contains(m.HeapSource, "allocated before the first GC") {
		t.Fatalf("before the first GC: %+v", m)
	}

	delete(before.Values, "go_gc_heap_live_bytes")
	if m = socketFigures(before, held, 1000, "p"); m.HeapBytes != 26_000 || !strings.Contains(m.HeapSource, "in use") {
		t.Fatalf("no live heap metric: %+v", m)
	}
}

// TestJoinFlags: where the media node runs, and the GC wait, are checked.
func TestJoinFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-local", "-scenario", "join", "-media-node", "elsewhere"},
		{"-addr", "127.0.0.1:1", "-api-key", "k", "-scenario", "join", "-media-node", "own"},
		{"-local", "-scenario", "join", "-media-metrics-addr", "127.0.0.1:1"},
		{"-local", "-scenario", "join", "-join-gc-wait", "-1s"},
		{"-local", "-scenario", "join", "-join-gc-wait", "11m"},
	} {
		if _, err := parseAndValidate(args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	c, err := parseAndValidate("-local", "-scenario", "join")
	if err != nil || c.MediaNode != mediaNodeBuiltin || c.JoinGCWait != defaultJoinGCWait {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	if _, err := parseAndValidate("-local", "-scenario", "join", "-media-node", "own", "-join-gc-wait", "0"); err != nil {
		t.Fatal(err)
	}
	if _, err := parseAndValidate("-addr", "127.0.0.1:1", "-api-key", "k", "-scenario", "join", "-media-metrics-addr", "127.0.0.1:2"); err != nil {
		t.Fatal(err)
	}
}

// TestJoinScenario holds a few media sockets for about a second against an
// in-process server and checks that they were held, pinged and measured
// (the process holds the clients too, so the figures mean nothing here;
// only that they are there).
func TestJoinScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("holds media sockets for a few seconds")
	}
	dir := t.TempDir()
	srv, creds := startInProcess(t, dir)
	const sockets = 20
	lc := &config{
		Scenarios: []string{"join"}, Mode: modeClosed, Concurrency: sockets, Duration: time.Second, Rooms: 4, Participants: 16,
		Projects: 1, JoinPerRoom: 10, PingInterval: 200 * time.Millisecond, CreatePerRoom: 4, Quiet: true,
		JSONPath: filepath.Join(dir, "report.json"), APIKeys: []string{creds.APIKey}, Addr: srv.APIAddr(), MetricsAddr: srv.MetricsAddr(),
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
	if len(rep.Runs) != 1 || rep.Runs[0].Join == nil {
		t.Fatalf("runs: %+v", rep.Runs)
	}
	j := rep.Runs[0].Join
	if j.Held != sockets || j.Dropped != 0 {
		t.Fatalf("held %d of %d, dropped %d", j.Held, sockets, j.Dropped)
	}
	m := j.PerSocket
	if m == nil || m.Sockets != sockets || m.Goroutines <= 0 || m.StackBytes <= 0 || m.Process != mediaProcessBuiltin {
		t.Fatalf("per socket: %+v (notes %q)", m, rep.Runs[0].Notes)
	}
	if !strings.Contains(out.String(), "per socket") {
		t.Fatalf("the report has no line per socket:\n%s", out.String())
	}
}
