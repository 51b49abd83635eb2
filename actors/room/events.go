package room

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"rtcd/actors/core"
	"rtcd/persistence"
)

// roomEvent is one entry of a room's journal. Exactly one field is set.
// Past tense: each says what happened, never what was asked.
type roomEvent struct {
	ParticipantCreated *Participant        `json:"participant_created,omitempty"`
	ParticipantRemoved *participantRemoved `json:"participant_removed,omitempty"`
	RoomEndingStarted  *roomEndingStarted  `json:"room_ending_started,omitempty"`
	RoomEnded          *roomEnded          `json:"room_ended,omitempty"`
	ParticipantJoined  *participantJoined  `json:"participant_joined,omitempty"`
	SessionRenewed     *participantRenewed `json:"session_renewed,omitempty"`
	ParticipantLeft    *participantLeft    `json:"participant_left,omitempty"`
	UsageSettled       *usageSettled       `json:"usage_settled,omitempty"`

	// ParticipantConnected is retired: a connect is no longer journaled
	// (it reserves in memory; the join is the point of record). Journals
	// written before still hold it, and it keeps a reader (see Apply).
	ParticipantConnected *participantConnected `json:"participant_connected,omitempty"`

	// EventSeq, when set, is the room's webhook sequence number after this
	// event: the webhook events it caused carry the numbers up to it.
	EventSeq uint64 `json:"event_seq,omitempty"`
}

// participantJoined is a media join admitted: a session of the
// participant's own (its connect's reservation, or a session re-checked
// when none matched) starts its usage. IssuedAt is the session's media
// token's issue time; ConnectedAt the participant's first connect, when
// this join is the first one recorded (zero: the join's At).
type participantJoined struct {
	ParticipantID string    `json:"participant_id"`
	SessionID     string    `json:"session_id"`
	IssuedAt      time.Time `json:"issued_at"`
	ConnectedAt   time.Time `json:"connected_at"`
	At            time.Time `json:"at"`
}

// participantRenewed is a joined participant's media moving to a newer
// session of its own (a reconnect): the node replaced the older socket,
// the participant never left, and its usage session goes on.
type participantRenewed struct {
	ParticipantID string    `json:"participant_id"`
	SessionID     string    `json:"session_id"`
	IssuedAt      time.Time `json:"issued_at"`
	At            time.Time `json:"at"`
}

// participantLeft closes the participant's usage session: Seconds and
// ChargedMicros are its final totals.
type participantLeft struct {
	ParticipantID string    `json:"participant_id"`
	At            time.Time `json:"at"`
	Reason        string    `json:"reason"`
	Seconds       int64     `json:"seconds"`
	ChargedMicros int64     `json:"charged_micros"`
}

type usageSettled struct {
	ParticipantID  string `json:"participant_id"`
	SettledSeconds int64  `json:"settled_seconds"`
	ChargedMicros  int64  `json:"charged_micros"`
}

// participantConnected is the retired connect event (read, never
// written).
type participantConnected struct {
	ParticipantID string    `json:"participant_id"`
	SessionID     string    `json:"session_id"`
	At            time.Time `json:"at"`
	ExpiresAt     time.Time `json:"expires_at"` // the media token's expiry
}

// participantRemoved ends a participant for good. ConnectedAt is its
// first connect when only the room's memory knew it (a reservation never
// recorded): the removal records it.
type participantRemoved struct {
	ParticipantID string    `json:"participant_id"`
	At            time.Time `json:"at"`
	ConnectedAt   time.Time `json:"connected_at,omitzero"`
}

type roomEndingStarted struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// roomEnded ends the room and every session in it. ConnectedAt holds the
// first connect of the participants only the room's memory knew connected,
// which the end records.
type roomEnded struct {
	At          time.Time            `json:"at"`
	ConnectedAt map[string]time.Time `json:"connected_at,omitempty"`
}

// roomState is everything a room actor owns. It is also its snapshot.
type roomState struct {
	Room         Room                    `json:"room"`
	Participants map[string]*Participant `json:"participants"`
	// EventSeq is the last per-room webhook sequence number used.
	EventSeq uint64 `json:"event_seq"`

	// retired is set (in memory only) when the state read a retired
	// connect: a participant's record on disk may still say connected,
	// and the room's load writes it again (see rewriteRetiredRecords).
	retired bool
}

func newRoomState(r Room) *roomState {
	return &roomState{Room: r, Participants: make(map[string]*Participant)}
}

// Genesis writes a new room into b: its first snapshot (sequence 0,
// no participants), its r/ record and its ri/ list entry. It returns the
// record's body. The project that creates the room calls it in the batch
// that records room_created.
func Genesis(b *persistence.Batch, room Room) []byte {
	body := core.MustJSON(room.view())
	persistence.WriteSnapshotAt(b, Journal(room.ID), 0, core.Encode(newRoomState(room)))
	b.Set(RecordKey(room.ProjectID, room.ID), body)
	b.Set(persistence.IndexKey(persistence.PrefixRoomIdx, room.ProjectID, room.CreatedAt.UnixNano(), room.ID), []byte(room.ID))
	return body
}

// Loaded completes a snapshot: a room created without participants has
// none in its JSON. A snapshot written before connects were reservations
// may hold participants connected: each goes back to what it was before
// that connect (created, or left when it had left before), as a restart
// now loses every reservation.
func (s *roomState) Loaded() {
	if s.Participants == nil {
		s.Participants = make(map[string]*Participant)
	}
	for _, p := range s.Participants {
		if p.Status == ParticipantConnected {
			p.Status = ParticipantCreated
			if !p.LeftAt.IsZero() {
				p.Status = ParticipantLeft
			}
			s.retired = true
		}
	}
}

