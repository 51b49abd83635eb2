package payments

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"rtcd/clock"
	"rtcd/money"
)

var (
	testStart     = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	testSecret    = [32]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32}
	testAmount    = money.Micros(12_500_000) // 12.50
	testPaymentID = "top_abcdefghijklmnopqrstuvwx"
)

const testCheckoutLifetime = time.Hour

// callbackSink is the service's provider webhook route in these tests: it
// records each callback and answers with status.
type callbackSink struct {
	mu     sync.Mutex
	status int
	got    []recordedCallback
	server *httptest.Server
}

type recordedCallback struct {
	header http.Header
	body   []byte
}

func newCallbackSink(t *testing.T) *callbackSink {
	t.Helper()
	sink := &callbackSink{status: http.StatusOK}
	sink.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxCallbackBytes+1))
		if err != nil || r.Method != http.MethodPost {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		sink.mu.Lock()
		defer sink.mu.Unlock()
		sink.got = append(sink.got, recordedCallback{header: r.Header.Clone(), body: body})
		w.WriteHeader(sink.status)
	}))
	t.Cleanup(sink.server.Close)
	return sink
}

func (c *callbackSink) setStatus(status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status = status
}

func (c *callbackSink) callbacks() []recordedCallback {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]recordedCallback(nil), c.got...)
}

func newTestSandbox(t *testing.T, callbackURL string, clk clock.Clock) *Sandbox {
	t.Helper()
	s, err := NewSandbox(SandboxConfig{
		PublicBaseURL: "http://127.0.0.1:8080/",
		Secret:        testSecret,
		CallbackURL:   callbackURL,
		Clock:         clk,
	})
	if err != nil {
		t.Fatalf("NewSandbox: %v", err)
	}
	return s
}

func testRequest() CheckoutRequest {
	return CheckoutRequest{
		PaymentID: testPaymentID,
		AccountID: "acct_abcdefghijklmnopqrstuvwx",
		Amount:    testAmount,
		Currency:  CurrencyUSD,
		Method:    MethodCheckout,
		ExpiresAt: testStart.Add(testCheckoutLifetime),
	}
}

// openTestCheckout creates a checkout and splits its URL into payment id
// and token, as the HTTP layer's router would.
func openTestCheckout(t *testing.T, s *Sandbox, r CheckoutRequest) (Checkout, string, string) {
	t.Helper()
	co, err := s.CreateCheckout(context.Background(), r)
	if err != nil {
		t.Fatalf("CreateCheckout: %v", err)
	}
	paymentID, token := splitPageURL(t, co.AuthorizeURL, SandboxCheckoutPath)
	return co, paymentID, token
}

func splitPageURL(t *testing.T, raw, pathPrefix string) (string, string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("parse %q: %v", raw, err)
	}
	if u.Scheme != "http" || u.Host != "127.0.0.1:8080" || !strings.HasPrefix(u.Path, pathPrefix) {
		t.Fatalf("URL %q is not under http://127.0.0.1:8080%s", raw, pathPrefix)
	}
	return strings.TrimPrefix(u.Path, pathPrefix), u.Query().Get("t")
}

