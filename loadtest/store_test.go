package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestStoreFlags: the store scenario starts its own servers, so it needs
// -local; "all" leaves it out.
func TestStoreFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-scenario", "store"},
		{"-addr", "127.0.0.1:1", "-api-key", "k", "-scenario", "store"},
		{"-local", "-addr", "127.0.0.1:1", "-scenario", "store"},
	} {
		if _, err := parseAndValidate(args...); err == nil || !strings.Contains(err.Error(), "store") {
			t.Errorf("%v: %v, want an error naming store", args, err)
		}
	}
	c, err := parseAndValidate("-local", "-scenario", "store")
	if err != nil || c.needsServer() {
		t.Fatalf("-local -scenario store: %v; needs the shared server %v", err, c != nil && c.needsServer())
	}
	if c, err = parseAndValidate("-local", "-scenario", "all"); err != nil || slices.Contains(c.Scenarios, "store") {
		t.Fatalf("all: %v, %v", c.Scenarios, err)
	}
}

// TestStoreScenario runs the store scenario for a moment: rtcd (built from
// the repository) on Pebble, then on three NATS servers, each taking
// creates and join cycles without an error; the JetStream run's writes
// land in the stream, the Pebble run's in its write-ahead log; the report
// states the ratios.
func TestStoreScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rtcd and starts two servers and a NATS cluster")
	}
	dir := t.TempDir()
	c, _, err := parseFlags([]string{"-local", "-scenario", "store", "-duration", "1500ms", "-concurrency", "4",
		"-baseline-in-process", "-quiet", "-json", filepath.Join(dir, "report.json")}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep, err := runWith(context.Background(), c, nil, &out, io.Discard)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("report:\n%s", out.String())
	if len(rep.Runs) != 1 || rep.Runs[0].Store == nil {
		t.Fatalf("runs: %+v", rep.Runs)
	}
	sf := rep.Runs[0].Store
	if len(sf.Runs) != 2 || sf.Runs[0].Store != storePebble || sf.Runs[1].Store != storeJetStream {
		t.Fatalf("stores: %+v", sf.Runs)
	}
	for _, run := range sf.Runs {
		for what, l := range map[string]*loadResult{"creates": run.Creates.Load, "joins": run.Joins.Load} {
			if l.Total.OK == 0 || l.Total.Errors != 0 {
				t.Errorf("%s %s: %d ok, %d errors %v", run.Store, what, l.Total.OK, l.Total.Errors, l.Ops)
			}
		}
		var joins, leaves int64
		for _, o := range run.Joins.Load.Ops {
			switch o.Name {
			case "join":
				joins = o.OK
			case "leave":
				leaves = o.OK
			}
		}
		if joins != run.Joins.Load.Total.OK || leaves != joins {
			t.Errorf("%s: %d cycles, %d joins, %d leaves", run.Store, run.Joins.Load.Total.OK, joins, leaves)
		}
		for what, w := range map[string]*storeWritten{"creates": run.Creates.Written, "joins": run.Joins.Written} {
			if w == nil || w.Bytes <= 0 || (run.Store == storeJetStream) != (w.Messages > 0) {
				t.Errorf("%s %s: written %+v (notes %q)", run.Store, what, w, rep.Runs[0].Notes)
			}
		}
	}
	if sf.CreatesRatio == nil || sf.CreatesRatio.Throughput <= 0 || sf.JoinsRatio == nil || sf.JoinsRatio.Throughput <= 0 {
		t.Fatalf("ratios: creates %+v, joins %+v", sf.CreatesRatio, sf.JoinsRatio)
	}
	for _, want := range []string{"--- pebble: creates", "--- jetstream: joins", "ratio     creates  jetstream / pebble", "messages per op"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report has no %q", want)
		}
	}
}
