package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// The media scenario: rooms of publishers and subscribers holding WebRTC
// calls through rtcd's media node, every publisher sending a synthetic
// ~1.5 Mbit/s video track (and, unless -media-audio=false, a 64 kbit/s
// audio track) with pion, every participant receiving every other
// participant's tracks. It measures what rtcd forwards and what that
// costs, and runs the same calls through a plain pion forwarder (the
// baseline: a child process that relays each packet to each subscriber
// with no rtcd logic) in the same run.

// Synthetic media: per 20 ms tick, one video frame of
// mediaVideoPacketsPerTick packets of mediaVideoPayloadBytes (150
// packets/s, 1.5 Mbit/s of payload) and one audio packet of
// mediaAudioPayloadBytes (50 packets/s, 64 kbit/s).
const (
	mediaTick                = 20 * time.Millisecond
	mediaVideoPacketsPerTick = 3
	mediaVideoPayloadBytes   = 1250
	mediaAudioPayloadBytes   = 160
	// mediaNominalVideoMbit is the video stream's payload rate, the unit
	// of the headline figure (video down-tracks per core).
	mediaNominalVideoMbit = float64(mediaVideoPacketsPerTick*mediaVideoPayloadBytes*8) / 1e6 / 0.020
	// mediaKeyframeTicks: every this many frames is a keyframe (2 s).
	mediaKeyframeTicks = 100
	// mediaVideoClockPerTick and mediaAudioClockPerTick advance the RTP
	// timestamps (90 kHz video, 48 kHz Opus) by one tick.
	mediaVideoClockPerTick = 90000 / 50
	mediaAudioClockPerTick = 48000 / 50
	// mediaMaxCatchUpTicks bounds how far a starved sender catches up in
	// one burst (1 s); ticks further behind are skipped and counted, so the
	// report shows the generator could not keep the rate.
	mediaMaxCatchUpTicks = 50
	// mediaSetupTimeout bounds joining, publishing and the first packet
	// of every expected track at every subscriber.
	mediaSetupTimeout = 90 * time.Second
	// mediaMaxPeers bounds the participants of one run (each holds two
	// peer connections in this process).
	mediaMaxPeers = 400
	// Every payload starts with a VP8 payload descriptor and the first
	// byte of a VP8 payload header (RFC 7741: S=1 on a frame's first
	// packet; P=0 on a keyframe), so the stream reads as VP8 to anything
	// that looks; then mediaStampBytes: send time (unix ns), publisher
	// index, counter, kind (0 video, 1 audio).
	mediaStampOffset = 2
	mediaStampBytes  = 17
	latencyMaxMicros = 10_000_000
	// mediaSaturatedLossPercent: a window that lost more than this (or
	// whose senders skipped ticks) ran on a saturated machine; its
	// down-tracks per core are no capacity figure.
	mediaSaturatedLossPercent = 1.0
)

// mediaShape is the rooms of a run.
type mediaShape struct {
	Rooms, Publishers, Subscribers int
	Audio                          bool
}

func (s mediaShape) perRoom() int      { return s.Publishers + s.Subscribers }
func (s mediaShape) participants() int { return s.Rooms * s.perRoom() }

// kinds is the tracks each publisher publishes.
func (s mediaShape) kinds() int {
	if s.Audio {
		return 2
	}
	return 1
}

// videoDownTracks is the copies of video streams the forwarder sends:
// each publisher's video to everyone else in its room.
func (s mediaShape) videoDownTracks() int {
	return s.Rooms * s.Publishers * (s.perRoom() - 1)
}

// publishes says whether participant i publishes (the first Publishers of
// each room's consecutive participants do).
func (s mediaShape) publishes(i int) bool { return i%s.perRoom() < s.Publishers }

// expectedTracks is the tracks participant i receives: every other
// publisher's of its room.
func (s mediaShape) expectedTracks(i int) int32 {
	others := s.Publishers
	if s.publishes(i) {
		others--
	}
	return int32(s.kinds() * others)
}

