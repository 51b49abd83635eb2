package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v86"
	"github.com/stripe/stripe-go/v86/webhook"
	"rtcd/money"
)

// ProviderStripe is the Stripe provider's Name.
const ProviderStripe = "stripe"

// StripeSignatureHeader carries Stripe's callback signature.
const StripeSignatureHeader = "Stripe-Signature"

// PaymentIDPlaceholder in StripeConfig.SuccessURL or CancelURL is replaced
// by the top-up's payment id, so the page the payer returns to can show it.
// (Stripe's own {CHECKOUT_SESSION_ID} is left for Stripe to fill in.)
const PaymentIDPlaceholder = "{PAYMENT_ID}"

// Metadata keys set on the Checkout Session and its PaymentIntent.
const (
	MetadataPaymentID = "payment_id"
	MetadataAccountID = "account_id"
)

// Bounds of the Stripe provider.
const (
	// stripeRequestTimeout bounds one HTTP request to Stripe when no client
	// is configured (stripe-go's own default is 80 s, too long to hold a
	// top-up request open).
	stripeRequestTimeout = 30 * time.Second
	// stripeMaxNetworkRetries is how often stripe-go retries a request that
	// failed in a way Stripe says is safe to retry; it sends an idempotency
	// key, so a retry never opens a second session.
	stripeMaxNetworkRetries = 2
	// stripeIdempotencyPrefix starts the Idempotency-Key of a session
	// creation; Stripe keeps keys 24 hours, so the wallet retrying
	// CreateCheckout for the same top-up gets the same session back.
	stripeIdempotencyPrefix = "rtcd-checkout-"
	// stripeProductName is what the payer sees on Stripe's checkout page.
	stripeProductName = "Prepaid credit top-up"
	// stripeCurrency is CurrencyUSD as Stripe writes it.
	stripeCurrency = "usd"
	// maxCents is the largest cent amount that converts to money.Micros
	// without overflow.
	maxCents = math.MaxInt64 / MicrosPerCent
)

// StripeConfig configures the Stripe provider.
type StripeConfig struct {
	SecretKey     string // sk_live_… or sk_test_…
	WebhookSecret string // whsec_… of the webhook endpoint that calls the service
	// APIBaseURL is Stripe's API origin; empty means Stripe's own. Tests
	// point it at stripe-mock (http://127.0.0.1:12111).
	APIBaseURL string
	// SuccessURL and CancelURL are where Stripe sends the payer back; each
	// may hold PaymentIDPlaceholder.
	SuccessURL string
	CancelURL  string
	// HTTPClient carries API requests; nil means a client with a
	// stripeRequestTimeout timeout.
	HTTPClient *http.Client
}

// Stripe is the Stripe provider: Checkout Sessions for payment, signed
// webhooks for results. It is safe for concurrent use.
type Stripe struct {
	client        *stripe.Client
	webhookSecret string
	successURL    string
	cancelURL     string
}

var (
	_ Provider       = (*Stripe)(nil)
	_ ReceiptFetcher = (*Stripe)(nil)
)

