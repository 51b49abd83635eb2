package actors

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
