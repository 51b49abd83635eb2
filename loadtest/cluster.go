package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-json"

	"rtcd/internal/testtools"
)

// The cluster scenario measures what being clustered costs (issue 20,
// docs/cluster.md): the same connects and creates through one rtcd, then
// through three rtcd nodes of one cluster, in one run on one machine, on
// the same NATS JetStream servers (R3) and Redis (the shared rate
// counters). The one node is a plain node on that store; the three are a
// cluster (etcd membership), the load spread evenly over their three API
// listeners, so that two requests in three are forwarded one hop to the
// node that owns the project. The report states three nodes' figures as
// ratios to one node's.
const (
	// clusterNodes is the size of the cluster measured against one node.
	clusterNodes = 3
	// clusterReadyTimeout bounds the wait for every node to see the others.
	clusterReadyTimeout = 30 * time.Second
	// clusterInfraTimeout bounds etcd's and Redis's start.
	clusterInfraTimeout = 30 * time.Second
)

// clusterFigures is what the cluster scenario adds to its report.
type clusterFigures struct {
	Infra string        `json:"infra"`
	Runs  []*clusterRun `json:"runs"`
	// Three nodes over one: throughput, p50 and p99 of each load.
	ConnectsRatio *ratio `json:"connects_three_to_one,omitempty"`
	CreatesRatio  *ratio `json:"creates_three_to_one,omitempty"`
}

// clusterRun is one deployment's two loads.
type clusterRun struct {
	Nodes    int         `json:"nodes"`
	Flags    []string    `json:"flags,omitempty"`
	Connects *loadResult `json:"connects"`
	Creates  *loadResult `json:"creates"`
	// CPUSeconds is the rtcd processes' CPU time over both loads.
	CPUSeconds float64 `json:"rtcd_cpu_seconds"`

	rooms, parts int
}