// receivers is how many participants receive participant i's packets.
func (s mediaShape) receivers(i int) int64 {
	if !s.publishes(i) {
		return 0
	}
	return int64(s.perRoom() - 1)
}

func (s mediaShape) validate() error {
	if s.Rooms < 1 || s.Publishers < 1 || s.Subscribers < 0 || s.perRoom() > mediaRoomCap || s.participants() > mediaMaxPeers {
		return fmt.Errorf("media: -media-rooms and -media-publishers at least 1, -media-subscribers at least 0, at most %d participants per room (the node's room cap) and %d in all", mediaRoomCap, mediaMaxPeers)
	}
	return nil
}

// mediaFigures is the media scenario's report (and the baseline's).
type mediaFigures struct {
	Rooms              int  `json:"rooms"`
	PublishersPerRoom  int  `json:"publishers_per_room"`
	SubscribersPerRoom int  `json:"subscribers_per_room"`
	Audio              bool `json:"audio"`
	VideoDownTracks    int  `json:"video_down_tracks"`
	AudioDownTracks    int  `json:"audio_down_tracks"`

	WindowSeconds        float64 `json:"window_seconds"`
	ForwardedPackets     int64   `json:"forwarded_packets"`
	ForwardedPacketsPerS float64 `json:"forwarded_packets_per_second"`
	ForwardedMbitPerS    float64 `json:"forwarded_mbit_per_second"`
	// VideoMbitPerDownTrack is the video rate one subscriber received
	// from one publisher: the stream the headline figure counts.
	VideoMbitPerDownTrack float64 `json:"video_mbit_per_second_per_down_track"`
	ExpectedPackets       int64   `json:"expected_packets"`
	LossPercent           float64 `json:"loss_percent"`
	// GeneratorSkippedTicks: 20 ms ticks the senders fell so far behind
	// that they skipped them (the generator could not keep the rate).
	GeneratorSkippedTicks int64 `json:"generator_skipped_ticks"`
	// Saturated: the loss or the skipped ticks say the machine could not
	// carry the shape; the per-core figures then count streams that were
	// not delivered in full.
	Saturated bool `json:"saturated"`

	ServerCPUCores    float64 `json:"server_cpu_cores"`
	CPUSecondsPerMbit float64 `json:"server_cpu_seconds_per_forwarded_mbit"`
	// VideoDownTracksPerCore is the headline: video down-tracks per core
	// of the server's own CPU time (the audio it forwards as well is part
	// of that cost).
	VideoDownTracksPerCore float64 `json:"video_down_tracks_per_server_core"`
	GeneratorCPUCores      float64 `json:"generator_cpu_cores"`

	LatencyP50Ms float64 `json:"latency_p50_ms"`
	LatencyP99Ms float64 `json:"latency_p99_ms"`
	LatencyMaxMs float64 `json:"latency_max_ms"`

	RSSBefore         float64 `json:"server_rss_before_bytes"`
	RSSHeld           float64 `json:"server_rss_held_bytes"`
	RSSPerParticipant float64 `json:"server_rss_per_participant_bytes"`
	SetupSeconds      float64 `json:"setup_seconds"`
}

// mediaCounters is a snapshot of a run's counters.
type mediaCounters struct {
	at time.Time
	// expected is Σ packets sent × receivers, over the publishers.
	expected                                 int64
	packets, bytes, videoPackets, videoBytes int64
	skippedTicks                             int64
	serverCPU, generatorCPU                  float64 // seconds; -1: unknown
}

