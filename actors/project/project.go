package project

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"rtcd/actors/core"
	"rtcd/actors/room"
	"rtcd/apierr"
	"rtcd/auth"
	"rtcd/ids"
	"rtcd/persistence"
	"rtcd/scopes"
)

// Named bounds of a project.
const (
	// MaxActiveAPIKeysPerProject is the spec's fixed limit (section 8).
	MaxActiveAPIKeysPerProject = 50
	// APIKeyCreatesPerMinute is the spec's fixed abuse guard (section 8).
	APIKeyCreatesPerMinute = 20
	// idempotencyInFlightTimeout frees an in-progress key whose request never
	// finished (its caller vanished), so the key does not stay blocked.
	idempotencyInFlightTimeout = time.Minute
)

// The project's commands: plain values, sent in an Envelope that carries
// the answer (TouchKey and IdemEnd have none). Checks that need no state
// ran before they were sent.
type (
	// CreateRoom creates a room (POST /v1/rooms).
	CreateRoom struct {
		Caller core.Caller
		Params NewRoom
		Idem   *core.IdemPending // nil without an Idempotency-Key
	}
	// CreateKey creates an API key holding Scopes (POST /v1/api-keys).
	CreateKey struct {
		Caller core.Caller
		Name   string
		Scopes scopes.Set
		Idem   *core.IdemPending
	}
	// RevokeKey revokes a key (DELETE /v1/api-keys/{key_id}); idempotent.
	RevokeKey struct {
		Caller core.Caller
		KeyID  string
	}
	// ReadState answers the project's state as its snapshot encodes it
	// (Reply.Value, []byte): for tests and the crash simulation, never
	// for a request.
	ReadState struct{}
)

// projectActor owns one project: its record, its set of active rooms (the
// max_active_rooms cap), its API keys and the idempotency keys in flight.
type projectActor struct {
	env      *core.Env
	id       string
	gate     *core.ProjectGate // what the project publishes
	log      *core.Log[projectEvent, *projectState]
	state    *projectState  // log.State()
	recovery *core.Recovery // nil when created at run time
	// registered is closed once the registry has published the project's
	// handle. The actor starts as soon as it is spawned, before that, and
	// its recovery (and its rooms') looks the handle up.
	registered <-chan struct{}

	idemInFlight map[[32]byte]time.Time

	// protoactor restarts a panicked actor on this same value and delivers
	// Started again. recovered and countedRooms let recovery run again from
	// disk without telling the start-up recovery twice or adding its rooms
	// to the active-rooms gauge twice.
	recovered    bool
	countedRooms int64
}

// New is the actor of project id, which publishes gate. It recovers from
// its snapshot and journal when it starts (after registered is closed: its
// recovery looks its own handle up); rec is the start-up recovery that
// waits for it and its rooms, nil for a project created at run time.
func New(env *core.Env, id string, gate *core.ProjectGate, rec *core.Recovery, registered <-chan struct{}) actor.Actor {
	return &projectActor{env: env, id: id, gate: gate, recovery: rec, registered: registered}
}

// Receive runs one message on the project's goroutine.
func (a *projectActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.recover()
	case *actor.Stopped:
		// Released (its workspace moved to another node) or shut down:
		// its rooms no longer count on this process.
		a.env.Gauges.ActiveRooms.Add(-a.countedRooms)
		a.countedRooms = 0
	case *core.Envelope:
		switch c := m.Msg.(type) {
		case CreateRoom:
			a.createRoom(c, m)
		case CreateKey:
			a.createKey(c, m)
		case RevokeKey:
			a.revokeKey(c, m)
		case IdemBegin:
			m.Respond(a.checkIdempotency(c.Pending))
		case CreateEndpoint:
			a.createEndpoint(c, m)
		case DisableEndpoint:
			a.disableEndpoint(c, m)
		case Rename:
			a.renameProject(c, m)
		case core.ArchiveProject:
			a.archiveProject(c, m)
		case ReadState:
			m.Respond(core.Reply{Value: core.Encode(a.state)})
		default:
			core.RefuseUnknown(m)
		}
	case TouchKey:
		a.recordKeyUse(m)
	case IdemEnd:
		delete(a.idemInFlight, m.Scope)
	case core.RoomClosed:
		a.roomClosed(m)
	case core.Sweep:
		a.sweepIdempotency()
	}
}

