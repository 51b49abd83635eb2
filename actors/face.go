package actors

import (
	"time"

	"rtcd/actors/core"
)

// The engine's face keeps the names http/, server/ and the tests use for
// what now lives in the kernel.

type (
	// Settings are the engine's configuration.
	Settings = core.Settings
	// Limits are a project's plan-dependent limits.
	Limits = core.Limits
	// Billing is the pricing and credit policy.
	Billing = core.Billing
	// Caller is the authenticated principal of an API request.
	Caller = core.Caller
	// DashboardUser is the authenticated person of a dashboard request.
	DashboardUser = core.DashboardUser
	// MediaEngine is what the control plane asks of the media engine.
	MediaEngine = core.MediaEngine
	// OutboxEvent is a webhook event as the outbox holds and delivers it.
	OutboxEvent = core.OutboxEvent
)

// Webhook event types (spec section 6).
const (
	EventRoomStarted       = core.EventRoomStarted
	EventRoomEnded         = core.EventRoomEnded
	EventParticipantJoined = core.EventParticipantJoined
	EventParticipantLeft   = core.EventParticipantLeft
	EventUsageFinalized    = core.EventUsageFinalized
	EventCreditLow         = core.EventCreditLow
	EventCreditExhausted   = core.EventCreditExhausted
	EventCreditRestored    = core.EventCreditRestored
	EventPaymentSucceeded  = core.EventPaymentSucceeded
	EventPaymentFailed     = core.EventPaymentFailed
	EventPaymentExpired    = core.EventPaymentExpired
	EventPaymentCanceled   = core.EventPaymentCanceled
	EventPaymentRefunded   = core.EventPaymentRefunded
)

// Timestamp renders t for the wire (ISO 8601 UTC, milliseconds).
func Timestamp(t time.Time) string { return core.Timestamp(t) }
