package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/goccy/go-json"
	"github.com/gorilla/websocket"
	"github.com/nats-io/nats.go"

	"rtcd/internal/natstest"
)

// The store scenario runs the same durable writes against rtcd on each
// store in turn, in one run on one machine: Pebble in the data directory
// (the default), then NATS JetStream on a cluster of three servers with
// an R3 stream (docs/cluster.md). Each gets a fresh rtcd and two loads of
// -duration: creates (a room, then -create-per-room participants in it)
// and joins (connect, the media socket's join until `joined`, which the
// room records before it answers, then leave, also recorded). The report
// states JetStream's figures as ratios to Pebble's: what replication
// costs per write.
const (
	storePebble    = "pebble"
	storeJetStream = "jetstream"
	// storeNATSStream is the stream the JetStream run writes, in a cluster
	// started for the run.
	storeNATSStream = "LOADTEST"
	// storeNATSReplicas is the stream's replication, as in production.
	storeNATSReplicas = 3
	// storeJoinPartsPerWorker participants are cycled by each join worker,
	// its own, so that a participant's leave is recorded well before its
	// next connect.
	storeJoinPartsPerWorker = 4
	// storeLeaveTimeout bounds the wait for the node to close a socket
	// after its leave.
	storeLeaveTimeout = 10 * time.Second
)

// storeKinds are the stores compared, the baseline first.
var storeKinds = []string{storePebble, storeJetStream}

// storeFigures is what the store scenario adds to its report.
type storeFigures struct {
	NATS string      `json:"nats"`
	Runs []*storeRun `json:"runs"`
	// JetStream over Pebble: throughput, p50 and p99 of each load.
	CreatesRatio *ratio `json:"creates_jetstream_to_pebble,omitempty"`
	JoinsRatio   *ratio `json:"joins_jetstream_to_pebble,omitempty"`
}

// storeRun is one store's two loads.
type storeRun struct {
	Store string   `json:"store"`
	Flags []string `json:"flags,omitempty"`
	// Creates: rooms, and participants in them. Joins: join cycles, two
	// durable records each (the join and the leave).
	Creates *storeLoad `json:"creates"`
	Joins   *storeLoad `json:"joins"`

	rooms, parts int // the join load's fixture
}

// storeLoad is one load on one store, with what was read around it.
type storeLoad struct {
	Load   *loadResult    `json:"load"`
	Server *serverFigures `json:"server,omitempty"`
	// NATSCPUSeconds is the NATS servers' process's CPU time (JetStream).
	NATSCPUSeconds float64 `json:"nats_cpu_seconds,omitempty"`
	// Written is what the store took in.
	Written *storeWritten `json:"written,omitempty"`
}

// storeWritten is what a store took in over a load: Pebble's write-ahead
// log bytes (rtcd_pebble_wal_bytes_written_total), or the messages and
// bytes the JetStream stream grew by (each kept by every replica).
type storeWritten struct {
	Source   string  `json:"source"`
	Messages float64 `json:"messages,omitempty"`
	Bytes    float64 `json:"bytes"`
}

// pebbleWALBytes is the counter of Pebble's write-ahead log bytes.
const pebbleWALBytes = "rtcd_pebble_wal_bytes_written_total"

// natsInfoTimeout bounds a stream info request.
const natsInfoTimeout = 5 * time.Second

// streamState reads the messages and bytes a JetStream stream holds.
func streamState(urls, stream string) (messages, bytes float64, err error) {
	nc, err := nats.Connect(urls)
	if err != nil {
		return 0, 0, err
	}
	defer nc.Close()
	msg, err := nc.Request("$JS.API.STREAM.INFO."+stream, nil, natsInfoTimeout)
	if err != nil {
		return 0, 0, err
	}
	var info struct {
		State struct {
			Messages float64 `json:"messages"`
			Bytes    float64 `json:"bytes"`
		} `json:"state"`
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		return 0, 0, err
	}
	if info.Error != nil {
		return 0, 0, fmt.Errorf("stream %s: %s", stream, info.Error.Description)
	}
	return info.State.Messages, info.State.Bytes, nil
}

