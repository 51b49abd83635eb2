package core

import (
	"encoding/hex"
	"sync"
	"sync/atomic"
	"time"

	"rtcd/persistence"
	"rtcd/scopes"
)

// What owners publish for others to read without a message: each value
// is written only by its owner and read lock-free (atomics, or immutable
// values behind an atomic pointer), so the connect path and every
// authenticated request cost no actor round trip.

// ProjectGate is what a project publishes: its record, the project-wide
// count of participants holding a slot (its rooms take and give slots
// with compare-and-swap, so max_active_participants holds exactly without
// asking the project), its workspace's credit gate, and its enabled
// webhook endpoints.
type ProjectGate struct {
	// Record is the project's record, replaced whole on each change.
	Record atomic.Pointer[Project]
	// ActiveParticipants is the number of the project's participants
	// holding a slot.
	ActiveParticipants atomic.Int64
	// EndedRooms counts rooms whose end is already visible in their records
	// but which the project has not yet removed from its active rooms (the
	// room tells it only once the end is durable). The max_active_rooms
	// check subtracts them, so a room that reads as ended never holds a slot.
	EndedRooms atomic.Int64
	// Credit is the project's workspace's credit gate; set by the
	// project's recovery before any of its rooms starts.
	Credit atomic.Pointer[CreditGate]
	// Endpoints are the project's enabled webhook endpoints, for the
	// dispatcher's fan-out.
	Endpoints atomic.Pointer[[]*WebhookEndpoint]

	// endpointSnapshots numbers the endpoint snapshots in the order the
	// project actor takes them; publishedSnapshot (guarded by publishMu) is
	// the newest one published. An older snapshot is never published over
	// a newer one (see PublishEndpoints).
	endpointSnapshots atomic.Uint64
	publishMu         sync.Mutex
	publishedSnapshot uint64
}

