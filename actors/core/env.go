package core

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"rtcd/apierr"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/ids"
	"rtcd/metrics"
	"rtcd/persistence"
	"rtcd/ratelimit"
)

// Env is everything an actor may use besides its own state: the store it
// journals to, the clock, the keys, the settings, the rate limiter, the
// outbox and audit logs it writes into its batches, and the registry
// through which it reaches other actors and what they publish. An actor
// holds an Env, never the engine: what is not here, it cannot touch.
type Env struct {
	Store    persistence.Storage
	Clock    clock.Clock
	Keys     auth.Keys
	Secrets  *Secrets // seals idempotency records and webhook signing secrets
	Settings Settings
	Limiter  ratelimit.Store
	Outbox   Outbox
	Audit    Audit
	Registry Registry

	// APIKeys is published by the project actors and read by every
	// authenticated request.
	APIKeys *KeyRegistry
	// Media is the media engine the rooms command and what its reports
	// told of it.
	Media *MediaLink
	// Gauges are the process-wide counts the metrics read.
	Gauges *Gauges
	// Metrics are the collectors the owners move where events happen
	// (webhook attempts, credit moves, rate-limit refusals...).
	Metrics *metrics.Metrics
	// Clustered is set before the engine starts as one node of a cluster:
	// the workspaces whose actors run here are those placed here, and
	// what is shared (the webhook outbox) holds other nodes' work too.
	Clustered bool

	instants *Instants
}

// NewEnv returns the environment of one engine. Registry is set by the
// engine that implements it. m nil: collectors on a registry of their own
// that nobody serves.
func NewEnv(s Settings, store persistence.Storage, clk clock.Clock, limiter ratelimit.Store, keys auth.Keys, m *metrics.Metrics) (*Env, error) {
	secrets, err := NewSecrets(keys)
	if err != nil {
		return nil, err
	}
	if m == nil {
		m = metrics.New()
	}
	instants := &Instants{clock: clk}
	return &Env{
		Store: store, Clock: clk, Keys: keys, Secrets: secrets, Settings: s, Limiter: limiter,
		Outbox: Outbox{instants: instants}, Audit: Audit{instants: instants},
		APIKeys: NewKeyRegistry(), Media: &MediaLink{}, Gauges: &Gauges{}, Metrics: m, instants: instants,
	}, nil
}

// CreatedAt is the creation time of something new (see Instants).
func (env *Env) CreatedAt() time.Time { return env.instants.Next() }

// AllowRate consults the rate counter store and turns a denial into a 429,
// counted under the limit's name what (a constant of the caller's).
func (env *Env) AllowRate(key, what string, limitPerMinute int) *apierr.Error {
	return env.AllowRateAt(key, what, limitPerMinute, env.Clock.Now())
}

// AllowRateAt is AllowRate at now, for a request that reads the clock once.
func (env *Env) AllowRateAt(key, what string, limitPerMinute int, now time.Time) *apierr.Error {
	d := env.Limiter.Allow(key, limitPerMinute, now)
	if d.Allowed {
		return nil
	}
	env.Metrics.RateLimits.Rejected(what)
	return apierr.RateLimitedError(what, d.Limit, d.RetryAfterSeconds)
}

// RateCheck is one limit of AllowRatesAt: the counter's key, the limit's
// name (a constant of the caller's) and its per-minute value.
type RateCheck struct {
	Key            string
	What           string
	LimitPerMinute int
}

// AllowRatesAt decides first and, only if first allows, second, as one
// step (one round trip to a shared store): a request first refuses spends
// nothing of second. The refusal is the first limit that refuses.
func (env *Env) AllowRatesAt(first, second RateCheck, now time.Time) *apierr.Error {
	d1, d2 := env.Limiter.AllowPair(ratelimit.Check{Key: first.Key, LimitPerMinute: first.LimitPerMinute},
		ratelimit.Check{Key: second.Key, LimitPerMinute: second.LimitPerMinute}, now)
	if !d1.Allowed {
		env.Metrics.RateLimits.Rejected(first.What)
		return apierr.RateLimitedError(first.What, d1.Limit, d1.RetryAfterSeconds)
	}
	if !d2.Allowed {
		env.Metrics.RateLimits.Rejected(second.What)
		return apierr.RateLimitedError(second.What, d2.Limit, d2.RetryAfterSeconds)
	}
	return nil
}

// LimitsOf returns a project's effective limits: its own, or the current
// defaults.
func (env *Env) LimitsOf(p *Project) Limits {
	if p.Limits != nil {
		return *p.Limits
	}
	return env.Settings.DefaultLimits
}

// Instants hands out creation times: the clock's now, nudged forward by a
// nanosecond when needed so that no two created things share an instant.
// List indexes order by creation time, and ties would otherwise fall back
// to the random id, so "newest first" would not be exact within one clock
// tick.
type Instants struct {
	clock clock.Clock
	last  atomic.Int64 // Unix nanoseconds of the last instant handed out
}

