package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"rtcd/money"
	"rtcd/persistence"
)

// kill -9 under connect and join load, with the real binary: a connect is
// a reservation in memory only and the join is the point of record
// (docs/storage.md, the crash contract). After each kill:
//   - on disk, the joined participants never exceed any cap: a room's
//     max_participants, the project's max_active_participants;
//   - after the restart, every acknowledged connect that had not joined
//     can still join with its media token while capacity remains (the join
//     is re-checked), and is refused participant_limit_reached only when
//     the room or the project is full;
//   - the ledger still sums to the balance.

const (
	rcWorkers = 8
	// rcRoomCap is each room's max_participants; rooms get one participant
	// more, so the room's cap binds.
	rcRoomCap = 2
	// rcProjectQuota is --default-max-active-participants: below what the
	// workers hold joined at once (rcWorkers x (1+rcOpenRooms) x rcRoomCap),
	// so the project's quota binds too.
	rcProjectQuota = 32
	// rcOpenRooms is how many of its rooms a worker keeps joined besides
	// its first (joined throughout, so it is charged); older ones leave,
	// so slots churn.
	rcOpenRooms = 2
	rcCycles    = 2
	// rcReservedAtKill is how many connects, acknowledged and not joined,
	// the odd workers must have made before the kill.
	rcReservedAtKill = 8
)

// rcConnect is an acknowledged connect.
type rcConnect struct {
	room, participant, endpoint, mediaToken string
	joined                                  bool // the node answered joined
}

// rcLoad connects and joins until stopped.
type rcLoad struct {
	p        *binProc
	key      string
	cycle    int
	stop     chan struct{}
	stopping atomic.Bool
	// reserving turns the odd workers to connects only: they leave their
	// rooms and connect without joining, so the kill finds reservations
	// in memory while the even workers still join.
	reserving atomic.Bool
	reserved  atomic.Int64
	wg        sync.WaitGroup

	mu       sync.Mutex
	connects []*rcConnect
	conns    []*websocket.Conn
	refused  map[string]int // connect refusals by limit_name
	joins    atomic.Int64
}

func rcStartLoad(t *testing.T, p *binProc, key string, cycle int) *rcLoad {
	l := &rcLoad{p: p, key: key, cycle: cycle, stop: make(chan struct{}), refused: make(map[string]int)}
	for w := 0; w < rcWorkers; w++ {
		l.wg.Add(1)
		go l.worker(t, w)
	}
	return l
}

func (l *rcLoad) fail(t *testing.T, format string, args ...any) {
	if !l.stopping.Load() {
		t.Errorf(format, args...)
	}
}

// rcHeld is a joined session a worker holds: its socket, and the
// participant token to connect again with.
type rcHeld struct {
	conn   *websocket.Conn // nil until joined
	token  string
	latest *rcConnect
}

// worker creates rooms of rcRoomCap+1 participants, connects them all and
// joins those admitted, keeping its first room and its rcOpenRooms newest
// joined (the older leave). Once reserving is set, an odd worker leaves its
// rooms and only connects; an even one keeps its rooms and connects its
// participants again, joining each new session (a renewal: no new slot).
func (l *rcLoad) worker(t *testing.T, w int) {
	defer l.wg.Done()
	c := binClient(true)
	var pinned, open [][]*rcHeld // the first room, and the newest joined ones, oldest first
	leave := func(rooms [][]*rcHeld) {
		for _, room := range rooms {
			for _, h := range room {
				_ = h.conn.WriteJSON(map[string]any{"type": "leave"})
			}
		}
	}
	reserveOnly, renewing := false, false
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			return
		default:
		}
		if !reserveOnly && !renewing && l.reserving.Load() {
			if w%2 == 1 {
				reserveOnly = true
				leave(pinned)
				leave(open)
				pinned, open = nil, nil
			} else {
				renewing = true
			}
		}
		if renewing {
			for _, room := range append(append([][]*rcHeld{}, pinned...), open...) {
				for _, h := range room {
					if !l.renew(t, c, h) {
						return
					}
				}
			}
			continue
		}
		room, acked, ok := l.connectRoom(t, c, w, i)
		if !ok {
			return
		}
		if reserveOnly {
			l.reserved.Add(int64(len(acked)))
			continue
		}
		var joined []*rcHeld
		for _, a := range acked {
			conn, code, err := rcJoin(a.latest)
			if err != nil || code != "" {
				l.fail(t, "join of an acknowledged connect in %s: %v %s", room, err, code)
				return
			}
			a.latest.joined = true
			a.conn = conn
			l.joins.Add(1)
			joined = append(joined, a)
			l.mu.Lock()
			l.conns = append(l.conns, conn)
			l.mu.Unlock()
		}
		// The first room stays joined for the whole load, so its sessions
		// are settled (charged); later ones churn.
		if i == 0 {
			pinned = append(pinned, joined)
			continue
		}
		open = append(open, joined)
		if len(open) > rcOpenRooms {
			leave(open[:1])
			open = open[1:]
		}
	}
}

