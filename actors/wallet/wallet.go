package wallet

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/goccy/go-json"
	"rtcd/actors/core"
	"rtcd/apierr"
	"rtcd/ids"
	"rtcd/money"
	"rtcd/persistence"
)

// Credit states (GET /v1/billing/pricing credit_state). The gate is closed
// only in exhausted: below minimum_credit_to_start no new participant
// session or connect starts; sessions already running keep going.
const (
	CreditNormal    = "normal"    // balance >= low_credit_threshold
	CreditLow       = "low"       // minimum_credit_to_start <= balance < low_credit_threshold
	CreditExhausted = "exhausted" // balance < minimum_credit_to_start
)

// Ledger entry types.
const (
	LedgerTopup      = "topup"
	LedgerUsage      = "usage"
	LedgerRefund     = "refund"
	LedgerAdjustment = "adjustment"
)

// Top-up (payment) statuses.
const (
	PaymentPending   = "pending"
	PaymentSucceeded = "succeeded"
	PaymentFailed    = "failed"
	PaymentExpired   = "expired"
	PaymentCanceled  = "canceled"
	PaymentRefunded  = "refunded"
)

// Named bounds of the wallet.
const (
	// TopupMinMicros and TopupMaxMicros are the spec's 5.00 to 10000.00.
	TopupMinMicros = 5 * money.MicrosPerUnit
	TopupMaxMicros = 10000 * money.MicrosPerUnit
	// TopupMaxDecimals is the spec's "at most 2 decimals".
	TopupMaxDecimals = 2
	// chargesPerApply bounds how many pending usage charges one wallet step
	// applies, so one step's batch stays small; the rest follow next step.
	chargesPerApply = 1000
	// writesPerCharge are the writes applying one charge takes: its
	// ledger event, its lg/ record and the deletion of its pc/ entry.
	writesPerCharge = 3
	// journalWritesReserved are the writes a batch of the wallet's
	// journal may take besides its records: a snapshot, and the
	// journal's head on a store that fences (JetStream).
	journalWritesReserved = 2
	// MaxAdjustmentReasonBytes bounds an operator adjustment's reason.
	MaxAdjustmentReasonBytes = 256
)

// CreditStateOf is the pure rule from a balance to a credit state.
func CreditStateOf(b *core.Billing, balance int64) string {
	switch {
	case balance < int64(b.MinimumCreditToStart):
		return CreditExhausted
	case balance < int64(b.LowCreditThreshold):
		return CreditLow
	default:
		return CreditNormal
	}
}

// Account is a workspace's own record.
type Account struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	ProjectIDs []string  `json:"project_ids"`
	CreatedAt  time.Time `json:"created_at"`
}

// LedgerEntry is one change of a wallet's balance; the balance is always
// the sum of all entries.
type LedgerEntry struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Amount       int64          `json:"amount"` // micro-units, signed
	BalanceAfter int64          `json:"balance_after"`
	Description  string         `json:"description"`
	Reference    map[string]any `json:"reference"`
	CreatedAt    time.Time      `json:"created_at"`
}

// Topup is a top-up (payment) record.
type Topup struct {
	PaymentID      string    `json:"payment_id"`
	ProjectID      string    `json:"project_id"` // the project whose key created it; its webhooks hear payment.*
	Amount         int64     `json:"amount"`
	Currency       string    `json:"currency"`
	Method         string    `json:"method"`
	Status         string    `json:"status"`
	Provider       string    `json:"provider"`
	ProviderRef    string    `json:"provider_ref"`
	AuthorizeURL   string    `json:"authorize_url"`
	ReceiptURL     string    `json:"receipt_url"`
	CreatedAt      time.Time `json:"created_at"`
	ExpiresAt      time.Time `json:"expires_at"`
	CompletedAt    time.Time `json:"completed_at"`
	RefundedAmount int64     `json:"refunded_amount"`
}

