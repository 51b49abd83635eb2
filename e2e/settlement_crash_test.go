package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"rtcd/actors"
	"rtcd/money"
	"rtcd/persistence"
)

// kill -9 during settlement, with the real binary: participants joined
// through its media node are charged every second; the process is killed
// while that runs, at an instant when usage charges the rooms wrote are on
// disk and their application by the wallet is not (the test fails if no
// kill landed there), restarted, and the ledger must have lost nothing: its
// entries sum exactly to the balance, every usage charge a room wrote is
// applied exactly once, and every session the restarted node no longer has
// is finalized (at recovery, or by the reconciler) and charged exactly its
// price.

const (
	scRoomsPerCycle = 40 // two participants each
	// scCycles kill -9 cycles run; up to scMaxCycles while no kill has yet
	// caught usage charges written but not applied.
	scCycles    = 2
	scMaxCycles = 3
	// scPrice is --participant-minute-price: no whole number of micro-units
	// per second, so every settlement rounds and only exact cumulative
	// pricing keeps a session's charges equal to its price.
	scPrice = "0.123457"
	// scPollers read the ledger from scPollLead before a settlement is due,
	// to freeze the process as soon as it starts; up to scAttempts
	// settlements are tried per cycle for one that a kill catches between
	// charges written and applied.
	scPollers  = 4
	scPollLead = 100 * time.Millisecond
	// scSettlementLateness is how late past its due instant a settlement
	// may be seen: on two cores shared with the race detector and other
	// servers, a settlement due every second was once seen more than 2 s
	// late in CI; when it comes does not matter to what is tested.
	scSettlementLateness = 5 * time.Second
	scAttempts           = 6
)

// scSession is a participant joined through the binary's media node.
type scSession struct {
	room, id, token string
	conn            *websocket.Conn
}

