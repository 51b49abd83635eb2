package actors

import (
	"crypto/rand"
	"encoding/base64"
	"time"

	"rtcd/apierr"
	"rtcd/ids"
	"rtcd/persistence"
	"rtcd/webhookdelivery"
)

// Webhook endpoint statuses. DELETE disables an endpoint (its record and
// deliveries stay readable); nothing enables it again.
const (
	EndpointEnabled  = "enabled"
	EndpointDisabled = "disabled"
)

// Named bounds of webhook endpoints (spec section 8).
const (
	MaxActiveEndpointsPerProject = 16
	EndpointCreatesPerMinute     = 20
	// webhookSecretBytes is the entropy of a signing secret.
	webhookSecretBytes = 32
	// WebhookSecretPrefix starts every signing secret (spec section 2).
	WebhookSecretPrefix = "whsec_"
)

// EventTypes is every webhook event type (spec section 6).
var EventTypes = []string{
	EventRoomStarted, EventRoomEnded, EventParticipantJoined, EventParticipantLeft, EventUsageFinalized,
	EventCreditLow, EventCreditExhausted, EventCreditRestored,
	EventPaymentSucceeded, EventPaymentFailed, EventPaymentExpired, EventPaymentCanceled, EventPaymentRefunded,
}

// WebhookEndpoint is an endpoint as its project keeps it. The signing
// secret is kept sealed (AES-GCM under the engine's key): it must be
// recoverable to sign deliveries, and never lies on disk in clear.
type WebhookEndpoint struct {
	ID           string    `json:"id"`
	URL          string    `json:"url"`
	Events       []string  `json:"events"` // empty: every event type
	Status       string    `json:"status"`
	SecretSealed []byte    `json:"secret_sealed"`
	CreatedAt    time.Time `json:"created_at"`
	DisabledAt   time.Time `json:"disabled_at"`
}

// EndpointParams is the body of POST /v1/webhook-endpoints.
type EndpointParams struct {
	URL    *string  `json:"url"`
	Events []string `json:"events"`
}

// EndpointView is the public endpoint object. Secret appears only in the
// create response (field signing_secret).
type EndpointView struct {
	Object        string   `json:"object"`
	ID            string   `json:"id"`
	URL           string   `json:"url"`
	Events        []string `json:"events"`
	Status        string   `json:"status"`
	CreatedAt     string   `json:"created_at"`
	DisabledAt    *string  `json:"disabled_at"`
	SigningSecret string   `json:"signing_secret,omitempty"`
}

func (ep *WebhookEndpoint) view() EndpointView {
	events := ep.Events
	if len(events) == 0 {
		events = EventTypes
	}
	return EndpointView{Object: "webhook_endpoint", ID: ep.ID, URL: ep.URL, Events: events, Status: ep.Status,
		CreatedAt: Timestamp(ep.CreatedAt), DisabledAt: optionalTimestamp(ep.DisabledAt)}
}

// subscribed reports whether the endpoint wants events of type t.
func (ep *WebhookEndpoint) subscribed(t string) bool {
	if len(ep.Events) == 0 {
		return true
	}
	for _, e := range ep.Events {
		if e == t {
			return true
		}
	}
	return false
}

// validateEndpoint checks a create request: an https URL that is not a
// forbidden destination, and known, distinct event types. An omitted events
// list subscribes to every type; an empty one is refused (it would receive
// nothing).
func (e *Engine) validateEndpoint(p *EndpointParams) (string, []string, *apierr.Error) {
	if p.URL == nil || *p.URL == "" {
		return "", nil, apierr.Invalid("url", "url is required: the https address that receives events")
	}
	u, err := webhookdelivery.CheckURL(*p.URL, e.env.Settings.WebhookAllowPrivate)
	if err != nil {
		return "", nil, apierr.Invalid("url", "url is not allowed: %v", err)
	}
	if p.Events == nil {
		return u.String(), nil, nil
	}
	if len(p.Events) == 0 {
		return "", nil, apierr.Invalid("events", "events must list at least one event type, or be omitted for all").
			WithDetails("allowed", EventTypes)
	}
	if len(p.Events) > len(EventTypes) {
		return "", nil, apierr.Invalid("events", "events may list at most %d types", len(EventTypes))
	}
	seen := map[string]bool{}
	for _, t := range p.Events {
		known := false
		for _, k := range EventTypes {
			known = known || k == t
		}
		if !known {
			return "", nil, apierr.Invalid("events", "unknown event type %q", t).WithDetails("allowed", EventTypes)
		}
		if seen[t] {
			return "", nil, apierr.Invalid("events", "event type %q is listed twice", t)
		}
		seen[t] = true
	}
	return u.String(), append([]string(nil), p.Events...), nil
}

