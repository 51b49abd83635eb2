package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v86"
	"github.com/stripe/stripe-go/v86/webhook"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/internal/testtools"
	"rtcd/money"
	"rtcd/payments"
)

// Payment callbacks through the real binary, killed with SIGKILL: a
// callback the server acknowledged (2xx) has credited the wallet durably,
// and a provider repeating it after the restart credits nothing. Both
// providers: the embedded sandbox, and Stripe (rtcd talking to a real
// stripe-mock, callbacks signed as Stripe signs them).

const (
	// payTopups is how many top-ups each provider's crash run pays; the
	// per-project limit is actors.TopupCreatesPerMinute (10), and the
	// Stripe run creates one more.
	payTopups = 6
	// payAmount is each top-up's amount.
	payAmount = "25.00"
	// payStripeSecret and payStripeWebhookSecret are the test Stripe keys
	// rtcd is started with (stripe-mock accepts sk_test_ and letters or
	// digits).
	payStripeSecret        = "sk_test_rtcde2e"
	payStripeWebhookSecret = "whsec_rtcd_e2e"
)

func TestPaymentsRealBinary(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("builds and runs the rtcd binary")
	}
	began := time.Now()
	bin := binBuild(t)
	t.Logf("built rtcd in %v", time.Since(began).Round(time.Millisecond))
	t.Run("sandbox callbacks across kill -9", func(t *testing.T) { payTestSandboxKill(t, bin) })
	t.Run("stripe callbacks across kill -9", func(t *testing.T) { payTestStripeKill(t, bin) })
}

// payCallback is one provider callback as the provider sends it.
type payCallback struct {
	paymentID string
	header    http.Header
	body      []byte
}

// payDeliver posts cb to the provider webhook route of p, byte for byte.
func payDeliver(c *http.Client, p *binProc, provider string, cb payCallback) (binResult, error) {
	req, err := http.NewRequest("POST", p.Base+"/v1/billing/providers/"+provider+"/webhook", bytes.NewReader(cb.body))
	if err != nil {
		return binResult{}, err
	}
	for name, values := range cb.header {
		for _, v := range values {
			req.Header.Add(name, v)
		}
	}
	res, err := c.Do(req)
	if err != nil {
		return binResult{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return binResult{}, err
	}
	r := binResult{status: res.StatusCode, raw: raw}
	_ = json.Unmarshal(raw, &r.json)
	return r, nil
}

// payCreateTopups creates n top-ups of payAmount and returns them.
func payCreateTopups(t *testing.T, p *binProc, key string, n int) []binResult {
	t.Helper()
	c := binClient(true)
	out := make([]binResult, 0, n)
	for i := 0; i < n; i++ {
		r, err := binCall(c, "POST", p.Base+"/v1/billing/topups", key, map[string]any{"amount": payAmount})
		if err != nil || r.status != 201 || r.str("status") != "pending" {
			t.Fatalf("create top-up %d: %v %d %s\n%s", i, err, r.status, r.raw, p.logTail())
		}
		out = append(out, r)
	}
	return out
}

// payDeliverAllThenKill delivers every callback at once and kills p with
// SIGKILL as soon as the first of them is acknowledged, while the others
// are still in flight. It returns the payment ids whose callbacks were
// acknowledged (2xx) before the kill. Any answer other than ackStatus or a
// transport error (the process is gone) fails the test.
func payDeliverAllThenKill(t *testing.T, p *binProc, provider string, cbs []payCallback, ackStatus int) map[string]bool {
	t.Helper()
	c := binClient(false)
	var mu sync.Mutex
	acked := make(map[string]bool)
	firstAck := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for _, cb := range cbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := payDeliver(c, p, provider, cb)
			if err != nil {
				return // killed before it answered
			}
			if r.status != ackStatus {
				t.Errorf("callback for %s: %d %s, want %d", cb.paymentID, r.status, r.raw, ackStatus)
				return
			}
			mu.Lock()
			acked[cb.paymentID] = true
			mu.Unlock()
			once.Do(func() { close(firstAck) })
		}()
	}
	select {
	case <-firstAck:
	case <-time.After(30 * time.Second):
		t.Fatalf("no callback was acknowledged within 30s\n%s", p.logTail())
	}
	p.kill()
	wg.Wait()
	if st := p.cmd.ProcessState; st == nil || st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("rtcd was not killed by SIGKILL but exited with %v\n%s", st, p.logTail())
	}
	mu.Lock()
	defer mu.Unlock()
	return acked
}