// walletEvent is one entry of a wallet's journal. Exactly one field is set.
type walletEvent struct {
	LedgerEntryAdded   *LedgerEntry        `json:"ledger_entry_added,omitempty"`
	CreditStateChanged *creditStateChanged `json:"credit_state_changed,omitempty"`
	TopupCreated       *Topup              `json:"topup_created,omitempty"`
	TopupUpdated       *topupUpdated       `json:"topup_updated,omitempty"`
	ReceiptAdded       *receiptAdded       `json:"receipt_added,omitempty"`
	ProjectAdded       *projectAdded       `json:"project_added,omitempty"`
}

type creditStateChanged struct {
	To string    `json:"to"`
	At time.Time `json:"at"`
}

type topupUpdated struct {
	PaymentID      string    `json:"payment_id"`
	Status         string    `json:"status"`
	ReceiptURL     string    `json:"receipt_url,omitempty"`
	RefundedAmount int64     `json:"refunded_amount,omitempty"`
	At             time.Time `json:"at"`
}

// receiptAdded is the receipt address of a top-up that succeeded without
// one (its provider could not be asked at the time).
type receiptAdded struct {
	PaymentID  string `json:"payment_id"`
	ReceiptURL string `json:"receipt_url"`
}

type projectAdded struct {
	ProjectID string `json:"project_id"`
}

// walletState is everything a wallet actor owns. It is also its snapshot.
type walletState struct {
	Account     Account           `json:"account"`
	Balance     int64             `json:"balance"`
	CreditState string            `json:"credit_state"`
	Topups      map[string]*Topup `json:"topups"`
}

func newWalletState(a Account, creditState string) *walletState {
	return &walletState{Account: a, CreditState: creditState, Topups: make(map[string]*Topup)}
}

// Genesis writes a new workspace's wallet into b: its a/ entry (the
// directory of wallets recovery reads) and its first snapshot (sequence 0):
// the account, and a balance of openingCredit, entered in the ledger as an
// operator's adjustment with its lg/ record so the ledger always sums to
// the balance, in the credit state of that balance. Every wallet starts
// here: bootstrap's (with the configured opening credit) and each new
// workspace's (with none).
func Genesis(b *persistence.Batch, account Account, billing core.Billing, openingCredit money.Micros, now time.Time) *walletState {
	s := newWalletState(account, CreditStateOf(&billing, 0))
	if openingCredit > 0 {
		entry := LedgerEntry{ID: ids.New(ids.Ledger), Type: LedgerAdjustment, Amount: int64(openingCredit),
			BalanceAfter: int64(openingCredit), Description: "opening credit of the first workspace",
			Reference: map[string]any{"type": "operator", "id": "rtcd init"}, CreatedAt: now}
		core.ApplyAll(s, walletEvent{LedgerEntryAdded: &entry},
			walletEvent{CreditStateChanged: &creditStateChanged{To: CreditStateOf(&billing, entry.BalanceAfter), At: now}})
		b.Set(persistence.IndexKey(persistence.PrefixLedger, account.ID, now.UnixNano(), entry.ID), core.MustJSON(LedgerView(&entry, billing.Currency)))
	}
	b.Set(persistence.Key(persistence.PrefixAccount, account.ID), nil)
	persistence.WriteSnapshotAt(b, Journal(account.ID), 0, core.Encode(s))
	return s
}

// Loaded completes a snapshot (maps JSON left nil).
func (s *walletState) Loaded() {
	if s.Topups == nil {
		s.Topups = make(map[string]*Topup)
	}
}

// Apply changes the state by one event; pure, and checking what it looks
// up, as roomState.Apply.
func (s *walletState) Apply(e *walletEvent) error {
	switch {
	case e.LedgerEntryAdded != nil:
		s.Balance = e.LedgerEntryAdded.BalanceAfter
	case e.CreditStateChanged != nil:
		s.CreditState = e.CreditStateChanged.To
	case e.TopupCreated != nil:
		t := *e.TopupCreated
		if _, dup := s.Topups[t.PaymentID]; dup {
			return fmt.Errorf("topup_created: top-up %s already exists", t.PaymentID)
		}
		s.Topups[t.PaymentID] = &t
	case e.TopupUpdated != nil:
		t, err := s.topup("topup_updated", e.TopupUpdated.PaymentID)
		if err != nil {
			return err
		}
		t.Status = e.TopupUpdated.Status
		t.CompletedAt = e.TopupUpdated.At
		if e.TopupUpdated.ReceiptURL != "" {
			t.ReceiptURL = e.TopupUpdated.ReceiptURL
		}
		t.RefundedAmount += e.TopupUpdated.RefundedAmount
	case e.ReceiptAdded != nil:
		t, err := s.topup("receipt_added", e.ReceiptAdded.PaymentID)
		if err != nil {
			return err
		}
		t.ReceiptURL = e.ReceiptAdded.ReceiptURL
	case e.ProjectAdded != nil:
		s.Account.ProjectIDs = append(s.Account.ProjectIDs, e.ProjectAdded.ProjectID)
	default:
		return core.ErrUnknownEvent
	}
	return nil
}