// Next is the next creation instant, strictly after every earlier one.
func (i *Instants) Next() time.Time {
	now := i.clock.Now().UnixNano()
	for {
		last := i.last.Load()
		next := now
		if next <= last {
			next = last + 1
		}
		if i.last.CompareAndSwap(last, next) {
			return time.Unix(0, next).UTC()
		}
	}
}

// Outbox writes webhook events into the batch of the change that causes
// them, so a crash can neither lose an event nor invent one; the webhook
// dispatcher delivers and removes them.
type Outbox struct{ instants *Instants }

// Emit adds an event of eventType for projectID to b's outbox.
func (o Outbox) Emit(b *persistence.Batch, projectID, eventType string, at time.Time, data map[string]any) {
	ev := OutboxEvent{ID: ids.New(ids.Event), Type: eventType, CreatedAt: Timestamp(at), ProjectID: projectID, Data: data}
	b.Set(persistence.OutboxKey(o.instants.Next().UnixNano(), ev.ID), MustJSON(ev))
}

// Audit writes audit log entries into the batch of the change they record.
type Audit struct{ instants *Instants }

// Project adds an entry to a project's audit log (au/).
func (a Audit) Project(b *persistence.Batch, projectID string, c *Caller, action string, target AuditTarget, details map[string]any) {
	now := a.instants.Next()
	if details == nil {
		details = map[string]any{}
	}
	entry := AuditEntry{
		Object: "audit_log_entry", ID: ids.New(ids.Audit), Action: action, Actor: c.AuditActor(), Target: target,
		RequestID: OptionalString(c.RequestID), SourceIP: OptionalString(c.SourceIP), CreatedAt: Timestamp(now), Details: details,
	}
	b.Set(persistence.IndexKey(persistence.PrefixAudit, projectID, now.UnixNano(), entry.ID), MustJSON(entry))
}

// Account adds an entry to a workspace's audit log (wa/): team,
// invitations, projects. A nil user is the system.
func (a Audit) Account(b *persistence.Batch, accountID string, u *DashboardUser, action string, target AuditTarget, details map[string]any) {
	now := a.instants.Next()
	if details == nil {
		details = map[string]any{}
	}
	entry := AuditEntry{Object: "audit_log_entry", ID: ids.New(ids.Audit), Action: action, Target: target,
		CreatedAt: Timestamp(now), Details: details}
	if u != nil {
		entry.Actor = u.AuditActor()
		entry.RequestID = OptionalString(u.RequestID)
		entry.SourceIP = OptionalString(u.SourceIP)
	} else {
		entry.Actor = Actor{Type: "system", ID: "rtcd"}
	}
	b.Set(persistence.IndexKey(persistence.PrefixAccountAudit, accountID, now.UnixNano(), entry.ID), MustJSON(entry))
}

// Secrets seals what must be stored but never in clear (idempotency
// records, webhook signing secrets): AES-256-GCM under a key derived from
// the master key, a random 12-byte nonce first.
type Secrets struct{ aead cipher.AEAD }

// NewSecrets derives the sealing key from keys.
func NewSecrets(keys auth.Keys) (*Secrets, error) {
	k := keys.Idempotency()
	block, err := aes.NewCipher(k[:])
	if err != nil {
		return nil, fmt.Errorf("actors: sealing cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("actors: sealing cipher: %w", err)
	}
	return &Secrets{aead: aead}, nil
}

// Seal encrypts plain, bound to additional (which must be given again to
// open it).
func (s *Secrets) Seal(plain, additional []byte) []byte {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails (Go 1.24+)
	return s.aead.Seal(nonce, nonce, plain, additional)
}

// Open decrypts what Seal made; ok is false when it cannot be read.
func (s *Secrets) Open(sealed, additional []byte) ([]byte, bool) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, false
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], additional)
	return plain, err == nil
}

// Address names an actor: its kind and id. It is a plain value, so a
// message can name its destination across a process boundary.
type Address struct {
	Kind string // room, project, wallet or directory
	ID   string // empty for the directory
}

// Actor kinds.
const (
	KindRoom      = "room"
	KindProject   = "project"
	KindWallet    = "wallet"
	KindDirectory = "directory"
)

// RoomAddress, ProjectAddress and WalletAddress name one actor of a kind;
// DirectoryAddress names the directory.
func RoomAddress(id string) Address    { return Address{Kind: KindRoom, ID: id} }
func ProjectAddress(id string) Address { return Address{Kind: KindProject, ID: id} }
func WalletAddress(id string) Address  { return Address{Kind: KindWallet, ID: id} }
func DirectoryAddress() Address        { return Address{Kind: KindDirectory} }

