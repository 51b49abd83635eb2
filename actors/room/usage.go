package room

import (
	"time"

	"rtcd/actors/core"
	"rtcd/ids"
	"rtcd/internal/simbug"
	"rtcd/metrics"
	"rtcd/money"
	"rtcd/persistence"
)

// Reasons a participant's media session ended (participant.left data.reason).
const (
	LeftReasonLeft             = "left"                  // the client said leave
	LeftReasonDisconnected     = "disconnected"          // its socket dropped
	LeftReasonHeartbeatTimeout = "heartbeat_timeout"     // it stopped sending heartbeats
	LeftReasonRemoved          = "removed"               // DELETE of the participant
	LeftReasonRoomEnded        = "room_ended"            // the room ended
	LeftReasonConnectTimeout   = "connect_timeout"       // it never joined the media node
	LeftReasonReconciled       = "reconciled"            // the media node no longer has it (missed leave)
	LeftReasonRestart          = "control_plane_restart" // the embedded node restarted with the process
)

// MediaJoin is a media node's report that a participant's session asks to
// join (a node that awaits admission holds the socket until the room
// answers AdmitSession or CloseSession) or joined (a node that does not).
// IssuedAt is the session's media token's issue time.
type MediaJoin struct {
	SessionID, ProjectID, RoomID, ParticipantID string
	IssuedAt, At                                time.Time
	NodeID                                      string // the reporting node (a join report's)
}

// MediaLeave is a media node's report that a participant left.
type MediaLeave struct {
	SessionID, ProjectID, RoomID, ParticipantID string
	At                                          time.Time
	Reason                                      string
}

// MediaPresence is a media node's snapshot of who is connected, for the
// reconciler: it recovers joins and leaves the control plane missed.
// Pending are the joins the node holds waiting for the room's answer.
type MediaPresence struct {
	NodeID   string
	At       time.Time
	Sessions []MediaJoin
	Pending  []MediaJoin
}

// The room's messages from the media side (no answer). They are never
// refused and never block the sender: the media node's hub must not wait
// on a room that may be waiting on the node.
type (
	// MediaJoined is a join report for the room.
	MediaJoined struct{ Report MediaJoin }
	// MediaLeft is a leave report for the room.
	MediaLeft struct{ Report MediaLeave }
	// Presence is the room's part of a media node's presence snapshot.
	Presence struct {
		At       time.Time
		Sessions map[string]MediaJoin // participant id -> its session on the node
		Pending  []MediaJoin          // joins the node holds, waiting for an answer
	}
)

// Codes a room closes a media session with (CloseSession): the media
// node's error codes (docs/media-protocol.md), which client SDKs map to
// the spec's normalized codes.
const (
	RefuseRoomClosed         = "room_closed"               // the room ended
	RefuseRemoved            = "removed"                   // the participant was removed
	RefuseSessionEnded       = "token_expired"             // the session joined and left: connect again
	RefuseSessionSuperseded  = "session_superseded"        // a newer session of the participant exists
	RefuseParticipantLimit   = "participant_limit_reached" // re-checked: the room or the project is full
	RefuseInsufficientCredit = "insufficient_credit"       // re-checked: the credit gate is closed
)