// figures computes the forwarding figures of the window between a and b.
func (s mediaShape) figures(a, b mediaCounters) *mediaFigures {
	f := &mediaFigures{Rooms: s.Rooms, PublishersPerRoom: s.Publishers, SubscribersPerRoom: s.Subscribers, Audio: s.Audio,
		VideoDownTracks: s.videoDownTracks()}
	if s.Audio {
		f.AudioDownTracks = f.VideoDownTracks
	}
	elapsed := b.at.Sub(a.at).Seconds()
	if elapsed <= 0 {
		return f
	}
	f.WindowSeconds = elapsed
	f.ForwardedPackets = b.packets - a.packets
	f.ForwardedPacketsPerS = float64(f.ForwardedPackets) / elapsed
	mbit := float64(b.bytes-a.bytes) * 8 / 1e6
	f.ForwardedMbitPerS = mbit / elapsed
	if f.VideoDownTracks > 0 {
		f.VideoMbitPerDownTrack = float64(b.videoBytes-a.videoBytes) * 8 / 1e6 / elapsed / float64(f.VideoDownTracks)
	}
	f.ExpectedPackets = b.expected - a.expected
	if f.ExpectedPackets > 0 {
		f.LossPercent = max(0, 100*(1-float64(f.ForwardedPackets)/float64(f.ExpectedPackets)))
	}
	f.GeneratorSkippedTicks = b.skippedTicks - a.skippedTicks
	f.Saturated = f.LossPercent > mediaSaturatedLossPercent || f.GeneratorSkippedTicks > 0
	if a.serverCPU >= 0 && b.serverCPU >= 0 && b.serverCPU > a.serverCPU {
		cpu := b.serverCPU - a.serverCPU
		f.ServerCPUCores = cpu / elapsed
		if mbit > 0 {
			f.CPUSecondsPerMbit = cpu / mbit
		}
		f.VideoDownTracksPerCore = float64(f.VideoDownTracks) / f.ServerCPUCores
	}
	if a.generatorCPU >= 0 && b.generatorCPU >= 0 {
		f.GeneratorCPUCores = (b.generatorCPU - a.generatorCPU) / elapsed
	}
	return f
}

// --- the run --------------------------------------------------------------

// mediaRun is one measured run (rtcd or the baseline).
type mediaRun struct {
	shape mediaShape
	peers []*mediaPeer
	stats *mediaStats

	stop    chan struct{}
	senders sync.WaitGroup
	stopped sync.Once
}

func newMediaRun(shape mediaShape) *mediaRun {
	n := shape.participants()
	r := &mediaRun{shape: shape, stats: &mediaStats{sent: make([]atomic.Int64, n), latency: hdrhistogram.New(1, latencyMaxMicros, 3)},
		stop: make(chan struct{})}
	for i := 0; i < n; i++ {
		r.peers = append(r.peers, &mediaPeer{index: i, room: i / shape.perRoom(), publishes: shape.publishes(i), audio: shape.Audio,
			stats: r.stats, closed: make(chan struct{})})
	}
	return r
}

// startSending starts every publisher's sender.
func (r *mediaRun) startSending() {
	for _, p := range r.peers {
		if p.publishes {
			r.senders.Add(1)
			go func() { defer r.senders.Done(); p.sendLoop(r.stop) }()
		}
	}
}

// close stops the senders and closes every peer. Safe to call again.
func (r *mediaRun) close() {
	r.stopped.Do(func() {
		close(r.stop)
		r.senders.Wait()
		var wg sync.WaitGroup
		for _, p := range r.peers {
			wg.Add(1)
			go func() { defer wg.Done(); p.close() }()
		}
		wg.Wait()
	})
}

// waitFlowing waits until every peer receives every track it should.
func (r *mediaRun) waitFlowing(ctx context.Context, what string) error {
	deadline := time.Now().Add(mediaSetupTimeout)
	for {
		missing, firstMissing := 0, -1
		for i, p := range r.peers {
			if p.tracks.Load() < r.shape.expectedTracks(i) {
				missing++
				if firstMissing < 0 {
					firstMissing = i
				}
			}
		}
		if missing == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p := r.peers[firstMissing]
			err := fmt.Errorf("%s: %d of %d participants still miss tracks after %v (participant %d receives %d of %d)",
				what, missing, len(r.peers), mediaSetupTimeout, firstMissing, p.tracks.Load(), r.shape.expectedTracks(firstMissing))
			for _, p := range r.peers {
				if e, ok := p.nodeError.Load().(string); ok {
					return fmt.Errorf("%w; the node said to participant %d: %s", err, p.index, e)
				}
			}
			return err
		}
		time.Sleep(100 * time.Millisecond) // polling what the network delivers
	}
}

