package actors

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"rtcd/actors/core"
	"rtcd/actors/directory"
	"rtcd/actors/dispatch"
	"rtcd/actors/project"
	"rtcd/actors/room"
	"rtcd/actors/wallet"
	"rtcd/apierr"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/metrics"
	"rtcd/persistence"
	"rtcd/ratelimit"
)

// Named bounds of the engine.
const (
	// mailboxCapacity bounds each actor's mailbox. A sender blocks when it is
	// full (protoactor's Bounded mailbox), so load sheds at the HTTP server's
	// concurrency limit instead of growing memory.
	mailboxCapacity = 4096
	// roomMailboxCapacity bounds the commands queued for one room. Rooms
	// are many, and protoactor's Bounded mailbox allocates its whole ring
	// up front (4096 slots are 96 KiB per idle room), so a room's mailbox
	// grows on demand instead and the bound is enforced where commands are
	// sent: past it a request gets 503 with Retry-After (askRoom) and the
	// sweeper skips the room. Reports from the media node are never refused
	// or blocked: the node's hub must not wait on a room that may be
	// waiting on the node.
	roomMailboxCapacity = 4096
	// askTimeout bounds how long a request waits for its actor; past it the
	// caller gets service_unavailable.
	askTimeout = 10 * time.Second
	// sweepInterval is how often rooms check expiry and passivation.
	sweepInterval = time.Second
	// idempotencySweepInterval is how often projects delete expired
	// idempotency records.
	idempotencySweepInterval = time.Minute
)

// errDirectoryElsewhere answers a dashboard request on a cluster node
// that does not run the directory: it was routed here while the directory
// moved (docs/cluster.md), so a retry reaches its new node.
func errDirectoryElsewhere() *apierr.Error {
	e := apierr.New(apierr.ServiceUnavailable, "the node serving the dashboard is changing; retry shortly")
	e.RetryAfterSeconds = 1
	return e
}

// crashForTest makes an actor panic, so tests can prove that protoactor's
// restart (same actor value, Started again) recovers without counting
// anything twice. Unexported: nothing outside this package can send it.
// The registry's receive middleware panics on it before the actor sees
// it, so the actors know nothing of it.
type crashForTest struct{}

// crashOnRequest is the receive middleware of every actor the registry
// spawns (see crashForTest).
func crashOnRequest(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		if _, ok := env.Message.(crashForTest); ok {
			panic("actors: crash requested by a test") // exercises restart after a panic
		}
		next(c, env)
	}
}

// Engine runs the actors and is the API the HTTP layer calls. It is also
// the actors' Registry: it spawns them, finds them by address, and holds
// the handles of the live ones. It holds no state an actor owns.
type Engine struct {
	env    *core.Env
	system *actor.ActorSystem

	wallets  sync.Map // account id -> *walletHandle
	projects sync.Map // project id -> *projectHandle
	rooms    sync.Map // room id -> *roomHandle (live room actors only)

	// Mailbox depths, read by package metrics.
	projectMailbox   atomic.Int64
	roomMailbox      atomic.Int64
	walletMailbox    atomic.Int64
	directoryMailbox atomic.Int64

	dispatcher *dispatch.Dispatcher

	// connectEndpoint is the media URL of connect sessions, encoded once.
	connectEndpoint atomic.Pointer[encodedEndpoint]

	// directory is the actor owning users, sessions, workspaces, members
	// and invitations (nil on a cluster node the directory is not placed
	// on); sessions is what it publishes for authentication.
	directory atomic.Pointer[actor.PID]
	sessions  *core.Sessions
	// peers reaches the other nodes of a cluster (nil on a single node).
	peers     Peers
	mailer    atomic.Pointer[Mailer]
	mailQueue chan outgoingMail
	mailDone  chan struct{}

	// placing serializes placing and releasing workspaces (cluster mode);
	// the caches name the workspace of a key and of a project.
	placing           sync.Mutex
	placingDirectory  sync.Mutex // the directory's, apart: it never waits for a workspace's recovery
	keyWorkspaces     placementCache
	projectWorkspaces placementCache

	stop chan struct{}
	done chan struct{}
}

type walletHandle struct {
	pid  *actor.PID
	gate *core.CreditGate
}

type projectHandle struct {
	pid  *actor.PID
	gate *core.ProjectGate
}

