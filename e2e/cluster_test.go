package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"rtcd/clock"
	"rtcd/config"
	"rtcd/internal/natstest"
	"rtcd/internal/testtools"
	"rtcd/server"
)

// clusterInfra is what a test's cluster of rtcd nodes runs on: three NATS
// servers (an R3 stream), etcd and Redis on loopback, a master secret of
// its own and a name from the test's.
type clusterInfra struct {
	natsURLs, etcd, redisURL, masterKey, name string
}

// startClusterInfra starts the servers; they end with the test.
func startClusterInfra(t *testing.T) clusterInfra {
	t.Helper()
	if onJetStream() {
		// A cluster brings its own JetStream servers: the suite's second
		// pass on JetStream would run the same test again.
		t.Skip("runs once, in the Pebble pass: a cluster test starts its own NATS servers")
	}
	nats, err := natstest.Start()
	if err != nil {
		t.Fatalf("start the NATS cluster: %v", err)
	}
	t.Cleanup(nats.Shutdown)
	etcd := testtools.StartEtcd(t)
	redis := testtools.StartRedis(t)
	master := make([]byte, 32)
	_, _ = rand.Read(master)
	return clusterInfra{natsURLs: nats.URLs, etcd: etcd.Endpoint, redisURL: redis.URL, masterKey: hex.EncodeToString(master),
		name: strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())}
}

// storeFlags name the stream and the master secret (`rtcd init` and
// `rtcd serve`).
func (c clusterInfra) storeFlags(stream string) []string {
	return []string{"--store", "jetstream", "--nats-url", c.natsURLs, "--nats-stream", stream, "--master-key", c.masterKey}
}

// clusterFlags make `rtcd serve` a node of the test's cluster.
func (c clusterInfra) clusterFlags() []string {
	return []string{"--rate-limit-store", "redis", "--redis-url", c.redisURL, "--redis-key-prefix", c.name + ":",
		"--cluster-name", c.name, "--cluster-etcd", c.etcd, "--cluster-listen", "127.0.0.1:0"}
}

// clusterOf starts n rtcd nodes of one cluster on loopback (docs/cluster.md)
// over three NATS servers (one R3 stream), one etcd and one Redis, each
// node with its own data directory and the same master secret, on a store
// `rtcd init` bootstrapped (server.Initialize); extra are `rtcd serve`
// flags of every node.
func clusterOf(t *testing.T, n int, extra ...string) []*env {
	t.Helper()
	_, nodes := clusterWithInfra(t, n, extra...)
	return nodes
}

