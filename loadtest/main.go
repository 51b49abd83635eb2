// Command loadtest is rtcd's load test suite. It drives a running server
// (-addr, -api-key, -metrics-addr) or a local one it starts on a temporary
// data directory (-local), prepares rooms and participants, runs the named
// scenarios (connect, join, create, mixed, hotspot, baseline, media, wrk,
// store) and reports
// throughput, latency percentiles (HdrHistogram), error counts by code and
// the server's own Prometheus figures, as text and as JSON (-json).
// See loadtest/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Bounds of the flags.
const (
	maxConcurrency  = 20000
	maxRate         = 1_000_000
	maxRooms        = 100_000
	maxParticipants = 1_000_000
	maxDuration     = 24 * time.Hour
	maxPerRoomOps   = 1000
	// ttlMargin is added to the run's duration for the prepared rooms' and
	// participants' lifetimes.
	ttlMargin = 10 * time.Minute
	// maxRoomTTL and maxParticipantTTL are the API's bounds of expires_in.
	maxRoomTTL        = 604800
	maxParticipantTTL = 86400
)

// serveMediaBaselineAddr is the internal -serve-media-baseline flag.
var serveMediaBaselineAddr string

// serveNATSCluster is the internal -serve-nats flag (the store scenario).
var serveNATSCluster bool

