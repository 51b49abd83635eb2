package e2e

import (
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
	found := -1
	for i, node := range nodes {
		entries, _ := os.ReadDir(filepath.Join(node.dataDir, "outbox"))
		if len(entries) == 0 {
			continue
		}
		if found >= 0 {
			t.Fatalf("nodes %d and %d both sent the dashboard's mails", found, i)
		}
		found = i
	}
	if found < 0 {
		t.Fatal("no node sent the sign-in mail")
	}
	return found
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
