package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"rtcd/auth"
	"rtcd/cluster"
	"rtcd/internal/testtools"
	"rtcd/media"
	"rtcd/server"
)

// clusterMediaNode is a media node run on its own (as `rtcd media
// --cluster-name` runs it) registered with a test's cluster, reporting to
// one control-plane node's private listener.
type clusterMediaNode struct {
	id, url string
	node    *media.Node
}

func startClusterMediaNode(t *testing.T, infra clusterInfra, id string, reportTo *env) *clusterMediaNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	keys := reportTo.masterKeys()
	signing := server.MediaReportKey(keys.MediaToken())
	reporter, err := media.NewHTTPReporter(media.HTTPConfig{BaseURL: reportTo.Metrics, Key: signing, Clock: reportTo.clock})
	if err != nil {
		t.Fatal(err)
	}
	// It holds a join until the room's node admits it: the join report
	// must reach that node and its answer come back to this one.
	node, err := media.NewNode(media.NodeConfig{NodeID: id, Verifier: auth.NewMediaVerifier(keys.MediaToken()), Clock: reportTo.clock,
		Reporter: reporter, AwaitAdmission: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- node.Serve(ctx, ln, media.NewControlHandler(node, signing, reportTo.clock)) }()
	m := &clusterMediaNode{id: id, url: "ws://" + ln.Addr().String() + media.RTCPath, node: node}
	reg, err := cluster.RegisterMedia(infra.name, []string{infra.etcd},
		cluster.MediaMember{ID: id, MediaURL: m.url, ControlURL: "http://" + ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		reg.Close()
		cancel()
		<-served
		_ = reporter.Close(context.Background())
	})
	return m
}

// TestClusterMediaNodes: three control-plane nodes with no media node of
// their own and two media nodes run on their own, registered with the
// cluster, reporting to a node that does not run the workspace. Rooms
// spread over the two; a connect through a third node answers its room's
// media node; a join, reported to the first node, is admitted by the
// workspace's node; the media nodes' presence, passed on to the
// workspace's node, keeps the calls going past the silence timeout;
// deleting a room closes it on its media node.
func TestClusterMediaNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three rtcd nodes, three NATS servers, etcd and Redis")
	}
	// The --media-url no client can reach: with media nodes registered, no
	// connect answers it.
	infra, nodes := clusterWithInfra(t, 3, "--media-listen=", "--media-url=ws://127.0.0.1:9/rtc")
	// The media nodes report to A, which does not run the workspace: B
	// runs it, and C takes the requests.
	nodes[0].createRoom(map[string]any{"name": "placing"})
	owner := -1
	for i, node := range nodes {
		if node.mfValue("rtcd_active_rooms", nil) > 0 {
			owner = i
		}
	}
	if owner < 0 {
		t.Fatal("no node runs the workspace's rooms")
	}
	a, b, c := nodes[(owner+1)%3], nodes[owner], nodes[(owner+2)%3]
	m1 := startClusterMediaNode(t, infra, "media-1", a)
	m2 := startClusterMediaNode(t, infra, "media-2", a)
	for _, node := range nodes {
		node.eventually("every node sees the two media nodes", func() bool { return node.mfValue("rtcd_cluster_media_nodes", nil) == 2 })
	}

	type call struct {
		room, participant string
		client            *mediaClient
		node              string
	}
	var calls []call
	used := map[string]int{}
	for i := range 12 {
		room := b.createRoom(map[string]any{"name": fmt.Sprintf("r%d", i)})
		pid, token := b.createParticipant(room, nil)
		endpoint := c.connect(token).must(t, 200).Str("endpoint")
		if endpoint != m1.url && endpoint != m2.url {
			t.Fatalf("a connect through C answered %s, not a registered media node", endpoint)
		}
		used[endpoint]++
		calls = append(calls, call{room: room, participant: pid, client: a.joinMedia(token), node: endpoint})
	}
	if used[m1.url] == 0 || used[m2.url] == 0 {
		t.Fatalf("12 rooms over two media nodes: %v", used)
	}
	for _, cl := range calls {
		a.eventually("the join recorded through the room's node", func() bool { return c.participantStatus(cl.room, cl.participant) == "joined" })
	}

	// Past the silence timeout on every control-plane node's clock, each
	// media node's presence (reported to A, passed on to the others) keeps
	// every call.
	for step := 0; step < 4; step++ {
		for _, node := range nodes {
			node.clock.Advance(5 * time.Second)
		}
		for _, cl := range calls { // the clients' heartbeats (the media nodes run on A's clock)
			cl.client.send(map[string]any{"type": "ping", "ts": (step + 1) * 5000})
		}
		for _, m := range []*clusterMediaNode{m1, m2} {
			p := m.node.Presence()
			a.postReport(server.MediaReportKey(a.masterKeys().MediaToken()), media.Report{Type: media.ReportPresence, Presence: &p})
		}
	}
	// The rooms sweep on a real 1 s ticker (their silence check): two
	// sweeps pass before what they did not do is checked.
	time.Sleep(2500 * time.Millisecond)
	for _, cl := range calls {
		if s := b.participantStatus(cl.room, cl.participant); s != "joined" {
			t.Fatalf("participant of %s on %s after 20 s with presence: %s %s", cl.room, cl.node, s, b.do("GET", "/v1/rooms/"+cl.room+"/participants/"+cl.participant, b.Boot.APIKey, nil).Raw)
		}
	}

	// Deleting a room through B closes it on its media node.
	first := calls[0]
	b.do("DELETE", "/v1/rooms/"+first.room, b.Boot.APIKey, nil).must(t, 200)
	for {
		if m := first.client.read(); m["type"] == "room.closed" || m["type"] == "error" {
			break
		}
	}
	a.eventually("the room deleted through B ended", func() bool { return c.getRoomStatus(first.room) == "ended" })
}

