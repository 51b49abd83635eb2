package metrics

import "github.com/prometheus/client_golang/prometheus"

// Credit states, the credit_state, from and to labels of the billing
// families (actors/wallet's CreditNormal, CreditLow, CreditExhausted).
var CreditStates = []string{"normal", "low", "exhausted"}

// Top-up outcomes, the outcome label of rtcd_billing_topups_total: created,
// or the status a provider's callback (or the expiry) moved it to.
var TopupOutcomes = []string{"created", "succeeded", "failed", "canceled", "expired", "refunded"}

// Settlement kinds, the kind label of rtcd_billing_settlements_total.
const (
	SettlementRunning = "running" // a running session's usage so far, each settle interval
	SettlementFinal   = "final"   // a session's last usage, when it ends
)

// Billing are the collectors of usage, credit and top-ups, moved by the
// rooms (settlements) and the wallets (charges, credit states, top-ups).
type Billing struct {
	settlements    *prometheus.CounterVec
	chargesApplied prometheus.Counter
	transitions    *prometheus.CounterVec
	topups         *prometheus.CounterVec
	workspaces     *prometheus.GaugeVec
}

func newBilling(r *prometheus.Registry) *Billing {
	b := &Billing{
		settlements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rtcd_billing_settlements_total",
			Help: "Usage settlements of participant sessions written by rooms, by kind: running (each settle interval) or final (the session ended).",
		}, []string{"kind"}),
		chargesApplied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rtcd_billing_charges_applied_total",
			Help: "Usage charges applied to a workspace's balance (each a ledger entry).",
		}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rtcd_billing_credit_transitions_total",
			Help: "Moves of a workspace's credit state, by the state left and the state entered.",
		}, []string{"from", "to"}),
		topups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rtcd_billing_topups_total",
			Help: "Top-ups created, and moved to a final status by the provider or the expiry, by outcome.",
		}, []string{"outcome"}),
		workspaces: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rtcd_billing_workspaces",
			Help: "Workspaces (wallets running in this process), by credit state.",
		}, []string{"credit_state"}),
	}
	b.settlements.WithLabelValues(SettlementRunning)
	b.settlements.WithLabelValues(SettlementFinal)
	for _, from := range CreditStates {
		b.workspaces.WithLabelValues(from)
		for _, to := range CreditStates {
			if from != to {
				b.transitions.WithLabelValues(from, to)
			}
		}
	}
	for _, o := range TopupOutcomes {
		b.topups.WithLabelValues(o)
	}
	r.MustRegister(b.settlements, b.chargesApplied, b.transitions, b.topups, b.workspaces)
	return b
}

// Settled counts one usage settlement of kind.
func (b *Billing) Settled(kind string) { b.settlements.WithLabelValues(kind).Inc() }

// ChargesApplied counts n usage charges applied to a balance.
func (b *Billing) ChargesApplied(n int) { b.chargesApplied.Add(float64(n)) }

// CreditMoved counts a workspace's move from credit state from to to.
func (b *Billing) CreditMoved(from, to string) { b.transitions.WithLabelValues(from, to).Inc() }

// Topup counts a top-up's outcome.
func (b *Billing) Topup(outcome string) { b.topups.WithLabelValues(outcome).Inc() }

// WorkspaceIn moves one workspace in the credit state gauge from state
// from to state to; "" is outside it (not counted yet).
func (b *Billing) WorkspaceIn(from, to string) {
	if from == to {
		return
	}
	if from != "" {
		b.workspaces.WithLabelValues(from).Dec()
	}
	if to != "" {
		b.workspaces.WithLabelValues(to).Inc()
	}
}