// topup is the top-up an event of kind names.
func (s *walletState) topup(kind, paymentID string) (*Topup, error) {
	t, ok := s.Topups[paymentID]
	if !ok {
		return nil, fmt.Errorf("%s: wallet %s has no top-up %s", kind, s.Account.ID, paymentID)
	}
	return t, nil
}

// The wallet's commands: plain values, sent in an Envelope that carries
// the answer.
type (
	// CreateTopup records a new pending top-up (the provider's checkout
	// was created outside any actor).
	CreateTopup struct {
		Topup Topup
	}
	// ApplyPayment applies a verified provider callback to its top-up.
	ApplyPayment struct {
		Update PaymentUpdate
	}
	// GetTopup asks for a copy of one top-up (the zero Topup when there
	// is none), in Reply.Value.
	GetTopup struct {
		PaymentID string
	}
	// Adjust is an operator's adjustment of the balance (micro-units).
	Adjust struct {
		Amount int64
		Reason string
		Actor  core.Actor
	}
	// Read asks for the balance and credit state (Reading, in
	// Reply.Value).
	Read struct{}
	// ReadState answers the wallet's state as its snapshot encodes it
	// (Reply.Value, []byte): for tests and the crash simulation, never
	// for a request.
	ReadState struct{}
)

// PaymentUpdate is a verified provider callback, already mapped to a
// payment.
type PaymentUpdate struct {
	Provider        string // the provider whose verified callback this is
	ProviderEventID string
	PaymentID       string
	ProviderRef     string // the provider's object the callback is about (the checkout for a success)
	Status          string // succeeded, failed, canceled, expired, refunded
	Amount          int64  // for refunded: the total refunded so far (micro-units); else the paid amount
	ReceiptURL      string
	At              time.Time
}

// Reading is a wallet's balance and credit state.
type Reading struct {
	Balance     int64
	CreditState string
}

// walletActor owns one workspace's prepaid balance, its ledger, its credit
// state and its top-ups.
type walletActor struct {
	env       *core.Env
	id        string           // account id
	gate      *core.CreditGate // what the wallet publishes
	log       *core.Log[walletEvent, *walletState]
	state     *walletState   // log.State()
	recovery  *core.Recovery // nil when created at run time
	recovered bool
	// countedIn is the credit state this wallet is counted in by
	// rtcd_billing_workspaces ("" before its first publish). It lives
	// across a restart of the actor, so a restart never counts it twice.
	countedIn string
}

// New is the wallet actor of workspace id, which publishes gate. It
// recovers from its snapshot and journal when it starts; rec is the
// start-up recovery that waits for it, nil for one created at run time.
func New(env *core.Env, id string, gate *core.CreditGate, rec *core.Recovery) actor.Actor {
	return &walletActor{env: env, id: id, gate: gate, recovery: rec}
}

// Receive runs one message on the wallet's goroutine.
func (a *walletActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.recover()
	case *core.Envelope:
		switch c := m.Msg.(type) {
		case CreateTopup:
			a.createTopup(c, m)
		case ApplyPayment:
			a.applyPayment(c, m)
		case GetTopup:
			var t Topup
			if found := a.state.Topups[c.PaymentID]; found != nil {
				t = *found
			}
			m.Respond(core.Reply{Value: t})
		case Adjust:
			a.adjust(c, m)
		case Read:
			m.Respond(core.Reply{Value: Reading{Balance: a.state.Balance, CreditState: a.state.CreditState}})
		case ReadState:
			m.Respond(core.Reply{Value: core.Encode(a.state)})
		default:
			core.RefuseUnknown(m)
		}
	case core.ApplyCharges:
		a.applyCharges()
	case core.AddProject:
		a.addProject(m)
	case core.Sweep:
		a.applyCharges()
		a.expireTopups()
	}
}

