package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// failoverBoundSeconds is the bound on loopback: a killed owner's
// workspaces serve again on another node within it.
const failoverBoundSeconds = 10

// TestClusterKill9OfTheOwnerUnderLoad: three real rtcd processes of one
// cluster take room, participant and connect load through every node, and
// rooms are deleted through every node with a webhook endpoint subscribed
// to room.ended; the node that owns the project (the workspace) is killed
// with SIGKILL. Its workspace serves again through the survivors within
// 10 s, every acknowledged room and participant is there, the ledger sums
// to the balance, and every acknowledged deletion's room.ended is
// delivered.
func TestClusterKill9OfTheOwnerUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three rtcd processes, three NATS servers, etcd and Redis")
	}
	rcv := newWHReceiver(t) // real clock: the binaries sign with time.Now
	rcv.on("/hook", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) })
	boot, nodes := binCluster(t, 3, "--webhook-allow-private", "--webhook-extra-ca-file="+rcv.caFile,
		"--webhook-retry-schedule="+strings.TrimSuffix(strings.Repeat("1,", 20), ","))
	ep, err := binCall(binClient(true), "POST", nodes[0].Base+"/v1/webhook-endpoints", boot.APIKey,
		map[string]any{"url": rcv.url("/hook"), "events": []string{"room.ended"}})
	if err != nil || ep.status != 201 {
		t.Fatalf("create endpoint: %v %d %s", err, ep.status, ep.raw)
	}
	ender := startRoomEnder(nodes, boot.APIKey)
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
	ender.killed(owner) // before the kill: its requests in flight fail
	killed := time.Now()
	nodes[owner].kill()
	survivor := nodes[(owner+1)%3]
	back := binServedAgain(t, survivor, boot.APIKey, killed, 2*failoverBoundSeconds*time.Second)
	ender.awaitMore(t, 5) // and some deleted through the new owner
	ended := ender.finish(t)
	acks := &binAcks{}
	for _, l := range loads {
		acks.merge(l.finish())
	}
	if back > failoverBoundSeconds*time.Second {
		t.Errorf("the workspace served again %v after the kill, want within %d s", back.Round(time.Millisecond), failoverBoundSeconds)
	}
	binVerifyAcks(t, survivor, boot.APIKey, acks, true)
	view := &env{t: t, Base: survivor.Base, client: &http.Client{Timeout: 30 * time.Second}, Boot: boot}
	view.blCheckLedgerSum()
	delivered := awaitRoomEnded(t, rcv, ended, 30*time.Second)
	t.Logf("owner (node %d) killed; served again through node %d after %v; %d rooms, %d participants, %d connects acknowledged before; %d room.ended events delivered in %v",
		owner, (owner+1)%3, back.Round(time.Millisecond), len(acks.rooms), len(acks.participants), len(acks.connected),
		len(ended), delivered.Round(time.Millisecond))
}

// roomEnder creates and deletes rooms through every node in turn until
// finished, keeping the rooms whose deletion was acknowledged: each owes
// a room.ended event.
type roomEnder struct {
	nodes  []*binProc
	apiKey string
	gone   atomic.Int64 // 1 + the index of the killed node; 0 while all run
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	ended  []string
	errs   []string
}

func startRoomEnder(nodes []*binProc, apiKey string) *roomEnder {
	e := &roomEnder{nodes: nodes, apiKey: apiKey, stop: make(chan struct{}), done: make(chan struct{})}
	go e.run()
	return e
}

func (e *roomEnder) run() {
	defer close(e.done)
	c := binClient(true)
	for i := 0; ; i++ {
		select {
		case <-e.stop:
			return
		default:
		}
		n := i % len(e.nodes)
		if int(e.gone.Load())-1 == n {
			continue
		}
		r, err := binCall(c, "POST", e.nodes[n].Base+"/v1/rooms", e.apiKey, map[string]any{})
		if err != nil || r.status != 201 {
			e.refused(err, r)
			time.Sleep(20 * time.Millisecond) // the workspace is moving: try again shortly
			continue
		}
		d, err := binCall(c, "DELETE", e.nodes[n].Base+"/v1/rooms/"+r.str("id"), e.apiKey, nil)
		if err != nil || d.status != 200 {
			e.refused(err, d)
			continue
		}
		e.mu.Lock()
		e.ended = append(e.ended, r.str("id"))
		e.mu.Unlock()
	}
}