// Registry is what an actor may ask of the engine that runs it: the state
// other owners publish, messages to other actors, and the actors and
// workers it starts.
type Registry interface {
	// ProjectGate is what project projectID publishes (nil, false when
	// there is no such project).
	ProjectGate(projectID string) (*ProjectGate, bool)
	// CreditGate is what the wallet of accountID publishes.
	CreditGate(accountID string) (*CreditGate, bool)
	// RoomLive reports whether room roomID has a running actor.
	RoomLive(roomID string) bool

	// Send delivers msg to the actor at to without waiting; a message to
	// an address with no actor is dropped. It may block while a bounded
	// mailbox is full: an actor that must never block sends from a
	// goroutine of its own.
	Send(to Address, msg any)
	// Post is Send for a sender that must never block: an actor telling
	// another (or itself) while it runs, and a commit callback on the
	// store's syncer. The message arrives later, in no order with other
	// posts; it is dropped if the address has no actor by then.
	Post(to Address, msg any)
	// Request sends msg in an envelope and calls answer, on another
	// goroutine, with the one reply (a stopped actor's is Gone).
	Request(to Address, msg any, answer func(Reply))

	// SpawnRoom, SpawnProject and SpawnWallet start an actor from its
	// stored snapshot and journal. rec is the start-up recovery that
	// waits for it, nil for one created at run time. created is the
	// record of a project created at run time (nil at recovery),
	// published before the project can be found.
	SpawnRoom(roomID, projectID string, rec *Recovery)
	SpawnProject(projectID string, created *Project, rec *Recovery)
	SpawnWallet(accountID string, rec *Recovery)
	// RoomStopped forgets a room whose actor is stopping (passivation).
	RoomStopped(roomID string)
	// EndpointWorkers gives each enabled endpoint a delivery worker and
	// tells the workers of disabled ones to idle.
	EndpointWorkers(enabled, disabled []*WebhookEndpoint)
}

// Recovery is how the actors started together at start-up say they are
// ready: each calls Done once, with its recovery error or nil, and the
// engine Waits for all of them before it serves.
type Recovery struct {
	wg    sync.WaitGroup
	mu    sync.Mutex
	first error
}

// Add counts one more actor to wait for (the registry calls it at spawn).
func (r *Recovery) Add() { r.wg.Add(1) }

// Done reports one actor's recovery. It never blocks.
func (r *Recovery) Done(err error) {
	if err != nil {
		r.mu.Lock()
		if r.first == nil {
			r.first = err
		}
		r.mu.Unlock()
	}
	r.wg.Done()
}

// Wait waits for every actor counted and returns the first error reported.
func (r *Recovery) Wait() error {
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first
}

// MediaLink is the media engine the rooms command and the last presence
// report it sent.
type MediaLink struct {
	engine            atomic.Pointer[MediaEngine]
	lastPresenceNanos atomic.Int64 // the At of the last presence report (at start: the clock's Now)
	// lastPresenceSeen is the engine clock's Monotonic reading when the last
	// presence report arrived (at start: when the engine started). Silence
	// is measured from it on the injected clock, so tests move it. Not on
	// the report's At, which is the node's clock (maybe skewed or stepped),
	// and not as a difference of two clock.Now readings: those follow every
	// step of the wall clock (clock.Real.Now carries no monotonic reading),
	// and the wall clock set forward must not look like a silent node and
	// end everyone's session.
	lastPresenceSeen atomic.Int64
	// nodes are the media nodes registered with a cluster (medianodes.go);
	// roomNodes is, per room, the registered node holding its sessions.
	nodes     atomic.Pointer[mediaNodeSet]
	roomNodes sync.Map // room id -> node id
	unheld    sync.Map // room id -> unheldSince
}

// Engine is the media engine, nil for none: while media nodes are
// registered, one that sends each command to its room's node.
func (m *MediaLink) Engine() MediaEngine {
	if m.Registered() {
		return routedEngine{m}
	}
	if p := m.engine.Load(); p != nil {
		return *p
	}
	return nil
}

// SetEngine connects the media engine (nil: none).
func (m *MediaLink) SetEngine(e MediaEngine) { m.engine.Store(&e) }

// Presence notes a presence report: its own time, and the engine clock's
// Monotonic reading when it arrived.
func (m *MediaLink) Presence(at time.Time, seen time.Duration) {
	m.lastPresenceNanos.Store(at.UnixNano())
	m.lastPresenceSeen.Store(int64(seen))
}

// LastPresenceAt is the time of the last presence report.
func (m *MediaLink) LastPresenceAt() time.Time {
	return time.Unix(0, m.lastPresenceNanos.Load()).UTC()
}

// LastPresenceSeen is the Monotonic reading when it arrived.
func (m *MediaLink) LastPresenceSeen() time.Duration { return time.Duration(m.lastPresenceSeen.Load()) }

// Gauges are process-wide counts kept by the actors for the metrics.
type Gauges struct {
	ActiveRooms        atomic.Int64
	ActiveParticipants atomic.Int64
}
