package core

import (
	"time"
)

// Webhook event types (spec section 6).
const (
	EventRoomStarted       = "room.started"
	EventRoomEnded         = "room.ended"
	EventParticipantJoined = "participant.joined"
	EventParticipantLeft   = "participant.left"
	EventUsageFinalized    = "usage.finalized"
	EventCreditLow         = "credit.low"
	EventCreditExhausted   = "credit.exhausted"
	EventCreditRestored    = "credit.restored"
	EventPaymentSucceeded  = "payment.succeeded"
	EventPaymentFailed     = "payment.failed"
	EventPaymentExpired    = "payment.expired"
	EventPaymentCanceled   = "payment.canceled"
	EventPaymentRefunded   = "payment.refunded"
)

// OutboxEvent is a webhook event as written to the outbox: exactly the
// envelope of spec section 6. It is written in the same batch as the state
// change that caused it, so a crash can neither lose it nor invent it; the
// webhook dispatcher delivers and removes it.
type OutboxEvent struct {
	ID        string         `json:"id"`
	Type      string         `json:"type"`
	CreatedAt string         `json:"created_at"`
	ProjectID string         `json:"project_id"`
	Data      map[string]any `json:"data"`
}

// Webhook endpoint statuses. DELETE disables an endpoint (its record and
// deliveries stay readable); nothing enables it again.
const (
	EndpointEnabled  = "enabled"
	EndpointDisabled = "disabled"
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

// Subscribed reports whether the endpoint wants events of type t.
func (ep *WebhookEndpoint) Subscribed(t string) bool {
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

// SealWebhookSecret and OpenWebhookSecret keep a signing secret encrypted
// at rest, bound to its endpoint id.
func (s *Secrets) SealWebhookSecret(endpointID, secret string) []byte {
	return s.Seal([]byte(secret), []byte("webhook-secret/"+endpointID))
}

func (s *Secrets) OpenWebhookSecret(ep *WebhookEndpoint) (string, bool) {
	plain, ok := s.Open(ep.SecretSealed, []byte("webhook-secret/"+ep.ID))
	return string(plain), ok
}