func (a *walletActor) recover() {
	first := !a.recovered
	a.recovered = true
	err := a.load()
	switch {
	case first && a.recovery != nil:
		a.recovery.Done(err)
	case err != nil:
		slog.Error("wallet recovery failed", "account_id", a.id, "error", err)
	}
}

// load recovers the wallet's state, publishes its credit gate and applies
// the charges rooms wrote while it was down.
func (a *walletActor) load() error {
	a.log, a.state = nil, nil // nothing in memory survives a failed recovery
	log, err := core.RecoverLog(a.env.Store, Journal(a.id), a.env.Settings.SnapshotEveryEvents,
		func() *walletState { return &walletState{} }, nil)
	if err != nil {
		return err
	}
	a.log, a.state = log, log.State()
	// Thresholds come from configuration: when an operator changed them, the
	// state moves now (with its webhook event), not at the next entry.
	if want := CreditStateOf(&a.env.Settings.Billing, a.state.Balance); want != a.state.CreditState {
		b := a.env.Store.NewBatch()
		now := a.env.Clock.Now()
		before := a.state.CreditState
		a.record(b, walletEvent{CreditStateChanged: &creditStateChanged{To: want, At: now}})
		a.emitCredit(b, before, want, now)
		a.env.Metrics.Billing.CreditMoved(before, want)
		a.env.Store.Commit(b, nil)
	}
	a.publish()
	a.applyCharges() // charges written while the wallet was down
	return nil
}

// publish opens or closes the credit gate for the current credit state, and
// moves the wallet to that state in rtcd_billing_workspaces.
func (a *walletActor) publish() {
	a.gate.Set(a.env.Settings.Billing.Enabled && a.state.CreditState == CreditExhausted)
	a.env.Metrics.Billing.WorkspaceIn(a.countedIn, a.state.CreditState)
	a.countedIn = a.state.CreditState
}

// record appends events to the wallet's journal in b and applies them.
func (a *walletActor) record(b *persistence.Batch, events ...walletEvent) { a.log.Record(b, events...) }

// addLedgerEntry records a balance change, its ledger record, and any credit
// state move with its webhook events, all into b.
func (a *walletActor) addLedgerEntry(b *persistence.Batch, typ string, amount int64, description string, ref map[string]any) LedgerEntry {
	now := a.env.CreatedAt()
	entry := LedgerEntry{
		ID: ids.New(ids.Ledger), Type: typ, Amount: amount, BalanceAfter: a.state.Balance + amount,
		Description: description, Reference: ref, CreatedAt: now,
	}
	before := a.state.CreditState
	a.record(b, walletEvent{LedgerEntryAdded: &entry})
	b.Set(persistence.IndexKey(persistence.PrefixLedger, a.id, now.UnixNano(), entry.ID), core.MustJSON(LedgerView(&entry, a.env.Settings.Billing.Currency)))
	after := CreditStateOf(&a.env.Settings.Billing, a.state.Balance)
	if after != before {
		a.record(b, walletEvent{CreditStateChanged: &creditStateChanged{To: after, At: now}})
		a.emitCredit(b, before, after, now)
		a.env.Metrics.Billing.CreditMoved(before, after)
	}
	return entry
}