// serveNATS is the child process mode (-serve-nats): it starts three
// embedded NATS servers (internal/natstest) on loopback, prints their
// client URLs, serves until stdin closes, then shuts them down and
// removes their store directories.
func serveNATS() error {
	c, err := natstest.Start()
	if err != nil {
		return err
	}
	defer c.Shutdown()
	fmt.Println(c.URLs)
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	return nil
}

// natsCluster is the store scenario's NATS cluster: a child process
// (-serve-nats), so that its CPU time is its own, or three servers in this
// process (-baseline-in-process, and the tests).
type natsCluster struct {
	URLs    string
	child   *baselineServer
	inProc  *natstest.Cluster
	summary string
}

func startNATS(inProcess bool) (*natsCluster, error) {
	if inProcess {
		c, err := natstest.Start()
		if err != nil {
			return nil, err
		}
		return &natsCluster{URLs: c.URLs, inProc: c,
			summary: "three embedded NATS servers, clustered, in this process (their CPU time is not measured apart): " + c.URLs}, nil
	}
	child, err := startChild("-serve-nats")
	if err != nil {
		return nil, err
	}
	return &natsCluster{URLs: child.Addr, child: child,
		summary: fmt.Sprintf("three embedded NATS servers, clustered, in one child process (pid %d): %s", child.cmd.Process.Pid, child.Addr)}, nil
}

// CPUSeconds is the CPU time of the child process, or -1 in this process.
func (n *natsCluster) CPUSeconds() float64 {
	if n.child == nil {
		return -1
	}
	return n.child.CPUSeconds()
}

func (n *natsCluster) Stop() {
	if n.child != nil {
		n.child.Stop()
	}
	if n.inProc != nil {
		n.inProc.Shutdown()
	}
}

// runStore runs the store scenario; it starts and stops its own servers.
func runStore(ctx context.Context, cfg *config, progress io.Writer) (*scenarioReport, error) {
	r := &scenarioReport{Scenario: "store", Projects: 1,
		Description: fmt.Sprintf("the same creates (POST /v1/rooms, then %d participants in it) and joins (connect, media join until joined, leave) on Pebble, then on JetStream (3 NATS servers, R%d stream), each on a fresh local rtcd",
			cfg.CreatePerRoom, storeNATSReplicas),
		Target: "local rtcd on each store in turn"}
	bin := cfg.RtcdBin
	if bin == "" {
		dir, err := os.MkdirTemp("", "rtcd-loadtest-store-*")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		if bin, err = buildRtcd(ctx, dir, progress); err != nil {
			return nil, err
		}
	}
	nats, err := startNATS(cfg.BaselineInProcess)
	if err != nil {
		return nil, fmt.Errorf("nats cluster: %w", err)
	}
	defer nats.Stop()
	sf := &storeFigures{NATS: nats.summary}
	r.Store = sf
	for _, kind := range storeKinds {
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		var flags []string
		if kind == storeJetStream {
			flags = []string{"--store", storeJetStream, "--nats-url", nats.URLs, "--nats-stream", storeNATSStream,
				"--nats-replicas", fmt.Sprint(storeNATSReplicas)}
		}
		run, err := runStoreOn(ctx, cfg, bin, kind, flags, nats, r, progress)
		if err != nil {
			return r, fmt.Errorf("%s: %w", kind, err)
		}
		sf.Runs = append(sf.Runs, run)
	}
	sf.CreatesRatio = ratioOf(sf.Runs[1].Creates.Load, sf.Runs[0].Creates.Load)
	sf.JoinsRatio = ratioOf(sf.Runs[1].Joins.Load, sf.Runs[0].Joins.Load)
	r.Rooms, r.Parts = sf.Runs[0].rooms, sf.Runs[0].parts
	return r, nil
}

