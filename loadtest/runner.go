package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Bounds of the load generator.
const (
	// histMinMicros..histMaxMicros is the latency range recorded, in
	// microseconds; a slower answer is recorded as histMaxMicros.
	histMinMicros = 1
	histMaxMicros = 60_000_000
	histSigDigits = 3
	// histShards histograms per operation, each behind its own mutex, keep
	// workers from contending on one lock while memory stays bounded.
	histShards = 16
	// maxErrorCodes distinct error codes are counted per operation; more
	// are counted as "other".
	maxErrorCodes = 64
	// openLoopSleepChunk bounds one sleep of an open-loop worker waiting for
	// its intended send time, so a cancel is noticed quickly.
	openLoopSleepChunk = 100 * time.Millisecond
	// progressEvery is the period of the progress line.
	progressEvery = time.Second
)

// Loop modes.
const (
	modeClosed = "closed"
	modeOpen   = "open"
)

// worker is one load goroutine's state. Operations may keep their own state
// in it (the create scenarios remember the rooms they made).
type worker struct {
	id     int
	rng    *rand.Rand
	rooms  []string // rooms this worker created (create, mixed)
	room   string   // the room it adds participants to (create)
	inRoom int
	cycle  int // the store scenario's joins: which of its participants is next
}

// opFunc runs one request for slot (the request's sequence number) and
// returns the index of the operation it ran (into loadSpec.ops) and the
// error code ("" for success).
type opFunc func(w *worker, slot int64) (op int, code string)

// loadSpec is one timed run.
type loadSpec struct {
	name        string
	ops         []string // operation names, indexed by what op returns
	mode        string
	concurrency int
	rate        float64 // requests per second (open loop)
	duration    time.Duration
	maxRequests int64 // 0: unbounded
	op          opFunc
	// progressExtra adds to the progress line (may be nil).
	progressExtra func() string
}

// shard is one histogram and its error counts.
type shard struct {
	mu     sync.Mutex
	hist   *hdrhistogram.Histogram
	count  int64
	errors int64
	codes  map[string]int64
	sample map[string]string // code -> first error message seen
}

// opStats collects one operation's latencies and errors.
type opStats struct {
	shards [histShards]shard
}

func newOpStats() *opStats {
	s := &opStats{}
	for i := range s.shards {
		s.shards[i].hist = hdrhistogram.New(histMinMicros, histMaxMicros, histSigDigits)
		s.shards[i].codes = make(map[string]int64)
		s.shards[i].sample = make(map[string]string)
	}
	return s
}

// record adds one result. key spreads callers over the shards.
func (s *opStats) record(key int, d time.Duration, code, detail string) {
	us := d.Microseconds()
	if us < histMinMicros {
		us = histMinMicros
	}
	if us > histMaxMicros {
		us = histMaxMicros
	}
	sh := &s.shards[uint(key)%histShards]
	sh.mu.Lock()
	_ = sh.hist.RecordValue(us)
	sh.count++
	if code != "" {
		sh.errors++
		if _, ok := sh.codes[code]; !ok && len(sh.codes) >= maxErrorCodes {
			code = "other"
		}
		sh.codes[code]++
		if _, ok := sh.sample[code]; !ok && detail != "" {
			sh.sample[code] = detail
		}
	}
	sh.mu.Unlock()
}

// summary merges the shards.
func (s *opStats) summary(name string, elapsed time.Duration) opSummary {
	h := hdrhistogram.New(histMinMicros, histMaxMicros, histSigDigits)
	out := opSummary{Name: name, ErrorsByCode: map[string]int64{}}
	samples := map[string]string{}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		h.Merge(sh.hist)
		out.Requests += sh.count
		out.Errors += sh.errors
		for c, n := range sh.codes {
			out.ErrorsByCode[c] += n
		}
		for c, m := range sh.sample {
			if _, ok := samples[c]; !ok {
				samples[c] = m
			}
		}
		sh.mu.Unlock()
	}
	if len(samples) > 0 {
		out.ErrorSamples = samples
	}
	out.OK = out.Requests - out.Errors
	if elapsed > 0 {
		out.RPS = float64(out.Requests) / elapsed.Seconds()
		out.OKRPS = float64(out.OK) / elapsed.Seconds()
	}
	out.Latency = latencyOf(h)
	return out
}

// latencySummary is in milliseconds.
type latencySummary struct {
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p99_9_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
}

func latencyOf(h *hdrhistogram.Histogram) latencySummary {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	if h.TotalCount() == 0 {
		return latencySummary{}
	}
	return latencySummary{
		P50: ms(h.ValueAtQuantile(50)), P90: ms(h.ValueAtQuantile(90)), P99: ms(h.ValueAtQuantile(99)),
		P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max()), Mean: h.Mean() / 1000,
	}
}