func TestSettlementCrash(t *testing.T) {
	skipOnJetStream(t, "it copies a frozen server's Pebble directory to start a second server on the copy")
	if testing.Short() {
		t.Skip("builds and runs the rtcd binary")
	}
	began := time.Now()
	bin := binBuild(t)
	t.Logf("built rtcd in %v", time.Since(began).Round(time.Millisecond))
	dir := t.TempDir()
	boot := binInit(t, bin, dir)
	flags := append(append([]string{}, binGenerousLimits...), "--settle-interval-seconds=1", "--participant-minute-price="+scPrice)
	p := binServe(t, bin, dir, boot.APIKey, flags...)
	c := binClient(true)

	var all []*scSession
	var before []map[string]any // the ledger on disk at the previous crash
	caught := 0                 // kills that found charges written but not yet applied
	cycles := 0
	for cycle := 1; cycle <= scCycles || (caught == 0 && cycle <= scMaxCycles); cycle++ {
		cycles = cycle
		cycleBegan := time.Now()
		sessions := scJoin(t, p, boot.APIKey, c, cycle)
		all = append(all, sessions...)
		scWaitStatus(t, p, boot.APIKey, c, sessions, "joined")
		// Settlement runs every second; kill at an arbitrary point of it,
		// after each session has been settled at least once.
		allCharged := func() bool {
			charged := make(map[string]bool)
			for _, en := range scUsageEntries(t, p, boot.APIKey, c) {
				ref, _ := en["reference"].(map[string]any)
				charged[fmt.Sprint(ref["participant_id"])] = true
			}
			for _, s := range sessions {
				if !charged[s.id] {
					return false
				}
			}
			return true
		}
		for deadline := time.Now().Add(10 * time.Second); !allCharged(); {
			if time.Now().After(deadline) {
				t.Fatalf("cycle %d: settlement did not charge every joined session within 10 s", cycle)
			}
			time.Sleep(20 * time.Millisecond) // polling the server, not a clock
		}
		// Kill inside a settlement, between charges written and applied.
		pendingAtKill, attempts := scKillInSettlement(t, p, boot.APIKey, boot.AccountID, c)
		binAssertSIGKILL(t, p)
		for _, s := range sessions {
			_ = s.conn.Close()
		}

		// On disk after the crash: a consistent ledger that kept every entry
		// of the previous crash, and the charges written but not yet applied.
		ledger, pending := scDisk(t, dir, boot.AccountID)
		scContains(t, ledger, before, fmt.Sprintf("cycle %d: the ledger after the crash", cycle))
		if pending != pendingAtKill {
			t.Fatalf("cycle %d: the frozen process's store held %d charges written but not applied, after SIGKILL its store holds %d", cycle, pendingAtKill, pending)
		}
		if pending > 0 {
			caught++
		}
		before = ledger

		restartBegan := time.Now()
		p = binServe(t, bin, dir, boot.APIKey, flags...)
		restart := time.Since(restartBegan)
		// The restarted node has none of the old sockets: every session
		// is finalized (at recovery, or by the reconciler on the node's
		// first presence report).
		scWaitStatus(t, p, boot.APIKey, c, all, "left")
		balance := scCheckLive(t, p, boot.APIKey, c)
		t.Logf("cycle %d: %d sessions joined and settled; killed inside settlement %d tried, with %d ledger entries and %d charges written but not applied on disk; restart %v; all finalized, balance %s; cycle %v",
			cycle, len(sessions), attempts, len(ledger), pending, restart.Round(time.Millisecond), balance, time.Since(cycleBegan).Round(time.Millisecond))
	}

	if caught == 0 {
		t.Fatalf("no kill of %d cycles landed between usage charges written and applied", cycles)
	}

	// Quiescent: nobody is joined, so nothing more is charged.
	balance := scCheckLive(t, p, boot.APIKey, c)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if st := p.waitExit(20 * time.Second); st.ExitCode() != 0 {
		t.Fatalf("SIGTERM: exit %v\n%s", st, p.logTail())
	}
	ledger, pending := scDisk(t, dir, boot.AccountID)
	scContains(t, ledger, before, "the final ledger")
	if pending != 0 {
		t.Fatalf("%d usage charges were never applied", pending)
	}
	var sum money.Micros
	for _, en := range ledger {
		sum += blMicros(t, en["amount"])
	}
	if sum != blMicros(t, balance) {
		t.Fatalf("the %d ledger entries sum to %v, the balance is %s", len(ledger), sum, balance)
	}

	// Every session was finalized (its usage records written) and charged
	// exactly its price: floor(seconds x price / 60), the sum of its ledger
	// entries, however many settlements and crashes it went through.
	charged := make(map[string]money.Micros) // session id -> sum of its usage entries
	for _, en := range ledger {
		if en["type"] != "usage" {
			continue
		}
		ref, _ := en["reference"].(map[string]any)
		sid, _ := ref["session_id"].(string)
		charged[sid] += -blMicros(t, en["amount"])
	}
	price := blMicros(t, scPrice)
	finalized := scUsageRecords(t, dir, boot.ProjectID)
	byParticipant := make(map[string]string)
	var seconds int64
	for sid, u := range finalized {
		if other, ok := byParticipant[u.participant]; ok {
			t.Errorf("participant %s has two usage sessions, %s and %s; each joined once", u.participant, other, sid)
		}
		byParticipant[u.participant] = sid
		want, _ := money.MulDivFloor(u.seconds, int64(price), 60)
		if charged[sid] != money.Micros(want) {
			t.Errorf("session %s: %d s at %s a minute is %v; its ledger entries sum to %v",
				sid, u.seconds, scPrice, money.Micros(want), charged[sid])
		}
		seconds += u.seconds
		delete(charged, sid)
	}
	for _, s := range all {
		if _, ok := byParticipant[s.id]; !ok {
			t.Errorf("participant %s has no finalized usage", s.id)
		}
	}
	for sid, m := range charged {
		t.Errorf("session %s was charged %v but never finalized", sid, m)
	}
	// Settlement runs every second: a usage entry per session and second,
	// give or take a sweep lost under load (at most one in ten).
	usageEntries := 0
	for _, en := range ledger {
		if en["type"] == "usage" {
			usageEntries++
		}
	}
	if 10*int64(usageEntries) < 9*seconds {
		t.Errorf("%d usage entries for %d participant-seconds settled every second; settlement runs less often than --settle-interval-seconds=1", usageEntries, seconds)
	}
	t.Logf("%d sessions (%d participant-seconds) over %d kill -9 cycles, %d of which caught charges in flight; %d ledger entries sum exactly to %s; total %v",
		len(all), seconds, cycles, caught, len(ledger), balance, time.Since(began).Round(time.Millisecond))
}

// scUsage is one finalized usage session.
type scUsage struct {
	participant string
	seconds     int64
}

