package actors

import (
	"crypto/sha256"
	"encoding/binary"

	"rtcd/actors/core"
	"rtcd/apierr"
	"rtcd/persistence"
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

// idemBegin asks the project actor to admit an idempotent request.
type idemBegin struct {
	pending core.IdemPending
}

// idemEnd tells the project actor the request finished (either way).
type idemEnd struct {
	scope [32]byte
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
	r := e.ask(h.pid, idemBegin{pending: *p})
	if r.Err != nil || r.Replayed {
		return r
	}
	res := op(p)
	e.system.Root.Send(h.pid, idemEnd{scope: p.Scope})
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

// checkIdempotency is the project actor's rule for an arriving key.
func (a *projectActor) checkIdempotency(p core.IdemPending) core.Reply {
	env, inFlight := a.env, a.idemInFlight
	now := env.Clock.Now()
	if started, busy := inFlight[p.Scope]; busy && now.Sub(started) < idempotencyInFlightTimeout {
		return core.Reply{Err: apierr.New(apierr.IdempotencyInProgress,
			"a request with this Idempotency-Key is still in progress; retry after it completes")}
	}
	stored, found, fresh := env.LookupStored(&p)
	if found && !fresh {
		// Expired: the key is free again. Its old expiry index entry goes
		// now, so the sweep can never delete the record about to replace it.
		b := env.Store.NewBatch()
		b.Delete(core.IdemExpiryKey(p.ProjectID, stored.CreatedAt.UnixNano(), p.Scope))
		env.Store.Commit(b, nil)
	}
	if found && fresh {
		if stored.RequestHash != p.RequestHash {
			return core.Reply{Err: apierr.New(apierr.Conflict,
				"this Idempotency-Key was already used with a different method, path or body").
				WithDetails("reason", "idempotency_key_reused")}
		}
		return core.Reply{Status: stored.Status, Body: stored.Body, Replayed: true}
	}
	inFlight[p.Scope] = now
	return core.Reply{}
}

// idempotencySweepBatch bounds how many expired records one sweep deletes.
const idempotencySweepBatch = 1000

// sweepExpired deletes, into b, up to idempotencySweepBatch records whose
// retention has passed, oldest first, without decrypting anything. Called by
// the project actor, the only one admitting keys: a key in flight is
// skipped (its old record is replaced by the request under way), and a key
// re-admitted after expiry had its old index entry removed at admission.
func (a *projectActor) sweepExpired(b *persistence.Batch) int {
	projectID, inFlight := a.id, a.idemInFlight
	prefix := persistence.IndexPrefix(persistence.PrefixIdemExp, projectID)
	cutoff := a.env.Clock.Now().Add(-core.IdempotencyRetention).UnixNano()
	n := 0
	_ = a.env.Store.Scan(prefix, idempotencySweepBatch, func(key, _ []byte) bool {
		rest := key[len(prefix):]
		if len(rest) != 8+32 || int64(binary.BigEndian.Uint64(rest)) > cutoff {
			return false // the rest expire later
		}
		var scope [32]byte
		copy(scope[:], rest[8:])
		b.Delete(append([]byte(nil), key...))
		if _, busy := inFlight[scope]; !busy {
			p := core.IdemPending{ProjectID: projectID, Scope: scope}
			b.Delete(p.StoreKey())
		}
		n++
		return true
	})
	return n
}
