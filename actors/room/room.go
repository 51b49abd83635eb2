package room

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"rtcd/actors/core"
	"rtcd/apierr"
	"rtcd/auth"
	"rtcd/ids"
	"rtcd/internal/simbug"
	"rtcd/persistence"
)

// The room's commands: plain values, sent in an Envelope that carries the
// answer. Checks that need no state (field rules, token signature and
// expiry, per-address and per-project rates) ran before they were sent.
type (
	// CreateParticipant creates a participant session and signs its
	// token (POST /v1/rooms/{room_id}/participants).
	CreateParticipant struct {
		Caller core.Caller
		Params NewParticipant
		Idem   *core.IdemPending // nil without an Idempotency-Key
	}
	// RemoveParticipant removes a participant (DELETE); idempotent.
	RemoveParticipant struct {
		Caller        core.Caller
		ParticipantID string
	}
	// Delete ends the room (DELETE /v1/rooms/{room_id}); idempotent.
	Delete struct {
		Caller core.Caller
	}
	// ReadState answers the room's state as its snapshot encodes it
	// (Reply.Value, []byte): for tests and the crash simulation, never
	// for a request.
	ReadState struct{}
)

// Named bounds and durations of a room.
const (
	// MaxParticipantSessionsPerRoom bounds how many participant sessions one
	// room can ever create, so a room's state and snapshot stay bounded.
	MaxParticipantSessionsPerRoom = 10000
	// passivateAfter is how long an ended room's actor stays in memory
	// answering room_ended before it is stopped; later reads use its record.
	passivateAfter = time.Minute
	// MediaPresenceTimeout: silence of a media node run on its own for this
	// long (on the engine clock's Monotonic reading, since its last presence
	// report or the engine's start) means it is gone, and its participants
	// have left.
	MediaPresenceTimeout = 15 * time.Second
)

// roomActor owns one room: its status, its participants and the
// max_participants cap, which it publishes in its Gate for the connect
// path; it owns every durable command.
type roomActor struct {
	env       *core.Env
	id        string
	projectID string
	gate      *core.ProjectGate // what the room's project publishes
	seats     *Gate             // what the room publishes: admission, slots, seats
	log       *core.Log[roomEvent, *roomState]
	state     *roomState     // log.State()
	recovery  *core.Recovery // nil when spawned at run time (its snapshot is in the creating batch)

	// As in projectActor: recovery may run again after a restart, so the
	// start-up recovery is told once (the Gate corrects the slots itself).
	recovered bool

	chargesWritten bool      // a batch being built holds charges for the wallet
	lastSettle     time.Time // when active sessions were last charged (memory only)
}

// New is the actor of room id in project projectID, which publishes gate;
// the room publishes seats (NewGate), which the engine hands the connect
// path. It recovers from its snapshot and journal when it starts; rec is
// the start-up recovery that waits for it, nil for a room created at run
// time (its snapshot is in the batch that created it).
func New(env *core.Env, id, projectID string, gate *core.ProjectGate, seats *Gate, rec *core.Recovery) actor.Actor {
	return &roomActor{env: env, id: id, projectID: projectID, gate: gate, seats: seats, recovery: rec}
}

// Receive runs one message on the room's goroutine.
func (a *roomActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.recover()
	case *actor.Stopped:
		// Released (its workspace moved to another node) or shut down:
		// its participants no longer count on this process.
		a.seats.uncount()
	case *core.Envelope:
		switch c := m.Msg.(type) {
		case CreateParticipant:
			a.createParticipant(c, m)
		case RemoveParticipant:
			a.removeParticipant(c, m)
		case Delete:
			a.deleteRoom(c, m)
		case ReadState:
			m.Respond(core.Reply{Value: core.Encode(a.state)})
		default:
			core.RefuseUnknown(m)
		}
	case MediaJoined:
		a.join(m.Report)
	case MediaLeft:
		a.mediaLeft(m.Report)
	case Presence:
		a.reconcile(m)
	case core.Sweep:
		if a.sweep() {
			ctx.Poison(ctx.Self()) // queued behind any message already sent to it
		}
	}
}

