// Package payments is the payment-provider layer behind top-ups: it opens a
// checkout with a provider (the embedded Sandbox, or Stripe) and turns the
// provider's signed callbacks into verified payment events.
//
// The package holds no state and never touches the wallet. The wallet actor
// calls CreateCheckout and ParseCallback outside the actor, because both may
// do network I/O or slow cryptography, and then sends the result into the
// actor. Crediting exactly once is the wallet's job: a provider may repeat a
// callback, and ParseCallback can only refuse forged and stale ones, not
// ones it has seen before (see docs/payments.md).
package payments

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"rtcd/money"
)

// Method is how the payer may pay.
type Method string

// Payment methods of a top-up.
const (
	// MethodCheckout lets the payer choose among the provider's enabled methods.
	MethodCheckout Method = "checkout"
	// MethodCard restricts the payer to cards.
	MethodCard Method = "card"
)

// CurrencyUSD is the only currency top-ups are made in. The spec bounds
// top-ups in USD, and converting to a provider's minor unit (cents) is
// only right for a two-decimal currency; adding one means checking that.
const CurrencyUSD = "USD"

// MicrosPerCent is the number of money.Micros in one cent of a two-decimal
// currency. Providers take amounts in cents, so a top-up must be a whole
// number of cents.
const MicrosPerCent = money.MicrosPerUnit / 100

// MaxPaymentIDBytes bounds a payment id: it travels in URLs, HTML pages and
// provider metadata (Stripe allows 500 characters per metadata value).
const MaxPaymentIDBytes = 64

// MaxCallbackBytes bounds a provider callback body. Stripe's checkout and
// charge events are a few kilobytes; the bound leaves ample room and keeps a
// hostile caller from making us hash megabytes. The provider webhook route
// must accept bodies up to this size, or real callbacks are lost.
const MaxCallbackBytes = 256 * 1024

// CallbackTolerance is how far a callback's signed timestamp may be from
// the verifier's clock, either way (the spec's webhook replay tolerance).
const CallbackTolerance = 5 * time.Minute

// CheckoutRequest asks a provider to open a checkout for one top-up.
type CheckoutRequest struct {
	PaymentID string       // the top-up's id (top_…); providers echo it in callbacks
	AccountID string       // the paying workspace, recorded with the provider for support
	Amount    money.Micros // positive, a whole number of cents
	Currency  string       // CurrencyUSD
	Method    Method       // MethodCheckout or MethodCard
	ExpiresAt time.Time    // after this the checkout can no longer be paid
}

// Checkout is an opened checkout.
type Checkout struct {
	// ProviderRef is the provider's id for the checkout (a Stripe Checkout
	// Session id cs_…, or sbcs_<payment id> for the sandbox). The wallet
	// stores it with the top-up.
	ProviderRef string
	// AuthorizeURL is where the payer's browser is sent to pay.
	AuthorizeURL string
}

// EventType is what happened to a payment.
type EventType string

// Payment event types, one per terminal payment state.
const (
	EventSucceeded EventType = "succeeded"
	EventFailed    EventType = "failed"
	EventCanceled  EventType = "canceled"
	EventExpired   EventType = "expired"
	EventRefunded  EventType = "refunded"
)

// Event is one verified payment event from a provider callback.
type Event struct {
	// ProviderEventID is the provider's id for the event (evt_… or sbevt_…).
	// A repeated callback carries the same id; a new attempt a new one.
	ProviderEventID string
	Type            EventType
	// PaymentID is the top-up the event is about, as sent in CreateCheckout.
	PaymentID string
	// ProviderRef is the provider's object the event is about: the checkout
	// (Stripe session id, sandbox sbcs_…) for checkout events, and the
	// Stripe PaymentIntent id (pi_…) for refunds.
	ProviderRef string
	// Amount is the amount paid (succeeded), the checkout's amount (failed,
	// canceled, expired), or the total refunded so far (refunded; a partial
	// refund reports less than was paid).
	Amount money.Micros
	// ReceiptURL links the receipt when the callback carries it; empty
	// otherwise (see ReceiptFetcher).
	ReceiptURL string
	// At is when the provider says the event happened.
	At time.Time
}

