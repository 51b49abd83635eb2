package core

import (
	"fmt"
	"log/slog"

	"rtcd/apierr"
)

// Reply is what an actor answers a request with.
type Reply struct {
	Status   int    // HTTP status on success
	Body     []byte // encoded JSON on success
	Err      *apierr.Error
	Value    any  // a typed answer to an internal query
	Replayed bool // an idempotent replay of a stored response
	Gone     bool // the actor stopped before it read the message
}

// Envelope carries a command that expects an answer, and where its one
// answer goes. Commands themselves are plain values (no channel, no
// closure): the reply plumbing lives here, in the layer that sends and
// delivers them, so a command could cross a process boundary as it is.
type Envelope struct {
	Msg    any
	answer chan<- Reply // buffered with room for exactly one answer
}

// Respond sends the one answer. A nil envelope is a command nobody waits
// for (an actor running one of its own commands): the answer is dropped.
func (e *Envelope) Respond(x Reply) {
	if e != nil {
		e.answer <- x
	}
}

// NewEnvelope wraps msg and returns where its answer arrives.
func NewEnvelope(msg any) (*Envelope, <-chan Reply) {
	ch := make(chan Reply, 1)
	return &Envelope{Msg: msg, answer: ch}, ch
}

// RefuseUnknown answers a command its actor does not handle: a bug in
// the sender, answered rather than left to time out.
func RefuseUnknown(env *Envelope) {
	slog.Error("a command its actor does not handle", "type", fmt.Sprintf("%T", env.Msg))
	env.Respond(Reply{Err: apierr.New(apierr.Internal, "internal error")})
}

var ErrUnavailable = apierr.New(apierr.ServiceUnavailable, "the service did not answer in time; retry the request")

// ErrBadCredential is the answer for an API key that is missing, malformed,
// revoked or unknown, and for a project archived while a request of its
// key was on its way.
var ErrBadCredential = apierr.New(apierr.AuthenticationFailed, "the API key is missing, malformed, revoked or unknown")
