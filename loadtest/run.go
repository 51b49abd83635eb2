package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// scenarioReport is one scenario's figures.
type scenarioReport struct {
	Scenario    string          `json:"scenario"`
	Hotspot     string          `json:"hotspot,omitempty"`
	Description string          `json:"description"`
	Target      string          `json:"target"`
	Projects    int             `json:"projects"`
	Rooms       int             `json:"rooms"`
	Parts       int             `json:"participants"`
	Load        *loadResult     `json:"load"`
	Server      *serverFigures  `json:"server,omitempty"`
	Ratio       *ratio          `json:"ratio_to_baseline,omitempty"`
	Join        *joinFigures    `json:"join,omitempty"`
	Webhooks    *webhookFigures `json:"webhooks,omitempty"`
	Media       *mediaFigures   `json:"media,omitempty"`
	Wrk         *wrkFigures     `json:"wrk,omitempty"`
	Store       *storeFigures   `json:"store,omitempty"`
	Cluster     *clusterFigures `json:"cluster,omitempty"`
	// MediaBaseline is the same calls through a plain pion forwarder.
	MediaBaseline *mediaFigures `json:"media_baseline,omitempty"`
	Notes         []string      `json:"notes,omitempty"`
}

// baselineResult is the baseline run.
type baselineResult struct {
	Addr       string      `json:"addr"`
	InProcess  bool        `json:"in_process"`
	Load       *loadResult `json:"load"`
	CPUSeconds float64     `json:"server_cpu_seconds,omitempty"`
	CPUCores   float64     `json:"server_cpu_cores_used,omitempty"`
}

// ratio compares a scenario with the baseline.
type ratio struct {
	Throughput float64 `json:"throughput"` // scenario req/s / baseline req/s
	P50        float64 `json:"p50"`        // scenario p50 / baseline p50
	P99        float64 `json:"p99"`
}

func ratioOf(s, b *loadResult) *ratio {
	if s == nil || b == nil || b.Total.RPS == 0 {
		return nil
	}
	r := &ratio{Throughput: s.Total.RPS / b.Total.RPS}
	if b.Total.Latency.P50 > 0 {
		r.P50 = s.Total.Latency.P50 / b.Total.Latency.P50
	}
	if b.Total.Latency.P99 > 0 {
		r.P99 = s.Total.Latency.P99 / b.Total.Latency.P99
	}
	return r
}

// fakeToken has the length of a real participant token, for the baseline's
// request body.
const fakeToken = "rtc_pt_AQAAAABrAuKqAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.9AhmEOvqHundIFtYSnVrC-1mqSQY_Mj2WGvB_sCUY7A"

// runBaseline runs the connect load against the fixed-answer server.
func runBaseline(ctx context.Context, cfg *config, progress io.Writer) (*baselineResult, error) {
	b, err := startBaseline(cfg.BaselineInProcess)
	if err != nil {
		return nil, err
	}
	defer b.Stop()
	c, err := newAPIClient(b.Addr, cfg.Concurrency)
	if err != nil {
		return nil, err
	}
	parts := []participant{{connect: connectBody(fakeToken)}}
	spec := loadSpec{name: "baseline", ops: []string{"baseline"}, mode: cfg.Mode, concurrency: cfg.Concurrency,
		rate: cfg.Rate, duration: cfg.Duration, maxRequests: cfg.MaxRequests, op: connectOp(c, parts, synthIPs(spreadIPs))}
	cpu0 := b.CPUSeconds()
	t0 := time.Now()
	res := runLoad(ctx, spec, progress)
	out := &baselineResult{Addr: b.Addr, InProcess: cfg.BaselineInProcess, Load: res}
	if cpu1 := b.CPUSeconds(); cpu0 >= 0 && cpu1 >= 0 {
		out.CPUSeconds = cpu1 - cpu0
		out.CPUCores = out.CPUSeconds / time.Since(t0).Seconds()
	}
	return out, nil
}

