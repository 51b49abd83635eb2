package actors

import (
	"github.com/goccy/go-json"
	"rtcd/actors/core"
	"rtcd/actors/dispatch"
	"rtcd/actors/project"
	"rtcd/apierr"
	"rtcd/ids"
	"rtcd/persistence"
)

// CreateEndpoint is POST /v1/webhook-endpoints.
func (e *Engine) CreateEndpoint(c *core.Caller, p *EndpointParams, idem *IdempotencyRequest) (Result, *apierr.Error) {
	url, events, err := e.validateEndpoint(p)
	if err != nil {
		return Result{}, err
	}
	return e.createInProject(c, idem, func(ip *core.IdemPending) any {
		return project.CreateEndpoint{Caller: *c, URL: url, Events: events, Idem: ip}
	})
}

// ListEndpoints is GET /v1/webhook-endpoints: enabled and disabled, newest first.
func (e *Engine) ListEndpoints(c *core.Caller, limit int) ([]byte, *apierr.Error) {
	return e.listPage(persistence.IndexPrefix(persistence.PrefixEndpoint, c.ProjectID), limit, false, nil)
}

// DisableEndpoint is DELETE /v1/webhook-endpoints/{id}; idempotent.
func (e *Engine) DisableEndpoint(c *core.Caller, endpointID string) (Result, *apierr.Error) {
	if !ids.Valid(endpointID, ids.Endpoint) {
		return Result{}, apierr.New(apierr.WebhookEndpointNotFound, "no webhook endpoint %q in this project", endpointID)
	}
	h, err := e.projectOf(c)
	if err != nil {
		return Result{}, err
	}
	return result(e.ask(h.pid, project.DisableEndpoint{Caller: *c, EndpointID: endpointID}))
}

// endpointOf checks that endpointID is one of the caller's project.
func (e *Engine) endpointOf(c *core.Caller, endpointID string) *apierr.Error {
	notFound := apierr.New(apierr.WebhookEndpointNotFound, "no webhook endpoint %q in this project", endpointID)
	if !ids.Valid(endpointID, ids.Endpoint) {
		return notFound
	}
	found := false
	_ = e.env.Store.Scan(persistence.IndexPrefix(persistence.PrefixEndpoint, c.ProjectID), MaxEndpointRecordsScanned, func(_, v []byte) bool {
		var ep project.EndpointView
		if json.Unmarshal(v, &ep) == nil && ep.ID == endpointID {
			found = true
			return false
		}
		return true
	})
	if !found {
		return notFound
	}
	return nil
}

// MaxEndpointRecordsScanned bounds the ownership check of an endpoint id.
const MaxEndpointRecordsScanned = 10000

// ListDeliveries is GET /v1/webhook-endpoints/{id}/deliveries, newest first.
func (e *Engine) ListDeliveries(c *core.Caller, endpointID string, limit int) ([]byte, *apierr.Error) {
	if err := e.endpointOf(c, endpointID); err != nil {
		return nil, err
	}
	return e.listPage(persistence.IndexPrefix(persistence.PrefixDelIdx, endpointID), limit, false, func(id []byte) ([]byte, error) {
		raw, err := e.env.Store.Get(dispatch.DeliveryKey(endpointID, string(id)))
		if err != nil {
			return nil, err
		}
		var dl dispatch.Delivery
		if err := json.Unmarshal(raw, &dl); err != nil {
			return nil, err
		}
		return core.MustJSON(dl.View()), nil
	})
}

// RetryDelivery is POST /v1/webhook-endpoints/{id}/deliveries/{delivery_id}/retry.
func (e *Engine) RetryDelivery(c *core.Caller, endpointID, deliveryID string) (Result, *apierr.Error) {
	if err := e.endpointOf(c, endpointID); err != nil {
		return Result{}, err
	}
	if !ids.Valid(deliveryID, ids.Delivery) {
		return Result{}, dispatch.ErrDeliveryNotFound(deliveryID)
	}
	return result(e.dispatcher.Retry(endpointID, deliveryID))
}

// SetWebhookSender starts webhook delivery with sender and settings (the
// retry schedule and the window of attempts in flight per endpoint).
// Without it events stay in the outbox.
func (e *Engine) SetWebhookSender(sender dispatch.WebhookSender, settings dispatch.Settings) {
	e.dispatcher.Start(sender, settings)
}
