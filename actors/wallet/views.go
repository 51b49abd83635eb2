package wallet

import (
	"rtcd/actors/core"
	"rtcd/money"
)

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

func LedgerView(l *LedgerEntry, currency string) LedgerEntryView {
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

func TopupViewOf(t *Topup) TopupView {
	return TopupView{
		Object: "topup", PaymentID: t.PaymentID, Amount: money.Micros(t.Amount).Format(2), Currency: t.Currency,
		Method: t.Method, Status: t.Status, Provider: t.Provider, AuthorizeURL: t.AuthorizeURL, ReceiptURL: t.ReceiptURL,
		Refunded: money.Micros(t.RefundedAmount).Format(2), CreatedAt: core.Timestamp(t.CreatedAt), ExpiresAt: core.Timestamp(t.ExpiresAt),
		CompletedAt: core.OptionalTimestamp(t.CompletedAt),
	}
}