// join decides a media join: the join is the point of record. Only the
// participant's own latest session is admitted:
//   - the session of its live reservation is recorded, taking over the
//     reservation's slot;
//   - a session the room does not know (its reservation lapsed, or was
//     lost with a restart) but issued after every session the room knows
//     is re-checked as a connect would be (participant and room status,
//     room cap, project quota, credit gate) and recorded only if it
//     passes;
//   - a session issued no later than the latest known one is stale, a
//     session that joined and left never joins again, and a removed
//     participant or a closed room admits nobody.
//
// A session recorded is admitted (AdmitSession) once its batch is durable:
// the node serves nothing the room has not recorded. Any other is closed
// (CloseSession) with its reason, and nothing is recorded. A join of the
// session already recorded is admitted again (the node may have lost the
// answer), once what recorded it is durable, and records nothing.
func (a *roomActor) join(r MediaJoin) {
	p, ok := a.state.Participants[r.ParticipantID]
	switch {
	case !a.admitting():
		a.refuseJoin(r, RefuseRoomClosed)
		return
	case !ok || p.final():
		a.refuseJoin(r, RefuseRemoved)
		return
	}
	limit := a.env.LimitsOf(a.gate.Record.Load()).MaxActiveParticipants
	for {
		seat := a.seats.seat(p.ID)
		cur := seat.state.Load()
		known := r.SessionID == cur.session
		switch {
		case cur.status == seatJoined && cur.joined == r.SessionID:
			// Already recorded, or being recorded: the first report's batch
			// may still wait for its fsync, and the node serves nothing
			// before the join is durable (a crash could lose it).
			a.env.Store.AfterDurable(func() { a.admitJoin(r) })
			return
		case cur.status == seatClosed:
			a.refuseJoin(r, RefuseRemoved)
			return
		case !known && !r.IssuedAt.After(cur.issuedAt) && !simbug.Planted(simbug.StaleJoin): // the crash simulation's planted bug
			a.refuseJoin(r, RefuseSessionSuperseded)
			return
		case r.SessionID == p.SessionID && p.Status == ParticipantLeft:
			a.refuseJoin(r, RefuseSessionEnded)
			return
		}
		next := *cur
		next.status, next.joined, next.session = seatJoined, r.SessionID, r.SessionID
		if !known {
			next.issuedAt, next.expiresAt = r.IssuedAt, time.Time{}
		}
		took := false
		switch {
		case known && cur.status != seatOpen:
			// The session of its reservation (or, while joined, of a
			// reconnect): checked by its connect, the slot is its own.
		case cur.status != seatOpen:
			// Unknown, newer than what it holds: the participant's slot,
			// checked again as its connect would be, but for the caps.
			if a.creditGateClosed() {
				a.refuseJoin(r, RefuseInsufficientCredit)
				return
			}
		default:
			// Unknown or lapsed, holding nothing: every check again.
			if a.creditGateClosed() {
				a.refuseJoin(r, RefuseInsufficientCredit)
				return
			}
			switch a.seats.takeSlot(limit) {
			case takeRoomFull, takeProjectFull:
				a.refuseJoin(r, RefuseParticipantLimit)
				return
			case takeClosed:
				a.refuseJoin(r, RefuseRoomClosed)
				return
			}
			took = true
		}
		if !seat.state.CompareAndSwap(cur, &next) {
			if took {
				a.seats.giveSlot()
			}
			continue // a connect of the participant moved its seat: decide again
		}
		a.recordJoin(p, r, cur)
		return
	}
}

// recordJoin records an admitted join: a participant that was not joined
// joins (its usage starts, participant.joined is emitted); a joined one
// moves to its newer session (renewed: the node replaces its socket, its
// usage goes on). The node is told to admit the session once the batch is
// durable.
func (a *roomActor) recordJoin(p *Participant, r MediaJoin, was *seatState) {
	b := a.env.Store.NewBatch()
	if p.Status == ParticipantJoined {
		a.record(b, roomEvent{SessionRenewed: &participantRenewed{ParticipantID: p.ID, SessionID: r.SessionID, IssuedAt: r.IssuedAt, At: r.At}})
		a.env.Store.Commit(b, func() { a.admitJoin(r) })
		return
	}
	wasWaiting := a.state.Room.Status == RoomWaiting
	seq := a.state.EventSeq
	next := func() uint64 { seq++; return seq }
	if wasWaiting {
		a.env.Outbox.Emit(b, a.projectID, core.EventRoomStarted, r.At, map[string]any{"room_id": a.id, "sequence": next()})
	}
	a.env.Outbox.Emit(b, a.projectID, core.EventParticipantJoined, r.At, map[string]any{
		"room_id": a.id, "participant_id": p.ID, "session_id": r.SessionID, "sequence": next()})
	a.record(b, roomEvent{ParticipantJoined: &participantJoined{
		ParticipantID: p.ID, SessionID: r.SessionID, IssuedAt: r.IssuedAt, ConnectedAt: was.connectedAt, At: r.At}, EventSeq: seq})
	a.putParticipantRecord(b, p)
	if wasWaiting {
		a.putRoomRecord(b)
	}
	a.env.Store.Commit(b, func() { a.admitJoin(r) })
}

// admitJoin tells the media engine to serve a recorded session. Called
// once the record is durable (from the syncer: the engine never blocks).
func (a *roomActor) admitJoin(r MediaJoin) {
	if media := a.env.Media.Engine(); media != nil {
		media.AdmitSession(a.id, r.ParticipantID, r.SessionID)
	}
}

// refuseJoin tells the media engine to close a session the room did not
// record, with code.
func (a *roomActor) refuseJoin(r MediaJoin, code string) {
	if media := a.env.Media.Engine(); media != nil {
		media.CloseSession(a.id, r.ParticipantID, r.SessionID, code)
	}
}

