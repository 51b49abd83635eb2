package core

import (
	"errors"
	"fmt"

	"github.com/goccy/go-json"

	"rtcd/internal/simbug"
	"rtcd/persistence"
)

// The event log is the one way an owner (room, project, wallet, directory)
// keeps its state: a command is validated against the state, produces
// past-tense events, and Record appends them to the owner's journal and
// applies them with the owner's one pure Apply, in the batch that carries
// the rest of the change. Recovery is the same Apply over the journal tail
// after the latest snapshot (asynkron/protoactor-go's persistence plugin,
// without its faults: recording returns nothing to ignore, and the command
// itself is never journaled).

// State is what the event log needs of an owner's state. It is also
// the owner's snapshot, encoded as JSON.
type State[E any] interface {
	// Apply changes the state by one event. It is pure (no I/O, no clock)
	// and is used both at run time and on replay. It fails (changing
	// nothing) on an event of no kind it knows and on an event naming what
	// the state does not hold.
	Apply(e *E) error
	// Loaded completes a state decoded from a snapshot: maps that JSON left
	// nil, indexes that the snapshot does not hold.
	Loaded()
}

// Log is one owner's journal and the state it rebuilds. It belongs
// to the owner's actor and is used only on its goroutine.
type Log[E any, S State[E]] struct {
	journal *persistence.Journal
	state   S
}

// State is the state the log holds: recovered, then changed by Record.
func (l *Log[E, S]) State() S { return l.state }

// RecoverLog loads the journal name's latest snapshot into blank() and
// replays every later event through Apply; replayed events are not written
// again. A log without a snapshot starts from noSnapshot(), or is an
// error when noSnapshot is nil (every owner but the directory has one from
// the batch that created it).
func RecoverLog[E any, S State[E]](store persistence.Storage, name string, snapshotEveryEvents int, blank, noSnapshot func() S) (*Log[E, S], error) {
	return loadLog(store, name, snapshotEveryEvents, blank, noSnapshot, true)
}

// loadLog is RecoverLog; claim false reads the journal without taking it
// over (persistence.Journal.Replay), for ReplayLog.
func loadLog[E any, S State[E]](store persistence.Storage, name string, snapshotEveryEvents int, blank, noSnapshot func() S, claim bool) (*Log[E, S], error) {
	l := &Log[E, S]{journal: persistence.NewJournal(store, name, snapshotEveryEvents)}
	loaded := false
	read := l.journal.Replay
	if claim {
		read = l.journal.Recover
	}
	_, err := read(
		func(state []byte) error {
			l.state = blank()
			if err := json.Unmarshal(state, l.state); err != nil {
				return err
			}
			l.state.Loaded()
			loaded = true
			return nil
		},
		func(event []byte) error {
			if !loaded {
				if noSnapshot == nil {
					return fmt.Errorf("core: %s has journal entries but no snapshot", name)
				}
				l.state, loaded = noSnapshot(), true
			}
			var ev E
			if err := json.Unmarshal(event, &ev); err != nil {
				return err
			}
			if err := l.state.Apply(&ev); err != nil {
				return fmt.Errorf("%w (event %.200s)", err, event)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	if !loaded {
		if noSnapshot == nil {
			return nil, fmt.Errorf("core: %s has no snapshot", name)
		}
		l.state = noSnapshot()
	}
	return l, nil
}

// Record appends events to the journal in b, applies them to the state,
// and adds a snapshot to b when one is due. The caller adds the read
// records and commits b; nothing is acknowledged before that commit is
// durable. An event that does not apply is a bug in the command that made
// it (commands validate against the state first): it panics before the
// batch can be committed, and the actor restarts from what is durable.
func (l *Log[E, S]) Record(b *persistence.Batch, events ...E) {
	for i := range events {
		if err := l.state.Apply(&events[i]); err != nil {
			panic(fmt.Sprintf("core: assertion failed: %s recorded an event that does not apply: %v", l.journal.Name(), err))
		}
		if simbug.Planted(simbug.DoubleApply) {
			_ = l.state.Apply(&events[i]) // the crash simulation's planted bug
		}
		l.journal.Append(b, Encode(&events[i]))
	}
	if l.journal.SnapshotDue() {
		l.journal.WriteSnapshotOf(b, func() []byte { return Encode(l.state) })
	}
}

// ReplayLog is the state RecoverLog rebuilds for the journal name, encoded
// as a snapshot is. It starts no actor and writes nothing: it is how a
// test (the crash simulation, package sim) reads what recovery would find,
// to compare it with a live owner's state.
func ReplayLog[E any, S State[E]](store persistence.Storage, name string, blank, noSnapshot func() S) ([]byte, error) {
	l, err := loadLog(store, name, 1, blank, noSnapshot, false) // no claim: the live owner keeps its journal
	if err != nil {
		return nil, err
	}
	return Encode(l.state), nil
}

// ApplyAll applies events to a state being built in memory (an owner's
// first state), as record does without a journal: an event that does not
// apply is a bug, and panics.
func ApplyAll[E any, S State[E]](s S, events ...E) S {
	for i := range events {
		if err := s.Apply(&events[i]); err != nil {
			panic(fmt.Sprintf("core: assertion failed: a first state's event does not apply: %v", err))
		}
	}
	return s
}

// ErrUnknownEvent is every Apply's default: an event with none of the
// kinds this release knows (written by a newer one, or damaged). Its JSON
// decoded without error, since unknown fields are skipped, so it must
// fail here rather than be skipped in silence.
var ErrUnknownEvent = errors.New("an event of no kind this release knows")

// Journal names: one function per owner, so no journal (and no actor
// name, which is the same) is spelled by hand.