// Provider opens checkouts and verifies callbacks of one payment provider.
type Provider interface {
	// Name is the provider's stable name ("sandbox", "stripe"), stored with
	// each top-up and used in the provider webhook route.
	Name() string
	// CreateCheckout opens a checkout. It may call the provider over the
	// network, so it is called outside the wallet actor. It returns an error
	// wrapping ErrInvalidRequest for a request no provider could accept.
	CreateCheckout(ctx context.Context, r CheckoutRequest) (Checkout, error)
	// ParseCallback verifies a provider callback from its raw body and headers and
	// returns the payment events it carries (zero or more; unrelated event types are ignored).
	// Errors wrap ErrBadSignature on any verification failure (answer 400,
	// credit nothing) and ErrBadPayload for a verified body it cannot read.
	ParseCallback(header http.Header, body []byte, now time.Time) ([]Event, error)
}

// ReceiptFetcher is implemented by providers whose success callbacks do not
// carry the receipt address (Stripe). Call it through ReceiptLookup.
type ReceiptFetcher interface {
	FetchReceiptURL(ctx context.Context, providerRef string) (string, error)
}

// ReceiptFetchTimeout bounds one receipt lookup, the provider client's own
// network retries included. The lookup runs while the provider waits for
// the answer to its callback, so it must stay short; a lookup that fails is
// not retried here but reported, and the provider's redelivery of the
// callback is the retry (docs/payments.md, "Receipts").
const ReceiptFetchTimeout = 10 * time.Second

// ReceiptLookup returns the receipt lookup of p, bounded by
// ReceiptFetchTimeout, or nil when p's callbacks carry their receipt
// addresses (p is not a ReceiptFetcher). The lookup takes the checkout's
// ProviderRef and returns "" without an error when the provider has no
// receipt for it; any failure wraps ErrReceiptUnavailable.
func ReceiptLookup(p Provider) func(ctx context.Context, providerRef string) (string, error) {
	f, ok := p.(ReceiptFetcher)
	if !ok {
		return nil
	}
	return func(ctx context.Context, providerRef string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, ReceiptFetchTimeout)
		defer cancel()
		url, err := f.FetchReceiptURL(ctx, providerRef)
		if err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrReceiptUnavailable, p.Name(), err)
		}
		return url, nil
	}
}

// Errors of the package; callers test them with errors.Is.
var (
	// ErrBadSignature: a callback failed verification (missing, malformed
	// or wrong signature, stale or future timestamp, oversized body).
	ErrBadSignature = errors.New("payments: callback signature verification failed")
	// ErrBadPayload: a callback was verified but its content is unusable.
	ErrBadPayload = errors.New("payments: verified callback has an unusable body")
	// ErrInvalidRequest: a CheckoutRequest is malformed (bad id, amount,
	// currency, method or expiry).
	ErrInvalidRequest = errors.New("payments: invalid checkout request")
	// ErrReceiptUnavailable: the provider could not be asked for a paid
	// checkout's receipt address (unreachable, failing, too slow).
	ErrReceiptUnavailable = errors.New("payments: the receipt address could not be fetched")
)

// validateRequest checks what every provider needs of a CheckoutRequest.
// Both providers apply the same rules so that switching providers never
// changes which top-ups are accepted.
func validateRequest(r CheckoutRequest) error {
	switch {
	case !validPaymentID(r.PaymentID):
		return fmt.Errorf("%w: payment id is empty, too long or has characters outside [A-Za-z0-9_-]", ErrInvalidRequest)
	case r.Amount <= 0:
		return fmt.Errorf("%w: amount must be positive", ErrInvalidRequest)
	case r.Amount%MicrosPerCent != 0:
		return fmt.Errorf("%w: amount must be a whole number of cents", ErrInvalidRequest)
	case r.Currency != CurrencyUSD:
		return fmt.Errorf("%w: currency must be %s", ErrInvalidRequest, CurrencyUSD)
	case r.Method != MethodCheckout && r.Method != MethodCard:
		return fmt.Errorf("%w: method must be checkout or card", ErrInvalidRequest)
	case r.ExpiresAt.IsZero():
		return fmt.Errorf("%w: expiry is missing", ErrInvalidRequest)
	}
	return nil
}

// validPaymentID reports whether id is safe to put in URLs, HTML and
// provider metadata without escaping surprises.
func validPaymentID(id string) bool {
	if id == "" || len(id) > MaxPaymentIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// withinTolerance reports whether a signed timestamp is close enough to now.
// Both directions count: a timestamp from the future is as suspect as an
// old one, and a stepped clock must not open a replay window.
func withinTolerance(signed, now time.Time) bool {
	d := now.Sub(signed)
	return d <= CallbackTolerance && d >= -CallbackTolerance
}