// emitCredit writes the credit.* event of a state move to every project of
// the workspace (webhook endpoints belong to projects).
//
//	into exhausted (from normal or low)         credit.exhausted
//	normal -> low                               credit.low
//	any move to a better state (exhausted->low,
//	exhausted->normal, low->normal)             credit.restored
func (a *walletActor) emitCredit(b *persistence.Batch, from, to string, at time.Time) {
	rank := map[string]int{CreditExhausted: 0, CreditLow: 1, CreditNormal: 2}
	var typ string
	switch {
	case to == CreditExhausted:
		typ = core.EventCreditExhausted
	case to == CreditLow && from == CreditNormal:
		typ = core.EventCreditLow
	case rank[to] > rank[from]:
		typ = core.EventCreditRestored
	default:
		return
	}
	data := map[string]any{
		"account_id": a.id, "previous_state": from, "credit_state": to,
		"balance": money.Micros(a.state.Balance).Format(2), "currency": a.env.Settings.Billing.Currency,
	}
	for _, p := range a.state.Account.ProjectIDs {
		a.env.Outbox.Emit(b, p, typ, at, data)
	}
}

// applyCharges applies the usage charges rooms left for this wallet. Usage
// of running sessions always settles, even when the balance goes negative.
func (a *walletActor) applyCharges() {
	if a.state == nil {
		return
	}
	prefix := persistence.IndexPrefix(persistence.PrefixCharge, a.id)
	var charges []core.PendingCharge
	var keys [][]byte
	err := a.env.Store.Scan(prefix, chargesPerApply, func(key, value []byte) bool {
		var c core.PendingCharge
		if json.Unmarshal(value, &c) == nil {
			charges = append(charges, c)
		} else {
			slog.Error("unreadable pending charge; left in place", "key", string(key))
			return true
		}
		keys = append(keys, append([]byte(nil), key...))
		return true
	})
	if err != nil || len(charges) == 0 {
		return
	}
	b := a.env.Store.NewBatch()
	// On a store that takes a bounded number of writes a batch
	// (MaxBatchWrites: JetStream), stop before a charge whose writes, at
	// worst, would not fit; the next ApplyCharges takes the rest.
	maxWrites := a.env.Store.MaxBatchWrites()
	worstWrites := writesPerCharge + 1 + len(a.state.Account.ProjectIDs) // a credit move: its event, one outbox event per project
	applied := 0
	// A charge exists only for usage metered while billing was enabled, so
	// it is applied even if billing was switched off since.
	for i, c := range charges {
		if maxWrites > 0 && i > 0 && b.Writes()+worstWrites+journalWritesReserved > maxWrites {
			break
		}
		a.addLedgerEntry(b, LedgerUsage, -c.Amount, fmt.Sprintf("%d participant-seconds", c.Seconds), map[string]any{
			"type": "usage_charge", "id": c.ID, "project_id": c.ProjectID, "room_id": c.RoomID,
			"participant_id": c.ParticipantID, "session_id": c.SessionID, "participant_seconds": c.Seconds,
		})
		b.Delete(keys[i])
		applied++
	}
	a.env.Metrics.Billing.ChargesApplied(applied)
	a.publish()
	a.env.Store.Commit(b, nil)
	if applied < len(charges) || len(charges) == chargesPerApply {
		// More are waiting. Posted: a Send to its own bounded mailbox,
		// full, would block the wallet on itself.
		a.env.Registry.Post(core.WalletAddress(a.id), core.ApplyCharges{})
	}
}

func (a *walletActor) createTopup(m CreateTopup, r *core.Envelope) {
	t := m.Topup
	t.Status = PaymentPending
	b := a.env.Store.NewBatch()
	a.record(b, walletEvent{TopupCreated: &t})
	body := a.putTopupRecord(b, &t)
	b.Set(persistence.IndexKey(persistence.PrefixTopupIdx, a.id, t.CreatedAt.UnixNano(), t.PaymentID), []byte(t.PaymentID))
	b.Set(persistence.Key(persistence.PrefixPayment, t.PaymentID), []byte(a.id))
	a.env.Metrics.Billing.Topup("created")
	a.env.Store.Commit(b, func() { r.Respond(core.Reply{Status: 201, Body: body}) })
}

func (a *walletActor) putTopupRecord(b *persistence.Batch, t *Topup) []byte {
	body := core.MustJSON(TopupViewOf(t))
	b.Set(persistence.Key(persistence.PrefixTopup, a.id+"/"+t.PaymentID), body)
	return body
}

