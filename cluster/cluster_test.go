package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"rtcd/internal/testtools"
)

// Bounds of the tests.
const (
	// membersTimeout bounds every node seeing every other after Join.
	membersTimeout = 10 * time.Second
	// failoverTimeout is the bound on a dead owner's projects
	// being served by the others, on loopback.
	failoverTimeout = 10 * time.Second
	// parkedTimeout bounds goroutines reaching the wait a test expects.
	parkedTimeout = 10 * time.Second
	// childEnv makes the test binary a cluster member of its own (a node
	// per process, see Join, and one the test can kill -9); its value is
	// the etcd endpoint.
	childEnv = "RTCD_CLUSTER_TEST_CHILD"
	// testRequest is what every test forwards.
	testRequest = "GET /v1/rooms"
)

// TestMain runs the test binary as a member process when childEnv is set.
func TestMain(m *testing.M) {
	if endpoint := os.Getenv(childEnv); endpoint != "" {
		runChild(endpoint)
		return
	}
	os.Exit(m.Run())
}

// placements counts, per project, how many times it was placed on this
// node; Serve reports the count with each answer.
type placements struct {
	mu     sync.Mutex
	placed map[string]int
	moved  map[string]int
}

func newPlacements() *placements {
	return &placements{placed: map[string]int{}, moved: map[string]int{}}
}

func (p *placements) config(name, etcdEndpoint string, node func() *Node) Config {
	return Config{Name: name, EtcdEndpoints: []string{etcdEndpoint}, Listen: "127.0.0.1:0", Secret: "test-secret",
		// The answer names who served it, how often the project was
		// placed here and under which registration: "served-by <member>
		// <project> <placed> <generation> <request>".
		Serve: func(projectID string, request []byte) []byte {
			p.mu.Lock()
			placed := p.placed[projectID]
			p.mu.Unlock()
			n := node()
			return []byte(fmt.Sprintf("served-by %s %s %d %d %s", n.ID(), projectID, placed, n.Generation(), request))
		},
		OnPlaced: func(projectID string) error { p.mu.Lock(); p.placed[projectID]++; p.mu.Unlock(); return nil },
		OnMoved:  func(projectID string) { p.mu.Lock(); p.moved[projectID]++; p.mu.Unlock() },
	}
}

// runChild joins as a member and serves a small HTTP control API on
// loopback, printing "<member id> <control address>": GET /forward?id=P
// forwards testRequest for P, POST /leave leaves the cluster.
func runChild(etcdEndpoint string) {
	var n *Node
	p := newPlacements()
	n, err := Join(p.config("test", etcdEndpoint, func() *Node { return n }))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /forward", func(w http.ResponseWriter, r *http.Request) {
		res, err := n.Forward(r.URL.Query().Get("id"), []byte(testRequest))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		_, _ = w.Write(res)
	})
	mux.HandleFunc("POST /leave", func(w http.ResponseWriter, r *http.Request) { n.Leave() })
	fmt.Println(n.ID(), ln.Addr().String())
	_ = http.Serve(ln, mux)
}

// member is a node the test forwards through: in this process, or a child.
type member interface {
	memberID() string
	forward(projectID string) (string, error)
}

type localMember struct {
	*Node
	*placements
}

func (l localMember) memberID() string { return l.ID() }
func (l localMember) forward(id string) (string, error) {
	res, err := l.Forward(id, []byte(testRequest))
	return string(res), err
}

type childMember struct {
	id, control string
	cmd         *exec.Cmd
}

func (c *childMember) memberID() string { return c.id }
func (c *childMember) forward(id string) (string, error) {
	res, err := http.Get("http://" + c.control + "/forward?id=" + url.QueryEscape(id))
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("child: %s: %s", res.Status, body)
	}
	return string(body), err
}

func joinLocal(t *testing.T, etcdEndpoint string) localMember {
	t.Helper()
	var n *Node
	p := newPlacements()
	n, err := Join(p.config("test", etcdEndpoint, func() *Node { return n }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Leave)
	return localMember{Node: n, placements: p}
}

func startChild(t *testing.T, etcdEndpoint string) *childMember {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+etcdEndpoint)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	fields := strings.Fields(line)
	if err != nil || len(fields) != 2 {
		t.Fatalf("child said %q: %v", line, err)
	}
	return &childMember{id: fields[0], control: fields[1], cmd: cmd}
}

