package core

import "time"

// The messages one actor sends another. Each is a plain value (ids,
// times, other plain values; no pointer to shared state, no channel, no
// closure), so it could cross a process boundary as it is: a cluster mode
// will send them between nodes. A message that expects an answer travels
// in an Envelope, which carries the reply; the message itself never does.

// Sweep asks an actor to do its periodic housekeeping (the engine sends it
// on a real ticker; actors compare against the injected clock).
type Sweep struct{}

// RoomClosed tells a project that one of its rooms ended, once the end is
// durable; sent by the room, no answer. A room found ended at its recovery
// sends it again (the project may have missed it).
type RoomClosed struct {
	RoomID string
	// Counted: the room added itself to its ProjectGate.EndedRooms, which
	// the project takes it out of.
	Counted bool
}

// ArchiveProject asks a project to archive itself: the directory decided
// that User may (an owner) and that the workspace keeps another active
// project. The project decides what its own state allows (no active
// rooms) and answers in the envelope.
type ArchiveProject struct {
	User DashboardUser
}

// ApplyCharges nudges a wallet: a room wrote pending charges for it. A
// lost nudge only delays them (the wallet also applies them every sweep).
type ApplyCharges struct{}

// AddProject tells a wallet that a project belongs to its workspace
// (billing audits and credit.* webhook events go to each). A project
// sends it at every recovery, idempotently.
type AddProject struct {
	ProjectID string
}

// PendingCharge is the hand-over of usage from a room to its workspace's
// wallet, through the store rather than a mailbox: the room writes it in
// its own batch under pc/<account>/<id>, and the wallet applies it and
// deletes it in one batch of its own, so each charge is applied exactly
// once whichever of the two crashes.
type PendingCharge struct {
	ID            string    `json:"id"`
	ProjectID     string    `json:"project_id"`
	RoomID        string    `json:"room_id"`
	ParticipantID string    `json:"participant_id"`
	SessionID     string    `json:"session_id"`
	Seconds       int64     `json:"participant_seconds"` // seconds this charge covers
	Amount        int64     `json:"amount"`              // micro-units, positive
	At            time.Time `json:"at"`
}