func (a *roomActor) recover() {
	first := !a.recovered
	a.recovered = true
	err := a.load(first)
	switch {
	case first && a.recovery != nil:
		a.recovery.Done(err)
	case err != nil:
		panic(err) // the creating batch wrote the snapshot: a bug
	}
}

// load recovers the room's state and puts it back in service: its slots
// counted again, what the restart interrupted finished. first is false
// after a panic restart.
func (a *roomActor) load(first bool) error {
	a.log, a.state = nil, nil // nothing in memory survives a failed recovery
	log, err := core.RecoverLog(a.env.Store, Journal(a.id), a.env.Settings.SnapshotEveryEvents,
		func() *roomState { return &roomState{} }, nil)
	if err != nil {
		return err
	}
	a.log, a.state = log, log.State()
	// Recovered joins hold their slots again (no limit check, they were
	// admitted); reservations did not survive.
	a.seats.load(a.state)
	if a.state.retired {
		a.rewriteRetiredRecords()
	}
	if first && !a.env.Settings.MediaNodeRunsOnItsOwn && a.admitting() { // a panic restart keeps the process, and the node, running
		a.closeSessionsLostInRestart()
	}
	switch a.state.Room.Status {
	case RoomEnding:
		a.finishEnding() // it crashed or stopped mid-ending
	case RoomEnded:
		a.env.Registry.Send(core.ProjectAddress(a.projectID), core.RoomClosed{RoomID: a.id}) // the project may have missed it
	}
	return nil
}

// record appends events to the room's journal in b and applies them.
func (a *roomActor) record(b *persistence.Batch, events ...roomEvent) { a.log.Record(b, events...) }

func (a *roomActor) putRoomRecord(b *persistence.Batch) []byte {
	body := core.MustJSON(a.state.Room.view())
	b.Set(RecordKey(a.projectID, a.id), body)
	return body
}

func (a *roomActor) putParticipantRecord(b *persistence.Batch, p *Participant) []byte {
	body := core.MustJSON(p.view())
	b.Set(ParticipantRecordKey(a.projectID, a.id, p.ID), body)
	return body
}

// expireIfDue starts ending the room when it is past expires_at.
func (a *roomActor) expireIfDue() {
	r := &a.state.Room
	if (r.Status == RoomWaiting || r.Status == RoomActive) && !a.env.Clock.Now().Before(r.ExpiresAt) {
		a.startEnding(EndReasonExpired, nil, nil)
	}
}

// closedError is the error for a room that no longer admits anyone.
func (a *roomActor) closedError() *apierr.Error {
	if a.state.Room.EndReason == EndReasonExpired {
		return apierr.New(apierr.RoomExpired, "room %s expired at %s", a.id, core.Timestamp(a.state.Room.ExpiresAt))
	}
	return apierr.New(apierr.RoomEnded, "room %s has ended", a.id)
}

func (a *roomActor) admitting() bool {
	s := a.state.Room.Status
	return s == RoomWaiting || s == RoomActive
}

