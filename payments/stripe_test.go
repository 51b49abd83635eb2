package payments

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v86"
	"github.com/stripe/stripe-go/v86/webhook"
	"rtcd/internal/testtools"
	"rtcd/money"
)

const (
	testWebhookSecret = "whsec_test_secret"
	testSessionID     = "cs_test_a1b2c3"
	testIntentID      = "pi_test_a1b2c3"
	testReceiptURL    = "https://pay.stripe.com/receipts/payment/abc"
)

// recordingTransport keeps the form bodies and headers stripe-go sends, so
// the tests can check what was asked of Stripe, not only that it answered.
type recordingTransport struct {
	mu       sync.Mutex
	requests []recordedRequest
}

type recordedRequest struct {
	method, path string
	header       http.Header
	form         url.Values
}

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	form, _ := url.ParseQuery(string(body))
	rt.mu.Lock()
	rt.requests = append(rt.requests, recordedRequest{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), form: form})
	rt.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (rt *recordingTransport) count() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return len(rt.requests)
}

func (rt *recordingTransport) last() recordedRequest {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.requests[len(rt.requests)-1]
}

func newTestStripe(t *testing.T, apiBaseURL string, client *http.Client) *Stripe {
	t.Helper()
	s, err := NewStripe(StripeConfig{
		SecretKey:     "sk_test_123",
		WebhookSecret: testWebhookSecret,
		APIBaseURL:    apiBaseURL,
		SuccessURL:    "http://127.0.0.1:8080/billing/topups/" + PaymentIDPlaceholder + "?done=1",
		CancelURL:     "http://127.0.0.1:8080/billing/topups/" + PaymentIDPlaceholder,
		HTTPClient:    client,
	})
	if err != nil {
		t.Fatalf("NewStripe: %v", err)
	}
	return s
}