// scrapeOrNote scrapes t's metrics, adding a note on failure.
func scrapeOrNote(t *target, r *scenarioReport, when string) *scrape {
	if t.metricsURL == "" {
		return nil
	}
	s, err := scrapeMetrics(t.metricsURL)
	if err != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("metrics scrape %s: %v", when, err))
		return nil
	}
	return s
}

func ttlSeconds(d time.Duration, maxSec int) int {
	s := int((d + ttlMargin).Seconds())
	return min(max(s, 60), maxSec)
}

// runScenario prepares and runs one scenario (hotspot: one variant).
func runScenario(ctx context.Context, cfg *config, t *target, name, hotspot string, progress io.Writer) (*scenarioReport, error) {
	r := &scenarioReport{Scenario: name, Hotspot: hotspot, Target: t.describe()}
	nProjects, nRooms, nParts := cfg.Projects, cfg.Rooms, cfg.Participants
	ips := synthIPs(spreadIPs)
	switch name {
	case "hotspot":
		nProjects = 1
		switch hotspot {
		case "room":
			nRooms = 1
			if l := t.limits.MaxParticipantsPerRoom; l > 0 && nParts > l {
				r.Notes = append(r.Notes, fmt.Sprintf("participants capped at the room limit %d", l))
				nParts = l
			}
			r.Description = "POST /v1/connect, every participant in one room (one room actor)"
		case "project":
			r.Description = "POST /v1/connect, every room in one project (one project actor and rate budget)"
		case "ip":
			nProjects = min(cfg.Projects, max(len(t.projects), 1))
			ips = []string{hotspotIP}
			r.Description = "POST /v1/connect, every request from one source address (X-Forwarded-For " + hotspotIP + "; the per-IP limit applies when the server trusts the header)"
		}
	case "media":
		return runMedia(ctx, cfg, t, r, progress)
	case "join":
		nParts = cfg.Concurrency
		if cfg.MaxRequests > 0 {
			nParts = int(min(int64(nParts), cfg.MaxRequests))
		}
		nRooms = (nParts + cfg.JoinPerRoom - 1) / cfg.JoinPerRoom
		r.Description = fmt.Sprintf("POST /v1/connect then a media WebSocket joined and held (ping), %d per room", cfg.JoinPerRoom)
	case "connect":
		r.Description = "POST /v1/connect over every prepared participant, round-robin"
	case "wrk":
		r.Description = "POST /v1/connect over every prepared participant, round-robin, by Debian's wrk with a Lua script, alternated with wrk against the baseline"
	case "create":
		nRooms, nParts = 0, 0
		r.Description = fmt.Sprintf("POST /v1/rooms, then %d POST /v1/rooms/{id}/participants in it, repeated (durable writes)", cfg.CreatePerRoom)
	case "mixed":
		r.Description = "70% connect, 20% participant create, 5% room create, 3% room list, 2% room delete; webhook receiver counts deliveries"
	}
	if err := t.ensureProjects(ctx, nProjects); err != nil {
		return nil, err
	}
	r.Projects, r.Rooms, r.Parts = nProjects, nRooms, nParts
	var f *fixture
	if nRooms > 0 {
		var err error
		loadFor := cfg.Duration
		if name == "wrk" { // every round runs the baseline, then connect
			loadFor *= time.Duration(2 * cfg.WrkRounds)
		}
		f, err = t.prepare(ctx, nProjects, nRooms, nParts, ttlSeconds(loadFor, maxRoomTTL), ttlSeconds(loadFor, maxParticipantTTL), progress)
		if err != nil {
			return nil, err
		}
	}
	spec := loadSpec{name: name, mode: cfg.Mode, concurrency: cfg.Concurrency, rate: cfg.Rate,
		duration: cfg.Duration, maxRequests: cfg.MaxRequests}
	if hotspot != "" {
		spec.name = name + ":" + hotspot
	}
	switch name {
	case "connect", "hotspot":
		spec.ops = []string{"connect"}
		spec.op = connectOp(t.api, f.participants, ips)
	case "create":
		spec.ops = []string{"room_create", "participant_create"}
		spec.op = createOp(t, nProjects, cfg.CreatePerRoom)
	case "mixed":
		spec.ops = mixedOps
		spec.op = mixedOp(t, f, ips)
	case "join":
		return runJoin(ctx, cfg, t, f, ips, r, progress)
	case "wrk":
		return runWrkScenario(ctx, cfg, t, f, ips, r, progress)
	}

	var wh *webhookReceiver
	var endpoints []string
	if name == "mixed" {
		var err error
		wh, endpoints, err = setupWebhooks(ctx, cfg, t, nProjects)
		if err != nil {
			r.Notes = append(r.Notes, "webhooks: "+err.Error())
			r.Webhooks = &webhookFigures{Error: err.Error()}
		}
	}
	before := scrapeOrNote(t, r, "before")
	r.Load = runLoad(ctx, spec, progress)
	if wh != nil {
		r.Webhooks = drainWebhooks(ctx, t, wh, endpoints, r.Load)
	}
	if after := scrapeOrNote(t, r, "after"); before != nil && after != nil {
		r.Server = compare(t.metricsURL, before, after)
	}
	return r, nil
}