// opSummary is one operation's figures.
type opSummary struct {
	Name         string            `json:"name"`
	Requests     int64             `json:"requests"`
	OK           int64             `json:"ok"`
	Errors       int64             `json:"errors"`
	RPS          float64           `json:"requests_per_second"`
	OKRPS        float64           `json:"ok_per_second"`
	Latency      latencySummary    `json:"latency"`
	ErrorsByCode map[string]int64  `json:"errors_by_code"`
	ErrorSamples map[string]string `json:"error_samples,omitempty"`
}

// loadResult is what a run measured.
type loadResult struct {
	Mode        string      `json:"mode"`
	Concurrency int         `json:"concurrency"`
	Rate        float64     `json:"rate,omitempty"`
	ElapsedSec  float64     `json:"elapsed_seconds"`
	Total       opSummary   `json:"total"`
	Ops         []opSummary `json:"ops"`
	// Behind is how far open-loop sends fell behind their schedule at the
	// end (the generator or the server could not keep the rate).
	BehindMs float64 `json:"open_loop_behind_ms,omitempty"`
}

// loadRun is a run in progress: its counters feed the progress line.
type loadRun struct {
	spec     loadSpec
	stats    []*opStats
	all      *opStats
	requests atomic.Int64
	errors   atomic.Int64
	next     atomic.Int64
	start    time.Time
	behindNs atomic.Int64
}

// runLoad runs spec until its duration passes, maxRequests were sent or ctx
// is cancelled, printing a progress line to progress every second.
func runLoad(ctx context.Context, spec loadSpec, progress io.Writer) *loadResult {
	r := &loadRun{spec: spec, all: newOpStats()}
	for range spec.ops {
		r.stats = append(r.stats, newOpStats())
	}
	ctx, cancel := context.WithTimeout(ctx, spec.duration)
	defer cancel()
	r.start = time.Now()
	deadline := r.start.Add(spec.duration)
	var interval float64 // nanoseconds between intended sends
	if spec.mode == modeOpen {
		interval = float64(time.Second) / spec.rate
	}
	var wg sync.WaitGroup
	for i := 0; i < spec.concurrency; i++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			w := &worker{id: id, rng: rand.New(rand.NewPCG(uint64(id), uint64(r.start.UnixNano())))}
			for ctx.Err() == nil {
				slot := r.next.Add(1) - 1
				if spec.maxRequests > 0 && slot >= spec.maxRequests {
					return
				}
				var intended time.Time
				if spec.mode == modeOpen {
					intended = r.start.Add(time.Duration(float64(slot) * interval))
					if !intended.Before(deadline) {
						return
					}
					for {
						wait := time.Until(intended)
						if wait <= 0 {
							r.behindNs.Store(int64(-wait))
							break
						}
						if ctx.Err() != nil {
							return
						}
						time.Sleep(min(wait, openLoopSleepChunk))
					}
				} else {
					intended = time.Now()
				}
				op, code := spec.op(w, slot)
				d := time.Since(intended)
				code, detail := splitCode(code) // "code|detail"
				r.stats[op].record(id, d, code, detail)
				r.all.record(id, d, code, detail)
				r.requests.Add(1)
				if code != "" {
					r.errors.Add(1)
				}
			}
		}(i)
	}
	done := make(chan struct{})
	go r.progressLoop(done, progress)
	wg.Wait()
	close(done)
	elapsed := time.Since(r.start)
	res := &loadResult{Mode: spec.mode, Concurrency: spec.concurrency, ElapsedSec: elapsed.Seconds(),
		Total: r.all.summary("total", elapsed)}
	if spec.mode == modeOpen {
		res.Rate = spec.rate
		res.BehindMs = float64(r.behindNs.Load()) / 1e6
	}
	for i, name := range spec.ops {
		s := r.stats[i].summary(name, elapsed)
		if s.Requests > 0 || len(spec.ops) == 1 {
			res.Ops = append(res.Ops, s)
		}
	}
	return res
}

// recordRaw records a result in the runner's "code|detail" form.
func (s *opStats) recordRaw(key int, d time.Duration, raw string) {
	code, detail := splitCode(raw)
	s.record(key, d, code, detail)
}

func (r *loadRun) progressLoop(done <-chan struct{}, out io.Writer) {
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	var last int64
	lastAt := r.start
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			n := r.requests.Load()
			rate := float64(n-last) / now.Sub(lastAt).Seconds()
			last, lastAt = n, now
			extra := ""
			if r.spec.progressExtra != nil {
				extra = "  " + r.spec.progressExtra()
			}
			fmt.Fprintf(out, "[%s] %5.1fs  requests=%d  rate=%.0f/s  errors=%d%s\n",
				r.spec.name, now.Sub(r.start).Seconds(), n, rate, r.errors.Load(), extra)
		}
	}
}

// sortedCodes returns the codes of m, most frequent first.
func sortedCodes(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for c := range m {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if m[out[i]] != m[out[j]] {
			return m[out[i]] > m[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}
