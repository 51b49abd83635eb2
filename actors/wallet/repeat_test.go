package wallet

import (
	"rtcd/actors/core/coretest"
	"testing"
	"time"

	"rtcd/actors/core"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/internal/walgate"
	"rtcd/persistence"
	"rtcd/ratelimit"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// answerTimeout bounds the wait for an answer that must come once its
// batch is durable.
const answerTimeout = 10 * time.Second

// A repeated success callback, arriving while the first one's credit waits
// for its fsync, changes nothing, but must not be answered before that
// credit is durable: told 200, the provider stops delivering, and a crash
// would lose the credit for good. Found by the crash simulation (package
// sim): the duplicate was answered at once.
func TestRepeatedCallbackIsAnsweredOnceTheFirstIsDurable(t *testing.T) {
	gate := walgate.Wrap(vfs.NewMem())
	store, err := persistence.OpenWith("db", persistence.Options{FS: gate.FS}, persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gate.Release(); _ = store.Close() })
	keys, err := auth.DeriveKeys(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	billing := core.Billing{Enabled: true, Currency: "USD", TopupExpiry: time.Hour}
	env, err := core.NewEnv(core.Settings{Billing: billing}, store, clock.NewFake(coretest.T0), ratelimit.NewMemory(), keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := store.NewBatch()
	Genesis(b, Account{ID: "acct_1", ProjectIDs: []string{"prj_1"}, CreatedAt: coretest.T0}, billing, 0, coretest.T0)
	if err := store.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	a := New(env, "acct_1", &core.CreditGate{}, nil).(*walletActor)
	a.recover()

	ask := func(run func(*core.Envelope)) <-chan core.Reply {
		req, answer := core.NewEnvelope(nil)
		run(req)
		return answer
	}
	await := func(what string, answer <-chan core.Reply) core.Reply {
		t.Helper()
		select {
		case r := <-answer:
			if r.Err != nil {
				t.Fatalf("%s: %v", what, r.Err)
			}
			return r
		case <-time.After(answerTimeout):
			t.Fatalf("%s was not answered", what)
			return core.Reply{}
		}
	}
	topup := Topup{PaymentID: "pay_1", ProjectID: "prj_1", Amount: 5_000_000, Currency: "USD", Provider: "sandbox", CreatedAt: coretest.T0, ExpiresAt: coretest.T0.Add(time.Hour)}
	await("the top-up", ask(func(r *core.Envelope) { a.createTopup(CreateTopup{Topup: topup}, r) }))

	gate.Hold()
	success := ApplyPayment{Update: PaymentUpdate{Provider: "sandbox", PaymentID: "pay_1", Status: PaymentSucceeded, At: coretest.T0}}
	first := ask(func(r *core.Envelope) { a.applyPayment(success, r) })
	repeat := ask(func(r *core.Envelope) { a.applyPayment(success, r) })
	wrong := success
	wrong.Update.Amount = 1 // a success for another amount: never credited, and answered alike
	mismatch := ask(func(r *core.Envelope) { a.applyPayment(wrong, r) })
	for what, answer := range map[string]<-chan core.Reply{"the first callback": first, "its repeat": repeat, "a mismatched amount": mismatch} {
		select {
		case r := <-answer:
			t.Fatalf("%s was answered (%d %s) before the credit was durable", what, r.Status, r.Body)
		default:
		}
	}
	gate.Release()
	await("the first callback", first)
	await("its repeat", repeat)
	await("a mismatched amount", mismatch)
	if a.state.Balance != topup.Amount {
		t.Fatalf("balance %d, want the top-up credited once (%d)", a.state.Balance, topup.Amount)
	}
}