// setupWebhooks starts the receiver and registers an endpoint per project.
func setupWebhooks(ctx context.Context, cfg *config, t *target, nProjects int) (*webhookReceiver, []string, error) {
	wh, err := startWebhookReceiver(cfg.WebhookListen, cfg.WebhookURL)
	if err != nil {
		return nil, nil, err
	}
	var ids []string
	for p := 0; p < nProjects; p++ {
		var out struct {
			ID string `json:"id"`
		}
		resp, err := t.callRetry(ctx, "POST", "/v1/webhook-endpoints", t.projects[p].Key, mustJSON(map[string]string{"url": wh.URL}))
		if err := expect(resp, err, 201, "POST /v1/webhook-endpoints", &out); err != nil {
			deleteEndpoints(ctx, t, ids)
			wh.close()
			return nil, nil, err
		}
		ids = append(ids, t.projects[p].Key+" "+out.ID)
	}
	return wh, ids, nil
}

func deleteEndpoints(ctx context.Context, t *target, ids []string) {
	for _, kv := range ids {
		var key, id string
		_, _ = fmt.Sscan(kv, &key, &id)
		_, _ = t.callRetry(ctx, "DELETE", "/v1/webhook-endpoints/"+id, key, nil)
	}
}

// drainWebhooks waits (bounded) until a room.ended delivery arrived for
// every room deleted under load, then disables the endpoints.
func drainWebhooks(ctx context.Context, t *target, wh *webhookReceiver, endpoints []string, load *loadResult) *webhookFigures {
	var expected int64
	for _, o := range load.Ops {
		if o.Name == "room_delete" {
			expected = o.OK
		}
	}
	start := time.Now()
	for wh.count("room.ended") < expected && time.Since(start) < webhookDrainTimeout && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	waited := time.Since(start)
	deleteEndpoints(ctx, t, endpoints)
	wh.close()
	wh.mu.Lock()
	defer wh.mu.Unlock()
	byType := make(map[string]int64, len(wh.byType))
	for k, v := range wh.byType {
		byType[k] = v
	}
	return &webhookFigures{URL: wh.URL, Endpoints: len(endpoints), Received: wh.total, DistinctEvents: len(wh.ids),
		ByType: byType, Expected: expected, WaitedMs: float64(waited.Microseconds()) / 1000}
}