func (a *projectActor) recover() {
	first := !a.recovered
	if first {
		<-a.registered
	}
	a.recovered = true
	err := a.load(first)
	switch {
	case first && a.recovery != nil:
		a.recovery.Done(err)
	case err != nil:
		slog.Error("project recovery failed", "project_id", a.id, "error", err)
	}
}

// load recovers the project's state and publishes what others read of
// it: its record, its workspace's credit gate, its API keys, its
// endpoints; then it starts its rooms that have not ended. first is false
// after a panic restart, when its rooms still run.
func (a *projectActor) load(first bool) error {
	a.idemInFlight = make(map[[32]byte]time.Time)
	a.log, a.state = nil, nil // nothing in memory survives a failed recovery
	log, err := core.RecoverLog(a.env.Store, Journal(a.id), a.env.Settings.SnapshotEveryEvents,
		func() *projectState { return &projectState{} }, nil)
	if err != nil {
		return err
	}
	a.log, a.state = log, log.State()
	credit, ok := a.env.Registry.CreditGate(a.state.Project.AccountID)
	if !ok {
		return fmt.Errorf("actors: project %s belongs to account %s, which has no wallet", a.id, a.state.Project.AccountID)
	}
	a.gate.Credit.Store(credit)
	// The wallet lists its workspace's projects (billing audits and
	// webhooks go to each); a project created by the dashboard joins that
	// list here, idempotently, so a crash between the two cannot lose it.
	a.env.Registry.Send(core.WalletAddress(a.state.Project.AccountID), core.AddProject{ProjectID: a.id})
	a.publish()
	a.publishEndpoints()
	a.env.APIKeys.Update(func(m map[[32]byte]*core.KeyRecord) {
		for _, k := range a.state.Keys {
			if k.RevokedAt.IsZero() {
				m[k.Hash] = k.record(a.id)
			}
		}
	})
	rooms := a.recovery
	if !first {
		rooms = nil // nobody waits for a restart
	}
	roomIDs := make([]string, 0, len(a.state.ActiveRooms))
	for roomID := range a.state.ActiveRooms {
		roomIDs = append(roomIDs, roomID)
	}
	slices.Sort(roomIDs) // rooms recover in a deterministic order (their recovery may write)
	for _, roomID := range roomIDs {
		if !a.env.Registry.RoomLive(roomID) { // after a restart its rooms still run
			a.env.Registry.SpawnRoom(roomID, a.id, rooms)
		}
	}
	n := int64(len(a.state.ActiveRooms))
	a.env.Gauges.ActiveRooms.Add(n - a.countedRooms)
	a.countedRooms = n
	return nil
}

// publish makes the project record visible to rooms and the HTTP layer.
func (a *projectActor) publish() {
	p := a.state.Project
	a.gate.Record.Store(&p)
}

// record appends events to the project's journal in b and applies them
// (eventLog.record); the caller adds the read records and commits b.
func (a *projectActor) record(b *persistence.Batch, events ...projectEvent) {
	a.log.Record(b, events...)
}

func (a *projectActor) createRoom(m CreateRoom, r *core.Envelope) {
	env := a.env
	p := a.gate.Record.Load()
	if p.Status != core.ProjectActive {
		// Archived while this request was on its way.
		r.Respond(core.Reply{Err: core.ErrBadCredential})
		return
	}
	limits := env.LimitsOf(p)
	if len(a.state.ActiveRooms)-int(a.gate.EndedRooms.Load()) >= limits.MaxActiveRooms {
		r.Respond(core.Reply{Err: apierr.New(apierr.QuotaExceeded, "the project has %d active rooms, its max_active_rooms limit", limits.MaxActiveRooms).
			WithDetails("limit_name", "max_active_rooms", "limit", limits.MaxActiveRooms)})
		return
	}
	maxParticipants := m.Params.MaxParticipants
	if maxParticipants == 0 {
		maxParticipants = limits.MaxParticipantsPerRoom
	}
	if maxParticipants > limits.MaxParticipantsPerRoom {
		r.Respond(core.Reply{Err: apierr.Invalid("max_participants", "max_participants must be at most %d, the project's max_participants_per_room", limits.MaxParticipantsPerRoom)})
		return
	}
	if err := env.AllowRate("room_creates:"+a.id, "room_creates_per_minute", limits.RoomCreatesPerMinute); err != nil {
		r.Respond(core.Reply{Err: err})
		return
	}
	now := env.CreatedAt()
	newRoom := room.Room{
		ID: ids.New(ids.Room), ProjectID: a.id, Name: m.Params.Name, Status: room.RoomWaiting, Region: m.Params.Region,
		MaxParticipants: maxParticipants, Metadata: m.Params.Metadata,
		CreatedAt: now, ExpiresAt: now.Add(time.Duration(m.Params.ExpiresInSeconds) * time.Second),
	}
	b := env.Store.NewBatch()
	body := room.Genesis(b, newRoom)
	if m.Idem != nil {
		env.PutStored(b, m.Idem, 201, body)
	}
	a.record(b, projectEvent{RoomCreated: &roomRef{RoomID: newRoom.ID}})
	// The room actor can only start once the batch holding its snapshot is
	// applied (Commit returns), but the caller must not learn the room's id
	// before the actor is registered: a request for the room would find no
	// actor and a live record, and get service_unavailable. So the durable
	// reply waits for the spawn (microseconds; the syncer only ever waits
	// for a batch whose Commit has returned, so this cannot deadlock).
	spawned := make(chan struct{})
	defer close(spawned) // also if spawning panics: the syncer must not wait forever
	env.Store.Commit(b, func() {
		<-spawned
		r.Respond(core.Reply{Status: 201, Body: body})
	})
	env.Registry.SpawnRoom(newRoom.ID, a.id, nil)
	env.Gauges.ActiveRooms.Add(1)
	a.countedRooms++
}