type roomHandle struct {
	pid       *actor.PID
	projectID string
	gate      *room.Gate   // what the room publishes for the connect path
	depth     atomic.Int64 // messages queued in its mailbox (roomMailboxCapacity)
}

// New returns an engine over store, counting into m (nil: collectors
// nobody serves). Call Start before use.
func New(s core.Settings, store persistence.Storage, clk clock.Clock, limiter ratelimit.Store, keys auth.Keys, m *metrics.Metrics) (*Engine, error) {
	env, err := core.NewEnv(s, store, clk, limiter, keys, m)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		env:    env,
		system: actor.NewActorSystem(actor.WithLoggerFactory(quietActorLogger)),
		stop:   make(chan struct{}), done: make(chan struct{}),
		sessions:  &core.Sessions{},
		mailQueue: make(chan outgoingMail, mailQueueCapacity),
		mailDone:  make(chan struct{}),
	}
	env.Registry = registry{e}
	e.dispatcher = dispatch.New(env)
	return e, nil
}

// Start recovers every project and its live rooms from their snapshots and
// journals, and returns once all are ready to serve.
func (e *Engine) Start() error {
	e.system.EventStream.Subscribe(e.onDeadLetter)
	var accountIDs []string
	err := e.env.Store.Scan([]byte(persistence.PrefixAccount), 0, func(key, _ []byte) bool {
		accountIDs = append(accountIDs, string(key[len(persistence.PrefixAccount):]))
		return true
	})
	if err != nil {
		return err
	}
	// Wallets first: every project links to its workspace's credit gate.
	wallets := &core.Recovery{}
	for _, id := range accountIDs {
		e.spawnWallet(id, wallets)
	}
	if err := wallets.Wait(); err != nil {
		return err
	}
	var projectIDs []string
	err = e.env.Store.Scan([]byte(persistence.PrefixProject), 0, func(key, _ []byte) bool {
		projectIDs = append(projectIDs, string(key[len(persistence.PrefixProject):]))
		return true
	})
	if err != nil {
		return err
	}
	// Each project spawns its live rooms into the same recovery.
	projects := &core.Recovery{}
	for _, id := range projectIDs {
		e.spawnProject(id, nil, projects)
	}
	if err := projects.Wait(); err != nil {
		return err
	}
	// Every project has published its keys: index those of a store
	// written before the index existed.
	if err := e.ensureKeyHashIndex(); err != nil {
		return fmt.Errorf("key-hash index: %w", err)
	}
	if err := e.ensureProjectIndexes(); err != nil {
		return err
	}
	// The directory last: creating a workspace or project spawns wallet
	// and project actors, which must not race the recovery of their peers.
	directory := &core.Recovery{}
	e.spawnDirectory(directory)
	if err := directory.Wait(); err != nil {
		return err
	}
	e.startLoops()
	return nil
}

// startLoops starts what runs beside the actors once they are recovered.
func (e *Engine) startLoops() {
	// Silence of the media node counts from now: a node that never reports
	// after this start is treated as gone after room.MediaPresenceTimeout.
	e.env.Media.Presence(e.env.Clock.Now(), e.env.Clock.Monotonic())
	go e.sweepLoop()
	go e.mailLoop()
}

// Stop stops the sweeper and every actor, and returns only once no actor is
// running, so that no actor commits to the store after Stop (Store.Close
// requires it). In-flight replies that wait for a sync are still delivered by
// the store's syncer until the store closes; messages the syncer's callbacks
// send to stopped actors (roomClosed) are dropped and re-derived at recovery.
//
// Rooms apply every message sent to them before Stop first: a poison pill
// queues behind them, where protoactor's stop, a system message, would
// overtake them. That is what lets a shutting-down media node's leave
// reports (node_shutdown) finalize usage: they are handed over just before
// Stop. Room handlers never wait on another actor, so the drain ends; a
// drain longer than the future's timeout ends in a plain stop.
func (e *Engine) Stop() {
	close(e.stop)
	<-e.done
	<-e.mailDone
	e.dispatcher.Close()
	var stopping []*actor.Future
	if pid := e.directory.Load(); pid != nil {
		// The directory first: it may spawn wallets and projects.
		_ = e.system.Root.StopFuture(pid).Wait()
	}
	var rooms []*actor.PID
	e.rooms.Range(func(_, v any) bool {
		rooms = append(rooms, v.(*roomHandle).pid)
		stopping = append(stopping, e.system.Root.PoisonFuture(v.(*roomHandle).pid))
		return true
	})
	for i, f := range stopping {
		if f.Wait() != nil {
			// The drain outlived the future's timeout: stop the room
			// outright, so no room commits after Stop returns.
			_ = e.system.Root.StopFuture(rooms[i]).Wait()
		}
	}
	stopping = stopping[:0]
	e.projects.Range(func(_, v any) bool {
		stopping = append(stopping, e.system.Root.StopFuture(v.(*projectHandle).pid))
		return true
	})
	e.wallets.Range(func(_, v any) bool {
		stopping = append(stopping, e.system.Root.StopFuture(v.(*walletHandle).pid))
		return true
	})
	for _, f := range stopping {
		_ = f.Wait()
	}
	e.system.Shutdown()
}