// runJoin opens and holds media sockets, then measures the server's memory
// while they are held.
func runJoin(ctx context.Context, cfg *config, t *target, f *fixture, ips []string, r *scenarioReport, progress io.Writer) (*scenarioReport, error) {
	if cfg.Quiet {
		progress = io.Discard
	}
	js := &joinState{pings: newOpStats(), connect: newOpStats(), wsJoin: newOpStats(), dropCode: newOpStats(), interval: cfg.PingInterval}
	target := len(f.participants)
	spec := loadSpec{name: "join", ops: []string{"join"}, mode: cfg.Mode, concurrency: min(joinDialers, target),
		rate: cfg.Rate, duration: cfg.Duration, maxRequests: int64(target), op: joinOp(t.api, f.participants, ips, js),
		progressExtra: func() string { return fmt.Sprintf("held=%d dropped=%d", js.held.Load(), js.dropped.Load()) }}
	before := scrapeOrNote(t, r, "before")
	mediaBefore := scrapeMediaOrNote(t, r, "before")
	start := time.Now()
	res := runLoad(ctx, spec, progress)
	ramp := time.Since(start)
	mediaRamp := scrapeMediaOrNote(t, r, "after the ramp")
	// Hold until the duration is over, with a progress line every second.
	holdStart := time.Now()
	tick := time.NewTicker(progressEvery)
	for time.Since(start) < cfg.Duration && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			var pings int64
			for i := range js.pings.shards {
				sh := &js.pings.shards[i]
				sh.mu.Lock()
				pings += sh.count
				sh.mu.Unlock()
			}
			fmt.Fprintf(progress, "[join] %5.1fs  holding  held=%d  dropped=%d  pongs=%d\n",
				time.Since(start).Seconds(), js.held.Load(), js.dropped.Load(), pings)
		}
	}
	tick.Stop()
	hold := time.Since(holdStart)
	var mediaHeld *scrape
	settled, gcWait := false, time.Duration(0)
	if mediaRamp != nil {
		mediaHeld, settled, gcWait = awaitMediaGC(ctx, t, mediaRamp, cfg.JoinGCWait, progress)
		if mediaHeld == nil {
			r.Notes = append(r.Notes, "media node metrics scrape while held failed")
		}
	}
	peak := scrapeOrNote(t, r, "while held")
	held := js.held.Load()
	js.closeAll()
	time.Sleep(time.Second) // let the node report the leaves
	after := scrapeOrNote(t, r, "after")

	hold = max(hold, time.Millisecond)
	res.Ops = append(res.Ops, js.connect.summary("connect", ramp), js.wsJoin.summary("ws_join", ramp),
		js.pings.summary("ping", hold))
	if d := js.dropCode.summary("dropped", hold); d.Requests > 0 {
		res.Ops = append(res.Ops, d)
	}
	r.Load = res
	interval := cfg.PingInterval
	jf := &joinFigures{Target: target, Held: held, Dropped: js.dropped.Load(), RampSeconds: ramp.Seconds(),
		HoldSeconds: hold.Seconds(), PingIntervalMs: float64(interval.Milliseconds())}
	if interval == 0 {
		r.Notes = append(r.Notes, "ping interval: the node's heartbeat_interval_ms")
	}
	if before != nil && peak != nil {
		jf.RSSBefore = before.Values["process_resident_memory_bytes"]
		jf.RSSPeak = peak.Values["process_resident_memory_bytes"]
		jf.GoroutinesBefore = before.Values["go_goroutines"]
		jf.GoroutinesPeak = peak.Values["go_goroutines"]
		jf.HeapPeak = peak.Values["go_memstats_heap_inuse_bytes"]
		if held > 0 {
			jf.RSSPerParticipant = (jf.RSSPeak - jf.RSSBefore) / float64(held)
			jf.HeapPerPart = (jf.HeapPeak - before.Values["go_memstats_heap_inuse_bytes"]) / float64(held)
		}
		if after != nil {
			jf.RSSAfter = after.Values["process_resident_memory_bytes"]
		}
		r.Server = compare(t.metricsURL, before, peak)
		r.Server.Peak = map[string]float64{}
		for _, g := range gaugeFamilies {
			if v, ok := peak.sumFamily(g); ok {
				r.Server.Peak[g] = v
			}
		}
		if after != nil {
			r.Server = compareWithPeak(t.metricsURL, before, after, r.Server.Peak)
		}
	}
	if mediaBefore != nil && mediaHeld != nil && held > 0 {
		jf.PerSocket = socketFigures(mediaBefore, mediaHeld, held, t.mediaProcess)
		jf.PerSocket.Settled, jf.PerSocket.GCWaitSeconds = settled, gcWait.Seconds()
		if !settled {
			r.Notes = append(r.Notes, fmt.Sprintf("no GC of the media node after the ramp (waited %.0f s): its live heap misses sockets; raise -join-gc-wait or -duration", gcWait.Seconds()))
		}
	}
	r.Join = jf
	return r, nil
}

