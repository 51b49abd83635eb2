package sim

import (
	"fmt"
	"sort"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"rtcd/actors/core"
	"rtcd/actors/directory"
	"rtcd/actors/dispatch"
	"rtcd/actors/project"
	"rtcd/actors/room"
	"rtcd/actors/wallet"
	"rtcd/persistence"
)

// system is one generation of the actor system, between two crashes: the
// core.Registry the owners use, their mailboxes, and the recovery that
// starts them in the engine's order (actors.Engine.Start). Messages are
// delivered one at a time on the simulation's goroutine, in the order
// they were sent (one FIFO over every actor: each actor's own order is
// kept, which is all the actor system promises), so a seed replays.
type system struct {
	env        *core.Env
	dispatcher *dispatch.Dispatcher
	sessions   *core.Sessions
	media      *mediaNode // the embedded media node: it dies with the process

	// mu guards queue and dead: Post is called from the store's syncer
	// (commit callbacks) as well as from the simulation's goroutine.
	mu    sync.Mutex
	queue []delivery
	dead  bool // crashed: nothing more is delivered

	wallets   map[string]*walletNode
	projects  map[string]*projectNode
	rooms     map[string]*roomNode // live room actors only
	directory *node

	// requests are actors' requests (Registry.Request) waiting for their
	// answer; the answer runs on the simulation's goroutine.
	requests []request
	// touched names the owners that received a message since the last
	// durable point: only their state can have changed.
	touched map[string]*node
}

// node is one actor: its journal name (which is also its actor name), its
// address and the real owner behind it.
type node struct {
	name    string
	addr    core.Address
	actor   actor.Actor
	pid     *actor.PID
	stopped bool // poisoned (a passivated room): later messages are dead letters
}

type walletNode struct {
	*node
	gate *core.CreditGate
}

type projectNode struct {
	*node
	gate *core.ProjectGate
}

// roomNode is a room actor and the Gate it publishes, on which a connect
// is decided on the caller's goroutine (actors.Engine.AppendConnect).
type roomNode struct {
	*node
	projectID string
	gate      *room.Gate
}

type delivery struct {
	to  *node
	msg any
}

type request struct {
	answer <-chan core.Reply
	then   func(core.Reply)
}

// poisonPill stops the actor it reaches (protoactor's Poison: queued
// behind what was sent before it).
type poisonPill struct{}

func newSystem(env *core.Env, sender dispatch.WebhookSender, delivery dispatch.Settings) *system {
	rt := &system{
		env: env, sessions: &core.Sessions{}, media: newMediaNode(),
		wallets: map[string]*walletNode{}, projects: map[string]*projectNode{}, rooms: map[string]*roomNode{},
		touched: map[string]*node{},
	}
	env.Registry = rt
	env.Media.SetEngine(rt.media)
	rt.media.context = rt.refusalContext
	rt.dispatcher = dispatch.New(env)
	rt.dispatcher.Drive(sender, delivery)
	return rt
}

// --- core.Registry -----------------------------------------------------------

func (rt *system) ProjectGate(projectID string) (*core.ProjectGate, bool) {
	p, ok := rt.projects[projectID]
	if !ok {
		return nil, false
	}
	return p.gate, true
}

func (rt *system) CreditGate(accountID string) (*core.CreditGate, bool) {
	w, ok := rt.wallets[accountID]
	if !ok {
		return nil, false
	}
	return w.gate, true
}

func (rt *system) RoomLive(roomID string) bool {
	_, ok := rt.rooms[roomID]
	return ok
}

func (rt *system) Send(to core.Address, msg any) { rt.Post(to, msg) }

// Post queues msg for the actor at to. From the syncer it runs while the
// simulation waits for a durable point, so the queue's order is the
// order of the commits whose callbacks posted.
func (rt *system) Post(to core.Address, msg any) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.dead {
		return
	}
	if n := rt.lookup(to); n != nil {
		rt.queue = append(rt.queue, delivery{to: n, msg: msg})
	} else if env, ok := msg.(*core.Envelope); ok {
		env.Respond(core.Reply{Gone: true}) // a dead letter, answered as the engine does
	}
}

func (rt *system) Request(to core.Address, msg any, answer func(core.Reply)) {
	env, ch := core.NewEnvelope(msg)
	rt.requests = append(rt.requests, request{answer: ch, then: answer})
	rt.Post(to, env)
}