// config is every flag.
type config struct {
	Addr        string
	APIKeys     []string
	MetricsAddr string

	Local       bool
	RtcdBin     string
	Keep        bool
	ServerFlags []string
	// MediaNode is where -local runs the media node: mediaNodeBuiltin (in
	// rtcd serve) or mediaNodeOwn (an `rtcd media` process of its own).
	MediaNode string
	// MediaMetricsAddr is the metrics listener of a media node run on its
	// own (-addr targets): the join scenario's figures per socket.
	MediaMetricsAddr string

	Scenarios    []string
	Mode         string
	Concurrency  int
	Rate         float64
	Duration     time.Duration
	MaxRequests  int64
	Rooms        int
	Participants int
	Projects     int
	Hotspots     []string

	WithBaseline      bool
	BaselineInProcess bool

	MediaRooms       int
	MediaPublishers  int
	MediaSubscribers int
	MediaAudio       bool
	MediaBaseline    bool

	JoinPerRoom   int
	PingInterval  time.Duration
	JoinGCWait    time.Duration
	CreatePerRoom int

	WebhookListen string
	WebhookURL    string

	WrkBin     string
	WrkRounds  int
	WrkThreads int

	JSONPath string
	Quiet    bool
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// mediaShape is the media scenario's rooms.
func (c *config) mediaShape() mediaShape {
	return mediaShape{Rooms: c.MediaRooms, Publishers: c.MediaPublishers, Subscribers: c.MediaSubscribers, Audio: c.MediaAudio}
}

// parseFlags reads args into a config.
func parseFlags(args []string, errOut io.Writer) (*config, string, error) {
	c := &config{}
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var keys, scenarios, hotspot, serverFlags, serveBaselineAddr string
	fs.BoolVar(&serveNATSCluster, "serve-nats", false, "internal: run three clustered NATS servers with JetStream on loopback, print their URLs, until stdin closes")
	fs.StringVar(&serveMediaBaselineAddr, "serve-media-baseline", "", "internal: serve the media baseline (a plain pion forwarder) on this address until stdin closes")
	fs.StringVar(&c.Addr, "addr", "", "API origin of a running server (host:port or http(s)://host:port); not with -local")
	fs.StringVar(&keys, "api-key", "", "secret API key (sk_live_…) holding rooms:write, participants:write, project:read (and webhooks:write for mixed); comma-separated keys of several projects for -projects")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "", "the server's metrics listener (host:port); default: the local server's; empty with -addr: no server figures")
	fs.BoolVar(&c.Local, "local", false, "build ./cmd/rtcd and run it on a temporary data dir with generous limits, stopped (SIGTERM) and removed at the end")
	fs.StringVar(&c.RtcdBin, "rtcd-bin", "", "with -local: use this rtcd binary instead of building one")
	fs.BoolVar(&c.Keep, "keep", false, "with -local: keep the temporary directory (data, binary, rtcd.log)")
	fs.StringVar(&serverFlags, "server-flags", "", "with -local: extra `rtcd serve` flags, space-separated (they override the defaults)")
	fs.StringVar(&c.MediaNode, "media-node", mediaNodeBuiltin, "with -local: builtin (the media node inside rtcd serve) or own (an `rtcd media` process beside it, whose figures are the node's alone)")
	fs.StringVar(&c.MediaMetricsAddr, "media-metrics-addr", "", "with -addr: the metrics listener of a media node run on its own (host:port), for the join scenario's memory per socket")
	fs.StringVar(&scenarios, "scenario", "connect", "comma-separated scenarios: "+strings.Join(scenarioNames, ", ")+", or all")
	fs.StringVar(&c.Mode, "mode", modeClosed, "closed (fixed -concurrency) or open (fixed -rate, latency from the intended send time)")
	fs.IntVar(&c.Concurrency, "concurrency", 64, "closed loop: requests in flight; open loop: most requests in flight; join: sockets to hold")
	fs.Float64Var(&c.Rate, "rate", 1000, "open loop: requests per second")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "length of each scenario's load")
	fs.Int64Var(&c.MaxRequests, "max-requests", 0, "stop each scenario after this many requests (0: no bound)")
	fs.IntVar(&c.Rooms, "rooms", 64, "rooms prepared for connect, mixed and hotspot")
	fs.IntVar(&c.Participants, "participants", 1024, "participants prepared for connect, mixed and hotspot (spread over the rooms)")
	fs.IntVar(&c.Projects, "projects", 1, "projects the rooms are spread over (more than one: -local, or one -api-key per project)")
	fs.StringVar(&hotspot, "hotspot", "room", "hotspot scenario: comma-separated room, project, ip (one run each)")
	fs.BoolVar(&c.WithBaseline, "with-baseline", false, "run the baseline first and state every scenario as a ratio to it")
	fs.BoolVar(&c.BaselineInProcess, "baseline-in-process", false, "serve the baseline (and the store scenario's NATS servers) in this process instead of a child process")
	fs.IntVar(&c.JoinPerRoom, "join-per-room", 10, "join: participants per room (at most 100, the media node's room cap)")
	fs.DurationVar(&c.PingInterval, "ping-interval", 0, "join: ping interval (0: the node's heartbeat_interval_ms)")
	fs.DurationVar(&c.JoinGCWait, "join-gc-wait", defaultJoinGCWait, "join: longest wait after the hold for a GC of the media node, so the live heap counts every held socket (0: no wait)")
	fs.IntVar(&c.MediaRooms, "media-rooms", 2, "media: rooms")
	fs.IntVar(&c.MediaPublishers, "media-publishers", 2, "media: publishers per room (each sends ~1.5 Mbit/s video and audio, and receives the others)")
	fs.IntVar(&c.MediaSubscribers, "media-subscribers", 8, "media: subscribers per room (receive every publisher)")
	fs.BoolVar(&c.MediaAudio, "media-audio", true, "media: publishers send an audio track beside the video")
	fs.BoolVar(&c.MediaBaseline, "media-baseline", true, "media: also run the same calls through a plain pion forwarder (a child process; with -baseline-in-process, in this one) and compare")
	fs.IntVar(&c.CreatePerRoom, "create-per-room", 4, "create: participants created in each room created")
	fs.StringVar(&c.WebhookListen, "webhook-listen", "127.0.0.1:0", "mixed: address of the webhook receiver")
	fs.StringVar(&c.WebhookURL, "webhook-url", "", "mixed: URL the server delivers to (default http://<webhook-listen>/webhook; a remote server needs --webhook-allow-private for it)")
	fs.StringVar(&c.WrkBin, "wrk-bin", "wrk", "wrk: the wrk binary (Debian's package wrk)")
	fs.IntVar(&c.WrkRounds, "wrk-rounds", 3, "wrk: rounds, each a baseline run then a connect run of -duration")
	fs.IntVar(&c.WrkThreads, "wrk-threads", 1, "wrk: wrk's -t (its -c is -concurrency)")
	fs.StringVar(&c.JSONPath, "json", "", "also write the report as JSON to this file")
	fs.BoolVar(&c.Quiet, "quiet", false, "no progress lines")
	fs.StringVar(&serveBaselineAddr, "serve-baseline", "", "internal: serve the baseline on this address until stdin closes")
	if err := fs.Parse(args); err != nil {
		return nil, "", err
	}
	if fs.NArg() > 0 {
		return nil, "", fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	c.APIKeys = splitList(keys)
	c.Scenarios = splitList(scenarios)
	if len(c.Scenarios) == 1 && c.Scenarios[0] == "all" {
		c.Scenarios = slices.DeleteFunc(slices.Clone(scenarioNames), func(s string) bool { return slices.Contains(heavyScenarios, s) })
	}
	c.Hotspots = splitList(hotspot)
	c.ServerFlags = strings.Fields(serverFlags)
	return c, serveBaselineAddr, nil
}