// NewStripe checks cfg and returns a Stripe provider with its own backend,
// so nothing here touches stripe-go's package-level defaults.
func NewStripe(cfg StripeConfig) (*Stripe, error) {
	switch {
	case cfg.SecretKey == "":
		return nil, errors.New("payments: stripe secret key is empty")
	case cfg.WebhookSecret == "":
		return nil, errors.New("payments: stripe webhook secret is empty")
	}
	if err := checkHTTPURL(cfg.SuccessURL); err != nil {
		return nil, fmt.Errorf("payments: stripe success URL: %w", err)
	}
	if err := checkHTTPURL(cfg.CancelURL); err != nil {
		return nil, fmt.Errorf("payments: stripe cancel URL: %w", err)
	}
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		httpClient = &http.Client{Timeout: stripeRequestTimeout}
	}
	backendCfg := &stripe.BackendConfig{
		HTTPClient:        httpClient,
		MaxNetworkRetries: stripe.Int64(stripeMaxNetworkRetries),
		// Errors come back to the caller, who logs them; stripe-go's own
		// logger would write to stderr behind slog's back.
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	if cfg.APIBaseURL != "" {
		if err := checkHTTPURL(cfg.APIBaseURL); err != nil {
			return nil, fmt.Errorf("payments: stripe API base URL: %w", err)
		}
		// One URL for every backend: only the API backend is used, and
		// a test double must never let a request escape to real Stripe.
		backendCfg.URL = stripe.String(cfg.APIBaseURL)
	}
	return &Stripe{
		client:        stripe.NewClient(cfg.SecretKey, stripe.WithBackends(stripe.NewBackendsWithConfig(backendCfg))),
		webhookSecret: cfg.WebhookSecret,
		successURL:    cfg.SuccessURL,
		cancelURL:     cfg.CancelURL,
	}, nil
}

// Name returns ProviderStripe.
func (s *Stripe) Name() string { return ProviderStripe }

// CreateCheckout creates a Checkout Session in payment mode for the amount
// and returns its id and hosted page URL. Stripe wants ExpiresAt between 30
// minutes and 24 hours after creation and refuses other values.
func (s *Stripe) CreateCheckout(ctx context.Context, r CheckoutRequest) (Checkout, error) {
	if err := validateRequest(r); err != nil {
		return Checkout{}, err
	}
	cents := int64(r.Amount / MicrosPerCent)
	metadata := map[string]string{MetadataPaymentID: r.PaymentID, MetadataAccountID: r.AccountID}
	params := &stripe.CheckoutSessionCreateParams{
		Mode:              stripe.String(string(stripe.CheckoutSessionModePayment)),
		ClientReferenceID: stripe.String(r.PaymentID),
		SuccessURL:        stripe.String(strings.ReplaceAll(s.successURL, PaymentIDPlaceholder, r.PaymentID)),
		CancelURL:         stripe.String(strings.ReplaceAll(s.cancelURL, PaymentIDPlaceholder, r.PaymentID)),
		ExpiresAt:         stripe.Int64(r.ExpiresAt.Unix()),
		LineItems: []*stripe.CheckoutSessionCreateLineItemParams{{
			Quantity: stripe.Int64(1),
			PriceData: &stripe.CheckoutSessionCreateLineItemPriceDataParams{
				Currency:    stripe.String(strings.ToLower(r.Currency)),
				UnitAmount:  stripe.Int64(cents),
				ProductData: &stripe.CheckoutSessionCreateLineItemPriceDataProductDataParams{Name: stripe.String(stripeProductName)},
			},
		}},
		// The session's metadata reaches checkout.session.* events. A
		// Charge copies its PaymentIntent's metadata, not the session's, so
		// the payment id is set there too: that is how charge.refunded finds
		// its top-up.
		Metadata:          metadata,
		PaymentIntentData: &stripe.CheckoutSessionCreatePaymentIntentDataParams{Metadata: metadata},
	}
	if r.Method == MethodCard {
		params.PaymentMethodTypes = []*string{stripe.String("card")}
	}
	// With no payment_method_types Stripe offers the methods enabled in
	// the dashboard, which is what MethodCheckout means.
	params.SetIdempotencyKey(stripeIdempotencyPrefix + r.PaymentID)
	cs, err := s.client.V1CheckoutSessions.Create(ctx, params)
	if err != nil {
		return Checkout{}, fmt.Errorf("payments: stripe: create checkout session: %w", err)
	}
	if cs.ID == "" || cs.URL == "" {
		return Checkout{}, errors.New("payments: stripe: checkout session without id or url")
	}
	return Checkout{ProviderRef: cs.ID, AuthorizeURL: cs.URL}, nil
}

