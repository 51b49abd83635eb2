package payments

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"rtcd/clock"
	"rtcd/ids"
	"rtcd/money"
)

// ProviderSandbox is the sandbox provider's Name.
const ProviderSandbox = "sandbox"

// Routes of the sandbox's browser pages, under the API origin. The HTTP
// layer serves GET (the page) and POST (the form) of the checkout route and
// GET of the receipt route, each followed by the payment id and ?t=<token>.
const (
	SandboxCheckoutPath = "/v1/billing/sandbox/checkout/"
	SandboxReceiptPath  = "/v1/billing/sandbox/receipts/"
)

// SandboxSignatureHeader carries the sandbox callback's signature,
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">".
const SandboxSignatureHeader = "X-Sandbox-Signature"

// Bounds of the sandbox.
const (
	// SandboxCallbackTimeout bounds the whole callback POST (connect, send,
	// response headers and the bounded body read). The callback goes to the
	// service itself, so a slow one means trouble; the payer can press the
	// button again.
	SandboxCallbackTimeout = 10 * time.Second
	// maxCallbackResponseBytes is how much of the callback response is read
	// (and thrown away) so the connection can be reused.
	maxCallbackResponseBytes = 4 * 1024
	// maxTokenBytes bounds a page token before it is decoded; real ones are
	// about 150 bytes.
	maxTokenBytes = 512
	// sandboxEventPrefix starts the id of every sandbox callback event.
	sandboxEventPrefix = "sbevt_"
	// sandboxRefPrefix starts the sandbox's ProviderRef; the sandbox keeps no
	// state, so its reference is derived from the payment id.
	sandboxRefPrefix = "sbcs_"
	// sandboxUserAgent names the sandbox in the callback request.
	sandboxUserAgent = "rtcd-sandbox-payments/0.1"
)

// Labels that derive one key per use from SandboxConfig.Secret, so that a
// checkout token can never pass as a receipt token or a callback signature.
const (
	checkoutKeyLabel = "rtcd sandbox checkout token v1"
	receiptKeyLabel  = "rtcd sandbox receipt token v1"
	callbackKeyLabel = "rtcd sandbox callback signature v1"
)

// Page outcomes the payer can choose; they are also the callback types.
var sandboxOutcomes = map[string]EventType{
	string(EventSucceeded): EventSucceeded,
	string(EventFailed):    EventFailed,
	string(EventCanceled):  EventCanceled,
}

// SandboxConfig configures the Sandbox.
type SandboxConfig struct {
	// PublicBaseURL is the API origin payers' browsers reach, e.g.
	// http://127.0.0.1:8080. Checkout and receipt links start with it.
	PublicBaseURL string
	// Secret signs page tokens and callbacks. It must be random and
	// stable across restarts, or open checkouts and receipt links break.
	Secret [32]byte
	// CallbackURL is the service's own provider webhook route; Complete
	// POSTs the signed callback there.
	CallbackURL string
	// HTTPClient sends callbacks; nil means a client that uses no
	// environment proxy and follows no redirects.
	HTTPClient *http.Client
	// Clock dates tokens and callbacks; nil means clock.Real.
	Clock clock.Clock
	// ReturnURL is where the result page sends the payer back (the
	// dashboard's top-up page), with PaymentIDPlaceholder standing for the
	// payment id; empty: the page has no way back.
	ReturnURL string
}

// Sandbox is the embedded payment provider. It moves no money: the payer
// picks the outcome on a local checkout page. It keeps no state either:
// everything a page needs travels in an HMAC-signed token in its URL, and
// the outcome reaches the service as a signed callback verified exactly
// like a real provider's. It is safe for concurrent use.
type Sandbox struct {
	baseURL     string
	callbackURL string
	returnURL   string
	client      *http.Client
	clock       clock.Clock
	checkoutKey []byte
	receiptKey  []byte
	callbackKey []byte
}

var _ Provider = (*Sandbox)(nil)

