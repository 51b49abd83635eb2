package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
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
// while that runs, restarted, and the ledger must have lost nothing: its
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
)

// scSession is a participant joined through the binary's media node.
type scSession struct {
	room, id, token string
	conn            *websocket.Conn
}

func TestSettlementCrash(t *testing.T) {
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
		// Aim the kill at a settlement: sweeps tick at a fixed phase of the
		// second, rooms write their charges at once, and the wallet applies
		// them one room's nudge after another. A kill inside that burst, a
		// second or two on, often finds charges written but not yet
		// applied; not always, so the log says how many.
		from, to := scNextSettlement(t, p, boot.APIKey, c)
		aim := from.Add(time.Duration(rand.Int64N(int64(to.Sub(from)) + 1)))
		time.Sleep(time.Until(aim) - 3*time.Millisecond)
		for time.Now().Before(aim) { // a timer wakes a millisecond or two late; the window is about that wide
		}
		into := time.Since(from)
		p.kill()
		if st := p.cmd.ProcessState; st == nil || st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("cycle %d: rtcd was not killed by SIGKILL: %v", cycle, st)
		}
		for _, s := range sessions {
			_ = s.conn.Close()
		}

		// On disk after the crash: a consistent ledger that kept every entry
		// of the previous crash, and the charges written but not yet applied.
		ledger, pending := scDisk(t, dir, boot.AccountID)
		scContains(t, ledger, before, fmt.Sprintf("cycle %d: the ledger after the crash", cycle))
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
		t.Logf("cycle %d: %d sessions joined and settled; killed %v into a settlement (last one %v long) with %d ledger entries and %d charges written but not applied on disk; restart %v; all finalized, balance %s; cycle %v",
			cycle, len(sessions), into.Round(10*time.Microsecond), to.Sub(from), len(ledger), pending, restart.Round(time.Millisecond), balance, time.Since(cycleBegan).Round(time.Millisecond))
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