// ApplyPayment applies a verified provider callback. Only a successful
// payment of a pending top-up credits the wallet, so a repeated callback
// credits once; moves out of a final state are ignored (answered 200 so the
// provider stops retrying).
func (a *walletActor) applyPayment(m ApplyPayment, r *core.Envelope) {
	u := m.Update
	t, ok := a.state.Topups[u.PaymentID]
	if !ok {
		r.Respond(core.Reply{Err: apierr.New(apierr.InvalidRequest, "unknown payment %s", u.PaymentID)})
		return
	}
	if u.Provider != "" && u.Provider != t.Provider {
		r.Respond(core.Reply{Err: apierr.New(apierr.InvalidRequest, "payment %s was not made with %s", u.PaymentID, u.Provider)})
		return
	}
	b := a.env.Store.NewBatch()
	now := a.env.Clock.Now()
	var eventType string
	switch {
	case u.Status == PaymentSucceeded && u.Amount != 0 && u.Amount != t.Amount:
		// Never credit an amount other than the one the top-up asked for.
		b.Discard()
		slog.Error("payment succeeded with an amount other than the top-up's; not credited",
			"payment_id", t.PaymentID, "amount", u.Amount, "want", t.Amount)
		a.respondOnceDurable(r, core.MustJSON(TopupViewOf(t)))
		return
	// A success after the local expiry still credits: the money was taken.
	case (t.Status == PaymentPending || t.Status == PaymentExpired) && u.Status == PaymentSucceeded:
		a.addLedgerEntry(b, LedgerTopup, t.Amount, "top-up "+t.PaymentID, map[string]any{"type": "payment", "id": t.PaymentID})
		a.record(b, walletEvent{TopupUpdated: &topupUpdated{PaymentID: t.PaymentID, Status: PaymentSucceeded, ReceiptURL: u.ReceiptURL, At: now}})
		eventType = core.EventPaymentSucceeded
	case t.Status == PaymentPending && (u.Status == PaymentFailed || u.Status == PaymentCanceled || u.Status == PaymentExpired):
		a.record(b, walletEvent{TopupUpdated: &topupUpdated{PaymentID: t.PaymentID, Status: u.Status, At: now}})
		eventType = map[string]string{PaymentFailed: core.EventPaymentFailed, PaymentCanceled: core.EventPaymentCanceled, PaymentExpired: core.EventPaymentExpired}[u.Status]
	case (t.Status == PaymentSucceeded || t.Status == PaymentRefunded) && u.Status == PaymentRefunded &&
		refundTotal(u.Amount, t.Amount) > t.RefundedAmount:
		// Providers report the total refunded so far: debit the difference,
		// so partial refunds arriving one by one each debit once.
		refund := refundTotal(u.Amount, t.Amount) - t.RefundedAmount
		a.addLedgerEntry(b, LedgerRefund, -refund, "refund of "+t.PaymentID, map[string]any{"type": "payment", "id": t.PaymentID})
		a.record(b, walletEvent{TopupUpdated: &topupUpdated{PaymentID: t.PaymentID, Status: PaymentRefunded, RefundedAmount: refund, At: now}})
		eventType = core.EventPaymentRefunded
	case t.WantsReceipt(u.Provider) && t.Status != PaymentPending && t.Status != PaymentExpired &&
		u.Status == PaymentSucceeded && u.ReceiptURL != "":
		// A repeated success callback brings the receipt the first one
		// could not fetch: recorded, nothing credited, no event (the
		// payment.succeeded event was written with the credit).
		a.record(b, walletEvent{ReceiptAdded: &receiptAdded{PaymentID: t.PaymentID, ReceiptURL: u.ReceiptURL}})
	default:
		b.Discard()
		a.respondOnceDurable(r, core.MustJSON(TopupViewOf(t))) // duplicate or out-of-order: nothing to do
		return
	}
	body := a.putTopupRecord(b, t)
	if eventType != "" {
		a.env.Metrics.Billing.Topup(t.Status) // the status the callback (or the expiry) moved it to
		a.env.Outbox.Emit(b, t.ProjectID, eventType, now, map[string]any{
			"payment_id": t.PaymentID, "account_id": a.id, "amount": money.Micros(t.Amount).Format(2),
			"amount_refunded": money.Micros(t.RefundedAmount).Format(2),
			"currency":        t.Currency, "status": t.Status, "receipt_url": t.ReceiptURL,
		})
	}
	a.publish()
	a.env.Store.Commit(b, func() { r.Respond(core.Reply{Status: 200, Body: body}) })
}