// scUsageRecords reads a stopped server's finalized usage records (one per
// session and UTC day) and adds them up per session.
func scUsageRecords(t *testing.T, dataDir, projectID string) map[string]scUsage {
	t.Helper()
	s := rsOpenStore(t, dataDir)
	defer s.Close()
	out := make(map[string]scUsage)
	err := s.Scan([]byte(persistence.PrefixUsage+projectID+"/"), 0, func(_, v []byte) bool {
		var r actors.UsageRecord
		if err := json.Unmarshal(v, &r); err != nil {
			t.Errorf("usage record %q: %v", v, err)
			return false
		}
		u := out[r.SessionID]
		u.participant = r.ParticipantID
		u.seconds += r.Seconds
		out[r.SessionID] = u
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// scJoin creates scRoomsPerCycle rooms of two and joins both participants
// of each through the binary's media node (POST /v1/connect, then the
// WebSocket at the endpoint it names).
func scJoin(t *testing.T, p *binProc, key string, c *http.Client, cycle int) []*scSession {
	t.Helper()
	sessions := make([]*scSession, 2*scRoomsPerCycle)
	var mu sync.Mutex
	var failed []string
	fail := func(format string, args ...any) {
		mu.Lock()
		failed = append(failed, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	binParallel(scRoomsPerCycle, func(i int) {
		r, err := binCall(c, "POST", p.Base+"/v1/rooms", key, map[string]any{"name": fmt.Sprintf("settle-%d-%d", cycle, i), "max_participants": 2})
		if err != nil || r.status != 201 {
			fail("create room: %v %d %s", err, r.status, r.raw)
			return
		}
		room := r.str("id")
		for j := 0; j < 2; j++ {
			r, err := binCall(c, "POST", p.Base+"/v1/rooms/"+room+"/participants", key, map[string]any{})
			if err != nil || r.status != 201 {
				fail("create participant: %v %d %s", err, r.status, r.raw)
				return
			}
			s := &scSession{room: room, id: r.str("id"), token: r.str("token")}
			cs, err := binCall(c, "POST", p.Base+"/v1/connect", "", map[string]any{"token": s.token})
			if err != nil || cs.status != 200 {
				fail("connect: %v %d %s", err, cs.status, cs.raw)
				return
			}
			conn, _, err := websocket.DefaultDialer.Dial(cs.str("endpoint"), nil)
			if err != nil {
				fail("dial %s: %v", cs.str("endpoint"), err)
				return
			}
			t.Cleanup(func() { _ = conn.Close() })
			s.conn = conn
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
			var joined map[string]any
			if err := conn.WriteJSON(map[string]any{"type": "join", "media_token": cs.str("media_token")}); err != nil {
				fail("join: %v", err)
				return
			}
			if err := conn.ReadJSON(&joined); err != nil || joined["type"] != "joined" {
				fail("join answered %v %v", joined, err)
				return
			}
			_ = conn.SetReadDeadline(time.Time{})
			sessions[2*i+j] = s
		}
	})
	if len(failed) > 0 {
		t.Fatalf("cycle %d: %d failures, first: %s", cycle, len(failed), failed[0])
	}
	return sessions
}

// scWaitStatus waits until every session's participant has status.
func scWaitStatus(t *testing.T, p *binProc, key string, c *http.Client, sessions []*scSession, status string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	pending := sessions
	for len(pending) > 0 {
		var mu sync.Mutex
		var still []*scSession
		binParallel(len(pending), func(i int) {
			s := pending[i]
			r, err := binCall(c, "GET", p.Base+"/v1/rooms/"+s.room+"/participants/"+s.id, key, nil)
			if err != nil || r.status != 200 || r.str("status") != status {
				mu.Lock()
				still = append(still, s)
				mu.Unlock()
			}
		})
		pending = still
		if len(pending) > 0 && time.Now().After(deadline) {
			r, _ := binCall(c, "GET", p.Base+"/v1/rooms/"+pending[0].room+"/participants/"+pending[0].id, key, nil)
			t.Fatalf("%d participants are not %s after 20 s; e.g. %s\n%s", len(pending), status, r.raw, p.logTail())
		}
		if len(pending) > 0 {
			time.Sleep(50 * time.Millisecond) // polling the server, not a clock
		}
	}
}

// scKillInSettlement kills p inside a settlement, between usage charges
// written by rooms and their application by the wallet, a window of a few
// milliseconds. Sweeps tick at a fixed phase of the second: from shortly
// before the next settlement is due, scPollers goroutines read the newest
// ledger entry over and over, and the first to see a new one (the wallet
// applying the first rooms' charges while others are still writing theirs)
// freezes the process with SIGSTOP. A frozen process writes nothing, so a
// copy of its store, opened the way a restart opens it, is exactly what
// SIGKILL would leave. If that copy holds charges written but not applied,
// the process is killed there and then; if not, it is resumed (SIGCONT) and
// the next settlement is tried, up to scAttempts times, after which it is
// killed anyway. It returns the pending charges the copy held at the kill
// and the number of settlements tried.
func scKillInSettlement(t *testing.T, p *binProc, key, accountID string, c *http.Client) (pending, attempts int) {
	t.Helper()
	newest := func() (string, error) {
		r, err := binCall(c, "GET", p.Base+"/v1/billing/ledger?limit=1", key, nil)
		if err != nil {
			return "", err
		}
		data, _ := r.json["data"].([]any)
		if r.status != 200 || len(data) != 1 {
			return "", fmt.Errorf("ledger: %d %s", r.status, r.raw)
		}
		return fmt.Sprint(data[0].(map[string]any)["id"]), nil
	}
	for attempts = 1; ; attempts++ {
		from, _ := scNextSettlement(t, p, key, c)
		time.Sleep(time.Until(from.Add(-scPollLead)))
		before, err := newest()
		if err != nil {
			t.Fatal(err)
		}
		deadline := from.Add(scPollLead + scSettlementLateness)
		var freeze sync.Once
		frozen := make(chan error, 1)
		var wg sync.WaitGroup
		for range scPollers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					id, err := newest()
					if err != nil {
						return // the process stopped answering: the poll ends
					}
					if id != before {
						freeze.Do(func() { frozen <- p.cmd.Process.Signal(syscall.SIGSTOP) })
						return
					}
				}
			}()
		}
		// The other pollers' requests are answered only once the process
		// runs again: do not wait for them while it is frozen.
		polled := make(chan struct{})
		go func() { wg.Wait(); close(polled) }()
		select {
		case err := <-frozen:
			if err != nil {
				t.Fatalf("SIGSTOP: %v", err)
			}
		case <-polled:
			t.Fatalf("attempt %d: no settlement within %v of when it was due\n%s", attempts, scSettlementLateness, p.logTail())
		}
		scWaitStopped(t, p)
		pending = scPendingInCopy(t, p.dataDir, accountID)
		if pending > 0 || attempts == scAttempts {
			p.kill() // SIGKILL reaches a stopped process too
			<-polled
			return pending, attempts
		}
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		<-polled
	}
}

// scWaitStopped waits until p's process is in the stopped state: SIGSTOP is
// delivered asynchronously.
func scWaitStopped(t *testing.T, p *binProc) {
	t.Helper()
	stat := fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid)
	for deadline := time.Now().Add(5 * time.Second); ; {
		b, err := os.ReadFile(stat)
		if err != nil {
			t.Fatal(err)
		}
		// pid (comm) state ...: the state follows the last ')'.
		if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rtcd did not stop within 5 s of SIGSTOP: %s", b)
		}
		time.Sleep(time.Millisecond) // polling the kernel's view of the process
	}
}