// runCluster runs the cluster scenario; it starts and stops its own
// servers: three NATS servers, etcd, Redis, and rtcd twice.
func runCluster(ctx context.Context, cfg *config, progress io.Writer) (*scenarioReport, error) {
	r := &scenarioReport{Scenario: "cluster", Projects: 1,
		Description: fmt.Sprintf("the same connects and creates (POST /v1/rooms, then %d participants) through one rtcd, then through %d rtcd nodes of one cluster (the load spread over their API listeners), on JetStream (3 NATS servers, R3) and Redis",
			cfg.CreatePerRoom, clusterNodes),
		Target: "local rtcd: one node, then a cluster"}
	dir, err := os.MkdirTemp("", "rtcd-loadtest-cluster-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := cfg.RtcdBin
	if bin == "" {
		if bin, err = buildRtcd(ctx, dir, progress); err != nil {
			return nil, err
		}
	}
	nats, err := startNATS(cfg.BaselineInProcess)
	if err != nil {
		return nil, fmt.Errorf("nats cluster: %w", err)
	}
	defer nats.Stop()
	etcd, etcdEndpoint, err := startEtcd(dir)
	if err != nil {
		return nil, err
	}
	defer etcd.kill()
	redis, redisURL, err := startRedis(dir)
	if err != nil {
		return nil, err
	}
	defer redis.kill()
	cf := &clusterFigures{Infra: fmt.Sprintf("%s; etcd %s; redis %s", nats.summary, etcdEndpoint, redisURL)}
	r.Cluster = cf
	for _, nodes := range []int{1, clusterNodes} {
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		// Each deployment has its own stream, counters and membership.
		name := fmt.Sprintf("loadtest%d", nodes)
		master := make([]byte, 32)
		_, _ = rand.Read(master)
		storeFlags := []string{"--store", "jetstream", "--nats-url", nats.URLs, "--nats-stream", strings.ToUpper(name),
			"--master-key", hex.EncodeToString(master)}
		flags := []string{"--rate-limit-store", "redis", "--redis-url", redisURL, "--redis-key-prefix", name + ":"}
		if nodes > 1 {
			flags = append(flags, "--cluster-name", name, "--cluster-etcd", etcdEndpoint, "--cluster-listen", "127.0.0.1:0")
		}
		run, err := runClusterOf(ctx, cfg, bin, nodes, storeFlags, flags, r, progress)
		if err != nil {
			return r, fmt.Errorf("%d node(s): %w", nodes, err)
		}
		cf.Runs = append(cf.Runs, run)
	}
	cf.ConnectsRatio = ratioOf(cf.Runs[1].Connects, cf.Runs[0].Connects)
	cf.CreatesRatio = ratioOf(cf.Runs[1].Creates, cf.Runs[0].Creates)
	r.Rooms, r.Parts = cf.Runs[0].rooms, cf.Runs[0].parts
	return r, nil
}

// runClusterOf starts n rtcd nodes (the first bootstraps the stream) and
// runs both loads through all of them.
func runClusterOf(ctx context.Context, cfg *config, bin string, n int, storeFlags, flags []string, r *scenarioReport, progress io.Writer) (*clusterRun, error) {
	fmt.Fprintf(progress, "[cluster] %d node(s): starting rtcd\n", n)
	first, err := startLocal(ctx, bin, cfg.Keep, false, storeFlags, append(flags, cfg.ServerFlags...), progress)
	if err != nil {
		return nil, err
	}
	servers := []*localServer{first}
	defer func() {
		for _, s := range servers {
			s.Stop()
		}
	}()
	for i := 1; i < n; i++ {
		s, err := startNode(ctx, bin, first.creds, cfg.Keep, append(append(storeFlags, flags...), cfg.ServerFlags...))
		if err != nil {
			return nil, err
		}
		servers = append(servers, s)
	}
	if n > 1 {
		if err := awaitMembers(ctx, servers); err != nil {
			return nil, err
		}
	}
	conns := max(cfg.Concurrency, joinDialers)
	t, err := localTarget(ctx, first, conns, progress)
	if err != nil {
		return nil, err
	}
	clients := []*apiClient{t.api}
	for _, s := range servers[1:] {
		c, err := newAPIClient(s.API, conns)
		if err != nil {
			return nil, err
		}
		clients = append(clients, c)
	}
	run := &clusterRun{Nodes: n, Flags: flags}
	cpu := func() float64 {
		total := 0.0
		for _, s := range servers {
			if sc := scrapeOrNote(&target{metricsURL: s.Metrics}, r, "cpu"); sc != nil {
				total += sc.Values["process_cpu_seconds_total"]
			}
		}
		return total
	}
	cpu0 := cpu()
	spec := func(name string, ops []string, op opFunc) loadSpec {
		return loadSpec{name: fmt.Sprintf("cluster:%d:%s", n, name), ops: ops, mode: cfg.Mode, concurrency: cfg.Concurrency,
			rate: cfg.Rate, duration: cfg.Duration, maxRequests: cfg.MaxRequests, op: op}
	}
	f, err := t.prepare(ctx, 1, cfg.Rooms, cfg.Participants, ttlSeconds(cfg.Duration, maxRoomTTL), ttlSeconds(cfg.Duration, maxParticipantTTL), progress)
	if err != nil {
		return nil, err
	}
	run.rooms, run.parts = cfg.Rooms, cfg.Participants
	run.Connects = runLoad(ctx, spec("connects", []string{"connect"}, spreadConnectOp(clients, f.participants, synthIPs(spreadIPs))), progress)
	run.Creates = runLoad(ctx, spec("creates", []string{"room_create", "participant_create"}, spreadCreateOp(clients, t.projects[0].Key, cfg.CreatePerRoom)), progress)
	run.CPUSeconds = cpu() - cpu0
	return run, nil
}

// spreadConnectOp is connectOp over several entry nodes: request i goes
// to node i % len(clients).
func spreadConnectOp(clients []*apiClient, parts []participant, ips []string) opFunc {
	ops := make([]opFunc, len(clients))
	for i, c := range clients {
		ops[i] = connectOp(c, parts, ips)
	}
	return func(w *worker, slot int64) (int, string) { return ops[slot%int64(len(ops))](w, slot) }
}

// spreadCreateOp is createOp over several entry nodes: worker w sends its
// rooms and participants through node w % len(clients).
func spreadCreateOp(clients []*apiClient, key string, perRoom int) opFunc {
	ops := make([]opFunc, len(clients))
	for i, c := range clients {
		ops[i] = createOp(&target{api: c, projects: []projectKey{{Key: key}}}, 1, perRoom)
	}
	return func(w *worker, slot int64) (int, string) { return ops[w.id%len(ops)](w, slot) }
}

// startNode starts one more `rtcd serve` on the stream the first node
// bootstrapped, with its own data directory (lock, admin token).
func startNode(ctx context.Context, bin string, creds credentials, keep bool, flags []string) (*localServer, error) {
	dir, err := os.MkdirTemp("", "rtcd-loadtest-*")
	if err != nil {
		return nil, err
	}
	s := &localServer{dir: dir, dataDir: filepath.Join(dir, "data"), bin: bin, creds: creds, keep: keep}
	if err := os.MkdirAll(s.dataDir, 0o700); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		err := s.launch(flags)
		if err == nil {
			err = s.waitReady(ctx)
		}
		if err == nil {
			return s, nil
		}
		tail := s.serve.logTail()
		s.kill()
		if attempt == localStartTries || ctx.Err() != nil {
			s.Stop()
			return nil, fmt.Errorf("rtcd node did not start: %v\n%s", err, strings.TrimSpace(tail))
		}
	}
}