func (c *config) validate() error {
	for _, s := range c.Scenarios {
		if !slices.Contains(scenarioNames, s) {
			return fmt.Errorf("-scenario %q: want %s or all", s, strings.Join(scenarioNames, ", "))
		}
	}
	if len(c.Scenarios) == 0 {
		return fmt.Errorf("-scenario: name at least one")
	}
	for _, h := range c.Hotspots {
		if h != "room" && h != "project" && h != "ip" {
			return fmt.Errorf("-hotspot %q: want room, project or ip", h)
		}
	}
	if slices.Contains(c.Scenarios, "store") && (!c.Local || c.Addr != "") {
		return fmt.Errorf("store starts rtcd on each store itself: it needs -local, not -addr")
	}
	if slices.Contains(c.Scenarios, "cluster") && (!c.Local || c.Addr != "") {
		return fmt.Errorf("cluster starts its nodes itself: it needs -local, not -addr")
	}
	if c.needsServer() {
		if c.Local == (c.Addr != "") {
			return fmt.Errorf("give either -local or -addr with -api-key")
		}
		if !c.Local && len(c.APIKeys) == 0 {
			return fmt.Errorf("-addr needs -api-key")
		}
	}
	switch {
	case c.Mode != modeClosed && c.Mode != modeOpen:
		return fmt.Errorf("-mode %q: want closed or open", c.Mode)
	case c.Concurrency < 1 || c.Concurrency > maxConcurrency:
		return fmt.Errorf("-concurrency must be 1 to %d", maxConcurrency)
	case c.Mode == modeOpen && (c.Rate <= 0 || c.Rate > maxRate):
		return fmt.Errorf("-rate must be above 0 and at most %d", maxRate)
	case c.Duration <= 0 || c.Duration > maxDuration:
		return fmt.Errorf("-duration must be above 0 and at most %v", maxDuration)
	case c.MaxRequests < 0:
		return fmt.Errorf("-max-requests must not be negative")
	case c.Rooms < 1 || c.Rooms > maxRooms:
		return fmt.Errorf("-rooms must be 1 to %d", maxRooms)
	case c.Participants < 1 || c.Participants > maxParticipants:
		return fmt.Errorf("-participants must be 1 to %d", maxParticipants)
	case c.Projects < 1 || c.Projects > maxProjects:
		return fmt.Errorf("-projects must be 1 to %d", maxProjects)
	case c.JoinPerRoom < 1 || c.JoinPerRoom > mediaRoomCap:
		return fmt.Errorf("-join-per-room must be 1 to %d", mediaRoomCap)
	case slices.Contains(c.Scenarios, "wrk") && (c.WrkRounds < 1 || c.WrkRounds > maxWrkRounds):
		return fmt.Errorf("-wrk-rounds must be 1 to %d", maxWrkRounds)
	case slices.Contains(c.Scenarios, "wrk") && (c.WrkThreads < 1 || c.WrkThreads > maxWrkThreads || c.WrkThreads > c.Concurrency):
		return fmt.Errorf("-wrk-threads must be 1 to %d and at most -concurrency", maxWrkThreads)
	case slices.Contains(c.Scenarios, "wrk") && c.Duration < time.Second:
		return fmt.Errorf("wrk: -duration must be at least 1s")
	case c.PingInterval < 0:
		return fmt.Errorf("-ping-interval must not be negative")
	case c.JoinGCWait < 0 || c.JoinGCWait > maxJoinGCWait:
		return fmt.Errorf("-join-gc-wait must be 0 to %v", maxJoinGCWait)
	case c.MediaNode != "" && c.MediaNode != mediaNodeBuiltin && c.MediaNode != mediaNodeOwn:
		return fmt.Errorf("-media-node %q: want %s or %s", c.MediaNode, mediaNodeBuiltin, mediaNodeOwn)
	case c.MediaNode == mediaNodeOwn && !c.Local:
		return fmt.Errorf("-media-node %s needs -local (against -addr, give the node's -media-metrics-addr)", mediaNodeOwn)
	case c.MediaMetricsAddr != "" && c.Local:
		return fmt.Errorf("-media-metrics-addr is for -addr; with -local use -media-node %s", mediaNodeOwn)
	case c.CreatePerRoom < 0 || c.CreatePerRoom > maxPerRoomOps:
		return fmt.Errorf("-create-per-room must be 0 to %d", maxPerRoomOps)
	case slices.Contains(c.Scenarios, "media") && c.mediaShape().validate() != nil:
		return c.mediaShape().validate()
	case slices.Contains(c.Scenarios, "join") && c.Concurrency > maxJoinSockets:
		return fmt.Errorf("join: -concurrency (sockets) must be at most %d", maxJoinSockets)
	}
	return nil
}

