package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestMediaShape: who publishes, what each participant must receive, and
// how many down-tracks a shape makes.
func TestMediaShape(t *testing.T) {
	s := mediaShape{Rooms: 2, Publishers: 2, Subscribers: 3, Audio: true}
	if s.participants() != 10 || s.videoDownTracks() != 2*2*4 {
		t.Fatalf("participants %d, video down-tracks %d", s.participants(), s.videoDownTracks())
	}
	// Room 1 is participants 5..9; 5 and 6 publish.
	type who struct {
		publishes bool
		tracks    int32
		receivers int64
	}
	for i, want := range map[int]who{0: {true, 2, 4}, 1: {true, 2, 4}, 2: {false, 4, 0}, 4: {false, 4, 0}, 5: {true, 2, 4}, 7: {false, 4, 0}} {
		if s.publishes(i) != want.publishes || s.expectedTracks(i) != want.tracks || s.receivers(i) != want.receivers {
			t.Errorf("participant %d: publishes %v, tracks %d, receivers %d; want %+v", i, s.publishes(i), s.expectedTracks(i), s.receivers(i), want)
		}
	}
	// Video only: one track per other publisher; a lone publisher
	// receives nothing.
	v := mediaShape{Rooms: 1, Publishers: 1, Subscribers: 2}
	if v.expectedTracks(0) != 0 || v.expectedTracks(1) != 1 || v.videoDownTracks() != 2 {
		t.Fatalf("video only: %d %d %d", v.expectedTracks(0), v.expectedTracks(1), v.videoDownTracks())
	}
	for _, bad := range []mediaShape{{Rooms: 0, Publishers: 1}, {Rooms: 1, Publishers: 0, Subscribers: 3}, {Rooms: 1, Publishers: 1, Subscribers: -1},
		{Rooms: 1, Publishers: 50, Subscribers: 51}, {Rooms: 5, Publishers: 10, Subscribers: 80}} {
		if bad.validate() == nil {
			t.Errorf("%+v validates", bad)
		}
	}
	if err := (mediaShape{Rooms: 4, Publishers: 10, Subscribers: 90}).validate(); err != nil {
		t.Errorf("400 participants in rooms of 100: %v", err)
	}
}

// TestMediaFigures: the figures of a window come from the counters at its
// ends: rates, loss against what was sent times its receivers, CPU per
// forwarded megabit, and the headline, video down-tracks per server core.
func TestMediaFigures(t *testing.T) {
	s := mediaShape{Rooms: 1, Publishers: 2, Subscribers: 8, Audio: true} // 18 video down-tracks
	t0 := time.Unix(1000, 0)
	a := mediaCounters{at: t0, expected: 500, packets: 400, bytes: 1e6, videoPackets: 300, videoBytes: 9e5, skippedTicks: 1, serverCPU: 3, generatorCPU: 7}
	b := mediaCounters{at: t0.Add(10 * time.Second), expected: 500 + 20000, packets: 400 + 19800, bytes: 1e6 + 37.5e6,
		videoPackets: 300 + 15000, videoBytes: 9e5 + 34e6, skippedTicks: 1, serverCPU: 3 + 1.5, generatorCPU: 7 + 4}
	f := s.figures(a, b)
	want := map[string][2]float64{
		"window":               {f.WindowSeconds, 10},
		"forwarded":            {float64(f.ForwardedPackets), 19800},
		"packets/s":            {f.ForwardedPacketsPerS, 1980},
		"Mbit/s":               {f.ForwardedMbitPerS, 30},
		"video per down-track": {f.VideoMbitPerDownTrack, 34e6 * 8 / 1e6 / 10 / 18},
		"expected":             {float64(f.ExpectedPackets), 20000},
		"loss %":               {f.LossPercent, 1},
		"server cores":         {f.ServerCPUCores, 0.15},
		"cpu-s per Mbit":       {f.CPUSecondsPerMbit, 1.5 / 300},
		"per core":             {f.VideoDownTracksPerCore, 120},
		"generator cores":      {f.GeneratorCPUCores, 0.4},
		"video down-tracks":    {float64(f.VideoDownTracks), 18},
		"audio down-tracks":    {float64(f.AudioDownTracks), 18},
		"skipped":              {float64(f.GeneratorSkippedTicks), 0},
	}
	for name, v := range want {
		if !near(v[0], v[1]) {
			t.Errorf("%s = %v, want %v", name, v[0], v[1])
		}
	}
	// More arrived than expected (packets in flight at the window's start):
	// no negative loss. The server's CPU unknown: no per-core figures.
	b.packets = a.packets + 20100
	b.serverCPU = -1
	s.Audio = false
	f = s.figures(a, b)
	if f.LossPercent != 0 || f.ServerCPUCores != 0 || f.VideoDownTracksPerCore != 0 || f.CPUSecondsPerMbit != 0 || f.AudioDownTracks != 0 {
		t.Fatalf("%+v", f)
	}
	if notes := mediaNotes("rtcd", f); len(notes) != 1 || !strings.Contains(notes[0], "CPU time is unknown") {
		t.Fatalf("notes %q", notes)
	}
	if f.Saturated {
		t.Fatal("a window without loss is saturated")
	}
	// Loss above 1 %, or a sender that skipped ticks: saturated.
	b.packets = a.packets + 19700 // 1.5 % lost
	if f = s.figures(a, b); !f.Saturated || !strings.Contains(mediaNotes("rtcd", f)[0], "saturated (loss 1.50%") {
		t.Fatalf("1.5 %% lost: %+v %q", f, mediaNotes("rtcd", f))
	}
	b.packets, b.skippedTicks = a.packets+20000, a.skippedTicks+3
	if f = s.figures(a, b); !f.Saturated || f.GeneratorSkippedTicks != 3 {
		t.Fatalf("skipped ticks: %+v", f)
	}
}