func TestSandboxRoundTrip(t *testing.T) {
	sink := newCallbackSink(t)
	clk := clock.NewFake(testStart)
	s := newTestSandbox(t, sink.server.URL+"/v1/billing/providers/sandbox/callback", clk)

	co, paymentID, token := openTestCheckout(t, s, testRequest())
	if paymentID != testPaymentID || token == "" {
		t.Fatalf("checkout URL %q: payment id %q, token %q", co.AuthorizeURL, paymentID, token)
	}
	if co.ProviderRef != "sbcs_"+testPaymentID {
		t.Fatalf("ProviderRef = %q", co.ProviderRef)
	}

	page, status := s.CheckoutPage(paymentID, token)
	if status != http.StatusOK {
		t.Fatalf("CheckoutPage status %d: %s", status, page)
	}
	html := string(page)
	for _, want := range []string{
		"12.50 USD",
		`name="outcome" value="succeeded"`,
		`name="outcome" value="failed"`,
		`name="outcome" value="canceled"`,
		`method="post" action="` + testPaymentID + `?t=` + token + `"`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("checkout page lacks %q:\n%s", want, html)
		}
	}
	// The form's relative action resolves to the checkout URL itself.
	page0, _ := url.Parse(co.AuthorizeURL)
	action, _ := url.Parse(testPaymentID + "?t=" + token)
	if got := page0.ResolveReference(action).String(); got != co.AuthorizeURL {
		t.Errorf("form posts to %q, want %q", got, co.AuthorizeURL)
	}
	for _, external := range []string{"<script", "src=", "http://", "https://"} {
		if strings.Contains(html, external) {
			t.Errorf("checkout page is not self-contained: has %q", external)
		}
	}

	clk.Advance(time.Minute) // the payer takes a minute to decide
	result, status := s.Complete(context.Background(), paymentID, token, "succeeded")
	if status != http.StatusOK {
		t.Fatalf("Complete status %d: %s", status, result)
	}
	got := sink.callbacks()
	if len(got) != 1 {
		t.Fatalf("callbacks sent = %d, want 1", len(got))
	}
	cb := got[0]
	if ct := cb.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("callback Content-Type = %q", ct)
	}
	if !strings.HasPrefix(cb.header.Get(SandboxSignatureHeader), "t=") {
		t.Errorf("callback signature header = %q", cb.header.Get(SandboxSignatureHeader))
	}

	events, err := s.ParseCallback(cb.header, cb.body, clk.Now().Add(2*time.Second))
	if err != nil {
		t.Fatalf("ParseCallback: %v", err)
	}
	if len(events) != 1 {
		t.Fatalf("events = %d, want 1", len(events))
	}
	ev := events[0]
	if ev.Type != EventSucceeded || ev.PaymentID != testPaymentID || ev.ProviderRef != co.ProviderRef ||
		ev.Amount != testAmount || !ev.At.Equal(clk.Now()) || !strings.HasPrefix(ev.ProviderEventID, "sbevt_") {
		t.Fatalf("event = %+v", ev)
	}
	if !strings.Contains(string(result), `href="`+ev.ReceiptURL+`"`) {
		t.Errorf("result page does not link the receipt:\n%s", result)
	}

	receiptID, receiptToken := splitPageURL(t, ev.ReceiptURL, SandboxReceiptPath)
	receipt, status := s.ReceiptPage(receiptID, receiptToken)
	if status != http.StatusOK || !strings.Contains(string(receipt), "12.50 USD") {
		t.Fatalf("ReceiptPage status %d:\n%s", status, receipt)
	}
	// Receipts are kept with the top-up: they outlive the checkout.
	clk.Advance(365 * 24 * time.Hour)
	if _, status := s.ReceiptPage(receiptID, receiptToken); status != http.StatusOK {
		t.Fatalf("year-old receipt status %d", status)
	}
	// A checkout token is no receipt token, and the other way round.
	if _, status := s.ReceiptPage(paymentID, token); status != http.StatusBadRequest {
		t.Fatalf("checkout token as receipt: status %d", status)
	}
}

func TestSandboxFailAndCancel(t *testing.T) {
	for _, outcome := range []EventType{EventFailed, EventCanceled} {
		t.Run(string(outcome), func(t *testing.T) {
			sink := newCallbackSink(t)
			clk := clock.NewFake(testStart)
			s := newTestSandbox(t, sink.server.URL, clk)
			_, paymentID, token := openTestCheckout(t, s, testRequest())
			if page, status := s.Complete(context.Background(), paymentID, token, string(outcome)); status != http.StatusOK {
				t.Fatalf("Complete status %d: %s", status, page)
			}
			cb := sink.callbacks()[0]
			events, err := s.ParseCallback(cb.header, cb.body, clk.Now())
			if err != nil {
				t.Fatalf("ParseCallback: %v", err)
			}
			if len(events) != 1 || events[0].Type != outcome || events[0].ReceiptURL != "" || events[0].PaymentID != paymentID {
				t.Fatalf("events = %+v", events)
			}
		})
	}
}

