package metrics

import "github.com/prometheus/client_golang/prometheus"

// RateLimitNames are the named rate limits rtcd enforces (the limit_name of
// their 429 details, docs/api.md), the limit label of
// rtcd_rate_limit_rejections_total.
var RateLimitNames = []string{
	"connect_requests_per_minute",
	"connect_per_ip_per_minute",
	"room_creates_per_minute",
	"participant_creates_per_minute",
	"api_key_creates_per_minute",
	"webhook_endpoint_creates_per_minute",
	"topup_creates_per_minute",
	"sign_in_starts_per_ip_per_minute",
	"sign_in_attempts_per_ip_per_minute",
	"invitations_per_hour_per_account",
	"invitations_per_hour_per_user",
	"sign_in_mails_per_address_per_hour",
}

// RateLimits counts refusals by rate limits, where the owner of the limit
// decides them.
type RateLimits struct {
	rejections *prometheus.CounterVec
	// localDecisions and storeReachable watch the shared counter store
	// (Redis, --rate-limit-store=redis): while it does not answer, each
	// node decides by its own counters.
	localDecisions prometheus.Counter
	storeReachable prometheus.Gauge
}

func newRateLimits(r *prometheus.Registry) *RateLimits {
	l := &RateLimits{rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rtcd_rate_limit_rejections_total",
		Help: "Requests refused by a rate limit (429, or a sign-in mail not sent), by limit name.",
	}, []string{"limit"})}
	for _, name := range RateLimitNames {
		l.rejections.WithLabelValues(name)
	}
	l.localDecisions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "rtcd_rate_limit_local_decisions_total",
		Help: "Rate-limit decisions made by this node's own counters because the shared store (Redis) did not answer.",
	})
	l.storeReachable = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rtcd_rate_limit_store_reachable",
		Help: "1 while the rate-limit counter store answers (always 1 for the in-process store), 0 while decisions are local.",
	})
	l.storeReachable.Set(1)
	r.MustRegister(l.rejections, l.localDecisions, l.storeReachable)
	return l
}

// DecidedLocally counts one decision made by the node's own counters.
func (l *RateLimits) DecidedLocally() { l.localDecisions.Inc() }

// StoreReachable records whether the shared counter store answers.
func (l *RateLimits) StoreReachable(reachable bool) {
	if reachable {
		l.storeReachable.Set(1)
	} else {
		l.storeReachable.Set(0)
	}
}

// Rejected counts one refusal by the limit named name (a name of
// RateLimitNames: the callers pass constants).
func (l *RateLimits) Rejected(name string) { l.rejections.WithLabelValues(name).Inc() }
