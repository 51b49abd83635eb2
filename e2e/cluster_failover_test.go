package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
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
	bin := binBuild(t)
	nats, err := natstest.Start()
	if err != nil {
		t.Fatalf("start the NATS cluster: %v", err)
	}
	defer nats.Shutdown()
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
	for range 3 {
		nodes = append(nodes, binServe(t, bin, t.TempDir(), boot.APIKey, flags...))
	}

	var loads []*binLoad
	for i, p := range nodes {
		loads = append(loads, binStartLoad(p, boot.APIKey, "n"+string(rune('a'+i)), binClient(true)))
	}
	loads[0].runFor()
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
	client := &http.Client{Timeout: 5 * time.Second}
	var back time.Duration
	for {
		r, err := binCall(client, "POST", survivor.Base+"/v1/rooms", boot.APIKey, map[string]any{"name": "after-the-kill"})
		if err == nil && r.status == 201 {
			back = time.Since(killed)
			break
		}
		if time.Since(killed) > 2*failoverBoundSeconds*time.Second {
			t.Fatalf("the workspace did not serve again within %d s: %v %d %s", 2*failoverBoundSeconds, err, r.status, r.raw)
		}
		time.Sleep(50 * time.Millisecond) // polling a failover in other processes
	}
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
