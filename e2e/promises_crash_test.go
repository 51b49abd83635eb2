package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"rtcd/persistence"
)

// kill -9 of the real binary right after an acknowledgement: what
// docs/storage.md says is durable once acknowledged is there after the
// restart. Revocations (an API key, dashboard sessions by logout and
// logout-all, a webhook endpoint, an archived project's keys) stay revoked,
// and a create retried with its Idempotency-Key gets its stored response.
//
// Every kill lands on a busy process: a background load (rooms,
// participants, connects) keeps the WAL syncing, so a batch applied while a
// sync runs waits in the process's memory for the next one, and a reply sent
// before that would report a change the kill loses. Each revocation is sent
// several times at once: the repeat of a revocation still on its way to disk
// must not be answered before it is durable either.

const (
	// pkWarmAcks is how many rooms and connects the background load must
	// have had acknowledged before the burst is sent: the process is busy.
	pkWarmAcks = 20
	// pkRevokedKeys API keys are revoked in one burst (two DELETEs each).
	pkRevokedKeys = 8
	// pkEndedSessions sessions end in one burst; with the control session
	// that stays under the 10 sign-in starts per IP and minute.
	pkEndedSessions = 4
)

func TestKill9Promises(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the rtcd binary")
	}
	began := time.Now()
	bin := binBuild(t)
	t.Logf("built rtcd in %v", time.Since(began).Round(time.Millisecond))
	t.Run("api key revocation", func(t *testing.T) { pkTestKeyRevocation(t, bin) })
	t.Run("logout", func(t *testing.T) { pkTestLogout(t, bin, false) })
	t.Run("logout-all", func(t *testing.T) { pkTestLogout(t, bin, true) })
	t.Run("webhook endpoint disabled", func(t *testing.T) { pkTestEndpointDisabled(t, bin) })
	t.Run("project archived", func(t *testing.T) { pkTestProjectArchived(t, bin) })
	t.Run("idempotent creates", func(t *testing.T) { pkTestIdempotentCreates(t, bin) })
}

// --- helpers ------------------------------------------------------------------

// binMust makes one call and fails the test unless it answers want.
func binMust(t *testing.T, c *http.Client, p *binProc, method, path, key string, body any, want int, headers ...string) binResult {
	t.Helper()
	r, err := binCall(c, method, p.Base+path, key, body, headers...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if r.status != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, r.status, want, r.raw)
	}
	return r
}

// binSignIn signs in by e-mail link, reading the link from the data
// directory's outbox, and returns the session token.
func binSignIn(t *testing.T, p *binProc, mailbox *env, email string) string {
	t.Helper()
	c := binClient(false)
	binMust(t, c, p, "POST", "/v1/auth/email/start", "", map[string]any{"email": email}, 202)
	_, token := mailbox.mailLink(email, "token")
	return binMust(t, c, p, "POST", "/v1/auth/email/verify", "", map[string]any{"token": token}, 200).str("token")
}

// binAssertSIGKILL fails the test unless p died of SIGKILL.
func binAssertSIGKILL(t *testing.T, p *binProc) {
	t.Helper()
	if st := p.cmd.ProcessState; st == nil || st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("rtcd was not killed by SIGKILL: %v\n%s", st, p.logTail())
	}
}

// pkLoad starts the background load on p and returns once it is having
// writes acknowledged.
func pkLoad(t *testing.T, p *binProc, apiKey string) *binLoad {
	t.Helper()
	l := binStartLoad(p, apiKey, "pk", binClient(true))
	deadline := time.Now().Add(30 * time.Second)
	for l.ackedRooms.Load() < pkWarmAcks || l.ackedConns.Load() < pkWarmAcks {
		if time.Now().After(deadline) {
			t.Fatalf("the load had only %d rooms and %d connects acknowledged in 30 s", l.ackedRooms.Load(), l.ackedConns.Load())
		}
		time.Sleep(10 * time.Millisecond) // polling the load, not a clock
	}
	return l
}

// pkReq is one request of a burst.
type pkReq struct {
	method, path, key string
	body              any
	headers           []string
}

