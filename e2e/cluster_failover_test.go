package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rtcd/internal/natstest"
	"rtcd/internal/testtools"
)

// failoverBoundSeconds is the bound on loopback: a killed owner's
// workspaces serve again on another node within it.
const failoverBoundSeconds = 10

// TestClusterKill9OfTheOwnerUnderLoad: three real rtcd processes of one
// cluster take room, participant and connect load through every node; the
// node that owns the project (the workspace) is killed with SIGKILL. Its
// workspace serves again through the survivors within 10 s, every
// acknowledged room and participant is there, and the ledger sums to the
// balance.
func TestClusterKill9OfTheOwnerUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three rtcd processes, three NATS servers, etcd and Redis")
	}
	boot, nodes := binCluster(t, 3)
	var loads []*binLoad
	for i, p := range nodes {
		loads = append(loads, binStartLoad(p, boot.APIKey, "n"+string(rune('a'+i)), binClient(true)))
	}
	loads[0].runFor()
	owner := binOwner(t, nodes)
	for i, l := range loads {
		if i == owner {
			l.stopping.Store(true)
		} else {
			l.storeGone.Store(true) // 503s while the workspace moves
		}
	}
	killed := time.Now()
	nodes[owner].kill()
	survivor := nodes[(owner+1)%3]
	back := binServedAgain(t, survivor, boot.APIKey, killed, 2*failoverBoundSeconds*time.Second)
	acks := &binAcks{}
	for _, l := range loads {
		acks.merge(l.finish())
	}
	if back > failoverBoundSeconds*time.Second {
		t.Errorf("the workspace served again %v after the kill, want within %d s", back.Round(time.Millisecond), failoverBoundSeconds)
	}
	binVerify(t, survivor, boot.APIKey, acks)
	view := &env{t: t, Base: survivor.Base, client: &http.Client{Timeout: 30 * time.Second}, Boot: boot}
	view.blCheckLedgerSum()
	t.Logf("owner (node %d) killed; served again through node %d after %v; %d rooms, %d participants, %d connects acknowledged before",
		owner, (owner+1)%3, back.Round(time.Millisecond), len(acks.rooms), len(acks.participants), len(acks.connected))
}

// binCluster builds rtcd and runs n processes of one cluster on loopback
// over three NATS servers (an R3 stream), etcd and Redis, with the same
// master secret and generous limits; `rtcd init` bootstraps the stream
// first.
func binCluster(t *testing.T, n int) (bootstrap, []*binProc) {
	t.Helper()
	bin := binBuild(t)
	nats, err := natstest.Start()
	if err != nil {
		t.Fatalf("start the NATS cluster: %v", err)
	}
	t.Cleanup(nats.Shutdown)
	etcd := testtools.StartEtcd(t)
	redis := testtools.StartRedis(t)
	master := make([]byte, 32)
	_, _ = rand.Read(master)
	name := strings.ReplaceAll(t.Name(), "/", "_")
	storeFlags := []string{"--store", "jetstream", "--nats-url", nats.URLs, "--nats-stream", "FAILOVER",
		"--master-key", hex.EncodeToString(master)}
	boot := binInit(t, bin, t.TempDir(), storeFlags...)
	flags := append(append(append([]string{}, storeFlags...), binGenerousLimits...),
		"--rate-limit-store", "redis", "--redis-url", redis.URL, "--redis-key-prefix", name+":",
		"--cluster-name", name, "--cluster-etcd", etcd.Endpoint, "--cluster-listen", "127.0.0.1:0")
	var nodes []*binProc
	for range n {
		nodes = append(nodes, binServe(t, bin, t.TempDir(), boot.APIKey, flags...))
	}
	return boot, nodes
}

// binOwner is the index of the one node holding the workspace's rooms.
func binOwner(t *testing.T, nodes []*binProc) int {
	t.Helper()
	owner := -1
	for i, p := range nodes {
		if binGauge(t, p, "rtcd_active_rooms") > 0 {
			if owner >= 0 {
				t.Fatalf("nodes %d and %d both hold rooms of the one workspace", owner, i)
			}
			owner = i
		}
	}
	if owner < 0 {
		t.Fatal("no node holds the workspace's rooms")
	}
	return owner
}