// connectRoom creates a room of rcRoomCap and rcRoomCap+1 participants in
// it, and connects each; it returns the connects acknowledged.
func (l *rcLoad) connectRoom(t *testing.T, c *http.Client, w, i int) (string, []*rcHeld, bool) {
	r, err := binCall(c, "POST", l.p.Base+"/v1/rooms", l.key, map[string]any{"name": fmt.Sprintf("rc%d-w%d-%d", l.cycle, w, i), "max_participants": rcRoomCap})
	if err != nil || r.status != 201 {
		l.fail(t, "create room: %v %d %s", err, r.status, r.raw)
		return "", nil, false
	}
	room := r.str("id")
	var acked []*rcHeld
	for j := 0; j <= rcRoomCap; j++ {
		r, err := binCall(c, "POST", l.p.Base+"/v1/rooms/"+room+"/participants", l.key, map[string]any{})
		if err != nil || r.status != 201 {
			l.fail(t, "create participant: %v %d %s", err, r.status, r.raw)
			return "", nil, false
		}
		h := &rcHeld{token: r.str("token")}
		a, status, ok := l.connect(t, c, room, r.str("id"), h.token)
		if !ok {
			return "", nil, false
		}
		if status == 200 {
			h.latest = a
			acked = append(acked, h)
		}
	}
	return room, acked, true
}

// connect connects a participant: 200 (recorded as acknowledged) or 409 (a
// cap, counted).
func (l *rcLoad) connect(t *testing.T, c *http.Client, room, participant, token string) (*rcConnect, int, bool) {
	cs, err := binCall(c, "POST", l.p.Base+"/v1/connect", "", map[string]any{"token": token})
	switch {
	case err != nil:
		l.fail(t, "connect: %v", err)
		return nil, 0, false
	case cs.status == 200:
		a := &rcConnect{room: room, participant: participant, endpoint: cs.str("endpoint"), mediaToken: cs.str("media_token")}
		l.mu.Lock()
		l.connects = append(l.connects, a)
		l.mu.Unlock()
		return a, 200, true
	case cs.status == 409:
		d, _ := cs.json["error"].(map[string]any)["details"].(map[string]any)
		l.mu.Lock()
		l.refused[fmt.Sprint(d["limit_name"])]++
		l.mu.Unlock()
		return nil, 409, true
	default:
		l.fail(t, "connect: %d %s", cs.status, cs.raw)
		return nil, 0, false
	}
}

// renew connects h's participant again (it holds its slot: admitted
// whatever the caps) and joins the new session, which replaces h's socket.
func (l *rcLoad) renew(t *testing.T, c *http.Client, h *rcHeld) bool {
	a, status, ok := l.connect(t, c, h.latest.room, h.latest.participant, h.token)
	if !ok {
		return false
	}
	if status != 200 {
		l.fail(t, "a joined participant's connect was refused")
		return false
	}
	conn, code, err := rcJoin(a)
	if err != nil || code != "" {
		l.fail(t, "join of a joined participant's new session: %v %s", err, code)
		return false
	}
	a.joined = true
	l.joins.Add(1)
	_ = h.conn.Close() // replaced by the node
	h.conn, h.latest = conn, a
	l.mu.Lock()
	l.conns = append(l.conns, conn)
	l.mu.Unlock()
	return true
}

// rcJoin opens a socket at a's endpoint and joins with its media token. It
// returns the socket once joined, or the error code the node sent.
func rcJoin(a *rcConnect) (*websocket.Conn, string, error) {
	conn, _, err := websocket.DefaultDialer.Dial(a.endpoint, nil)
	if err != nil {
		return nil, "", err
	}
	_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if err := conn.WriteJSON(map[string]any{"type": "join", "media_token": a.mediaToken}); err != nil {
		conn.Close()
		return nil, "", err
	}
	var m map[string]any
	if err := conn.ReadJSON(&m); err != nil {
		conn.Close()
		return nil, "", err
	}
	_ = conn.SetReadDeadline(time.Time{})
	if m["type"] != "joined" {
		conn.Close()
		code, _ := m["code"].(string)
		return nil, code, nil
	}
	return conn, "", nil
}