// pkKillAtFirstAck sends every request of burst at once, each on its own
// connection, while load (if any) runs, and sends SIGKILL from the goroutine
// that receives the first acknowledgement (2xx), as soon as it has it. It
// returns each request's result (status 0: no answer, the process was
// gone), after checking that the process died of that SIGKILL.
func pkKillAtFirstAck(t *testing.T, p *binProc, load *binLoad, burst []pkReq) []binResult {
	t.Helper()
	if load != nil {
		load.stopping.Store(true) // from now on the load may lose its connections
	}
	c := binClient(false)
	results := make([]binResult, len(burst))
	var kill sync.Once
	var wg sync.WaitGroup
	send := make(chan struct{})
	for i, rq := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-send
			r, err := binCall(c, rq.method, p.Base+rq.path, rq.key, rq.body, rq.headers...)
			if err == nil && r.status/100 == 2 {
				kill.Do(p.kill)
			}
			results[i] = r
		}()
	}
	close(send)
	answered := make(chan struct{})
	go func() { wg.Wait(); close(answered) }()
	select {
	case <-answered:
	case <-time.After(30 * time.Second):
		p.kill()
		t.Fatalf("the burst was not answered within 30 s\n%s", p.logTail())
	}
	p.kill() // nothing was acknowledged: the caller fails
	if load != nil {
		load.finish()
	}
	binAssertSIGKILL(t, p)
	statuses := map[int]int{}
	for _, r := range results {
		statuses[r.status]++
	}
	t.Logf("burst of %d: answers by status (0: none, the process was killed first): %v", len(burst), statuses)
	return results
}

// pkAcked returns the paths of the burst's requests answered want.
func pkAcked(t *testing.T, burst []pkReq, results []binResult, want int) map[string]bool {
	t.Helper()
	acked := map[string]bool{}
	for i, r := range results {
		switch r.status {
		case want:
			acked[burst[i].path] = true
		case 0: // sent, never answered: the kill came first
		default:
			if !(r.status == 409 && r.code() == "conflict") { // an archive still running
				t.Errorf("%s %s: %d %s", burst[i].method, burst[i].path, r.status, r.raw)
			}
		}
	}
	if len(acked) == 0 {
		t.Fatal("no request of the burst was acknowledged before the kill")
	}
	return acked
}

// --- revocations ----------------------------------------------------------------

// pkTestKeyRevocation: every API key whose DELETE was acknowledged answers
// 401 after kill -9 and a restart.
func pkTestKeyRevocation(t *testing.T, bin string) {
	dir := t.TempDir()
	boot := binInit(t, bin, dir)
	p := binServe(t, bin, dir, boot.APIKey, binGenerousLimits...)
	c := binClient(true)
	// The last key is never revoked: the control that keys do work.
	keys := make([]binResult, pkRevokedKeys+1)
	for i := range keys {
		keys[i] = binMust(t, c, p, "POST", "/v1/api-keys", boot.APIKey,
			map[string]any{"name": fmt.Sprintf("pk-%d", i), "scopes": []string{"rooms:read"}}, 201)
	}
	load := pkLoad(t, p, boot.APIKey)
	var burst []pkReq
	for _, k := range keys[:pkRevokedKeys] {
		for range 2 {
			burst = append(burst, pkReq{method: "DELETE", path: "/v1/api-keys/" + k.str("id"), key: boot.APIKey})
		}
	}
	acked := pkAcked(t, burst, pkKillAtFirstAck(t, p, load, burst), 200)

	p = binServe(t, bin, dir, boot.APIKey, binGenerousLimits...)
	for _, k := range keys[:pkRevokedKeys] {
		if !acked["/v1/api-keys/"+k.str("id")] {
			continue // never acknowledged: revoked or not, both are right
		}
		if r, err := binCall(c, "GET", p.Base+"/v1/system/info", k.str("secret"), nil); err != nil || r.status != 401 {
			t.Errorf("key %s: its revocation was acknowledged before kill -9; after the restart it answers %v %d %s",
				k.str("id"), err, r.status, r.raw)
		}
	}
	binMust(t, c, p, "GET", "/v1/system/info", keys[pkRevokedKeys].str("secret"), nil, 200)
	if !t.Failed() {
		t.Logf("%d of %d revocations acknowledged before the kill; all stayed revoked", len(acked), pkRevokedKeys)
	}
}