// TestStripeAgainstStripeMock drives the real stripe-go client against a
// real stripe-mock process: stripe-mock validates every parameter against
// Stripe's OpenAPI spec, so a misspelt or misplaced one fails here.
func TestStripeAgainstStripeMock(t *testing.T) {
	base := testtools.StartStripeMock(t)
	rt := &recordingTransport{}
	s := newTestStripe(t, base, &http.Client{Transport: rt, Timeout: 30 * time.Second})
	ctx := context.Background()
	expires := time.Now().Add(time.Hour).Truncate(time.Second)

	t.Run("checkout method lets Stripe choose", func(t *testing.T) {
		r := testRequest()
		r.ExpiresAt = expires
		co, err := s.CreateCheckout(ctx, r)
		if err != nil {
			t.Fatalf("CreateCheckout: %v", err)
		}
		if !strings.HasPrefix(co.ProviderRef, "cs_") || co.AuthorizeURL == "" {
			t.Fatalf("checkout = %+v", co)
		}
		req := rt.last()
		if req.method != http.MethodPost || req.path != "/v1/checkout/sessions" {
			t.Fatalf("request %s %s", req.method, req.path)
		}
		want := map[string]string{
			"mode":                 "payment",
			"client_reference_id":  testPaymentID,
			"metadata[payment_id]": testPaymentID,
			"metadata[account_id]": r.AccountID,
			"payment_intent_data[metadata][payment_id]":     testPaymentID,
			"line_items[0][quantity]":                       "1",
			"line_items[0][price_data][currency]":           "usd",
			"line_items[0][price_data][unit_amount]":        "1250",
			"line_items[0][price_data][product_data][name]": stripeProductName,
			"expires_at":  itoa(expires.Unix()),
			"success_url": "http://127.0.0.1:8080/billing/topups/" + testPaymentID + "?done=1",
			"cancel_url":  "http://127.0.0.1:8080/billing/topups/" + testPaymentID,
		}
		for k, v := range want {
			if got := req.form.Get(k); got != v {
				t.Errorf("form %s = %q, want %q", k, got, v)
			}
		}
		for k := range req.form {
			if strings.HasPrefix(k, "payment_method_types") {
				t.Errorf("checkout method sent %s", k)
			}
		}
		if got := req.header.Get("Idempotency-Key"); got != stripeIdempotencyPrefix+testPaymentID {
			t.Errorf("Idempotency-Key = %q", got)
		}
		if got := req.header.Get("Authorization"); got != "Bearer sk_test_123" {
			t.Errorf("Authorization = %q", got)
		}
	})

	t.Run("card method restricts to cards", func(t *testing.T) {
		r := testRequest()
		r.Method = MethodCard
		r.ExpiresAt = expires
		if _, err := s.CreateCheckout(ctx, r); err != nil {
			t.Fatalf("CreateCheckout: %v", err)
		}
		if got := rt.last().form["payment_method_types[0]"]; len(got) != 1 || got[0] != "card" {
			t.Fatalf("payment_method_types = %v", got)
		}
	})

	t.Run("fraction of a cent is refused before any request", func(t *testing.T) {
		r := testRequest()
		r.Amount = 12_345_678
		before := rt.count()
		if _, err := s.CreateCheckout(ctx, r); !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("err = %v, want ErrInvalidRequest", err)
		}
		if rt.count() != before {
			t.Fatal("an invalid request reached Stripe")
		}
	})

	t.Run("receipt URL of a session", func(t *testing.T) {
		receipt, err := s.FetchReceiptURL(ctx, testSessionID)
		if err != nil {
			t.Fatalf("FetchReceiptURL: %v", err)
		}
		if !strings.HasPrefix(receipt, "https://") {
			t.Errorf("receipt URL = %q", receipt)
		}
		req := rt.last()
		if req.method != http.MethodGet || req.path != "/v1/checkout/sessions/"+testSessionID {
			t.Fatalf("request %s %s", req.method, req.path)
		}
		if _, err := s.FetchReceiptURL(ctx, ""); err == nil {
			t.Fatal("an empty session id was accepted")
		}
	})

	t.Run("Stripe errors come back", func(t *testing.T) {
		bad, err := NewStripe(StripeConfig{SecretKey: "not a key", WebhookSecret: testWebhookSecret, APIBaseURL: base,
			SuccessURL: "http://127.0.0.1:8080/ok", CancelURL: "http://127.0.0.1:8080/no"})
		if err != nil {
			t.Fatal(err)
		}
		var stripeErr *stripe.Error
		if _, err := bad.CreateCheckout(ctx, testRequest()); !errors.As(err, &stripeErr) || stripeErr.HTTPStatusCode != http.StatusUnauthorized {
			t.Fatalf("err = %v, want Stripe's 401", err)
		}
	})
}

// stripeEvent builds a webhook body the way Stripe sends it.
func stripeEvent(t *testing.T, typ string, object map[string]any, apiVersion string) []byte {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"id":               "evt_test_" + strings.ReplaceAll(typ, ".", "_"),
		"object":           "event",
		"api_version":      apiVersion,
		"created":          testStart.Unix(),
		"livemode":         false,
		"pending_webhooks": 1,
		"type":             typ,
		"data":             map[string]any{"object": object},
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func testSession(paymentStatus string) map[string]any {
	return map[string]any{
		"id":                  testSessionID,
		"object":              "checkout.session",
		"client_reference_id": testPaymentID,
		"metadata":            map[string]any{"payment_id": testPaymentID, "account_id": "acct_x"},
		"payment_status":      paymentStatus,
		"status":              "complete",
		"amount_total":        1250,
		"currency":            "usd",
		"payment_intent":      testIntentID,
		"mode":                "payment",
	}
}

func testCharge() map[string]any {
	return map[string]any{
		"id":              "ch_test_1",
		"object":          "charge",
		"amount":          1250,
		"amount_refunded": 500,
		"refunded":        false,
		"currency":        "usd",
		"metadata":        map[string]any{"payment_id": testPaymentID},
		"payment_intent":  testIntentID,
		"receipt_url":     testReceiptURL,
	}
}

func signedHeader(body []byte, secret string, at time.Time) http.Header {
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at})
	h := http.Header{}
	h.Set(StripeSignatureHeader, sp.Header)
	return h
}

