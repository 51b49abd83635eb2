package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestClusterDashboard: the dashboard through three nodes of a cluster
// (docs/cluster.md, "The dashboard on a cluster"). The directory runs on
// one node and every node serves its routes; a project's routes with a
// session run on the project's node, which asks the directory's node
// about the session. Signed in through one node and verified through
// another; a project created through one node is used at once with the
// session through another, renamed through a third, archived, and every
// node refuses it and its key from then on; an invitation made through
// one node is accepted through another, with the invitee's role applied
// on the project's node; a logout through one node is refused through
// every node on the next request; and when the directory's node leaves,
// a survivor serves the dashboard with the sessions it had.
func TestClusterDashboard(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three rtcd nodes, three NATS servers, etcd and Redis")
	}
	nodes := clusterOf(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]

	// Sign in through A, the link verified through B: a new user, with a
	// workspace and its first project.
	a.startSignIn(map[string]any{"email": "ana@example.com"})
	_, linkToken := a.mailLink("ana@example.com", "token")
	signedIn := b.do("POST", "/v1/auth/email/verify", "", map[string]any{"token": linkToken}).must(t, 200)
	ana := signedIn.Str("token")
	created, _ := signedIn.JSON["created_account"].(map[string]any)
	if created == nil {
		t.Fatalf("a first sign-in created no workspace: %s", signedIn.Raw)
	}
	workspace := created["id"].(string)
	first := created["projects"].([]any)[0].(map[string]any)["id"].(string)
	dirNode := directoryNode(t, nodes)

	// Through C, the workspace and its project as the directory shows it.
	if acc, proj := c.firstAccount(ana); acc != workspace || proj != first {
		t.Fatalf("GET /v1/me through C: workspace %s project %s, want %s %s", acc, proj, workspace, first)
	}

	// The workspace's node runs it from its first project's first request
	// on; a project created through A after that is used at once, with the
	// session, through B: that node starts it at its first request.
	b.do("GET", "/v1/rooms", ana, nil, "X-Project-Id: "+first).must(t, 200)
	second := a.do("POST", "/v1/accounts/"+workspace+"/projects", ana, map[string]any{"name": "Second"}).must(t, 201).Str("id")
	key := b.do("POST", "/v1/api-keys", ana, map[string]any{"name": "ci", "scopes": []string{"rooms:read"}}, "X-Project-Id: "+second).must(t, 201).Str("secret")
	c.do("GET", "/v1/rooms", key, nil).must(t, 200)

	// Renamed through C, read through A.
	c.do("PATCH", "/v1/accounts/"+workspace+"/projects/"+second, ana, map[string]any{"name": "Renamed"}).must(t, 200)
	if got := projectOf(t, a.me(ana), workspace, second); got["name"] != "Renamed" {
		t.Fatalf("the project renamed through C reads %v through A", got)
	}

	// An invitation made through A, accepted through C by signing in
	// with it: the invitee is a member, whose role the project's node
	// applies.
	a.do("POST", "/v1/accounts/"+workspace+"/invitations", ana, map[string]any{"email": "bo@example.com"}).must(t, 201)
	_, invitation := a.mailLink("bo@example.com", "invitation_token")
	c.startSignIn(map[string]any{"email": "bo@example.com", "invitation_token": invitation})
	_, linkToken = c.mailLink("bo@example.com", "token")
	joined := c.do("POST", "/v1/auth/email/verify", "", map[string]any{"token": linkToken}).must(t, 200)
	if acc, _ := joined.JSON["joined_account"].(map[string]any); acc == nil || acc["id"] != workspace || acc["role"] != "member" {
		t.Fatalf("the invitee did not join as a member: %s", joined.Raw)
	}
	bo := joined.Str("token")
	for _, node := range nodes {
		node.do("GET", "/v1/rooms", bo, nil, "X-Project-Id: "+first).must(t, 200)
		node.do("POST", "/v1/api-keys", bo, map[string]any{"name": "no", "scopes": []string{"rooms:read"}}, "X-Project-Id: "+first).
			mustErr(t, 403, "permission_denied")
	}

	// A workspace created through B is used through C.
	other := b.do("POST", "/v1/accounts", ana, map[string]any{"name": "Other"}).must(t, 201)
	otherProject := other.JSON["projects"].([]any)[0].(map[string]any)["id"].(string)
	c.do("GET", "/v1/rooms", ana, nil, "X-Project-Id: "+otherProject).must(t, 200)

	// Archived through B: refused through every node from the answer on,
	// its key too; the last active project of a workspace stays.
	if s := b.do("DELETE", "/v1/accounts/"+workspace+"/projects/"+second, ana, nil).must(t, 200).Str("status"); s != "archived" {
		t.Fatalf("archive through B: status %q", s)
	}
	for _, node := range nodes {
		node.do("GET", "/v1/rooms", key, nil).mustErr(t, 401, "authentication_failed")
		node.do("GET", "/v1/rooms", ana, nil, "X-Project-Id: "+second).mustErr(t, 404, "invalid_request")
	}
	if got := projectOf(t, c.me(ana), workspace, second); got["status"] != "archived" {
		t.Fatalf("the project archived through B reads %v through C", got)
	}
	a.do("DELETE", "/v1/accounts/"+workspace+"/projects/"+first, ana, nil).mustErr(t, 409, "last_project")

	// The workspace's audit log, through any node, has what every node did.
	var actions []string
	for _, entry := range c.do("GET", "/v1/accounts/"+workspace+"/audit-logs", ana, nil).must(t, 200).Data() {
		actions = append(actions, entry["action"].(string))
	}
	for _, want := range []string{"project.created", "project.renamed", "invitation.created", "member.added", "project.archived"} {
		if !strings.Contains(strings.Join(actions, " "), want) {
			t.Fatalf("the audit log lacks %s: %v", want, actions)
		}
	}

	// A logout through C is refused through every node on the next
	// request, on dashboard routes and on project routes.
	c.do("POST", "/v1/auth/logout", ana, nil).must(t, 204)
	for _, node := range nodes {
		node.do("GET", "/v1/me", ana, nil).mustErr(t, 401, "authentication_failed")
		node.do("GET", "/v1/rooms", ana, nil, "X-Project-Id: "+first).mustErr(t, 401, "authentication_failed")
	}

	// The directory's node leaves: a survivor recovers the directory, with
	// the sessions it had, and serves the dashboard.
	nodes[dirNode].Stop()
	survivor := nodes[(dirNode+1)%3]
	survivor.eventually("a survivor serves the dashboard", func() bool {
		return survivor.do("GET", "/v1/me", bo, nil).Status == 200
	})
	for i, node := range nodes {
		if i == dirNode {
			continue
		}
		node.me(bo)
		node.do("GET", "/v1/rooms", bo, nil, "X-Project-Id: "+first).must(t, 200)
		node.do("GET", "/v1/me", ana, nil).mustErr(t, 401, "authentication_failed")
	}
}

