package actors

import (
	"time"

	"rtcd/actors/core"
	"rtcd/actors/directory"
	"rtcd/actors/room"
	"rtcd/actors/wallet"
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

	// MediaJoin, MediaLeave and MediaPresence are the media node's reports.
	MediaJoin     = room.MediaJoin
	MediaLeave    = room.MediaLeave
	MediaPresence = room.MediaPresence
	// UsageRecord is the finalized usage of one session on one UTC day.
	UsageRecord = room.UsageRecord
	// ConnectView is the connect session (POST /v1/connect response).
	ConnectView = room.ConnectView
	// FeaturesView says what a participant may publish.
	FeaturesView = room.FeaturesView

	// PaymentUpdate is a verified payment-provider callback.
	PaymentUpdate = wallet.PaymentUpdate

	// GoogleIdentity is what a verified Google sign-in established.
	GoogleIdentity = directory.GoogleIdentity
)

// MaxAdjustmentReasonBytes bounds an operator adjustment's reason.
const MaxAdjustmentReasonBytes = wallet.MaxAdjustmentReasonBytes

// MaxParticipantSessionsPerRoom bounds the participant sessions one room
// can ever create.
const MaxParticipantSessionsPerRoom = room.MaxParticipantSessionsPerRoom

// Reasons a participant's media session ended (participant.left
// data.reason).
const (
	LeftReasonLeft             = room.LeftReasonLeft
	LeftReasonDisconnected     = room.LeftReasonDisconnected
	LeftReasonHeartbeatTimeout = room.LeftReasonHeartbeatTimeout
	LeftReasonRemoved          = room.LeftReasonRemoved
	LeftReasonRoomEnded        = room.LeftReasonRoomEnded
	LeftReasonConnectTimeout   = room.LeftReasonConnectTimeout
	LeftReasonReconciled       = room.LeftReasonReconciled
	LeftReasonRestart          = room.LeftReasonRestart
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
