package actors

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"rtcd/apierr"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/persistence"
	"rtcd/ratelimit"
	"rtcd/scopes"
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
	// idempotencyRetention is the spec's 24 hours.
	idempotencyRetention = 24 * time.Hour
	// idempotencyInFlightTimeout frees an in-progress key whose request never
	// finished (its caller vanished), so the key does not stay blocked.
	idempotencyInFlightTimeout = time.Minute
	// roomPassivateAfter is how long an ended room's actor stays in memory
	// answering room_ended before it is stopped; later reads use its record.
	roomPassivateAfter = time.Minute
	// sweepInterval is how often rooms check expiry and passivation.
	sweepInterval = time.Second
	// mediaPresenceTimeout: silence of a media node run on its own for this
	// long (on the engine clock's Monotonic reading, since its last presence
	// report or the engine's start) means it is gone, and its participants
	// have left.
	mediaPresenceTimeout = 15 * time.Second
	// idempotencySweepInterval is how often projects delete expired
	// idempotency records.
	idempotencySweepInterval = time.Minute
)

// sweep asks an actor to do its periodic housekeeping.
type sweep struct{}

// crashForTest makes an actor panic, so tests can prove that protoactor's
// restart (same actor value, Started again) recovers without counting
// anything twice. Unexported: nothing outside this package can send it.
type crashForTest struct{}

// Settings are the engine's configuration.
type Settings struct {
	Region                string
	MediaURL              string
	DefaultLimits         Limits // for projects without limits of their own
	ConnectPerIPPerMinute int
	MediaTokenTTL         time.Duration
	SnapshotEveryEvents   int
	Billing               Billing
	// MediaNodeRunsOnItsOwn is true for a media node run in another process
	// (rtcd media, reached through --media-control-url), false for the node
	// embedded in this one. It decides:
	//   - restart: an embedded node's sessions die with the process, so
	//     recovered joined participants are closed at once (at their last
	//     settled instant, so downtime is never billed); a node on its own
	//     keeps its sockets across a control plane restart, so its
	//     presence decides;
	//   - settlement: running sessions on a node on its own are charged no
	//     further than its last presence snapshot (see settleUntil);
	//   - silence: only a node on its own can die while this process runs,
	//     so only its silence (mediaPresenceTimeout) ends the joined
	//     sessions. The embedded node lives and dies with the process; its
	//     reports come through an in-process queue on a real-time ticker,
	//     while the clock it stamps and the engine measures with may be a
	//     test's fake one, running ahead of that ticker: silence it is not.
	MediaNodeRunsOnItsOwn bool
	// WebhookAllowPrivate lets endpoints use http:// and private addresses:
	// for local testing only.
	WebhookAllowPrivate bool
}

// Engine runs the actors and is the API the HTTP layer calls.
type Engine struct {
	settings Settings
	store    *persistence.Store
	system   *actor.ActorSystem
	clock    clock.Clock
	limiter  ratelimit.Store
	keys     auth.Keys
	aead     cipher.AEAD // seals idempotency records
	apiKeys  keyRegistry

	wallets  sync.Map // account id -> *walletHandle
	projects sync.Map // project id -> *projectHandle
	rooms    sync.Map // room id -> *roomHandle (live room actors only)

	recovering sync.WaitGroup

	// Gauges and counters read by package metrics.
	activeRooms        atomic.Int64
	activeParticipants atomic.Int64
	projectMailbox     atomic.Int64
	roomMailbox        atomic.Int64
	walletMailbox      atomic.Int64
	directoryMailbox   atomic.Int64
	connectResults     func(code string) // observes each connect's outcome; may be nil

	dispatcher *dispatcher

	// directory is the actor owning users, sessions, workspaces, members
	// and invitations; directoryShared is what it publishes for
	// authentication.
	directory       *actor.PID
	directoryShared *directoryShared
	mailer          atomic.Pointer[Mailer]
	mailQueue       chan outgoingMail
	mailDone        chan struct{}

	media             atomic.Pointer[MediaEngine]
	lastPresenceNanos atomic.Int64 // the At of the last presence report (at Start: the clock's Now)
	// lastPresenceSeen is the engine clock's Monotonic reading when the last
	// presence report arrived (at Start: when the engine started). Silence
	// is measured from it on the injected clock, so tests move it. Not on
	// the report's At, which is the node's clock (maybe skewed or stepped),
	// and not as a difference of two clock.Now readings: those follow every
	// step of the wall clock (clock.Real.Now carries no monotonic reading),
	// and the wall clock set forward must not look like a silent node and
	// end everyone's session.
	lastPresenceSeen atomic.Int64

	// lastCreatedNanos makes creation times strictly increasing across the
	// process (see createdAt).
	lastCreatedNanos atomic.Int64

	stop chan struct{}
	done chan struct{}
}