func (rt *system) SpawnRoom(roomID, projectID string, rec *core.Recovery) {
	p, ok := rt.projects[projectID]
	if !ok {
		panic(fmt.Sprintf("sim: room %s spawned for project %s, which has no actor", roomID, projectID))
	}
	if rec != nil {
		rec.Add()
	}
	gate := room.NewGate(roomID, p.gate, &rt.env.Gauges.ActiveParticipants)
	n := rt.spawn(room.Journal(roomID), core.RoomAddress(roomID), room.New(rt.env, roomID, projectID, p.gate, gate, rec))
	rt.rooms[roomID] = &roomNode{node: n, projectID: projectID, gate: gate}
}

func (rt *system) SpawnProject(projectID string, created *core.Project, rec *core.Recovery) {
	gate := &core.ProjectGate{}
	if created != nil {
		p := *created
		gate.Record.Store(&p)
	}
	registered := make(chan struct{})
	close(registered) // registered below, before the actor's first message runs
	if rec != nil {
		rec.Add()
	}
	n := rt.spawn(project.Journal(projectID), core.ProjectAddress(projectID), project.New(rt.env, projectID, gate, rec, registered))
	rt.projects[projectID] = &projectNode{node: n, gate: gate}
}

func (rt *system) SpawnWallet(accountID string, rec *core.Recovery) {
	gate := &core.CreditGate{}
	if rec != nil {
		rec.Add()
	}
	n := rt.spawn(wallet.Journal(accountID), core.WalletAddress(accountID), wallet.New(rt.env, accountID, gate, rec))
	rt.wallets[accountID] = &walletNode{node: n, gate: gate}
}

func (rt *system) RoomStopped(roomID string) { delete(rt.rooms, roomID) }

func (rt *system) EndpointWorkers(enabled, disabled []*core.WebhookEndpoint) {
	rt.dispatcher.EnsureWorkers(enabled)
	rt.dispatcher.IdleWorkers(disabled)
}

// refusalContext is what the gates of room roomID and its project publish
// now: what a room's refusal of a join rests on.
func (rt *system) refusalContext(roomID string) refusalContext {
	r, ok := rt.rooms[roomID]
	if !ok {
		return refusalContext{}
	}
	at := refusalContext{roomSlots: r.gate.Slots()}
	if p, ok := rt.projects[r.projectID]; ok {
		at.projectSlots = p.gate.ActiveParticipants.Load()
		at.projectLimit = int64(rt.env.LimitsOf(p.gate.Record.Load()).MaxActiveParticipants)
		at.creditClosed = p.gate.CreditClosed()
	}
	return at
}

// --- delivery ------------------------------------------------------------------

// spawn makes a node whose first message is actor.Started (recovery).
func (rt *system) spawn(name string, addr core.Address, a actor.Actor) *node {
	n := &node{name: name, addr: addr, actor: a, pid: actor.NewPID("sim", name)}
	rt.enqueue(n, &actor.Started{})
	return n
}

// enqueue queues msg for n itself, found or not by its address (a
// stopping room poisons itself after the registry forgot it).
func (rt *system) enqueue(n *node, msg any) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if !rt.dead {
		rt.queue = append(rt.queue, delivery{to: n, msg: msg})
	}
}

func (rt *system) lookup(to core.Address) *node {
	switch to.Kind {
	case core.KindRoom:
		if r, ok := rt.rooms[to.ID]; ok {
			return r.node
		}
	case core.KindProject:
		if p, ok := rt.projects[to.ID]; ok {
			return p.node
		}
	case core.KindWallet:
		if w, ok := rt.wallets[to.ID]; ok {
			return w.node
		}
	case core.KindDirectory:
		return rt.directory
	}
	return nil
}

// actorContext is what an owner's Receive sees of the actor system: the
// message, itself, and Poison. Anything else an owner might ask would
// panic on the nil Context: the owners use nothing else.
type actorContext struct {
	actor.Context
	rt  *system
	n   *node
	msg any
}

func (c *actorContext) Message() any      { return c.msg }
func (c *actorContext) Self() *actor.PID  { return c.n.pid }
func (c *actorContext) Poison(*actor.PID) { c.rt.enqueue(c.n, poisonPill{}) }

