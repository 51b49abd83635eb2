package actors

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/goccy/go-json"

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

// ownerState is what the event log needs of an owner's state. It is also
// the owner's snapshot, encoded as JSON.
type ownerState[E any] interface {
	// Apply changes the state by one event. It is pure (no I/O, no clock)
	// and is used both at run time and on replay.
	Apply(e *E)
	// Loaded completes a state decoded from a snapshot: maps that JSON left
	// nil, indexes that the snapshot does not hold.
	Loaded()
}

// eventLog is one owner's journal and the state it rebuilds. It belongs
// to the owner's actor and is used only on its goroutine.
type eventLog[E any, S ownerState[E]] struct {
	journal *persistence.Journal
	state   S
}

// recoverLog loads the journal name's latest snapshot into blank() and
// replays every later event through Apply; replayed events are not written
// again. A log without a snapshot starts from noSnapshot(), or is an
// error when noSnapshot is nil (every owner but the directory has one from
// the batch that created it).
func recoverLog[E any, S ownerState[E]](store *persistence.Store, name string, snapshotEveryEvents int, blank, noSnapshot func() S) (*eventLog[E, S], error) {
	l := &eventLog[E, S]{journal: persistence.NewJournal(store, name, snapshotEveryEvents)}
	loaded := false
	_, err := l.journal.Recover(
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
					return fmt.Errorf("actors: %s has journal entries but no snapshot", name)
				}
				l.state, loaded = noSnapshot(), true
			}
			var ev E
			if err := json.Unmarshal(event, &ev); err != nil {
				return err
			}
			l.state.Apply(&ev)
			return nil
		})
	if err != nil {
		return nil, err
	}
	if !loaded {
		if noSnapshot == nil {
			return nil, fmt.Errorf("actors: %s has no snapshot", name)
		}
		l.state = noSnapshot()
	}
	return l, nil
}

// record appends events to the journal in b, applies them to the state,
// and adds a snapshot to b when one is due. The caller adds the read
// records and commits b; nothing is acknowledged before that commit is
// durable.
func (l *eventLog[E, S]) record(b *pebble.Batch, events ...E) {
	for i := range events {
		l.journal.Append(b, encode(&events[i]))
		l.state.Apply(&events[i])
	}
	if l.journal.SnapshotDue() {
		l.journal.WriteSnapshot(b, encode(l.state))
	}
}

// Journal names: one function per owner, so no journal (and no actor
// name, which is the same) is spelled by hand.

func roomJournal(roomID string) string       { return "room/" + roomID }
func projectJournal(projectID string) string { return "project/" + projectID }
func walletJournal(accountID string) string  { return "wallet/" + accountID }
func directoryJournal() string               { return "directory" }