// awaitMembers waits until every node sees all of them.
func awaitMembers(ctx context.Context, servers []*localServer) error {
	deadline := time.Now().Add(clusterReadyTimeout)
	for {
		all := true
		for _, s := range servers {
			sc, err := scrapeMetrics(s.Metrics)
			all = all && err == nil && int(sc.Values["rtcd_cluster_members"]) == len(servers)
		}
		if all {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the %d nodes did not all see each other within %v", len(servers), clusterReadyTimeout)
		}
		time.Sleep(50 * time.Millisecond) // polling starting processes
	}
}

// startEtcd runs a private single-member etcd (found or built as the tests
// do it, testtools.Etcd) under dir.
func startEtcd(dir string) (*rtcdChild, string, error) {
	bin, err := testtools.Etcd.Binary()
	if err != nil {
		return nil, "", fmt.Errorf("etcd: %w", err)
	}
	client, err := freePort()
	if err != nil {
		return nil, "", err
	}
	peer, err := freePort()
	if err != nil {
		return nil, "", err
	}
	c, err := startRtcdChild("etcd", bin, []string{"--name", "loadtest", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", "http://" + client, "--advertise-client-urls", "http://" + client,
		"--listen-peer-urls", "http://" + peer, "--initial-advertise-peer-urls", "http://" + peer,
		"--initial-cluster", "loadtest=http://" + peer, "--log-level", "error"}, filepath.Join(dir, "etcd.log"))
	if err != nil {
		return nil, "", err
	}
	deadline := time.Now().Add(clusterInfraTimeout)
	for {
		if res, err := http.Get("http://" + client + "/health"); err == nil {
			var h struct {
				Health string `json:"health"`
			}
			_ = json.NewDecoder(res.Body).Decode(&h)
			res.Body.Close()
			if h.Health == "true" {
				return c, client, nil
			}
		}
		if time.Now().After(deadline) {
			c.kill()
			return nil, "", fmt.Errorf("etcd did not become healthy within %v\n%s", clusterInfraTimeout, c.logTail())
		}
		time.Sleep(20 * time.Millisecond) // polling a starting process
	}
}

// startRedis runs a private redis-server without persistence.
func startRedis(dir string) (*rtcdChild, string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, "", fmt.Errorf("redis-server is not on PATH (apt-get install redis-server): %w", err)
	}
	addr, err := freePort()
	if err != nil {
		return nil, "", err
	}
	_, port, _ := net.SplitHostPort(addr)
	c, err := startRtcdChild("redis-server", bin, []string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"},
		filepath.Join(dir, "redis.log"))
	if err != nil {
		return nil, "", err
	}
	deadline := time.Now().Add(clusterInfraTimeout)
	for {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_, _ = conn.Write([]byte("PING\r\n"))
			_ = conn.SetReadDeadline(time.Now().Add(time.Second))
			line, _ := bufio.NewReader(conn).ReadString('\n')
			conn.Close()
			if strings.HasPrefix(line, "+PONG") {
				return c, "redis://" + addr + "/0", nil
			}
		}
		if time.Now().After(deadline) {
			c.kill()
			return nil, "", fmt.Errorf("redis-server did not answer within %v\n%s", clusterInfraTimeout, c.logTail())
		}
		time.Sleep(20 * time.Millisecond) // polling a starting process
	}
}

// writeClusterText writes the cluster scenario's figures.
func writeClusterText(w io.Writer, r *scenarioReport) {
	cf := r.Cluster
	fmt.Fprintf(w, "infra     %s\n", cf.Infra)
	for _, run := range cf.Runs {
		fmt.Fprintln(w)
		for _, x := range []struct {
			name string
			l    *loadResult
		}{{"connects", run.Connects}, {"creates", run.Creates}} {
			fmt.Fprintf(w, "--- %d node(s): %s (%s, %.1f s): %.0f ok/s\n", run.Nodes, x.name, loadLine(x.l), x.l.ElapsedSec, x.l.Total.OKRPS)
			writeOpsTable(w, x.l)
		}
		if ok := run.Connects.Total.OK + run.Creates.Total.OK; ok > 0 {
			fmt.Fprintf(w, "cpu       rtcd %.0f µs per request over every node (%s s)\n", run.CPUSeconds/float64(ok)*1e6, strconv.FormatFloat(run.CPUSeconds, 'f', 1, 64))
		}
	}
	for _, x := range []struct {
		name string
		r    *ratio
	}{{"connects", cf.ConnectsRatio}, {"creates", cf.CreatesRatio}} {
		if x.r != nil {
			fmt.Fprintf(w, "ratio     %-8s %d nodes / 1: throughput %.3f, p50 x%.2f, p99 x%.2f\n", x.name, clusterNodes, x.r.Throughput, x.r.P50, x.r.P99)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note      %s\n", n)
	}
}