// counters snapshots the run's counters; cpu is the server's CPU seconds.
func (r *mediaRun) counters(cpu func() float64) mediaCounters {
	c := mediaCounters{serverCPU: cpu(), generatorCPU: selfCPUSeconds(), at: time.Now()}
	for i := range r.peers {
		c.expected += r.stats.sent[i].Load() * r.shape.receivers(i)
	}
	c.packets, c.bytes = r.stats.packets.Load(), r.stats.bytes.Load()
	c.videoPackets, c.videoBytes = r.stats.videoPackets.Load(), r.stats.videoBytes.Load()
	c.skippedTicks = r.stats.skippedTicks.Load()
	return c
}

// measure runs the window and returns its figures.
func (r *mediaRun) measure(ctx context.Context, window time.Duration, cpu func() float64, progress io.Writer, label string) *mediaFigures {
	a := r.counters(cpu)
	r.stats.measure.Store(true)
	tick := time.NewTicker(progressEvery)
	end := time.NewTimer(window)
	for waiting := true; waiting; {
		select {
		case <-ctx.Done():
			waiting = false
		case <-end.C:
			waiting = false
		case <-tick.C:
			fmt.Fprintf(progress, "[%s] %5.1fs  forwarded %d packets\n", label, time.Since(a.at).Seconds(), r.stats.packets.Load()-a.packets)
		}
	}
	tick.Stop()
	end.Stop()
	r.stats.measure.Store(false)
	f := r.shape.figures(a, r.counters(cpu))
	r.stats.mu.Lock()
	f.LatencyP50Ms = float64(r.stats.latency.ValueAtQuantile(50)) / 1000
	f.LatencyP99Ms = float64(r.stats.latency.ValueAtQuantile(99)) / 1000
	f.LatencyMaxMs = float64(r.stats.latency.Max()) / 1000
	r.stats.mu.Unlock()
	return f
}

// selfCPUSeconds is this process's CPU time (user and system).
func selfCPUSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// procCPUSeconds is a process's CPU time from /proc, or -1.
func procCPUSeconds(pid int) float64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	return parseProcStatCPU(string(raw))
}

// parseProcStatCPU reads utime and stime (fields 14 and 15) of a
// /proc/PID/stat line, in seconds, or -1. The command name (field 2) may
// hold spaces and parentheses, so fields count from its last ')'.
func parseProcStatCPU(s string) float64 {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return -1
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	const clockTicks = 100 // USER_HZ on Linux
	return (ut + st) / clockTicks
}

// procRSSBytes is a process's resident memory from /proc, or 0.
func procRSSBytes(pid int) float64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	return parseProcStatusRSS(string(raw))
}

