package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"rtcd/actors"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/money"
	"rtcd/payments"
)

// Billing over the real server: top-ups through the embedded sandbox
// provider, provider callbacks (repeated, forged, late), the ledger, the
// operator adjustment, and the usage endpoints.

// --- helpers shared by the billing, credit and reconcile tests ---------------

// blMicros parses a wire amount exactly.
func blMicros(t *testing.T, s any) money.Micros {
	t.Helper()
	str, ok := s.(string)
	if !ok {
		t.Fatalf("amount %v (%T) is not a decimal string", s, s)
	}
	m, err := money.Parse(str, money.MaxDecimals)
	if err != nil {
		t.Fatalf("amount %q: %v", str, err)
	}
	return m
}

// blBalance is GET /v1/billing/balance's available amount, as sent.
func (e *env) blBalance() string {
	e.t.Helper()
	return e.do("GET", "/v1/billing/balance", e.Boot.APIKey, nil).must(e.t, 200).Str("available")
}

// blCreditState is GET /v1/billing/pricing's credit_state.
func (e *env) blCreditState() string {
	e.t.Helper()
	return e.do("GET", "/v1/billing/pricing", e.Boot.APIKey, nil).must(e.t, 200).Str("credit_state")
}

// blLedger returns every ledger entry, oldest first, after checking that
// each entry's balance_after is exactly the sum of all entries up to it.
func (e *env) blLedger() []map[string]any {
	e.t.Helper()
	r := e.do("GET", "/v1/billing/ledger?limit=100", e.Boot.APIKey, nil).must(e.t, 200)
	if page, _ := r.JSON["page"].(map[string]any); page["has_more"] != false {
		e.t.Fatalf("more than 100 ledger entries; this test reads them in one page: %s", r.Raw)
	}
	newest := r.Data()
	entries := make([]map[string]any, 0, len(newest))
	for i := len(newest) - 1; i >= 0; i-- {
		entries = append(entries, newest[i])
	}
	blCheckChain(e.t, entries)
	return entries
}

// blCheckChain checks entries (oldest first): every balance_after is the
// exact sum of the amounts up to and including its entry. It returns the sum.
func blCheckChain(t *testing.T, entries []map[string]any) money.Micros {
	t.Helper()
	var sum money.Micros
	for i, en := range entries {
		if en["object"] != "ledger_entry" || en["id"] == "" || en["currency"] != "USD" {
			t.Fatalf("ledger entry %d is malformed: %v", i, en)
		}
		sum += blMicros(t, en["amount"])
		if after := blMicros(t, en["balance_after"]); after != sum {
			t.Fatalf("ledger entry %d (%v %v): balance_after %v, but the entries up to it sum to %v", i, en["type"], en["amount"], after, sum)
		}
	}
	return sum
}

// blCheckLedgerSum asserts that the ledger's entries sum exactly to the
// balance, and returns the ledger (oldest first). Call it only when no
// charge can land in between (no session running, or the clock still).
func (e *env) blCheckLedgerSum() []map[string]any {
	e.t.Helper()
	entries := e.blLedger()
	var sum money.Micros
	for _, en := range entries {
		sum += blMicros(e.t, en["amount"])
	}
	if bal := blMicros(e.t, e.blBalance()); bal != sum {
		e.t.Fatalf("ledger entries sum to %v, balance is %v", sum, bal)
	}
	return entries
}

// blSumByType sums the ledger's amounts per entry type.
func blSumByType(t *testing.T, entries []map[string]any) map[string]money.Micros {
	t.Helper()
	out := make(map[string]money.Micros)
	for _, en := range entries {
		out[en["type"].(string)] += blMicros(t, en["amount"])
	}
	return out
}

// blPastBootstrap moves the clock 1 ms past the bootstrap. The opening
// credit's ledger entry is dated by the bootstrap at the clock's reading;
// the engine only keeps its own creation times strictly increasing, so an
// entry written before the fake clock first moves has the same instant as
// the opening credit and the newest-first order of the two is by random id.
// A real clock always moves between the two.
func (e *env) blPastBootstrap() { e.clock.Advance(time.Millisecond) }

// blCreateTopup creates a top-up with the bootstrap key.
func (e *env) blCreateTopup(amount, method string) *resp {
	e.t.Helper()
	body := map[string]any{"amount": amount}
	if method != "" {
		body["method"] = method
	}
	return e.do("POST", "/v1/billing/topups", e.Boot.APIKey, body)
}

// blTopup is GET /v1/billing/topups/{payment_id}.
func (e *env) blTopup(paymentID string) *resp {
	e.t.Helper()
	return e.do("GET", "/v1/billing/topups/"+paymentID, e.Boot.APIKey, nil).must(e.t, 200)
}