// scPendingInCopy copies the store of a frozen server, opens the copy as a
// restart would (Pebble replays its WAL) and counts the usage charges
// written but not yet applied.
func scPendingInCopy(t *testing.T, dataDir, accountID string) int {
	t.Helper()
	copyDir := t.TempDir()
	src := filepath.Join(dataDir, "pebble")
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		dst := filepath.Join(copyDir, "pebble", rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o600)
	})
	if err != nil {
		t.Fatalf("copying the frozen server's store: %v", err)
	}
	_, pending := scDisk(t, copyDir, accountID)
	if err := os.RemoveAll(copyDir); err != nil {
		t.Fatal(err)
	}
	return pending
}

// scUsageEntries returns the usage entries of the ledger's newest page.
func scUsageEntries(t *testing.T, p *binProc, key string, c *http.Client) []map[string]any {
	t.Helper()
	r, err := binCall(c, "GET", p.Base+"/v1/billing/ledger?limit=100", key, nil)
	if err != nil || r.status != 200 {
		t.Fatalf("ledger: %v %d %s", err, r.status, r.raw)
	}
	var out []map[string]any
	for _, v := range r.json["data"].([]any) {
		if en := v.(map[string]any); en["type"] == "usage" {
			out = append(out, en)
		}
	}
	return out
}