// Each press of a button is a new event: the wallet, not the sandbox,
// settles the payment once.
func TestSandboxRepeatedCompleteSendsNewEvents(t *testing.T) {
	sink := newCallbackSink(t)
	s := newTestSandbox(t, sink.server.URL, clock.NewFake(testStart))
	_, paymentID, token := openTestCheckout(t, s, testRequest())
	const presses = 4
	var wg sync.WaitGroup
	for range presses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, status := s.Complete(context.Background(), paymentID, token, "succeeded"); status != http.StatusOK {
				t.Errorf("Complete status %d", status)
			}
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, cb := range sink.callbacks() {
		events, err := s.ParseCallback(cb.header, cb.body, testStart)
		if err != nil || len(events) != 1 {
			t.Fatalf("ParseCallback: %v, %d events", err, len(events))
		}
		seen[events[0].ProviderEventID] = true
	}
	if len(seen) != presses {
		t.Fatalf("distinct event ids = %d, want %d", len(seen), presses)
	}
}

func TestSandboxTamperedToken(t *testing.T) {
	sink := newCallbackSink(t)
	s := newTestSandbox(t, sink.server.URL, clock.NewFake(testStart))
	_, paymentID, token := openTestCheckout(t, s, testRequest())
	payload, mac, _ := strings.Cut(token, ".")

	// A token whose claims say 10000.00 but whose MAC is the original.
	richer, err := signToken([]byte("not the sandbox key"), paymentID, checkoutClaims{Amount: 10_000_000_000, Currency: CurrencyUSD, Method: MethodCard, Expires: testStart.Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	richerPayload, _, _ := strings.Cut(richer, ".")
	flipped := []byte(mac)
	flipped[0] ^= 'A' ^ 'B'

	other, err := NewSandbox(SandboxConfig{PublicBaseURL: "http://127.0.0.1:8080", Secret: [32]byte{9}, CallbackURL: sink.server.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, _, otherSecretToken := openTestCheckout(t, other, testRequest())

	cases := map[string]struct{ paymentID, token string }{
		"claims swapped":          {paymentID, richerPayload + "." + mac},
		"signed by another key":   {paymentID, richer},
		"MAC flipped":             {paymentID, payload + "." + string(flipped)},
		"MAC missing":             {paymentID, payload},
		"empty":                   {paymentID, ""},
		"other payment id":        {"top_zzzzzzzzzzzzzzzzzzzzzzzz", token},
		"payment id with markup":  {"<script>", token},
		"another sandbox's token": {paymentID, otherSecretToken},
		"oversized":               {paymentID, strings.Repeat("A", maxTokenBytes+1)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if page, status := s.CheckoutPage(c.paymentID, c.token); status != http.StatusBadRequest {
				t.Fatalf("CheckoutPage status %d: %s", status, page)
			}
			if page, status := s.Complete(context.Background(), c.paymentID, c.token, "succeeded"); status != http.StatusBadRequest {
				t.Fatalf("Complete status %d: %s", status, page)
			}
		})
	}
	if n := len(sink.callbacks()); n != 0 {
		t.Fatalf("a tampered checkout sent %d callbacks", n)
	}
}

func TestSandboxExpiredToken(t *testing.T) {
	sink := newCallbackSink(t)
	clk := clock.NewFake(testStart)
	s := newTestSandbox(t, sink.server.URL, clk)
	_, paymentID, token := openTestCheckout(t, s, testRequest())

	clk.Set(testStart.Add(testCheckoutLifetime - time.Second))
	if _, status := s.CheckoutPage(paymentID, token); status != http.StatusOK {
		t.Fatalf("a second before expiry: status %d", status)
	}
	clk.Set(testStart.Add(testCheckoutLifetime))
	if page, status := s.CheckoutPage(paymentID, token); status != http.StatusGone || !strings.Contains(string(page), "expired") {
		t.Fatalf("at expiry: status %d: %s", status, page)
	}
	if _, status := s.Complete(context.Background(), paymentID, token, "succeeded"); status != http.StatusGone {
		t.Fatalf("Complete after expiry: status %d", status)
	}
	if n := len(sink.callbacks()); n != 0 {
		t.Fatalf("an expired checkout sent %d callbacks", n)
	}
}

func TestSandboxCompleteRefusals(t *testing.T) {
	sink := newCallbackSink(t)
	s := newTestSandbox(t, sink.server.URL, clock.NewFake(testStart))
	_, paymentID, token := openTestCheckout(t, s, testRequest())

	for _, outcome := range []string{"", "refunded", "expired", "SUCCEEDED"} {
		if _, status := s.Complete(context.Background(), paymentID, token, outcome); status != http.StatusBadRequest {
			t.Errorf("outcome %q: status %d, want 400", outcome, status)
		}
	}
	if n := len(sink.callbacks()); n != 0 {
		t.Fatalf("bad outcomes sent %d callbacks", n)
	}

	// The service refusing the callback is the payer's problem to retry.
	sink.setStatus(http.StatusInternalServerError)
	if _, status := s.Complete(context.Background(), paymentID, token, "succeeded"); status != http.StatusBadGateway {
		t.Fatalf("refused callback: status %d, want 502", status)
	}
	sink.setStatus(http.StatusOK)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, status := s.Complete(ctx, paymentID, token, "succeeded"); status != http.StatusBadGateway {
		t.Fatalf("canceled context: status %d, want 502", status)
	}
}

// signedCallback returns a callback the sandbox sent, for the verification
// tests to replay and tamper with.
func signedCallback(t *testing.T) (*Sandbox, recordedCallback) {
	t.Helper()
	sink := newCallbackSink(t)
	s := newTestSandbox(t, sink.server.URL, clock.NewFake(testStart))
	_, paymentID, token := openTestCheckout(t, s, testRequest())
	if _, status := s.Complete(context.Background(), paymentID, token, "succeeded"); status != http.StatusOK {
		t.Fatalf("Complete status %d", status)
	}
	return s, sink.callbacks()[0]
}

func TestSandboxParseCallbackRefusesForgeries(t *testing.T) {
	s, cb := signedCallback(t)
	sig := cb.header.Get(SandboxSignatureHeader)
	ts, _, _ := strings.Cut(sig, ",")
	forger := newTestSandbox(t, "http://127.0.0.1:1/", clock.NewFake(testStart))
	forger.callbackKey = deriveKey([32]byte{7}, callbackKeyLabel)
	forgedBody := []byte(strings.Replace(string(cb.body), `"12.50"`, `"9999.00"`, 1))
	old := testStart.Add(-time.Hour)

	cases := map[string]struct {
		header string
		body   []byte
	}{
		"no header":             {"", cb.body},
		"garbage header":        {"hello", cb.body},
		"no v1":                 {ts, cb.body},
		"signature not hex":     {ts + ",v1=zz", cb.body},
		"body changed":          {sig, forgedBody},
		"signed by another key": {signatureHeaderValue(forger.callbackKey, testStart, forgedBody), forgedBody},
		"re-timed signature":    {"t=" + itoa(testStart.Unix()+1) + sig[len(ts):], cb.body},
		// An old signature paired with a fresh-looking first timestamp.
		"two timestamps":    {"t=" + itoa(testStart.Unix()) + "," + signatureHeaderValue(s.callbackKey, old, cb.body), cb.body},
		"oversized body":    {sig, append(append([]byte(nil), cb.body...), make([]byte, MaxCallbackBytes)...)},
		"checkout key used": {signatureHeaderValue(s.checkoutKey, testStart, cb.body), cb.body},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h := http.Header{}
			if c.header != "" {
				h.Set(SandboxSignatureHeader, c.header)
			}
			events, err := s.ParseCallback(h, c.body, testStart)
			if !errors.Is(err, ErrBadSignature) || events != nil {
				t.Fatalf("ParseCallback = %v, %v; want ErrBadSignature", events, err)
			}
		})
	}
}

func TestSandboxParseCallbackTolerance(t *testing.T) {
	s, cb := signedCallback(t)
	for _, c := range []struct {
		name string
		now  time.Time
		ok   bool
	}{
		{"on time", testStart, true},
		// A repeat within the tolerance verifies again: dropping repeats is
		// the wallet's job (by payment state and event id).
		{"replayed within tolerance", testStart.Add(CallbackTolerance), true},
		{"stale: replayed outside tolerance", testStart.Add(CallbackTolerance + time.Second), false},
		{"replayed a day later", testStart.Add(24 * time.Hour), false},
		{"from the future", testStart.Add(-CallbackTolerance - time.Second), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			events, err := s.ParseCallback(cb.header, cb.body, c.now)
			if c.ok && (err != nil || len(events) != 1) {
				t.Fatalf("ParseCallback = %v, %v; want one event", events, err)
			}
			if !c.ok && !errors.Is(err, ErrBadSignature) {
				t.Fatalf("ParseCallback err = %v; want ErrBadSignature", err)
			}
		})
	}
}