func (l *rcLoad) finish() {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
}

// rcRecord is a participant's record on disk.
type rcRecord struct {
	ID     string `json:"id"`
	RoomID string `json:"room_id"`
	Status string `json:"status"`
}

// rcDiskParticipants reads a stopped server's participant records.
func rcDiskParticipants(t *testing.T, dataDir, projectID string) map[string]rcRecord {
	t.Helper()
	s := rsOpenStore(t, dataDir)
	defer s.Close()
	out := make(map[string]rcRecord)
	err := s.Scan([]byte(persistence.PrefixPart+projectID+"/"), 0, func(_, v []byte) bool {
		var r rcRecord
		if err := json.Unmarshal(v, &r); err != nil {
			t.Errorf("participant record %q: %v", v, err)
			return false
		}
		out[r.ID] = r
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rcCheckCaps fails if the joined participants of records exceed a room's
// cap or the project's quota; it returns how many are joined.
func rcCheckCaps(t *testing.T, records map[string]rcRecord, what string) int {
	t.Helper()
	perRoom := make(map[string]int)
	total := 0
	for _, r := range records {
		switch r.Status {
		case "joined":
			perRoom[r.RoomID]++
			total++
		case "connected":
			t.Errorf("%s: participant %s is recorded connected; a connect is never recorded", what, r.ID)
		}
	}
	for room, n := range perRoom {
		if n > rcRoomCap {
			t.Errorf("%s: room %s has %d participants joined, its max_participants is %d", what, room, n, rcRoomCap)
		}
	}
	if total > rcProjectQuota {
		t.Errorf("%s: %d participants joined in the project, its max_active_participants is %d", what, total, rcProjectQuota)
	}
	return total
}

func TestKill9UnderConnectAndJoinLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the rtcd binary")
	}
	bin := binBuild(t)
	dir := t.TempDir()
	boot := binInit(t, bin, dir)
	// The media node keeps its address across restarts, as a deployment's
	// does: a media token's endpoint is still the node's.
	flags := append(append([]string{}, binGenerousLimits...),
		fmt.Sprintf("--default-max-active-participants=%d", rcProjectQuota), "--settle-interval-seconds=1",
		"--media-listen="+binFreePort(t))
	p := binServe(t, bin, dir, boot.APIKey, flags...)
	c := binClient(true)
	var all []*rcConnect
	rejoined, refusedFull := 0, 0 // lost reservations joined again, refused in a room filled since

	for cycle := 1; cycle <= rcCycles; cycle++ {
		began := time.Now()
		load := rcStartLoad(t, p, boot.APIKey, cycle)
		for time.Since(began) < binLoadDuration || load.joins.Load() < binMinAcked {
			if time.Since(began) > 30*time.Second {
				t.Fatalf("cycle %d: only %d joins in 30 s", cycle, load.joins.Load())
			}
			time.Sleep(50 * time.Millisecond) // load duration, not a wait for server logic
		}
		load.reserving.Store(true)
		// The odd workers' rooms free their slots as their leaves land; the
		// even workers hold theirs (at most 24 of the quota's 32).
		for reserving := time.Now(); load.reserved.Load() < rcReservedAtKill; {
			if time.Since(reserving) > 30*time.Second {
				load.mu.Lock()
				live := append(slices.Clone(all), load.connects...)
				load.mu.Unlock()
				t.Fatalf("cycle %d: only %d reservations in 30 s; %s\n%s", cycle, load.reserved.Load(),
					rcSlotHolders(t, p, boot.APIKey, c, live), p.logTail())
			}
			time.Sleep(10 * time.Millisecond) // load duration, not a wait for server logic
		}
		load.stopping.Store(true)
		p.kill()
		load.finish()
		binAssertSIGKILL(t, p)
		all = append(all, load.connects...)
		if load.refused["max_participants"] == 0 || load.refused["max_active_participants"] == 0 {
			t.Fatalf("cycle %d: the load never met a cap (refusals %v)", cycle, load.refused)
		}

		// On disk: the joins recorded hold within every cap.
		joinedAtKill := rcCheckCaps(t, rcDiskParticipants(t, dir, boot.ProjectID), fmt.Sprintf("cycle %d, on disk after the kill", cycle))

		p = binServe(t, bin, dir, boot.APIKey, flags...)
		// The embedded node restarted with the process: every session that
		// was joined is closed at recovery, so the slots are free again.
		records := rcWaitNoneJoined(t, p, boot.APIKey, c, rcRooms(all))

		// Every acknowledged connect that had not joined joins with its
		// media token while capacity remains: re-checked, one at a time so
		// the expected answer is known. In every other such room newcomers
		// connect first and fill it: its old tokens must then be refused.
		perRoom := make(map[string]int) // slots held in the room: joins and newcomers' reservations
		total, admitted, full := 0, 0, 0
		var held []*websocket.Conn
		var newcomers []string // "<room>/participants/<id>" of the newcomers that connected
		filled := make(map[string]bool)
		for _, a := range load.connects {
			if a.joined {
				continue
			}
			if _, seen := filled[a.room]; !seen {
				filled[a.room] = len(filled)%2 == 1
				for i := 0; filled[a.room] && i < rcRoomCap; i++ {
					nc, err := binCall(c, "POST", p.Base+"/v1/rooms/"+a.room+"/participants", boot.APIKey, map[string]any{"name": "newcomer"})
					if err != nil || nc.status != 201 {
						t.Fatalf("newcomer: %v %d %s", err, nc.status, nc.raw)
					}
					r, err := binCall(c, "POST", p.Base+"/v1/connect", "", map[string]any{"token": nc.str("token")})
					switch {
					case err == nil && r.status == 200:
						perRoom[a.room]++
						total++
						newcomers = append(newcomers, a.room+"/participants/"+nc.str("id"))
					case err == nil && r.status == 409 && total >= rcProjectQuota:
					default:
						t.Fatalf("newcomer's connect with capacity left: %v %d %s", err, r.status, r.raw)
					}
				}
			}
			conn, code, err := rcJoin(a)
			if err != nil {
				t.Fatalf("cycle %d: join of %s after the restart: %v", cycle, a.participant, err)
			}
			roomFull, projectFull := perRoom[a.room] >= rcRoomCap, total >= rcProjectQuota
			switch code {
			case "":
				if roomFull || projectFull {
					t.Fatalf("cycle %d: %s joined past a cap (room %d, project %d)", cycle, a.participant, perRoom[a.room], total)
				}
				perRoom[a.room]++
				total++
				admitted++
				held = append(held, conn)
			case "participant_limit_reached":
				if !roomFull && !projectFull {
					t.Fatalf("cycle %d: %s refused participant_limit_reached with capacity left (room %d of %d, project %d of %d)",
						cycle, a.participant, perRoom[a.room], rcRoomCap, total, rcProjectQuota)
				}
				full++
			case "token_expired":
				// Its join was recorded before the kill, though its client
				// never saw joined: that session ended at recovery.
				if st := records[a.participant].Status; st != "left" {
					t.Fatalf("cycle %d: %s refused token_expired, its record says %s", cycle, a.participant, st)
				}
			default:
				t.Fatalf("cycle %d: join of acknowledged connect %s after the restart: %s", cycle, a.participant, code)
			}
		}
		rejoined += admitted
		refusedFull += full
		if err := rcCheckCapsLive(t, p, boot.APIKey, c, load.connects); err != nil {
			t.Fatalf("cycle %d: %v", cycle, err)
		}
		for _, conn := range held {
			_ = conn.WriteJSON(map[string]any{"type": "leave"})
			_ = conn.Close()
		}
		// The newcomers never join: their reservations would hold project
		// slots until their media tokens expire (60 s), into the next
		// cycle's load, whose reservations need every free slot. Removing
		// them frees their slots now.
		for _, path := range newcomers {
			binMust(t, c, p, "DELETE", "/v1/rooms/"+path, boot.APIKey, nil, 200)
		}
		t.Logf("cycle %d: killed after %v with %d connects acknowledged, %d joins, refusals %v, %d joined on disk; after the restart %d lost reservations joined again, %d refused as full",
			cycle, time.Since(began).Round(time.Millisecond), len(load.connects), load.joins.Load(), load.refused, joinedAtKill, admitted, full)
	}

	if rejoined == 0 || refusedFull == 0 {
		t.Fatalf("over %d cycles %d lost reservations joined again and %d were refused in a full room; the test must see both", rcCycles, rejoined, refusedFull)
	}

	// Quiescent: the ledger on disk sums to the balance.
	rcWaitNoneJoined(t, p, boot.APIKey, c, rcRooms(all))
	balance := scCheckLive(t, p, boot.APIKey, c)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if st := p.waitExit(20 * time.Second); st.ExitCode() != 0 {
		t.Fatalf("SIGTERM: exit %v\n%s", st, p.logTail())
	}
	ledger, pending := scDisk(t, dir, boot.AccountID)
	if pending != 0 {
		t.Fatalf("%d usage charges were never applied", pending)
	}
	var sum money.Micros
	usage := 0
	for _, en := range ledger {
		sum += blMicros(t, en["amount"])
		if en["type"] == "usage" {
			usage++
		}
	}
	if sum != blMicros(t, balance) {
		t.Fatalf("the %d ledger entries sum to %v, the balance is %s", len(ledger), sum, balance)
	}
	if usage == 0 {
		t.Fatal("no usage was charged: the joins were not metered")
	}
}

// rcWaitNoneJoined waits until no participant of rooms is joined (the
// sessions of the last process were closed at recovery, those of this one
// left) and returns the records as the API shows them.
func rcWaitNoneJoined(t *testing.T, p *binProc, key string, c *http.Client, rooms []string) map[string]rcRecord {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		records := rcLiveParticipants(t, p, key, c, rooms)
		joined := 0
		for _, r := range records {
			if r.Status == "joined" {
				joined++
			}
		}
		if joined == 0 {
			return records
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d participants still joined after 20 s\n%s", joined, p.logTail())
		}
		time.Sleep(50 * time.Millisecond) // polling the server, not a clock
	}
}