// parseProcStatusRSS reads VmRSS of a /proc/PID/status text, in bytes, or 0.
func parseProcStatusRSS(s string) float64 {
	for _, line := range strings.Split(s, "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// serverProbes returns how to read the CPU seconds and RSS of the process
// that runs the media node (rtcd serve with its built-in node, or the node
// run on its own): from /proc for the local server, from its metrics
// otherwise (-1 and 0 when unknown).
func serverProbes(t *target) (cpu, rss func() float64) {
	cpu, rss = func() float64 { return -1 }, func() float64 { return 0 }
	if t.local != nil {
		pid := t.local.NodePid() // rtcd serve, or the node run on its own
		return func() float64 { return procCPUSeconds(pid) }, func() float64 { return procRSSBytes(pid) }
	}
	if t.mediaMetricsURL == "" {
		return cpu, rss
	}
	metric := func(name string, missing float64) func() float64 {
		return func() float64 {
			s, err := scrapeMetrics(t.mediaMetricsURL)
			if err != nil {
				return missing
			}
			v, ok := s.Values[name]
			if !ok {
				return missing
			}
			return v
		}
	}
	return metric("process_cpu_seconds_total", -1), metric("process_resident_memory_bytes", 0)
}

// runMedia runs the media scenario against rtcd and then the baseline.
func runMedia(ctx context.Context, cfg *config, t *target, r *scenarioReport, progress io.Writer) (*scenarioReport, error) {
	if cfg.Quiet {
		progress = io.Discard
	}
	shape := cfg.mediaShape()
	what := "video ~1.5 Mbit/s"
	if shape.Audio {
		what += " + audio 64 kbit/s"
	}
	r.Description = fmt.Sprintf("%d room(s) of %d publisher(s) (%s) and %d subscriber(s), WebRTC through the media node",
		shape.Rooms, shape.Publishers, what, shape.Subscribers)
	if err := t.ensureProjects(ctx, 1); err != nil {
		return nil, err
	}
	f, err := t.prepare(ctx, 1, shape.Rooms, shape.participants(), ttlSeconds(cfg.Duration, maxRoomTTL), ttlSeconds(cfg.Duration, maxParticipantTTL), progress)
	if err != nil {
		return nil, err
	}
	r.Projects, r.Rooms, r.Parts = 1, shape.Rooms, shape.participants()
	api, err := mediaClientAPI()
	if err != nil {
		return nil, err
	}
	// prepare puts participant i in room i % rooms; the run wants rooms of
	// consecutive peers.
	byRoom := make([][]participant, shape.Rooms)
	for i, p := range f.participants {
		byRoom[i%shape.Rooms] = append(byRoom[i%shape.Rooms], p)
	}
	run := newMediaRun(shape)
	defer run.close()

	cpu, rss := serverProbes(t)
	rssBefore := rss()
	setup := time.Now()
	fmt.Fprintf(progress, "[media] joining %d participants\n", len(run.peers))
	if err := joinAll(run, func(p *mediaPeer) error {
		return p.joinRTCD(api, t.api, byRoom[p.room][p.index%shape.perRoom()])
	}); err != nil {
		return nil, err
	}
	run.startSending()
	if err := run.waitFlowing(ctx, "rtcd"); err != nil {
		return nil, err
	}
	setupSeconds := time.Since(setup).Seconds()
	fmt.Fprintf(progress, "[media] every track flows after %.1f s; measuring %v\n", setupSeconds, cfg.Duration)
	mf := run.measure(ctx, cfg.Duration, cpu, progress, "media")
	mf.SetupSeconds = setupSeconds
	if held := rss(); held > 0 && rssBefore > 0 {
		mf.RSSBefore, mf.RSSHeld = rssBefore, held
		mf.RSSPerParticipant = (held - rssBefore) / float64(len(run.peers))
	}
	r.Media = mf
	r.Notes = append(r.Notes, mediaNotes("rtcd", mf)...)
	run.close()

	if cfg.MediaBaseline && ctx.Err() == nil {
		fmt.Fprintf(progress, "[media] baseline: the same calls through a plain pion forwarder\n")
		b, err := runMediaBaseline(ctx, cfg, api, progress)
		if err != nil {
			r.Notes = append(r.Notes, "media baseline: "+err.Error())
		} else {
			r.MediaBaseline = b
			r.Notes = append(r.Notes, mediaNotes("baseline", b)...)
		}
	}
	return r, nil
}

// mediaNotes says when a run's figures need care.
func mediaNotes(label string, f *mediaFigures) []string {
	var notes []string
	if f.Saturated {
		notes = append(notes, fmt.Sprintf("%s: saturated (loss %.2f%%, above %.0f%%, or skipped ticks): the machine could not carry this shape; use a smaller one for capacity figures", label, f.LossPercent, mediaSaturatedLossPercent))
	}
	if f.GeneratorSkippedTicks > 0 {
		notes = append(notes, fmt.Sprintf("%s: the generator fell behind and skipped %d ticks of 20 ms: the machine is saturated, the stream rate is below nominal", label, f.GeneratorSkippedTicks))
	}
	if f.ServerCPUCores == 0 {
		notes = append(notes, label+": the server's CPU time is unknown (a server in this process, or no -metrics-addr): no per-core figures")
	}
	return notes
}

// joinAll joins every peer, mediaJoiners at a time.
func joinAll(run *mediaRun, join func(*mediaPeer) error) error {
	const mediaJoiners = 16
	sem := make(chan struct{}, mediaJoiners)
	errs := make(chan error, len(run.peers))
	var wg sync.WaitGroup
	for _, p := range run.peers {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := join(p); err != nil {
				errs <- fmt.Errorf("participant %d: %w", p.index, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// printMedia writes the media figures.
func printMedia(w io.Writer, label string, f *mediaFigures) {
	if f == nil {
		return
	}
	fmt.Fprintf(w, "%s: %d room(s) × (%d publishers + %d subscribers); %d video + %d audio down-tracks\n", label,
		f.Rooms, f.PublishersPerRoom, f.SubscribersPerRoom, f.VideoDownTracks, f.AudioDownTracks)
	fmt.Fprintf(w, "  forwarded %d packets in %.1f s: %.0f packets/s, %.1f Mbit/s (video %.2f Mbit/s per down-track); loss %.2f%%\n",
		f.ForwardedPackets, f.WindowSeconds, f.ForwardedPacketsPerS, f.ForwardedMbitPerS, f.VideoMbitPerDownTrack, f.LossPercent)
	if f.ServerCPUCores > 0 {
		fmt.Fprintf(w, "  server cpu %.2f cores: %.2f ms of cpu per forwarded Mbit; %.0f video down-tracks per core\n",
			f.ServerCPUCores, f.CPUSecondsPerMbit*1000, f.VideoDownTracksPerCore)
	}
	fmt.Fprintf(w, "  latency publisher → subscriber p50 %.2f ms, p99 %.2f ms, max %.2f ms; generator cpu %.2f cores\n",
		f.LatencyP50Ms, f.LatencyP99Ms, f.LatencyMaxMs, f.GeneratorCPUCores)
	if f.RSSHeld > 0 {
		fmt.Fprintf(w, "  server rss %.1f MiB before, %.1f MiB held: %.0f KiB per participant\n",
			f.RSSBefore/(1<<20), f.RSSHeld/(1<<20), f.RSSPerParticipant/1024)
	}
}

// writeMediaText writes the media scenario's report: rtcd, the baseline,
// their ratio, and the headline.
func writeMediaText(w io.Writer, r *scenarioReport) {
	m, b := r.Media, r.MediaBaseline
	printMedia(w, "rtcd    ", m)
	printMedia(w, "baseline", b)
	if b != nil && b.CPUSecondsPerMbit > 0 && m.CPUSecondsPerMbit > 0 {
		fmt.Fprintf(w, "ratio     rtcd cpu per forwarded Mbit = %.2f × the plain forwarder's; latency p50 %.2f ×, p99 %.2f ×\n",
			m.CPUSecondsPerMbit/b.CPUSecondsPerMbit, m.LatencyP50Ms/max(b.LatencyP50Ms, 0.001), m.LatencyP99Ms/max(b.LatencyP99Ms, 0.001))
	}
	switch audio := "with their audio"; {
	case m.VideoDownTracksPerCore == 0:
	case m.Saturated:
		fmt.Fprintf(w, "headline  none: the machine was saturated (loss %.2f%%); %d video down-tracks at %.2f Mbit/s each cost %.2f cores\n",
			m.LossPercent, m.VideoDownTracks, m.VideoMbitPerDownTrack, m.ServerCPUCores)
	default:
		if !m.Audio {
			audio = "video only"
		}
		fmt.Fprintf(w, "headline  %.0f video down-tracks (%.2f Mbit/s each, %s) per core of rtcd's cpu; %d room(s) of %d publishers and %d subscribers; loss %.2f%%\n",
			m.VideoDownTracksPerCore, m.VideoMbitPerDownTrack, audio, m.Rooms, m.PublishersPerRoom, m.SubscribersPerRoom, m.LossPercent)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note      %s\n", n)
	}
}
