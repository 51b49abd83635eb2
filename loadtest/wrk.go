package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The wrk scenario measures connect the way issue 15 states its target:
// Debian's wrk (-t1 -c64 for 30 s) with a Lua script cycling over every
// prepared participant token, alternated with wrk against the fasthttp
// hello-world baseline under the same settings, round after round. wrk is
// an external C client with little overhead of its own, so its ratio is a
// check on the load tool's (whose client shares the cores with both
// servers).

// Bounds of the wrk scenario.
const (
	maxWrkRounds  = 20
	maxWrkThreads = 16
	// wrkOutputBytes bounds what is kept of one wrk run's output.
	wrkOutputBytes = 64 << 10
	// wrkGraceSeconds is how long past its -d a wrk run may take before it
	// is killed (its connections' last answers, its report).
	wrkGraceSeconds = 30
)

// wrkRun is one wrk run's figures.
type wrkRun struct {
	Target       string  `json:"target"` // "connect" or "baseline"
	RPS          float64 `json:"requests_per_second"`
	Requests     int64   `json:"requests"`
	Non2xx       int64   `json:"non_2xx"`
	SocketErrors int64   `json:"socket_errors"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	// ServerCPUMicros is the server's CPU per request (0 when unknown).
	ServerCPUMicros float64 `json:"server_cpu_us_per_request,omitempty"`
}

// wrkRound is a baseline run then a connect run, back to back.
type wrkRound struct {
	Baseline wrkRun  `json:"baseline"`
	Connect  wrkRun  `json:"connect"`
	Ratio    float64 `json:"ratio"` // connect req/s / baseline req/s
}

type wrkFigures struct {
	Command     string     `json:"command"`
	Rounds      []wrkRound `json:"rounds"`
	MedianRatio float64    `json:"median_ratio"`
}

// wrkScript is the Lua script: each request is the next participant's
// connect body (one per line of the bodies file), from the next synthetic
// source address, as the connect scenario sends them.
const wrkScript = `-- rtcd loadtest: POST /v1/connect cycling over participant tokens
local bodies, ips = {}, {}
for line in io.lines(%q) do bodies[#bodies + 1] = line end
for line in io.lines(%q) do ips[#ips + 1] = line end
local n = 0
request = function()
  n = n + 1
  return wrk.format("POST", "/v1/connect",
    {["Content-Type"] = "application/json", ["X-Forwarded-For"] = ips[(n %% #ips) + 1]},
    bodies[(n %% #bodies) + 1])
end
`

// writeWrkScript writes the script and its two data files into dir.
func writeWrkScript(dir string, parts []participant, ips []string) (string, error) {
	var bodies bytes.Buffer
	for _, p := range parts {
		if bytes.ContainsAny(p.connect, "\r\n") {
			return "", fmt.Errorf("a connect body spans lines")
		}
		bodies.Write(p.connect)
		bodies.WriteByte('\n')
	}
	bodiesPath, ipsPath, script := filepath.Join(dir, "bodies.txt"), filepath.Join(dir, "ips.txt"), filepath.Join(dir, "connect.lua")
	if err := os.WriteFile(bodiesPath, bodies.Bytes(), 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(ipsPath, []byte(strings.Join(ips, "\n")+"\n"), 0o600); err != nil {
		return "", err
	}
	return script, os.WriteFile(script, []byte(fmt.Sprintf(wrkScript, bodiesPath, ipsPath)), 0o600)
}

// runWrkScenario alternates wrk against the baseline and against rtcd's
// connect, cfg.WrkRounds times.
func runWrkScenario(ctx context.Context, cfg *config, t *target, f *fixture, ips []string, r *scenarioReport, progress io.Writer) (*scenarioReport, error) {
	bin, err := exec.LookPath(cfg.WrkBin)
	if err != nil {
		return nil, fmt.Errorf("wrk: %w (Debian: apt-get install wrk)", err)
	}
	dir, err := os.MkdirTemp("", "rtcd-wrk-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	script, err := writeWrkScript(dir, f.participants, ips)
	if err != nil {
		return nil, err
	}
	b, err := startBaseline(cfg.BaselineInProcess)
	if err != nil {
		return nil, err
	}
	defer b.Stop()
	args := []string{"-t" + strconv.Itoa(cfg.WrkThreads), "-c" + strconv.Itoa(cfg.Concurrency),
		"-d" + strconv.Itoa(int(cfg.Duration.Seconds())) + "s", "--latency", "-s", script}
	figs := &wrkFigures{Command: "wrk " + strings.Join(args[:len(args)-1], " ") + " connect.lua"}
	r.Wrk = figs
	for i := 0; i < cfg.WrkRounds && ctx.Err() == nil; i++ {
		var round wrkRound
		cpu0 := b.CPUSeconds()
		fmt.Fprintf(progress, "wrk round %d/%d: baseline\n", i+1, cfg.WrkRounds)
		if round.Baseline, err = runWrk(ctx, bin, args, "http://"+b.Addr+"/v1/connect", cfg.Duration); err != nil {
			return nil, fmt.Errorf("wrk against the baseline: %w", err)
		}
		round.Baseline.Target = "baseline"
		if cpu1 := b.CPUSeconds(); cpu0 >= 0 && cpu1 >= 0 && round.Baseline.Requests > 0 {
			round.Baseline.ServerCPUMicros = (cpu1 - cpu0) / float64(round.Baseline.Requests) * 1e6
		}
		fmt.Fprintf(progress, "wrk round %d/%d: connect\n", i+1, cfg.WrkRounds)
		before := scrapeOrNote(t, r, "before")
		if round.Connect, err = runWrk(ctx, bin, args, t.api.origin+"/v1/connect", cfg.Duration); err != nil {
			return nil, fmt.Errorf("wrk against rtcd: %w", err)
		}
		round.Connect.Target = "connect"
		if after := scrapeOrNote(t, r, "after"); before != nil && after != nil && round.Connect.Requests > 0 {
			cpu := after.Values["process_cpu_seconds_total"] - before.Values["process_cpu_seconds_total"]
			round.Connect.ServerCPUMicros = cpu / float64(round.Connect.Requests) * 1e6
		}
		if round.Baseline.RPS > 0 {
			round.Ratio = round.Connect.RPS / round.Baseline.RPS
		}
		figs.Rounds = append(figs.Rounds, round)
	}
	ratios := make([]float64, 0, len(figs.Rounds))
	for _, rd := range figs.Rounds {
		ratios = append(ratios, rd.Ratio)
	}
	figs.MedianRatio = median(ratios)
	return r, ctx.Err()
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// runWrk runs wrk once against url and parses its report.
func runWrk(ctx context.Context, bin string, args []string, url string, d time.Duration) (wrkRun, error) {
	ctx, cancel := context.WithTimeout(ctx, d+wrkGraceSeconds*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(append([]string(nil), args...), url)...)
	var out limitedBuffer
	out.limit = wrkOutputBytes
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return wrkRun{}, fmt.Errorf("%v: %s", err, truncate(out.String(), 400))
	}
	return parseWrk(out.String())
}

// limitedBuffer keeps the first limit bytes written to it.
type limitedBuffer struct {
	bytes.Buffer
	limit int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.limit - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// parseWrk reads wrk's text report (with --latency).
func parseWrk(out string) (wrkRun, error) {
	var r wrkRun
	var haveRPS, haveP99 bool
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "Requests/sec:":
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return r, fmt.Errorf("wrk: Requests/sec %q", f[1])
			}
			r.RPS, haveRPS = v, true
		case len(f) == 2 && f[0] == "50%":
			r.P50Ms, _ = wrkDurationMs(f[1])
		case len(f) == 2 && f[0] == "99%":
			v, err := wrkDurationMs(f[1])
			if err != nil {
				return r, err
			}
			r.P99Ms, haveP99 = v, true
		case len(f) >= 3 && f[1] == "requests" && f[2] == "in":
			r.Requests, _ = strconv.ParseInt(f[0], 10, 64)
		case len(f) == 5 && f[0] == "Non-2xx":
			r.Non2xx, _ = strconv.ParseInt(f[4], 10, 64)
		case len(f) > 2 && f[0] == "Socket" && f[1] == "errors:":
			// Socket errors: connect 0, read 0, write 0, timeout 0
			for i := 3; i < len(f); i += 2 {
				n, _ := strconv.ParseInt(strings.TrimSuffix(f[i], ","), 10, 64)
				r.SocketErrors += n
			}
		}
	}
	if !haveRPS || !haveP99 {
		return r, fmt.Errorf("wrk: no Requests/sec or 99%% line in its report: %s", truncate(out, 400))
	}
	return r, nil
}

// wrkDurationMs parses wrk's latency figures: 812.00us, 1.92ms, 1.02s,
// 2.00m.
func wrkDurationMs(s string) (float64, error) {
	units := []struct {
		suffix string
		ms     float64
	}{{"us", 1e-3}, {"ms", 1}, {"s", 1e3}, {"m", 60e3}}
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return f * u.ms, nil
			}
		}
	}
	return 0, fmt.Errorf("wrk: latency %q", s)
}

func writeWrkText(w io.Writer, r *scenarioReport) {
	f := r.Wrk
	fmt.Fprintf(w, "command   %s, alternated with the baseline (fasthttp hello-world) under the same settings\n", f.Command)
	for i, rd := range f.Rounds {
		for _, run := range []wrkRun{rd.Baseline, rd.Connect} {
			cpu := ""
			if run.ServerCPUMicros > 0 {
				cpu = fmt.Sprintf(", server cpu %.1f µs/request", run.ServerCPUMicros)
			}
			fmt.Fprintf(w, "round %d   %-8s %9.0f req/s  p50 %s  p99 %s  non-2xx %d  socket errors %d%s\n",
				i+1, run.Target, run.RPS, ms(run.P50Ms), ms(run.P99Ms), run.Non2xx, run.SocketErrors, cpu)
		}
		fmt.Fprintf(w, "round %d   ratio = connect / baseline = %.3f\n", i+1, rd.Ratio)
	}
	fmt.Fprintf(w, "wrk       median ratio over %d round(s): %.3f\n", len(f.Rounds), f.MedianRatio)
}