// clusterWithInfra is clusterOf, with what the cluster runs on.
func clusterWithInfra(t *testing.T, n int, extra ...string) (clusterInfra, []*env) {
	t.Helper()
	infra := startClusterInfra(t)
	flags := append(append(infra.storeFlags("CLUSTER"), infra.clusterFlags()...), extra...)
	// A cluster node does not bootstrap: `rtcd init` does, once.
	initDir := t.TempDir()
	cfg, err := config.Parse("test", append([]string{"--data-dir", initDir}, flags...), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	res, err := server.Initialize(cfg, clock.NewFake(testEpoch))
	if err != nil {
		t.Fatalf("initialise the stream: %v", err)
	}
	boot := bootstrap{AccountID: res.AccountID, ProjectID: res.ProjectID, APIKeyID: res.APIKeyID, APIKey: res.APIKey, OwnerEmail: res.OwnerEmail}
	nodes := make([]*env, n)
	for i := range nodes {
		// The secret is also written where the billing helpers read it
		// (blSandboxSecret); the server takes --master-key.
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "master.key"), []byte(infra.masterKey+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		nodes[i] = startIn(t, dir, nil, flags...)
		nodes[i].Boot = boot
	}
	var outboxes []string
	for _, node := range nodes {
		outboxes = append(outboxes, filepath.Join(node.dataDir, "outbox"))
	}
	for _, node := range nodes {
		node.outboxes = outboxes // the directory's node sends the mails
		node.eventually(fmt.Sprintf("every node sees %d members", n), func() bool { return node.srv.ClusterMembers() == n })
	}
	return infra, nodes
}

// TestClusterOfThreeNodes: three nodes serve one project as if they were
// one server. Its workspace is placed on one of them, and every request,
// through any node, is decided there: a room made through one node is
// read, joined and deleted through the others; 100 simultaneous connects
// spread over the three nodes admit exactly a room's cap, and exactly the
// project's quota over several rooms; the project's rate limit counts the
// requests of every node; a key revoked through one node is refused
// through another on the very next request.
func TestClusterOfThreeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three rtcd nodes, three NATS servers, etcd and Redis")
	}
	const (
		roomCap      = 7
		projectQuota = 40
		roomCreates  = 6
	)
	nodes := clusterOf(t, 3, fmt.Sprintf("--default-max-active-participants=%d", projectQuota),
		fmt.Sprintf("--default-room-creates-per-minute=%d", roomCreates))
	a, b, c := nodes[0], nodes[1], nodes[2]
	key := a.Boot.APIKey

	// The project's room-create limit counts the creates of every node:
	// the seventh, through any node, is refused.
	var rooms []string
	for i := range roomCreates {
		body := map[string]any{}
		if i == 1 {
			body["max_participants"] = roomCap
		}
		rooms = append(rooms, nodes[i%3].do("POST", "/v1/rooms", key, body).must(t, 201).Str("id"))
	}
	mustRateLimited(t, c.do("POST", "/v1/rooms", key, map[string]any{}), roomCreates, "room_creates_per_minute", -1)

	// A room made through A is read, joined and deleted through B and C.
	room := rooms[0]
	for _, node := range []*env{b, c} {
		if got := node.do("GET", "/v1/rooms/"+room, key, nil).must(t, 200); got.Str("id") != room {
			t.Fatalf("GET through another node: %s", got.Raw)
		}
	}
	_, tok := b.createParticipant(room, nil)
	c.connect(tok).must(t, 200)
	a.connect(tok).must(t, 200) // the same participant again: its reservation, through another node
	if s := c.do("DELETE", "/v1/rooms/"+room, key, nil).must(t, 200).Str("status"); s != "ending" && s != "ended" {
		t.Fatalf("DELETE through C: status %q", s)
	}
	a.eventually("the room deleted through C reads ended through A", func() bool {
		return a.do("GET", "/v1/rooms/"+room, key, nil).Str("status") == "ended"
	})
	held := 0 // the room ended: its participant holds no slot

	// 100 simultaneous connects over three nodes into a room of cap 7.
	_, toks := spreadTokens(nodes, rooms[1], 100)
	admitted := connectSpread(t, nodes, toks, "max_participants", roomCap)
	if admitted != roomCap {
		t.Fatalf("%d of 100 connects admitted into a room of cap %d", admitted, roomCap)
	}
	held += roomCap

	// 100 over three nodes into four rooms of one project with a quota of
	// 40 participants, 7 of them held already.
	toks = nil
	for _, r := range rooms[2:] {
		_, ts := spreadTokens(nodes, r, 25)
		toks = append(toks, ts...)
	}
	admitted = connectSpread(t, nodes, toks, "max_active_participants", projectQuota)
	if admitted != projectQuota-held {
		t.Fatalf("%d of 100 connects admitted into a project with %d of its quota of %d left", admitted, projectQuota-held, projectQuota)
	}

	// Every room is on one node, the workspace's owner; the others hold
	// none, they forwarded.
	var owners int
	for _, node := range nodes {
		if rooms := node.mfValue("rtcd_active_rooms", nil); rooms > 0 {
			owners++
			if active := node.mfValue("rtcd_active_participants", nil); active != projectQuota {
				t.Fatalf("the owner holds %v participants, want %d", active, projectQuota)
			}
		}
	}
	if owners != 1 {
		t.Fatalf("%d nodes hold rooms, want the one owner", owners)
	}

	// A payment made through A, whose provider's callback reaches C, is
	// credited by the wallet's node and read through B.
	before := b.blBalance()
	tp := a.blCreateTopup("25.00", "").must(t, 201)
	cb := a.blSignCallback(a.clock.Now(), tp.Str("authorize_url"), "succeeded")
	c.blDeliver("sandbox", cb).must(t, 200)
	if got := b.blBalance(); blMicros(t, got) != blMicros(t, before)+blMicros(t, "25.00") {
		t.Fatalf("balance after a top-up's callback through another node: %s, was %s", got, before)
	}

	// The operator's `rtcd billing adjust` through any node's private
	// listener adjusts the wallet on its node; a client cannot pass off an
	// API request as a node's internal one.
	before = b.blBalance()
	for _, node := range nodes {
		token, err := server.LoadOrCreateAdminToken(node.dataDir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := server.AdjustBalance(node.srv.MetricsAddr(), token, server.AdjustRequest{
			AccountID: a.Boot.AccountID, Amount: "1.50", Reason: "cluster test", Operator: "e2e"}); err != nil {
			t.Fatalf("billing adjust through %s: %v", node.Metrics, err)
		}
	}
	spoof := c.do("POST", "/admin/billing/adjust", key, map[string]any{"account_id": a.Boot.AccountID, "amount": "100.00", "reason": "spoof"},
		"X-Rtcd-Cluster-Internal: 1")
	spoof.mustErr(t, 404, "invalid_request")
	if got := b.blBalance(); blMicros(t, got) != blMicros(t, before)+blMicros(t, "4.50") {
		t.Fatalf("balance after three adjustments of 1.50 through three nodes: %s, was %s", got, before)
	}

	// A key revoked through A is refused through B on the next request.
	created := a.createKey(key, "rooms:read").must(t, 201)
	secret, id := created.Str("secret"), created.Str("id")
	b.do("GET", "/v1/rooms", secret, nil).must(t, 200)
	a.do("DELETE", "/v1/api-keys/"+id, key, nil).must(t, 200)
	for _, node := range nodes {
		node.do("GET", "/v1/rooms", secret, nil).mustErr(t, 401, "authentication_failed")
	}
}