// needsServer: every scenario but baseline talks to rtcd; store starts
// its own.
func (c *config) needsServer() bool {
	for _, s := range c.Scenarios {
		if s != "baseline" && s != "store" && s != "cluster" {
			return true
		}
	}
	return false
}

func main() {
	cfg, serveBaselineAddr, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(2)
	}
	if serveMediaBaselineAddr != "" {
		if err := serveMediaBaseline(serveMediaBaselineAddr); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest media baseline:", err)
			os.Exit(1)
		}
		return
	}
	if serveNATSCluster {
		if err := serveNATS(); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest nats:", err)
			os.Exit(1)
		}
		return
	}
	if serveBaselineAddr != "" {
		if err := serveBaseline(serveBaselineAddr); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest baseline:", err)
			os.Exit(1)
		}
		return
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

// run opens the target (starting a local server when asked), runs the
// scenarios and writes the reports.
func run(ctx context.Context, cfg *config, out, progress io.Writer) error {
	var t *target
	if cfg.needsServer() {
		var err error
		if t, err = openTarget(ctx, cfg, progress); err != nil {
			return err
		}
		if t.local != nil {
			defer func() {
				fmt.Fprintf(progress, "stopping the local rtcd (SIGTERM)\n")
				t.local.Stop()
				if cfg.Keep {
					fmt.Fprintf(progress, "kept %s\n", t.local.dir)
				}
			}()
		}
	}
	_, err := runWith(ctx, cfg, t, out, progress)
	return err
}