// directoryNode is the index of the node that sends the dashboard's mails:
// the directory's.
func directoryNode(t *testing.T, nodes []*env) int {
	t.Helper()
	return theOneNode(t, len(nodes), func(i int) bool {
		entries, _ := os.ReadDir(filepath.Join(nodes[i].dataDir, "outbox"))
		return len(entries) > 0
	}, "sent the dashboard's mails")
}

// projectOf is project projectID of workspace accountID in a GET /v1/me.
func projectOf(t *testing.T, me *resp, accountID, projectID string) map[string]any {
	t.Helper()
	accounts, _ := me.JSON["accounts"].([]any)
	for _, acc := range accounts {
		acc := acc.(map[string]any)
		if acc["id"] != accountID {
			continue
		}
		for _, p := range acc["projects"].([]any) {
			if p := p.(map[string]any); p["id"] == projectID {
				return p
			}
		}
	}
	t.Fatalf("GET /v1/me has no project %s in workspace %s: %s", projectID, accountID, me.Raw)
	return nil
}

// TestClusterDashboardBrowserWalk: the dashboard's walk (sign-in, a
// project, a room a participant joins, API keys, a webhook, a top-up, an
// invitation and a role change, sign-out) in a real Chromium, through a
// load balancer that sends each request to the next of three cluster
// nodes: the dashboard's requests reach the directory's node and the
// project's requests their workspace's node from every node.
func TestClusterDashboardBrowserWalk(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three rtcd nodes, three NATS servers, etcd, Redis and Chromium")
	}
	rcv := newWHReceiver(t)
	lb := newRoundRobin(t)
	nodes := clusterOf(t, 3, rcv.flags("--public-url", lb.URL)...)
	for _, node := range nodes {
		lb.add(node.Base)
	}
	entry := *nodes[0] // the walk's server: the load balancer's address
	entry.Base = lb.URL
	walkThrough(t, &entry, rcv)
	if n := lb.served.Load(); n < 30 {
		t.Fatalf("the load balancer passed on %d requests", n)
	}
}

// roundRobin is a load balancer in front of cluster nodes, as a cluster's
// clients reach it: each request goes to the next node.
type roundRobin struct {
	*httptest.Server
	mu      sync.Mutex
	proxies []*httputil.ReverseProxy
	next    int
	served  atomic.Int64
}

func newRoundRobin(t *testing.T) *roundRobin {
	lb := &roundRobin{}
	lb.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lb.mu.Lock()
		if len(lb.proxies) == 0 {
			lb.mu.Unlock()
			http.Error(w, "no nodes yet", http.StatusServiceUnavailable)
			return
		}
		p := lb.proxies[lb.next%len(lb.proxies)]
		lb.next++
		lb.mu.Unlock()
		lb.served.Add(1)
		p.ServeHTTP(w, r)
	}))
	t.Cleanup(lb.Close)
	return lb
}