// NewSandbox checks cfg and returns a Sandbox.
func NewSandbox(cfg SandboxConfig) (*Sandbox, error) {
	base := strings.TrimRight(cfg.PublicBaseURL, "/")
	if err := checkHTTPURL(base); err != nil {
		return nil, fmt.Errorf("payments: sandbox public base URL: %w", err)
	}
	if err := checkHTTPURL(cfg.CallbackURL); err != nil {
		return nil, fmt.Errorf("payments: sandbox callback URL: %w", err)
	}
	if cfg.Secret == ([32]byte{}) {
		return nil, errors.New("payments: sandbox secret is all zero")
	}
	if cfg.ReturnURL != "" {
		if err := checkHTTPURL(cfg.ReturnURL); err != nil {
			return nil, fmt.Errorf("payments: sandbox return URL: %w", err)
		}
	}
	client := cfg.HTTPClient
	if client == nil {
		client = defaultCallbackClient()
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	return &Sandbox{
		baseURL:     base,
		callbackURL: cfg.CallbackURL,
		returnURL:   cfg.ReturnURL,
		client:      client,
		clock:       clk,
		checkoutKey: deriveKey(cfg.Secret, checkoutKeyLabel),
		receiptKey:  deriveKey(cfg.Secret, receiptKeyLabel),
		callbackKey: deriveKey(cfg.Secret, callbackKeyLabel),
	}, nil
}

// Name returns ProviderSandbox.
func (s *Sandbox) Name() string { return ProviderSandbox }

// CreateCheckout returns the local checkout page's address. No I/O.
func (s *Sandbox) CreateCheckout(_ context.Context, r CheckoutRequest) (Checkout, error) {
	if err := validateRequest(r); err != nil {
		return Checkout{}, err
	}
	token, err := signToken(s.checkoutKey, r.PaymentID, checkoutClaims{
		Amount:   int64(r.Amount),
		Currency: r.Currency,
		Method:   r.Method,
		Expires:  r.ExpiresAt.Unix(),
	})
	if err != nil {
		return Checkout{}, err
	}
	return Checkout{
		ProviderRef:  sandboxRefPrefix + r.PaymentID,
		AuthorizeURL: s.baseURL + checkoutPath(r.PaymentID, token),
	}, nil
}

// CheckoutPage renders the checkout page for GET of the checkout route:
// the amount with Pay, Fail and Cancel buttons. It answers 400 for a bad
// link and 410 once the checkout has expired.
func (s *Sandbox) CheckoutPage(paymentID, token string) (html []byte, status int) {
	c, status := s.openCheckout(paymentID, token)
	if status != http.StatusOK {
		return checkoutErrorPage(status), status
	}
	return renderPage("checkout", checkoutView{
		PaymentID: paymentID,
		Amount:    money.Micros(c.Amount).Format(2),
		Currency:  c.Currency,
		Method:    string(c.Method),
		ExpiresAt: time.Unix(c.Expires, 0).UTC().Format(time.RFC3339),
		// Relative to the page's own URL (…/checkout/<id>?t=…), so the form
		// posts back to the same address even behind a path prefix.
		Action: paymentID + "?t=" + token,
	}), http.StatusOK
}

// Complete handles the checkout form's POST: it checks the token and the
// outcome, then sends the signed callback to CallbackURL and renders the
// result. 400 for a bad link or outcome, 410 for an expired checkout, 502
// when the service did not accept the callback (the payer may retry; each
// try is a new event, and the wallet settles the payment once).
func (s *Sandbox) Complete(ctx context.Context, paymentID, token, outcome string) (html []byte, status int) {
	c, status := s.openCheckout(paymentID, token)
	if status != http.StatusOK {
		return checkoutErrorPage(status), status
	}
	typ, ok := sandboxOutcomes[outcome]
	if !ok {
		return errorPage("Unknown outcome", "Choose Pay, Fail or Cancel on the checkout page."), http.StatusBadRequest
	}
	now := s.clock.Now()
	ev := sandboxEvent{
		ID:          ids.New(sandboxEventPrefix),
		Type:        typ,
		Created:     now.Unix(),
		PaymentID:   paymentID,
		ProviderRef: sandboxRefPrefix + paymentID,
		Amount:      money.Micros(c.Amount).Format(2),
		Currency:    c.Currency,
	}
	if typ == EventSucceeded {
		receipt, err := signToken(s.receiptKey, paymentID, receiptClaims{Amount: c.Amount, Currency: c.Currency, PaidAt: now.Unix()})
		if err != nil {
			return errorPage("Payment not completed", "The sandbox could not sign the receipt."), http.StatusInternalServerError
		}
		ev.ReceiptURL = s.baseURL + SandboxReceiptPath + paymentID + "?t=" + receipt
	}
	if err := s.sendCallback(ctx, ev, now); err != nil {
		return errorPage("Payment not completed", "The service did not accept the payment result. Go back and try again."), http.StatusBadGateway
	}
	view := resultView{
		Outcome:    string(typ),
		Amount:     ev.Amount,
		Currency:   ev.Currency,
		PaymentID:  paymentID,
		ReceiptURL: ev.ReceiptURL,
	}
	if s.returnURL != "" {
		view.ReturnURL = strings.ReplaceAll(s.returnURL, PaymentIDPlaceholder, paymentID)
	}
	return renderPage("result", view), http.StatusOK
}

// ReceiptPage renders the receipt a succeeded callback links to. Receipts
// do not expire: the link is kept with the top-up. 400 for a bad link.
func (s *Sandbox) ReceiptPage(paymentID, token string) (html []byte, status int) {
	var r receiptClaims
	if !validPaymentID(paymentID) || verifyToken(s.receiptKey, paymentID, token, &r) != nil {
		return errorPage("Invalid receipt link", "This receipt link is not valid."), http.StatusBadRequest
	}
	return renderPage("receipt", receiptView{
		PaymentID: paymentID,
		Amount:    money.Micros(r.Amount).Format(2),
		Currency:  r.Currency,
		PaidAt:    time.Unix(r.PaidAt, 0).UTC().Format(time.RFC3339),
	}), http.StatusOK
}

// ParseCallback verifies a sandbox callback (SandboxSignatureHeader within
// CallbackTolerance of now, constant-time HMAC check) and returns its event.
func (s *Sandbox) ParseCallback(header http.Header, body []byte, now time.Time) ([]Event, error) {
	if err := verifySignature(s.callbackKey, header.Get(SandboxSignatureHeader), body, now); err != nil {
		return nil, err
	}
	var ev sandboxEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPayload, err)
	}
	typ, ok := sandboxOutcomes[string(ev.Type)]
	if !ok {
		return nil, nil // not a payment outcome: nothing to do
	}
	amount, err := money.Parse(ev.Amount, money.MaxDecimals)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: amount %q: %v", ErrBadPayload, ev.Amount, err)
	case !strings.HasPrefix(ev.ID, sandboxEventPrefix):
		return nil, fmt.Errorf("%w: event id %q", ErrBadPayload, ev.ID)
	case !validPaymentID(ev.PaymentID):
		return nil, fmt.Errorf("%w: payment id %q", ErrBadPayload, ev.PaymentID)
	}
	return []Event{{
		ProviderEventID: ev.ID,
		Type:            typ,
		PaymentID:       ev.PaymentID,
		ProviderRef:     ev.ProviderRef,
		Amount:          amount,
		ReceiptURL:      ev.ReceiptURL,
		At:              time.Unix(ev.Created, 0).UTC(),
	}}, nil
}