func (a *projectActor) roomClosed(m core.RoomClosed) {
	if m.Counted {
		a.gate.EndedRooms.Add(-1)
	}
	if _, ok := a.state.ActiveRooms[m.RoomID]; !ok {
		return // already recorded (the room re-announces after a restart)
	}
	b := a.env.Store.NewBatch()
	a.record(b, projectEvent{RoomClosed: &roomRef{RoomID: m.RoomID}})
	a.env.Store.Commit(b, nil)
	a.env.Gauges.ActiveRooms.Add(-1)
	a.countedRooms--
}

func (a *projectActor) createKey(m CreateKey, r *core.Envelope) {
	env := a.env
	if a.state.Project.Status != core.ProjectActive {
		r.Respond(core.Reply{Err: core.ErrBadCredential}) // archived while the request was on its way
		return
	}
	if !m.Caller.Scopes.Contains(m.Scopes) {
		missing := scopes.Set(m.Scopes &^ m.Caller.Scopes)
		r.Respond(core.Reply{Err: apierr.New(apierr.PermissionDenied, "a key can only grant scopes the creating credential holds").
			WithDetails("missing_scopes", missing.Names())})
		return
	}
	if a.state.ActiveKeys >= MaxActiveAPIKeysPerProject {
		r.Respond(core.Reply{Err: apierr.New(apierr.APIKeyLimitReached, "the project has %d active API keys, the maximum; revoke one first", MaxActiveAPIKeysPerProject).
			WithDetails("limit", MaxActiveAPIKeysPerProject)})
		return
	}
	if err := env.AllowRate("api_key_creates:"+a.id, "api_key_creates_per_minute", APIKeyCreatesPerMinute); err != nil {
		r.Respond(core.Reply{Err: err})
		return
	}
	secret, err := auth.NewAPIKeySecret()
	if err != nil {
		r.Respond(core.Reply{Err: apierr.New(apierr.Internal, "could not generate a key")})
		return
	}
	now := env.CreatedAt()
	key := APIKey{
		ID: ids.New(ids.APIKey), Name: m.Name, Scopes: uint32(m.Scopes), Last4: auth.Last4(secret),
		Hash: env.Keys.HashAPIKey(secret), CreatedAt: now, CreatedBy: m.Caller.AuditActor(),
	}
	v := key.View()
	record := core.MustJSON(v)
	v.Secret = secret
	body := core.MustJSON(v)

	b := env.Store.NewBatch()
	b.Set(persistence.IndexKey(persistence.PrefixKeyIdx, a.id, key.CreatedAt.UnixNano(), key.ID), record)
	b.Set(core.KeyHashKey(key.Hash), []byte(a.id))
	a.env.Audit.Project(b, a.id, &m.Caller, "api_key.created", core.AuditTarget{Type: "api_key", ID: key.ID},
		map[string]any{"name": key.Name, "scopes": v.Scopes})
	if m.Idem != nil {
		env.PutStored(b, m.Idem, 201, body)
	}
	rec := key.record(a.id)
	a.record(b, projectEvent{APIKeyCreated: &key})
	env.Store.Commit(b, func() {
		// Usable only once its creation is durable.
		env.APIKeys.Update(func(reg map[[32]byte]*core.KeyRecord) { reg[key.Hash] = rec })
		r.Respond(core.Reply{Status: 201, Body: body})
	})
}