// payWallet is what the API shows of the wallet after a restart.
type payWallet struct {
	balance money.Micros
	credits map[string]int // payment id -> its topup ledger entries
	topups  map[string]binResult
}

func payReadWallet(t *testing.T, p *binProc, key string, paymentIDs []string) payWallet {
	t.Helper()
	c := binClient(true)
	r, err := binCall(c, "GET", p.Base+"/v1/billing/balance", key, nil)
	if err != nil || r.status != 200 {
		t.Fatalf("balance: %v %d %s", err, r.status, r.raw)
	}
	w := payWallet{balance: blMicros(t, r.str("available")), credits: make(map[string]int), topups: make(map[string]binResult)}
	r, err = binCall(c, "GET", p.Base+"/v1/billing/ledger?limit=100", key, nil)
	if err != nil || r.status != 200 {
		t.Fatalf("ledger: %v %d %s", err, r.status, r.raw)
	}
	data, _ := r.json["data"].([]any)
	entries := make([]map[string]any, 0, len(data))
	for i := len(data) - 1; i >= 0; i-- { // oldest first
		en, _ := data[i].(map[string]any)
		entries = append(entries, en)
		if en["type"] == "topup" {
			ref, _ := en["reference"].(map[string]any)
			id, _ := ref["id"].(string)
			w.credits[id]++
			if blMicros(t, en["amount"]) != blMicros(t, payAmount) {
				t.Errorf("top-up entry %v credits %v, want %s", en["id"], en["amount"], payAmount)
			}
		}
	}
	if sum := blCheckChain(t, entries); sum != w.balance {
		t.Fatalf("the ledger sums to %v, the balance is %v", sum, w.balance)
	}
	for _, id := range paymentIDs {
		r, err := binCall(c, "GET", p.Base+"/v1/billing/topups/"+id, key, nil)
		if err != nil || r.status != 200 {
			t.Fatalf("top-up %s: %v %d %s", id, err, r.status, r.raw)
		}
		w.topups[id] = r
	}
	return w
}

// payRequireCredited checks that each of paid is succeeded and credited
// exactly once, each of unpaid is pending and not credited, and that the
// balance is the opening credit plus the paid top-ups.
func payRequireCredited(t *testing.T, w payWallet, paid, unpaid []string, receipt func(string) bool) {
	t.Helper()
	for _, id := range paid {
		top := w.topups[id]
		if top.str("status") != "succeeded" || w.credits[id] != 1 {
			t.Errorf("top-up %s: status %s, %d credits; want succeeded, credited once: %s", id, top.str("status"), w.credits[id], top.raw)
		}
		if !receipt(top.str("receipt_url")) {
			t.Errorf("top-up %s: receipt_url %q", id, top.str("receipt_url"))
		}
	}
	for _, id := range unpaid {
		if top := w.topups[id]; top.str("status") != "pending" || w.credits[id] != 0 {
			t.Errorf("top-up %s: status %s, %d credits; its callback was never applied: %s", id, top.str("status"), w.credits[id], top.raw)
		}
	}
	opening := blMicros(t, "10.00") // --bootstrap-credit's default
	if want := opening + money.Micros(len(paid))*blMicros(t, payAmount); w.balance != want {
		t.Errorf("balance %v, want %v (opening credit and %d top-ups)", w.balance, want, len(paid))
	}
	if t.Failed() {
		t.FailNow()
	}
}

// payPartition splits ids into those in set and the others.
func payPartition(paymentIDs []string, set map[string]bool) (in, out []string) {
	for _, id := range paymentIDs {
		if set[id] {
			in = append(in, id)
		} else {
			out = append(out, id)
		}
	}
	return in, out
}

// --- sandbox ---------------------------------------------------------------

