package sim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"math/rand"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/goccy/go-json"
	"rtcd/actors"
	"rtcd/actors/core"
	"rtcd/actors/directory"
	"rtcd/actors/dispatch"
	"rtcd/actors/project"
	"rtcd/actors/room"
	"rtcd/actors/wallet"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/ids"
	"rtcd/internal/walgate"
	"rtcd/money"
	"rtcd/persistence"
	"rtcd/ratelimit"
	"rtcd/webhookdelivery"
	"rtcd/webhooksig"
)

// Config is one run of the simulation.
type Config struct {
	// Seed decides everything: the settings' snapshot interval, every
	// operation and its arguments, the clock's steps, the durable points,
	// the crashes and the receiver's answers (and, through ids.Seed,
	// every id).
	Seed int64
	// Steps is how many operations run; 0 means DefaultSteps.
	Steps int
	// Trace, when set, is given every line of the trace as it is written
	// (a replayed seed prints them).
	Trace func(line string)
}

// DefaultSteps is the length of a run: long enough for rooms to fill,
// wallets to run dry and several crashes, short enough that a few hundred
// seeds run within seconds.
const DefaultSteps = 150

// Result is what a run did and found.
type Result struct {
	Seed int64
	// TraceHash is the SHA-256 of the trace: every operation, its target
	// and its outcome, every crash and what it lost. The same seed gives
	// the same hash.
	TraceHash     string
	Steps         int
	Crashes       int
	DurablePoints int
	// Outcomes counts the operations by name and outcome ("connect 200",
	// "connect quota_exceeded"): what the run covered.
	Outcomes map[string]int
	// Err is the first invariant the run found broken, nil when none.
	Err error
}

// The world's settings. Small caps, so runs reach them; a price of 1000
// micro-units per participant-second (60000 per minute, whole micro-units
// per second), so every charge is exact; little credit, so wallets run
// dry and top-ups and adjustments matter.
var (
	simLimits = core.Limits{MaxActiveRooms: 3, MaxActiveParticipants: 4, MaxParticipantsPerRoom: 3,
		RoomCreatesPerMinute: 30, ParticipantCreatesPerMinute: 60, ConnectRequestsPerMinute: 120}
	simBilling = core.Billing{Enabled: true, Currency: "USD", ParticipantMinutePrice: 60000,
		LowCreditThreshold: 2 * money.MicrosPerUnit, MinimumCreditToStart: money.MicrosPerUnit / 2,
		SettleInterval: 30 * time.Second, TopupExpiry: 10 * time.Minute, BootstrapCredit: money.MicrosPerUnit}
	// microsPerSecond is what one participant-second costs.
	microsPerSecond = int64(simBilling.ParticipantMinutePrice) / 60
	// deliverySchedule is the webhook retry schedule (seconds).
	deliverySchedule = []int{30, 120, 600}
	// deliveryWindows are the windows of webhook attempts in flight per
	// endpoint the seeds take in turn: with one, the receiver also checks
	// the order of each room's events.
	deliveryWindows = []int{1, 3, 8}
	t0              = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
)

// world is one run: the store on its crashable file system, the current
// generation of the runtime, the model of what the simulated clients were
// told, the facts that must survive, and the trace.
type world struct {
	cfg      Config
	rng      *rand.Rand
	clk      *clock.Fake
	keys     auth.Keys
	settings core.Settings
	receiver *receiver

	fs    *vfs.MemFS
	gate  *walgate.Gate
	store *persistence.Store
	rt    *system

	m           model
	facts       []fact
	outstanding []*pendingOp
	// durable is each owner's state at the last durable point, as its
	// snapshot encodes it: what a crash from here must recover.
	durable map[string][]byte
	// admitted is, for each session a room admitted to the media node,
	// the generation (crashes before) of its last admission.
	admitted map[string]int
	// staleJoins are the sessions last reported (mediaJoin) while their
	// room knew a later one, with that later session ("": not stale).
	staleJoins map[string]string

	step             int
	lastDurableStep  int
	lastProjectSweep time.Time
	trace            hash.Hash
	res              *Result
	failure          error
}

// pendingOp is an operation waiting for its answer.
type pendingOp struct {
	name, target string
	room         string // the room a room command went to
	answer       <-chan core.Reply
	ok           func(body []byte) // on a 2xx answer: learn ids, note facts
	then         func(core.Reply)  // on any answer, after ok
}