// awaitMembers waits until n sees want members.
func awaitMembers(t *testing.T, n *Node, want int) {
	t.Helper()
	deadline := time.Now().Add(membersTimeout)
	for len(n.Members()) != want {
		if time.Now().After(deadline) {
			t.Fatalf("node %s sees %d members, want %d", n.ID(), len(n.Members()), want)
		}
		time.Sleep(20 * time.Millisecond) // polling etcd's watch reaching the member list
	}
}

// served is one parsed answer.
type served struct {
	by         string
	placed     int
	generation int
}

// mustForward forwards through m and parses the answer.
func mustForward(t *testing.T, m member, id string) served {
	t.Helper()
	res, err := m.forward(id)
	if err != nil {
		t.Fatalf("forward %s through %s: %v", id, m.memberID(), err)
	}
	return parseServed(t, id, res)
}

func parseServed(t *testing.T, id, res string) served {
	t.Helper()
	fields := strings.SplitN(res, " ", 6)
	if len(fields) != 6 || fields[0] != "served-by" || fields[2] != id || fields[5] != testRequest {
		t.Fatalf("forward %s: answer %q", id, res)
	}
	placed, err1 := strconv.Atoi(fields[3])
	generation, err2 := strconv.Atoi(fields[4])
	if err1 != nil || err2 != nil {
		t.Fatalf("answer %q", res)
	}
	return served{by: fields[1], placed: placed, generation: generation}
}

// projectsOwnedBy finds n projects that owner owns, forwarding through via.
func projectsOwnedBy(t *testing.T, via member, owner string, n int) []string {
	t.Helper()
	var owned []string
	for i := 0; len(owned) < n; i++ {
		if i > 300 {
			t.Fatalf("%s owns %d of 300 projects, want %d", owner, len(owned), n)
		}
		id := fmt.Sprintf("proj_%03d", i)
		if mustForward(t, via, id).by == owner {
			owned = append(owned, id)
		}
	}
	return owned
}

