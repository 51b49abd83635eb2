package actors

import (
	"github.com/goccy/go-json"
	"rtcd/actors/core"
	"rtcd/money"
	"rtcd/scopes"
)

var emptyObject = json.RawMessage(`{}`)

func metadataOrEmpty(m json.RawMessage) json.RawMessage {
	if len(m) == 0 || string(m) == "null" {
		return emptyObject
	}
	return m
}

// RoomView is the public room object.
type RoomView struct {
	Object          string          `json:"object"`
	ID              string          `json:"id"`
	Name            *string         `json:"name"`
	Status          string          `json:"status"`
	Region          string          `json:"region"`
	MaxParticipants int             `json:"max_participants"`
	Metadata        json.RawMessage `json:"metadata"`
	CreatedAt       string          `json:"created_at"`
	ExpiresAt       string          `json:"expires_at"`
	EndedAt         *string         `json:"ended_at"`
	EndReason       *string         `json:"end_reason"`
}

func (r *Room) view() RoomView {
	return RoomView{
		Object: "room", ID: r.ID, Name: core.OptionalString(r.Name), Status: r.Status, Region: r.Region,
		MaxParticipants: r.MaxParticipants, Metadata: metadataOrEmpty(r.Metadata),
		CreatedAt: core.Timestamp(r.CreatedAt), ExpiresAt: core.Timestamp(r.ExpiresAt),
		EndedAt: core.OptionalTimestamp(r.EndedAt), EndReason: core.OptionalString(r.EndReason),
	}
}

// ParticipantView is the public participant object (get and list).
type ParticipantView struct {
	Object      string          `json:"object"`
	ID          string          `json:"id"`
	RoomID      string          `json:"room_id"`
	ExternalID  *string         `json:"external_id"`
	Name        *string         `json:"name"`
	Role        string          `json:"role"`
	Status      string          `json:"status"`
	Metadata    json.RawMessage `json:"metadata"`
	CreatedAt   string          `json:"created_at"`
	ExpiresAt   string          `json:"expires_at"`
	ConnectedAt *string         `json:"connected_at"`
	EndedAt     *string         `json:"ended_at"`
}

func (p *Participant) view() ParticipantView {
	return ParticipantView{
		Object: "participant", ID: p.ID, RoomID: p.RoomID, ExternalID: core.OptionalString(p.ExternalID),
		Name: core.OptionalString(p.Name), Role: p.Role, Status: p.Status, Metadata: metadataOrEmpty(p.Metadata),
		CreatedAt: core.Timestamp(p.CreatedAt), ExpiresAt: core.Timestamp(p.ExpiresAt),
		ConnectedAt: core.OptionalTimestamp(p.ConnectedAt), EndedAt: core.OptionalTimestamp(p.EndedAt),
	}
}

// ParticipantCreatedView is the create response: the participant plus its
// token, which is shown only here and never stored.
type ParticipantCreatedView struct {
	ParticipantView
	Token string `json:"token"`
}

// APIKeyView is the public API key object. The secret appears only in the
// create response.
type APIKeyView struct {
	Object    string   `json:"object"`
	ID        string   `json:"id"`
	Name      *string  `json:"name"`
	Scopes    []string `json:"scopes"`
	Last4     string   `json:"last4"`
	Status    string   `json:"status"`
	CreatedAt string   `json:"created_at"`
	RevokedAt *string  `json:"revoked_at"`
	// LastUsedAt is the last use as journaled: at most apiKeyTouchInterval
	// behind the real one (last use, recorded to the minute).
	LastUsedAt *string `json:"last_used_at"`
	Secret     string  `json:"secret,omitempty"`
}

func (k *APIKey) view() APIKeyView {
	status := "active"
	if !k.RevokedAt.IsZero() {
		status = "revoked"
	}
	return APIKeyView{
		Object: "api_key", ID: k.ID, Name: core.OptionalString(k.Name), Scopes: scopes.Set(k.Scopes).Names(),
		Last4: k.Last4, Status: status, CreatedAt: core.Timestamp(k.CreatedAt), RevokedAt: core.OptionalTimestamp(k.RevokedAt),
		LastUsedAt: core.OptionalTimestamp(k.LastUsedAt),
	}
}

// ConnectView is the connect session (POST /v1/connect response).
type ConnectView struct {
	Object      string       `json:"object"`
	SessionID   string       `json:"session_id"`
	Endpoint    string       `json:"endpoint"`
	MediaToken  string       `json:"media_token"`
	ExpiresAt   string       `json:"expires_at"`
	Room        idRef        `json:"room"`
	Participant idRef        `json:"participant"`
	Features    FeaturesView `json:"features"`
}

type idRef struct {
	ID string `json:"id"`
}

// FeaturesView says what the participant may publish.
type FeaturesView struct {
	Audio       bool `json:"audio"`
	Video       bool `json:"video"`
	ScreenShare bool `json:"screen_share"`
}

func featuresOf(role string) FeaturesView {
	if role == RolePublisher {
		return FeaturesView{Audio: true, Video: true, ScreenShare: true}
	}
	return FeaturesView{}
}

// LedgerEntryView is the public ledger entry (GET /v1/billing/ledger).
type LedgerEntryView struct {
	Object       string         `json:"object"`
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Amount       string         `json:"amount"`
	BalanceAfter string         `json:"balance_after"`
	Currency     string         `json:"currency"`
	Description  string         `json:"description"`
	Reference    map[string]any `json:"reference"`
	CreatedAt    string         `json:"created_at"`
}

// ledgerAmountDecimals shows ledger amounts with the price's precision, so a
// per-second usage charge is never rounded on display.
const ledgerAmountDecimals = 6

func ledgerView(l *LedgerEntry, currency string) LedgerEntryView {
	ref := l.Reference
	if ref == nil {
		ref = map[string]any{}
	}
	return LedgerEntryView{
		Object: "ledger_entry", ID: l.ID, Type: l.Type,
		Amount:       money.Micros(l.Amount).Format(ledgerAmountDecimals),
		BalanceAfter: money.Micros(l.BalanceAfter).Format(ledgerAmountDecimals),
		Currency:     currency, Description: l.Description, Reference: ref,
		CreatedAt: core.Timestamp(l.CreatedAt),
	}
}

// TopupView is the public top-up object.
type TopupView struct {
	Object       string  `json:"object"`
	PaymentID    string  `json:"payment_id"`
	Amount       string  `json:"amount"`
	Currency     string  `json:"currency"`
	Method       string  `json:"method"`
	Status       string  `json:"status"`
	Provider     string  `json:"provider"`
	AuthorizeURL string  `json:"authorize_url"`
	ReceiptURL   string  `json:"receipt_url"`
	Refunded     string  `json:"amount_refunded"`
	CreatedAt    string  `json:"created_at"`
	ExpiresAt    string  `json:"expires_at"`
	CompletedAt  *string `json:"completed_at"`
}

func topupView(t *Topup) TopupView {
	return TopupView{
		Object: "topup", PaymentID: t.PaymentID, Amount: money.Micros(t.Amount).Format(2), Currency: t.Currency,
		Method: t.Method, Status: t.Status, Provider: t.Provider, AuthorizeURL: t.AuthorizeURL, ReceiptURL: t.ReceiptURL,
		Refunded: money.Micros(t.RefundedAmount).Format(2), CreatedAt: core.Timestamp(t.CreatedAt), ExpiresAt: core.Timestamp(t.ExpiresAt),
		CompletedAt: core.OptionalTimestamp(t.CompletedAt),
	}
}