func TestStripeParseCallbackMapsEvents(t *testing.T) {
	s := newTestStripe(t, "", nil)
	paid := testAmount
	refunded := money.Micros(500 * MicrosPerCent)
	withoutPaymentID := testSession("paid")
	delete(withoutPaymentID, "metadata")
	delete(withoutPaymentID, "client_reference_id")
	referenceOnly := testSession("paid")
	delete(referenceOnly, "metadata")
	foreignCharge := testCharge()
	delete(foreignCharge, "metadata")

	cases := []struct {
		name       string
		typ        string
		object     map[string]any
		apiVersion string
		want       []Event // ProviderEventID and At are filled in below
	}{
		{"completed and paid", "checkout.session.completed", testSession("paid"), stripe.APIVersion,
			[]Event{{Type: EventSucceeded, PaymentID: testPaymentID, ProviderRef: testSessionID, Amount: paid}}},
		{"completed, async payment pending", "checkout.session.completed", testSession("unpaid"), stripe.APIVersion, nil},
		{"async payment succeeded", "checkout.session.async_payment_succeeded", testSession("paid"), stripe.APIVersion,
			[]Event{{Type: EventSucceeded, PaymentID: testPaymentID, ProviderRef: testSessionID, Amount: paid}}},
		{"async payment failed", "checkout.session.async_payment_failed", testSession("unpaid"), stripe.APIVersion,
			[]Event{{Type: EventFailed, PaymentID: testPaymentID, ProviderRef: testSessionID, Amount: paid}}},
		{"expired", "checkout.session.expired", testSession("unpaid"), stripe.APIVersion,
			[]Event{{Type: EventExpired, PaymentID: testPaymentID, ProviderRef: testSessionID, Amount: paid}}},
		{"refunded (partly)", "charge.refunded", testCharge(), stripe.APIVersion,
			[]Event{{Type: EventRefunded, PaymentID: testPaymentID, ProviderRef: testIntentID, Amount: refunded, ReceiptURL: testReceiptURL}}},
		{"older API version still maps", "checkout.session.completed", testSession("paid"), "2024-06-20",
			[]Event{{Type: EventSucceeded, PaymentID: testPaymentID, ProviderRef: testSessionID, Amount: paid}}},
		{"client_reference_id alone", "checkout.session.completed", referenceOnly, stripe.APIVersion,
			[]Event{{Type: EventSucceeded, PaymentID: testPaymentID, ProviderRef: testSessionID, Amount: paid}}},
		{"someone else's session", "checkout.session.completed", withoutPaymentID, stripe.APIVersion, nil},
		{"someone else's charge", "charge.refunded", foreignCharge, stripe.APIVersion, nil},
		{"unrelated type", "payment_intent.created", map[string]any{"id": testIntentID, "object": "payment_intent"}, stripe.APIVersion, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := stripeEvent(t, c.typ, c.object, c.apiVersion)
			events, err := s.ParseCallback(signedHeader(body, testWebhookSecret, testStart), body, testStart.Add(time.Second))
			if err != nil {
				t.Fatalf("ParseCallback: %v", err)
			}
			for i := range c.want {
				c.want[i].ProviderEventID = "evt_test_" + strings.ReplaceAll(c.typ, ".", "_")
				c.want[i].At = testStart
			}
			if len(events) != len(c.want) {
				t.Fatalf("events = %+v, want %+v", events, c.want)
			}
			for i := range events {
				if events[i] != c.want[i] {
					t.Fatalf("event %d = %+v, want %+v", i, events[i], c.want[i])
				}
			}
		})
	}
}

