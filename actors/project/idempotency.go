package project

import (
	"encoding/binary"

	"rtcd/actors/core"
	"rtcd/apierr"
	"rtcd/persistence"
)

// IdemBegin asks the project actor to admit an idempotent request.
type IdemBegin struct {
	Pending core.IdemPending
}

// IdemEnd tells the project actor the request finished (either way).
type IdemEnd struct {
	Scope [32]byte
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

// writesPerSweptRecord are the keys one expired record's deletion writes:
// the record and its expiry index entry.
const writesPerSweptRecord = 2

// sweepBatchRecords is how many expired records one sweep deletes:
// idempotencySweepBatch, or fewer on a store that takes fewer writes in a
// batch (Storage.MaxBatchWrites: JetStream's 1000).
func sweepBatchRecords(s persistence.Storage) int {
	n := idempotencySweepBatch
	if m := s.MaxBatchWrites(); m > 0 {
		n = min(n, m/writesPerSweptRecord)
	}
	return max(n, 1)
}

// sweepExpired deletes, into b, up to sweepBatchRecords records whose
// retention has passed, oldest first, without decrypting anything. Called by
// the project actor, the only one admitting keys: a key in flight is
// skipped (its old record is replaced by the request under way), and a key
// re-admitted after expiry had its old index entry removed at admission.
func (a *projectActor) sweepExpired(b *persistence.Batch) int {
	projectID, inFlight := a.id, a.idemInFlight
	prefix := persistence.IndexPrefix(persistence.PrefixIdemExp, projectID)
	cutoff := a.env.Clock.Now().Add(-core.IdempotencyRetention).UnixNano()
	n := 0
	_ = a.env.Store.Scan(prefix, sweepBatchRecords(a.env.Store), func(key, _ []byte) bool {
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