// paySandboxSigner is the sandbox provider of the server on dataDir (its
// secret derived from the master key, as the server derives it) with
// callbacks captured instead of delivered, so the test delivers them.
func paySandboxSigner(t *testing.T, dataDir, base string) (*payments.Sandbox, *blCapture) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dataDir, "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	master, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := auth.DeriveKeys(master)
	if err != nil {
		t.Fatal(err)
	}
	capture := &blCapture{}
	sb, err := payments.NewSandbox(payments.SandboxConfig{
		PublicBaseURL: base, Secret: keys.PaymentsSandbox(), Clock: clock.Real{},
		CallbackURL: base + "/v1/billing/providers/sandbox/webhook",
		HTTPClient:  &http.Client{Transport: capture},
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb, capture
}

// paySandboxPay is the callback the sandbox sends when the payer of the
// top-up at authorizeURL presses Pay.
func paySandboxPay(t *testing.T, sb *payments.Sandbox, capture *blCapture, paymentID, authorizeURL string) payCallback {
	t.Helper()
	u, err := url.Parse(authorizeURL)
	if err != nil {
		t.Fatal(err)
	}
	if path.Base(u.Path) != paymentID {
		t.Fatalf("authorize_url %s is not the checkout of %s", authorizeURL, paymentID)
	}
	if _, status := sb.Complete(context.Background(), paymentID, u.Query().Get("t"), "succeeded"); status != 200 {
		t.Fatalf("sandbox Complete answered %d", status)
	}
	capture.mu.Lock()
	defer capture.mu.Unlock()
	cb := capture.got[len(capture.got)-1]
	return payCallback{paymentID: paymentID, header: cb.header, body: cb.body}
}

func payTestSandboxKill(t *testing.T, bin string) {
	dir := t.TempDir()
	boot := binInit(t, bin, dir)
	p := binServe(t, bin, dir, boot.APIKey)
	sb, capture := paySandboxSigner(t, dir, p.Base)

	var paymentIDs []string
	var cbs []payCallback
	var authorize []string
	for _, top := range payCreateTopups(t, p, boot.APIKey, payTopups) {
		id := top.str("payment_id")
		paymentIDs = append(paymentIDs, id)
		authorize = append(authorize, top.str("authorize_url"))
		cbs = append(cbs, paySandboxPay(t, sb, capture, id, top.str("authorize_url")))
	}
	acked := payDeliverAllThenKill(t, p, payments.ProviderSandbox, cbs, 200)
	t.Logf("%d of %d sandbox callbacks acknowledged before kill -9", len(acked), len(cbs))

	p = binServe(t, bin, dir, boot.APIKey)
	// Every acknowledged callback credited; one the kill cut off may or may
	// not have been applied, so only the acknowledged ones are checked here
	// (the rest after the replay, below).
	w := payReadWallet(t, p, boot.APIKey, paymentIDs)
	applied := make(map[string]bool)
	for id := range acked {
		applied[id] = true
	}
	for _, id := range paymentIDs {
		if !acked[id] && w.topups[id].str("status") == "succeeded" {
			applied[id] = true
		}
	}
	paid, unpaid := payPartition(paymentIDs, applied)
	// The receipt link is on the listener of the process that took the
	// callback; each start here listens on a new port.
	receipt := func(u string) bool {
		return strings.HasPrefix(u, "http://127.0.0.1:") && strings.Contains(u, payments.SandboxReceiptPath)
	}
	payRequireCredited(t, w, paid, unpaid, receipt)

	// The provider repeats every callback (a lost answer, a retry): each
	// top-up ends credited exactly once, acknowledged or not before.
	c := binClient(true)
	for _, cb := range cbs {
		r, err := payDeliver(c, p, payments.ProviderSandbox, cb)
		if err != nil || r.status != 200 || !bytes.Equal(r.raw, []byte(`{"received":true}`)) {
			t.Fatalf("replayed callback for %s: %v %d %s", cb.paymentID, err, r.status, r.raw)
		}
	}
	// And the payer presses Pay again: a new event id, still nothing more.
	// (The page is on the new process's listener.)
	for i, id := range paymentIDs {
		u, err := url.Parse(authorize[i])
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.PostForm(p.Base+u.RequestURI(), url.Values{"outcome": {"succeeded"}})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("Pay pressed again for %s: %d", id, res.StatusCode)
		}
	}
	payRequireCredited(t, payReadWallet(t, p, boot.APIKey, paymentIDs), paymentIDs, nil, receipt)
}

// --- Stripe ----------------------------------------------------------------

// payStripeAPI stands between rtcd and stripe-mock: it forwards every
// request, keeps the ids of the Checkout Sessions created, counts session
// retrievals (the receipt lookups), and while down answers them as Stripe
// does when it cannot serve a request.
type payStripeAPI struct {
	URL      string
	down     atomic.Bool
	lookups  atomic.Int64
	mu       sync.Mutex
	sessions map[string]string // payment id -> session id
}

