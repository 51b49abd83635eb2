package actors

import (
	"context"
	"log/slog"
	"time"

	"github.com/goccy/go-json"
	"rtcd/actors/core"
	"rtcd/actors/room"
	"rtcd/actors/wallet"
	"rtcd/apierr"
	"rtcd/ids"
	"rtcd/money"
	"rtcd/persistence"
)

// Named bounds of the billing and usage endpoints.
const (
	// TopupCreatesPerMinute is the per-project rate limit of top-up creation
	// (the spec leaves the value open).
	TopupCreatesPerMinute = 10
	// MaxUsageRangeDays bounds from..to of the usage endpoints.
	MaxUsageRangeDays = 366
	// MaxUsageDate is the last day the usage endpoints take as `to`:
	// period.to is the instant after it, and 10000-01-01 could not be
	// written as an RFC 3339 timestamp (four-digit years).
	MaxUsageDate = "9999-12-30"
)

// Top-up methods (spec: checkout is the default).
const (
	TopupMethodCheckout = "checkout"
	TopupMethodCard     = "card"
)

// Checkout is what a payment provider returns for a new top-up.
type Checkout struct {
	Provider     string
	ProviderRef  string
	AuthorizeURL string
}

// CheckoutFunc asks the payment provider for a checkout of a new top-up. It
// runs outside every actor (it does network I/O).
type CheckoutFunc func(ctx context.Context, paymentID, accountID string, amount money.Micros, currency, method string, expiresAt time.Time) (Checkout, error)

func (e *Engine) accountOf(c *core.Caller) (string, *walletHandle, *apierr.Error) {
	h, err := e.projectOf(c)
	if err != nil {
		return "", nil, err
	}
	accountID := h.gate.Record.Load().AccountID
	w, ok := e.wallet(accountID)
	if !ok {
		return "", nil, apierr.New(apierr.Internal, "the workspace has no wallet")
	}
	return accountID, w, nil
}

func (e *Engine) readWallet(c *core.Caller) (wallet.Reading, *apierr.Error) {
	_, w, err := e.accountOf(c)
	if err != nil {
		return wallet.Reading{}, err
	}
	r := e.ask(w.pid, wallet.Read{})
	if r.Err != nil {
		return wallet.Reading{}, r.Err
	}
	return r.Value.(wallet.Reading), nil
}

// Balance is GET /v1/billing/balance.
func (e *Engine) Balance(c *core.Caller) ([]byte, *apierr.Error) {
	w, err := e.readWallet(c)
	if err != nil {
		return nil, err
	}
	return core.MustJSON(struct {
		Object    string `json:"object"`
		Currency  string `json:"currency"`
		Available string `json:"available"`
		Reserved  string `json:"reserved"`
	}{"balance", e.env.Settings.Billing.Currency, money.Micros(w.Balance).Format(2), money.Micros(0).Format(2)}), nil
}

// Pricing is GET /v1/billing/pricing.
func (e *Engine) Pricing(c *core.Caller) ([]byte, *apierr.Error) {
	w, err := e.readWallet(c)
	if err != nil {
		return nil, err
	}
	b := &e.env.Settings.Billing
	return core.MustJSON(struct {
		Object                 string `json:"object"`
		Currency               string `json:"currency"`
		ParticipantMinutePrice string `json:"participant_minute_price"`
		LowCreditThreshold     string `json:"low_credit_threshold"`
		MinimumCreditToStart   string `json:"minimum_credit_to_start"`
		CreditState            string `json:"credit_state"`
		BillingEnabled         bool   `json:"billing_enabled"`
	}{"pricing", b.Currency, b.ParticipantMinutePrice.Format(6), b.LowCreditThreshold.Format(2),
		b.MinimumCreditToStart.Format(2), w.CreditState, b.Enabled}), nil
}

// Ledger is GET /v1/billing/ledger: the workspace's entries, newest first.
func (e *Engine) Ledger(c *core.Caller, limit int) ([]byte, *apierr.Error) {
	accountID, _, err := e.accountOf(c)
	if err != nil {
		return nil, err
	}
	return e.listPage(persistence.IndexPrefix(persistence.PrefixLedger, accountID), limit, false, nil)
}

