package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	// dkRenamers each rename a project of their own, over and over; the
	// name a project has after the crash tells which renames survived.
	dkRenamers = 4
	// dkCreators each create projects, at most dkCreatesEach, so the
	// workspace stays under its 100 projects.
	dkCreators    = 2
	dkCreatesEach = 30
	// dkMinAcked renames and dkMinCreated creates are acknowledged before
	// the kill, so it always hits a busy directory and busy projects.
	dkMinAcked   = 40
	dkMinCreated = 10
)

// TestDashboardKill9 runs the real binary: every acknowledged dashboard
// write (a session, a workspace, a project, an invitation, a logout, a
// project created or renamed while others were in flight) survives kill -9
// of a process in the middle of dashboard writes.
func TestDashboardKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the rtcd binary")
	}
	bin := binBuild(t)
	dir := t.TempDir()
	boot := binInit(t, bin, dir, "--owner-email", "Ops@Example.com")
	if boot.OwnerEmail != "ops@example.com" {
		t.Fatalf("rtcd init printed owner_email %q, want the normalized ops@example.com", boot.OwnerEmail)
	}

	p := binServe(t, bin, dir, boot.APIKey)
	c := binClient(false)
	mailbox := &env{t: t, dataDir: dir} // reads <data-dir>/outbox like e.nextMail
	owner := binSignIn(t, p, mailbox, "ops@example.com")
	kept := binSignIn(t, p, mailbox, "ops@example.com")
	ended := binSignIn(t, p, mailbox, "ops@example.com")
	other := binSignIn(t, p, mailbox, "someone@example.com") // a sign-up: a user and a workspace
	projects := "/v1/accounts/" + boot.AccountID + "/projects"
	prj := binMust(t, c, p, "POST", projects, owner, map[string]any{"name": "Kept"}, 201).str("id")
	inv := binMust(t, c, p, "POST", "/v1/accounts/"+boot.AccountID+"/invitations", owner,
		map[string]any{"email": "guest@example.com", "role": "admin"}, 201).str("id")
	// Mail leaves after its write is durable, from memory: wait for it, so
	// the kill tests the invitation's record, not the mail queue.
	_, invToken := mailbox.mailLink("guest@example.com", "invitation_token")
	binMust(t, c, p, "POST", "/v1/auth/logout", ended, nil, 204)

	// Dashboard writes in flight: projects renamed and created by the
	// owner's session, each worker waiting for its answer before the next.
	renamed := make([]string, dkRenamers)
	for w := range renamed {
		renamed[w] = binMust(t, c, p, "POST", projects, owner, map[string]any{"name": fmt.Sprintf("r%d", w)}, 201).str("id")
	}
	load := dkStartLoad(p, owner, projects, renamed)
	load.waitBusy(t)
	p.kill()
	load.finish()
	binAssertSIGKILL(t, p)
	if load.inFlight.Load() == 0 {
		t.Fatal("no dashboard write was in flight at the kill (sent, and the connection lost); the kill hit an idle process")
	}

	p = binServe(t, bin, dir, boot.APIKey)
	me := binMust(t, c, p, "GET", "/v1/me", kept, nil, 200)
	if !strings.Contains(string(me.raw), prj) {
		t.Fatalf("the acknowledged project %s is gone after kill -9: %s", prj, me.raw)
	}
	if r, _ := binCall(c, "GET", p.Base+"/v1/me", ended, nil); r.status != 401 {
		t.Fatalf("a session signed out before kill -9 works again: %d", r.status)
	}
	if m := binMust(t, c, p, "GET", "/v1/me", other, nil, 200); !strings.Contains(string(m.raw), `"role":"owner"`) {
		t.Fatalf("the sign-up's workspace is gone: %s", m.raw)
	}
	list := binMust(t, c, p, "GET", "/v1/accounts/"+boot.AccountID+"/invitations", owner, nil, 200)
	if !strings.Contains(string(list.raw), inv) {
		t.Fatalf("the acknowledged invitation %s is gone: %s", inv, list.raw)
	}
	// The new project's own actor recovered: a session reaches it.
	if r, err := binCall(c, "GET", p.Base+"/v1/rooms", kept, nil, "X-Project-Id: "+prj); err != nil || r.status != 200 {
		t.Fatalf("the new project after kill -9: %v %d %s", err, r.status, r.raw)
	}
	load.verify(t, me)
	// The invitation still works after the restart.
	binMust(t, c, p, "POST", "/v1/auth/email/start", "", map[string]any{"email": "guest@example.com", "invitation_token": invToken}, 202)
	_, token := mailbox.mailLink("guest@example.com", "token")
	v := binMust(t, c, p, "POST", "/v1/auth/email/verify", "", map[string]any{"token": token}, 200)
	if joined, _ := v.json["joined_account"].(map[string]any); joined == nil || joined["id"] != boot.AccountID || joined["role"] != "admin" {
		t.Fatalf("the invitation after kill -9: %s", v.raw)
	}
}

