package room

import (
	"sync"
	"sync/atomic"
	"time"

	"rtcd/actors/core"
	"rtcd/internal/simbug"
)

// Gate is what a room publishes so that a connect is decided on the HTTP
// goroutine, with no message to the room: whether the room admits anyone,
// its cap, how many of its slots are held, and one Seat per participant.
// Every slot of the room's max_participants and of its project's
// max_active_participants is taken and given back here, by compare-and-swap
// (no lock: actors enforce caps without locks, see ARCHITECTURE.md), so
// both caps hold exactly under any concurrency, and every release path
// (a lapse, a leave, a removal, the room's end, a restart) goes through
// the same words: no slot leaks or counts twice.
//
// Ownership: the room actor alone opens and closes the gate, creates seats
// and moves a seat out of a state a join, leave, lapse, removal or end
// changes; a connect (any goroutine) only moves a seat to a new
// reservation. Each move is one compare-and-swap of the seat's state, and
// the slot it takes or gives back changes owner in the same step: a slot is
// held either by one seat or by the one goroutine between its take and its
// compare-and-swap (which gives it back if the swap fails).
//
// A reservation lives here only, never in the journal: a restart loses it
// (docs/storage.md, the crash contract), and the join that would have
// matched it is re-checked instead.
type Gate struct {
	roomID  string
	project *core.ProjectGate
	gauge   *atomic.Int64 // the process-wide count of held slots (a metric)

	// word packs the room's admission state (the top two bits: gateLoading,
	// gateOpen, gateDeleted, gateExpired) and the number of its slots held
	// (the low 32 bits), so that a slot can never be taken after the room
	// closed: closing and taking are compare-and-swaps of the same word.
	word atomic.Uint64
	// The room's max_participants and expires_at, stored by its load before
	// the word opens; they never change afterwards.
	maxParticipants atomic.Int64
	expiresAtNanos  atomic.Int64

	seats sync.Map // participant id -> *Seat
}

// Admission states of a gate (the top bits of its word).
const (
	gateLoading uint64 = iota // not recovered yet, or reloading after a panic: connects are told to retry
	gateOpen                  // waiting or active: admits
	gateDeleted               // ending or ended, deleted: room_ended
	gateExpired               // ending or ended, expired: room_expired
)

const (
	gateStateShift = 62
	gateSlotsMask  = 1<<32 - 1
)

func gateState(w uint64) uint64 { return w >> gateStateShift }
func gateSlots(w uint64) int64  { return int64(w & gateSlotsMask) }
func gateWord(state uint64, slots int64) uint64 {
	return state<<gateStateShift | uint64(slots)&gateSlotsMask
}

// NewGate is the gate of room roomID of the project publishing project;
// gauge counts the slots held in the whole process. It admits nobody until
// the room's actor has loaded it.
func NewGate(roomID string, project *core.ProjectGate, gauge *atomic.Int64) *Gate {
	return &Gate{roomID: roomID, project: project, gauge: gauge}
}

// Slots is the number of the room's slots held (reservations and joined
// participants).
func (g *Gate) Slots() int64 { return gateSlots(g.word.Load()) }

// Held counts the seats holding a slot: joined (recorded) and reserved
// (connect reservations, live or lapsed and not yet swept). For tests and
// the crash simulation: with no connect or join between its take of a slot
// and its compare-and-swap, joined+reserved is Slots().
func (g *Gate) Held() (joined, reserved int64) {
	g.seats.Range(func(_, v any) bool {
		switch v.(*Seat).state.Load().status {
		case seatJoined:
			joined++
		case seatReserved:
			reserved++
		}
		return true
	})
	return joined, reserved
}

