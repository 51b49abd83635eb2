package core

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

	"rtcd/persistence"
)

// Idempotency records (spec 8.5). A record is written by the actor that
// performs the create, in the same batch as the create itself, so a crash
// can never keep the effect and lose the record (or the reverse). Records
// are sealed (Secrets) with their storage key as additional data, so a
// stored response (which may hold a participant token or an API key
// secret) is never on disk in clear. Which requests are in flight, and the
// sweep of expired records, belong to the project actor.

// idemSealedHeaderBytes: request hash (32) + created at (8) + status (2).
const idemSealedHeaderBytes = 32 + 8 + 2

// IdemPending is an in-flight idempotent request, carried in the create
// command so the executing actor can write the record in its batch.
type IdemPending struct {
	ProjectID   string
	Scope       [32]byte // IdemScope of the project, the caller and the key
	RequestHash [32]byte
}

// StoreKey is id/<projectID>/<scope>: per project, so the project actor can
// sweep its own expired records while it knows which keys are in flight.
func (p *IdemPending) StoreKey() []byte {
	k := persistence.IndexPrefix(persistence.PrefixIdem, p.ProjectID)
	return append(k, p.Scope[:]...)
}

// IdemScope is SHA-256(project, caller, Idempotency-Key): a key is scoped to
// its caller within a project, and its value is never stored.
func IdemScope(projectID, callerID, key string) [32]byte {
	return sha256.Sum256([]byte(projectID + "\x00" + callerID + "\x00" + key))
}

// sealAt encrypts a stored response for p, created at now.
func (s *Secrets) sealAt(p *IdemPending, status int, body []byte, now time.Time) []byte {
	plain := make([]byte, idemSealedHeaderBytes, idemSealedHeaderBytes+len(body))
	copy(plain, p.RequestHash[:])
	binary.BigEndian.PutUint64(plain[32:], uint64(now.UnixNano()))
	binary.BigEndian.PutUint16(plain[40:], uint16(status))
	plain = append(plain, body...)
	return s.Seal(plain, p.StoreKey())
}

// StoredResponse is a stored (sealed) answer of an idempotent create.
type StoredResponse struct {
	RequestHash [32]byte
	CreatedAt   time.Time
	Status      int
	Body        []byte
}

// openStored decrypts a stored response; ok is false when it cannot be
// read.
func (s *Secrets) openStored(storeKey, sealed []byte) (StoredResponse, bool) {
	var r StoredResponse
	plain, ok := s.Open(sealed, storeKey)
	if !ok || len(plain) < idemSealedHeaderBytes {
		return r, false
	}
	copy(r.RequestHash[:], plain)
	r.CreatedAt = time.Unix(0, int64(binary.BigEndian.Uint64(plain[32:])))
	r.Status = int(binary.BigEndian.Uint16(plain[40:]))
	r.Body = plain[idemSealedHeaderBytes:]
	return r, true
}

// LookupStored returns the stored response for p, if any, and whether it is
// still within the retention.
func (env *Env) LookupStored(p *IdemPending) (r StoredResponse, found, fresh bool) {
	key := p.StoreKey()
	sealed, err := env.Store.Get(key)
	if err != nil {
		return StoredResponse{}, false, false
	}
	r, ok := env.Secrets.openStored(key, sealed)
	if !ok {
		return StoredResponse{}, false, false
	}
	return r, true, env.Clock.Now().Sub(r.CreatedAt) < IdempotencyRetention
}

// IdemExpiryKey is ie/<projectID>/<createdNanos:8><scope:32>: records in the
// order they expire, so a Sweep reads only what has expired.
func IdemExpiryKey(projectID string, createdNanos int64, scope [32]byte) []byte {
	k := persistence.IndexPrefix(persistence.PrefixIdemExp, projectID)
	k = binary.BigEndian.AppendUint64(k, uint64(createdNanos))
	return append(k, scope[:]...)
}

// PutStored writes the sealed response of p and its expiry index entry into b.
func (env *Env) PutStored(b *persistence.Batch, p *IdemPending, status int, body []byte) {
	now := env.Clock.Now()
	b.Set(p.StoreKey(), env.Secrets.sealAt(p, status, body, now))
	b.Set(IdemExpiryKey(p.ProjectID, now.UnixNano(), p.Scope), nil)
}

// IdempotencyRetention is the spec's 24 hours.
const IdempotencyRetention = 24 * time.Hour