// fact is something an acknowledgement promised, checked after every
// recovery.
type fact struct {
	what  string
	holds func(v *view) error
}

// stopRun ends a run at the first broken invariant.
type stopRun struct{ err error }

// hangTimeout bounds one run: a run takes well under a second (a few with
// the race detector), and one that hangs (an owner, or Pebble, waiting
// for something the simulation holds) must name its seed rather than
// wait for the test binary's timeout.
const hangTimeout = 2 * time.Minute

// ReplayCommand is the one line that replays seed (with steps operations,
// 0 for DefaultSteps) and prints its trace.
func ReplayCommand(seed int64, steps int) string {
	cmd := fmt.Sprintf("go test ./sim -run 'TestSimulate$' -count=1 -v -sim.seed=%d", seed)
	if steps != 0 {
		cmd += fmt.Sprintf(" -sim.steps=%d", steps)
	}
	return cmd
}

// Run runs one seed and reports what it found. Runs must not overlap: ids
// and planted bugs are process-wide.
func Run(cfg Config) (res Result) {
	if cfg.Steps <= 0 {
		cfg.Steps = DefaultSteps
	}
	res = Result{Seed: cfg.Seed, Outcomes: map[string]int{}}
	restore := ids.Seed(uint64(cfg.Seed))
	defer restore()
	w := &world{cfg: cfg, rng: rand.New(rand.NewSource(cfg.Seed)), clk: clock.NewFake(t0), trace: sha256.New(),
		durable: map[string][]byte{}, admitted: map[string]int{}, staleJoins: map[string]string{}, res: &res, receiver: newReceiver(cfg.Seed, deliveryWindows[uint64(cfg.Seed)%uint64(len(deliveryWindows))])}
	hung := time.AfterFunc(hangTimeout, func() {
		panic(fmt.Sprintf("sim: seed %d did not finish within %s (it hangs); replay: %s", cfg.Seed, hangTimeout, ReplayCommand(cfg.Seed, cfg.Steps)))
	})
	defer hung.Stop()
	defer func() {
		if p := recover(); p != nil {
			if s, ok := p.(stopRun); ok {
				res.Err = s.err
			} else {
				res.Err = fmt.Errorf("step %d: panic: %v\n%s", w.step, p, debug.Stack())
			}
		}
		w.close()
		res.TraceHash = hex.EncodeToString(w.trace.Sum(nil))
	}()
	w.start()
	for w.step = 1; w.step <= cfg.Steps; w.step++ {
		w.pick().run(w)
		w.settle()
		if w.step-w.lastDurableStep >= maxWindowSteps {
			w.tracef("durable (window) waiting=%d", len(w.outstanding))
			w.durablePoint()
		}
		res.Steps = w.step
	}
	w.step = cfg.Steps + 1
	w.durablePointThen(func() { w.checkAll("the end") })
	w.crash() // a last crash: everything acknowledged survives it
	return res
}

// fail stops the run: an invariant is broken.
func (w *world) fail(format string, args ...any) {
	w.tracef("FAIL "+format, args...)
	panic(stopRun{fmt.Errorf("step %d: "+format, append([]any{w.step}, args...)...)})
}

func (w *world) tracef(format string, args ...any) {
	line := fmt.Sprintf("%d ", w.step) + fmt.Sprintf(format, args...)
	w.trace.Write([]byte(line))
	w.trace.Write([]byte{'\n'})
	if w.cfg.Trace != nil {
		w.cfg.Trace(line)
	}
}

// start bootstraps the first workspace (actors.Bootstrap, as `rtcd init`)
// and recovers it.
func (w *world) start() {
	var err error
	if w.keys, err = auth.DeriveKeys(bytes.Repeat([]byte{7}, 32)); err != nil {
		panic(err)
	}
	w.settings = core.Settings{Region: "global", MediaURL: "ws://127.0.0.1:1/rtc", DefaultLimits: simLimits,
		ConnectPerIPPerMinute: 120, MediaTokenTTL: time.Minute,
		// From one snapshot per event to one per 24: both recovery paths.
		SnapshotEveryEvents: 1 + w.rng.Intn(24), Billing: simBilling}
	w.tracef("settings snapshot_every_events=%d", w.settings.SnapshotEveryEvents)
	w.fs = vfs.NewCrashableMem()
	w.open()
	boot, err := actors.Bootstrap(w.store, w.keys, w.clk, simBilling, "owner@sim.test")
	if err != nil {
		panic(err)
	}
	w.gate.Hold()
	w.newGeneration()
	if err := w.rt.recoverAll(); err != nil {
		w.fail("recovery after bootstrap: %v", err)
	}
	var dir directory.State
	if err := json.Unmarshal(w.rt.readState(w.rt.directory), &dir); err != nil {
		panic(err)
	}
	for id := range dir.Users {
		w.m.owner = id
	}
	w.m.accounts = []string{boot.AccountID}
	w.m.projects = []*simProject{{id: boot.ProjectID, account: boot.AccountID}}
	w.m.keys = []*simKey{{id: boot.APIKeyID, project: boot.ProjectID}}
	w.tracef("bootstrap account=%s project=%s owner=%s", boot.AccountID, boot.ProjectID, w.m.owner)
	w.durablePoint()
	w.lastProjectSweep = w.clk.Now()
}