// spreadTokens creates n participants in room, round robin over nodes.
func spreadTokens(nodes []*env, room string, n int) (ids, toks []string) {
	for i := range n {
		id, tok := nodes[i%len(nodes)].createParticipant(room, nil)
		ids = append(ids, id)
		toks = append(toks, tok)
	}
	return ids, toks
}

// connectSpread connects every token at once, round robin over nodes, and
// returns how many were admitted; every refusal must be the quota named.
func connectSpread(t *testing.T, nodes []*env, toks []string, limitName string, limit int) int {
	t.Helper()
	var admitted atomic.Int64
	rs := nodes[0].parallel(len(toks), func(i int) (*resp, error) { return nodes[i%len(nodes)].connectAsync(toks[i]) })
	for _, r := range rs {
		if r.Status == 200 {
			admitted.Add(1)
			continue
		}
		mustQuota(t, r, limitName, limit)
	}
	return int(admitted.Load())
}

// TestClusterNodeDoesNotBootstrap: a cluster node refuses to start on a
// store nobody initialised (nodes starting together would each bootstrap
// it), naming `rtcd init`.
func TestClusterNodeDoesNotBootstrap(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three NATS servers, etcd and Redis")
	}
	infra := startClusterInfra(t)
	cfg, err := config.Parse("test", append(append([]string{"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
		"--media-listen", "127.0.0.1:0"}, infra.storeFlags("UNINIT")...), infra.clusterFlags()...), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start(cfg, server.Options{Clock: clock.NewFake(testEpoch), Fatal: func(err error) { t.Errorf("fatal: %v", err) }})
	if err == nil {
		srv.Shutdown(context.Background())
		t.Fatal("a cluster node started on a store nobody initialised")
	}
	if !errors.Is(err, server.ErrClusterNeedsInit) || !strings.Contains(err.Error(), "rtcd init") {
		t.Fatalf("start: %v, want ErrClusterNeedsInit", err)
	}
}