// scNextSettlement returns a window, one to two seconds from now, in which
// the wallet will be applying a settlement's charges: the span of the
// newest burst of usage entries (dated to the millisecond as the wallet
// applies them, within 100 ms of each other) plus whole seconds.
func scNextSettlement(t *testing.T, p *binProc, key string, c *http.Client) (from, to time.Time) {
	t.Helper()
	usage := scUsageEntries(t, p, key, c)
	if len(usage) == 0 {
		t.Fatal("no usage entry yet")
	}
	at := func(en map[string]any) time.Time {
		v, err := time.Parse(time.RFC3339Nano, en["created_at"].(string))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	to = at(usage[0]).Add(time.Millisecond) // dates are cut to the millisecond
	from = to
	for _, en := range usage { // newest first
		if v := at(en); to.Sub(v) < 100*time.Millisecond {
			from = v
		}
	}
	for from.Before(time.Now().Add(time.Second)) {
		from, to = from.Add(time.Second), to.Add(time.Second)
	}
	return from, to
}

// scCheckLive checks, over the API of a quiescent server, that the newest
// ledger page chains (each entry's balance_after is the one before it plus
// its amount) up to the balance, and returns the balance.
func scCheckLive(t *testing.T, p *binProc, key string, c *http.Client) string {
	t.Helper()
	b, err := binCall(c, "GET", p.Base+"/v1/billing/balance", key, nil)
	if err != nil || b.status != 200 {
		t.Fatalf("balance: %v %d %s", err, b.status, b.raw)
	}
	r, err := binCall(c, "GET", p.Base+"/v1/billing/ledger?limit=100", key, nil)
	if err != nil || r.status != 200 {
		t.Fatalf("ledger: %v %d %s", err, r.status, r.raw)
	}
	page := r.json["data"].([]any)
	if len(page) == 0 {
		t.Fatal("empty ledger")
	}
	if top := page[0].(map[string]any)["balance_after"]; blMicros(t, top) != blMicros(t, b.str("available")) {
		t.Fatalf("newest ledger entry's balance_after %v, balance %s", top, b.str("available"))
	}
	for i := 0; i+1 < len(page); i++ {
		en, prev := page[i].(map[string]any), page[i+1].(map[string]any)
		if blMicros(t, en["balance_after"]) != blMicros(t, prev["balance_after"])+blMicros(t, en["amount"]) {
			t.Fatalf("ledger entries do not chain: %v after %v", en, prev)
		}
	}
	return b.str("available")
}

// scDisk reads a stopped server's ledger (oldest first, its chain checked)
// and counts the usage charges written but not yet applied.
func scDisk(t *testing.T, dataDir, accountID string) (ledger []map[string]any, pendingCharges int) {
	t.Helper()
	s := rsOpenStore(t, dataDir)
	defer s.Close()
	var newest []map[string]any
	err := s.Scan(persistence.IndexPrefix(persistence.PrefixLedger, accountID), 0, func(_, v []byte) bool {
		var en map[string]any
		if err := json.Unmarshal(v, &en); err != nil {
			t.Errorf("ledger record %q: %v", v, err)
			return false
		}
		newest = append(newest, en)
		return true
	})
	if err == nil {
		err = s.Scan([]byte(persistence.PrefixCharge+accountID+"/"), 0, func(_, _ []byte) bool { pendingCharges++; return true })
	}
	if err != nil {
		t.Fatal(err)
	}
	for i := len(newest) - 1; i >= 0; i-- {
		ledger = append(ledger, newest[i])
	}
	blCheckChain(t, ledger)
	return ledger, pendingCharges
}

// scContains fails unless ledger starts with every entry of before,
// unchanged.
func scContains(t *testing.T, ledger, before []map[string]any, what string) {
	t.Helper()
	if len(ledger) < len(before) {
		t.Fatalf("%s has %d entries, fewer than the %d of the crash before", what, len(ledger), len(before))
	}
	for i, en := range before {
		a, _ := json.Marshal(en)
		b, _ := json.Marshal(ledger[i])
		if string(a) != string(b) {
			t.Fatalf("%s: entry %d was %s, is %s", what, i, a, b)
		}
	}
}