// pkTestLogout: sessions ended by an acknowledged logout (or, with all,
// logout-all) answer 401 after kill -9 and a restart; another user's
// session still works.
func pkTestLogout(t *testing.T, bin string, all bool) {
	dir := t.TempDir()
	boot := binInit(t, bin, dir, "--owner-email", "ops@example.com")
	p := binServe(t, bin, dir, boot.APIKey, binGenerousLimits...)
	mailbox := &env{t: t, dataDir: dir} // reads <data-dir>/outbox like e.nextMail
	c := binClient(true)
	sessions := make([]string, pkEndedSessions)
	for i := range sessions {
		sessions[i] = binSignIn(t, p, mailbox, "leaving@example.com")
	}
	control := binSignIn(t, p, mailbox, "ops@example.com")
	load := pkLoad(t, p, boot.APIKey)
	// Each session logs out four times at once; or, with all, each session
	// sends two logout-alls: the first one ends all four sessions, and the
	// others come too late (401) or find nothing left to end.
	path, copies := "/v1/auth/logout", 4
	if all {
		path, copies = "/v1/auth/logout-all", 2
	}
	var burst []pkReq
	for _, s := range sessions {
		for range copies {
			burst = append(burst, pkReq{method: "POST", path: path, key: s})
		}
	}
	results := pkKillAtFirstAck(t, p, load, burst)
	ended := map[string]bool{}
	for i, r := range results {
		switch {
		case r.status == 204:
			if all {
				for _, s := range sessions {
					ended[s] = true
				}
			}
			ended[burst[i].key] = true
		case r.status == 0, r.status == 401: // not answered, or its session had already ended
		default:
			t.Errorf("%s: %d %s", burst[i].path, r.status, r.raw)
		}
	}
	if len(ended) == 0 {
		t.Fatal("no logout was acknowledged before the kill")
	}

	p = binServe(t, bin, dir, boot.APIKey, binGenerousLimits...)
	for i, s := range sessions {
		if !ended[s] {
			continue
		}
		if r, err := binCall(c, "GET", p.Base+"/v1/me", s, nil); err != nil || r.status != 401 {
			t.Errorf("session %d: ended by an acknowledged %s before kill -9; after the restart GET /v1/me answers %v %d %s",
				i, path, err, r.status, r.raw)
		}
	}
	binMust(t, c, p, "GET", "/v1/me", control, nil, 200)
	if !t.Failed() {
		t.Logf("%d of %d sessions' end acknowledged before the kill; all stayed ended", len(ended), len(sessions))
	}
}

// pkTestEndpointDisabled: an endpoint whose DELETE was acknowledged gets no
// delivery after kill -9 and a restart, though it had deliveries retrying
// and new events follow; an endpoint left enabled gets all of them.
func pkTestEndpointDisabled(t *testing.T, bin string) {
	rcv := newWHReceiver(t) // real clock: the binary signs with time.Now
	var healthy atomic.Bool
	failUntilHealthy := func(w http.ResponseWriter, _ *http.Request) {
		if healthy.Load() {
			w.WriteHeader(200)
			return
		}
		w.WriteHeader(500)
	}
	rcv.on("/disabled", failUntilHealthy)
	rcv.on("/kept", failUntilHealthy)
	dir := t.TempDir()
	boot := binInit(t, bin, dir)
	flags := rcv.flags(binGenerousLimits...)
	p := binServe(t, bin, dir, boot.APIKey, append(flags, "--webhook-retry-schedule="+wcPreKillSchedule)...)
	c := binClient(true)
	disabled := binMust(t, c, p, "POST", "/v1/webhook-endpoints", boot.APIKey,
		map[string]any{"url": rcv.url("/disabled"), "events": []string{"room.ended"}}, 201).str("id")
	binMust(t, c, p, "POST", "/v1/webhook-endpoints", boot.APIKey,
		map[string]any{"url": rcv.url("/kept"), "events": []string{"room.ended"}}, 201)
	rooms := 0
	endRooms := func(p *binProc, n int) {
		t.Helper()
		for range n {
			id := binMust(t, c, p, "POST", "/v1/rooms", boot.APIKey, map[string]any{}, 201).str("id")
			binMust(t, c, p, "DELETE", "/v1/rooms/"+id, boot.APIKey, nil, 200)
			rooms++
		}
	}
	// Deliveries to both endpoints fail and retry every two seconds.
	endRooms(p, 5)
	for deadline := time.Now().Add(30 * time.Second); len(whDistinct(rcv.requests("/disabled"))) < 5 || len(whDistinct(rcv.requests("/kept"))) < 5; {
		if time.Now().After(deadline) {
			t.Fatalf("the 5 events were not attempted to both endpoints in 30 s\n%s", p.logTail())
		}
		time.Sleep(20 * time.Millisecond) // polling the real process
	}

	load := pkLoad(t, p, boot.APIKey)
	burst := []pkReq{
		{method: "DELETE", path: "/v1/webhook-endpoints/" + disabled, key: boot.APIKey},
		{method: "DELETE", path: "/v1/webhook-endpoints/" + disabled, key: boot.APIKey},
	}
	pkAcked(t, burst, pkKillAtFirstAck(t, p, load, burst), 200)
	beforeRestart := len(rcv.requests("/disabled"))

	healthy.Store(true)
	restarted := time.Now()
	p = binServe(t, bin, dir, boot.APIKey, append(flags, "--webhook-retry-schedule=1,1,1")...)
	endRooms(p, 3)
	// Every event reaches the kept endpoint, the 5 retried from before the
	// kill and the 3 new ones. The disabled endpoint's retries were due as
	// early as the kept one's, and an endpoint worker looks for due
	// deliveries every second: two seconds after the restart, a delivery
	// to it would have been made.
	for deadline := time.Now().Add(30 * time.Second); ; {
		delivered := map[string]bool{}
		for _, q := range rcv.requests("/kept") {
			if q.Status == 200 {
				delivered[q.Header.Get("X-RTC-Webhook-Id")] = true
			}
		}
		if len(delivered) == rooms && time.Since(restarted) > 2*time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events delivered to the enabled endpoint 30 s after the restart\n%s", len(delivered), rooms, p.logTail())
		}
		time.Sleep(20 * time.Millisecond) // polling the real process
	}
	if after := rcv.requests("/disabled")[beforeRestart:]; len(after) > 0 {
		t.Fatalf("the endpoint's disabling was acknowledged before kill -9; after the restart it got %d deliveries, first %s",
			len(after), after[0].Body)
	}
	list := binMust(t, c, p, "GET", "/v1/webhook-endpoints", boot.APIKey, nil, 200)
	for _, v := range list.json["data"].([]any) {
		if ep := v.(map[string]any); ep["id"] == disabled && ep["status"] != "disabled" {
			t.Fatalf("the disabled endpoint reads %v after the restart", ep)
		}
	}
	t.Logf("%d events delivered to the enabled endpoint, none to the disabled one after the restart", rooms)
}