// ExpiresAt is the room's expires_at (zero before the room's load).
func (g *Gate) ExpiresAt() time.Time {
	n := g.expiresAtNanos.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// Seat is one participant's place in its room's gate, created with the
// participant and never replaced: its state changes by compare-and-swap.
type Seat struct {
	role  string
	state atomic.Pointer[seatState]
}

// Seat statuses.
const (
	seatOpen     = iota // created, or left: holds no slot
	seatReserved        // a connect's reservation: holds a slot until it lapses or joins
	seatJoined          // joined (recorded): holds a slot until it leaves
	seatClosed          // removed, or its room ended: final
)

// seatState is one state of a seat; immutable once published.
type seatState struct {
	status int
	// closedAs is the participant's status when closed (removed, ended).
	closedAs string
	// session is the participant's latest known session: the last one a
	// connect issued, else the last one recorded; issuedAt is its media
	// token's issue time. A join with another session issued no later is
	// stale.
	session  string
	issuedAt time.Time
	// expiresAt is when session's media token expires; a reservation
	// lapses then.
	expiresAt time.Time
	// joined is the session recorded as joined (seatJoined). While joined,
	// session may be a newer one a connect issued, holding no slot of its
	// own: the participant's.
	joined string
	// connectedAt is the participant's first connect (recorded, or seen by
	// this process).
	connectedAt time.Time
}

func (s *seatState) holds() bool { return s.status == seatReserved || s.status == seatJoined }

// reservation reports whether s is a live connect reservation at now: it
// holds a slot, it has not joined, and its media token has not expired.
func (s *seatState) reservation(now time.Time) bool {
	return s.status == seatReserved && now.Before(s.expiresAt)
}

// seat is participant id's seat, nil when the room has none.
func (g *Gate) seat(id string) *Seat {
	v, ok := g.seats.Load(id)
	if !ok {
		return nil
	}
	return v.(*Seat)
}

// connectedAt is the participant's first connect as the gate knows it
// (zero: none, or no such participant).
func (g *Gate) connectedAt(id string) time.Time {
	if st := g.seat(id); st != nil {
		return st.state.Load().connectedAt
	}
	return time.Time{}
}

// Reservation is what GET of a participant shows from the room's memory:
// whether it holds a live connect reservation at now (status connected),
// and its first connect (which the record may not hold yet: a connect is
// recorded with the participant's join, removal or room end).
func (g *Gate) Reservation(participantID string, now time.Time) (connectedAt time.Time, ok bool) {
	st := g.seat(participantID)
	if st == nil {
		return time.Time{}, false
	}
	s := st.state.Load()
	return s.connectedAt, s.reservation(now)
}

// --- slots -------------------------------------------------------------------

// Why a take of a slot failed.
const (
	takeOK = iota
	takeRoomFull
	takeProjectFull
	takeClosed // the room stopped admitting
)

// takeSlot takes one slot of the room (if it admits and fewer than its
// max_participants are held) and then one of the project (if fewer than
// limit are held). A take that fails holds nothing.
func (g *Gate) takeSlot(limit int) int {
	for {
		w := g.word.Load()
		switch {
		case gateState(w) != gateOpen:
			return takeClosed
		case g.full(gateSlots(w)):
			return takeRoomFull
		}
		if g.word.CompareAndSwap(w, w+1) {
			break
		}
	}
	if !g.project.TakeSlot(limit) {
		g.giveRoomSlot()
		return takeProjectFull
	}
	g.gauge.Add(1)
	return takeOK
}

// full reports whether slots held fill the room's max_participants.
func (g *Gate) full(slots int64) bool {
	if simbug.Planted(simbug.CapOffByOne) { // the crash simulation's planted bug
		return slots > g.maxParticipants.Load()
	}
	return slots >= g.maxParticipants.Load()
}

// forceSlots adds n slots held without a check: recovered joined
// participants, admitted before the restart.
func (g *Gate) forceSlots(n int64) {
	if n == 0 {
		return
	}
	for {
		w := g.word.Load()
		if g.word.CompareAndSwap(w, gateWord(gateState(w), gateSlots(w)+n)) {
			break
		}
	}
	g.project.ActiveParticipants.Add(n)
	g.gauge.Add(n)
}

// uncount takes the room's slots out of the process's gauge when its
// actor stops; the gate is not used again.
func (g *Gate) uncount() { g.gauge.Add(-g.Slots()) }

// giveSlot gives one slot back to the room and its project.
func (g *Gate) giveSlot() {
	g.giveRoomSlot()
	g.project.ActiveParticipants.Add(-1)
	g.gauge.Add(-1)
}

func (g *Gate) giveRoomSlot() {
	for {
		w := g.word.Load()
		if gateSlots(w) == 0 {
			panic("room: assertion failed: a slot given back to room " + g.roomID + ", which holds none")
		}
		if g.word.CompareAndSwap(w, w-1) {
			return
		}
	}
}

// setState changes the admission state, keeping the slots held.
func (g *Gate) setState(state uint64) {
	for {
		w := g.word.Load()
		if g.word.CompareAndSwap(w, gateWord(state, gateSlots(w))) {
			return
		}
	}
}

// --- the room's moves (its goroutine only) -----------------------------------

// seatOf is the seat state the durable participant p stands for: its
// status, its latest recorded session, its first recorded connect.
func seatOf(p *Participant) *seatState {
	s := &seatState{session: p.SessionID, issuedAt: p.SessionIssuedAt, connectedAt: p.ConnectedAt}
	switch p.Status {
	case ParticipantJoined:
		s.status, s.joined = seatJoined, p.SessionID
	case ParticipantRemoved, ParticipantEnded:
		s.status, s.closedAs = seatClosed, p.Status
	default:
		s.status = seatOpen
	}
	return s
}

// load (re)publishes the room's state: its cap and expiry, a seat per
// participant as the durable state has it, and its admission state. A
// reload (the actor restarted after a panic, in the same process) moves
// every existing seat to what the journal says, keeping the reservations
// (the gate's own memory, which the actor's panic did not touch), each
// through the same words, so a connect racing the reload can neither keep
// a slot nor lose one.
func (g *Gate) load(s *roomState) {
	g.setState(gateLoading)
	g.maxParticipants.Store(int64(s.Room.MaxParticipants))
	g.expiresAtNanos.Store(s.Room.ExpiresAt.UnixNano())
	for _, p := range s.Participants {
		next := seatOf(p)
		st := g.seat(p.ID)
		if st == nil {
			st = &Seat{role: p.Role}
			st.state.Store(next)
			g.seats.Store(p.ID, st)
			if next.holds() {
				g.forceSlots(1)
			}
			continue
		}
		for {
			cur := st.state.Load()
			next := keepReservation(cur, seatOf(p))
			if st.state.CompareAndSwap(cur, next) {
				switch {
				case cur.holds() && !next.holds():
					g.giveSlot()
				case !cur.holds() && next.holds():
					g.forceSlots(1)
				}
				break
			}
		}
	}
	g.setState(admissionOf(&s.Room))
}

// keepReservation is the seat a reload moves cur to, given the durable
// state's next: a reservation survives (and holds its slot) unless the
// journal says otherwise (joined, removed, ended), and the latest session
// issued stays the latest known.
func keepReservation(cur, next *seatState) *seatState {
	merged := *next
	if cur.issuedAt.After(next.issuedAt) {
		merged.session, merged.issuedAt, merged.expiresAt = cur.session, cur.issuedAt, cur.expiresAt
	}
	if merged.connectedAt.IsZero() {
		merged.connectedAt = cur.connectedAt
	}
	if cur.status == seatReserved && next.status == seatOpen {
		merged.status = seatReserved
	}
	return &merged
}

// admissionOf is the admission state of room r.
func admissionOf(r *Room) uint64 {
	switch {
	case r.Status == RoomWaiting || r.Status == RoomActive:
		return gateOpen
	case r.EndReason == EndReasonExpired:
		return gateExpired
	default:
		return gateDeleted
	}
}

// add publishes the seat of a participant just created.
func (g *Gate) add(p *Participant) {
	st := &Seat{role: p.Role}
	st.state.Store(seatOf(p))
	g.seats.Store(p.ID, st)
}

// move changes participant id's seat by f until its compare-and-swap
// holds: f gets the current state and returns the next, or nil to leave it
// as it is. Slots follow the change: a seat that stops holding gives its
// slot back; f must not make a seat start holding (the moves that take a
// slot take it first: see take). It returns the state it moved from, nil
// when f left it or the room has no such seat.
func (g *Gate) move(id string, f func(cur *seatState) *seatState) *seatState {
	st := g.seat(id)
	if st == nil {
		return nil
	}
	for {
		cur := st.state.Load()
		next := f(cur)
		if next == nil {
			return nil
		}
		if !cur.holds() && next.holds() {
			panic("room: assertion failed: a seat moved to hold a slot it did not take")
		}
		if st.state.CompareAndSwap(cur, next) {
			if cur.holds() && !next.holds() {
				g.giveSlot()
			}
			return cur
		}
	}
}

// leave moves a joined participant out of its recorded session: to a newer
// reservation that is still live at now (it keeps the slot, as the connect
// that issued it was promised), else to open (the slot is given back).
func (g *Gate) leave(id string, now time.Time) {
	g.move(id, func(cur *seatState) *seatState {
		if cur.status != seatJoined {
			return nil
		}
		next := *cur
		next.joined = ""
		next.status = seatOpen
		if cur.session != cur.joined && now.Before(cur.expiresAt) {
			next.status = seatReserved
		}
		return &next
	})
}

// closeSeat closes a participant's seat for good (removed, or ended with
// its room), giving back the slot it held.
func (g *Gate) closeSeat(id, status string) {
	g.move(id, func(cur *seatState) *seatState {
		if cur.status == seatClosed {
			return nil
		}
		next := *cur
		next.status, next.closedAs, next.joined = seatClosed, status, ""
		return &next
	})
}

// close stops admitting (state gateDeleted or gateExpired) and closes every
// seat still open: the room is ending. A connect that took a slot before
// the close holds it in its seat, and loses it here.
func (g *Gate) close(r *Room) {
	g.setState(admissionOf(r))
	g.seats.Range(func(id, _ any) bool {
		g.closeSeat(id.(string), ParticipantEnded)
		return true
	})
}

// lapse ends the reservations whose media token expired by now, without a
// write: each gives its slot back. It returns how many lapsed.
func (g *Gate) lapse(now time.Time) int {
	n := 0
	g.seats.Range(func(id, _ any) bool {
		if g.move(id.(string), func(cur *seatState) *seatState {
			if cur.status != seatReserved || now.Before(cur.expiresAt) {
				return nil
			}
			next := *cur
			next.status = seatOpen
			return &next
		}) != nil {
			n++
		}
		return true
	})
	return n
}