// TestRtcdMediaRegistersWithTheCluster: `rtcd media --cluster-name`
// registers with the cluster's etcd (its endpoint and control origin) and
// leaves it when it stops; its flags are checked.
func TestRtcdMediaRegistersWithTheCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rtcd and starts etcd")
	}
	bin := binBuild(t)
	etcd := testtools.StartEtcd(t)
	var mu sync.Mutex
	var seen []cluster.MediaMember
	w, err := cluster.WatchMedia("cli", []string{etcd.Endpoint}, func(m []cluster.MediaMember) {
		mu.Lock()
		seen = m
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	members := func() []cluster.MediaMember {
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
	addr := binFreePort(t)
	node := cliStartNode(t, bin, addr, "--media-key", strings.Repeat("ab", 32), "--node-id", "m-cli",
		"--cluster-name", "cli", "--cluster-etcd", etcd.Endpoint)
	deadline := time.Now().Add(10 * time.Second)
	want := cluster.MediaMember{ID: "m-cli", MediaURL: "ws://" + addr + media.RTCPath, ControlURL: "http://" + addr}
	for m := members(); len(m) != 1 || m[0] != want; m = members() {
		if time.Now().After(deadline) {
			t.Fatalf("registered: %+v, want %+v\n%s", m, want, node.logText())
		}
		time.Sleep(20 * time.Millisecond) // a process starting, and etcd's watch
	}
	if err := node.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-node.exited
	for deadline = time.Now().Add(10 * time.Second); len(members()) != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("still registered after it stopped: %+v", members())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, bad := range [][]string{
		{"--cluster-name", "cli"},
		{"--cluster-name", "cli", "--cluster-etcd", etcd.Endpoint, "--media-url", "ws://media.example.com/rtc"},
	} {
		args := append([]string{"media", "--listen", binFreePort(t), "--media-key", strings.Repeat("ab", 32)}, bad...)
		if _, stderr, code := cliRun(t, bin, nil, args...); code != 1 || stderr == "" {
			t.Fatalf("rtcd %v: exit %d, stderr %q; want refused", bad, code, stderr)
		}
	}
}