func (a *roomActor) createParticipant(m CreateParticipant, r *core.Envelope) {
	env := a.env
	a.expireIfDue()
	if !a.admitting() {
		r.Respond(core.Reply{Err: a.closedError()})
		return
	}
	if len(a.state.Participants) >= MaxParticipantSessionsPerRoom {
		r.Respond(core.Reply{Err: apierr.New(apierr.QuotaExceeded, "room %s has reached %d participant sessions, the most one room can create", a.id, MaxParticipantSessionsPerRoom).
			WithDetails("limit_name", "participant_sessions_per_room", "limit", MaxParticipantSessionsPerRoom)})
		return
	}
	if a.creditGateClosed() {
		r.Respond(core.Reply{Err: errInsufficientCredit})
		return
	}
	limits := env.LimitsOf(a.gate.Record.Load())
	if err := env.AllowRate("participant_creates:"+a.projectID, "participant_creates_per_minute", limits.ParticipantCreatesPerMinute); err != nil {
		r.Respond(core.Reply{Err: err})
		return
	}
	now := env.CreatedAt()
	// Not capped at the room's expiry: a connect to a room past expires_at
	// must be told room_expired, which a token expired with the room would
	// hide (the token's expiry is checked first).
	// Whole seconds: the token carries its expiry in seconds, and the
	// documented expires_at must be exactly when the token stops working.
	expiresAt := now.Add(time.Duration(m.Params.ExpiresInSeconds) * time.Second).Truncate(time.Second)
	p := Participant{
		ID: ids.New(ids.Participant), RoomID: a.id, ExternalID: m.Params.ExternalID, Name: m.Params.Name,
		Role: m.Params.Role, Status: ParticipantCreated, Metadata: m.Params.Metadata,
		CreatedAt: now, ExpiresAt: expiresAt,
	}
	token := env.Keys.SignParticipantToken(auth.ParticipantClaims{
		ProjectID: a.projectID, RoomID: a.id, ParticipantID: p.ID, ExpiresAt: expiresAt,
	})
	body := core.MustJSON(ParticipantCreatedView{ParticipantView: p.view(), Token: token})

	b := env.Store.NewBatch()
	a.putParticipantRecord(b, &p)
	b.Set(persistence.IndexKey(persistence.PrefixPartIdx, a.projectID+"/"+a.id, now.UnixNano(), p.ID), []byte(p.ID))
	if m.Idem != nil {
		env.PutStored(b, m.Idem, 201, body)
	}
	a.record(b, roomEvent{ParticipantCreated: &p})
	a.seats.add(a.state.Participants[p.ID]) // its token is handed out once the batch is durable

	if simbug.Planted(simbug.ReplyBeforeSync) { // the crash simulation's planted bug
		r.Respond(core.Reply{Status: 201, Body: body})
		env.Store.Commit(b, nil)
		return
	}
	env.Store.Commit(b, func() { r.Respond(core.Reply{Status: 201, Body: body}) })
}

// rewriteRetiredRecords writes again the records of a room whose state read
// a retired connect: such a record may still say connected, which is now
// a reservation of the room's memory, lost with the release before.
// Idempotent: it runs at each load until a snapshot without the retired
// events is written.
func (a *roomActor) rewriteRetiredRecords() {
	b := a.env.Store.NewBatch()
	for _, p := range a.state.participantsWhere(func(*Participant) bool { return true }) { // creation order, as every loop that writes
		a.putParticipantRecord(b, p)
	}
	a.env.Store.Commit(b, nil)
}

// errProjectFull is the project quota's answer (max_active_participants).
func errProjectFull(limit int) *apierr.Error {
	return apierr.New(apierr.QuotaExceeded, "the project has %d active participants, its max_active_participants limit", limit).
		WithDetails("limit_name", "max_active_participants", "limit", limit)
}

// closeSessionsLostInRestart ends, at recovery, the media sessions an
// in-process media node lost when the process stopped. Each ends at the
// last instant it was settled (charged) for: the control plane cannot know
// when the process died, and billing must never include the downtime.
// A participant that had only connected lost its reservation with the
// restart; its media token may still be valid, and its join is re-checked.
func (a *roomActor) closeSessionsLostInRestart() {
	lost := a.state.participantsWhere(func(p *Participant) bool { return p.Status == ParticipantJoined && p.Usage != nil })
	if len(lost) == 0 {
		return
	}
	b := a.env.Store.NewBatch()
	for _, p := range lost {
		u := p.Usage
		a.leave(b, p, u.StartedAt.Add(time.Duration(u.SettledSeconds)*time.Second), LeftReasonRestart)
	}
	a.env.Store.Commit(b, nil)
	a.nudgeWallet()
}

// errInsufficientCredit is the credit gate's answer (spec: 402).
var errInsufficientCredit = apierr.New(apierr.InsufficientCredit,
	"the workspace's prepaid balance is below minimum_credit_to_start; top up to start new sessions")

// creditGateClosed reports whether the workspace's wallet closed the gate.
func (a *roomActor) creditGateClosed() bool { return a.gate.CreditClosed() }