func (a *projectActor) revokeKey(m RevokeKey, r *core.Envelope) {
	env := a.env
	key, ok := a.state.Keys[m.KeyID]
	if !ok {
		r.Respond(core.Reply{Err: apierr.New(apierr.APIKeyNotFound, "no API key %s in this project", m.KeyID)})
		return
	}
	if m.Caller.ActorType == "api_key" && m.Caller.ActorID == key.ID {
		r.Respond(core.Reply{Err: apierr.New(apierr.Conflict,
			"a key cannot revoke itself; create a new key, switch to it, then revoke this one with the new key").
			WithDetails("reason", "cannot_revoke_current_key")})
		return
	}
	if !key.RevokedAt.IsZero() {
		// DELETE is idempotent. The revocation may still be on its way to
		// disk (a concurrent first DELETE): answer once it is durable.
		body := core.MustJSON(key.View())
		env.Store.AfterDurable(func() { r.Respond(core.Reply{Status: 200, Body: body}) })
		return
	}
	// Revocation takes effect at once, before it is durable: failing safe.
	env.APIKeys.Update(func(reg map[[32]byte]*core.KeyRecord) { delete(reg, key.Hash) })
	revoked := *key
	revoked.RevokedAt = env.Clock.Now()
	body := core.MustJSON(revoked.View())
	b := env.Store.NewBatch()
	b.Set(persistence.IndexKey(persistence.PrefixKeyIdx, a.id, key.CreatedAt.UnixNano(), key.ID), body)
	env.Audit.Project(b, a.id, &m.Caller, "api_key.revoked", core.AuditTarget{Type: "api_key", ID: key.ID}, map[string]any{"name": key.Name})
	a.record(b, projectEvent{APIKeyRevoked: &apiKeyRevoke{KeyID: key.ID, At: revoked.RevokedAt}})
	env.Store.Commit(b, func() { r.Respond(core.Reply{Status: 200, Body: body}) })
}

// TouchKey asks the project to journal a key's last use. Authentication
// sends it without waiting, at most once per apiKeyTouchInterval per key
// (KeyRecord.NoteUse), and holds the registry record's touching flag
// until the project clears it.
type TouchKey struct {
	KeyID  string
	UsedAt time.Time // the use that made the sender ask
}

// recordKeyUse journals the latest use noted in the registry record
// (api_key_used) and rewrites the key's ki/ record, so the list shows it.
// It re-checks the interval against the actor's own state: NoteUse's check
// and flag can race a touch that is just finishing, and this keeps the
// journal at one use per key per apiKeyTouchInterval regardless. Nobody
// waits for it, so it needs no durable callback; a crash before its batch
// is synced loses this use only (the key shows the one recorded before,
// until its next use).
func (a *projectActor) recordKeyUse(m TouchKey) {
	key, ok := a.state.Keys[m.KeyID]
	if !ok {
		return
	}
	used := m.UsedAt.UTC()
	rec := a.env.APIKeys.Lookup(key.Hash) // nil once revoked
	if rec != nil {
		if last := rec.LastUsed(); last.After(used) {
			used = last
		}
	}
	if !key.LastUsedAt.IsZero() && used.Sub(key.LastUsedAt) < core.APIKeyTouchInterval {
		if rec != nil {
			rec.Touched(time.Time{})
		}
		return
	}
	b := a.env.Store.NewBatch()
	a.record(b, projectEvent{APIKeyUsed: &apiKeyUsed{KeyID: key.ID, At: used}})
	b.Set(persistence.IndexKey(persistence.PrefixKeyIdx, a.id, key.CreatedAt.UnixNano(), key.ID), core.MustJSON(key.View()))
	a.env.Store.Commit(b, nil)
	if rec != nil {
		rec.Touched(used)
	}
}

func (a *projectActor) sweepIdempotency() {
	b := a.env.Store.NewBatch()
	n := a.sweepExpired(b)
	if n == 0 {
		b.Discard()
		return
	}
	a.env.Store.Commit(b, nil)
	if n == sweepBatchRecords(a.env.Store) { // more expired: continue after queued requests
		a.env.Registry.Post(core.ProjectAddress(a.id), core.Sweep{})
	}
}