// openCheckout checks a checkout link: 400 when it is not one of ours,
// 410 when it has expired, else 200 and its claims.
func (s *Sandbox) openCheckout(paymentID, token string) (checkoutClaims, int) {
	var c checkoutClaims
	if !validPaymentID(paymentID) || verifyToken(s.checkoutKey, paymentID, token, &c) != nil {
		return c, http.StatusBadRequest
	}
	if !s.clock.Now().Before(time.Unix(c.Expires, 0)) {
		return c, http.StatusGone
	}
	return c, http.StatusOK
}

// sendCallback POSTs the signed event to the service's webhook route and
// wants a 2xx answer.
func (s *Sandbox) sendCallback(ctx context.Context, ev sandboxEvent, now time.Time) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, SandboxCallbackTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.callbackURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", sandboxUserAgent)
	req.Header.Set(SandboxSignatureHeader, signatureHeaderValue(s.callbackKey, now, body))
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxCallbackResponseBytes))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("payments: sandbox callback answered %d", resp.StatusCode)
	}
	return nil
}

// sandboxEvent is the JSON body of a sandbox callback. The amount is a
// decimal string, like every amount on the wire.
type sandboxEvent struct {
	ID          string    `json:"id"`
	Type        EventType `json:"type"`
	Created     int64     `json:"created"` // unix seconds
	PaymentID   string    `json:"payment_id"`
	ProviderRef string    `json:"provider_ref"`
	Amount      string    `json:"amount"`
	Currency    string    `json:"currency"`
	ReceiptURL  string    `json:"receipt_url,omitempty"`
}