// openTarget starts the local server or connects to the remote one.
func openTarget(ctx context.Context, cfg *config, progress io.Writer) (*target, error) {
	conns := cfg.Concurrency
	if slices.Contains(cfg.Scenarios, "join") {
		conns = max(conns, joinDialers) // join holds sockets, not HTTP connections
	}
	conns = min(conns, maxConcurrency)
	if cfg.Local {
		ls, err := startLocal(ctx, cfg.RtcdBin, cfg.Keep, cfg.MediaNode == mediaNodeOwn, nil, cfg.ServerFlags, progress)
		if err != nil {
			return nil, err
		}
		return localTarget(ctx, ls, conns, progress)
	}
	api, err := newAPIClient(cfg.Addr, conns)
	if err != nil {
		return nil, err
	}
	t := &target{api: api}
	for _, k := range cfg.APIKeys {
		t.projects = append(t.projects, projectKey{Key: k})
	}
	if cfg.MetricsAddr != "" {
		origin, _, _, err := parseOrigin(cfg.MetricsAddr)
		if err != nil {
			return nil, fmt.Errorf("-metrics-addr: %w", err)
		}
		t.metricsURL = origin
		t.mediaMetricsURL, t.mediaProcess = origin, mediaProcessBuiltin
	}
	if cfg.MediaMetricsAddr != "" {
		origin, _, _, err := parseOrigin(cfg.MediaMetricsAddr)
		if err != nil {
			return nil, fmt.Errorf("-media-metrics-addr: %w", err)
		}
		t.mediaMetricsURL, t.mediaProcess = origin, mediaProcessOwn
	}
	if err := t.loadLimits(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// localTarget is the target of a local server the tool started; it stops
// the server if the target cannot be made.
func localTarget(ctx context.Context, ls *localServer, conns int, progress io.Writer) (*target, error) {
	api, err := newAPIClient(ls.API, conns)
	if err != nil {
		ls.Stop()
		return nil, err
	}
	t := &target{api: api, metricsURL: ls.Metrics, projects: []projectKey{{ProjectID: ls.creds.ProjectID, Key: ls.creds.APIKey}},
		accountID: ls.creds.AccountID, ownerEmail: ls.creds.OwnerEmail, dataDir: ls.dataDir, local: ls,
		mediaMetricsURL: ls.Metrics, mediaProcess: mediaProcessBuiltin}
	fmt.Fprintf(progress, "local rtcd pid %d: api %s, metrics %s, data %s\n", ls.Pid(), ls.API, ls.Metrics, ls.dataDir)
	if ls.ownNode {
		t.mediaMetricsURL, t.mediaProcess = ls.MediaMetrics, mediaProcessOwn
		fmt.Fprintf(progress, "local rtcd media pid %d: %s, metrics %s\n", ls.NodePid(), ls.MediaURL, ls.MediaMetrics)
	}
	if err := t.loadLimits(ctx); err != nil {
		ls.Stop()
		return nil, err
	}
	return t, nil
}

// fullReport is the JSON document (-json).
type fullReport struct {
	StartedAt string            `json:"started_at"`
	Host      hostInfo          `json:"host"`
	Target    string            `json:"target,omitempty"`
	Limits    *projectLimits    `json:"project_limits,omitempty"`
	Baseline  *baselineResult   `json:"baseline,omitempty"`
	Runs      []*scenarioReport `json:"runs"`
}

type hostInfo struct {
	GoVersion  string `json:"go_version"`
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
}

// runWith runs the scenarios against t (nil when only the baseline runs).
func runWith(ctx context.Context, cfg *config, t *target, out, progress io.Writer) (*fullReport, error) {
	if cfg.Quiet {
		progress = io.Discard
	}
	rep := &fullReport{StartedAt: time.Now().UTC().Format(time.RFC3339),
		Host: hostInfo{GoVersion: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
			NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0)}}
	if t != nil {
		rep.Target = t.describe()
		l := t.limits
		rep.Limits = &l
	}
	if cfg.WithBaseline || slices.Contains(cfg.Scenarios, "baseline") {
		b, err := runBaseline(ctx, cfg, progress)
		if err != nil {
			return rep, err
		}
		rep.Baseline = b
		writeBaselineText(out, b)
	}
	var runErr error
	for _, name := range cfg.Scenarios {
		if name == "baseline" || runErr != nil {
			continue
		}
		variants := []string{""}
		if name == "hotspot" {
			variants = cfg.Hotspots
		}
		for _, v := range variants {
			if ctx.Err() != nil { // interrupted: report what ran
				runErr = ctx.Err()
				break
			}
			var r *scenarioReport
			var err error
			switch name {
			case "store":
				r, err = runStore(ctx, cfg, progress)
			case "cluster":
				r, err = runCluster(ctx, cfg, progress)
			default:
				r, err = runScenario(ctx, cfg, t, name, v, progress)
			}
			if err != nil {
				runErr = fmt.Errorf("%s: %w", name, err)
				break
			}
			if rep.Baseline != nil && r.Scenario != "join" && r.Scenario != "store" && r.Scenario != "cluster" {
				r.Ratio = ratioOf(r.Load, rep.Baseline.Load)
			}
			rep.Runs = append(rep.Runs, r)
			writeScenarioText(out, r, rep.Baseline)
		}
	}
	if cfg.JSONPath != "" && len(rep.Runs)+btoi(rep.Baseline != nil) > 0 {
		if err := writeJSON(cfg.JSONPath, rep); err != nil {
			return rep, err
		}
		fmt.Fprintf(progress, "wrote %s\n", cfg.JSONPath)
	}
	return rep, runErr
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (t *target) describe() string {
	if t.local != nil {
		return fmt.Sprintf("%s (local rtcd, pid %d, temporary data dir)", t.api.origin, t.local.Pid())
	}
	return t.api.origin
}