// CreateTopup is POST /v1/billing/topups.
func (e *Engine) CreateTopup(ctx context.Context, c *core.Caller, p *TopupParams, checkout CheckoutFunc) (Result, *apierr.Error) {
	if p.Amount == nil {
		return Result{}, apierr.Invalid("amount", "amount is required, a decimal string from 5.00 to 10000.00")
	}
	amount, perr := money.Parse(*p.Amount, wallet.TopupMaxDecimals)
	if perr != nil || amount < wallet.TopupMinMicros || amount > wallet.TopupMaxMicros {
		return Result{}, apierr.Invalid("amount", "amount must be a decimal string from 5.00 to 10000.00 with at most 2 decimals")
	}
	method := TopupMethodCheckout
	if p.Method != nil {
		switch *p.Method {
		case TopupMethodCheckout, TopupMethodCard:
			method = *p.Method
		default:
			return Result{}, apierr.Invalid("method", "method must be %q or %q", TopupMethodCheckout, TopupMethodCard).
				WithDetails("allowed", []string{TopupMethodCheckout, TopupMethodCard})
		}
	}
	accountID, w, err := e.accountOf(c)
	if err != nil {
		return Result{}, err
	}
	if err := e.env.AllowRate("topup_creates:"+c.ProjectID, "topup_creates_per_minute", TopupCreatesPerMinute); err != nil {
		return Result{}, err
	}
	now := e.env.CreatedAt()
	t := wallet.Topup{
		PaymentID: ids.New(ids.Payment), ProjectID: c.ProjectID, Amount: int64(amount), Currency: e.env.Settings.Billing.Currency,
		Method: method, CreatedAt: now, ExpiresAt: now.Add(e.env.Settings.Billing.TopupExpiry),
	}
	co, cerr := checkout(ctx, t.PaymentID, accountID, amount, t.Currency, method, t.ExpiresAt)
	if cerr != nil {
		return Result{}, apierr.New(apierr.ServiceUnavailable, "the payment provider did not accept the checkout; retry shortly")
	}
	t.Provider, t.ProviderRef, t.AuthorizeURL = co.Provider, co.ProviderRef, co.AuthorizeURL
	return result(e.ask(w.pid, wallet.CreateTopup{Topup: t}))
}

// ListTopups is GET /v1/billing/topups.
func (e *Engine) ListTopups(c *core.Caller, limit int) ([]byte, *apierr.Error) {
	accountID, _, err := e.accountOf(c)
	if err != nil {
		return nil, err
	}
	return e.listPage(persistence.IndexPrefix(persistence.PrefixTopupIdx, accountID), limit, false,
		func(id []byte) ([]byte, error) {
			return e.env.Store.Get(persistence.Key(persistence.PrefixTopup, accountID+"/"+string(id)))
		})
}

// errTopupNotFound: the spec has no top-up code, so a missing one is an
// invalid_request with status 404.
func errTopupNotFound(id string) *apierr.Error {
	return apierr.New(apierr.InvalidRequest, "no top-up %q in this workspace", id).WithStatus(404).WithDetails("field", "payment_id")
}

// GetTopup is GET /v1/billing/topups/{payment_id}.
func (e *Engine) GetTopup(c *core.Caller, paymentID string) ([]byte, *apierr.Error) {
	accountID, _, err := e.accountOf(c)
	if err != nil {
		return nil, err
	}
	if !ids.Valid(paymentID, ids.Payment) {
		return nil, errTopupNotFound(paymentID)
	}
	body, gerr := e.env.Store.Get(persistence.Key(persistence.PrefixTopup, accountID+"/"+paymentID))
	if gerr != nil {
		return nil, notFoundOrInternal(gerr, errTopupNotFound(paymentID))
	}
	return body, nil
}

// ReceiptFunc asks the payment provider for the receipt address of a paid
// checkout (its ProviderRef); "" with no error when the provider has none.
// It runs outside every actor (it does network I/O).
type ReceiptFunc func(ctx context.Context, providerRef string) (string, error)