// scrapeMediaOrNote scrapes the metrics of the process holding the media
// sockets, adding a note on failure.
func scrapeMediaOrNote(t *target, r *scenarioReport, when string) *scrape {
	if t.mediaMetricsURL == "" {
		return nil
	}
	s, err := scrapeMetrics(t.mediaMetricsURL)
	if err != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("media node metrics scrape %s: %v", when, err))
		return nil
	}
	return s
}

// gcCountMetric counts the GCs a Go process completed.
const gcCountMetric = "go_gc_duration_seconds_count"

// awaitMediaGC waits, at most wait, until the media node's process has
// completed a GC since since was scraped, so that its live heap counts
// every socket held by then. It returns the last scrape (nil if none
// succeeded), whether a GC came, and how long it waited.
func awaitMediaGC(ctx context.Context, t *target, since *scrape, wait time.Duration, progress io.Writer) (*scrape, bool, time.Duration) {
	start := time.Now()
	announced := false
	for {
		s, err := scrapeMetrics(t.mediaMetricsURL)
		if err == nil && s.Values[gcCountMetric] > since.Values[gcCountMetric] {
			return s, true, time.Since(start)
		}
		if time.Since(start) >= wait || ctx.Err() != nil {
			if err != nil {
				s = nil
			}
			return s, false, time.Since(start)
		}
		if !announced {
			fmt.Fprintf(progress, "[join] waiting (at most %v) for a GC of the media node, so its live heap counts every socket\n", wait)
			announced = true
		}
		select {
		case <-ctx.Done():
		case <-time.After(joinGCPoll):
		}
	}
}

// socketFigures is the memory per held socket of the process that holds
// them: what held and before differ by, over the sockets held. The heap is
// the live heap the last GC marked (go_gc_heap_live_bytes), the garbage
// not counted; before the process's first GC it is unknown, and every
// byte allocated by then stands for it (an upper bound, so the figure per
// socket errs low by at most that over the sockets).
func socketFigures(before, held *scrape, sockets int64, process string) *socketMemory {
	n := float64(sockets)
	m := &socketMemory{Process: process, Sockets: sockets, HeapSource: "live"}
	heapBefore, ok := before.Values["go_gc_heap_live_bytes"]
	heapHeld, okHeld := held.Values["go_gc_heap_live_bytes"]
	switch {
	case !ok || !okHeld:
		// A server from before go_gc_heap_live_bytes: heap in use, garbage included.
		m.HeapSource = "in use (no go_gc_heap_live_bytes: garbage included)"
		heapBefore, heapHeld = before.Values["go_memstats_heap_inuse_bytes"], held.Values["go_memstats_heap_inuse_bytes"]
	case before.Values[gcCountMetric] == 0:
		m.HeapSource = "live (baseline: all allocated before the first GC)"
		heapBefore = before.Values["go_memstats_heap_alloc_bytes"]
	}
	m.HeapBytes = (heapHeld - heapBefore) / n
	m.StackBytes = (held.Values["go_memstats_stack_inuse_bytes"] - before.Values["go_memstats_stack_inuse_bytes"]) / n
	m.Bytes = m.HeapBytes + m.StackBytes
	m.RSSBytes = (held.Values["process_resident_memory_bytes"] - before.Values["process_resident_memory_bytes"]) / n
	m.Goroutines = (held.Values["go_goroutines"] - before.Values["go_goroutines"]) / n
	m.HeapInuseBytes = (held.Values["go_memstats_heap_inuse_bytes"] - before.Values["go_memstats_heap_inuse_bytes"]) / n
	return m
}

// compareWithPeak compares before and after and keeps the held-state gauges.
func compareWithPeak(source string, before, after *scrape, peak map[string]float64) *serverFigures {
	f := compare(source, before, after)
	f.Peak = peak
	return f
}