// Every node forwards a project's requests to the same owner, where it was
// placed once, and the owners spread over the members. When an owner
// leaves, its projects are served by the others.
func TestPlacementIsOneOwnerPerProject(t *testing.T) {
	etcd := testtools.StartEtcd(t)
	local := joinLocal(t, etcd.Endpoint)
	b, c := startChild(t, etcd.Endpoint), startChild(t, etcd.Endpoint)
	awaitMembers(t, local.Node, 3)
	members := []member{local, b, c}

	owners := map[string]string{} // project -> member id
	perNode := map[string]int{}
	for i := 0; i < 30; i++ {
		id := fmt.Sprintf("proj_%02d", i)
		for _, m := range members {
			got := mustForward(t, m, id)
			if prev, ok := owners[id]; ok && prev != got.by {
				t.Fatalf("%s served by %s and by %s", id, prev, got.by)
			}
			if got.placed != 1 {
				t.Fatalf("%s placed %d times on its owner, want once", id, got.placed)
			}
			owners[id] = got.by
		}
		perNode[owners[id]]++
	}
	if len(perNode) < 2 {
		t.Fatalf("30 projects all on one node: %v", perNode)
	}

	// Child b leaves: its projects are served by the other two.
	res, err := http.Post("http://"+b.control+"/leave", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	awaitMembers(t, local.Node, 2)
	for id, o := range owners {
		if o != b.id {
			continue
		}
		x, y := mustForward(t, local, id), mustForward(t, c, id)
		if x.by != y.by || x.by == b.id || x.placed != 1 {
			t.Fatalf("%s after its owner left: served by %+v and %+v", id, x, y)
		}
	}

	// The local node leaves: OnMoved runs for each project it owned.
	local.Leave()
	local.placements.mu.Lock()
	defer local.placements.mu.Unlock()
	for id, n := range local.placed {
		if local.moved[id] != n {
			t.Fatalf("%s placed %d times here, moved %d times", id, n, local.moved[id])
		}
	}
}

// A request or response above MaxForwardedBytes is refused, not sent.
func TestForwardIsBounded(t *testing.T) {
	etcd := testtools.StartEtcd(t)
	n, err := Join(Config{Name: "bounded", EtcdEndpoints: []string{etcd.Endpoint}, Listen: "127.0.0.1:0", Secret: "s",
		Serve: func(_ string, request []byte) []byte {
			if string(request) == "big answer" {
				return make([]byte, MaxForwardedBytes+1)
			}
			return []byte("ok")
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Leave()
	if _, err := n.Forward("p", make([]byte, MaxForwardedBytes+1)); err != ErrForwardTooLarge {
		t.Fatalf("large request: %v, want ErrForwardTooLarge", err)
	}
	if _, err := n.Forward("p", []byte("big answer")); err != ErrForwardTooLarge {
		t.Fatalf("large response: %v, want ErrForwardTooLarge", err)
	}
	if res, err := n.Forward("p", []byte("small")); err != nil || string(res) != "ok" {
		t.Fatalf("small: %q, %v", res, err)
	}
}

// Join refuses what it cannot run with: no etcd, a bad address, a missing
// name or secret.
func TestJoinFailsCleanly(t *testing.T) {
	serve := func(string, []byte) []byte { return nil }
	for _, cfg := range []Config{
		{Name: "x", EtcdEndpoints: []string{"127.0.0.1:1"}, Listen: "127.0.0.1:0", Secret: "s", Serve: serve},
		{Name: "x", EtcdEndpoints: []string{"127.0.0.1:1"}, Listen: "no-port", Secret: "s", Serve: serve},
		{Name: "", EtcdEndpoints: []string{"127.0.0.1:1"}, Listen: "127.0.0.1:0", Secret: "s", Serve: serve},
		{Name: "x", EtcdEndpoints: []string{"127.0.0.1:1"}, Listen: "127.0.0.1:0", Serve: serve},
		{Name: "a/b", EtcdEndpoints: []string{"127.0.0.1:1"}, Listen: "127.0.0.1:0", Secret: "s", Serve: serve},
	} {
		if n, err := Join(cfg); err == nil {
			n.Leave()
			t.Fatalf("%+v: joined", cfg)
		}
	}
}

// kill -9 of a member process: its lease runs out in etcd, and its
// projects are served by the others within failoverTimeout.
func TestKill9OfAnOwnerMovesItsProjects(t *testing.T) {
	etcd := testtools.StartEtcd(t)
	local := joinLocal(t, etcd.Endpoint)
	b, c := startChild(t, etcd.Endpoint), startChild(t, etcd.Endpoint)
	awaitMembers(t, local.Node, 3)

	owned := projectsOwnedBy(t, local, b.id, 3)

	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for _, id := range owned {
		for {
			res, err := c.forward(id)
			if err == nil && parseServed(t, id, res).by != b.id {
				break
			}
			if time.Since(killed) > failoverTimeout {
				t.Fatalf("%s not served by a survivor %s after the kill (last: %q, %v)", id, failoverTimeout, res, err)
			}
			time.Sleep(50 * time.Millisecond) // polling the lease's expiry in etcd
		}
	}
	t.Logf("the dead member's projects were served by survivors %s after kill -9", time.Since(killed).Round(time.Millisecond))
}

// A member paused (SIGSTOP) past its lease is dropped by the others, who
// serve its projects; resumed, it refuses to serve them itself (its lease
// ran out by its own clock), forwards them to their new owner, and
// registers again as a member.
func TestPausedMemberIsFencedAndRejoins(t *testing.T) {
	etcd := testtools.StartEtcd(t)
	local := joinLocal(t, etcd.Endpoint)
	b, c := startChild(t, etcd.Endpoint), startChild(t, etcd.Endpoint)
	awaitMembers(t, local.Node, 3)
	owned := projectsOwnedBy(t, local, b.id, 3)

	if err := b.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.cmd.Process.Signal(syscall.SIGCONT) })
	awaitMembers(t, local.Node, 2)
	newOwner := map[string]string{}
	for _, id := range owned {
		s := mustForward(t, c, id)
		if s.by == b.id {
			t.Fatalf("%s still served by the paused member", id)
		}
		newOwner[id] = s.by
	}

	if err := b.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Through b, from the moment it resumes until the others see it
	// again: b serves nothing under its first registration, whose lease
	// ran out while it was paused.
	deadline := time.Now().Add(membersTimeout)
	for len(local.Members()) != 3 {
		for _, id := range owned {
			res, err := b.forward(id)
			if err != nil {
				continue // b refused: not a member now, or not the owner
			}
			if s := parseServed(t, id, res); s.by == b.id && s.generation < 2 {
				t.Fatalf("%s served by the resumed member under its expired lease", id)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resumed member did not rejoin: %d members", len(local.Members()))
		}
		time.Sleep(20 * time.Millisecond) // polling the rejoin in etcd
	}
	// b rejoined under a new lease with the same id: rendezvous gives it
	// its projects again, placed anew.
	for _, id := range owned {
		if s := mustForward(t, c, id); s.by != b.id || s.placed != 2 || s.generation != 2 {
			t.Fatalf("%s after b rejoined: %+v, want served by b, placed twice, second registration", id, s)
		}
	}
}

// unjoinedNode is a Node with a member list and a lease but no etcd or
// listener, for the placement rules alone.
func unjoinedNode(self string, members ...string) *Node {
	n := &Node{self: Member{ID: self}, active: map[string]bool{}, placing: map[string]chan struct{}{},
		moving: map[string]chan struct{}{}, inflight: map[string]int{}, leaseValidUntil: time.Now().Add(time.Hour)}
	n.drained = sync.NewCond(&n.mu)
	var ms []Member
	for _, id := range members {
		ms = append(ms, Member{ID: id})
	}
	n.setMembers(ms, 1)
	return n
}

// movedWhenBJoins is a project that "a" owns among {a} and "b" owns among
// {a, b}.
func movedWhenBJoins() string {
	for i := 0; ; i++ {
		p := fmt.Sprintf("proj_%d", i)
		if o, _ := ownerOf([]Member{{ID: "a"}, {ID: "b"}}, p); o.ID == "b" {
			return p
		}
	}
}

// A project's first requests, arriving together, place it once.
func TestPlaceCallsOnPlacedOnce(t *testing.T) {
	n := unjoinedNode("a", "a")
	var placed atomic.Int64
	release := make(chan struct{})
	n.cfg.OnPlaced = func(string) error { placed.Add(1); <-release; return nil }
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := n.place("p", true)
			if err == nil {
				n.served("p")
			}
			errs <- err
		}()
	}
	// The other seven wait for the first's OnPlaced, parked in place.
	testtools.AwaitParked(t, parkedTimeout, 7, "chan receive", "rtcd/cluster.(*Node).place")
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if placed.Load() != 1 || !n.active["p"] {
		t.Fatalf("placed %d times, active %v", placed.Load(), n.active["p"])
	}
}

// The members change while a project is being placed, so that another
// node owns it: it is not made active, and OnMoved follows its OnPlaced.
func TestPlaceCaughtByAMoveIsUndone(t *testing.T) {
	id := movedWhenBJoins()
	n := unjoinedNode("a", "a")
	var events []string
	n.cfg.OnPlaced = func(p string) error {
		events = append(events, "placed "+p)
		n.setMembers([]Member{{ID: "a"}, {ID: "b"}}, 2) // b joins meanwhile
		return nil
	}
	n.cfg.OnMoved = func(p string) { events = append(events, "moved "+p) }
	if err := n.place(id, true); err != ErrNotOwner {
		t.Fatalf("place: %v, want ErrNotOwner", err)
	}
	if want := []string{"placed " + id, "moved " + id}; !slices.Equal(events, want) || n.active[id] {
		t.Fatalf("events %v (active %v), want %v", events, n.active[id], want)
	}
	// The lease lost while placing: the same.
	events = nil
	m := unjoinedNode("a", "a")
	m.cfg.OnPlaced = func(p string) error { events = append(events, "placed "+p); m.dropOwnership(); return nil }
	m.cfg.OnMoved = n.cfg.OnMoved
	if err := m.place("q", true); err != ErrNotMember {
		t.Fatalf("place: %v, want ErrNotMember", err)
	}
	if want := []string{"placed q", "moved q"}; !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}
}

