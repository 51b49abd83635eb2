package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rtcd/internal/testtools"
)

// TestClusterFlags: the cluster scenario starts its own nodes, so it needs
// -local; "all" leaves it out.
func TestClusterFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-scenario", "cluster"},
		{"-addr", "127.0.0.1:1", "-api-key", "k", "-scenario", "cluster"},
	} {
		if _, err := parseAndValidate(args...); err == nil || !strings.Contains(err.Error(), "cluster") {
			t.Errorf("%v: %v, want an error naming cluster", args, err)
		}
	}
	c, err := parseAndValidate("-local", "-scenario", "cluster")
	if err != nil || c.needsServer() {
		t.Fatalf("-local -scenario cluster: %v; needs the shared server %v", err, c != nil && c.needsServer())
	}
	if c, err = parseAndValidate("-local", "-scenario", "all"); err != nil || slices.Contains(c.Scenarios, "cluster") {
		t.Fatalf("all: %v, %v", c.Scenarios, err)
	}
}

// TestClusterScenario runs the cluster scenario for a moment: connects and
// creates through one rtcd, then through three nodes of a cluster, each
// without an error, and the report states the ratios.
func TestClusterScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rtcd and starts NATS, etcd, Redis and four servers")
	}
	testtools.Etcd.Require(t)
	testtools.RequireOnPath(t, "redis-server", "apt-get install redis-server")
	dir := t.TempDir()
	c, _, err := parseFlags([]string{"-local", "-scenario", "cluster", "-duration", "1500ms", "-concurrency", "4",
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
	if len(rep.Runs) != 1 || rep.Runs[0].Cluster == nil {
		t.Fatalf("runs: %+v", rep.Runs)
	}
	cf := rep.Runs[0].Cluster
	if len(cf.Runs) != 2 || cf.Runs[0].Nodes != 1 || cf.Runs[1].Nodes != clusterNodes {
		t.Fatalf("runs: %+v", cf.Runs)
	}
	for _, run := range cf.Runs {
		for what, l := range map[string]*loadResult{"connects": run.Connects, "creates": run.Creates} {
			if l.Total.OK == 0 || l.Total.Errors != 0 {
				t.Errorf("%d node(s) %s: %d ok, %d errors %v", run.Nodes, what, l.Total.OK, l.Total.Errors, l.Ops)
			}
		}
	}
	if cf.ConnectsRatio == nil || cf.ConnectsRatio.Throughput <= 0 || cf.CreatesRatio == nil || cf.CreatesRatio.Throughput <= 0 {
		t.Fatalf("ratios: connects %+v, creates %+v", cf.ConnectsRatio, cf.CreatesRatio)
	}
	for _, want := range []string{"--- 1 node(s): connects", "--- 3 node(s): creates", "ratio     connects 3 nodes / 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report has no %q", want)
		}
	}
}