// ApplyPayment applies a verified provider callback to its top-up. When
// the callback is a success without a receipt address, receipt (nil: the
// provider's callbacks carry their receipts) is asked for it, but only
// while the top-up has none: first, so the payment.succeeded event carries
// it. A failed lookup never holds back the credit: the payment is applied
// without the receipt and the answer is 503, so the provider delivers the
// callback again, and that delivery (which credits nothing more) fetches
// the receipt. The provider keeps the redelivery, so it survives our
// crashes; see docs/payments.md, "Receipts".
func (e *Engine) ApplyPayment(ctx context.Context, u wallet.PaymentUpdate, receipt ReceiptFunc) *apierr.Error {
	if !ids.Valid(u.PaymentID, ids.Payment) {
		return apierr.New(apierr.InvalidRequest, "unknown payment %q", u.PaymentID)
	}
	accountID, err := e.env.Store.Get(persistence.Key(persistence.PrefixPayment, u.PaymentID))
	if err != nil {
		return notFoundOrInternal(err, apierr.New(apierr.InvalidRequest, "unknown payment %q", u.PaymentID))
	}
	w, ok := e.wallet(string(accountID))
	if !ok {
		return apierr.New(apierr.InvalidRequest, "unknown payment %q", u.PaymentID)
	}
	var receiptErr error
	if receipt != nil && u.Status == wallet.PaymentSucceeded && u.ReceiptURL == "" {
		r := e.ask(w.pid, wallet.GetTopup{PaymentID: u.PaymentID})
		if r.Err != nil {
			return r.Err
		}
		if t, _ := r.Value.(wallet.Topup); t.WantsReceipt(u.Provider) {
			u.ReceiptURL, receiptErr = receipt(ctx, u.ProviderRef)
		}
	}
	if aerr := e.ask(w.pid, wallet.ApplyPayment{Update: u}).Err; aerr != nil {
		return aerr
	}
	if receiptErr != nil {
		slog.Warn("payment applied without its receipt; answering 503 so the provider delivers the callback again",
			"payment_id", u.PaymentID, "provider", u.Provider, "error", receiptErr)
		return apierr.New(apierr.ServiceUnavailable,
			"the payment was applied, but its receipt could not be fetched from the provider; deliver the callback again")
	}
	return nil
}

// AdjustBalance is the operator's adjustment (rtcd billing adjust).
func (e *Engine) AdjustBalance(accountID string, amount money.Micros, reason, operator string) ([]byte, *apierr.Error) {
	w, ok := e.wallet(accountID)
	if !ok {
		return nil, apierr.New(apierr.InvalidRequest, "no workspace %q", accountID).WithStatus(404)
	}
	if amount == 0 {
		return nil, apierr.Invalid("amount", "amount must not be zero")
	}
	if reason == "" || len(reason) > wallet.MaxAdjustmentReasonBytes {
		return nil, apierr.Invalid("reason", "reason is required, at most %d bytes", wallet.MaxAdjustmentReasonBytes)
	}
	r := e.ask(w.pid, wallet.Adjust{Amount: int64(amount), Reason: reason, Actor: core.Actor{Type: "operator", ID: operator}})
	return r.Body, r.Err
}

// --- usage -----------------------------------------------------------------

// usagePeriod parses from and to (YYYY-MM-DD, UTC days, both included).
func usagePeriod(from, to string) (time.Time, time.Time, *apierr.Error) {
	f, err1 := time.Parse(room.UsageDayLayout, from)
	t, err2 := time.Parse(room.UsageDayLayout, to)
	switch {
	case from == "" || err1 != nil:
		return f, t, apierr.Invalid("from", "from is required, a date YYYY-MM-DD")
	case to == "" || err2 != nil:
		return f, t, apierr.Invalid("to", "to is required, a date YYYY-MM-DD")
	case to > MaxUsageDate:
		return f, t, apierr.Invalid("to", "to must be at most %s", MaxUsageDate)
	case t.Before(f):
		return f, t, apierr.Invalid("to", "to must not be before from")
	case t.Sub(f) >= MaxUsageRangeDays*24*time.Hour:
		return f, t, apierr.Invalid("to", "from..to spans at most %d days", MaxUsageRangeDays)
	}
	return f, t, nil
}