func (a *roomActor) removeParticipant(m RemoveParticipant, r *core.Envelope) {
	p, ok := a.state.Participants[m.ParticipantID]
	if !ok {
		r.Respond(core.Reply{Err: apierr.New(apierr.ParticipantNotFound, "no participant %s in room %s", m.ParticipantID, a.id)})
		return
	}
	if p.Status == ParticipantRemoved || p.Status == ParticipantEnded {
		a.respondOnceDurable(r, core.MustJSON(p.view())) // DELETE is idempotent
		return
	}
	now := a.env.Clock.Now()
	// The seat closes first: from here no connect reserves for it, and a
	// reservation or join it held gives its slot back.
	was := a.seats.move(p.ID, func(cur *seatState) *seatState {
		next := *cur
		next.status, next.closedAs, next.joined = seatClosed, ParticipantRemoved, ""
		return &next
	})
	b := a.env.Store.NewBatch()
	a.leave(b, p, now, LeftReasonRemoved) // finalizes a joined participant's usage
	removal := &participantRemoved{ParticipantID: p.ID, At: now}
	if was != nil && p.ConnectedAt.IsZero() {
		removal.ConnectedAt = was.connectedAt // a connect only the room's memory knew
	}
	a.record(b, roomEvent{ParticipantRemoved: removal})
	body := a.putParticipantRecord(b, p)
	a.env.Store.Commit(b, func() { r.Respond(core.Reply{Status: 200, Body: body}) })
	a.nudgeWallet()
	// The node refuses its later joins: a media token it still holds (a
	// join, or a reservation's) must not get in.
	if media := a.env.Media.Engine(); media != nil && was != nil && (was.status == seatJoined || now.Before(was.expiresAt)) {
		media.RemoveParticipant(a.id, p.ID)
	}
}

func (a *roomActor) deleteRoom(m Delete, r *core.Envelope) {
	if a.admitting() {
		a.startEnding(EndReasonDeleted, &m.Caller, func(body []byte) { r.Respond(core.Reply{Status: 200, Body: body}) })
		return
	}
	a.respondOnceDurable(r, core.MustJSON(a.state.Room.view())) // DELETE is idempotent
}

// respondOnceDurable answers a repeated DELETE, which changes nothing,
// once every batch applied before it is durable (Store.AfterDurable): the
// removal or the end it reports may be a concurrent first DELETE's, still
// waiting for its fsync, and answered at once a crash could undo what it
// acknowledged (as the repeat of a key's revocation).
func (a *roomActor) respondOnceDurable(r *core.Envelope, body []byte) {
	a.env.Store.AfterDurable(func() { r.Respond(core.Reply{Status: 200, Body: body}) })
}

// startEnding moves the room to ending (audited when a caller asked for
// it), then closes its sessions. The two are separate durable steps so that
// an external media engine's closure can sit between them; a crash in
// between resumes at finishEnding on recovery. An actor never sends to its
// own bounded mailbox (it could block on itself), so this is a direct call.
func (a *roomActor) startEnding(reason string, caller *core.Caller, done func(body []byte)) {
	env := a.env
	b := env.Store.NewBatch()
	if caller != nil {
		env.Audit.Project(b, a.projectID, caller, "room.deleted", core.AuditTarget{Type: "room", ID: a.id}, nil)
	}
	a.record(b, roomEvent{RoomEndingStarted: &roomEndingStarted{Reason: reason, At: env.Clock.Now()}})
	a.seats.close(&a.state.Room) // no connect reserves from here on
	body := a.putRoomRecord(b)
	env.Store.Commit(b, func() {
		if done != nil {
			done(body)
		}
	})
	if media := a.env.Media.Engine(); media != nil {
		media.CloseRoom(a.id, reason)
	}
	a.finishEnding()
}

