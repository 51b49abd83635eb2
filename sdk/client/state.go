package client

import "fmt"

// State is a Session's connection state (spec 3, "Client SDK connection
// states").
type State string

// The connection states.
const (
	// StateIdle: the session exists but Connect has not started yet. Only
	// handlers given with WithHandler can observe it.
	StateIdle State = "idle"
	// StateConnecting: the first connect is running (token exchange at
	// POST /v1/connect, then the media node's WebSocket and its join).
	StateConnecting State = "connecting"
	// StateConnected: joined in the media node.
	StateConnected State = "connected"
	// StateReconnecting: the media connection dropped; the SDK is getting
	// it back with backoff.
	StateReconnecting State = "reconnecting"
	// StateDisconnecting: Leave or Close is closing the connection.
	StateDisconnecting State = "disconnecting"
	// StateDisconnected: the session is over, by the application's Leave or
	// Close, or because the server ended it (room ended, participant
	// removed, connection replaced). Terminal.
	StateDisconnected State = "disconnected"
	// StateFailed: the connect or the reconnects failed. Terminal.
	StateFailed State = "failed"
)

// transitions is the whole state machine: from → allowed next states. It is
// the table in the package documentation and README.md, and nothing else
// can move a Session's state.
var transitions = map[State][]State{
	StateIdle:          {StateConnecting},
	StateConnecting:    {StateConnected, StateFailed},
	StateConnected:     {StateReconnecting, StateDisconnecting, StateDisconnected, StateFailed},
	StateReconnecting:  {StateConnected, StateDisconnecting, StateDisconnected, StateFailed},
	StateDisconnecting: {StateDisconnected},
	StateDisconnected:  nil,
	StateFailed:        nil,
}

// canTransition reports whether from → to is in the table.
func canTransition(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Terminal reports whether s is a final state (disconnected or failed).
func (s State) Terminal() bool { return s == StateDisconnected || s == StateFailed }

// stateMachine holds a state and refuses any move not in transitions. It is
// not safe for concurrent use: the Session guards it with its mutex.
type stateMachine struct {
	state State
}

func newStateMachine() stateMachine { return stateMachine{state: StateIdle} }

// move changes the state to to, or returns an error (and changes nothing)
// when the table does not allow it.
func (m *stateMachine) move(to State) (from State, err error) {
	from = m.state
	if !canTransition(from, to) {
		return from, fmt.Errorf("client: invalid state transition %s -> %s", from, to)
	}
	m.state = to
	return from, nil
}