func newWebhookSecret() string {
	b := make([]byte, webhookSecretBytes)
	_, _ = rand.Read(b)
	return WebhookSecretPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// SealWebhookSecret and OpenWebhookSecret keep a signing secret encrypted
// at rest, bound to its endpoint id.
func (s *Secrets) SealWebhookSecret(endpointID, secret string) []byte {
	return s.Seal([]byte(secret), []byte("webhook-secret/"+endpointID))
}

func (s *Secrets) OpenWebhookSecret(ep *WebhookEndpoint) (string, bool) {
	plain, ok := s.Open(ep.SecretSealed, []byte("webhook-secret/"+ep.ID))
	return string(plain), ok
}

// Project actor commands for endpoints.
type (
	createEndpoint struct {
		caller Caller
		url    string
		events []string
		idem   *idemPending
	}
	disableEndpoint struct {
		caller     Caller
		endpointID string
	}
)

func (a *projectActor) createEndpoint(m createEndpoint, r *Envelope) {
	env := a.env
	if a.state.Project.Status != ProjectActive {
		r.Respond(Reply{Err: errBadCredential}) // archived while the request was on its way
		return
	}
	if a.state.ActiveEndpoints >= MaxActiveEndpointsPerProject {
		r.Respond(Reply{Err: apierr.New(apierr.WebhookEndpointLimit, "the project has %d active webhook endpoints, the maximum; delete one first", MaxActiveEndpointsPerProject).
			WithDetails("limit", MaxActiveEndpointsPerProject)})
		return
	}
	if err := env.AllowRate("webhook_endpoint_creates:"+a.id, "webhook_endpoint_creates_per_minute", EndpointCreatesPerMinute); err != nil {
		r.Respond(Reply{Err: err})
		return
	}
	now := env.CreatedAt()
	secret := newWebhookSecret()
	ep := WebhookEndpoint{ID: ids.New(ids.Endpoint), URL: m.url, Events: m.events, Status: EndpointEnabled, CreatedAt: now}
	ep.SecretSealed = env.Secrets.SealWebhookSecret(ep.ID, secret)
	v := ep.view()
	record := mustJSON(v)
	v.SigningSecret = secret
	body := mustJSON(v)

	b := env.Store.NewBatch()
	b.Set(persistence.IndexKey(persistence.PrefixEndpoint, a.id, now.UnixNano(), ep.ID), record)
	env.Audit.Project(b, a.id, &m.caller, "webhook_endpoint.created", AuditTarget{Type: "webhook_endpoint", ID: ep.ID},
		map[string]any{"url": ep.URL, "events": v.Events})
	if m.idem != nil {
		env.putStored(b, m.idem, 201, body)
	}
	a.record(b, projectEvent{EndpointCreated: &ep})
	publish := a.endpointsSnapshot()
	env.Store.Commit(b, func() {
		// Visible to the dispatcher only once durable: a crash before that
		// must not leave deliveries for an endpoint that never existed.
		publish()
		r.Respond(Reply{Status: 201, Body: body})
	})
}

func (a *projectActor) disableEndpoint(m disableEndpoint, r *Envelope) {
	env := a.env
	ep, ok := a.state.Endpoints[m.endpointID]
	if !ok {
		r.Respond(Reply{Err: apierr.New(apierr.WebhookEndpointNotFound, "no webhook endpoint %s in this project", m.endpointID)})
		return
	}
	if ep.Status == EndpointDisabled {
		// Idempotent, and answered once the disabling is durable: it may
		// still be on its way to disk (a concurrent first DELETE).
		body := mustJSON(ep.view())
		env.Store.AfterDurable(func() { r.Respond(Reply{Status: 200, Body: body}) })
		return
	}
	now := env.Clock.Now()
	b := env.Store.NewBatch()
	a.record(b, projectEvent{EndpointDisabled: &endpointDisabled{EndpointID: ep.ID, At: now}})
	body := mustJSON(ep.view())
	b.Set(persistence.IndexKey(persistence.PrefixEndpoint, a.id, ep.CreatedAt.UnixNano(), ep.ID), body)
	env.Audit.Project(b, a.id, &m.caller, "webhook_endpoint.disabled", AuditTarget{Type: "webhook_endpoint", ID: ep.ID}, map[string]any{"url": ep.URL})
	a.publishEndpoints() // at once: failing safe, nothing more goes to it
	env.Store.Commit(b, func() { r.Respond(Reply{Status: 200, Body: body}) })
}

// publishEndpoints makes the project's enabled endpoints visible to the
// dispatcher (an immutable slice behind an atomic pointer) now.
func (a *projectActor) publishEndpoints() { a.endpointsSnapshot()() }

// endpointsSnapshot copies the endpoints (on the actor's goroutine) and
// returns the function that publishes the copy, safe to run elsewhere. A
// creation publishes from its commit callback while a later DELETE
// publishes at once, so the function does nothing if a newer snapshot was
// already published: the older one would enable the deleted endpoint again.
func (a *projectActor) endpointsSnapshot() func() {
	seq := a.gate.NextEndpointSnapshot()
	var enabled, disabled []*WebhookEndpoint
	for _, ep := range a.state.Endpoints {
		c := *ep
		if ep.Status == EndpointEnabled {
			enabled = append(enabled, &c)
		} else {
			disabled = append(disabled, &c)
		}
	}
	gate, registry := a.gate, a.env.Registry
	return func() {
		gate.PublishEndpoints(seq, enabled, func() { registry.EndpointWorkers(enabled, disabled) })
	}
}