// FetchReceiptURL returns the receipt address of a paid Checkout Session
// (its PaymentIntent's latest Charge's receipt_url), which the
// checkout.session.* events do not carry. Empty when there is none yet.
func (s *Stripe) FetchReceiptURL(ctx context.Context, sessionID string) (string, error) {
	if sessionID == "" {
		return "", errors.New("payments: stripe: empty checkout session id")
	}
	params := &stripe.CheckoutSessionRetrieveParams{}
	params.AddExpand("payment_intent.latest_charge")
	cs, err := s.client.V1CheckoutSessions.Retrieve(ctx, sessionID, params)
	if err != nil {
		return "", fmt.Errorf("payments: stripe: retrieve checkout session: %w", err)
	}
	if cs.PaymentIntent == nil || cs.PaymentIntent.LatestCharge == nil {
		return "", nil
	}
	return cs.PaymentIntent.LatestCharge.ReceiptURL, nil
}

// ParseCallback verifies a Stripe webhook and maps it to payment events:
//
//	checkout.session.completed (payment_status paid)  → succeeded
//	checkout.session.completed (unpaid: async method)  → nothing yet
//	checkout.session.async_payment_succeeded           → succeeded
//	checkout.session.async_payment_failed              → failed
//	checkout.session.expired                           → expired
//	charge.refunded                                    → refunded
//
// Other event types, and events about objects without our payment_id
// metadata (other products on the same Stripe account), give no events.
//
// Freshness is checked against now (CallbackTolerance, both directions),
// not stripe-go's wall clock, so the service's clock rules. The event's API
// version is not required to match stripe-go's: the endpoint's version is
// set in Stripe's dashboard, a mismatch would refuse every callback (and
// lose every payment) until someone noticed, and this code reads only a few
// long-stable fields with its own structs instead of stripe-go's types.
func (s *Stripe) ParseCallback(header http.Header, body []byte, now time.Time) ([]Event, error) {
	if len(body) > MaxCallbackBytes {
		return nil, fmt.Errorf("%w: body larger than %d bytes", ErrBadSignature, MaxCallbackBytes)
	}
	sigHeader := header.Get(StripeSignatureHeader)
	sh, err := parseSignatureHeader(sigHeader)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	if !withinTolerance(sh.timestamp, now) {
		return nil, fmt.Errorf("%w: timestamp %s is more than %s from now", ErrBadSignature, sh.timestamp.Format(time.RFC3339), CallbackTolerance)
	}
	ev, err := webhook.ConstructEventWithOptions(body, sigHeader, s.webhookSecret, webhook.ConstructEventOptions{
		IgnoreTolerance:          true, // checked above against now
		IgnoreAPIVersionMismatch: true,
	})
	if err != nil {
		if isStripeSignatureError(err) {
			return nil, fmt.Errorf("%w: %v", ErrBadSignature, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrBadPayload, err)
	}
	if ev.Data == nil || len(ev.Data.Raw) == 0 {
		return nil, fmt.Errorf("%w: event %s has no data object", ErrBadPayload, ev.ID)
	}
	base := Event{ProviderEventID: ev.ID, At: time.Unix(ev.Created, 0).UTC()}
	switch ev.Type {
	case stripe.EventTypeCheckoutSessionCompleted:
		return sessionEvent(base, ev.Data.Raw, EventSucceeded, true)
	case stripe.EventTypeCheckoutSessionAsyncPaymentSucceeded:
		return sessionEvent(base, ev.Data.Raw, EventSucceeded, false)
	case stripe.EventTypeCheckoutSessionAsyncPaymentFailed:
		return sessionEvent(base, ev.Data.Raw, EventFailed, false)
	case stripe.EventTypeCheckoutSessionExpired:
		return sessionEvent(base, ev.Data.Raw, EventExpired, false)
	case stripe.EventTypeChargeRefunded:
		return refundEvent(base, ev.Data.Raw)
	default:
		return nil, nil
	}
}

// isStripeSignatureError tells signature failures from body failures
// among webhook.ConstructEventWithOptions's errors.
func isStripeSignatureError(err error) bool {
	return errors.Is(err, webhook.ErrNotSigned) || errors.Is(err, webhook.ErrInvalidHeader) ||
		errors.Is(err, webhook.ErrNoValidSignature) || errors.Is(err, webhook.ErrTooOld)
}

// stripeSession is the part of a Checkout Session the mapping reads.
type stripeSession struct {
	ID                string            `json:"id"`
	ClientReferenceID string            `json:"client_reference_id"`
	Metadata          map[string]string `json:"metadata"`
	PaymentStatus     string            `json:"payment_status"`
	AmountTotal       int64             `json:"amount_total"`
	Currency          string            `json:"currency"`
}

// stripeCharge is the part of a Charge the mapping reads.
type stripeCharge struct {
	ID             string            `json:"id"`
	Metadata       map[string]string `json:"metadata"`
	AmountRefunded int64             `json:"amount_refunded"`
	Currency       string            `json:"currency"`
	PaymentIntent  json.RawMessage   `json:"payment_intent"` // id, or the object when expanded
	ReceiptURL     string            `json:"receipt_url"`
}

// sessionEvent maps a checkout.session.* event. When mustBePaid, only a
// session with payment_status "paid" counts: "unpaid" means an async method
// (a bank debit) is still settling and async_payment_* will follow.
func sessionEvent(base Event, raw json.RawMessage, typ EventType, mustBePaid bool) ([]Event, error) {
	var cs stripeSession
	if err := json.Unmarshal(raw, &cs); err != nil {
		return nil, fmt.Errorf("%w: checkout session: %v", ErrBadPayload, err)
	}
	paymentID := cs.Metadata[MetadataPaymentID]
	if paymentID == "" {
		paymentID = cs.ClientReferenceID
	}
	if paymentID == "" {
		return nil, nil // not a session this service created
	}
	if mustBePaid && cs.PaymentStatus != string(stripe.CheckoutSessionPaymentStatusPaid) {
		return nil, nil
	}
	amount, err := stripeAmount(cs.AmountTotal, cs.Currency)
	if err != nil {
		return nil, err
	}
	base.Type = typ
	base.PaymentID = paymentID
	base.ProviderRef = cs.ID
	base.Amount = amount
	return []Event{base}, nil
}

// refundEvent maps charge.refunded, which Stripe sends for full and partial
// refunds alike; Amount is the total refunded so far.
func refundEvent(base Event, raw json.RawMessage) ([]Event, error) {
	var ch stripeCharge
	if err := json.Unmarshal(raw, &ch); err != nil {
		return nil, fmt.Errorf("%w: charge: %v", ErrBadPayload, err)
	}
	paymentID := ch.Metadata[MetadataPaymentID]
	if paymentID == "" {
		return nil, nil // not a charge of this service's checkouts
	}
	amount, err := stripeAmount(ch.AmountRefunded, ch.Currency)
	if err != nil {
		return nil, err
	}
	base.Type = EventRefunded
	base.PaymentID = paymentID
	base.ProviderRef = rawID(ch.PaymentIntent)
	base.Amount = amount
	base.ReceiptURL = ch.ReceiptURL
	return []Event{base}, nil
}

// stripeAmount converts Stripe's cents of a two-decimal currency to
// money.Micros, refusing other currencies rather than misreading them.
func stripeAmount(cents int64, currency string) (money.Micros, error) {
	if !strings.EqualFold(currency, stripeCurrency) {
		return 0, fmt.Errorf("%w: currency %q, want %s", ErrBadPayload, currency, stripeCurrency)
	}
	if cents < 0 || cents > maxCents {
		return 0, fmt.Errorf("%w: amount %d out of range", ErrBadPayload, cents)
	}
	return money.Micros(cents * MicrosPerCent), nil
}

// rawID reads an expandable field: a JSON string id, or an object with id.
func rawID(raw json.RawMessage) string {
	var id string
	if json.Unmarshal(raw, &id) == nil {
		return id
	}
	var obj struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.ID
	}
	return ""
}