// runStoreOn starts rtcd on one store and runs both loads against it.
func runStoreOn(ctx context.Context, cfg *config, bin, kind string, flags []string, nats *natsCluster, r *scenarioReport, progress io.Writer) (*storeRun, error) {
	fmt.Fprintf(progress, "[store] %s: starting rtcd\n", kind)
	ls, err := startLocal(ctx, bin, cfg.Keep, false, flags, cfg.ServerFlags, progress)
	if err != nil {
		return nil, err
	}
	defer func() {
		ls.Stop()
		if cfg.Keep {
			fmt.Fprintf(progress, "kept %s\n", ls.dir)
		}
	}()
	t, err := localTarget(ctx, ls, max(cfg.Concurrency, joinDialers), progress)
	if err != nil {
		return nil, err
	}
	run := &storeRun{Store: kind, Flags: flags}
	natsCPU := func() float64 {
		if kind != storeJetStream {
			return 0
		}
		return max(nats.CPUSeconds(), 0)
	}
	spec := func(name string, ops []string, op opFunc) loadSpec {
		return loadSpec{name: "store:" + kind + ":" + name, ops: ops, mode: cfg.Mode, concurrency: cfg.Concurrency,
			rate: cfg.Rate, duration: cfg.Duration, maxRequests: cfg.MaxRequests, op: op}
	}

	// measure runs a load and reads, around it, the server's metrics, the
	// NATS servers' CPU time and what the store took in.
	measure := func(what string, sp loadSpec) *storeLoad {
		before, cpu0 := scrapeOrNote(t, r, kind+" before the "+what), natsCPU()
		msgs0, bytes0, streamErr := 0.0, 0.0, error(nil)
		if kind == storeJetStream {
			msgs0, bytes0, streamErr = streamState(nats.URLs, storeNATSStream)
		}
		sl := &storeLoad{Load: runLoad(ctx, sp, progress)}
		sl.NATSCPUSeconds = natsCPU() - cpu0
		after := scrapeOrNote(t, r, kind+" after the "+what)
		if before != nil && after != nil {
			sl.Server = compare(t.metricsURL, before, after)
			if c, ok := sl.Server.Counters[pebbleWALBytes]; ok && kind == storePebble {
				sl.Written = &storeWritten{Source: pebbleWALBytes, Bytes: c.Delta}
			}
		}
		if kind == storeJetStream {
			msgs1, bytes1, err := streamState(nats.URLs, storeNATSStream)
			if err = cmp.Or(streamErr, err); err != nil {
				r.Notes = append(r.Notes, fmt.Sprintf("%s: stream state: %v", what, err))
			} else {
				sl.Written = &storeWritten{Source: "stream " + storeNATSStream + " (R" + fmt.Sprint(storeNATSReplicas) + ")", Messages: msgs1 - msgs0, Bytes: bytes1 - bytes0}
			}
		}
		return sl
	}

	// Creates.
	run.Creates = measure("creates", spec("creates", []string{"room_create", "participant_create"}, createOp(t, 1, cfg.CreatePerRoom)))

	// Joins: each worker cycles over participants of its own.
	nParts := cfg.Concurrency * storeJoinPartsPerWorker
	nRooms := (nParts + cfg.JoinPerRoom - 1) / cfg.JoinPerRoom
	f, err := t.prepare(ctx, 1, nRooms, nParts, ttlSeconds(cfg.Duration, maxRoomTTL), ttlSeconds(cfg.Duration, maxParticipantTTL), progress)
	if err != nil {
		return nil, err
	}
	run.rooms, run.parts = nRooms, nParts
	joins := &storeJoins{join: newOpStats(), leave: newOpStats()}
	run.Joins = measure("joins", spec("joins", []string{"join_cycle"}, joins.op(t.api, f.participants, synthIPs(spreadIPs), cfg.Concurrency)))
	l := run.Joins.Load
	elapsed := time.Duration(l.ElapsedSec * float64(time.Second))
	l.Ops = append(l.Ops, joins.join.summary("join", elapsed), joins.leave.summary("leave", elapsed))
	return run, nil
}

// storeJoins is the join load of the store scenario: the latencies of the
// join (connect, dial, join until `joined`) and of the leave (until the
// node closes the socket), beside the whole cycle's.
type storeJoins struct {
	join, leave *opStats
}

