package project

import (
	"crypto/rand"
	"encoding/base64"
	"slices"
	"strings"

	"rtcd/actors/core"
	"rtcd/apierr"
	"rtcd/ids"
	"rtcd/persistence"
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

func endpointView(ep *core.WebhookEndpoint) EndpointView {
	events := ep.Events
	if len(events) == 0 {
		events = core.EventTypes
	}
	return EndpointView{Object: "webhook_endpoint", ID: ep.ID, URL: ep.URL, Events: events, Status: ep.Status,
		CreatedAt: core.Timestamp(ep.CreatedAt), DisabledAt: core.OptionalTimestamp(ep.DisabledAt)}
}

func newWebhookSecret() string {
	b := make([]byte, webhookSecretBytes)
	_, _ = rand.Read(b)
	return WebhookSecretPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// Project actor commands for endpoints.
type (
	// CreateEndpoint creates a webhook endpoint (URL and Events were
	// checked; nil Events: every type).
	CreateEndpoint struct {
		Caller core.Caller
		URL    string
		Events []string
		Idem   *core.IdemPending
	}
	// DisableEndpoint disables a webhook endpoint; idempotent.
	DisableEndpoint struct {
		Caller     core.Caller
		EndpointID string
	}
)

func (a *projectActor) createEndpoint(m CreateEndpoint, r *core.Envelope) {
	env := a.env
	if a.state.Project.Status != core.ProjectActive {
		r.Respond(core.Reply{Err: core.ErrBadCredential}) // archived while the request was on its way
		return
	}
	if a.state.ActiveEndpoints >= MaxActiveEndpointsPerProject {
		r.Respond(core.Reply{Err: apierr.New(apierr.WebhookEndpointLimit, "the project has %d active webhook endpoints, the maximum; delete one first", MaxActiveEndpointsPerProject).
			WithDetails("limit", MaxActiveEndpointsPerProject)})
		return
	}
	if err := env.AllowRate("webhook_endpoint_creates:"+a.id, "webhook_endpoint_creates_per_minute", EndpointCreatesPerMinute); err != nil {
		r.Respond(core.Reply{Err: err})
		return
	}
	now := env.CreatedAt()
	secret := newWebhookSecret()
	ep := core.WebhookEndpoint{ID: ids.New(ids.Endpoint), URL: m.URL, Events: m.Events, Status: core.EndpointEnabled, CreatedAt: now}
	ep.SecretSealed = env.Secrets.SealWebhookSecret(ep.ID, secret)
	v := endpointView(&ep)
	record := core.MustJSON(v)
	v.SigningSecret = secret
	body := core.MustJSON(v)

	b := env.Store.NewBatch()
	b.Set(persistence.IndexKey(persistence.PrefixEndpoint, a.id, now.UnixNano(), ep.ID), record)
	env.Audit.Project(b, a.id, &m.Caller, "webhook_endpoint.created", core.AuditTarget{Type: "webhook_endpoint", ID: ep.ID},
		map[string]any{"url": ep.URL, "events": v.Events})
	if m.Idem != nil {
		env.PutStored(b, m.Idem, 201, body)
	}
	a.record(b, projectEvent{EndpointCreated: &ep})
	publish := a.endpointsSnapshot()
	env.Store.Commit(b, func() {
		// Visible to the dispatcher only once durable: a crash before that
		// must not leave deliveries for an endpoint that never existed.
		publish()
		r.Respond(core.Reply{Status: 201, Body: body})
	})
}

func (a *projectActor) disableEndpoint(m DisableEndpoint, r *core.Envelope) {
	env := a.env
	ep, ok := a.state.Endpoints[m.EndpointID]
	if !ok {
		r.Respond(core.Reply{Err: apierr.New(apierr.WebhookEndpointNotFound, "no webhook endpoint %s in this project", m.EndpointID)})
		return
	}
	if ep.Status == core.EndpointDisabled {
		// Idempotent, and answered once the disabling is durable: it may
		// still be on its way to disk (a concurrent first DELETE).
		body := core.MustJSON(endpointView(ep))
		env.Store.AfterDurable(func() { r.Respond(core.Reply{Status: 200, Body: body}) })
		return
	}
	now := env.Clock.Now()
	b := env.Store.NewBatch()
	a.record(b, projectEvent{EndpointDisabled: &endpointDisabled{EndpointID: ep.ID, At: now}})
	body := core.MustJSON(endpointView(ep))
	b.Set(persistence.IndexKey(persistence.PrefixEndpoint, a.id, ep.CreatedAt.UnixNano(), ep.ID), body)
	env.Audit.Project(b, a.id, &m.Caller, "webhook_endpoint.disabled", core.AuditTarget{Type: "webhook_endpoint", ID: ep.ID}, map[string]any{"url": ep.URL})
	a.publishEndpoints() // at once: failing safe, nothing more goes to it
	env.Store.Commit(b, func() { r.Respond(core.Reply{Status: 200, Body: body}) })
}

// endpointsInOrder is the project's endpoints, oldest first (ties by id):
// the fan-out writes an event's deliveries in this order, not Go's map
// order, so a run can be replayed exactly.
func (s *projectState) endpointsInOrder() []*core.WebhookEndpoint {
	out := make([]*core.WebhookEndpoint, 0, len(s.Endpoints))
	for _, ep := range s.Endpoints {
		out = append(out, ep)
	}
	slices.SortFunc(out, func(a, b *core.WebhookEndpoint) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
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
	var enabled, disabled []*core.WebhookEndpoint
	for _, ep := range a.state.endpointsInOrder() {
		c := *ep
		if ep.Status == core.EndpointEnabled {
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