func payStartStripeAPI(t *testing.T) *payStripeAPI {
	t.Helper()
	target, err := url.Parse(testtools.StartStripeMock(t))
	if err != nil {
		t.Fatal(err)
	}
	api := &payStripeAPI{sessions: make(map[string]string)}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(res *http.Response) error {
		if res.Request.Method != "POST" || res.Request.URL.Path != "/v1/checkout/sessions" || res.StatusCode != 200 {
			return nil
		}
		body, err := io.ReadAll(res.Body)
		if err != nil {
			return err
		}
		res.Body = io.NopCloser(bytes.NewReader(body))
		var cs struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(body, &cs); err != nil {
			return err
		}
		paymentID := res.Request.PostForm.Get("client_reference_id")
		api.mu.Lock()
		api.sessions[paymentID] = cs.ID
		api.mu.Unlock()
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Plain bodies, so ModifyResponse can read the session id.
		r.Header.Del("Accept-Encoding")
		if r.Method == "POST" {
			// Read the form here so ModifyResponse can see the payment id;
			// the proxy sends the body on as it came.
			body, err := io.ReadAll(r.Body)
			if err != nil {
				w.WriteHeader(400)
				return
			}
			r.PostForm, _ = url.ParseQuery(string(body))
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		if r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/v1/checkout/sessions/") {
			api.lookups.Add(1)
			if api.down.Load() {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Stripe-Should-Retry", "false")
				w.WriteHeader(503)
				_, _ = w.Write([]byte(`{"error":{"type":"api_error","message":"Stripe is unavailable (test)"}}`))
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	api.URL = srv.URL
	return api
}

func (api *payStripeAPI) session(t *testing.T, paymentID string) string {
	t.Helper()
	api.mu.Lock()
	defer api.mu.Unlock()
	id := api.sessions[paymentID]
	if !strings.HasPrefix(id, "cs_") {
		t.Fatalf("no Checkout Session was created for %s", paymentID)
	}
	return id
}

// payStripeCompleted is the checkout.session.completed event Stripe sends
// when the payer of paymentID's session has paid, signed at `at`.
func payStripeCompleted(t *testing.T, eventID, sessionID, paymentID string, at time.Time) payCallback {
	t.Helper()
	cents := int64(blMicros(t, payAmount) / payments.MicrosPerCent)
	body, err := json.Marshal(map[string]any{
		"id": eventID, "object": "event", "api_version": stripe.APIVersion, "created": at.Unix(),
		"livemode": false, "pending_webhooks": 1, "type": "checkout.session.completed",
		"data": map[string]any{"object": map[string]any{
			"id": sessionID, "object": "checkout.session", "mode": "payment", "status": "complete",
			"client_reference_id": paymentID, "payment_status": "paid",
			"metadata":     map[string]any{payments.MetadataPaymentID: paymentID},
			"amount_total": cents, "currency": "usd", "payment_intent": "pi_" + strings.TrimPrefix(sessionID, "cs_"),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return payStripeSign(paymentID, body, at)
}

// payStripeSign signs body as Stripe signs a delivery attempt at `at`.
func payStripeSign(paymentID string, body []byte, at time.Time) payCallback {
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: payStripeWebhookSecret, Timestamp: at})
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(payments.StripeSignatureHeader, sp.Header)
	return payCallback{paymentID: paymentID, header: h, body: body}
}

func payTestStripeKill(t *testing.T, bin string) {
	api := payStartStripeAPI(t)
	dir := t.TempDir()
	boot := binInit(t, bin, dir)
	flags := []string{"--payment-provider=stripe", "--stripe-secret-key=" + payStripeSecret,
		"--stripe-webhook-secret=" + payStripeWebhookSecret, "--stripe-api-base=" + api.URL}
	p := binServe(t, bin, dir, boot.APIKey, flags...)

	var paymentIDs []string
	var cbs []payCallback
	for _, top := range payCreateTopups(t, p, boot.APIKey, payTopups) {
		id := top.str("payment_id")
		if top.str("provider") != payments.ProviderStripe || !strings.HasPrefix(top.str("authorize_url"), "https://") {
			t.Fatalf("top-up through Stripe: %s", top.raw)
		}
		paymentIDs = append(paymentIDs, id)
		cbs = append(cbs, payStripeCompleted(t, "evt_"+id, api.session(t, id), id, time.Now()))
	}
	acked := payDeliverAllThenKill(t, p, payments.ProviderStripe, cbs, 200)
	t.Logf("%d of %d Stripe callbacks acknowledged before kill -9", len(acked), len(cbs))

	p = binServe(t, bin, dir, boot.APIKey, flags...)
	w := payReadWallet(t, p, boot.APIKey, paymentIDs)
	applied := make(map[string]bool)
	for id := range acked {
		applied[id] = true
	}
	for _, id := range paymentIDs {
		if !acked[id] && w.topups[id].str("status") == "succeeded" {
			applied[id] = true
		}
	}
	// Stripe's callbacks carry no receipt; an acknowledged one has the
	// charge's receipt_url, fetched from the Stripe API.
	receipt := func(u string) bool { return strings.HasPrefix(u, "https://") && strings.Contains(u, "/receipts/") }
	paid, unpaid := payPartition(paymentIDs, applied)
	payRequireCredited(t, w, paid, unpaid, receipt)

	// Stripe retries every delivery it did not see acknowledged, each
	// attempt signed anew; and an attacker replays a captured one. Either
	// way each top-up is credited exactly once.
	c := binClient(true)
	for _, cb := range cbs {
		retry := payStripeSign(cb.paymentID, cb.body, time.Now())
		for _, attempt := range []payCallback{retry, cb} {
			r, err := payDeliver(c, p, payments.ProviderStripe, attempt)
			if err != nil || r.status != 200 || !bytes.Equal(r.raw, []byte(`{"received":true}`)) {
				t.Fatalf("repeated callback for %s: %v %d %s", cb.paymentID, err, r.status, r.raw)
			}
		}
	}
	payRequireCredited(t, payReadWallet(t, p, boot.APIKey, paymentIDs), paymentIDs, nil, receipt)

	// A replay signed outside the 5-minute tolerance is refused outright.
	stale := payStripeSign(cbs[0].paymentID, cbs[0].body, time.Now().Add(-payments.CallbackTolerance-time.Minute))
	if r, err := payDeliver(c, p, payments.ProviderStripe, stale); err != nil || r.status != 400 || r.code() != "invalid_request" {
		t.Fatalf("stale replay: %v %d %s, want 400 invalid_request", err, r.status, r.raw)
	}

	payTestStripeReceiptOutage(t, bin, api, dir, boot, p, flags, paymentIDs)
}

// payTestStripeReceiptOutage: the Stripe API is down when a payment's
// callback arrives. The payment is credited at once (the money was taken),
// and the callback is answered 503, so Stripe delivers it again; the
// receipt is fetched on that later delivery, across a kill -9 in between,
// and the top-up is still credited exactly once.
func payTestStripeReceiptOutage(t *testing.T, bin string, api *payStripeAPI, dir string, boot bootstrap, p *binProc, flags, before []string) {
	top := payCreateTopups(t, p, boot.APIKey, 1)[0]
	id := top.str("payment_id")
	all := append(append([]string{}, before...), id)
	eventID := fmt.Sprintf("evt_outage_%d", time.Now().UnixNano())
	first := payStripeCompleted(t, eventID, api.session(t, id), id, time.Now())

	api.down.Store(true)
	c := binClient(true)
	r, err := payDeliver(c, p, payments.ProviderStripe, first)
	if err != nil {
		t.Fatal(err)
	}
	if r.status != 503 || r.code() != "service_unavailable" {
		t.Fatalf("callback while the receipt cannot be fetched: %d %s; want 503 service_unavailable so Stripe delivers it again", r.status, r.raw)
	}
	w := payReadWallet(t, p, boot.APIKey, all)
	payRequireCredited(t, w, all, nil, func(u string) bool { return true })
	if got := w.topups[id].str("receipt_url"); got != "" {
		t.Fatalf("receipt_url %q while Stripe was down", got)
	}

	// The process dies before Stripe's next attempt; Stripe keeps the
	// delivery, rtcd keeps nothing about it but the credited top-up.
	p.kill()
	api.down.Store(false)
	p = binServe(t, bin, dir, boot.APIKey, flags...)
	retry := payStripeSign(id, first.body, time.Now())
	if r, err := payDeliver(c, p, payments.ProviderStripe, retry); err != nil || r.status != 200 {
		t.Fatalf("Stripe's next attempt: %v %d %s", err, r.status, r.raw)
	}
	receipt := func(u string) bool { return strings.HasPrefix(u, "https://") && strings.Contains(u, "/receipts/") }
	payRequireCredited(t, payReadWallet(t, p, boot.APIKey, all), all, nil, receipt)

	// With the receipt stored, a further repeat asks the Stripe API nothing.
	lookups := api.lookups.Load()
	again := payStripeSign(id, first.body, time.Now())
	if r, err := payDeliver(c, p, payments.ProviderStripe, again); err != nil || r.status != 200 {
		t.Fatalf("repeat after the receipt: %v %d %s", err, r.status, r.raw)
	}
	if n := api.lookups.Load() - lookups; n != 0 {
		t.Fatalf("a repeated callback for a top-up that has its receipt made %d Stripe API calls", n)
	}
	payRequireCredited(t, payReadWallet(t, p, boot.APIKey, all), all, nil, receipt)
}