// pkTestProjectArchived: the keys of a project whose archive was
// acknowledged answer 401 after kill -9 and a restart, and sessions no
// longer reach it.
func pkTestProjectArchived(t *testing.T, bin string) {
	dir := t.TempDir()
	boot := binInit(t, bin, dir, "--owner-email", "ops@example.com")
	p := binServe(t, bin, dir, boot.APIKey, binGenerousLimits...)
	mailbox := &env{t: t, dataDir: dir}
	c := binClient(true)
	owner := binSignIn(t, p, mailbox, "ops@example.com")
	prj := binMust(t, c, p, "POST", "/v1/accounts/"+boot.AccountID+"/projects", owner, map[string]any{"name": "Archived"}, 201).str("id")
	var secrets []string
	for i := range 4 {
		k := binMust(t, c, p, "POST", "/v1/api-keys", owner,
			map[string]any{"name": fmt.Sprintf("pk-%d", i), "scopes": []string{"rooms:read"}}, 201, "X-Project-Id: "+prj)
		binMust(t, c, p, "GET", "/v1/system/info", k.str("secret"), nil, 200)
		secrets = append(secrets, k.str("secret"))
	}
	load := pkLoad(t, p, boot.APIKey) // in the default project, which stays
	archive := pkReq{method: "DELETE", path: "/v1/accounts/" + boot.AccountID + "/projects/" + prj, key: owner}
	burst := []pkReq{archive, archive}
	pkAcked(t, burst, pkKillAtFirstAck(t, p, load, burst), 200)

	p = binServe(t, bin, dir, boot.APIKey, binGenerousLimits...)
	for i, s := range secrets {
		if r, err := binCall(c, "GET", p.Base+"/v1/system/info", s, nil); err != nil || r.status != 401 {
			t.Errorf("key %d of the project archived before kill -9 answers %v %d %s after the restart", i, err, r.status, r.raw)
		}
	}
	if r, err := binCall(c, "GET", p.Base+"/v1/rooms", owner, nil, "X-Project-Id: "+prj); err != nil || r.status != 404 {
		t.Errorf("a session reaches the project archived before kill -9: %v %d %s", err, r.status, r.raw)
	}
	if me := binMust(t, c, p, "GET", "/v1/me", owner, nil, 200); !bytes.Contains(me.raw, []byte(`"id":"`+prj+`","account_id":"`+boot.AccountID+`","name":"Archived","status":"archived"`)) {
		t.Errorf("GET /v1/me after the restart does not show the project archived: %s", me.raw)
	}
}