// open opens the store on w.fs, behind a WAL gate that is open.
func (w *world) open() {
	w.gate = walgate.Wrap(w.fs)
	s, err := persistence.OpenWith("db", persistence.Options{FS: w.gate.FS}, persistence.Metrics{}, func(err error) {
		// A WAL sync cannot fail on the in-memory file system; if it did,
		// the run is wrong, not the code under test.
		panic(fmt.Sprintf("sim: store fatal: %v", err))
	})
	if err != nil {
		panic(err)
	}
	w.store = s
}

func (w *world) newGeneration() {
	env, err := core.NewEnv(w.settings, w.store, w.clk, ratelimit.NewMemory(), w.keys, nil)
	if err != nil {
		panic(err)
	}
	w.rt = newSystem(env, w.receiver, dispatch.Settings{ScheduleSeconds: deliverySchedule, WindowAttempts: w.receiver.window})
}

func (w *world) close() {
	if w.rt != nil {
		w.rt.mu.Lock()
		w.rt.dead = true
		w.rt.mu.Unlock()
	}
	if w.gate != nil {
		w.gate.Release()
	}
	if w.store != nil {
		_ = w.store.Close()
	}
}

// ask sends a command to the actor at to and notes it as waiting for its
// answer; ok runs on a 2xx answer.
func (w *world) ask(name, target string, to core.Address, msg any, ok func(body []byte)) {
	w.tracef("%s %s", name, target)
	op := &pendingOp{name: name, target: target, answer: w.rt.ask(to, msg), ok: ok}
	if to.Kind == core.KindRoom {
		op.room = to.ID
	}
	w.outstanding = append(w.outstanding, op)
}

// settle runs what the last operation set off and takes the answers that
// arrived (refusals at once; changes only at a durable point).
func (w *world) settle() {
	for {
		w.rt.drain()
		w.takeMediaAnswers()
		if !w.takeAnswers() {
			return
		}
	}
}

// takeAnswers takes the answers that arrived, relayed ones included (an
// actor's answer to another's request), without running anything else;
// it reports whether any arrived.
func (w *world) takeAnswers() bool {
	any := false
	for {
		relayed := w.rt.answerRequests()
		answered := false
		waiting := w.outstanding[:0]
		for _, op := range w.outstanding {
			select {
			case r := <-op.answer:
				w.answered(op, r)
				answered = true
			default:
				waiting = append(waiting, op)
			}
		}
		w.outstanding = waiting
		if !relayed && !answered {
			return any
		}
		any = true
	}
}

func (w *world) answered(op *pendingOp, r core.Reply) {
	outcome := ""
	switch {
	case r.Gone:
		outcome = "gone"
	case r.Err != nil:
		outcome = string(r.Err.Code)
		if name, ok := r.Err.Details["limit_name"].(string); ok {
			outcome += "/" + name
		}
	default:
		outcome = fmt.Sprint(r.Status)
	}
	w.res.Outcomes[op.name+" "+outcome]++
	if r.Gone && op.room != "" {
		w.forgetRoom(op.room)
	}
	if id := idOf(r.Body); id != "" && r.Status == 201 {
		outcome += " " + id
	}
	w.tracef("%s %s -> %s", op.name, op.target, outcome)
	if r.Err == nil && !r.Gone && op.ok != nil {
		op.ok(r.Body)
	}
	if op.then != nil {
		op.then(r)
	}
}