// dkLoad is the dashboard write load of TestDashboardKill9.
type dkLoad struct {
	p        *binProc
	session  string
	projects string // the workspace's projects route
	stopping atomic.Bool
	renames  atomic.Int64 // acknowledged
	creates  atomic.Int64 // acknowledged
	inFlight atomic.Int64 // requests sent whose connection the kill cut
	wg       sync.WaitGroup

	mu sync.Mutex
	// Per renamed project: the last name acknowledged ("" for none yet,
	// the project still has its first name) and the name in flight.
	renamed     []string
	lastAcked   []string
	lastSent    []string
	created     map[string]string // project id -> name, acknowledged
	unexpectedN int
	unexpected  string
}

func dkStartLoad(p *binProc, session, projects string, renamed []string) *dkLoad {
	l := &dkLoad{p: p, session: session, projects: projects, renamed: renamed,
		lastAcked: make([]string, len(renamed)), lastSent: make([]string, len(renamed)), created: map[string]string{}}
	c := binClient(true)
	for w := range renamed {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				name := fmt.Sprintf("r%d-%d", w, i)
				l.mu.Lock()
				l.lastSent[w] = name
				l.mu.Unlock()
				r, ok := l.call(c, "PATCH", projects+"/"+renamed[w], map[string]any{"name": name}, 200)
				if !ok {
					return
				}
				if r.str("name") != name {
					l.fail(fmt.Sprintf("rename to %s answered %s", name, r.raw))
					return
				}
				l.mu.Lock()
				l.lastAcked[w] = name
				l.mu.Unlock()
				l.renames.Add(1)
			}
		}()
	}
	for w := range dkCreators {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := range dkCreatesEach {
				name := fmt.Sprintf("c%d-%d", w, i)
				r, ok := l.call(c, "POST", projects, map[string]any{"name": name}, 201)
				if !ok {
					return
				}
				l.mu.Lock()
				l.created[r.str("id")] = name
				l.mu.Unlock()
				l.creates.Add(1)
			}
		}()
	}
	return l
}

// call makes one request; false once the process is gone or on an
// unexpected answer (recorded).
func (l *dkLoad) call(c *http.Client, method, path string, body any, want int) (binResult, bool) {
	r, err := binCall(c, method, l.p.Base+path, l.session, body)
	if err != nil {
		if l.stopping.Load() {
			l.inFlight.Add(1)
		} else {
			l.fail(fmt.Sprintf("%s %s failed before the kill: %v", method, path, err))
		}
		return r, false
	}
	if r.status != want {
		l.fail(fmt.Sprintf("%s %s: %d %s", method, path, r.status, r.raw))
		return r, false
	}
	return r, true
}

func (l *dkLoad) fail(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unexpectedN == 0 {
		l.unexpected = msg
	}
	l.unexpectedN++
}

// waitBusy returns once enough writes were acknowledged, and marks the
// load as stopping: the kill comes next.
func (l *dkLoad) waitBusy(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for l.renames.Load() < dkMinAcked || l.creates.Load() < dkMinCreated {
		if time.Now().After(deadline) {
			t.Fatalf("the dashboard load had only %d renames and %d creates acknowledged in 30 s", l.renames.Load(), l.creates.Load())
		}
		time.Sleep(10 * time.Millisecond) // polling the load, not a clock
	}
	l.stopping.Store(true)
}

// finish waits for the workers, which stop once the process is gone.
func (l *dkLoad) finish() { l.wg.Wait() }

// verify checks GET /v1/me after the restart: every acknowledged project
// exists with its name, and each renamed project has its last acknowledged
// name or the one in flight at the kill.
func (l *dkLoad) verify(t *testing.T, me binResult) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unexpectedN > 0 {
		t.Fatalf("%d unexpected answers during the load, first: %s", l.unexpectedN, l.unexpected)
	}
	names := map[string]string{}
	accts, _ := me.json["accounts"].([]any)
	for _, a := range accts {
		ps, _ := a.(map[string]any)["projects"].([]any)
		for _, v := range ps {
			pr := v.(map[string]any)
			names[pr["id"].(string)] = pr["name"].(string)
		}
	}
	for id, name := range l.created {
		if names[id] != name {
			t.Errorf("project %s (%s) was acknowledged before kill -9; after it GET /v1/me has %q", id, name, names[id])
		}
	}
	for w, id := range l.renamed {
		first := fmt.Sprintf("r%d", w)
		acked := l.lastAcked[w]
		if acked == "" {
			acked = first
		}
		if got := names[id]; got != acked && got != l.lastSent[w] {
			t.Errorf("project %s: renamed to %s (acknowledged), %s in flight at kill -9; after it the name is %q",
				id, acked, l.lastSent[w], got)
		}
	}
	if !t.Failed() {
		t.Logf("kill -9 with %d dashboard writes in flight; %d renames and %d creates acknowledged, all kept",
			l.inFlight.Load(), l.renames.Load(), l.creates.Load())
	}
}
