package actors

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"rtcd/apierr"
	"rtcd/auth"
	"rtcd/ids"
	"rtcd/persistence"
	"rtcd/scopes"
)

// Caller is the authenticated principal of a request.
type Caller struct {
	ProjectID string
	ActorType string // "api_key", or "user" for a dashboard session with X-Project-Id
	ActorID   string
	Scopes    scopes.Set
	Role      string // the user's workspace role when ActorType is "user"
	RequestID string
	SourceIP  string
}

func (c *Caller) actor() Actor { return Actor{Type: c.ActorType, ID: c.ActorID} }

// Project actor commands: plain values, sent in an Envelope that carries
// the answer.
type (
	createRoom struct {
		caller Caller
		params validatedRoom
		idem   *idemPending // nil without an Idempotency-Key
	}
	createKey struct {
		caller Caller
		name   string
		scopes scopes.Set
		idem   *idemPending
	}
	revokeKey struct {
		caller Caller
		keyID  string
	}
	// roomClosed tells the project a room ended; sent by the room, no reply.
	// counted: the room added itself to projectShared.endedRooms.
	roomClosed struct {
		roomID  string
		counted bool
	}
)

// projectActor owns one project: its record, its set of active rooms (the
// max_active_rooms cap), its API keys and the idempotency keys in flight.
type projectActor struct {
	e            *Engine
	id           string
	shared       *projectShared
	log          *eventLog[projectEvent, *projectState]
	state        *projectState // log.state
	recoveryErrs chan<- error
	// registered is closed once spawnProject has published the project's
	// handle. The actor starts as soon as it is spawned, before that, and
	// its recovery (and its rooms') looks the handle up.
	registered <-chan struct{}

	idemInFlight map[[32]byte]time.Time

	// protoactor restarts a panicked actor on this same value and delivers
	// Started again. recovered and countedRooms let recovery run again from
	// disk without signalling the start-up WaitGroup twice or adding its
	// rooms to the active-rooms gauge twice.
	recovered    bool
	countedRooms int64
}

func (a *projectActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.recover()
	case *Envelope:
		switch c := m.Msg.(type) {
		case createRoom:
			a.createRoom(c, m)
		case createKey:
			a.createKey(c, m)
		case revokeKey:
			a.revokeKey(c, m)
		case idemBegin:
			m.Respond(a.e.checkIdempotency(a.idemInFlight, c.pending))
		case createEndpoint:
			a.createEndpoint(c, m)
		case disableEndpoint:
			a.disableEndpoint(c, m)
		case renameProject:
			a.renameProject(c, m)
		case archiveProject:
			a.archiveProject(c, m)
		default:
			refuseUnknown(m)
		}
	case touchKey:
		a.recordKeyUse(m)
	case idemEnd:
		delete(a.idemInFlight, m.scope)
	case roomClosed:
		a.roomClosed(m)
	case crashForTest:
		panic("actors: crash requested by a test") // exercises restart after a panic
	case sweep:
		a.sweepIdempotency()
	}
}

func (a *projectActor) recover() {
	first := !a.recovered
	if first {
		defer a.e.recovering.Done()
		<-a.registered
	}
	a.recovered = true
	a.idemInFlight = make(map[[32]byte]time.Time)
	a.log, a.state = nil, nil // nothing in memory survives a failed recovery
	log, err := recoverLog(a.e.store, projectJournal(a.id), a.e.settings.SnapshotEveryEvents,
		func() *projectState { return &projectState{} }, nil)
	if err != nil {
		if first {
			a.recoveryErrs <- err
		} else {
			slog.Error("project recovery after a restart failed", "project_id", a.id, "error", err)
		}
		return
	}
	a.log, a.state = log, log.state
	wh, ok := a.e.wallet(a.state.Project.AccountID)
	if !ok {
		err := fmt.Errorf("actors: project %s belongs to account %s, which has no wallet", a.id, a.state.Project.AccountID)
		if first {
			a.recoveryErrs <- err
		}
		return
	}
	a.shared.account.Store(wh.shared)
	// The wallet lists its workspace's projects (billing audits and
	// webhooks go to each); a project created by the dashboard joins that
	// list here, idempotently, so a crash between the two cannot lose it.
	a.e.system.Root.Send(wh.pid, addProject{projectID: a.id})
	a.publish()
	a.publishEndpoints()
	a.e.apiKeys.update(func(m map[[32]byte]*KeyRecord) {
		for _, k := range a.state.Keys {
			if k.RevokedAt.IsZero() {
				m[k.Hash] = newKeyRecord(k, a.id)
			}
		}
	})
	h, _ := a.e.project(a.id)
	for roomID := range a.state.ActiveRooms {
		if _, live := a.e.room(roomID); !live { // after a restart its rooms still run
			a.e.spawnRoom(roomID, h, a.id, a.recoveryErrs)
		}
	}
	n := int64(len(a.state.ActiveRooms))
	a.e.activeRooms.Add(n - a.countedRooms)
	a.countedRooms = n
}

