package room

import (
	"time"

	"rtcd/actors/core"
	"rtcd/apierr"
	"rtcd/ids"
)

// ConnectSession is a connect the gate admitted: the reservation it holds
// and what the media token must say.
type ConnectSession struct {
	SessionID     string
	ProjectID     string
	RoomID        string
	ParticipantID string
	Role          string
	IssuedAt      time.Time
	ExpiresAt     time.Time // the media token's expiry, whole seconds
}

// Connect decides a connect (POST /v1/connect) for participantID, on the
// caller's goroutine, against what the room and its project publish, and
// reserves its slots in memory: no message, no journal write, no fsync
// wait. It runs the checks that need state in the spec's order: project
// status, room status, participant status, participant limit, project
// quota, account credit policy, media availability (token signature and
// expiry, and the rates, ran before). now is the request's one clock
// reading.
//
// Every check runs before anything is taken. Then the room's slot and the
// project's are taken by compare-and-swap, and the seat moves to the new
// reservation by another; a take that fails because others took the last
// slots since the check is that check's answer, and a seat that changed
// meanwhile (another connect of the participant, a removal, the room's
// end) gives the slots back and decides again. So no refusal holds a slot,
// and a participant connecting many times at once holds one.
func (g *Gate) Connect(env *core.Env, participantID string, now time.Time) (ConnectSession, *apierr.Error) {
	record := g.project.Record.Load()
	if record.Status != core.ProjectActive {
		return ConnectSession{}, apierr.New(apierr.PermissionDenied, "the project of this room is not active")
	}
	limit := env.LimitsOf(record).MaxActiveParticipants
	for {
		w := g.word.Load()
		if err := g.closedError(gateState(w), now); err != nil {
			return ConnectSession{}, err
		}
		st := g.seat(participantID)
		if st == nil {
			return ConnectSession{}, apierr.New(apierr.ParticipantNotFound, "participant %s does not exist", participantID)
		}
		cur := st.state.Load()
		if cur.status == seatClosed {
			// The room closes its gate before its seats: a seat closed
			// since the gate was read may be the room's end, which answers
			// first.
			if err := g.closedError(gateState(g.word.Load()), now); err != nil {
				return ConnectSession{}, err
			}
			return ConnectSession{}, apierr.New(apierr.ParticipantNotFound, "participant %s was removed from the room", participantID).
				WithDetails("participant_status", cur.closedAs)
		}
		// A participant holding its slot (connected or joined) skips the two
		// caps and gets a new session.
		newSlot := !cur.holds()
		if newSlot {
			if g.full(gateSlots(w)) {
				return ConnectSession{}, g.errRoomFull()
			}
			if g.project.ActiveParticipants.Load() >= int64(limit) {
				return ConnectSession{}, errProjectFull(limit)
			}
		}
		if g.project.CreditClosed() {
			return ConnectSession{}, errInsufficientCredit
		}
		if env.Settings.MediaURL == "" {
			return ConnectSession{}, apierr.New(apierr.ServiceUnavailable, "no media node is available in region %s", env.Settings.Region)
		}
		roomExpiresAt := g.ExpiresAt()
		expiresAt := now.Add(env.Settings.MediaTokenTTL)
		if expiresAt.After(roomExpiresAt) {
			expiresAt = roomExpiresAt // a media session never outlives its room
		}
		// Tokens carry whole seconds; the session's expires_at says exactly
		// what the token says. Less than a second of room left is an
		// expired room (the room's sweep ends it).
		expiresAt = expiresAt.Truncate(time.Second)
		if !expiresAt.After(now) {
			return ConnectSession{}, g.errExpired()
		}

		next := *cur
		next.session = ids.New(ids.ConnectSession)
		// Strictly after the participant's latest session, so a step of
		// the wall clock can never make a newer session look older.
		next.issuedAt = now
		if !now.After(cur.issuedAt) {
			next.issuedAt = cur.issuedAt.Add(time.Nanosecond)
		}
		next.expiresAt = expiresAt
		if next.connectedAt.IsZero() {
			next.connectedAt = now
		}
		if newSlot {
			switch g.takeSlot(limit) {
			case takeClosed:
				continue // the room closed since the check: answer as closed
			case takeRoomFull:
				return ConnectSession{}, g.errRoomFull()
			case takeProjectFull:
				return ConnectSession{}, errProjectFull(limit)
			}
			next.status = seatReserved
		}
		if st.state.CompareAndSwap(cur, &next) {
			return ConnectSession{
				SessionID: next.session, ProjectID: record.ID, RoomID: g.roomID, ParticipantID: participantID,
				Role: st.role, IssuedAt: next.issuedAt, ExpiresAt: expiresAt,
			}, nil
		}
		if newSlot {
			g.giveSlot()
		}
		// The seat changed since it was read (another connect of this
		// participant, a join, a lapse, a removal, the room's end): decide
		// again on what it is now.
	}
}

// closedError is the answer for a room in admission state state at now:
// nil while it admits and has not passed its expires_at.
func (g *Gate) closedError(state uint64, now time.Time) *apierr.Error {
	switch state {
	case gateLoading:
		return core.ErrUnavailable
	case gateDeleted:
		return apierr.New(apierr.RoomEnded, "room %s has ended", g.roomID)
	case gateExpired:
		return g.errExpired()
	}
	if !now.Before(g.ExpiresAt()) {
		return g.errExpired() // the room's sweep ends it
	}
	return nil
}

func (g *Gate) errExpired() *apierr.Error {
	return apierr.New(apierr.RoomExpired, "room %s expired at %s", g.roomID, core.Timestamp(g.ExpiresAt()))
}

func (g *Gate) errRoomFull() *apierr.Error {
	max := g.maxParticipants.Load()
	return apierr.New(apierr.QuotaExceeded, "room %s is full (%d participants)", g.roomID, max).
		WithDetails("limit_name", "max_participants", "limit", int(max))
}