// TakeSlot takes one of the project's participant slots if fewer than
// limit are taken. Lock-free and exact under concurrency.
func (g *ProjectGate) TakeSlot(limit int) bool {
	for {
		n := g.ActiveParticipants.Load()
		if n >= int64(limit) {
			return false
		}
		if g.ActiveParticipants.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// CreditClosed reports whether the workspace's wallet closed the gate.
func (g *ProjectGate) CreditClosed() bool {
	c := g.Credit.Load()
	return c != nil && c.Closed()
}

// NextEndpointSnapshot numbers a snapshot of the endpoints about to be
// taken (on the project's goroutine).
func (g *ProjectGate) NextEndpointSnapshot() uint64 { return g.endpointSnapshots.Add(1) }

// PublishEndpoints publishes snapshot seq of the enabled endpoints and then
// runs tell (which informs the delivery workers), unless a newer snapshot
// was published already: a creation publishes from its commit callback
// while a later DELETE publishes at once, and the older snapshot would
// enable the deleted endpoint again.
func (g *ProjectGate) PublishEndpoints(seq uint64, enabled []*WebhookEndpoint, tell func()) {
	g.publishMu.Lock()
	defer g.publishMu.Unlock()
	if seq <= g.publishedSnapshot {
		return
	}
	g.publishedSnapshot = seq
	g.Endpoints.Store(&enabled)
	tell()
}

// CreditGate is what a wallet publishes for rooms to read on the connect
// path: whether its credit gate is closed.
type CreditGate struct {
	closed atomic.Bool
}

// Closed reports whether new sessions are refused (insufficient_credit).
func (c *CreditGate) Closed() bool { return c.closed.Load() }

// Set opens or closes the gate (the wallet, only).
func (c *CreditGate) Set(closed bool) { c.closed.Store(closed) }

// APIKeyTouchInterval: a key's last use is written to disk at most this
// often, so authentication costs no write per request; last_used_at may
// therefore be up to this much behind the key's real last use.
const APIKeyTouchInterval = time.Minute

// KeyRecord is what authentication needs to know of an active API key, and
// where it notes the key's use. The registry's map is copied on write but
// its records are shared by pointer, so the atomics survive other keys'
// changes.
type KeyRecord struct {
	KeyID     string
	ProjectID string
	Scopes    scopes.Set

	// lastUsedNanos is the last use (injected clock, Unix nanoseconds);
	// persistedNanos the last use journaled. Both only move forward; 0 is
	// never.
	lastUsedNanos  atomic.Int64
	persistedNanos atomic.Int64
	touching       atomic.Bool // a touchKey message is on its way
}

// NewKeyRecord is the registry record of a key of projectID, last used at
// lastUsed as journaled (zero: never).
func NewKeyRecord(keyID, projectID string, s scopes.Set, lastUsed time.Time) *KeyRecord {
	rec := &KeyRecord{KeyID: keyID, ProjectID: projectID, Scopes: s}
	if !lastUsed.IsZero() { // the zero time's UnixNano is not 0
		rec.lastUsedNanos.Store(lastUsed.UnixNano())
		rec.persistedNanos.Store(lastUsed.UnixNano())
	}
	return rec
}

// NoteUse moves the key's last use forward to now and reports whether it
// is time to journal it: APIKeyTouchInterval after the last journaled use,
// and no touch already on its way (the caller then owns the touching flag
// and must send exactly one touchKey).
func (r *KeyRecord) NoteUse(now time.Time) bool {
	n := now.UnixNano()
	for last := r.lastUsedNanos.Load(); last < n && !r.lastUsedNanos.CompareAndSwap(last, n); {
		last = r.lastUsedNanos.Load()
	}
	return n-r.persistedNanos.Load() >= int64(APIKeyTouchInterval) && r.touching.CompareAndSwap(false, true)
}

// LastUsed is the last use noted (zero time: never).
func (r *KeyRecord) LastUsed() time.Time {
	n := r.lastUsedNanos.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// Touched records that the use at was journaled, and releases the touching
// flag (the project, once it handled the touchKey).
func (r *KeyRecord) Touched(at time.Time) {
	if !at.IsZero() {
		r.persistedNanos.Store(at.UnixNano())
	}
	r.touching.Store(false)
}

// KeyRegistry maps a key's hash to its record. Published by the project
// actors as an immutable map behind an atomic pointer (copy on write), so
// every request reads it without a lock.
type KeyRegistry struct {
	m atomic.Pointer[map[[32]byte]*KeyRecord]
}

// NewKeyRegistry returns an empty registry.
func NewKeyRegistry() *KeyRegistry {
	r := &KeyRegistry{}
	m := make(map[[32]byte]*KeyRecord)
	r.m.Store(&m)
	return r
}

// Lookup is the record of the key with hash, nil when none is active.
func (r *KeyRegistry) Lookup(hash [32]byte) *KeyRecord { return (*r.m.Load())[hash] }

// Update publishes a copy of the map changed by f.
func (r *KeyRegistry) Update(f func(m map[[32]byte]*KeyRecord)) {
	for {
		old := r.m.Load()
		next := make(map[[32]byte]*KeyRecord, len(*old)+1)
		for k, v := range *old {
			next[k] = v
		}
		f(next)
		if r.m.CompareAndSwap(old, &next) {
			return
		}
	}
}

// RangeHashes calls f for every active key's hash and record.
func (r *KeyRegistry) RangeHashes(f func(hash [32]byte, rec *KeyRecord)) {
	for hash, rec := range *r.m.Load() {
		f(hash, rec)
	}
}

// KeyHashKey is the store key of the kh/ record that names the project of
// the API key with hash: written in the batch that creates the key, never
// changed (a revoked key still maps to its project, whose owner refuses
// it), so a node that routes requests by it may cache it forever.
func KeyHashKey(hash [32]byte) []byte {
	return persistence.Key(persistence.PrefixKeyHash, hex.EncodeToString(hash[:]))
}

// Range calls f for every active key's record (tests, metrics).
func (r *KeyRegistry) Range(f func(*KeyRecord)) {
	for _, rec := range *r.m.Load() {
		f(rec)
	}
}

// Sessions is what the directory publishes for request authentication:
// the live dashboard sessions by their token's keyed hash, and every
// user's role in each of their workspaces. The directory alone writes it;
// a session on a project route costs the request no actor message.
type Sessions struct {
	live  sync.Map                                     // [32]byte hash -> *LiveSession
	roles atomic.Pointer[map[string]map[string]string] // user id -> account id -> role
}

// LiveSession is a dashboard session as authentication reads it, and where
// it notes the session's use.
type LiveSession struct {
	hash      string // hex of the token's keyed hash
	userID    string
	expiresAt time.Time
	// lastSeenNanos is the last use (injected clock); persistedNanos the
	// last use written to disk. Both only move forward.
	lastSeenNanos  atomic.Int64
	persistedNanos atomic.Int64
	touching       atomic.Bool // a touch message is on its way
}

// NewLiveSession is a session to publish, last used at lastSeen (as
// journaled).
func NewLiveSession(hash, userID string, expiresAt, lastSeen time.Time) *LiveSession {
	ls := &LiveSession{hash: hash, userID: userID, expiresAt: expiresAt}
	ls.lastSeenNanos.Store(lastSeen.UnixNano())
	ls.persistedNanos.Store(lastSeen.UnixNano())
	return ls
}

// Hash is the hex keyed hash of the session's token.
func (ls *LiveSession) Hash() string { return ls.hash }

// UserID is the session's user.
func (ls *LiveSession) UserID() string { return ls.userID }

// ExpiresAt is the end of the session's lifetime.
func (ls *LiveSession) ExpiresAt() time.Time { return ls.expiresAt }

// LastSeen is the last use noted.
func (ls *LiveSession) LastSeen() time.Time { return time.Unix(0, ls.lastSeenNanos.Load()) }

// NoteUse moves the last use forward to now and reports whether it is time
// to journal it: touchInterval after the last journaled use, and no touch
// already on its way (the caller then owns the touching flag and must send
// exactly one touch, which the directory ends with Touched).
func (ls *LiveSession) NoteUse(now time.Time, touchInterval time.Duration) bool {
	n := now.UnixNano()
	for last := ls.lastSeenNanos.Load(); last < n && !ls.lastSeenNanos.CompareAndSwap(last, n); {
		last = ls.lastSeenNanos.Load()
	}
	return n-ls.persistedNanos.Load() >= int64(touchInterval) && ls.touching.CompareAndSwap(false, true)
}

// Touched records that the use at was journaled (zero: none was) and
// releases the touching flag.
func (ls *LiveSession) Touched(at time.Time) {
	if !at.IsZero() {
		ls.persistedNanos.Store(at.UnixNano())
	}
	ls.touching.Store(false)
}

// Lookup is the live session with token hash h.
func (s *Sessions) Lookup(h [32]byte) (*LiveSession, bool) {
	v, ok := s.live.Load(h)
	if !ok {
		return nil, false
	}
	return v.(*LiveSession), true
}

// Publish makes a session usable under its token hash h.
func (s *Sessions) Publish(h [32]byte, ls *LiveSession) { s.live.Store(h, ls) }

// Withdraw makes a session unusable at once.
func (s *Sessions) Withdraw(h [32]byte) { s.live.Delete(h) }

// WithdrawAll empties the published sessions (before a recovery publishes
// them again).
func (s *Sessions) WithdrawAll() {
	s.live.Range(func(k, _ any) bool { s.live.Delete(k); return true })
}

// SetRoles replaces the user -> workspace -> role map whole (copy on
// write: membership changes are rare next to the requests that read it).
func (s *Sessions) SetRoles(m map[string]map[string]string) { s.roles.Store(&m) }

// RoleOf is userID's role in accountID, if a member.
func (s *Sessions) RoleOf(userID, accountID string) (string, bool) {
	m := s.roles.Load()
	if m == nil {
		return "", false
	}
	r, ok := (*m)[userID][accountID]
	return r, ok
}