// binServedAgain polls POST /v1/rooms through p until the workspace
// serves again, and returns how long after since that was; past limit the
// test fails.
func binServedAgain(t *testing.T, p *binProc, apiKey string, since time.Time, limit time.Duration) time.Duration {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	for {
		r, err := binCall(client, "POST", p.Base+"/v1/rooms", apiKey, map[string]any{"name": "served-again"})
		if err == nil && r.status == 201 {
			return time.Since(since)
		}
		if time.Since(since) > limit {
			t.Fatalf("the workspace did not serve again within %v: %v %d %s", limit, err, r.status, r.raw)
		}
		time.Sleep(50 * time.Millisecond) // polling a failover in other processes
	}
}

// binGauge reads an unlabelled gauge from a process's /metrics.
func binGauge(t *testing.T, p *binProc, name string) float64 {
	t.Helper()
	res, err := http.Get(p.Metrics + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", p.Metrics, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %q", name, line)
			}
			return f
		}
	}
	t.Fatalf("%s has no %s", p.Metrics, name)
	return 0
}

// TestClusterPausedOwnerIsFencedAndRejoins: the node owning a busy
// workspace is paused (SIGSTOP) past its membership lease. The others
// take the workspace over; resumed (SIGCONT), the paused node stops
// serving as its owner before it hears from etcd, whatever it still had
// in flight is refused by the store (fenced, counted, never acknowledged)
// instead of stopping the process, and it registers again and rejoins:
// every node sees three members, and requests through it reach the
// workspace's new owner. Nothing acknowledged is lost and the ledger sums
// to the balance.
func TestClusterPausedOwnerIsFencedAndRejoins(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three rtcd processes, three NATS servers, etcd and Redis")
	}
	boot, nodes := binCluster(t, 3)
	var loads []*binLoad
	for i, p := range nodes {
		loads = append(loads, binStartLoad(p, boot.APIKey, "p"+string(rune('a'+i)), binClient(true)))
	}
	loads[0].runFor()
	owner := binOwner(t, nodes)
	for _, l := range loads {
		// Requests through the paused node time out or are refused, and
		// the others get 503s while the workspace moves.
		l.stopping.Store(true)
		l.storeGone.Store(true)
	}
	paused := nodes[owner]
	if err := paused.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now()
	survivor := nodes[(owner+1)%3]
	moved := binServedAgain(t, survivor, boot.APIKey, pausedAt, 2*failoverBoundSeconds*time.Second)
	if err := paused.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	acks := &binAcks{}
	for _, l := range loads {
		acks.merge(l.finish())
	}

	// It rejoins: every node sees three members again.
	deadline := time.Now().Add(30 * time.Second)
	for {
		all := true
		for _, p := range nodes {
			all = all && binGauge(t, p, "rtcd_cluster_members") == 3
		}
		if all {
			break
		}
		select {
		case <-paused.exited:
			t.Fatalf("the resumed node exited: %v\n%s", paused.waitErr, paused.logTail())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resumed node did not rejoin within 30 s\n%s", paused.logTail())
		}
		time.Sleep(50 * time.Millisecond) // polling other processes
	}
	rejoined := time.Since(resumed)
	// Through it, requests reach the workspace wherever it is now.
	binServedAgain(t, paused, boot.APIKey, time.Now(), failoverBoundSeconds*time.Second)

	binVerify(t, survivor, boot.APIKey, acks)
	view := &env{t: t, Base: survivor.Base, client: &http.Client{Timeout: 30 * time.Second}, Boot: boot}
	view.blCheckLedgerSum()
	t.Logf("owner (node %d) paused; the workspace served through node %d %v after the pause; resumed, it rejoined in %v, %v of its writes fenced; %d rooms, %d participants acknowledged",
		owner, (owner+1)%3, moved.Round(time.Millisecond), rejoined.Round(time.Millisecond),
		binGauge(t, paused, "rtcd_cluster_fenced_batches_total"), len(acks.rooms), len(acks.participants))
}