type walletHandle struct {
	pid    *actor.PID
	shared *accountShared
}

type projectHandle struct {
	pid    *actor.PID
	shared *projectShared
}

// projectShared is what a project publishes to its rooms: an immutable view
// of its record behind an atomic pointer, and the project-wide active
// participant counter that rooms acquire with compare-and-swap.
type projectShared struct {
	project            atomic.Pointer[Project]
	activeParticipants atomic.Int64
	// endedRooms counts rooms whose end is already visible in their records
	// but which the project has not yet removed from its active rooms (the
	// room tells it only once the end is durable). The max_active_rooms
	// check subtracts them, so a room that reads as ended never holds a slot.
	endedRooms atomic.Int64
	// account is the project's workspace's published credit gate; set by
	// the project's recovery before any of its rooms starts.
	account atomic.Pointer[accountShared]
	// endpoints are the project's enabled webhook endpoints, for the dispatcher.
	endpoints atomic.Pointer[[]*WebhookEndpoint]
	// endpointSnapshots numbers the endpoint snapshots in the order the
	// project actor takes them; publishedSnapshot (guarded by publishMu) is
	// the newest one published. An older snapshot is never published over
	// a newer one (see endpointsSnapshot).
	endpointSnapshots atomic.Uint64
	publishMu         sync.Mutex
	publishedSnapshot uint64
}

type roomHandle struct {
	pid       *actor.PID
	projectID string
	depth     atomic.Int64 // messages queued in its mailbox (roomMailboxCapacity)
}