// The WAL is never let near a rotation while its syncs are held: Pebble's
// first memtable of a process holds 256 KiB, and later ones more. A
// durable point flushes the memtable once the WAL holds flushWALBytes, and
// one comes at least every maxWindowSteps operations, which write far
// less than the rest (a step writes a few batches of a few KiB).
const (
	flushWALBytes  = 16 << 10
	maxWindowSteps = 8
)

// replayEvery is how often (in durable points) the owners that ran are
// replayed and compared with their live state then and there. Every
// crash replays every owner and compares it with its live state at the
// last durable point, so a difference is found at the latest there (and
// every run ends with a crash); between, one point in replayEvery finds
// it sooner, at a third of the cost of replaying at each.
const replayEvery = 3

// durablePoint lets the held WAL syncs through and waits until every
// batch applied so far is durable (the answers waiting for them arrive),
// then holds the syncs again. The state of each owner that ran since the
// last durable point is remembered as what a crash from here must
// recover (and, one point in replayEvery, compared with what its journal
// replays). Then the answers are taken, and what they set off runs (into
// the next durable point).
func (w *world) durablePoint() { w.durablePointThen(nil) }

// durablePointThen is durablePoint, running check while the store holds
// exactly the durable state (before the answers set anything off).
func (w *world) durablePointThen(check func()) {
	w.rt.media.waitingForDurable(true)
	w.gate.Release()
	done := make(chan struct{})
	w.store.AfterDurable(func() { close(done) })
	<-done
	w.rt.media.waitingForDurable(false)
	// While the syncs pass: a WAL rotation (the memtable full) waits for
	// the old WAL's syncs, and would wait forever for held ones.
	if _, err := w.store.FlushIfWALOver(flushWALBytes); err != nil {
		panic(err)
	}
	w.gate.Hold()
	w.takeMediaAnswers() // the admissions of the joins now durable
	w.res.DurablePoints++
	w.lastDurableStep = w.step
	names := make([]string, 0, len(w.rt.touched))
	for name := range w.rt.touched {
		names = append(names, name)
	}
	sort.Strings(names)
	compare := check != nil || w.res.DurablePoints%replayEvery == 0
	for _, name := range names {
		live := w.rt.readState(w.rt.touched[name])
		if compare {
			replayed, err := replay(w.store, name)
			if err != nil {
				w.fail("replay of %s: %v", name, err)
			}
			if !bytes.Equal(live, replayed) {
				w.fail("replaying %s does not give the live state:\nlive     %s\nreplayed %s", name, live, replayed)
			}
		}
		if strings.HasPrefix(name, "room/") {
			w.checkRoom(name, live) // at once, not only at the next recovery
		}
		w.durable[name] = live
	}
	clear(w.rt.touched)
	if check != nil {
		w.takeAnswers() // every fact of what is durable is noted
		check()
	}
	w.settle()
}

// crash loses power: only what was synced survives (the crash clone,
// taken while the WAL syncs are held). The old generation is closed (its
// late answers reach nobody), the store reopened on the clone, every
// owner recovered in the engine's order, and everything checked.
func (w *world) crash() {
	w.res.Crashes++
	clone := w.fs.CrashClone(vfs.CrashCloneCfg{})
	lost := make([]string, 0, len(w.outstanding))
	for _, op := range w.outstanding {
		lost = append(lost, op.name+" "+op.target)
	}
	w.tracef("crash lost=%d %s", len(lost), strings.Join(lost, ", "))
	w.outstanding = nil
	for _, ik := range w.m.idem {
		ik.waiting = false // its answer is lost, and the project's in-flight mark with it
	}
	w.rt.mu.Lock()
	w.rt.dead = true
	w.rt.queue = nil
	w.rt.mu.Unlock()
	w.rt.media.kill() // the embedded node dies with the process
	w.gate.Release()
	_ = w.store.Close()

	w.fs = clone
	// A restart takes a while: the clock moves on (and the new process's
	// creation instants start after the old one's).
	w.clk.Advance(time.Duration(1+w.rng.Intn(20)) * time.Second)
	w.open()
	w.checkRecoveredIsDurable()
	w.gate.Hold()
	w.newGeneration()
	if err := w.rt.recoverAll(); err != nil {
		w.fail("recovery: %v", err)
	}
	w.durablePointThen(func() {
		w.checkAll("recovery")
		w.checkReservationsGone()
	})
	w.tracef("recovered %s", w.summary())
}