// respondOnceDurable answers a callback that changed nothing, once every
// batch applied before it is durable (Store.AfterDurable). It changed
// nothing, but the state it reports may be a change still waiting for its
// fsync: a duplicate of a success arriving while the first one's credit is
// on its way to disk. Answered at once, the provider would stop
// delivering, and a crash then would lose the credit for good.
func (a *walletActor) respondOnceDurable(r *core.Envelope, body []byte) {
	if r == nil {
		return // the wallet's own expiry: nobody waits
	}
	a.env.Store.AfterDurable(func() { r.Respond(core.Reply{Status: 200, Body: body}) })
}

// wantsReceipt reports whether a success callback of provider for t should
// bring a receipt address: t is paid or about to be (a first success
// credits pending and expired top-ups), it was made with that provider,
// and it has no receipt yet.
func (t Topup) WantsReceipt(provider string) bool {
	switch t.Status {
	case PaymentPending, PaymentExpired, PaymentSucceeded, PaymentRefunded:
		return t.ReceiptURL == "" && t.Provider == provider
	}
	return false
}

// refundTotal is a reported refund total, bounded by the payment; a report
// without an amount means the whole payment.
func refundTotal(reported, paid int64) int64 {
	if reported <= 0 || reported > paid {
		return paid
	}
	return reported
}

// expireTopups moves unpaid top-ups past their expiry to expired.
func (a *walletActor) expireTopups() {
	if a.state == nil {
		return
	}
	now := a.env.Clock.Now()
	var expired []*Topup
	for _, t := range a.state.Topups {
		if t.Status == PaymentPending && !now.Before(t.ExpiresAt) {
			expired = append(expired, t)
		}
	}
	// In creation order, not Go's map order: a deterministic journal (and
	// outbox), so a run can be replayed exactly.
	slices.SortFunc(expired, func(a, b *Topup) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.PaymentID, b.PaymentID)
	})
	for _, t := range expired {
		a.applyPayment(ApplyPayment{Update: PaymentUpdate{PaymentID: t.PaymentID, Status: PaymentExpired, At: now}}, nil)
	}
}

func (a *walletActor) adjust(m Adjust, r *core.Envelope) {
	b := a.env.Store.NewBatch()
	entry := a.addLedgerEntry(b, LedgerAdjustment, m.Amount, m.Reason, map[string]any{"type": "operator", "id": m.Actor.ID})
	for _, p := range a.state.Account.ProjectIDs {
		a.env.Audit.Project(b, p, &core.Caller{ActorType: m.Actor.Type, ActorID: m.Actor.ID}, "billing.adjusted",
			core.AuditTarget{Type: "ledger_entry", ID: entry.ID},
			map[string]any{"account_id": a.id, "amount": money.Micros(m.Amount).Format(2), "reason": m.Reason})
	}
	a.publish()
	body := core.MustJSON(LedgerView(&entry, a.env.Settings.Billing.Currency))
	a.env.Store.Commit(b, func() { r.Respond(core.Reply{Status: 200, Body: body}) })
}

func (a *walletActor) addProject(m core.AddProject) {
	for _, p := range a.state.Account.ProjectIDs {
		if p == m.ProjectID {
			return
		}
	}
	b := a.env.Store.NewBatch()
	a.record(b, walletEvent{ProjectAdded: &projectAdded{ProjectID: m.ProjectID}})
	a.env.Store.Commit(b, nil)
}

// Replay is the state recovery rebuilds for the wallet of accountID from
// store, encoded as ReadState answers; it starts no actor and writes
// nothing (core.ReplayLog).
func Replay(store persistence.Storage, accountID string) ([]byte, error) {
	return core.ReplayLog(store, Journal(accountID), func() *walletState { return &walletState{} }, nil)
}

// Journal names a wallet's journal, snapshot and actor: wallet/<account_id>.
func Journal(accountID string) string { return "wallet/" + accountID }