// deliver runs one message on its actor.
func (rt *system) deliver(d delivery) {
	n := d.to
	if _, ok := d.msg.(poisonPill); ok {
		n.stopped = true
		return
	}
	if n.stopped {
		if env, ok := d.msg.(*core.Envelope); ok {
			env.Respond(core.Reply{Gone: true})
		}
		return
	}
	rt.touched[n.name] = n
	n.actor.Receive(&actorContext{rt: rt, n: n, msg: d.msg})
}

// drain delivers every queued message, and the answers of requests that
// have one, until nothing is left to run.
func (rt *system) drain() {
	for {
		rt.mu.Lock()
		if len(rt.queue) == 0 || rt.dead {
			rt.mu.Unlock()
			if rt.answerRequests() {
				continue
			}
			return
		}
		d := rt.queue[0]
		rt.queue = rt.queue[1:]
		rt.mu.Unlock()
		rt.deliver(d)
	}
}

// answerRequests runs, in the order they were made, the answers that
// arrived; it reports whether any ran.
func (rt *system) answerRequests() bool {
	ran := false
	waiting := rt.requests[:0]
	for _, r := range rt.requests {
		select {
		case reply := <-r.answer:
			r.then(reply)
			ran = true
		default:
			waiting = append(waiting, r)
		}
	}
	rt.requests = waiting
	return ran
}

// ask delivers a command in an envelope to the actor at to and returns
// where its one answer arrives (at once for a refusal; once durable for
// a change).
func (rt *system) ask(to core.Address, msg any) <-chan core.Reply {
	env, answer := core.NewEnvelope(msg)
	rt.Post(to, env)
	rt.drain()
	return answer
}

// --- recovery --------------------------------------------------------------------

// recoverAll starts every owner from the store the way actors.Engine.Start
// does: wallets first (a/), then projects (p/, each starting its live
// rooms), then the directory, each kind ready before the next starts.
func (rt *system) recoverAll() error {
	store := rt.env.Store
	wallets := &core.Recovery{}
	for _, id := range scanNames(store, persistence.PrefixAccount) {
		rt.SpawnWallet(id, wallets)
	}
	rt.drain()
	if err := wallets.Wait(); err != nil {
		return fmt.Errorf("wallets: %w", err)
	}
	projects := &core.Recovery{}
	for _, id := range scanNames(store, persistence.PrefixProject) {
		rt.SpawnProject(id, nil, projects)
	}
	rt.drain()
	if err := projects.Wait(); err != nil {
		return fmt.Errorf("projects and rooms: %w", err)
	}
	dir := &core.Recovery{}
	dir.Add()
	rt.directory = rt.spawn(directory.Journal(), core.DirectoryAddress(), directory.New(rt.env, rt.sessions, directory.GateRecords(rt.env.Registry), dir))
	rt.drain()
	if err := dir.Wait(); err != nil {
		return fmt.Errorf("directory: %w", err)
	}
	rt.env.Media.Presence(rt.env.Clock.Now(), rt.env.Clock.Monotonic())
	return nil
}

// scanNames lists the names under a directory prefix (a/, p/), in key order.
func scanNames(store persistence.Storage, prefix string) []string {
	var names []string
	_ = store.Scan([]byte(prefix), 0, func(key, _ []byte) bool {
		names = append(names, string(key[len(prefix):]))
		return true
	})
	return names
}

// liveNodes is every live actor, in name order.
func (rt *system) liveNodes() []*node {
	var out []*node
	for _, w := range rt.wallets {
		out = append(out, w.node)
	}
	for _, p := range rt.projects {
		out = append(out, p.node)
	}
	for _, r := range rt.rooms {
		out = append(out, r.node)
	}
	if rt.directory != nil {
		out = append(out, rt.directory)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// readState asks a node for its state as its snapshot encodes it, out of
// band (ReadState changes nothing and is answered at once).
func (rt *system) readState(n *node) []byte {
	var msg any
	switch n.addr.Kind {
	case core.KindRoom:
		msg = room.ReadState{}
	case core.KindProject:
		msg = project.ReadState{}
	case core.KindWallet:
		msg = wallet.ReadState{}
	default:
		msg = directory.ReadState{}
	}
	env, answer := core.NewEnvelope(msg)
	n.actor.Receive(&actorContext{rt: rt, n: n, msg: env})
	return (<-answer).Value.([]byte)
}