// spawnWallet starts a workspace's wallet actor. rec is nil for one
// created at run time.
func (e *Engine) spawnWallet(id string, rec *core.Recovery) *walletHandle {
	h := &walletHandle{gate: &core.CreditGate{}}
	a := wallet.New(e.env, id, h.gate, rec)
	if rec != nil {
		rec.Add()
	}
	// The PID of a named actor is known before it starts, so the handle is
	// complete before the actor can look itself up.
	h.pid = actor.NewPID(e.system.Address(), wallet.Journal(id))
	e.wallets.Store(id, h)
	props := actor.PropsFromProducer(func() actor.Actor { return a },
		actor.WithMailbox(actor.Bounded(mailboxCapacity, depthCounter{&e.walletMailbox})), actor.WithReceiverMiddleware(crashOnRequest))
	if _, err := e.system.Root.SpawnNamed(props, wallet.Journal(id)); err != nil {
		panic(fmt.Sprintf("actors: spawning wallet %s: %v", id, err))
	}
	return h
}

func (e *Engine) wallet(id string) (*walletHandle, bool) {
	v, ok := e.wallets.Load(id)
	if !ok {
		return nil, false
	}
	return v.(*walletHandle), true
}

// spawnProject starts a project's actor. created is the record of a project
// created at run time (nil at recovery): it is published before the handle
// is registered, so nobody who finds the handle sees it without a record
// (the actor's own recovery publishes the same record moments later).
func (e *Engine) spawnProject(id string, created *core.Project, rec *core.Recovery) *projectHandle {
	h := &projectHandle{gate: &core.ProjectGate{}}
	if created != nil {
		p := *created
		h.gate.Record.Store(&p)
	}
	registered := make(chan struct{})
	a := project.New(e.env, id, h.gate, rec, registered)
	if rec != nil {
		rec.Add()
	}
	props := actor.PropsFromProducer(func() actor.Actor { return a },
		actor.WithMailbox(actor.Bounded(mailboxCapacity, depthCounter{&e.projectMailbox})), actor.WithReceiverMiddleware(crashOnRequest))
	pid, err := e.system.Root.SpawnNamed(props, project.Journal(id))
	if err != nil {
		panic(fmt.Sprintf("actors: spawning project %s: %v", id, err)) // names are unique ids: a bug
	}
	h.pid = pid
	e.projects.Store(id, h)
	close(registered) // the actor's recovery may now look its handle up
	return h
}

// spawnRoom starts a room's actor. rec is nil for one created at run time
// (its snapshot is in the batch that created it).
func (e *Engine) spawnRoom(id string, project *projectHandle, projectID string, rec *core.Recovery) {
	if rec != nil {
		rec.Add()
	}
	h := &roomHandle{projectID: projectID, gate: room.NewGate(id, project.gate, &e.env.Gauges.ActiveParticipants)}
	a := room.New(e.env, id, projectID, project.gate, h.gate, rec)
	props := actor.PropsFromProducer(func() actor.Actor { return a },
		actor.WithMailbox(actor.Unbounded(depthCounter{&e.roomMailbox}, depthCounter{&h.depth})), actor.WithReceiverMiddleware(crashOnRequest))
	pid, err := e.system.Root.SpawnNamed(props, room.Journal(id))
	if err != nil {
		panic(fmt.Sprintf("actors: spawning room %s: %v", id, err))
	}
	h.pid = pid
	e.rooms.Store(id, h)
}

// registry is the Engine as its actors see it (Registry).
type registry struct{ e *Engine }

func (r registry) ProjectGate(projectID string) (*core.ProjectGate, bool) {
	h, ok := r.e.project(projectID)
	if !ok {
		return nil, false
	}
	return h.gate, true
}