// add puts a node (its API's base URL) behind the load balancer.
func (lb *roundRobin) add(base string) {
	u, err := url.Parse(base)
	if err != nil {
		panic(err)
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.proxies = append(lb.proxies, httputil.NewSingleHostReverseProxy(u))
}

// TestClusterKill9OfTheDirectorysNode: three real rtcd processes; a
// person signed in creates projects one after another through every
// node, and the node that runs the directory is killed with SIGKILL. A
// survivor serves the dashboard again within 10 s; the session it had is
// live there, a session logged out before the kill stays refused, and
// every project whose creation was acknowledged is in the workspace.
func TestClusterKill9OfTheDirectorysNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three rtcd processes, three NATS servers, etcd and Redis")
	}
	boot, nodes := binCluster(t, 3)
	var outboxes []string
	for _, p := range nodes {
		outboxes = append(outboxes, filepath.Join(p.dataDir, "outbox"))
	}
	mail := &env{t: t, outboxes: outboxes}
	client := binClient(true)
	call := func(p *binProc, method, path, session string, body any) binResult {
		t.Helper()
		r, err := binCall(client, method, p.Base+path, session, body)
		if err != nil {
			t.Fatalf("%s %s through %s: %v", method, path, p.Base, err)
		}
		return r
	}
	signIn := func(through *binProc) string {
		t.Helper()
		if r := call(through, "POST", "/v1/auth/email/start", "", map[string]any{"email": boot.OwnerEmail}); r.status != 202 {
			t.Fatalf("sign-in start: %d %s", r.status, r.raw)
		}
		_, token := mail.mailLink(boot.OwnerEmail, "token")
		r := call(through, "POST", "/v1/auth/email/verify", "", map[string]any{"token": token})
		if r.status != 200 {
			t.Fatalf("sign-in verify: %d %s", r.status, r.raw)
		}
		return r.str("token")
	}
	session := signIn(nodes[0])
	loggedOut := signIn(nodes[1])
	if r := call(nodes[2], "POST", "/v1/auth/logout", loggedOut, nil); r.status != 204 {
		t.Fatalf("logout: %d %s", r.status, r.raw)
	}
	var dirNode int
	for i, p := range nodes {
		if entries, _ := os.ReadDir(filepath.Join(p.dataDir, "outbox")); len(entries) > 0 {
			dirNode = i
		}
	}

	// Projects created one after another, round robin over the nodes,
	// until a few are acknowledged after the kill.
	var (
		mu       sync.Mutex
		acked    []string
		killed   atomic.Bool
		afterAck atomic.Int64
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		began := time.Now()
		// At most 90 of a workspace's 100 projects; until 3 are
		// acknowledged after the kill.
		for i := 0; len(acked) < 90 && afterAck.Load() < 3 && time.Since(began) < time.Minute; i++ {
			p := nodes[i%3]
			if i%3 == dirNode && killed.Load() {
				continue
			}
			r, err := binCall(client, "POST", p.Base+"/v1/accounts/"+boot.AccountID+"/projects", session, map[string]any{"name": fmt.Sprintf("p-%d", i)})
			if err == nil && r.status == 201 {
				mu.Lock()
				acked = append(acked, r.str("id"))
				mu.Unlock()
				if killed.Load() {
					afterAck.Add(1)
				}
			} else if err == nil && r.status != 503 {
				t.Errorf("create a project through %s: %d %s", p.Base, r.status, r.raw)
				return
			}
			if killed.Load() && r.status == 503 {
				time.Sleep(50 * time.Millisecond) // the directory moving, in other processes
			}
		}
	}()
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 10 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	killed.Store(true)
	at := time.Now()
	nodes[dirNode].kill()
	survivor := nodes[(dirNode+1)%3]
	for {
		if r, err := binCall(client, "GET", survivor.Base+"/v1/me", session, nil); err == nil && r.status == 200 {
			break
		}
		if time.Since(at) > failoverBoundSeconds*time.Second {
			t.Fatalf("the dashboard did not serve again within %d s", failoverBoundSeconds)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("directory's node (node %d) killed; the dashboard served again through node %d after %v", dirNode, (dirNode+1)%3, time.Since(at).Round(time.Millisecond))
	<-done

	for i, p := range nodes {
		if i == dirNode {
			continue
		}
		if r := call(p, "GET", "/v1/me", loggedOut, nil); r.status != 401 {
			t.Fatalf("the session logged out before the kill through node %d: %d %s", i, r.status, r.raw)
		}
		me := call(p, "GET", "/v1/me", session, nil)
		listed := map[string]bool{}
		for _, acc := range me.json["accounts"].([]any) {
			for _, pr := range acc.(map[string]any)["projects"].([]any) {
				listed[pr.(map[string]any)["id"].(string)] = true
			}
		}
		mu.Lock()
		for _, id := range acked {
			if !listed[id] {
				t.Fatalf("the project %s, acknowledged, is not in the workspace after the kill (through node %d)", id, i)
			}
		}
		mu.Unlock()
	}
	t.Logf("%d projects acknowledged, %d of them after the kill", len(acked), afterAck.Load())
}