// op is one cycle: connect one of the worker's participants, open its
// media socket, join, leave, and wait until the node closes the socket.
// Worker w uses participants w, w+workers, w+2·workers, … in turn.
func (sj *storeJoins) op(c *apiClient, parts []participant, ips []string, workers int) opFunc {
	dialer := &websocket.Dialer{HandshakeTimeout: wsTimeout, ReadBufferSize: wsBufBytes, WriteBufferSize: wsBufBytes}
	return func(w *worker, slot int64) (int, string) {
		p := &parts[(w.id+workers*w.cycle)%len(parts)]
		w.cycle = (w.cycle + 1) % storeJoinPartsPerWorker
		t0 := time.Now()
		cs, code := connectForMedia(c, p, ips[slot%int64(len(ips))])
		if code != "" {
			sj.join.recordRaw(w.id, time.Since(t0), code)
			return 0, code
		}
		conn, _, code := joinMedia(dialer, cs)
		if code != "" {
			sj.join.recordRaw(w.id, time.Since(t0), code)
			return 0, code
		}
		defer conn.Close()
		sj.join.record(w.id, time.Since(t0), "", "")
		t1 := time.Now()
		if err := conn.WriteJSON(map[string]any{"type": "leave"}); err != nil {
			return 0, "ws_write_failed|" + err.Error()
		}
		// The node ends the session and closes the socket: read until then.
		_ = conn.SetReadDeadline(time.Now().Add(storeLeaveTimeout))
		for {
			var m wsMsg
			err := conn.ReadJSON(&m)
			var closed *websocket.CloseError
			if errors.As(err, &closed) && closed.Code == websocket.CloseNormalClosure {
				break
			}
			if err != nil {
				code := "leave_not_closed|" + err.Error()
				sj.leave.recordRaw(w.id, time.Since(t1), code)
				return 0, code
			}
		}
		sj.leave.record(w.id, time.Since(t1), "", "")
		return 0, ""
	}
}

// writeStoreText writes the store scenario's figures.
func writeStoreText(w io.Writer, r *scenarioReport) {
	sf := r.Store
	fmt.Fprintf(w, "nats      %s\n", sf.NATS)
	for _, run := range sf.Runs {
		fmt.Fprintln(w)
		for _, x := range []struct {
			name, unit string
			sl         *storeLoad
		}{{"creates", "creates/s", run.Creates}, {"joins", "join cycles/s", run.Joins}} {
			l := x.sl.Load
			fmt.Fprintf(w, "--- %s: %s (%s, %.1f s): %.0f %s\n", run.Store, x.name, loadLine(l), l.ElapsedSec, l.Total.OKRPS, x.unit)
			writeOpsTable(w, l)
			writeStoreCost(w, x.sl)
		}
	}
	for _, x := range []struct {
		name string
		r    *ratio
	}{{"creates", sf.CreatesRatio}, {"joins", sf.JoinsRatio}} {
		if x.r != nil {
			fmt.Fprintf(w, "ratio     %-8s jetstream / pebble: throughput %.3f, p50 x%.2f, p99 x%.2f\n", x.name, x.r.Throughput, x.r.P50, x.r.P99)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note      %s\n", n)
	}
}

// writeStoreCost writes, per successful operation, the CPU time, the
// store's commits and what it took in.
func writeStoreCost(w io.Writer, sl *storeLoad) {
	l, s, natsCPUSeconds, written := sl.Load, sl.Server, sl.NATSCPUSeconds, sl.Written
	if l.Total.OK == 0 {
		return
	}
	ops := float64(l.Total.OK)
	if written != nil {
		line := fmt.Sprintf("written   %.0f bytes per op", written.Bytes/ops)
		if written.Messages > 0 {
			line += fmt.Sprintf(", %.2f messages per op", written.Messages/ops)
		}
		fmt.Fprintf(w, "%s (%s)\n", line, written.Source)
	}
	if s == nil {
		return
	}
	per := func(sec float64) float64 { return sec / ops * 1e6 }
	line := ""
	if c, ok := s.Counters["process_cpu_seconds_total"]; ok {
		line = fmt.Sprintf("cpu       rtcd %.0f µs per op", per(c.Delta))
	}
	if natsCPUSeconds > 0 {
		line += fmt.Sprintf(", nats %.0f µs per op", per(natsCPUSeconds))
	}
	if h, ok := s.Histograms["rtcd_journal_sync_duration_seconds"]; ok && h.Count > 0 {
		line += fmt.Sprintf("; %.0f store commits (%.2f per op), mean %.3f ms", h.Count, h.Count/float64(l.Total.OK), h.MeanMs)
	}
	if line != "" {
		fmt.Fprintln(w, line)
	}
}