// A project moved away and back while its OnMoved still runs is placed
// again only after that OnMoved returns: OnPlaced and OnMoved alternate.
func TestPlaceWaitsForAMoveInProgress(t *testing.T) {
	id := movedWhenBJoins()
	n := unjoinedNode("a", "a")
	var mu sync.Mutex
	var events []string
	note := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
	release := make(chan struct{})
	n.cfg.OnPlaced = func(p string) error { note("placed"); return nil }
	n.cfg.OnMoved = func(p string) { note("moving"); <-release; note("moved") }
	if err := n.place(id, true); err != nil {
		t.Fatal(err)
	}
	n.served(id)
	n.setMembers([]Member{{ID: "a"}, {ID: "b"}}, 2) // b joins: id moves, OnMoved blocks
	deadline := time.Now().Add(parkedTimeout)
	for {
		mu.Lock()
		started := len(events) == 2
		mu.Unlock()
		if started {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("OnMoved did not start")
		}
		time.Sleep(time.Millisecond) // polling the goroutine
	}
	n.setMembers([]Member{{ID: "a"}}, 3) // b leaves: id is a's again
	// A nested request (RouteNested: made while another key's request is
	// in flight here) does not wait for the move: it fails at once.
	if err := n.place(id, false); !errors.Is(err, ErrNotPlaced) {
		t.Fatalf("a nested request during a move: %v, want ErrNotPlaced at once", err)
	}
	placed := make(chan error, 1)
	go func() {
		err := n.place(id, true)
		if err == nil {
			n.served(id)
		}
		placed <- err
	}()
	testtools.AwaitParked(t, parkedTimeout, 1, "chan receive", "rtcd/cluster.(*Node).place")
	close(release)
	if err := <-placed; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"placed", "moving", "moved", "placed"}; !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}
}