func TestStripeParseCallbackRefusesForgeries(t *testing.T) {
	s := newTestStripe(t, "", nil)
	body := stripeEvent(t, "checkout.session.completed", testSession("paid"), stripe.APIVersion)
	good := signedHeader(body, testWebhookSecret, testStart)
	old := signedHeader(body, testWebhookSecret, testStart.Add(-time.Hour)).Get(StripeSignatureHeader)
	tampered := bytes.Replace(body, []byte(`"amount_total":1250`), []byte(`"amount_total":999900`), 1)

	cases := map[string]struct {
		header http.Header
		body   []byte
		now    time.Time
	}{
		"wrong secret":         {signedHeader(body, "whsec_other", testStart), body, testStart},
		"body changed":         {good, tampered, testStart},
		"no header":            {http.Header{}, body, testStart},
		"garbage header":       {http.Header{StripeSignatureHeader: {"nonsense"}}, body, testStart},
		"stale":                {good, body, testStart.Add(CallbackTolerance + time.Second)},
		"replayed a day later": {good, body, testStart.Add(24 * time.Hour)},
		"from the future":      {good, body, testStart.Add(-CallbackTolerance - time.Second)},
		// stripe-go checks the signature with the last t=; a verifier that
		// judged freshness by the first would accept this old signature.
		"fresh t before an old signature": {http.Header{StripeSignatureHeader: {"t=" + itoa(testStart.Unix()) + "," + old}}, body, testStart},
		"oversized body":                  {good, append(append([]byte(nil), body...), make([]byte, MaxCallbackBytes)...), testStart},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			events, err := s.ParseCallback(c.header, c.body, c.now)
			if !errors.Is(err, ErrBadSignature) || events != nil {
				t.Fatalf("ParseCallback = %v, %v; want ErrBadSignature", events, err)
			}
		})
	}
	// Within the tolerance a repeat verifies again; the wallet drops it.
	if events, err := s.ParseCallback(good, body, testStart.Add(CallbackTolerance)); err != nil || len(events) != 1 {
		t.Fatalf("repeat within tolerance: %v, %v", events, err)
	}
}

func TestStripeParseCallbackSignedButUnusable(t *testing.T) {
	s := newTestStripe(t, "", nil)
	euro := testSession("paid")
	euro["currency"] = "eur"
	huge := testSession("paid")
	huge["amount_total"] = int64(maxCents) + 1
	for name, body := range map[string][]byte{
		"not JSON":        []byte(`{"object":"event"`),
		"not an event":    []byte(`{"object":"v2.core.event","id":"evt_1"}`),
		"other currency":  stripeEvent(t, "checkout.session.completed", euro, stripe.APIVersion),
		"amount overflow": stripeEvent(t, "checkout.session.completed", huge, stripe.APIVersion),
		"no data object":  []byte(`{"id":"evt_1","object":"event","type":"checkout.session.completed","data":{}}`),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := s.ParseCallback(signedHeader(body, testWebhookSecret, testStart), body, testStart)
			if !errors.Is(err, ErrBadPayload) {
				t.Fatalf("err = %v, want ErrBadPayload", err)
			}
		})
	}
}

func TestNewStripeValidation(t *testing.T) {
	good := StripeConfig{SecretKey: "sk_test_1", WebhookSecret: "whsec_1", SuccessURL: "https://example.com/ok", CancelURL: "https://example.com/no"}
	if _, err := NewStripe(good); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for name, mutate := range map[string]func(*StripeConfig){
		"no secret key":     func(c *StripeConfig) { c.SecretKey = "" },
		"no webhook secret": func(c *StripeConfig) { c.WebhookSecret = "" },
		"relative success":  func(c *StripeConfig) { c.SuccessURL = "/ok" },
		"no cancel URL":     func(c *StripeConfig) { c.CancelURL = "" },
		"bad API base URL":  func(c *StripeConfig) { c.APIBaseURL = "localhost:12111" },
	} {
		c := good
		mutate(&c)
		if _, err := NewStripe(c); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