// refused notes a failed request: while a node is being killed, the
// others answer 503 (or the killed one does not answer) until the
// workspace moved; anything else is an error.
func (e *roomEnder) refused(err error, r binResult) {
	if e.gone.Load() != 0 && (err != nil || r.status == 503) {
		return
	}
	e.mu.Lock()
	e.errs = append(e.errs, fmt.Sprintf("%v %d %s", err, r.status, r.raw))
	e.mu.Unlock()
}

// awaitMore waits until n more deletions are acknowledged.
func (e *roomEnder) awaitMore(t *testing.T, n int) {
	t.Helper()
	count := func() int { e.mu.Lock(); defer e.mu.Unlock(); return len(e.ended) }
	want := count() + n
	deadline := time.Now().Add(10 * time.Second)
	for count() < want {
		if time.Now().After(deadline) {
			t.Fatalf("the room ender got no %d more deletions in 10 s", n)
		}
		time.Sleep(20 * time.Millisecond) // polling other processes
	}
}

// killed tells the ender that node i is being killed.
func (e *roomEnder) killed(i int) { e.gone.Store(int64(i) + 1) }

// finish stops the ender and returns the rooms whose deletion was
// acknowledged.
func (e *roomEnder) finish(t *testing.T) []string {
	t.Helper()
	close(e.stop)
	<-e.done
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.errs) > 0 {
		t.Fatalf("room create/delete failed before the kill: %v", e.errs)
	}
	return e.ended
}

// awaitRoomEnded waits until the receiver has acknowledged a room.ended
// for every room and returns how long that took.
func awaitRoomEnded(t *testing.T, rcv *whReceiver, rooms []string, within time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	for {
		delivered := map[string]bool{}
		for _, q := range rcv.requests("/hook") {
			var ev whEvent
			if q.Status == 200 && json.Unmarshal(q.Body, &ev) == nil && ev.Type == "room.ended" {
				room, _ := ev.Data["room_id"].(string)
				delivered[room] = true
			}
		}
		missing := 0
		for _, r := range rooms {
			if !delivered[r] {
				missing++
			}
		}
		if missing == 0 {
			return time.Since(began)
		}
		if time.Since(began) > within {
			t.Fatalf("%d of %d acknowledged deletions have no room.ended delivered after %v", missing, len(rooms), within)
		}
		time.Sleep(50 * time.Millisecond) // polling other processes
	}
}

// binCluster builds rtcd and runs n processes of one cluster on loopback
// over three NATS servers (an R3 stream), etcd and Redis, with the same
// master secret and generous limits, and extra flags; `rtcd init`
// bootstraps the stream first.
func binCluster(t *testing.T, n int, extra ...string) (bootstrap, []*binProc) {
	t.Helper()
	bin := binBuild(t)
	infra := startClusterInfra(t)
	storeFlags := infra.storeFlags("FAILOVER")
	boot := binInit(t, bin, t.TempDir(), storeFlags...)
	flags := append(append(append(storeFlags, binGenerousLimits...), infra.clusterFlags()...), extra...)
	var nodes []*binProc
	for range n {
		nodes = append(nodes, binServe(t, bin, t.TempDir(), boot.APIKey, flags...))
	}
	return boot, nodes
}

// binOwner is the index of the one node holding the workspace's rooms.
func binOwner(t *testing.T, nodes []*binProc) int {
	t.Helper()
	return theOneNode(t, len(nodes), func(i int) bool { return binGauge(t, nodes[i], "rtcd_active_rooms") > 0 },
		"held rooms of the one workspace")
}

// theOneNode is the index of the one node of n for which does is true;
// the test fails when two are or none is. what says what they did.
func theOneNode(t *testing.T, n int, does func(i int) bool, what string) int {
	t.Helper()
	found := -1
	for i := 0; i < n; i++ {
		if !does(i) {
			continue
		}
		if found >= 0 {
			t.Fatalf("nodes %d and %d both %s", found, i, what)
		}
		found = i
	}
	if found < 0 {
		t.Fatalf("no node %s", what)
	}
	return found
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

	binVerifyAcks(t, survivor, boot.APIKey, acks, true)
	view := &env{t: t, Base: survivor.Base, client: &http.Client{Timeout: 30 * time.Second}, Boot: boot}
	view.blCheckLedgerSum()
	t.Logf("owner (node %d) paused; the workspace served through node %d %v after the pause; resumed, it rejoined in %v, %v of its writes fenced; %d rooms, %d participants acknowledged",
		owner, (owner+1)%3, moved.Round(time.Millisecond), rejoined.Round(time.Millisecond),
		binGauge(t, paused, "rtcd_cluster_fenced_batches_total"), len(acks.rooms), len(acks.participants))
}
