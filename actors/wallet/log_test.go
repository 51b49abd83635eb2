package wallet

import (
	"rtcd/actors/core/coretest"
	"strings"
	"testing"

	"rtcd/actors/core"
	"rtcd/persistence"
)

// refuses checks that Apply fails with an error saying want and leaves the
// state exactly as it was.
func refuses(t *testing.T, name, want string, s *walletState, e *walletEvent) {
	t.Helper()
	before := string(core.Encode(s))
	err := s.Apply(e)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: Apply: %v, want an error saying %q", name, err, want)
	}
	if after := string(core.Encode(s)); after != before {
		t.Fatalf("%s: a refused event changed the state:\nbefore %s\nafter  %s", name, before, after)
	}
}

// The wallet's Apply refuses, changing nothing, an event of no kind it
// knows and an event naming a top-up it does not hold.
func TestApplyRefusesUnknownAndDanglingEvents(t *testing.T) {
	fresh := func() *walletState { return newWalletState(Account{ID: "acct_1"}, CreditNormal) }
	refuses(t, "no kind", "no kind", fresh(), &walletEvent{})
	refuses(t, "unknown top-up", "no top-up pay_9", fresh(),
		&walletEvent{TopupUpdated: &topupUpdated{PaymentID: "pay_9", Status: PaymentSucceeded}})
}

func countKeys(t *testing.T, s persistence.Storage, prefix []byte) int {
	t.Helper()
	n := 0
	if err := s.Scan(prefix, 0, func(_, _ []byte) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	return n
}

// A wallet's first state, as Genesis writes it (with and without an
// opening credit), is what its actor recovers; the opening credit is a
// ledger entry, so the ledger sums to the balance from the start.
func TestGenesisIsWhatRecoveryReads(t *testing.T) {
	store, err := persistence.OpenWith(t.TempDir(), persistence.Options{}, persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	billing := core.Billing{Enabled: true, Currency: "USD", MinimumCreditToStart: 1_000_000, LowCreditThreshold: 5_000_000}
	b := store.NewBatch()
	funded := Genesis(b, Account{ID: "acct_1", ProjectIDs: []string{"prj_1"}, CreatedAt: coretest.T0}, billing, 2_000_000, coretest.T0)
	empty := Genesis(b, Account{ID: "acct_2", CreatedAt: coretest.T0}, billing, 0, coretest.T0)
	if err := store.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	if funded.Balance != 2_000_000 || funded.CreditState != CreditLow || empty.Balance != 0 || empty.CreditState != CreditExhausted {
		t.Fatalf("genesis: %+v, %+v", funded, empty)
	}
	for id, want := range map[string]*walletState{"acct_1": funded, "acct_2": empty} {
		log, err := core.RecoverLog(store, Journal(id), 1000, func() *walletState { return &walletState{} }, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, w := string(core.Encode(log.State())), string(core.Encode(want)); got != w {
			t.Fatalf("%s recovered %s\nwant %s", id, got, w)
		}
		if _, err := store.Get(persistence.Key(persistence.PrefixAccount, id)); err != nil {
			t.Fatalf("a/%s: %v", id, err)
		}
	}
	if n := countKeys(t, store, persistence.IndexPrefix(persistence.PrefixLedger, "acct_1")); n != 1 {
		t.Fatalf("%d ledger entries for the opening credit, want 1", n)
	}
	if n := countKeys(t, store, persistence.IndexPrefix(persistence.PrefixLedger, "acct_2")); n != 0 {
		t.Fatalf("%d ledger entries without an opening credit, want 0", n)
	}
}