// Apply changes the state by one event. It is pure (no I/O, no clock) and
// is used both at run time and on replay; validation happened before the
// event was produced, so Apply trusts it, but it checks what it looks up:
// an event naming a participant the room does not have, or an event of no
// known kind, is an error (on replay, a journal this release cannot read;
// at run time, a bug) and changes nothing.
func (s *roomState) Apply(e *roomEvent) error {
	switch {
	case e.ParticipantCreated != nil:
		p := *e.ParticipantCreated
		if _, dup := s.Participants[p.ID]; dup {
			return fmt.Errorf("participant_created: participant %s already exists", p.ID)
		}
		s.Participants[p.ID] = &p
	case e.ParticipantConnected != nil:
		// The retired connect: what it leaves is the first connect's time
		// and the session it issued (the participant's latest, so an older
		// token stays stale). Its reservation is gone, as after a restart.
		c := e.ParticipantConnected
		p, err := s.participant("participant_connected", c.ParticipantID)
		if err != nil {
			return err
		}
		if p.final() {
			break
		}
		if p.ConnectedAt.IsZero() {
			p.ConnectedAt = c.At
		}
		if p.Status != ParticipantJoined {
			p.SessionID, p.SessionIssuedAt = c.SessionID, c.At
		}
		s.retired = true
	case e.ParticipantJoined != nil:
		j := e.ParticipantJoined
		p, err := s.participant("participant_joined", j.ParticipantID)
		if err != nil {
			return err
		}
		p.Status = ParticipantJoined
		p.SessionID, p.SessionIssuedAt = j.SessionID, j.IssuedAt
		p.JoinedAt = j.At
		p.Usage = &UsageSession{SessionID: j.SessionID, StartedAt: j.At}
		if p.ConnectedAt.IsZero() {
			p.ConnectedAt = j.ConnectedAt
			if p.ConnectedAt.IsZero() {
				p.ConnectedAt = j.At
			}
		}
		if s.Room.Status == RoomWaiting {
			s.Room.Status = RoomActive
		}
	case e.SessionRenewed != nil:
		r := e.SessionRenewed
		p, err := s.participant("session_renewed", r.ParticipantID)
		if err != nil {
			return err
		}
		p.SessionID, p.SessionIssuedAt = r.SessionID, r.IssuedAt
	case e.ParticipantLeft != nil:
		l := e.ParticipantLeft
		p, err := s.participant("participant_left", l.ParticipantID)
		if err != nil {
			return err
		}
		if p.Usage != nil {
			p.ParticipantSeconds += l.Seconds
		}
		p.Status = ParticipantLeft
		p.Usage = nil
		p.LeftAt = l.At
		p.LeftReason = l.Reason
	case e.UsageSettled != nil:
		u := e.UsageSettled
		p, err := s.participant("usage_settled", u.ParticipantID)
		if err != nil {
			return err
		}
		if p.Usage != nil {
			p.Usage.SettledSeconds = u.SettledSeconds
			p.Usage.ChargedMicros = u.ChargedMicros
		}
	case e.ParticipantRemoved != nil:
		p, err := s.participant("participant_removed", e.ParticipantRemoved.ParticipantID)
		if err != nil {
			return err
		}
		p.Status = ParticipantRemoved
		p.EndedAt = e.ParticipantRemoved.At
		if p.ConnectedAt.IsZero() {
			p.ConnectedAt = e.ParticipantRemoved.ConnectedAt
		}
	case e.RoomEndingStarted != nil:
		s.Room.Status = RoomEnding
		s.Room.EndReason = e.RoomEndingStarted.Reason
	case e.RoomEnded != nil:
		s.Room.Status = RoomEnded
		s.Room.EndedAt = e.RoomEnded.At
		// Joined participants were given a participantLeft first (their
		// usage is finalized before the room ends); every session that is
		// not removed ends with the room.
		for _, p := range s.Participants {
			if p.Status != ParticipantRemoved && p.Status != ParticipantEnded {
				p.Status = ParticipantEnded
				p.EndedAt = e.RoomEnded.At
				if at, ok := e.RoomEnded.ConnectedAt[p.ID]; ok && p.ConnectedAt.IsZero() {
					p.ConnectedAt = at
				}
			}
		}
	default:
		return core.ErrUnknownEvent
	}
	if e.EventSeq > s.EventSeq {
		s.EventSeq = e.EventSeq
	}
	return nil
}

// participantsWhere is the participants for which keep is true, in
// creation order (ties by id). Every loop that writes events, charges or
// webhook events walks participants this way, never in Go's map order, so
// a room's journal and its webhook sequence numbers follow the order
// participants were created in and a run can be replayed exactly. Only the
// participants kept are sorted: the sweep's loops keep few.
func (s *roomState) participantsWhere(keep func(*Participant) bool) []*Participant {
	var out []*Participant
	for _, p := range s.Participants {
		if keep(p) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *Participant) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// participant is the participant an event of kind names.
func (s *roomState) participant(kind, id string) (*Participant, error) {
	p, ok := s.Participants[id]
	if !ok {
		return nil, fmt.Errorf("%s: room %s has no participant %s", kind, s.Room.ID, id)
	}
	return p, nil
}

// Replay is the state recovery rebuilds for room roomID from store (its
// snapshot and the journal after it), encoded as ReadState answers; it
// starts no actor and writes nothing (core.ReplayLog).
func Replay(store persistence.Storage, roomID string) ([]byte, error) {
	return core.ReplayLog(store, Journal(roomID), func() *roomState { return &roomState{} }, nil)
}

// Journal names a room's journal, snapshot and actor: room/<room_id>.
func Journal(roomID string) string { return "room/" + roomID }