func TestSandboxParseCallbackSignedButUnusable(t *testing.T) {
	s := newTestSandbox(t, "http://127.0.0.1:1/", clock.NewFake(testStart))
	sign := func(body string) http.Header {
		h := http.Header{}
		h.Set(SandboxSignatureHeader, signatureHeaderValue(s.callbackKey, testStart, []byte(body)))
		return h
	}
	for name, body := range map[string]string{
		"not JSON":     `{`,
		"bad amount":   `{"id":"sbevt_x","type":"succeeded","payment_id":"top_x","amount":"1e3"}`,
		"bad event id": `{"id":"evt_x","type":"succeeded","payment_id":"top_x","amount":"1.00"}`,
		"bad payment":  `{"id":"sbevt_x","type":"failed","payment_id":"top x","amount":"1.00"}`,
	} {
		if _, err := s.ParseCallback(sign(body), []byte(body), testStart); !errors.Is(err, ErrBadPayload) {
			t.Errorf("%s: err = %v, want ErrBadPayload", name, err)
		}
	}
	unrelated := `{"id":"sbevt_x","type":"ping"}`
	if events, err := s.ParseCallback(sign(unrelated), []byte(unrelated), testStart); err != nil || len(events) != 0 {
		t.Errorf("unrelated type: %v, %v; want no events, no error", events, err)
	}
}