// blPage opens the sandbox page at pageURL as a browser would: GET when
// outcome is empty, else the checkout form's POST of field outcome.
func (e *env) blPage(pageURL, outcome string) (int, string) {
	e.t.Helper()
	var res *http.Response
	var err error
	if outcome == "" {
		res, err = e.client.Get(pageURL)
	} else {
		res, err = e.client.PostForm(pageURL, url.Values{"outcome": {outcome}})
	}
	if err != nil {
		e.t.Fatalf("sandbox page %s: %v", pageURL, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// blCallback is one provider callback request as the sandbox sent it.
type blCallback struct {
	header http.Header
	body   []byte
}

// blCapture is an http.RoundTripper that keeps each callback and answers
// 200 itself: the callback is captured, not delivered.
type blCapture struct {
	mu  sync.Mutex
	got []blCallback
}

func (c *blCapture) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.got = append(c.got, blCallback{header: req.Header.Clone(), body: body})
	c.mu.Unlock()
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{"received":true}`)), Request: req}, nil
}

// blSandboxSecret is the server's sandbox secret, derived from the master
// key in its data directory exactly as the server derives it.
func (e *env) blSandboxSecret() [32]byte {
	e.t.Helper()
	raw, err := os.ReadFile(filepath.Join(e.dataDir, "master.key"))
	if err != nil {
		e.t.Fatal(err)
	}
	master, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		e.t.Fatal(err)
	}
	keys, err := auth.DeriveKeys(master)
	if err != nil {
		e.t.Fatal(err)
	}
	return keys.PaymentsSandbox()
}

// blSandbox returns a sandbox provider holding secret with its own clock
// at `at`, whose callbacks are captured instead of delivered.
func (e *env) blSandbox(secret [32]byte, at time.Time) (*payments.Sandbox, *blCapture) {
	e.t.Helper()
	capture := &blCapture{}
	sb, err := payments.NewSandbox(payments.SandboxConfig{
		PublicBaseURL: e.Base, Secret: secret, Clock: clock.NewFake(at),
		CallbackURL: e.Base + "/v1/billing/providers/sandbox/webhook",
		HTTPClient:  &http.Client{Transport: capture},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return sb, capture
}

// blComplete has sb complete the checkout of authorizeURL with outcome and
// returns the signed callback it sent (captured, not delivered).
func (e *env) blComplete(sb *payments.Sandbox, capture *blCapture, authorizeURL, outcome string) blCallback {
	e.t.Helper()
	u, err := url.Parse(authorizeURL)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, status := sb.Complete(context.Background(), path.Base(u.Path), u.Query().Get("t"), outcome); status != 200 {
		e.t.Fatalf("sandbox Complete(%s) answered %d", outcome, status)
	}
	capture.mu.Lock()
	defer capture.mu.Unlock()
	if len(capture.got) == 0 {
		e.t.Fatal("the sandbox sent no callback")
	}
	return capture.got[len(capture.got)-1]
}

// blSignCallback is the callback this server's own sandbox (its secret,
// derived from the master key) would send for authorizeURL if the payer
// chose outcome at `at`; captured, not delivered, so a test can deliver it
// late, twice, or altered.
func (e *env) blSignCallback(at time.Time, authorizeURL, outcome string) blCallback {
	e.t.Helper()
	sb, capture := e.blSandbox(e.blSandboxSecret(), at)
	return e.blComplete(sb, capture, authorizeURL, outcome)
}

// blDeliver posts a callback to the provider webhook route, byte for byte.
func (e *env) blDeliver(provider string, cb blCallback) *resp {
	e.t.Helper()
	var headers []string
	for name, values := range cb.header {
		if name == "Content-Length" {
			continue
		}
		for _, v := range values {
			headers = append(headers, name+": "+v)
		}
	}
	return e.do("POST", "/v1/billing/providers/"+provider+"/webhook", "", cb.body, headers...)
}

// blHook is a local webhook receiver subscribed to every event of the
// bootstrap project: the events the server emits, as delivered (at least
// once; kept once per event id). Start the server with
// --webhook-allow-private=true so a loopback http:// endpoint is allowed.
type blHook struct {
	mu  sync.Mutex
	ids map[string]bool
	evs []actors.OutboxEvent
}

// blWebhooks starts a receiver and subscribes it. Only events emitted after
// this reach it.
func (e *env) blWebhooks() *blHook {
	e.t.Helper()
	h := &blHook{ids: make(map[string]bool)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev actors.OutboxEvent
		if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" {
			w.WriteHeader(400)
			return
		}
		h.mu.Lock()
		if !h.ids[ev.ID] {
			h.ids[ev.ID] = true
			h.evs = append(h.evs, ev)
		}
		h.mu.Unlock()
		w.WriteHeader(200)
	}))
	e.t.Cleanup(srv.Close)
	e.do("POST", "/v1/webhook-endpoints", e.Boot.APIKey, map[string]any{"url": srv.URL + "/rtcd"}).must(e.t, 201)
	return h
}

// await waits until the receiver holds at least want[type] events of each
// type, then requires exactly that many and returns every event received,
// ordered by created_at.
func (h *blHook) await(e *env, want map[string]int) []actors.OutboxEvent {
	e.t.Helper()
	count := func() map[string]int {
		h.mu.Lock()
		defer h.mu.Unlock()
		n := make(map[string]int)
		for _, ev := range h.evs {
			n[ev.Type]++
		}
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, done := count(), true
		for typ, w := range want {
			done = done && n[typ] >= w
		}
		if done {
			for typ, w := range want {
				if n[typ] != w {
					e.t.Fatalf("%d %s events delivered, want %d", n[typ], typ, w)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("webhook events delivered %v, want %v", n, want)
		}
		time.Sleep(10 * time.Millisecond) // polling asynchronous delivery, as e.eventually
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := append([]actors.OutboxEvent(nil), h.evs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt < out[j].CreatedAt })
	for _, ev := range out {
		if ev.ProjectID != e.Boot.ProjectID {
			e.t.Fatalf("event for another project: %+v", ev)
		}
	}
	return out
}

// blEventsOf returns the events of type typ.
func blEventsOf(evs []actors.OutboxEvent, typ string) []actors.OutboxEvent {
	var out []actors.OutboxEvent
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// blIndexOf is the position of the first event of typ, or -1.
func blIndexOf(evs []actors.OutboxEvent, typ string) int {
	for i, ev := range evs {
		if ev.Type == typ {
			return i
		}
	}
	return -1
}

// --- top-ups ---------------------------------------------------------------

func TestTopupValidation(t *testing.T) {
	e := start(t)
	for _, c := range []struct {
		name string
		body any
	}{
		{"below 5.00", map[string]any{"amount": "4.99"}},
		{"above 10000.00", map[string]any{"amount": "10000.01"}},
		{"three decimals", map[string]any{"amount": "5.001"}},
		{"three decimals, zero", map[string]any{"amount": "5.000"}},
		{"not a number", map[string]any{"amount": "abc"}},
		{"negative", map[string]any{"amount": "-5.00"}},
		{"exponent", map[string]any{"amount": "5e2"}},
		{"empty", map[string]any{"amount": ""}},
		{"a JSON number", map[string]any{"amount": 5}},
		{"missing", map[string]any{"method": "card"}},
		{"null", map[string]any{"amount": nil}},
		{"unknown method", map[string]any{"amount": "5.00", "method": "paypal"}},
		{"method case", map[string]any{"amount": "5.00", "method": "Card"}},
		{"empty method", map[string]any{"amount": "5.00", "method": ""}},
	} {
		if r := e.do("POST", "/v1/billing/topups", e.Boot.APIKey, c.body); r.Status != 400 || r.ErrCode() != "invalid_request" {
			t.Errorf("%s: %d %s, want 400 invalid_request", c.name, r.Status, r.Raw)
		}
	}
	if d := erRequireEnvelope(t, e.blCreateTopup("4.99", ""), 400, "invalid_request"); d["field"] != "amount" {
		t.Errorf("details %v, want field amount", d)
	}
	if d := erRequireEnvelope(t, e.blCreateTopup("5.00", "paypal"), 400, "invalid_request"); d["field"] != "method" {
		t.Errorf("details %v, want field method", d)
	}
	if list := e.do("GET", "/v1/billing/topups", e.Boot.APIKey, nil).must(t, 200); len(list.Data()) != 0 {
		t.Fatalf("refused top-ups were created: %s", list.Raw)
	}

	// The bounds themselves and both methods are accepted.
	made := map[string]*resp{}
	for _, c := range []struct{ amount, method, wantMethod string }{
		{"5.00", "card", "card"},
		{"10000.00", "checkout", "checkout"},
		{"5", "", "checkout"},
		{"12.5", "card", "card"},
	} {
		r := e.blCreateTopup(c.amount, c.method).must(t, 201)
		if r.Str("object") != "topup" || !strings.HasPrefix(r.Str("payment_id"), "pay_") || r.Str("status") != "pending" ||
			r.Str("method") != c.wantMethod || r.Str("currency") != "USD" || r.Str("provider") != "sandbox" ||
			r.Str("receipt_url") != "" || r.JSON["completed_at"] != nil || r.Str("amount_refunded") != "0.00" {
			t.Fatalf("top-up of %s by %q: %s", c.amount, c.method, r.Raw)
		}
		if blMicros(t, r.Str("amount")) != blMicros(t, c.amount) {
			t.Fatalf("top-up amount %s, asked %s", r.Str("amount"), c.amount)
		}
		if !strings.HasPrefix(r.Str("authorize_url"), e.Base+payments.SandboxCheckoutPath+r.Str("payment_id")+"?t=") {
			t.Fatalf("authorize_url %q is not the local checkout page", r.Str("authorize_url"))
		}
		made[r.Str("payment_id")] = r
	}

	// A key without billing:write cannot create one; billing:read lists.
	reader := e.createKey(e.Boot.APIKey, "billing:read").must(t, 201).Str("secret")
	d := erRequireEnvelope(t, e.do("POST", "/v1/billing/topups", reader, map[string]any{"amount": "5.00"}), 403, "permission_denied")
	if d["required_scope"] != "billing:write" {
		t.Fatalf("403 details %v", d)
	}
	noBilling := e.createKey(e.Boot.APIKey, "rooms:read").must(t, 201).Str("secret")
	erRequireEnvelope(t, e.do("GET", "/v1/billing/topups", noBilling, nil), 403, "permission_denied")

	list := e.do("GET", "/v1/billing/topups", reader, nil).must(t, 200)
	if len(list.Data()) != len(made) {
		t.Fatalf("list has %d top-ups, want %d: %s", len(list.Data()), len(made), list.Raw)
	}
	for _, tp := range list.Data() {
		want, ok := made[tp["payment_id"].(string)]
		if !ok {
			t.Fatalf("listed top-up %v was not created", tp["payment_id"])
		}
		got := e.do("GET", "/v1/billing/topups/"+want.Str("payment_id"), reader, nil).must(t, 200)
		if string(got.Raw) != string(want.Raw) {
			t.Fatalf("GET top-up:\n%s\nwant what the create answered:\n%s", got.Raw, want.Raw)
		}
	}
	// Newest first, limit honoured.
	if page := e.do("GET", "/v1/billing/topups?limit=1", reader, nil).must(t, 200); len(page.Data()) != 1 ||
		page.Data()[0]["amount"] != "12.50" {
		t.Fatalf("first page of one: %s", page.Raw)
	}
	erRequireEnvelope(t, e.do("GET", "/v1/billing/topups/pay_doesnotexist00000000000", reader, nil), 404, "invalid_request")
	// Nothing was credited by creating top-ups.
	if b := e.blBalance(); b != "10.00" {
		t.Fatalf("balance %s after unpaid top-ups, want 10.00", b)
	}
}

func TestTopupSandboxPaysOnce(t *testing.T) {
	e := start(t, "--webhook-allow-private=true")
	e.blPastBootstrap()
	hook := e.blWebhooks()
	tp := e.blCreateTopup("25.00", "card").must(t, 201)
	id, authorize := tp.Str("payment_id"), tp.Str("authorize_url")

	status, html := e.blPage(authorize, "")
	if status != 200 || !strings.Contains(html, "25.00") || !strings.Contains(html, id) {
		t.Fatalf("checkout page: %d %s", status, html)
	}
	if got := e.blTopup(id); got.Str("status") != "pending" || got.Str("receipt_url") != "" {
		t.Fatalf("before payment: %s", got.Raw)
	}

	// The payer presses Pay twice: two callbacks, one credit.
	for i := 0; i < 2; i++ {
		if status, html := e.blPage(authorize, "succeeded"); status != 200 {
			t.Fatalf("pay #%d: %d %s", i+1, status, html)
		}
		if b := e.blBalance(); b != "35.00" {
			t.Fatalf("after pay #%d the balance is %s, want 35.00 (10.00 + 25.00 once)", i+1, b)
		}
	}
	got := e.blTopup(id)
	receipt := got.Str("receipt_url")
	if got.Str("status") != "succeeded" || !strings.HasPrefix(receipt, e.Base+payments.SandboxReceiptPath+id+"?t=") || got.JSON["completed_at"] == nil {
		t.Fatalf("after payment: %s", got.Raw)
	}
	if status, html := e.blPage(receipt, ""); status != 200 || !strings.Contains(html, "25.00") {
		t.Fatalf("receipt page: %d %s", status, html)
	}
	// Listing shows the same record.
	if list := e.do("GET", "/v1/billing/topups", e.Boot.APIKey, nil).must(t, 200).Data(); len(list) != 1 ||
		list[0]["status"] != "succeeded" || list[0]["receipt_url"] != receipt {
		t.Fatalf("list after payment: %v", list)
	}

	// A provider that repeats the exact same signed callback: the first
	// delivery credits, the repeats are acknowledged and credit nothing.
	tp2 := e.blCreateTopup("7.25", "checkout").must(t, 201)
	cb := e.blSignCallback(e.clock.Now(), tp2.Str("authorize_url"), "succeeded")
	for i := 0; i < 3; i++ {
		r := e.blDeliver("sandbox", cb).must(t, 200)
		if r.JSON["received"] != true {
			t.Fatalf("callback answer %s", r.Raw)
		}
		if b := e.blBalance(); b != "42.25" {
			t.Fatalf("after delivery #%d the balance is %s, want 42.25 (35.00 + 7.25 once)", i+1, b)
		}
	}
	if got := e.blTopup(tp2.Str("payment_id")); got.Str("status") != "succeeded" || got.Str("receipt_url") == "" {
		t.Fatalf("after the repeated callback: %s", got.Raw)
	}
	// And the payer's page after the provider already settled it: no credit.
	if status, _ := e.blPage(tp2.Str("authorize_url"), "succeeded"); status != 200 {
		t.Fatalf("pay after the callback: %d", status)
	}

	entries := e.blCheckLedgerSum()
	topups := 0
	for _, en := range entries {
		if en["type"] == "topup" {
			topups++
			ref, _ := en["reference"].(map[string]any)
			if ref["type"] != "payment" || (ref["id"] != id && ref["id"] != tp2.Str("payment_id")) {
				t.Fatalf("top-up ledger entry reference %v", ref)
			}
		}
	}
	if topups != 2 || e.blBalance() != "42.25" {
		t.Fatalf("%d top-up ledger entries, balance %s; want 2 and 42.25", topups, e.blBalance())
	}

	evs := hook.await(e, map[string]int{actors.EventPaymentSucceeded: 2, actors.EventPaymentFailed: 0})
	for _, ev := range blEventsOf(evs, actors.EventPaymentSucceeded) {
		if ev.ProjectID != e.Boot.ProjectID || ev.Data["status"] != "succeeded" || ev.Data["receipt_url"] == "" {
			t.Fatalf("payment.succeeded %+v", ev)
		}
	}
}

func TestTopupFailAndCancel(t *testing.T) {
	e := start(t, "--webhook-allow-private=true")
	e.blPastBootstrap()
	hook := e.blWebhooks()
	failed := e.blCreateTopup("5.00", "card").must(t, 201)
	canceled := e.blCreateTopup("6.00", "checkout").must(t, 201)
	if status, _ := e.blPage(failed.Str("authorize_url"), "failed"); status != 200 {
		t.Fatalf("fail: %d", status)
	}
	if status, _ := e.blPage(canceled.Str("authorize_url"), "canceled"); status != 200 {
		t.Fatalf("cancel: %d", status)
	}
	if status, _ := e.blPage(canceled.Str("authorize_url"), "refunded"); status != 400 {
		t.Fatalf("an outcome the page does not offer: %d, want 400", status)
	}
	for id, want := range map[string]string{failed.Str("payment_id"): "failed", canceled.Str("payment_id"): "canceled"} {
		got := e.blTopup(id)
		if got.Str("status") != want || got.Str("receipt_url") != "" || got.JSON["completed_at"] == nil {
			t.Fatalf("top-up %s: %s, want %s without a receipt", id, got.Raw, want)
		}
	}
	// A final state is final: a later success callback credits nothing.
	if status, _ := e.blPage(failed.Str("authorize_url"), "succeeded"); status != 200 {
		t.Fatalf("pay after failure: %d", status)
	}
	if got := e.blTopup(failed.Str("payment_id")); got.Str("status") != "failed" {
		t.Fatalf("a failed top-up moved to %s", got.Str("status"))
	}
	if b := e.blBalance(); b != "10.00" {
		t.Fatalf("balance %s after failed and canceled top-ups, want 10.00", b)
	}
	if entries := e.blCheckLedgerSum(); len(entries) != 1 {
		t.Fatalf("ledger %v, want only the opening credit", entries)
	}
	evs := hook.await(e, map[string]int{actors.EventPaymentFailed: 1, actors.EventPaymentCanceled: 1, actors.EventPaymentSucceeded: 0})
	if f, c := blEventsOf(evs, actors.EventPaymentFailed)[0], blEventsOf(evs, actors.EventPaymentCanceled)[0]; f.Data["payment_id"] != failed.Str("payment_id") ||
		f.Data["status"] != "failed" || c.Data["payment_id"] != canceled.Str("payment_id") || c.Data["status"] != "canceled" {
		t.Fatalf("payment events %+v", evs)
	}
}

func TestTopupForgedCallbacksCreditNothing(t *testing.T) {
	e := start(t)
	e.blPastBootstrap()
	tp := e.blCreateTopup("50.00", "card").must(t, 201)
	id := tp.Str("payment_id")
	now := e.clock.Now()
	good := e.blSignCallback(now, tp.Str("authorize_url"), "succeeded")

	withHeader := func(cb blCallback, value string) blCallback {
		h := cb.header.Clone()
		if value == "" {
			h.Del(payments.SandboxSignatureHeader)
		} else {
			h.Set(payments.SandboxSignatureHeader, value)
		}
		return blCallback{header: h, body: cb.body}
	}
	// A provider key that is not the server's: its own checkout link for
	// this payment id, and its callback for it.
	wrongSecret := e.blSandboxSecret()
	wrongSecret[0] ^= 0xff
	wrong, wrongCapture := e.blSandbox(wrongSecret, now)
	co, err := wrong.CreateCheckout(context.Background(), payments.CheckoutRequest{PaymentID: id, AccountID: e.Boot.AccountID,
		Amount: 50 * money.MicrosPerUnit, Currency: "USD", Method: payments.MethodCard, ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	tampered := blCallback{header: good.header, body: []byte(strings.Replace(string(good.body), `"50.00"`, `"5000.00"`, 1))}
	if string(tampered.body) == string(good.body) {
		t.Fatalf("could not tamper with %s", good.body)
	}
	sig := good.header.Get(payments.SandboxSignatureHeader)
	forged := map[string]blCallback{
		"no signature":           withHeader(good, ""),
		"garbage signature":      withHeader(good, "t=abc,v1=zz"),
		"zero signature":         withHeader(good, strings.SplitN(sig, ",", 2)[0]+",v1="+strings.Repeat("0", 64)),
		"two timestamps":         withHeader(good, "t=1,"+sig),
		"another secret":         e.blComplete(wrong, wrongCapture, co.AuthorizeURL, "succeeded"),
		"stale, validly signed":  e.blSignCallback(now.Add(-payments.CallbackTolerance-2*time.Second), tp.Str("authorize_url"), "succeeded"),
		"future, validly signed": e.blSignCallback(now.Add(payments.CallbackTolerance+2*time.Second), tp.Str("authorize_url"), "succeeded"),
		"body changed":           tampered,
	}
	for name, cb := range forged {
		r := e.blDeliver("sandbox", cb)
		if r.Status != 400 || r.ErrCode() != "invalid_request" {
			t.Errorf("%s: %d %s, want 400 invalid_request", name, r.Status, r.Raw)
		}
	}
	if r := e.blDeliver("stripe", good); r.Status != 404 {
		t.Errorf("a callback to a provider that is not configured: %d %s, want 404", r.Status, r.Raw)
	}
	if b := e.blBalance(); b != "10.00" {
		t.Fatalf("forged callbacks moved the balance to %s", b)
	}
	if got := e.blTopup(id); got.Str("status") != "pending" {
		t.Fatalf("forged callbacks moved the top-up to %s", got.Str("status"))
	}
	// The genuine callback, delivered last, credits: the forgeries were
	// refused for what was wrong with them, not by a broken route.
	e.blDeliver("sandbox", good).must(t, 200)
	if b := e.blBalance(); b != "60.00" {
		t.Fatalf("genuine callback: balance %s, want 60.00", b)
	}
	e.blCheckLedgerSum()
}

func TestTopupExpiresUnlessPaid(t *testing.T) {
	e := start(t, "--topup-expiry-seconds=60", "--webhook-allow-private=true")
	hook := e.blWebhooks()
	created := e.clock.Now()
	x := e.blCreateTopup("8.00", "card").must(t, 201)
	if want := actors.Timestamp(created.Add(60 * time.Second)); x.Str("expires_at") != want {
		t.Fatalf("expires_at %s, want %s", x.Str("expires_at"), want)
	}
	// A callback signed while the checkout was still open, delivered late.
	late := e.blSignCallback(created.Add(50*time.Second), x.Str("authorize_url"), "succeeded")

	e.clock.Advance(30 * time.Second)
	y := e.blCreateTopup("9.00", "card").must(t, 201)
	// x is due (creation times are nudged a nanosecond apart, so its
	// expiry may be a hair past the 60 s mark); y has 30 s left.
	e.clock.Advance(30*time.Second + time.Millisecond)
	e.eventually("the unpaid top-up expired", func() bool { return e.blTopup(x.Str("payment_id")).Str("status") == "expired" })
	// The sweep that expired x looked at y at the same instant and kept it.
	if got := e.blTopup(y.Str("payment_id")); got.Str("status") != "pending" {
		t.Fatalf("top-up with 30 s left is %s", got.Raw)
	}
	if got := e.blTopup(x.Str("payment_id")); got.Str("receipt_url") != "" || got.JSON["completed_at"] == nil {
		t.Fatalf("expired top-up: %s", got.Raw)
	}
	// The payer's page is gone.
	if status, _ := e.blPage(x.Str("authorize_url"), ""); status != http.StatusGone {
		t.Fatalf("checkout page of an expired top-up: %d, want 410", status)
	}
	if status, _ := e.blPage(x.Str("authorize_url"), "succeeded"); status != http.StatusGone {
		t.Fatalf("paying on an expired page: %d, want 410", status)
	}
	if b := e.blBalance(); b != "10.00" {
		t.Fatalf("balance %s after an expiry, want 10.00", b)
	}
	// The provider took the money before the expiry and reports it late:
	// it still credits (the implemented rule), once.
	for i := 0; i < 2; i++ {
		e.blDeliver("sandbox", late).must(t, 200)
	}
	if got := e.blTopup(x.Str("payment_id")); got.Str("status") != "succeeded" || got.Str("receipt_url") == "" {
		t.Fatalf("late success of an expired top-up: %s", got.Raw)
	}
	if b := e.blBalance(); b != "18.00" {
		t.Fatalf("balance %s after the late success, want 18.00", b)
	}
	e.clock.Advance(30 * time.Second)
	e.eventually("the second top-up expired", func() bool { return e.blTopup(y.Str("payment_id")).Str("status") == "expired" })
	e.blCheckLedgerSum()

	evs := hook.await(e, map[string]int{actors.EventPaymentExpired: 2, actors.EventPaymentSucceeded: 1})
	expired, succeeded := blEventsOf(evs, actors.EventPaymentExpired), blEventsOf(evs, actors.EventPaymentSucceeded)
	if len(expired) != 2 || len(succeeded) != 1 || succeeded[0].Data["payment_id"] != x.Str("payment_id") {
		t.Fatalf("payment events: expired %+v, succeeded %+v", expired, succeeded)
	}
}

// --- ledger and the operator adjustment ------------------------------------

func TestOperatorAdjustment(t *testing.T) {
	e := start(t)
	e.blPastBootstrap()
	raw, err := os.ReadFile(filepath.Join(e.dataDir, "admin.token"))
	if err != nil {
		t.Fatalf("admin token file: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(e.dataDir, "admin.token")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin.token mode %v, want 0600", fi.Mode().Perm())
	}
	token := strings.TrimSpace(string(raw))
	adjust := func(tok string, body any) *resp {
		t.Helper()
		j, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", e.Metrics+"/admin/billing/adjust", strings.NewReader(string(j)))
		req.Header.Set("Content-Type", "application/json")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		res, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		r := &resp{Status: res.StatusCode, Header: res.Header, Raw: b}
		_ = json.Unmarshal(b, &r.JSON)
		return r
	}
	body := map[string]any{"account_id": e.Boot.AccountID, "amount": "-3.141593", "reason": "refund of a duplicate charge", "operator": "alice"}

	for name, tok := range map[string]string{"no token": "", "wrong token": strings.Repeat("0", len(token)), "token with a suffix": token + "x"} {
		if r := adjust(tok, body); r.Status != 401 || r.ErrCode() != "authentication_failed" {
			t.Fatalf("%s: %d %s, want 401 authentication_failed", name, r.Status, r.Raw)
		}
	}
	for name, b := range map[string]map[string]any{
		"zero":          {"account_id": e.Boot.AccountID, "amount": "0", "reason": "x"},
		"seven digits":  {"account_id": e.Boot.AccountID, "amount": "1.0000001", "reason": "x"},
		"no reason":     {"account_id": e.Boot.AccountID, "amount": "1.00"},
		"not a number":  {"account_id": e.Boot.AccountID, "amount": "one", "reason": "x"},
		"long reason":   {"account_id": e.Boot.AccountID, "amount": "1.00", "reason": strings.Repeat("r", actors.MaxAdjustmentReasonBytes+1)},
		"other account": {"account_id": "acct_doesnotexist0000000000", "amount": "1.00", "reason": "x"},
	} {
		if r := adjust(token, b); r.Status/100 != 4 || r.Status == 401 {
			t.Fatalf("%s: %d %s, want a 4xx refusal", name, r.Status, r.Raw)
		}
	}
	if b := e.blBalance(); b != "10.00" {
		t.Fatalf("refused adjustments moved the balance to %s", b)
	}
	// Customer API keys have no way to it: the route is not on the API listener.
	if r := e.do("POST", "/admin/billing/adjust", e.Boot.APIKey, body); r.Status != 404 {
		t.Fatalf("the admin route on the public listener: %d %s", r.Status, r.Raw)
	}

	r := adjust(token, body)
	if r.Status != 200 || r.Str("type") != "adjustment" || r.Str("amount") != "-3.141593" || r.Str("balance_after") != "6.858407" ||
		r.Str("description") != "refund of a duplicate charge" {
		t.Fatalf("adjustment: %d %s", r.Status, r.Raw)
	}
	if ref, _ := r.JSON["reference"].(map[string]any); ref["type"] != "operator" || ref["id"] != "alice" {
		t.Fatalf("adjustment reference %v", r.JSON["reference"])
	}
	if b := e.blBalance(); b != "6.858407" {
		t.Fatalf("balance %s after -3.141593 from 10.00", b)
	}
	if r := adjust(token, map[string]any{"account_id": e.Boot.AccountID, "amount": "0.000001", "reason": "rounding"}); r.Status != 200 {
		t.Fatalf("credit adjustment: %d %s", r.Status, r.Raw)
	}
	entries := e.blCheckLedgerSum()
	if len(entries) != 3 || entries[1]["id"] != r.Str("id") || entries[2]["amount"] != "0.000001" || e.blBalance() != "6.858408" {
		t.Fatalf("ledger %v", entries)
	}
	// The adjustment is audited in the project, as the operator's act.
	audit := e.do("GET", "/v1/audit-logs", e.Boot.APIKey, nil).must(t, 200).Data()
	var adjusted []map[string]any
	for _, a := range audit {
		if a["action"] == "billing.adjusted" {
			adjusted = append(adjusted, a)
		}
	}
	if len(adjusted) != 2 {
		t.Fatalf("%d billing.adjusted audit entries, want 2: %v", len(adjusted), audit)
	}
	a := adjusted[1] // newest first: the second is the first adjustment
	actor, _ := a["actor"].(map[string]any)
	target, _ := a["target"].(map[string]any)
	details, _ := a["details"].(map[string]any)
	if actor["type"] != "operator" || actor["id"] != "alice" || target["type"] != "ledger_entry" ||
		target["id"] != r.Str("id") || details["amount"] != "-3.141593" || details["reason"] != "refund of a duplicate charge" ||
		details["account_id"] != e.Boot.AccountID {
		t.Fatalf("audit entry of the adjustment: %v", a)
	}
}

// --- usage -----------------------------------------------------------------

func TestUsageEndpointsValidation(t *testing.T) {
	e := start(t)
	for _, route := range []string{"/v1/usage/summary", "/v1/usage/daily"} {
		for _, c := range []struct{ query, field string }{
			{"", "from"},
			{"?to=2026-11-22", "from"},
			{"?from=2026-11-22", "to"},
			{"?from=&to=2026-11-22", "from"},
			{"?from=2026-11-22&to=", "to"},
			{"?from=2026-13-01&to=2026-11-22", "from"},
			{"?from=2026-11-31&to=2026-12-01", "from"},
			{"?from=2026/11/22&to=2026-11-22", "from"},
			{"?from=20261122&to=2026-11-22", "from"},
			{"?from=2026-11-22T00:00:00Z&to=2026-11-22", "from"},
			{"?from=2026-11-22&to=2026-11-2", "to"},
			{"?from=2026-11-22&to=tomorrow", "to"},
			{"?from=2026-11-22&to=2026-11-21", "to"},      // to before from
			{"?from=2025-11-21&to=2026-11-22", "to"},      // 367 days
			{"?from=2000-01-01&to=2026-11-22", "to"},      // far over
			{"?from=2026-11-22&to=2026-11-22x", "to"},     // trailing junk
			{"?from=%202026-11-22&to=2026-11-22", "from"}, // leading space
		} {
			d := erRequireEnvelope(t, e.do("GET", route+c.query, e.Boot.APIKey, nil), 400, "invalid_request")
			if d["field"] != c.field {
				t.Errorf("GET %s%s: details %v, want field %q", route, c.query, d, c.field)
			}
		}
		// 366 days, both ends included, is the most.
		e.do("GET", route+"?from=2025-11-22&to=2026-11-22", e.Boot.APIKey, nil).must(t, 200)
	}
	noUsage := e.createKey(e.Boot.APIKey, "billing:read").must(t, 201).Str("secret")
	erRequireEnvelope(t, e.do("GET", "/v1/usage/summary?from=2026-11-22&to=2026-11-22", noUsage, nil), 403, "permission_denied")

	s := e.do("GET", "/v1/usage/summary?from=2026-11-22&to=2026-11-22", e.Boot.APIKey, nil).must(t, 200)
	period, _ := s.JSON["period"].(map[string]any)
	if s.Str("object") != "usage_summary" || s.Str("project_id") != e.Boot.ProjectID || s.JSON["finalized_only"] != true ||
		period["from"] != "2026-11-22T00:00:00.000Z" || period["to"] != "2026-11-23T00:00:00.000Z" ||
		s.JSON["participant_seconds"] != float64(0) || s.JSON["rooms"] != float64(0) || s.JSON["participants"] != float64(0) {
		t.Fatalf("empty summary: %s", s.Raw)
	}
	d := e.do("GET", "/v1/usage/daily?from=2026-02-27&to=2026-03-01", e.Boot.APIKey, nil).must(t, 200)
	period, _ = d.JSON["period"].(map[string]any)
	days := d.Data()
	if d.Str("object") != "usage_daily" || d.JSON["finalized_only"] != true || period["from"] != "2026-02-27T00:00:00.000Z" ||
		period["to"] != "2026-03-02T00:00:00.000Z" || len(days) != 3 ||
		days[0]["date"] != "2026-02-27" || days[1]["date"] != "2026-02-28" || days[2]["date"] != "2026-03-01" {
		t.Fatalf("daily over a month end: %s", d.Raw)
	}
	for _, day := range days {
		if day["object"] != "usage_day" || day["participant_seconds"] != float64(0) || day["participant_minutes"] != float64(0) {
			t.Fatalf("empty day %v", day)
		}
	}
	if full := e.do("GET", "/v1/usage/daily?from=2025-11-22&to=2026-11-22", e.Boot.APIKey, nil).must(t, 200); len(full.Data()) != 366 {
		t.Fatalf("366-day daily has %d days", len(full.Data()))
	}
}

func TestUsageSessionAcrossMidnight(t *testing.T) {
	e := start(t)
	// 23:58:20 UTC: the session will run 100 s on the 22nd and 30 s on the 23rd.
	e.clock.Advance(11*time.Hour + 58*time.Minute + 20*time.Second)
	room := e.createRoom(map[string]any{"name": "late"})
	pid, token := e.createParticipant(room, nil)
	c := e.joinMedia(token)
	e.eventually("joined", func() bool { return e.participantStatus(room, pid) == "joined" })

	summary := func(from, to string) *resp {
		return e.do("GET", "/v1/usage/summary?from="+from+"&to="+to, e.Boot.APIKey, nil).must(t, 200)
	}
	// Open sessions are not counted (finalized_only) until they end.
	e.stay(70*time.Second, c)
	if s := summary("2026-11-22", "2026-11-23"); s.JSON["participant_seconds"] != float64(0) || s.JSON["finalized_only"] != true ||
		s.JSON["participants"] != float64(0) {
		t.Fatalf("summary while the only session is open: %s", s.Raw)
	}
	e.stay(60*time.Second, c)
	c.send(map[string]any{"type": "leave"})
	e.eventually("left", func() bool { return e.participantStatus(room, pid) == "left" })

	for _, w := range []struct {
		from, to string
		seconds  float64
	}{
		{"2026-11-22", "2026-11-22", 100},
		{"2026-11-23", "2026-11-23", 30},
		{"2026-11-22", "2026-11-23", 130},
		{"2026-11-21", "2026-11-24", 130},
		{"2026-11-24", "2026-11-30", 0},
	} {
		s := summary(w.from, w.to)
		if s.JSON["participant_seconds"] != w.seconds {
			t.Fatalf("summary %s..%s: %s, want %v participant-seconds", w.from, w.to, s.Raw, w.seconds)
		}
		if w.seconds > 0 && (s.JSON["rooms"] != float64(1) || s.JSON["participants"] != float64(1) ||
			s.JSON["participant_minutes"] != w.seconds/60) {
			t.Fatalf("summary %s..%s: %s", w.from, w.to, s.Raw)
		}
	}
	days := e.do("GET", "/v1/usage/daily?from=2026-11-22&to=2026-11-23", e.Boot.APIKey, nil).must(t, 200).Data()
	if len(days) != 2 || days[0]["participant_seconds"] != float64(100) || days[1]["participant_seconds"] != float64(30) ||
		days[0]["rooms"] != float64(1) || days[1]["participants"] != float64(1) {
		t.Fatalf("daily across midnight: %v", days)
	}
	// Charged as one session: floor(130 x 0.004000 / 60) = 0.008666.
	e.eventually("the last charge applied", func() bool { return e.blBalance() == "9.991334" })
	entries := e.blCheckLedgerSum()
	if got := blSumByType(t, entries)["usage"]; got != -8666 {
		t.Fatalf("usage charged %v, want -0.008666", got)
	}
}

func TestBillingDisabledNeitherGatesNorCharges(t *testing.T) {
	e := start(t, "--billing-enabled=false", "--bootstrap-credit=0.00", "--settle-interval-seconds=10", "--webhook-allow-private=true")
	hook := e.blWebhooks()
	p := e.do("GET", "/v1/billing/pricing", e.Boot.APIKey, nil).must(t, 200)
	if p.JSON["billing_enabled"] != false {
		t.Fatalf("pricing: %s", p.Raw)
	}
	if b := e.blBalance(); b != "0.00" {
		t.Fatalf("balance %s", b)
	}
	// 0.00 is below minimum_credit_to_start, but nothing is gated.
	room := e.createRoom(nil)
	pid, token := e.createParticipant(room, nil)
	c := e.joinMedia(token)
	e.eventually("joined", func() bool { return e.participantStatus(room, pid) == "joined" })
	e.stay(125*time.Second, c)
	_, token2 := e.createParticipant(room, nil)
	e.connect(token2).must(t, 200)
	c.send(map[string]any{"type": "leave"})
	e.eventually("left", func() bool { return e.participantStatus(room, pid) == "left" })
	// Nothing was charged, periodically or at the end.
	if b := e.blBalance(); b != "0.00" {
		t.Fatalf("balance %s with billing disabled, want 0.00", b)
	}
	for _, en := range e.blCheckLedgerSum() {
		if en["type"] == "usage" {
			t.Fatalf("usage charged with billing disabled: %v", en)
		}
	}
	for _, ev := range blEventsOf(hook.await(e, map[string]int{actors.EventUsageFinalized: 1}), actors.EventUsageFinalized) {
		if ev.Data["amount"] != "0.000000" || ev.Data["participant_seconds"] != float64(125) {
			t.Fatalf("usage.finalized with billing disabled: %+v", ev)
		}
	}
}
