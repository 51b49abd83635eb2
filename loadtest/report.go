package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/goccy/go-json"
)

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func loadLine(l *loadResult) string {
	s := fmt.Sprintf("%s loop, concurrency %d", l.Mode, l.Concurrency)
	if l.Mode == modeOpen {
		s = fmt.Sprintf("open loop at %.0f req/s (at most %d in flight)", l.Rate, l.Concurrency)
	}
	return s
}

func writeOpsTable(w io.Writer, l *loadResult) {
	t := l.Total
	fmt.Fprintf(w, "requests  %d in %.2f s = %.0f req/s (ok %d, errors %d)\n", t.Requests, l.ElapsedSec, t.RPS, t.OK, t.Errors)
	fmt.Fprintf(w, "latency   p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  mean %s\n",
		ms(t.Latency.P50), ms(t.Latency.P90), ms(t.Latency.P99), ms(t.Latency.P999), ms(t.Latency.Max), ms(t.Latency.Mean))
	if l.Mode == modeOpen && l.BehindMs > 1 {
		fmt.Fprintf(w, "          (open loop: the last sends were %.1f ms behind schedule; latency counts from the intended send time)\n", l.BehindMs)
	}
	if len(l.Ops) > 1 {
		fmt.Fprintf(w, "  %-20s %9s %9s %7s %9s %9s %9s %9s %9s\n", "op", "requests", "req/s", "errors", "p50", "p90", "p99", "p99.9", "max")
		for _, o := range l.Ops {
			fmt.Fprintf(w, "  %-20s %9d %9.0f %7d %9s %9s %9s %9s %9s\n", o.Name, o.Requests, o.RPS, o.Errors,
				ms(o.Latency.P50), ms(o.Latency.P90), ms(o.Latency.P99), ms(o.Latency.P999), ms(o.Latency.Max))
		}
	}
	codes := map[string]int64{}
	samples := map[string]string{}
	for _, o := range l.Ops {
		for c, n := range o.ErrorsByCode {
			codes[o.Name+": "+c] += n
			if m := o.ErrorSamples[c]; m != "" {
				samples[o.Name+": "+c] = m
			}
		}
	}
	if len(codes) == 0 {
		fmt.Fprintf(w, "errors by code: none\n")
		return
	}
	fmt.Fprintf(w, "errors by code:\n")
	for _, c := range sortedCodes(codes) {
		fmt.Fprintf(w, "  %-40s %d", c, codes[c])
		if m := samples[c]; m != "" {
			fmt.Fprintf(w, "   e.g. %s", truncate(m, 120))
		}
		fmt.Fprintln(w)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func ms(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0fms", v)
	case v >= 10:
		return fmt.Sprintf("%.1fms", v)
	}
	return fmt.Sprintf("%.2fms", v)
}

func mib(v float64) string { return fmt.Sprintf("%.1f MiB", v/(1<<20)) }

func writeBaselineText(w io.Writer, b *baselineResult) {
	where := "child process"
	if b.InProcess {
		where = "in this process"
	}
	fmt.Fprintf(w, "\n=== baseline: minimal fasthttp server answering a fixed %d-byte body (%s, %s)\n", len(baselineBody), where, b.Addr)
	fmt.Fprintf(w, "load      %s, %.1f s\n", loadLine(b.Load), b.Load.ElapsedSec)
	writeOpsTable(w, b.Load)
	if b.CPUSeconds > 0 {
		fmt.Fprintf(w, "server    cpu %.2f s = %.2f cores; %.1f µs per request\n", b.CPUSeconds, b.CPUCores,
			b.CPUSeconds/float64(max(b.Load.Total.Requests, 1))*1e6)
	}
}

func writeScenarioText(w io.Writer, r *scenarioReport, b *baselineResult) {
	name := r.Scenario
	if r.Hotspot != "" {
		name += " (" + r.Hotspot + ")"
	}
	fmt.Fprintf(w, "\n=== %s: %s\n", name, r.Description)
	fmt.Fprintf(w, "target    %s\n", r.Target)
	fmt.Fprintf(w, "fixture   %d project(s), %d room(s), %d participant(s)\n", r.Projects, r.Rooms, r.Parts)
	if r.Store != nil {
		writeStoreText(w, r)
		return
	}
	if r.Cluster != nil {
		writeClusterText(w, r)
		return
	}
	if r.Media != nil {
		writeMediaText(w, r)
		return
	}
	if r.Wrk != nil {
		writeWrkText(w, r)
		for _, n := range r.Notes {
			fmt.Fprintf(w, "note      %s\n", n)
		}
		return
	}
	fmt.Fprintf(w, "load      %s, %.1f s\n", loadLine(r.Load), r.Load.ElapsedSec)
	writeOpsTable(w, r.Load)
	if j := r.Join; j != nil {
		fmt.Fprintf(w, "sockets   %d of %d held (ramp %.1f s, hold %.1f s), %d dropped\n", j.Held, j.Target, j.RampSeconds, j.HoldSeconds, j.Dropped)
		if j.RSSPeak > 0 {
			fmt.Fprintf(w, "memory    server RSS %s before, %s while held, %s after: %.1f KiB per participant (heap %.1f KiB); goroutines %.0f -> %.0f\n",
				mib(j.RSSBefore), mib(j.RSSPeak), mib(j.RSSAfter), j.RSSPerParticipant/1024, j.HeapPerPart/1024, j.GoroutinesBefore, j.GoroutinesPeak)
		}
		if m := j.PerSocket; m != nil {
			gc := fmt.Sprintf("a GC %.1f s after the hold", m.GCWaitSeconds)
			if !m.Settled {
				gc = "NOT SETTLED: no GC after the ramp"
			}
			fmt.Fprintf(w, "per socket %.1f KiB = heap %.1f KiB + stacks %.1f KiB (%d sockets; heap %s, %s); RSS %.1f KiB, heap in use %.1f KiB, %.2f goroutines\n",
				m.Bytes/1024, m.HeapBytes/1024, m.StackBytes/1024, m.Sockets, m.HeapSource, gc, m.RSSBytes/1024, m.HeapInuseBytes/1024, m.Goroutines)
			fmt.Fprintf(w, "          in %s\n", m.Process)
		}
	}
	if wh := r.Webhooks; wh != nil {
		if wh.Error != "" {
			fmt.Fprintf(w, "webhooks  not set up: %s\n", wh.Error)
		} else {
			fmt.Fprintf(w, "webhooks  %d deliveries received (%d distinct events) at %s; room.ended %d of %d rooms deleted (waited %.0f ms after the load)\n",
				wh.Received, wh.DistinctEvents, wh.URL, wh.ByType["room.ended"], wh.Expected, wh.WaitedMs)
			if len(wh.ByType) > 0 {
				fmt.Fprintf(w, "          by type: %s\n", kv(wh.ByType))
			}
		}
	}
	if s := r.Server; s != nil {
		writeServerText(w, s, r.Load)
	}
	if r.Ratio != nil && b != nil {
		fmt.Fprintf(w, "baseline  %.0f req/s, p50 %s, p99 %s -> ratio = %s_rps / baseline_rps = %.3f; p50 x%.1f, p99 x%.1f\n",
			b.Load.Total.RPS, ms(b.Load.Total.Latency.P50), ms(b.Load.Total.Latency.P99), r.Scenario, r.Ratio.Throughput, r.Ratio.P50, r.Ratio.P99)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note      %s\n", n)
	}
}

func kv(m map[string]int64) string {
	keys := sortedCodes(m)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func writeServerText(w io.Writer, s *serverFigures, l *loadResult) {
	fmt.Fprintf(w, "server    Prometheus %s/metrics, %.1f s between scrapes\n", s.Source, s.WallSeconds)
	if c, ok := s.Counters["process_cpu_seconds_total"]; ok {
		per := ""
		if l.Total.Requests > 0 {
			per = fmt.Sprintf("; %.1f µs per request", c.Delta/float64(l.Total.Requests)*1e6)
		}
		fmt.Fprintf(w, "  cpu %.2f s = %.2f cores%s\n", c.Delta, s.CPUCores, per)
	}
	for _, name := range counterFamilies {
		c, ok := s.Counters[name]
		if !ok || name == "process_cpu_seconds_total" {
			continue
		}
		fmt.Fprintf(w, "  %-38s %+.0f", name, c.Delta)
		labels := make([]string, 0, len(c.ByLabel))
		for k := range c.ByLabel {
			labels = append(labels, k)
		}
		sort.Slice(labels, func(i, j int) bool { return c.ByLabel[labels[i]] > c.ByLabel[labels[j]] })
		for i, k := range labels {
			if i == 6 {
				fmt.Fprintf(w, "  …")
				break
			}
			fmt.Fprintf(w, "  %s %+.0f", k, c.ByLabel[k])
		}
		fmt.Fprintln(w)
	}
	for _, name := range histogramFamilies {
		h, ok := s.Histograms[name]
		if !ok || h.Count == 0 {
			continue
		}
		fmt.Fprintf(w, "  %-38s %.0f observed, mean %.3f ms\n", name, h.Count, h.MeanMs)
	}
	for _, name := range gaugeFamilies {
		g, ok := s.Gauges[name]
		if !ok {
			continue
		}
		format := func(v float64) string { return fmt.Sprintf("%.0f", v) }
		if strings.HasSuffix(name, "_bytes") {
			format = mib
		}
		line := fmt.Sprintf("  %-38s %s -> %s", name, format(g.Before), format(g.After))
		if p, ok := s.Peak[name]; ok {
			line = fmt.Sprintf("  %-38s %s -> %s while held -> %s", name, format(g.Before), format(p), format(g.After))
		}
		fmt.Fprintln(w, line)
	}
}
