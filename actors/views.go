package actors

import (
	"rtcd/actors/core"
	"rtcd/money"
	"rtcd/scopes"
)

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

func ledgerView(l *LedgerEntry, currency string) LedgerEntryView {
	ref := l.Reference
	if ref == nil {
		ref = map[string]any{}
	}
	return LedgerEntryView{
		Object: "ledger_entry", ID: l.ID, Type: l.Type,
		Amount:       money.Micros(l.Amount).Format(core.LedgerAmountDecimals),
		BalanceAfter: money.Micros(l.BalanceAfter).Format(core.LedgerAmountDecimals),
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