// TestMediaFlags: the media flags are checked only when the scenario runs,
// and "all" leaves the media scenario out.
func TestMediaFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-local", "-scenario", "media", "-media-rooms", "0"},
		{"-local", "-scenario", "media", "-media-publishers", "0"},
		{"-local", "-scenario", "media", "-media-publishers", "2", "-media-subscribers", "99"},
		{"-local", "-scenario", "media", "-media-rooms", "5", "-media-publishers", "10", "-media-subscribers", "80"},
	} {
		if _, err := parseAndValidate(args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	c, err := parseAndValidate("-local", "-scenario", "connect", "-media-rooms", "0")
	if err != nil {
		t.Fatalf("a media flag refused for another scenario: %v", err)
	}
	c, err = parseAndValidate("-local", "-scenario", "media", "-media-rooms", "3", "-media-publishers", "1", "-media-subscribers", "20", "-media-audio=false")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.mediaShape(); got != (mediaShape{Rooms: 3, Publishers: 1, Subscribers: 20}) || !c.MediaBaseline {
		t.Fatalf("shape %+v, baseline %v", got, c.MediaBaseline)
	}
	if c, err = parseAndValidate("-local", "-scenario", "all"); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Scenarios {
		if s == "media" {
			t.Fatalf("all runs %v", c.Scenarios)
		}
	}
}

// TestProcFields: CPU time and RSS read from /proc's formats, and from
// this process's own files.
func TestProcFields(t *testing.T) {
	// The command name may hold spaces and parentheses.
	if got := parseProcStatCPU("42 (a) b (c) S 1 2 3 4 5 6 7 8 9 10 250 150 0 0 20 0"); !near(got, 4) {
		t.Errorf("cpu %v, want 4", got)
	}
	for _, bad := range []string{"", "42 (x S 1 2", "42 (x) S 1 2 3", "42 (x) S 1 2 3 4 5 6 7 8 9 10 a b"} {
		if got := parseProcStatCPU(bad); got != -1 {
			t.Errorf("%q: %v", bad, got)
		}
	}
	if got := parseProcStatusRSS("Name:\tx\nVmHWM:\t  9 kB\nVmRSS:\t    2048 kB\n"); got != 2048*1024 {
		t.Errorf("rss %v", got)
	}
	if got := parseProcStatusRSS("Name:\tx\n"); got != 0 {
		t.Errorf("no VmRSS: %v", got)
	}
	if procRSSBytes(os.Getpid()) <= 0 || procCPUSeconds(os.Getpid()) < 0 {
		t.Errorf("this process: rss %v, cpu %v", procRSSBytes(os.Getpid()), procCPUSeconds(os.Getpid()))
	}
}

// TestMediaText: the report names the shape, the ratio to the baseline
// and the headline with its loss.
func TestMediaText(t *testing.T) {
	m := &mediaFigures{Rooms: 2, PublishersPerRoom: 2, SubscribersPerRoom: 8, Audio: true, VideoDownTracks: 36, AudioDownTracks: 36,
		WindowSeconds: 10, ForwardedPackets: 72000, ForwardedPacketsPerS: 7200, ForwardedMbitPerS: 57, VideoMbitPerDownTrack: 1.51,
		LossPercent: 0.2, ServerCPUCores: 0.2, CPUSecondsPerMbit: 0.004, VideoDownTracksPerCore: 180, LatencyP50Ms: 3, LatencyP99Ms: 20}
	b := *m
	b.CPUSecondsPerMbit, b.LatencyP50Ms, b.LatencyP99Ms = 0.002, 2, 10
	var out bytes.Buffer
	writeMediaText(&out, &scenarioReport{Media: m, MediaBaseline: &b, Notes: []string{"a note"}})
	for _, want := range []string{
		"rtcd    : 2 room(s) × (2 publishers + 8 subscribers); 36 video + 36 audio down-tracks",
		"video 1.51 Mbit/s per down-track); loss 0.20%",
		"server cpu 0.20 cores: 4.00 ms of cpu per forwarded Mbit; 180 video down-tracks per core",
		"ratio     rtcd cpu per forwarded Mbit = 2.00 × the plain forwarder's; latency p50 1.50 ×, p99 2.00 ×",
		"headline  180 video down-tracks (1.51 Mbit/s each, with their audio) per core of rtcd's cpu; 2 room(s) of 2 publishers and 8 subscribers; loss 0.20%",
		"note      a note",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	// A saturated run gives no headline.
	m.Saturated, m.LossPercent = true, 12
	out.Reset()
	writeMediaText(&out, &scenarioReport{Media: m})
	if want := "headline  none: the machine was saturated (loss 12.00%); 36 video down-tracks at 1.51 Mbit/s each cost 0.20 cores"; !strings.Contains(out.String(), want) {
		t.Errorf("saturated report lacks %q:\n%s", want, out.String())
	}
}

// TestMediaScenario runs the media scenario for about a second against an
// in-process server, and the baseline in process: packets flow to every
// subscriber through both, and the report carries the figures. It
// asserts that media was forwarded, not how fast.
func TestMediaScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("holds WebRTC calls for a few seconds")
	}
	dir := t.TempDir()
	srv, creds := startInProcess(t, dir)
	lc := &config{
		Scenarios: []string{"media"}, Mode: modeClosed, Concurrency: 8, Duration: time.Second, Rooms: 4, Participants: 16, Projects: 1, JoinPerRoom: 10, CreatePerRoom: 4,
		MediaRooms: 1, MediaPublishers: 2, MediaSubscribers: 1, MediaAudio: true, MediaBaseline: true, BaselineInProcess: true,
		Quiet: true, JSONPath: filepath.Join(dir, "report.json"),
		APIKeys: []string{creds.APIKey}, Addr: srv.APIAddr(), MetricsAddr: srv.MetricsAddr(),
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
	if len(rep.Runs) != 1 || rep.Runs[0].Media == nil {
		t.Fatalf("runs: %+v", rep.Runs)
	}
	r := rep.Runs[0]
	for label, f := range map[string]*mediaFigures{"rtcd": r.Media, "baseline": r.MediaBaseline} {
		if f == nil {
			t.Fatalf("%s: no figures (notes %q)", label, r.Notes)
		}
		// Two publishers, each to the two others; video and audio.
		if f.VideoDownTracks != 4 || f.AudioDownTracks != 4 {
			t.Errorf("%s: %d video, %d audio down-tracks", label, f.VideoDownTracks, f.AudioDownTracks)
		}
		if f.ForwardedPackets == 0 || f.ExpectedPackets == 0 || f.VideoMbitPerDownTrack <= 0 || f.LatencyP50Ms <= 0 {
			t.Errorf("%s forwarded nothing measurable: %+v", label, f)
		}
	}
	if r.Media.ServerCPUCores <= 0 || r.Media.VideoDownTracksPerCore <= 0 {
		t.Errorf("no server CPU figures: %+v", r.Media)
	}
	raw, err := os.ReadFile(lc.JSONPath)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Runs []struct {
			Media *struct {
				VideoDownTracksPerCore float64 `json:"video_down_tracks_per_server_core"`
			} `json:"media"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(raw, &back); err != nil || len(back.Runs) != 1 || back.Runs[0].Media == nil || back.Runs[0].Media.VideoDownTracksPerCore <= 0 {
		t.Fatalf("JSON report: %v\n%s", err, raw)
	}
}