// publish makes the project record visible to rooms and the HTTP layer.
func (a *projectActor) publish() {
	p := a.state.Project
	a.shared.project.Store(&p)
}

// record appends events to the project's journal in b and applies them
// (eventLog.record); the caller adds the read records and commits b.
func (a *projectActor) record(b *persistence.Batch, events ...projectEvent) {
	a.log.record(b, events...)
}

func (a *projectActor) createRoom(m createRoom, r *Envelope) {
	e := a.e
	p := a.shared.project.Load()
	if p.Status != ProjectActive {
		// Archived while this request was on its way.
		r.Respond(Reply{Err: errBadCredential})
		return
	}
	limits := e.limitsOf(p)
	if len(a.state.ActiveRooms)-int(a.shared.endedRooms.Load()) >= limits.MaxActiveRooms {
		r.Respond(Reply{Err: apierr.New(apierr.QuotaExceeded, "the project has %d active rooms, its max_active_rooms limit", limits.MaxActiveRooms).
			WithDetails("limit_name", "max_active_rooms", "limit", limits.MaxActiveRooms)})
		return
	}
	maxParticipants := m.params.maxParticipants
	if maxParticipants == 0 {
		maxParticipants = limits.MaxParticipantsPerRoom
	}
	if maxParticipants > limits.MaxParticipantsPerRoom {
		r.Respond(Reply{Err: apierr.Invalid("max_participants", "max_participants must be at most %d, the project's max_participants_per_room", limits.MaxParticipantsPerRoom)})
		return
	}
	if err := e.allowRate("room_creates:"+a.id, "room_creates_per_minute", limits.RoomCreatesPerMinute); err != nil {
		r.Respond(Reply{Err: err})
		return
	}
	now := e.createdAt()
	room := Room{
		ID: ids.New(ids.Room), ProjectID: a.id, Name: m.params.name, Status: RoomWaiting, Region: m.params.region,
		MaxParticipants: maxParticipants, Metadata: m.params.metadata,
		CreatedAt: now, ExpiresAt: now.Add(time.Duration(m.params.expiresInSecs) * time.Second),
	}
	body := mustJSON(room.view())

	b := e.store.NewBatch()
	persistence.WriteSnapshotAt(b, roomJournal(room.ID), 0, encode(newRoomState(room)))
	b.Set(roomRecordKey(a.id, room.ID), body)
	b.Set(persistence.IndexKey(persistence.PrefixRoomIdx, a.id, now.UnixNano(), room.ID), []byte(room.ID))
	if m.idem != nil {
		e.putStored(b, m.idem, 201, body)
	}
	a.record(b, projectEvent{RoomCreated: &roomRef{RoomID: room.ID}})
	// The room actor can only start once the batch holding its snapshot is
	// applied (Commit returns), but the caller must not learn the room's id
	// before the actor is registered: a request for the room would find no
	// actor and a live record, and get service_unavailable. So the durable
	// reply waits for the spawn (microseconds; the syncer only ever waits
	// for a batch whose Commit has returned, so this cannot deadlock).
	spawned := make(chan struct{})
	defer close(spawned) // also if spawning panics: the syncer must not wait forever
	e.store.Commit(b, func() {
		<-spawned
		r.Respond(Reply{Status: 201, Body: body})
	})
	h, _ := e.project(a.id)
	e.spawnRoom(room.ID, h, a.id, nil)
	e.activeRooms.Add(1)
	a.countedRooms++
}