// checkoutClaims travel in a checkout link's token; the payment id is in
// the path and bound to them by the MAC.
type checkoutClaims struct {
	Amount   int64  `json:"amt"` // money.Micros
	Currency string `json:"cur"`
	Method   Method `json:"mth"`
	Expires  int64  `json:"exp"` // unix seconds
}

// receiptClaims travel in a receipt link's token.
type receiptClaims struct {
	Amount   int64  `json:"amt"` // money.Micros
	Currency string `json:"cur"`
	PaidAt   int64  `json:"paid"` // unix seconds
}

var tokenEncoding = base64.RawURLEncoding

// signToken returns base64url(JSON claims) "." base64url(MAC), where the MAC
// covers the payment id and the encoded claims.
func signToken(key []byte, paymentID string, claims any) (string, error) {
	raw, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	payload := tokenEncoding.EncodeToString(raw)
	return payload + "." + tokenEncoding.EncodeToString(tokenMAC(key, paymentID, payload)), nil
}

// verifyToken checks a token's MAC for paymentID (constant time) and
// decodes its claims into out.
func verifyToken(key []byte, paymentID, token string, out any) error {
	if len(token) > maxTokenBytes {
		return errors.New("token too long")
	}
	payload, mac64, ok := strings.Cut(token, ".")
	if !ok {
		return errors.New("malformed token")
	}
	mac, err := tokenEncoding.DecodeString(mac64)
	if err != nil {
		return errors.New("malformed token MAC")
	}
	if !hmac.Equal(mac, tokenMAC(key, paymentID, payload)) {
		return errors.New("token MAC mismatch")
	}
	raw, err := tokenEncoding.DecodeString(payload)
	if err != nil {
		return errors.New("malformed token claims")
	}
	return json.Unmarshal(raw, out)
}

// tokenMAC is HMAC-SHA256 over "<payment id> NUL <encoded claims>"; the
// payment id can hold no NUL, so the split is unambiguous.
func tokenMAC(key []byte, paymentID, payload string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(paymentID))
	mac.Write([]byte{0})
	mac.Write([]byte(payload))
	return mac.Sum(nil)
}

// deriveKey returns HMAC-SHA256(secret, label), one independent key per use.
func deriveKey(secret [32]byte, label string) []byte {
	mac := hmac.New(sha256.New, secret[:])
	mac.Write([]byte(label))
	return mac.Sum(nil)
}

// checkoutPath is the checkout route of a payment with its token.
func checkoutPath(paymentID, token string) string {
	return SandboxCheckoutPath + paymentID + "?t=" + token
}

// checkHTTPURL wants an absolute http or https URL with a host.
func checkHTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an absolute http(s) URL", s)
	}
	return nil
}

// defaultCallbackClient posts callbacks to the service itself: no
// environment proxy (the spec keeps proxies out of outgoing webhooks, and a
// proxy would not reach a loopback address anyway), no redirects (a signed
// body must reach the configured route or fail), and a timeout as a
// backstop to the per-request context.
func defaultCallbackClient() *http.Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil
	return &http.Client{
		Transport: transport,
		Timeout:   SandboxCallbackTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
