package actors

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

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

// idemSealedHeaderBytes: request hash (32) + created at (8) + status (2).
const idemSealedHeaderBytes = 32 + 8 + 2

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

// idemPending is an in-flight idempotent request, carried in the create
// command so the executing actor can write the record in its batch.
type idemPending struct {
	projectID   string
	scope       [32]byte
	requestHash [32]byte
}

// storeKey is id/<projectID>/<scope>: per project, so the project actor can
// sweep its own expired records while it knows which keys are in flight.
func (p *idemPending) storeKey() []byte {
	k := persistence.IndexPrefix(persistence.PrefixIdem, p.projectID)
	return append(k, p.scope[:]...)
}

func idemScope(projectID, callerID, key string) [32]byte {
	return sha256.Sum256([]byte(projectID + "\x00" + callerID + "\x00" + key))
}

// sealAt encrypts a stored response for p, created at now.
func (s *Secrets) sealAt(p *idemPending, status int, body []byte, now time.Time) []byte {
	plain := make([]byte, idemSealedHeaderBytes, idemSealedHeaderBytes+len(body))
	copy(plain, p.requestHash[:])
	binary.BigEndian.PutUint64(plain[32:], uint64(now.UnixNano()))
	binary.BigEndian.PutUint16(plain[40:], uint16(status))
	plain = append(plain, body...)
	return s.Seal(plain, p.storeKey())
}

type storedResponse struct {
	requestHash [32]byte
	createdAt   time.Time
	status      int
	body        []byte
}

// openStored decrypts a stored response; ok is false when it cannot be
// read.
func (s *Secrets) openStored(storeKey, sealed []byte) (storedResponse, bool) {
	var r storedResponse
	plain, ok := s.Open(sealed, storeKey)
	if !ok || len(plain) < idemSealedHeaderBytes {
		return r, false
	}
	copy(r.requestHash[:], plain)
	r.createdAt = time.Unix(0, int64(binary.BigEndian.Uint64(plain[32:])))
	r.status = int(binary.BigEndian.Uint16(plain[40:]))
	r.body = plain[idemSealedHeaderBytes:]
	return r, true
}

// lookupStored returns the stored response for p, if any, and whether it is
// still within the retention.
func (env *Env) lookupStored(p *idemPending) (r storedResponse, found, fresh bool) {
	key := p.storeKey()
	sealed, err := env.Store.Get(key)
	if err != nil {
		return storedResponse{}, false, false
	}
	r, ok := env.Secrets.openStored(key, sealed)
	if !ok {
		return storedResponse{}, false, false
	}
	return r, true, env.Clock.Now().Sub(r.createdAt) < idempotencyRetention
}

// idemBegin asks the project actor to admit an idempotent request.
type idemBegin struct {
	pending idemPending
}

// idemEnd tells the project actor the request finished (either way).
type idemEnd struct {
	scope [32]byte
}

// idempotent runs op at most once per (caller, key) within the project.
func (e *Engine) idempotent(c *Caller, req *IdempotencyRequest, op func(p *idemPending) Reply) Reply {
	if req == nil || req.Key == "" {
		return op(nil)
	}
	h, ok := e.project(c.ProjectID)
	if !ok {
		return Reply{Err: apierr.New(apierr.AuthenticationFailed, "the project of this credential no longer exists")}
	}
	p := &idemPending{projectID: c.ProjectID, scope: idemScope(c.ProjectID, c.ActorID, req.Key), requestHash: req.RequestHash}
	r := e.ask(h.pid, idemBegin{pending: *p})
	if r.Err != nil || r.Replayed {
		return r
	}
	res := op(p)
	e.system.Root.Send(h.pid, idemEnd{scope: p.scope})
	return res
}

// createInProject runs a create that the caller's project actor performs,
// at most once per Idempotency-Key (cmd receives the pending key to seal
// the response into the create's own batch).
func (e *Engine) createInProject(c *Caller, req *IdempotencyRequest, cmd func(ip *idemPending) any) (Result, *apierr.Error) {
	h, err := e.projectOf(c)
	if err != nil {
		return Result{}, err
	}
	return result(e.idempotent(c, req, func(ip *idemPending) Reply { return e.ask(h.pid, cmd(ip)) }))
}

// checkIdempotency is the project actor's rule for an arriving key.
func (a *projectActor) checkIdempotency(p idemPending) Reply {
	env, inFlight := a.env, a.idemInFlight
	now := env.Clock.Now()
	if started, busy := inFlight[p.scope]; busy && now.Sub(started) < idempotencyInFlightTimeout {
		return Reply{Err: apierr.New(apierr.IdempotencyInProgress,
			"a request with this Idempotency-Key is still in progress; retry after it completes")}
	}
	stored, found, fresh := env.lookupStored(&p)
	if found && !fresh {
		// Expired: the key is free again. Its old expiry index entry goes
		// now, so the sweep can never delete the record about to replace it.
		b := env.Store.NewBatch()
		b.Delete(expiryIndexKey(p.projectID, stored.createdAt.UnixNano(), p.scope))
		env.Store.Commit(b, nil)
	}
	if found && fresh {
		if stored.requestHash != p.requestHash {
			return Reply{Err: apierr.New(apierr.Conflict,
				"this Idempotency-Key was already used with a different method, path or body").
				WithDetails("reason", "idempotency_key_reused")}
		}
		return Reply{Status: stored.status, Body: stored.body, Replayed: true}
	}
	inFlight[p.scope] = now
	return Reply{}
}

// idempotencySweepBatch bounds how many expired records one sweep deletes.
const idempotencySweepBatch = 1000

// expiryIndexKey is ie/<projectID>/<createdNanos:8><scope:32>: records in the
// order they expire, so a sweep reads only what has expired.
func expiryIndexKey(projectID string, createdNanos int64, scope [32]byte) []byte {
	k := persistence.IndexPrefix(persistence.PrefixIdemExp, projectID)
	k = binary.BigEndian.AppendUint64(k, uint64(createdNanos))
	return append(k, scope[:]...)
}

// putStored writes the sealed response of p and its expiry index entry into b.
func (env *Env) putStored(b *persistence.Batch, p *idemPending, status int, body []byte) {
	now := env.Clock.Now()
	b.Set(p.storeKey(), env.Secrets.sealAt(p, status, body, now))
	b.Set(expiryIndexKey(p.projectID, now.UnixNano(), p.scope), nil)
}

// sweepExpired deletes, into b, up to idempotencySweepBatch records whose
// retention has passed, oldest first, without decrypting anything. Called by
// the project actor, the only one admitting keys: a key in flight is
// skipped (its old record is replaced by the request under way), and a key
// re-admitted after expiry had its old index entry removed at admission.
func (a *projectActor) sweepExpired(b *persistence.Batch) int {
	projectID, inFlight := a.id, a.idemInFlight
	prefix := persistence.IndexPrefix(persistence.PrefixIdemExp, projectID)
	cutoff := a.env.Clock.Now().Add(-idempotencyRetention).UnixNano()
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
			p := idemPending{projectID: projectID, scope: scope}
			b.Delete(p.storeKey())
		}
		n++
		return true
	})
	return n
}
