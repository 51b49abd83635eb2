package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Webhook attempt outcomes, the outcome label of rtcd_webhook_attempts_total
// and rtcd_webhook_attempt_duration_seconds (webhookdelivery.Attempt.Outcome
// gives one of them).
var WebhookAttemptOutcomes = []string{"succeeded", "http_error", "timeout", "network_error", "refused"}

// Backlog statuses of a webhook delivery, the status label of
// rtcd_webhook_backlog_deliveries.
const (
	BacklogPending  = "pending"
	BacklogRetrying = "retrying"
)

// webhookBucketsSeconds spans a fast receiver (5 ms) to the longest
// attempt timeout an operator may configure (--webhook-timeout-seconds, at
// most 60; 10 by default), so attempts that time out land in their own
// bucket rather than in +Inf.
var webhookBucketsSeconds = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60}

// Webhooks are the webhook dispatcher's collectors. The fan-out loop and
// the endpoint workers (actors/dispatch) move them where deliveries are
// created and attempted.
type Webhooks struct {
	attempts       *prometheus.CounterVec
	attemptSeconds *prometheus.HistogramVec
	created        prometheus.Counter
	dead           prometheus.Counter
	// backlog and oldestAge are read at scrape time from the dispatcher
	// (SetSources); nil until it starts, and the gauges read 0.
	backlog   atomic.Pointer[func() Backlog]
	oldestAge atomic.Pointer[func() float64]
}

// Backlog is the number of undelivered deliveries of enabled endpoints.
type Backlog struct{ Pending, Retrying int64 }

func newWebhooks(r *prometheus.Registry) *Webhooks {
	w := &Webhooks{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rtcd_webhook_attempts_total",
			Help: "Webhook delivery attempts, by outcome: succeeded (2xx), http_error (another status), timeout, network_error, refused (destination not allowed).",
		}, []string{"outcome"}),
		attemptSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rtcd_webhook_attempt_duration_seconds",
			Help:    "Time from sending a webhook request to its response headers or its failure, by outcome.",
			Buckets: webhookBucketsSeconds,
		}, []string{"outcome"}),
		created: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rtcd_webhook_deliveries_created_total",
			Help: "Webhook deliveries created: one per event and subscribed, enabled endpoint.",
		}),
		dead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rtcd_webhook_deliveries_dead_total",
			Help: "Webhook deliveries that became dead: their retry schedule ran out (or a manual retry failed).",
		}),
	}
	for _, o := range WebhookAttemptOutcomes {
		w.attempts.WithLabelValues(o)
		w.attemptSeconds.WithLabelValues(o)
	}
	backlog := func(status string, count func(Backlog) int64) prometheus.GaugeFunc {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "rtcd_webhook_backlog_deliveries",
			Help:        "Webhook deliveries of enabled endpoints not delivered yet, by status: pending (never attempted) or retrying (failed, next attempt scheduled).",
			ConstLabels: prometheus.Labels{"status": status},
		}, func() float64 {
			if f := w.backlog.Load(); f != nil {
				return float64(count((*f)()))
			}
			return 0
		})
	}
	oldest := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rtcd_webhook_oldest_undelivered_age_seconds",
		Help: "Age of the oldest webhook event not delivered yet (in the outbox, or a pending or retrying delivery); 0 when there is none.",
	}, func() float64 {
		if f := w.oldestAge.Load(); f != nil {
			return (*f)()
		}
		return 0
	})
	r.MustRegister(w.attempts, w.attemptSeconds, w.created, w.dead, oldest,
		backlog(BacklogPending, func(b Backlog) int64 { return b.Pending }),
		backlog(BacklogRetrying, func(b Backlog) int64 { return b.Retrying }))
	return w
}

// Attempt counts one delivery attempt of outcome that took seconds.
func (w *Webhooks) Attempt(outcome string, seconds float64) {
	w.attempts.WithLabelValues(outcome).Inc()
	w.attemptSeconds.WithLabelValues(outcome).Observe(seconds)
}

// Created counts n new deliveries.
func (w *Webhooks) Created(n int) { w.created.Add(float64(n)) }

// Dead counts a delivery that became dead.
func (w *Webhooks) Dead() { w.dead.Inc() }

// SetSources sets what rtcd_webhook_backlog_deliveries and
// rtcd_webhook_oldest_undelivered_age_seconds read at scrape time.
func (w *Webhooks) SetSources(backlog func() Backlog, oldestAgeSeconds func() float64) {
	w.backlog.Store(&backlog)
	w.oldestAge.Store(&oldestAgeSeconds)
}