// finishEnding closes every open participant session and ends the room.
func (a *roomActor) finishEnding() {
	if a.state.Room.Status != RoomEnding {
		return
	}
	env := a.env
	now := env.Clock.Now()
	b := env.Store.NewBatch()
	// Open usage is finalized before the room ends (spec 6, Emission 3).
	open := a.state.participantsWhere(func(p *Participant) bool {
		return p.Status != ParticipantRemoved && p.Status != ParticipantEnded
	})
	for _, p := range open {
		a.leave(b, p, now, LeftReasonRoomEnded)
	}
	a.seats.close(&a.state.Room) // every slot given back (again, after a restart mid-ending)
	end := &roomEnded{At: now}
	for _, p := range open {
		if at := a.seats.connectedAt(p.ID); p.ConnectedAt.IsZero() && !at.IsZero() {
			if end.ConnectedAt == nil {
				end.ConnectedAt = make(map[string]time.Time)
			}
			end.ConnectedAt[p.ID] = at // a connect only the room's memory knew
		}
	}
	seq := a.state.EventSeq + 1
	env.Outbox.Emit(b, a.projectID, core.EventRoomEnded, now, map[string]any{"room_id": a.id, "reason": a.state.Room.EndReason, "sequence": seq})
	a.record(b, roomEvent{RoomEnded: end, EventSeq: seq})
	a.putRoomRecord(b)
	for _, p := range open {
		a.putParticipantRecord(b, p)
	}
	a.nudgeWallet()
	// The end is visible to readers once Commit returns; from then on the
	// room must not count against max_active_rooms (see endedRooms).
	a.gate.EndedRooms.Add(1)
	env.Store.Commit(b, func() {
		// Told only once the end is durable, so the project never forgets a
		// room that would recover as ending. Posted: the syncer must never
		// block on a full mailbox.
		env.Registry.Post(core.ProjectAddress(a.projectID), core.RoomClosed{RoomID: a.id, Counted: true})
	})
}

// settleUntil is the instant a settlement charges running sessions up to:
// now, or for a media node run on its own no later than its last presence
// snapshot, the last instant the control plane knows its sessions were
// there. If that node has died, its sessions end at that snapshot
// (reconcile), and a settlement past it would have charged more than their
// final length, which the final charge never gives back.
func (a *roomActor) settleUntil(now time.Time) time.Time {
	last, _, registered := a.env.Media.LastPresenceOf(a.id, now, a.env.Clock.Monotonic())
	if !registered && !a.env.Settings.MediaNodeRunsOnItsOwn {
		return now
	}
	if last.Before(now) {
		return last
	}
	return now
}

// sweep is the room's periodic housekeeping (every sweepInterval): expiry,
// lapsed connects, settlement, a silent media node. It reports whether the
// room ended long enough ago that its actor should stop (passivation).
func (a *roomActor) sweep() (stop bool) {
	a.expireIfDue()
	now := a.env.Clock.Now()
	if a.admitting() {
		a.seats.lapse(now) // no write: a reservation lives in memory only
		if interval := a.env.Settings.Billing.SettleInterval; now.Sub(a.lastSettle) >= interval {
			// On the interval's grid, not at this sweep's reading: sweeps
			// come on a real 1 s ticker, and with its jitter a sweep a hair
			// under one interval after the last settlement would otherwise
			// skip it, settling every interval plus one sweep.
			a.lastSettle = now.Truncate(interval)
			a.settle(a.settleUntil(now))
		}
		// A media node on its own that stopped reporting (crashed) has
		// nobody left. Silence is time passed on the engine's clock, not
		// a difference of wall-clock readings (see lastPresenceSeen).
		// A registered node of a cluster runs on its own too.
		last, seen, registered := a.env.Media.LastPresenceOf(a.id, now, a.env.Clock.Monotonic())
		if (registered || a.env.Settings.MediaNodeRunsOnItsOwn) && a.env.Clock.Monotonic()-seen > MediaPresenceTimeout {
			a.reconcile(Presence{At: last})
		}
	}
	r := &a.state.Room
	if r.Status == RoomEnded && a.env.Clock.Now().Sub(r.EndedAt) >= passivateAfter {
		a.env.Registry.RoomStopped(a.id)
		return true
	}
	return false
}