func (a *projectActor) roomClosed(m roomClosed) {
	if m.counted {
		a.shared.endedRooms.Add(-1)
	}
	if _, ok := a.state.ActiveRooms[m.roomID]; !ok {
		return // already recorded (the room re-announces after a restart)
	}
	b := a.e.store.NewBatch()
	a.record(b, projectEvent{RoomClosed: &roomRef{RoomID: m.roomID}})
	a.e.store.Commit(b, nil)
	a.e.activeRooms.Add(-1)
	a.countedRooms--
}

func (a *projectActor) createKey(m createKey, r *Envelope) {
	e := a.e
	if a.state.Project.Status != ProjectActive {
		r.Respond(Reply{Err: errBadCredential}) // archived while the request was on its way
		return
	}
	if !m.caller.Scopes.Contains(m.scopes) {
		missing := scopes.Set(m.scopes &^ m.caller.Scopes)
		r.Respond(Reply{Err: apierr.New(apierr.PermissionDenied, "a key can only grant scopes the creating credential holds").
			WithDetails("missing_scopes", missing.Names())})
		return
	}
	if a.state.ActiveKeys >= MaxActiveAPIKeysPerProject {
		r.Respond(Reply{Err: apierr.New(apierr.APIKeyLimitReached, "the project has %d active API keys, the maximum; revoke one first", MaxActiveAPIKeysPerProject).
			WithDetails("limit", MaxActiveAPIKeysPerProject)})
		return
	}
	if err := e.allowRate("api_key_creates:"+a.id, "api_key_creates_per_minute", APIKeyCreatesPerMinute); err != nil {
		r.Respond(Reply{Err: err})
		return
	}
	secret, err := auth.NewAPIKeySecret()
	if err != nil {
		r.Respond(Reply{Err: apierr.New(apierr.Internal, "could not generate a key")})
		return
	}
	now := e.createdAt()
	key := APIKey{
		ID: ids.New(ids.APIKey), Name: m.name, Scopes: uint32(m.scopes), Last4: auth.Last4(secret),
		Hash: e.keys.HashAPIKey(secret), CreatedAt: now, CreatedBy: m.caller.actor(),
	}
	v := key.view()
	record := mustJSON(v)
	v.Secret = secret
	body := mustJSON(v)

	b := e.store.NewBatch()
	b.Set(persistence.IndexKey(persistence.PrefixKeyIdx, a.id, key.CreatedAt.UnixNano(), key.ID), record)
	a.e.writeAudit(b, a.id, &m.caller, "api_key.created", AuditTarget{Type: "api_key", ID: key.ID},
		map[string]any{"name": key.Name, "scopes": v.Scopes})
	if m.idem != nil {
		e.putStored(b, m.idem, 201, body)
	}
	rec := newKeyRecord(&key, a.id)
	a.record(b, projectEvent{APIKeyCreated: &key})
	e.store.Commit(b, func() {
		// Usable only once its creation is durable.
		e.apiKeys.update(func(reg map[[32]byte]*KeyRecord) { reg[key.Hash] = rec })
		r.Respond(Reply{Status: 201, Body: body})
	})
}

func (a *projectActor) revokeKey(m revokeKey, r *Envelope) {
	e := a.e
	key, ok := a.state.Keys[m.keyID]
	if !ok {
		r.Respond(Reply{Err: apierr.New(apierr.APIKeyNotFound, "no API key %s in this project", m.keyID)})
		return
	}
	if m.caller.ActorType == "api_key" && m.caller.ActorID == key.ID {
		r.Respond(Reply{Err: apierr.New(apierr.Conflict,
			"a key cannot revoke itself; create a new key, switch to it, then revoke this one with the new key").
			WithDetails("reason", "cannot_revoke_current_key")})
		return
	}
	if !key.RevokedAt.IsZero() {
		// DELETE is idempotent. The revocation may still be on its way to
		// disk (a concurrent first DELETE): answer once it is durable.
		body := mustJSON(key.view())
		e.store.AfterDurable(func() { r.Respond(Reply{Status: 200, Body: body}) })
		return
	}
	// Revocation takes effect at once, before it is durable: failing safe.
	e.apiKeys.update(func(reg map[[32]byte]*KeyRecord) { delete(reg, key.Hash) })
	revoked := *key
	revoked.RevokedAt = e.clock.Now()
	body := mustJSON(revoked.view())
	b := e.store.NewBatch()
	b.Set(persistence.IndexKey(persistence.PrefixKeyIdx, a.id, key.CreatedAt.UnixNano(), key.ID), body)
	e.writeAudit(b, a.id, &m.caller, "api_key.revoked", AuditTarget{Type: "api_key", ID: key.ID}, map[string]any{"name": key.Name})
	a.record(b, projectEvent{APIKeyRevoked: &apiKeyRevoke{KeyID: key.ID, At: revoked.RevokedAt}})
	e.store.Commit(b, func() { r.Respond(Reply{Status: 200, Body: body}) })
}