func (r registry) CreditGate(accountID string) (*core.CreditGate, bool) {
	h, ok := r.e.wallet(accountID)
	if !ok {
		return nil, false
	}
	return h.gate, true
}

func (r registry) RoomLive(roomID string) bool {
	_, ok := r.e.room(roomID)
	return ok
}

func (r registry) Send(to core.Address, msg any) {
	if pid := r.e.pidOf(to); pid != nil {
		r.e.system.Root.Send(pid, msg)
	}
}

// Post sends from a goroutine of its own: the sender never waits on a
// full mailbox (protoactor's Bounded mailbox blocks the sender).
func (r registry) Post(to core.Address, msg any) { go r.Send(to, msg) }

func (r registry) Request(to core.Address, msg any, answer func(core.Reply)) {
	pid := r.e.pidOf(to)
	if pid == nil && to.Kind == core.KindProject && r.e.peers != nil {
		// On a cluster node the project may run on its workspace's node
		// (the directory archiving it).
		go answer(r.e.askProject(to.ID, msg))
		return
	}
	if pid == nil {
		go answer(core.Reply{Gone: true})
		return
	}
	env, ch := core.NewEnvelope(msg)
	r.e.system.Root.Send(pid, env)
	go func() { answer(<-ch) }() // every envelope is answered, a dead letter's as Gone
}

func (r registry) SpawnRoom(roomID, projectID string, rec *core.Recovery) {
	h, ok := r.e.project(projectID)
	if !ok {
		panic(fmt.Sprintf("actors: assertion failed: room %s spawned for project %s, which has no actor", roomID, projectID))
	}
	r.e.spawnRoom(roomID, h, projectID, rec)
}

// SpawnProject and SpawnWallet of a project or workspace the directory
// created (rec nil) start nothing on a cluster node: its workspace's node
// starts it from the store at its first request there (placedProject,
// PlaceWorkspace).
func (r registry) SpawnProject(projectID string, created *core.Project, rec *core.Recovery) {
	if rec == nil && r.e.env.Clustered {
		return
	}
	r.e.spawnProject(projectID, created, rec)
}

func (r registry) SpawnWallet(accountID string, rec *core.Recovery) {
	if rec == nil && r.e.env.Clustered {
		return
	}
	r.e.spawnWallet(accountID, rec)
}

func (r registry) RoomStopped(roomID string) {
	r.e.rooms.Delete(roomID)
	r.e.env.Media.ForgetRoom(roomID)
}

func (r registry) EndpointWorkers(enabled, disabled []*core.WebhookEndpoint) {
	r.e.dispatcher.EnsureWorkers(enabled)
	r.e.dispatcher.IdleWorkers(disabled)
}

// pidOf is the actor at an address, nil when it has none.
func (e *Engine) pidOf(to core.Address) *actor.PID {
	switch to.Kind {
	case core.KindRoom:
		if h, ok := e.room(to.ID); ok {
			return h.pid
		}
	case core.KindProject:
		if h, ok := e.project(to.ID); ok {
			return h.pid
		}
	case core.KindWallet:
		if h, ok := e.wallet(to.ID); ok {
			return h.pid
		}
	case core.KindDirectory:
		return e.directory.Load()
	}
	return nil
}

// sweepLoop asks every live room to check its expiry and passivation, on a
// real ticker; the rooms compare against the injected clock.
func (e *Engine) sweepLoop() {
	defer close(e.done)
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	lastIdempotencySweep := e.env.Clock.Now()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
			e.sweepRooms()
			e.wallets.Range(func(_, v any) bool {
				e.system.Root.Send(v.(*walletHandle).pid, core.Sweep{})
				return true
			})
			if pid := e.directory.Load(); pid != nil { // a cluster node may run none
				e.system.Root.Send(pid, core.Sweep{})
			}
			if now := e.env.Clock.Now(); now.Sub(lastIdempotencySweep) >= idempotencySweepInterval {
				lastIdempotencySweep = now
				// Rate counters of past windows are dropped once a minute.
				if sw, ok := e.env.Limiter.(interface{ Sweep(time.Time) int }); ok {
					sw.Sweep(now)
				}
				e.projects.Range(func(_, v any) bool {
					e.system.Root.Send(v.(*projectHandle).pid, core.Sweep{})
					return true
				})
			}
		}
	}
}