// --- idempotency ------------------------------------------------------------------

// pkTestIdempotentCreates: for each create route that takes an
// Idempotency-Key, kill -9 right after the acknowledgement; after the
// restart the same request gets the stored response byte for byte, and
// exactly one resource exists, on disk, right after the kill and at the end.
func pkTestIdempotentCreates(t *testing.T, bin string) {
	dir := t.TempDir()
	boot := binInit(t, bin, dir)
	flags := append([]string{"--webhook-allow-private"}, binGenerousLimits...)
	p := binServe(t, bin, dir, boot.APIKey, flags...)
	c := binClient(true)
	room := binMust(t, c, p, "POST", "/v1/rooms", boot.APIKey, map[string]any{"name": "pk-idem-host"}, 201).str("id")
	creates := []struct {
		what, path string
		body       map[string]any
		// The records of the kind on disk, and the field that names this one.
		diskPrefix, field, value string
	}{
		{"room", "/v1/rooms", map[string]any{"name": "pk-idem-room"},
			persistence.PrefixRoom + boot.ProjectID + "/", "name", "pk-idem-room"},
		{"participant", "/v1/rooms/" + room + "/participants", map[string]any{"name": "pk-idem-participant"},
			persistence.PrefixPart + boot.ProjectID + "/" + room + "/", "name", "pk-idem-participant"},
		{"api key", "/v1/api-keys", map[string]any{"name": "pk-idem-key", "scopes": []string{"rooms:read"}},
			string(persistence.IndexPrefix(persistence.PrefixKeyIdx, boot.ProjectID)), "name", "pk-idem-key"},
		{"webhook endpoint", "/v1/webhook-endpoints", map[string]any{"url": "https://127.0.0.1:9/pk-idem", "events": []string{"room.ended"}},
			string(persistence.IndexPrefix(persistence.PrefixEndpoint, boot.ProjectID)), "url", "https://127.0.0.1:9/pk-idem"},
	}
	for i, cr := range creates {
		idem := fmt.Sprintf("Idempotency-Key: pk-idem-%d", i)
		load := pkLoad(t, p, boot.APIKey)
		first := pkKillAtFirstAck(t, p, load, []pkReq{{method: "POST", path: cr.path, key: boot.APIKey, body: cr.body, headers: []string{idem}}})[0]
		if first.status != 201 {
			t.Fatalf("%s: create answered %d %s", cr.what, first.status, first.raw)
		}
		if n := pkCountOnDisk(t, dir, cr.diskPrefix, cr.field, cr.value); n != 1 {
			t.Fatalf("%s: acknowledged before kill -9; on disk after it %d times, want 1", cr.what, n)
		}
		p = binServe(t, bin, dir, boot.APIKey, flags...)
		again := binMust(t, c, p, "POST", cr.path, boot.APIKey, cr.body, 201, idem)
		if !bytes.Equal(again.raw, first.raw) {
			t.Fatalf("%s: the retry after kill -9 answered\n%s\nthe acknowledged create\n%s", cr.what, again.raw, first.raw)
		}
		if h := again.header.Get("Idempotent-Replayed"); h != "true" {
			t.Fatalf("%s: the retry after kill -9 has Idempotent-Replayed %q, want true", cr.what, h)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if st := p.waitExit(20 * time.Second); st.ExitCode() != 0 {
		t.Fatalf("SIGTERM: exit %v\n%s", st, p.logTail())
	}
	for _, cr := range creates {
		if n := pkCountOnDisk(t, dir, cr.diskPrefix, cr.field, cr.value); n != 1 {
			t.Errorf("%s: %d on disk after the replayed retry, want 1", cr.what, n)
		}
	}
}

// pkCountOnDisk counts, in a stopped server's store, the JSON records under
// prefix whose field is value.
func pkCountOnDisk(t *testing.T, dataDir, prefix, field, value string) int {
	t.Helper()
	s := rsOpenStore(t, dataDir)
	defer s.Close()
	n := 0
	err := s.Scan([]byte(prefix), 0, func(_, v []byte) bool {
		var rec map[string]any
		if err := json.Unmarshal(v, &rec); err != nil {
			t.Errorf("record %q under %s: %v", v, prefix, err)
			return false
		}
		if rec[field] == value {
			n++
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