// touchKey asks the project to journal a key's last use. Authentication
// sends it without waiting, at most once per apiKeyTouchInterval per key
// (KeyRecord.noteUse), and holds the registry record's touching flag
// until the project clears it.
type touchKey struct {
	keyID  string
	usedAt time.Time // the use that made the sender ask
}

// recordKeyUse journals the latest use noted in the registry record
// (api_key_used) and rewrites the key's ki/ record, so the list shows it.
// It re-checks the interval against the actor's own state: noteUse's check
// and flag can race a touch that is just finishing, and this keeps the
// journal at one use per key per apiKeyTouchInterval regardless. Nobody
// waits for it, so it needs no durable callback; a crash before its batch
// is synced loses this use only (the key shows the one recorded before,
// until its next use).
func (a *projectActor) recordKeyUse(m touchKey) {
	key, ok := a.state.Keys[m.keyID]
	if !ok {
		return
	}
	used := m.usedAt.UTC()
	rec := a.e.apiKeys.lookup(key.Hash) // nil once revoked
	if rec != nil {
		defer rec.touching.Store(false)
		if n := rec.lastUsedNanos.Load(); n > used.UnixNano() {
			used = time.Unix(0, n).UTC()
		}
	}
	if !key.LastUsedAt.IsZero() && used.Sub(key.LastUsedAt) < apiKeyTouchInterval {
		return
	}
	b := a.e.store.NewBatch()
	a.record(b, projectEvent{APIKeyUsed: &apiKeyUsed{KeyID: key.ID, At: used}})
	b.Set(persistence.IndexKey(persistence.PrefixKeyIdx, a.id, key.CreatedAt.UnixNano(), key.ID), mustJSON(key.view()))
	a.e.store.Commit(b, nil)
	if rec != nil {
		rec.persistedNanos.Store(used.UnixNano())
	}
}

func (a *projectActor) sweepIdempotency() {
	b := a.e.store.NewBatch()
	n := a.e.sweepExpired(b, a.id, a.idemInFlight)
	if n == 0 {
		b.Discard()
		return
	}
	a.e.store.Commit(b, nil)
	if n == idempotencySweepBatch { // more expired: continue after queued requests
		h, _ := a.e.project(a.id)
		go a.e.system.Root.Send(h.pid, sweep{})
	}
}

// writeAudit adds an audit log entry to b.
func (e *Engine) writeAudit(b *persistence.Batch, projectID string, c *Caller, action string, target AuditTarget, details map[string]any) {
	now := e.createdAt()
	if details == nil {
		details = map[string]any{}
	}
	entry := AuditEntry{
		Object: "audit_log_entry", ID: ids.New(ids.Audit), Action: action, Actor: c.actor(), Target: target,
		RequestID: optionalString(c.RequestID), SourceIP: optionalString(c.SourceIP), CreatedAt: Timestamp(now), Details: details,
	}
	b.Set(persistence.IndexKey(persistence.PrefixAudit, projectID, now.UnixNano(), entry.ID), mustJSON(entry))
}

func roomRecordKey(projectID, roomID string) []byte {
	return []byte(persistence.PrefixRoom + projectID + "/" + roomID)
}

func participantRecordKey(projectID, roomID, participantID string) []byte {
	return []byte(persistence.PrefixPart + projectID + "/" + roomID + "/" + participantID)
}