// leave finalizes a joined participant's usage session into b: the last
// charge, the per-day usage records, and participant.left plus
// usage.finalized; its seat gives its slot back (or keeps it for a newer
// live reservation). A participant not joined has nothing to finalize.
// The caller commits b.
func (a *roomActor) leave(b *persistence.Batch, p *Participant, at time.Time, reason string) {
	if p.Status != ParticipantJoined {
		return
	}
	if at.Before(p.JoinedAt) {
		at = p.JoinedAt // reports can arrive out of order; never a negative session
	}
	seq := a.state.EventSeq
	next := func() uint64 { seq++; return seq }
	var seconds, charged int64
	if u := p.Usage; u != nil {
		seconds = int64(at.Sub(u.StartedAt) / time.Second)
		charged = a.charge(b, p, u, seconds, at)
		a.env.Metrics.Billing.Settled(metrics.SettlementFinal)
		a.writeUsageRecords(b, p, u, at, seconds)
		a.env.Outbox.Emit(b, a.projectID, core.EventParticipantLeft, at, map[string]any{
			"room_id": a.id, "participant_id": p.ID, "session_id": u.SessionID, "reason": reason, "sequence": next()})
		a.env.Outbox.Emit(b, a.projectID, core.EventUsageFinalized, at, map[string]any{
			"room_id": a.id, "participant_id": p.ID, "session_id": u.SessionID,
			"started_at": core.Timestamp(u.StartedAt), "ended_at": core.Timestamp(at),
			"participant_seconds": seconds, "participant_minutes": float64(seconds) / 60,
			"amount": money.Micros(charged).Format(core.LedgerAmountDecimals), "currency": a.env.Settings.Billing.Currency,
			"sequence": next()})
	}
	a.record(b, roomEvent{ParticipantLeft: &participantLeft{ParticipantID: p.ID, At: at, Reason: reason, Seconds: seconds, ChargedMicros: charged}, EventSeq: seq})
	a.seats.leave(p.ID, a.env.Clock.Now())
	a.putParticipantRecord(b, p)
}

// charge writes, for the wallet, the charge of a session's usage from what
// was already charged up to totalSeconds, and returns the new total charged.
// The total is priced as a whole (floor of seconds x price / 60), so the sum
// of a session's charges never drifts from its exact price by rounding.
func (a *roomActor) charge(b *persistence.Batch, p *Participant, u *UsageSession, totalSeconds int64, at time.Time) int64 {
	billing := &a.env.Settings.Billing
	if !billing.Enabled {
		return u.ChargedMicros
	}
	total, ok := money.MulDivFloor(totalSeconds, int64(billing.ParticipantMinutePrice), 60)
	if !ok || total <= u.ChargedMicros {
		return u.ChargedMicros
	}
	accountID := a.gate.Record.Load().AccountID
	c := core.PendingCharge{
		ID: ids.New(ids.Charge), ProjectID: a.projectID, RoomID: a.id, ParticipantID: p.ID, SessionID: u.SessionID,
		Seconds: totalSeconds - u.SettledSeconds, Amount: total - u.ChargedMicros, At: at,
	}
	b.Set(persistence.Key(persistence.PrefixCharge, accountID+"/"+c.ID), core.MustJSON(c))
	a.chargesWritten = true
	return total
}

// nudgeWallet tells the workspace's wallet that charges are waiting. Sent
// after the charges' batch is applied; the wallet also sweeps every second,
// so a lost nudge only delays a charge.
func (a *roomActor) nudgeWallet() {
	if !a.chargesWritten {
		return
	}
	a.chargesWritten = false
	a.env.Registry.Post(core.WalletAddress(a.gate.Record.Load().AccountID), core.ApplyCharges{}) // never block the room on a full wallet mailbox
}

// settle charges every joined participant for its usage so far. Called by
// the sweep once per settle interval, so running sessions are paid as they
// go and a balance that runs out closes the credit gate for new sessions.
func (a *roomActor) settle(now time.Time) {
	b := a.env.Store.NewBatch()
	n := 0
	for _, p := range a.state.participantsWhere(func(p *Participant) bool { return p.Usage != nil }) {
		u := p.Usage
		if !now.After(u.StartedAt) {
			continue
		}
		seconds := int64(now.Sub(u.StartedAt) / time.Second)
		if seconds <= u.SettledSeconds {
			continue
		}
		charged := a.charge(b, p, u, seconds, now)
		a.record(b, roomEvent{UsageSettled: &usageSettled{ParticipantID: p.ID, SettledSeconds: seconds, ChargedMicros: charged}})
		a.env.Metrics.Billing.Settled(metrics.SettlementRunning)
		n++
	}
	if n == 0 {
		b.Discard()
		return
	}
	a.env.Store.Commit(b, nil)
	a.nudgeWallet()
}

