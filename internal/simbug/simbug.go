// Package simbug holds the bugs the crash simulation (package sim) plants
// in the real code to prove that it finds them. Each is a branch in the
// owner, taken only while a test of package sim has planted that bug;
// nothing else plants one, so production never takes them (a check is one
// atomic load).
package simbug

import "sync/atomic"

// Bug names one planted bug.
type Bug int32

// The planted bugs, each of a kind the simulation's invariants must catch.
const (
	// None plants nothing.
	None Bug = iota
	// ReplyBeforeSync: a room answers a participant's creation before the
	// batch holding it is durable (a crash can then lose an acknowledged
	// write).
	ReplyBeforeSync
	// DoubleApply: the event log applies each recorded event to the live
	// state a second time (the live state then differs from what the
	// journal replays wherever an event is not idempotent).
	DoubleApply
	// CapOffByOne: a room's gate lets a slot be taken (a connect's
	// reservation, or a join re-checked after its reservation was lost)
	// when the room already holds max_participants.
	CapOffByOne
	// StaleJoin: a room admits a media join whose session is older than
	// the participant's latest known one (the defect of issue 15: a
	// participant that connected twice joins with the older token).
	StaleJoin
)

// String names the bug as the simulation's tests and report do.
func (b Bug) String() string {
	switch b {
	case ReplyBeforeSync:
		return "reply-before-sync"
	case DoubleApply:
		return "double-apply"
	case CapOffByOne:
		return "cap-off-by-one"
	case StaleJoin:
		return "stale-join"
	}
	return "none"
}

var planted atomic.Int32

// Planted reports whether b is planted now.
func Planted(b Bug) bool { return b != None && Bug(planted.Load()) == b }

// Plant plants b (None: no bug) until restore is called. One bug at a
// time, for the whole process: only the simulation's tests, which run one
// at a time, may call it.
func Plant(b Bug) (restore func()) {
	old := planted.Swap(int32(b))
	return func() { planted.Store(old) }
}