// New returns an engine over store. Call Start before use.
func New(s Settings, store *persistence.Store, clk clock.Clock, limiter ratelimit.Store, keys auth.Keys) (*Engine, error) {
	idemKey := keys.Idempotency()
	block, err := aes.NewCipher(idemKey[:])
	if err != nil {
		return nil, fmt.Errorf("actors: idempotency cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("actors: idempotency cipher: %w", err)
	}
	e := &Engine{
		settings: s, store: store, clock: clk, limiter: limiter, keys: keys, aead: aead,
		system: actor.NewActorSystem(actor.WithLoggerFactory(quietActorLogger)),
		stop:   make(chan struct{}), done: make(chan struct{}),
		directoryShared: &directoryShared{},
		mailQueue:       make(chan outgoingMail, mailQueueCapacity),
		mailDone:        make(chan struct{}),
	}
	e.apiKeys.init()
	e.dispatcher = newDispatcher(e)
	return e, nil
}

// OnConnectResult registers an observer of connect outcomes ("ok" or an error code).
func (e *Engine) OnConnectResult(f func(code string)) { e.connectResults = f }

// Start recovers every project and its live rooms from their snapshots and
// journals, and returns once all are ready to serve.
func (e *Engine) Start() error {
	e.system.EventStream.Subscribe(e.onDeadLetter)
	var accountIDs []string
	err := e.store.Scan([]byte(persistence.PrefixAccount), 0, func(key, _ []byte) bool {
		accountIDs = append(accountIDs, string(key[len(persistence.PrefixAccount):]))
		return true
	})
	if err != nil {
		return err
	}
	walletErrs := make(chan error, len(accountIDs))
	for _, id := range accountIDs {
		e.spawnWallet(id, walletErrs)
	}
	// Wallets first: every project links to its workspace's credit gate.
	e.recovering.Wait()
	close(walletErrs)
	for err := range walletErrs {
		if err != nil {
			return err
		}
	}
	var projectIDs []string
	err = e.store.Scan([]byte(persistence.PrefixProject), 0, func(key, _ []byte) bool {
		projectIDs = append(projectIDs, string(key[len(persistence.PrefixProject):]))
		return true
	})
	if err != nil {
		return err
	}
	recoveryErrs := make(chan error, len(projectIDs)+1)
	for _, id := range projectIDs {
		e.spawnProject(id, nil, recoveryErrs)
	}
	e.recovering.Wait()
	close(recoveryErrs)
	for err := range recoveryErrs {
		if err != nil {
			return err
		}
	}
	// The directory last: creating a workspace or project spawns wallet
	// and project actors, which must not race the recovery of their peers.
	directoryErrs := make(chan error, 1)
	e.spawnDirectory(directoryErrs)
	e.recovering.Wait()
	close(directoryErrs)
	if err := <-directoryErrs; err != nil {
		return err
	}
	// Silence of the media node counts from now: a node that never reports
	// after this start is treated as gone after mediaPresenceTimeout.
	e.lastPresenceSeen.Store(int64(e.clock.Monotonic()))
	e.lastPresenceNanos.Store(e.clock.Now().UnixNano())
	go e.sweepLoop()
	go e.mailLoop()
	return nil
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
	e.dispatcher.close()
	var stopping []*actor.Future
	if e.directory != nil {
		// The directory first: it may spawn wallets and projects.
		_ = e.system.Root.StopFuture(e.directory).Wait()
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

func (e *Engine) spawnWallet(id string, recoveryErrs chan<- error) *walletHandle {
	h := &walletHandle{shared: &accountShared{}}
	a := &walletActor{e: e, id: id, shared: h.shared, recoveryErrs: recoveryErrs}
	e.recovering.Add(1)
	// The PID of a named actor is known before it starts, so the handle is
	// complete before the actor can look itself up.
	h.pid = actor.NewPID(e.system.Address(), "wallet/"+id)
	e.wallets.Store(id, h)
	props := actor.PropsFromProducer(func() actor.Actor { return a },
		actor.WithMailbox(actor.Bounded(mailboxCapacity, depthCounter{&e.walletMailbox})))
	if _, err := e.system.Root.SpawnNamed(props, "wallet/"+id); err != nil {
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
func (e *Engine) spawnProject(id string, created *Project, recoveryErrs chan<- error) *projectHandle {
	h := &projectHandle{shared: &projectShared{}}
	if created != nil {
		p := *created
		h.shared.project.Store(&p)
	}
	registered := make(chan struct{})
	a := &projectActor{e: e, id: id, shared: h.shared, recoveryErrs: recoveryErrs, registered: registered}
	e.recovering.Add(1)
	props := actor.PropsFromProducer(func() actor.Actor { return a },
		actor.WithMailbox(actor.Bounded(mailboxCapacity, depthCounter{&e.projectMailbox})))
	pid, err := e.system.Root.SpawnNamed(props, "project/"+id)
	if err != nil {
		panic(fmt.Sprintf("actors: spawning project %s: %v", id, err)) // names are unique ids: a bug
	}
	h.pid = pid
	e.projects.Store(id, h)
	close(registered) // the actor's recovery may now look its handle up
	return h
}

func (e *Engine) spawnRoom(id string, project *projectHandle, projectID string, recoveryErrs chan<- error) {
	a := &roomActor{e: e, id: id, project: project.shared, projectID: projectID, recoveryErrs: recoveryErrs}
	if recoveryErrs != nil {
		e.recovering.Add(1)
	}
	h := &roomHandle{projectID: projectID}
	props := actor.PropsFromProducer(func() actor.Actor { return a },
		actor.WithMailbox(actor.Unbounded(depthCounter{&e.roomMailbox}, depthCounter{&h.depth})))
	pid, err := e.system.Root.SpawnNamed(props, "room/"+id)
	if err != nil {
		panic(fmt.Sprintf("actors: spawning room %s: %v", id, err))
	}
	h.pid = pid
	e.rooms.Store(id, h)
}

// sweepLoop asks every live room to check its expiry and passivation, on a
// real ticker; the rooms compare against the injected clock.
func (e *Engine) sweepLoop() {
	defer close(e.done)
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	lastIdempotencySweep := e.clock.Now()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
			e.sweepRooms()
			e.wallets.Range(func(_, v any) bool {
				e.system.Root.Send(v.(*walletHandle).pid, sweep{})
				return true
			})
			e.system.Root.Send(e.directory, sweep{})
			if now := e.clock.Now(); now.Sub(lastIdempotencySweep) >= idempotencySweepInterval {
				lastIdempotencySweep = now
				// Rate counters of past windows are dropped once a minute.
				if sw, ok := e.limiter.(interface{ Sweep(time.Time) int }); ok {
					sw.Sweep(now)
				}
				e.projects.Range(func(_, v any) bool {
					e.system.Root.Send(v.(*projectHandle).pid, sweep{})
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
			e.system.Root.Send(h.pid, sweep{})
		}
		return true
	})
}

// --- asking actors ---------------------------------------------------------

// reply is what an actor answers a command with.
type reply struct {
	status   int    // HTTP status on success
	body     []byte // encoded JSON on success
	err      *apierr.Error
	value    any  // a typed answer to an internal query
	replayed bool // an idempotent replay of a stored response
	gone     bool // the actor stopped before it read the message
}

// Result is an operation's outcome as the HTTP layer sees it.
type Result struct {
	Status   int
	Body     []byte
	Replayed bool
}

// replyTo is embedded in every command; it carries the reply channel.
type replyTo struct{ ch chan reply }

func (r *replyTo) respond(x reply)      { r.ch <- x } // buffered with room for exactly one reply
func (r *replyTo) attach(ch chan reply) { r.ch = ch }

type command interface {
	respond(reply)
	attach(chan reply)
}

var errUnavailable = apierr.New(apierr.ServiceUnavailable, "the service did not answer in time; retry the request")

func (e *Engine) ask(pid *actor.PID, c command) reply {
	ch := make(chan reply, 1)
	c.attach(ch)
	e.system.Root.Send(pid, c)
	t := time.NewTimer(askTimeout)
	defer t.Stop()
	select {
	case r := <-ch:
		return r
	case <-t.C:
		return reply{err: errUnavailable}
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
	if c, ok := msg.(command); ok {
		c.respond(reply{gone: true})
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

// limitsOf returns a project's effective limits: its own, or the current defaults.
func (e *Engine) limitsOf(p *Project) Limits {
	if p.Limits != nil {
		return *p.Limits
	}
	return e.settings.DefaultLimits
}

// createdAt is the clock's now, nudged forward by a nanosecond when needed
// so that no two created things share an instant. List indexes order by
// creation time, and ties would otherwise fall back to the random id, so
// "newest first" would not be exact within one clock tick.
func (e *Engine) createdAt() time.Time {
	now := e.clock.Now().UnixNano()
	for {
		last := e.lastCreatedNanos.Load()
		next := now
		if next <= last {
			next = last + 1
		}
		if e.lastCreatedNanos.CompareAndSwap(last, next) {
			return time.Unix(0, next).UTC()
		}
	}
}

// allowRate consults the rate counter store and turns a denial into a 429.
func (e *Engine) allowRate(key, what string, limitPerMinute int) *apierr.Error {
	d := e.limiter.Allow(key, limitPerMinute, e.clock.Now())
	if d.Allowed {
		return nil
	}
	return apierr.RateLimitedError(what, d.Limit, d.RetryAfterSeconds)
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
		ActiveRooms: e.activeRooms.Load(), ActiveParticipants: e.activeParticipants.Load(),
		ProjectMailboxDepth: e.projectMailbox.Load(), RoomMailboxDepth: e.roomMailbox.Load(),
	}
}

// Region is the server's configured region.
func (e *Engine) Region() string { return e.settings.Region }

// --- API key registry ------------------------------------------------------

// apiKeyTouchInterval: a key's last use is written to disk at most this
// often, so authentication costs no write per request; last_used_at may
// therefore be up to this much behind the key's real last use.
const apiKeyTouchInterval = time.Minute

// KeyRecord is what authentication needs to know of an active API key, and
// where it notes the key's use. The registry's map is copied on write but
// its records are shared by pointer, so the atomics survive other keys'
// changes.
type KeyRecord struct {
	KeyID     string
	ProjectID string
	Scopes    scopes.Set

	// lastUsedNanos is the last use (injected clock, Unix nanoseconds);
	// persistedNanos the last use journaled. Both only move forward; 0 is
	// never.
	lastUsedNanos  atomic.Int64
	persistedNanos atomic.Int64
	touching       atomic.Bool // a touchKey message is on its way
}

// newKeyRecord is the registry record of a key of projectID.
func newKeyRecord(k *APIKey, projectID string) *KeyRecord {
	rec := &KeyRecord{KeyID: k.ID, ProjectID: projectID, Scopes: scopes.Set(k.Scopes)}
	if !k.LastUsedAt.IsZero() { // the zero time's UnixNano is not 0
		rec.lastUsedNanos.Store(k.LastUsedAt.UnixNano())
		rec.persistedNanos.Store(k.LastUsedAt.UnixNano())
	}
	return rec
}

// noteUse moves the key's last use forward to now and reports whether it
// is time to journal it: apiKeyTouchInterval after the last journaled use,
// and no touch already on its way (the caller then owns the touching flag
// and must send exactly one touchKey).
func (r *KeyRecord) noteUse(now time.Time) bool {
	n := now.UnixNano()
	for last := r.lastUsedNanos.Load(); last < n && !r.lastUsedNanos.CompareAndSwap(last, n); {
		last = r.lastUsedNanos.Load()
	}
	return n-r.persistedNanos.Load() >= int64(apiKeyTouchInterval) && r.touching.CompareAndSwap(false, true)
}

// keyRegistry maps a key's hash to its record. Published by the project
// actors as an immutable map behind an atomic pointer (copy on write), so
// every request reads it without a lock.
type keyRegistry struct {
	m atomic.Pointer[map[[32]byte]*KeyRecord]
}

func (r *keyRegistry) init() {
	m := make(map[[32]byte]*KeyRecord)
	r.m.Store(&m)
}

func (r *keyRegistry) lookup(hash [32]byte) *KeyRecord { return (*r.m.Load())[hash] }

func (r *keyRegistry) update(f func(m map[[32]byte]*KeyRecord)) {
	for {
		old := r.m.Load()
		next := make(map[[32]byte]*KeyRecord, len(*old)+1)
		for k, v := range *old {
			next[k] = v
		}
		f(next)
		if r.m.CompareAndSwap(old, &next) {
			return
		}
	}
}