// A move waits for the requests being served for its project: OnMoved
// runs after the last of them returns, never beside one.
func TestMoveWaitsForRequestsInFlight(t *testing.T) {
	id := movedWhenBJoins()
	n := unjoinedNode("a", "a")
	moved := make(chan struct{})
	n.cfg.OnMoved = func(string) { close(moved) }
	if err := n.place(id, true); err != nil { // a request in flight
		t.Fatal(err)
	}
	n.setMembers([]Member{{ID: "a"}, {ID: "b"}}, 2) // b joins: id moves
	// Parked in sync.Cond.Wait, whose first frame outside the runtime is
	// the runtime's notify list, called from finishMoves.
	testtools.AwaitParked(t, parkedTimeout, 1, "sync.Cond.Wait", "sync.runtime_notifyListWait", "rtcd/cluster.(*Node).finishMoves")
	select {
	case <-moved:
		t.Fatal("OnMoved ran beside a request of its project")
	default:
	}
	n.served(id)
	select {
	case <-moved:
	case <-time.After(10 * time.Second):
		t.Fatal("OnMoved did not run once the request returned")
	}
	n.movers.Wait()
}

// A project whose OnPlaced fails is not made active: the request gets
// ErrNotPlaced, OnMoved follows, and the next request places it again.
func TestFailedPlacementIsTriedAgain(t *testing.T) {
	n := unjoinedNode("a", "a")
	var events []string
	fail := true
	n.cfg.OnPlaced = func(p string) error {
		events = append(events, "placed "+p)
		if fail {
			return errors.New("the store is away")
		}
		return nil
	}
	n.cfg.OnMoved = func(p string) { events = append(events, "moved "+p) }
	if err := n.place("q", true); !errors.Is(err, ErrNotPlaced) || n.active["q"] {
		t.Fatalf("place: %v (active %v), want ErrNotPlaced", err, n.active["q"])
	}
	fail = false
	if err := n.place("q", true); err != nil {
		t.Fatal(err)
	}
	n.served("q")
	if want := []string{"placed q", "moved q", "placed q"}; !slices.Equal(events, want) || !n.active["q"] {
		t.Fatalf("events %v (active %v), want %v", events, n.active["q"], want)
	}
}
