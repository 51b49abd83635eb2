package sim

import (
	"flag"
	"strings"
	"testing"
	"time"

	"rtcd/internal/simbug"
)

// Flags of `make simulate` (and of replaying one seed).
var (
	seedsFlag   = flag.Int("sim.seeds", 0, "how many seeds TestSimulate runs (0: its default)")
	seedFlag    = flag.Int64("sim.seed", 0, "the first seed TestSimulate runs; with -sim.seeds=1 (or alone), replay it and print its trace")
	stepsFlag   = flag.Int("sim.steps", 0, "operations per seed (0: DefaultSteps)")
	measureFlag = flag.Bool("sim.measure", false, "TestMeasurePlantedBugs: run -sim.seeds seeds (default 1000) with each planted bug and count the seeds that catch it")
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

// plantedBugs are the bugs the simulation plants (internal/simbug).
var plantedBugs = []simbug.Bug{simbug.ReplyBeforeSync, simbug.DoubleApply, simbug.CapOffByOne, simbug.StaleJoin}

// seedsToCatch bounds how many seeds a planted bug may go unnoticed.
const seedsToCatch = 1000

// Each planted bug is caught within seedsToCatch seeds, by a seed that
// passes without it. How many seeds each took is docs/testing.md's table.
func TestPlantedBugsAreCaught(t *testing.T) {
	for _, bug := range plantedBugs {
		t.Run(bug.String(), func(t *testing.T) {
			caught := func() (int64, error) {
				restore := simbug.Plant(bug)
				defer restore()
				for seed := int64(1); seed <= seedsToCatch; seed++ {
					if res := Run(Config{Seed: seed}); res.Err != nil {
						return seed, res.Err
					}
				}
				return 0, nil
			}
			seed, err := caught()
			if err == nil {
				t.Fatalf("%s went unnoticed for %d seeds", bug, seedsToCatch)
			}
			if res := Run(Config{Seed: seed}); res.Err != nil {
				t.Fatalf("seed %d fails without %s too: %v", seed, bug, res.Err)
			}
			t.Logf("%s caught by seed %d: %v", bug, seed, firstLine(err.Error()))
		})
	}
}

// TestMeasurePlantedBugs measures, with -sim.measure, how often each
// planted bug is caught: the share of seeds that catch it, and the first.
// These are the figures of docs/testing.md.
func TestMeasurePlantedBugs(t *testing.T) {
	if !*measureFlag {
		t.Skip("run with -sim.measure")
	}
	n := *seedsFlag
	if n <= 0 {
		n = seedsToCatch
	}
	for _, bug := range plantedBugs {
		restore := simbug.Plant(bug)
		caught, first := 0, int64(0)
		kinds := map[string]int{}
		for seed := int64(1); seed <= int64(n); seed++ {
			if res := Run(Config{Seed: seed, Steps: *stepsFlag}); res.Err != nil {
				caught++
				if first == 0 {
					first = seed
				}
				kinds[failureKind(res.Err.Error())]++
			}
		}
		restore()
		t.Logf("%s: caught by %d of %d seeds (%.1f%%), first by seed %d; by %v", bug, caught, n, 100*float64(caught)/float64(n), first, kinds)
	}
}

// failureKind names the invariant a failure broke, for the measurement.
func failureKind(msg string) string {
	switch {
	case strings.Contains(msg, "acknowledged"):
		return "acknowledged-write"
	case strings.Contains(msg, "does not give the live state"), strings.Contains(msg, "not its state at the last durable point"):
		return "replay-equals-live"
	case strings.Contains(msg, "max_participants"), strings.Contains(msg, "max_active"):
		return "cap"
	case strings.Contains(msg, "ledger"), strings.Contains(msg, "charged"):
		return "money"
	case strings.Contains(msg, "webhook"), strings.Contains(msg, "deliver"), strings.Contains(msg, "outbox"):
		return "webhooks"
	case strings.Contains(msg, "joined with its session"), strings.Contains(msg, "admitted"), strings.Contains(msg, "refused"),
		strings.Contains(msg, "media node serves"), strings.Contains(msg, "reservation"):
		return "admission"
	}
	return "other"
}

func firstLine(s string) string {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