// rcLiveParticipants lists the participants of rooms over the API.
func rcLiveParticipants(t *testing.T, p *binProc, key string, c *http.Client, rooms []string) map[string]rcRecord {
	t.Helper()
	out := make(map[string]rcRecord)
	var mu sync.Mutex
	binParallel(len(rooms), func(i int) {
		r, err := binCall(c, "GET", p.Base+"/v1/rooms/"+rooms[i]+"/participants?limit=100", key, nil)
		if err != nil || r.status != 200 {
			t.Errorf("list participants of %s: %v %d %s", rooms[i], err, r.status, r.raw)
			return
		}
		data, _ := r.json["data"].([]any)
		mu.Lock()
		defer mu.Unlock()
		for _, v := range data {
			m := v.(map[string]any)
			out[fmt.Sprint(m["id"])] = rcRecord{ID: fmt.Sprint(m["id"]), RoomID: rooms[i], Status: fmt.Sprint(m["status"])}
		}
	})
	return out
}

// rcRooms is the rooms of connects, each once.
func rcRooms(connects []*rcConnect) []string {
	seen := make(map[string]bool)
	var out []string
	for _, a := range connects {
		if !seen[a.room] {
			seen[a.room] = true
			out = append(out, a.room)
		}
	}
	return out
}

// rcCheckCapsLive checks the caps over the API: the joined participants of
// the load's rooms hold within every cap.
// rcSlotHolders says who holds the project's slots: the participants of
// rooms, by status, and the rooms with a participant joined or connected.
func rcSlotHolders(t *testing.T, p *binProc, key string, c *http.Client, connects []*rcConnect) string {
	t.Helper()
	byStatus := map[string]int{}
	holders := map[string][]string{}
	for id, r := range rcLiveParticipants(t, p, key, c, rcRooms(connects)) {
		byStatus[r.Status]++
		if r.Status == "joined" || r.Status == "connected" {
			holders[r.RoomID] = append(holders[r.RoomID], id+" "+r.Status)
		}
	}
	return fmt.Sprintf("participants by status %v; holding slots, by room: %v", byStatus, holders)
}

func rcCheckCapsLive(t *testing.T, p *binProc, key string, c *http.Client, connects []*rcConnect) error {
	t.Helper()
	records := rcLiveParticipants(t, p, key, c, rcRooms(connects))
	perRoom := make(map[string]int)
	total := 0
	for _, r := range records {
		if r.Status == "joined" {
			perRoom[r.RoomID]++
			total++
		}
	}
	for room, n := range perRoom {
		if n > rcRoomCap {
			return fmt.Errorf("room %s has %d joined", room, n)
		}
	}
	if total > rcProjectQuota {
		return fmt.Errorf("%d joined in the project", total)
	}
	return nil
}
