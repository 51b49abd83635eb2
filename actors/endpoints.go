package actors

import (
	"rtcd/actors/core"
	"rtcd/apierr"
	"rtcd/webhookdelivery"
)

// EndpointParams is the body of POST /v1/webhook-endpoints.
type EndpointParams struct {
	URL    *string  `json:"url"`
	Events []string `json:"events"`
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
			WithDetails("allowed", core.EventTypes)
	}
	if len(p.Events) > len(core.EventTypes) {
		return "", nil, apierr.Invalid("events", "events may list at most %d types", len(core.EventTypes))
	}
	seen := map[string]bool{}
	for _, t := range p.Events {
		known := false
		for _, k := range core.EventTypes {
			known = known || k == t
		}
		if !known {
			return "", nil, apierr.Invalid("events", "unknown event type %q", t).WithDetails("allowed", core.EventTypes)
		}
		if seen[t] {
			return "", nil, apierr.Invalid("events", "event type %q is listed twice", t)
		}
		seen[t] = true
	}
	return u.String(), append([]string(nil), p.Events...), nil
}
