package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"rtcd/actors/core"
	"rtcd/actors/wallet"
	"rtcd/apierr"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/money"
	"rtcd/persistence"
	"rtcd/ratelimit"
)

// A provider whose success callbacks carry no receipt (Stripe): a receipt
// lookup that fails never holds back the credit, is answered 503 so the
// provider delivers the callback again, and that delivery brings the
// receipt without a second credit. The receipt survives a restart (it is
// journaled), and once stored no delivery asks the provider again.
func TestApplyPaymentFetchesAMissingReceiptOnRedelivery(t *testing.T) {
	dir := t.TempDir()
	keys, _ := auth.DeriveKeys(make([]byte, 32))
	clk := clock.NewFake(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	billing := core.Billing{Enabled: true, Currency: "USD", BootstrapCredit: 10_000_000, TopupExpiry: time.Hour}
	settings := core.Settings{Region: "global", MediaURL: "ws://127.0.0.1:1/rtc",
		DefaultLimits: core.Limits{MaxActiveRooms: 1, MaxActiveParticipants: 1, MaxParticipantsPerRoom: 1,
			RoomCreatesPerMinute: 1, ParticipantCreatesPerMinute: 1, ConnectRequestsPerMinute: 1},
		ConnectPerIPPerMinute: 1, MediaTokenTTL: time.Minute, SnapshotEveryEvents: 1000, Billing: billing}
	open := func() (*persistence.Store, *Engine) {
		store, err := persistence.Open(dir, persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
		if err != nil {
			t.Fatal(err)
		}
		if ok, _ := Initialized(store); !ok {
			if _, err := Bootstrap(store, keys, clk, billing, "owner@example.com"); err != nil {
				t.Fatal(err)
			}
		}
		e, err := New(settings, store, clk, ratelimit.NewMemory(), keys, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(); err != nil {
			t.Fatal(err)
		}
		return store, e
	}
	store, e := open()
	var caller *core.Caller
	e.env.APIKeys.Range(func(rec *core.KeyRecord) { // the bootstrap key is the only one
		caller = &core.Caller{ProjectID: rec.ProjectID, ActorType: "api_key", ActorID: rec.KeyID, Scopes: rec.Scopes}
	})
	account := e.limitsAccount(caller)
	amount := "25.00"
	checkout := func(context.Context, string, string, money.Micros, string, string, time.Time) (Checkout, error) {
		return Checkout{Provider: "stripe", ProviderRef: "cs_test_1", AuthorizeURL: "https://checkout.example/cs_test_1"}, nil
	}
	res, aerr := e.CreateTopup(context.Background(), caller, &TopupParams{Amount: &amount}, checkout)
	if aerr != nil {
		t.Fatal(aerr)
	}
	paymentID := decodeTopup(t, res.Body).PaymentID
	paid := wallet.PaymentUpdate{Provider: "stripe", ProviderEventID: "evt_1", PaymentID: paymentID, ProviderRef: "cs_test_1",
		Status: wallet.PaymentSucceeded, Amount: 25_000_000, At: clk.Now()}

	var asked []string
	lookup := func(url string, err error) ReceiptFunc {
		return func(_ context.Context, ref string) (string, error) {
			asked = append(asked, ref)
			return url, err
		}
	}
	state := func(e *Engine) (wallet.Topup, money.Micros) {
		w, _ := e.wallet(account)
		r := e.ask(w.pid, wallet.Read{})
		return e.ask(w.pid, wallet.GetTopup{PaymentID: paymentID}).Value.(wallet.Topup), money.Micros(r.Value.(wallet.Reading).Balance)
	}

	// The provider's API fails: credited anyway, answered 503.
	aerr = e.ApplyPayment(context.Background(), paid, lookup("", errors.New("stripe is down")))
	if aerr == nil || aerr.Code != apierr.ServiceUnavailable || apierr.StatusOf(aerr) != 503 {
		t.Fatalf("ApplyPayment with the receipt lookup failing = %v, want 503 service_unavailable", aerr)
	}
	if top, bal := state(e); top.Status != wallet.PaymentSucceeded || top.ReceiptURL != "" || bal != 35_000_000 {
		t.Fatalf("after a failed lookup: %s, receipt %q, balance %s; want succeeded, no receipt, 35.00", top.Status, top.ReceiptURL, bal)
	}

	// The provider delivers it again: the receipt, no second credit.
	const receipt = "https://pay.stripe.example/receipts/1"
	if aerr := e.ApplyPayment(context.Background(), paid, lookup(receipt, nil)); aerr != nil {
		t.Fatalf("redelivery: %v", aerr)
	}
	if top, bal := state(e); top.Status != wallet.PaymentSucceeded || top.ReceiptURL != receipt || bal != 35_000_000 {
		t.Fatalf("after the redelivery: %s, receipt %q, balance %s; want succeeded, the receipt, 35.00", top.Status, top.ReceiptURL, bal)
	}
	if len(asked) != 2 || asked[0] != "cs_test_1" || asked[1] != "cs_test_1" {
		t.Fatalf("lookups asked for %v, want the session twice", asked)
	}
	body, err := store.Get(persistence.Key(persistence.PrefixTopup, account+"/"+paymentID))
	if err != nil || decodeTopup(t, body).ReceiptURL != receipt {
		t.Fatalf("stored top-up record %s (%v) lacks the receipt", body, err)
	}

	// After a restart the receipt is still there (recovered from the
	// journal), and a further delivery asks the provider nothing.
	e.Stop()
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	store, e = open()
	defer func() { e.Stop(); _ = store.Close() }()
	if top, bal := state(e); top.ReceiptURL != receipt || bal != 35_000_000 {
		t.Fatalf("after a restart: receipt %q, balance %s", top.ReceiptURL, bal)
	}
	if aerr := e.ApplyPayment(context.Background(), paid, lookup("https://other.example/", nil)); aerr != nil {
		t.Fatalf("delivery after the receipt: %v", aerr)
	}
	if len(asked) != 2 {
		t.Fatalf("a delivery for a top-up that has its receipt asked the provider (%v)", asked)
	}
	if top, bal := state(e); top.ReceiptURL != receipt || bal != 35_000_000 {
		t.Fatalf("after a further delivery: receipt %q, balance %s", top.ReceiptURL, bal)
	}
}

// decodeTopup reads a stored or returned top-up view.
func decodeTopup(t *testing.T, body []byte) struct{ PaymentID, ReceiptURL string } {
	t.Helper()
	var v struct {
		PaymentID  string `json:"payment_id"`
		ReceiptURL string `json:"receipt_url"`
	}
	if err := jsonUnmarshal(body, &v); err != nil || v.PaymentID == "" {
		t.Fatalf("top-up %s: %v", body, err)
	}
	return struct{ PaymentID, ReceiptURL string }{v.PaymentID, v.ReceiptURL}
}
