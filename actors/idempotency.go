package actors

import (
	"crypto/sha256"

	"rtcd/actors/core"
	"rtcd/actors/project"
	"rtcd/apierr"
)

// Idempotency (spec 8.5). A key is scoped to the caller within a project:
// the record's storage key is SHA-256(project, caller, Idempotency-Key). The
// record is written by the actor that performs the create, in the same batch
// as the create itself, so a crash can never keep the effect and lose the
// record (or the reverse). Only 2xx responses are stored. Records are sealed
// with AES-256-GCM under a key derived from the server's master secret, the
// storage key as additional data, so a stored response (which may hold a
// participant token or an API key secret) is never on disk in clear.
//
// The project actor serialises concurrent requests with one key: the first
// marks the key in flight; any other request with that key gets
// idempotency_in_progress until the first has finished.

// MaxIdempotencyKeyBytes bounds the Idempotency-Key header.
const MaxIdempotencyKeyBytes = 255

// IdempotencyRequest identifies one request made with an Idempotency-Key.
type IdempotencyRequest struct {
	Key         string   // the header's value
	RequestHash [32]byte // SHA-256 of method, path and body
}

// HashRequest is the request hash compared on reuse of a key.
func HashRequest(method, path string, body []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write([]byte(path))
	h.Write([]byte{0})
	h.Write(body)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// idempotent runs op at most once per (caller, key) within the project.
func (e *Engine) idempotent(c *core.Caller, req *IdempotencyRequest, op func(p *core.IdemPending) core.Reply) core.Reply {
	if req == nil || req.Key == "" {
		return op(nil)
	}
	h, ok := e.project(c.ProjectID)
	if !ok {
		return core.Reply{Err: apierr.New(apierr.AuthenticationFailed, "the project of this credential no longer exists")}
	}
	p := &core.IdemPending{ProjectID: c.ProjectID, Scope: core.IdemScope(c.ProjectID, c.ActorID, req.Key), RequestHash: req.RequestHash}
	r := e.ask(h.pid, project.IdemBegin{Pending: *p})
	if r.Err != nil || r.Replayed {
		return r
	}
	res := op(p)
	e.system.Root.Send(h.pid, project.IdemEnd{Scope: p.Scope})
	return res
}

// createInProject runs a create that the caller's project actor performs,
// at most once per Idempotency-Key (cmd receives the pending key to seal
// the response into the create's own batch).
func (e *Engine) createInProject(c *core.Caller, req *IdempotencyRequest, cmd func(ip *core.IdemPending) any) (Result, *apierr.Error) {
	h, err := e.projectOf(c)
	if err != nil {
		return Result{}, err
	}
	return result(e.idempotent(c, req, func(ip *core.IdemPending) core.Reply { return e.ask(h.pid, cmd(ip)) }))
}