type usageDay struct {
	Object             string  `json:"object"`
	Date               string  `json:"date"`
	ParticipantSeconds int64   `json:"participant_seconds"`
	ParticipantMinutes float64 `json:"participant_minutes"`
	Rooms              int     `json:"rooms"`
	Participants       int     `json:"participants"`
}

type usagePeriodView struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// scanUsage aggregates finalized usage records per day and over the period.
func (e *Engine) scanUsage(projectID string, from, to time.Time) ([]usageDay, usageDay, *apierr.Error) {
	var days []usageDay
	total := usageDay{}
	rooms := map[string]struct{}{}
	participants := map[string]struct{}{}
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		day := usageDay{Object: "usage_day", Date: d.Format(room.UsageDayLayout)}
		dayRooms := map[string]struct{}{}
		dayParticipants := map[string]struct{}{}
		var bad error
		err := e.env.Store.Scan([]byte(persistence.PrefixUsage+projectID+"/"+day.Date+"/"), 0, func(_, v []byte) bool {
			var r room.UsageRecord
			if bad = json.Unmarshal(v, &r); bad != nil {
				return false
			}
			day.ParticipantSeconds += r.Seconds
			dayRooms[r.RoomID] = struct{}{}
			dayParticipants[r.ParticipantID] = struct{}{}
			rooms[r.RoomID] = struct{}{}
			participants[r.ParticipantID] = struct{}{}
			return true
		})
		if err != nil || bad != nil {
			return nil, total, apierr.New(apierr.Internal, "could not read usage")
		}
		day.Rooms, day.Participants = len(dayRooms), len(dayParticipants)
		day.ParticipantMinutes = float64(day.ParticipantSeconds) / 60
		total.ParticipantSeconds += day.ParticipantSeconds
		days = append(days, day)
	}
	total.Rooms, total.Participants = len(rooms), len(participants)
	total.ParticipantMinutes = float64(total.ParticipantSeconds) / 60
	return days, total, nil
}

// usageReport parses the period and aggregates the project's finalized
// usage over it: per day, and in total.
func (e *Engine) usageReport(c *core.Caller, from, to string) (usagePeriodView, []usageDay, usageDay, *apierr.Error) {
	f, t, err := usagePeriod(from, to)
	if err != nil {
		return usagePeriodView{}, nil, usageDay{}, err
	}
	days, total, err := e.scanUsage(c.ProjectID, f, t)
	// period.to is the instant after the last requested day.
	return usagePeriodView{core.Timestamp(f), core.Timestamp(t.AddDate(0, 0, 1))}, days, total, err
}

// UsageSummary is GET /v1/usage/summary.
func (e *Engine) UsageSummary(c *core.Caller, from, to string) ([]byte, *apierr.Error) {
	period, _, total, err := e.usageReport(c, from, to)
	if err != nil {
		return nil, err
	}
	return core.MustJSON(struct {
		Object             string          `json:"object"`
		ProjectID          string          `json:"project_id"`
		Period             usagePeriodView `json:"period"`
		ParticipantSeconds int64           `json:"participant_seconds"`
		ParticipantMinutes float64         `json:"participant_minutes"`
		Rooms              int             `json:"rooms"`
		Participants       int             `json:"participants"`
		FinalizedOnly      bool            `json:"finalized_only"`
	}{"usage_summary", c.ProjectID, period, total.ParticipantSeconds, total.ParticipantMinutes, total.Rooms, total.Participants, true}), nil
}

// UsageDaily is GET /v1/usage/daily: one entry per day of the period, oldest first.
func (e *Engine) UsageDaily(c *core.Caller, from, to string) ([]byte, *apierr.Error) {
	period, days, _, err := e.usageReport(c, from, to)
	if err != nil {
		return nil, err
	}
	return core.MustJSON(struct {
		Object        string          `json:"object"`
		ProjectID     string          `json:"project_id"`
		Period        usagePeriodView `json:"period"`
		FinalizedOnly bool            `json:"finalized_only"`
		Data          []usageDay      `json:"data"`
	}{"usage_daily", c.ProjectID, period, true, days}), nil
}