// UsageDayLayout names a UTC day in usage keys and the daily endpoint.
const UsageDayLayout = "2006-01-02"

// UsageRecord is the finalized usage of one session on one UTC day.
type UsageRecord struct {
	ProjectID     string    `json:"project_id"`
	RoomID        string    `json:"room_id"`
	ParticipantID string    `json:"participant_id"`
	SessionID     string    `json:"session_id"`
	Day           string    `json:"day"`
	Seconds       int64     `json:"participant_seconds"`
	StartedAt     time.Time `json:"started_at"` // of the part of the session on this day
	EndedAt       time.Time `json:"ended_at"`
}

// writeUsageRecords splits a finished session at UTC midnights. Each day's
// seconds are differences of the whole seconds elapsed at its boundaries,
// so the days add up exactly to the session's total.
func (a *roomActor) writeUsageRecords(b *persistence.Batch, p *Participant, u *UsageSession, end time.Time, totalSeconds int64) {
	start := u.StartedAt
	elapsedAt := func(t time.Time) int64 { return int64(t.Sub(start) / time.Second) }
	for from := start; from.Before(end) || from.Equal(start); {
		dayEnd := time.Date(from.Year(), from.Month(), from.Day()+1, 0, 0, 0, 0, time.UTC)
		to := end
		if dayEnd.Before(end) {
			to = dayEnd
		}
		secs := elapsedAt(to) - elapsedAt(from)
		if to.Equal(end) {
			secs = totalSeconds - elapsedAt(from)
		}
		rec := UsageRecord{ProjectID: a.projectID, RoomID: a.id, ParticipantID: p.ID, SessionID: u.SessionID,
			Day: from.UTC().Format(UsageDayLayout), Seconds: secs, StartedAt: from, EndedAt: to}
		b.Set(persistence.Key(persistence.PrefixUsage, a.projectID+"/"+rec.Day+"/"+u.SessionID), core.MustJSON(rec))
		if !to.Before(end) {
			return
		}
		from = to
	}
}

func (a *roomActor) mediaLeft(r MediaLeave) {
	p, ok := a.state.Participants[r.ParticipantID]
	if !ok || p.Status != ParticipantJoined || p.SessionID != r.SessionID {
		return // stale or duplicate
	}
	b := a.env.Store.NewBatch()
	a.leave(b, p, r.At, r.Reason)
	a.env.Store.Commit(b, nil)
	a.nudgeWallet()
}

// reconcile compares the room with a media node's snapshot: a joined
// participant the node no longer has left (at the snapshot's time); a
// session the node holds that the room has not recorded as its
// participant's (a join report lost, an answer lost, a node that admits
// before asking) is decided as a join: recorded and admitted, or closed.
func (a *roomActor) reconcile(m Presence) {
	if !a.admitting() {
		// The node still holds sessions of a room that is closing or
		// closed: a close command was lost. Ask again (idempotent).
		if len(m.Sessions) > 0 || len(m.Pending) > 0 {
			if media := a.env.Media.Engine(); media != nil {
				media.CloseRoom(a.id, a.state.Room.EndReason)
			}
		}
		return
	}
	// Presence is by participant: after a reconnect the node may still
	// show the previous session until the new one replaces it.
	// A join the node holds waiting for the room's answer is on the node
	// too: the snapshot can be taken after the join was reported and
	// before its answer left, and the room can have recorded the join
	// since. Its recorded session is not gone; the pending entry below
	// asks again, and the join's answer goes out again.
	waiting := make(map[string]string, len(m.Pending))
	for _, s := range m.Pending {
		waiting[s.ParticipantID] = s.SessionID
	}
	changed := a.state.participantsWhere(func(p *Participant) bool {
		s, onNode := m.Sessions[p.ID]
		held := onNode || waiting[p.ID] == p.SessionID
		return p.Status == ParticipantJoined && !held ||
			onNode && (p.Status != ParticipantJoined || s.SessionID != p.SessionID)
	})
	for _, p := range changed {
		s, onNode := m.Sessions[p.ID]
		if !onNode { // joined, and gone from the node
			b := a.env.Store.NewBatch()
			a.leave(b, p, m.At, LeftReasonReconciled)
			a.env.Store.Commit(b, nil)
			continue
		}
		a.join(s)
	}
	for _, s := range m.Pending {
		a.join(s)
	}
	a.nudgeWallet()
}