func TestCreateCheckoutValidation(t *testing.T) {
	s := newTestSandbox(t, "http://127.0.0.1:1/", clock.NewFake(testStart))
	for name, mutate := range map[string]func(*CheckoutRequest){
		"empty payment id":     func(r *CheckoutRequest) { r.PaymentID = "" },
		"long payment id":      func(r *CheckoutRequest) { r.PaymentID = strings.Repeat("a", MaxPaymentIDBytes+1) },
		"payment id with /":    func(r *CheckoutRequest) { r.PaymentID = "top_a/b" },
		"zero amount":          func(r *CheckoutRequest) { r.Amount = 0 },
		"negative amount":      func(r *CheckoutRequest) { r.Amount = -MicrosPerCent },
		"fraction of a cent":   func(r *CheckoutRequest) { r.Amount = 12_345_678 },
		"currency EUR":         func(r *CheckoutRequest) { r.Currency = "EUR" },
		"currency lowercase":   func(r *CheckoutRequest) { r.Currency = "usd" },
		"method missing":       func(r *CheckoutRequest) { r.Method = "" },
		"method unknown":       func(r *CheckoutRequest) { r.Method = "paypal" },
		"expiry missing":       func(r *CheckoutRequest) { r.ExpiresAt = time.Time{} },
		"payment id with NULs": func(r *CheckoutRequest) { r.PaymentID = "top_\x00" },
	} {
		r := testRequest()
		mutate(&r)
		if _, err := s.CreateCheckout(context.Background(), r); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: err = %v, want ErrInvalidRequest", name, err)
		}
	}
	r := testRequest()
	r.Method = MethodCard
	if _, err := s.CreateCheckout(context.Background(), r); err != nil {
		t.Errorf("card: %v", err)
	}
}

func TestNewSandboxValidation(t *testing.T) {
	good := SandboxConfig{PublicBaseURL: "http://127.0.0.1:8080", Secret: testSecret, CallbackURL: "http://127.0.0.1:8080/cb"}
	if _, err := NewSandbox(good); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for name, mutate := range map[string]func(*SandboxConfig){
		"no base URL":        func(c *SandboxConfig) { c.PublicBaseURL = "" },
		"relative base URL":  func(c *SandboxConfig) { c.PublicBaseURL = "/v1" },
		"ftp callback":       func(c *SandboxConfig) { c.CallbackURL = "ftp://x/cb" },
		"zero secret":        func(c *SandboxConfig) { c.Secret = [32]byte{} },
		"callback URL empty": func(c *SandboxConfig) { c.CallbackURL = "" },
	} {
		c := good
		mutate(&c)
		if _, err := NewSandbox(c); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
