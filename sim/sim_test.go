package sim

import (
	"flag"
	"testing"
	"time"
)

// Flags of `make simulate` (and of replaying one seed).
var (
	seedsFlag = flag.Int("sim.seeds", 0, "how many seeds TestSimulate runs (0: its default)")
	seedFlag  = flag.Int64("sim.seed", 0, "the first seed TestSimulate runs; with -sim.seeds=1 (or alone), replay it and print its trace")
	stepsFlag = flag.Int("sim.steps", 0, "operations per seed (0: DefaultSteps)")
)

// testSeeds is how many seeds `go test ./...` runs: a few seconds
// without the race detector, a few tens with it.
const testSeeds = 200

// TestSimulate runs seeds through the simulation; a seed that breaks an
// invariant fails the test with the command that replays it. Alone
// (-sim.seed=N without -sim.seeds), it replays seed N and prints its trace.
func TestSimulate(t *testing.T) {
	first, n := *seedFlag, *seedsFlag
	if first == 0 {
		first = 1
	}
	replaying := *seedFlag != 0 && n <= 1
	if n <= 0 {
		n = testSeeds
		if replaying {
			n = 1
		}
	}
	start := time.Now()
	totals := map[string]int{}
	crashes, durable := 0, 0
	for seed := first; seed < first+int64(n); seed++ {
		cfg := Config{Seed: seed, Steps: *stepsFlag}
		if replaying {
			cfg.Trace = func(line string) { t.Log(line) }
		}
		res := Run(cfg)
		if res.Err != nil {
			t.Fatalf("seed %d: %v\nreplay: %s", seed, res.Err, ReplayCommand(seed, *stepsFlag))
		}
		for k, v := range res.Outcomes {
			totals[k] += v
		}
		crashes += res.Crashes
		durable += res.DurablePoints
		if replaying {
			t.Logf("seed %d: trace %s, %d crashes, %d durable points", seed, res.TraceHash, res.Crashes, res.DurablePoints)
		}
	}
	t.Logf("%d seeds in %s: %d crashes, %d durable points", n, time.Since(start).Round(time.Millisecond), crashes, durable)
	if testing.Verbose() {
		t.Logf("outcomes: %v", totals)
	}
}

// The same seed gives the same trace, run after run; another seed another.
func TestSameSeedSameTrace(t *testing.T) {
	for seed := int64(1); seed <= 3; seed++ {
		a, b := Run(Config{Seed: seed}), Run(Config{Seed: seed})
		if a.Err != nil || b.Err != nil {
			t.Fatalf("seed %d: %v / %v\nreplay: %s", seed, a.Err, b.Err, ReplayCommand(seed, 0))
		}
		if a.TraceHash != b.TraceHash {
			t.Fatalf("seed %d gave traces %s and %s", seed, a.TraceHash, b.TraceHash)
		}
		if a.Crashes == 0 {
			t.Errorf("seed %d crashed only at its end", seed)
		}
	}
	if Run(Config{Seed: 1}).TraceHash == Run(Config{Seed: 2}).TraceHash {
		t.Fatal("seeds 1 and 2 gave the same trace")
	}
}