// checkRecoveredIsDurable: what recovery will rebuild is, owner by owner,
// exactly the state at the last durable point; no owner is lost and none
// appears that was not durable.
func (w *world) checkRecoveredIsDurable() {
	found := map[string]bool{}
	for _, name := range snapshotNames(w.store) {
		found[name] = true
		want, ok := w.durable[name]
		if !ok {
			w.fail("after the crash %s exists, but it was never durable", name)
		}
		got, err := replay(w.store, name)
		if err != nil {
			w.fail("after the crash, replay of %s: %v", name, err)
		}
		if !bytes.Equal(got, want) {
			w.fail("after the crash %s is not its state at the last durable point:\ndurable   %s\nrecovered %s", name, want, got)
		}
	}
	for name := range w.durable {
		if !found[name] {
			w.fail("after the crash %s is gone, though it was durable", name)
		}
	}
}

// summary is a short, deterministic reading of the recovered world for
// the trace: each wallet's balance, each room's status and slots.
func (w *world) summary() string {
	var parts []string
	for _, n := range w.rt.liveNodes() {
		switch n.addr.Kind {
		case "wallet":
			var s walletSnap
			_ = json.Unmarshal(w.durable[n.name], &s)
			parts = append(parts, fmt.Sprintf("%s=%d", n.name, s.Balance))
		case "room":
			var s roomSnap
			_ = json.Unmarshal(w.durable[n.name], &s)
			parts = append(parts, fmt.Sprintf("%s=%s/%d", n.name, s.Room.Status, s.joined()))
		}
	}
	return strings.Join(parts, " ")
}

// replay is what recovery rebuilds for the owner name (a journal name).
func replay(store *persistence.Store, name string) ([]byte, error) {
	kind, id, _ := strings.Cut(name, "/")
	switch kind {
	case "room":
		return room.Replay(store, id)
	case "project":
		return project.Replay(store, id)
	case "wallet":
		return wallet.Replay(store, id)
	case "directory":
		return directory.Replay(store)
	}
	return nil, fmt.Errorf("no owner is named %q", name)
}

// snapshotNames is every owner in the store: each has a snapshot (s/).
func snapshotNames(store *persistence.Store) []string {
	return scanNames(store, "s/")
}

// receiver is the webhook receiver: it answers each attempt by a rule of
// the seed (one in four fails), and keeps how often it accepted each
// event at each endpoint: at most once, whatever crashes. With a window of
// one attempt in flight per endpoint, attempts arrive in the order they
// start, so it also checks that the first attempts of one room's events
// to an endpoint arrive in sequence order (a retry comes when it comes).
type receiver struct {
	seed     int64
	window   int // the dispatcher's window of attempts in flight per endpoint
	mu       sync.Mutex
	accepted map[string]int // url + " " + event id -> 2xx answers
	seen     map[string]bool
	lastSeq  map[string]int // url + " " + room id -> the sequence of the room's latest first attempt there
	disorder []string       // first attempts that arrived after a later event of their room
}

func newReceiver(seed int64, window int) *receiver {
	return &receiver{seed: seed, window: window, accepted: map[string]int{}, seen: map[string]bool{}, lastSeq: map[string]int{}}
}

func (r *receiver) Deliver(_ context.Context, url string, headers map[string]string, body []byte) webhookdelivery.Attempt {
	var ev core.OutboxEvent
	_ = json.Unmarshal(body, &ev)
	r.mu.Lock()
	defer r.mu.Unlock()
	if room, _ := ev.Data["room_id"].(string); room != "" && !r.seen[url+" "+ev.ID] {
		r.seen[url+" "+ev.ID] = true
		seq, _ := ev.Data["sequence"].(float64)
		if key := url + " " + room; int(seq) < r.lastSeq[key] {
			r.disorder = append(r.disorder, fmt.Sprintf("%s: %s sequence %d after sequence %d", url, room, int(seq), r.lastSeq[key]))
		} else {
			r.lastSeq[key] = int(seq)
		}
	}
	h := sha256.Sum256([]byte(fmt.Sprintf("%d %s %s %s", r.seed, url, ev.ID, headers[webhooksig.HeaderTimestamp])))
	if h[0]%4 == 0 {
		return webhookdelivery.Attempt{StatusCode: 503, ResponseBody: "busy", Err: "receiver answered 503"}
	}
	r.accepted[url+" "+ev.ID]++
	return webhookdelivery.Attempt{StatusCode: 204, Success: true}
}

func (r *receiver) acceptedCount(url, eventID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.accepted[url+" "+eventID]
}