// sweepRooms asks every live room to sweep, except a room with
// roomMailboxCapacity messages queued: its sweep would only queue behind
// them (it runs again next second), and Send must not grow its mailbox.
func (e *Engine) sweepRooms() {
	e.rooms.Range(func(_, v any) bool {
		if h := v.(*roomHandle); h.depth.Load() < roomMailboxCapacity {
			e.system.Root.Send(h.pid, core.Sweep{})
		}
		return true
	})
}

// --- asking actors ---------------------------------------------------------

// Result is an operation's outcome as the HTTP layer sees it.
type Result struct {
	Status   int
	Body     []byte
	Replayed bool
}

// ask sends msg to pid in an envelope and waits for its answer, at most
// askTimeout.
func (e *Engine) ask(pid *actor.PID, msg any) core.Reply {
	env, answer := core.NewEnvelope(msg)
	e.system.Root.Send(pid, env)
	t := time.NewTimer(askTimeout)
	defer t.Stop()
	select {
	case r := <-answer:
		return r
	case <-t.C:
		return core.Reply{Err: core.ErrUnavailable}
	}
}

// onDeadLetter answers commands sent to an actor that stopped (a passivated
// room) so the caller does not wait for the timeout; the caller then falls
// back to the stored record.
func (e *Engine) onDeadLetter(evt any) {
	dl, ok := evt.(*actor.DeadLetterEvent)
	if !ok {
		return
	}
	msg := dl.Message
	if env, ok := msg.(*actor.MessageEnvelope); ok {
		msg = env.Message
	}
	if env, ok := msg.(*core.Envelope); ok {
		env.Respond(core.Reply{Gone: true})
	}
}

func (e *Engine) project(id string) (*projectHandle, bool) {
	v, ok := e.projects.Load(id)
	if !ok {
		return nil, false
	}
	return v.(*projectHandle), true
}

func (e *Engine) room(id string) (*roomHandle, bool) {
	v, ok := e.rooms.Load(id)
	if !ok {
		return nil, false
	}
	return v.(*roomHandle), true
}

// --- mailbox depth ---------------------------------------------------------

// depthCounter is a mailbox middleware that keeps the number of queued user
// messages of one actor kind, for the rtcd_actor_mailbox_depth gauge.
type depthCounter struct{ n *atomic.Int64 }

func (d depthCounter) MailboxStarted()     {}
func (d depthCounter) MessagePosted(any)   { d.n.Add(1) }
func (d depthCounter) MessageReceived(any) { d.n.Add(-1) }
func (d depthCounter) MailboxEmpty()       {}
func quietActorLogger(*actor.ActorSystem) *slog.Logger {
	return slog.Default().With("component", "actor")
}

// Stats is a point-in-time reading for the metrics package.
type Stats struct {
	ActiveRooms, ActiveParticipants       int64
	ProjectMailboxDepth, RoomMailboxDepth int64
}

// Stats reads the engine's gauges.
func (e *Engine) Stats() Stats {
	return Stats{
		ActiveRooms: e.env.Gauges.ActiveRooms.Load(), ActiveParticipants: e.env.Gauges.ActiveParticipants.Load(),
		ProjectMailboxDepth: e.projectMailbox.Load(), RoomMailboxDepth: e.roomMailbox.Load(),
	}
}

// Region is the server's configured region ("" on an engine that was never
// started: the route table is built over one to list the routes).
func (e *Engine) Region() string {
	if e.env == nil {
		return ""
	}
	return e.env.Settings.Region
}

// askDirectory is ask of the directory: a cluster node that does not run
// it answers that it moved.
func (e *Engine) askDirectory(msg any) core.Reply {
	pid := e.directory.Load()
	if pid == nil {
		return core.Reply{Err: errDirectoryElsewhere()}
	}
	return e.ask(pid, msg)
}

func (e *Engine) spawnDirectory(rec *core.Recovery) {
	a := directory.New(e.env, e.sessions, e.projectRecord, rec)
	rec.Add()
	props := actor.PropsFromProducer(func() actor.Actor { return a },
		actor.WithMailbox(actor.Bounded(mailboxCapacity, depthCounter{&e.directoryMailbox})), actor.WithReceiverMiddleware(crashOnRequest))
	pid, err := e.system.Root.SpawnNamed(props, directory.Journal())
	if err != nil {
		panic(fmt.Sprintf("actors: spawning the directory: %v", err))
	}
	e.directory.Store(pid)
}
