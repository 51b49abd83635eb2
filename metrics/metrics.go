// Package metrics owns rtcd's Prometheus collectors. They are registered on
// a registry created here and injected where needed (never promauto
// globals), and served on the metrics listener only, never on the API
// listener. Names follow Prometheus conventions: rtcd_ prefix, base units,
// _total for counters, histograms for latency.
//
// Every label takes its values from a named, finite set defined here or by
// the code that counts (a route pattern, an outcome, a credit state, a limit
// name), never from an identifier or from what a client sent, and each
// set's values are created at start so their series exist (at zero) before
// the first event: a rate over them is right from the first increment.
// The events are counted where they happen, by their owner (an actor, the
// webhook worker, the media node's hub), through the groups of collectors
// below (Webhooks, Billing, Media, RateLimits, Storage); docs/metrics.md
// says what each family means and what to alert on.
package metrics

import (
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// Metrics holds every collector of the service.
type Metrics struct {
	Registry       *prometheus.Registry
	HTTPRequests   *prometheus.CounterVec   // by route, method, status
	HTTPDuration   *prometheus.HistogramVec // by route, method, status
	ConnectResults *prometheus.CounterVec   // by code ("ok" or the error code)
	JournalApply   prometheus.Histogram
	JournalSync    prometheus.Histogram

	Webhooks   *Webhooks
	Billing    *Billing
	Media      *Media
	RateLimits *RateLimits
	Cluster    *Cluster
	Storage    *Storage

	// httpChildren are the HTTP collectors' children by route, method and
	// status, resolved once (ObserveHTTP runs on every request).
	httpChildren sync.Map // httpKey -> *httpChildren
}

// latencyBucketsSeconds spans 50µs to 30s: the connect path lives in the
// sub-millisecond buckets, fsync in the millisecond ones, and the top
// buckets reach the slowest things rtcd waits for, so a request stuck on
// them is measured rather than lumped into +Inf: an actor's answer
// (askTimeout, 10 s), a webhook attempt (--webhook-timeout-seconds, 10 s by
// default) and a client's connect deadline (15 s).
var latencyBucketsSeconds = []float64{
	0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
	5, 10, 15, 30,
}

// serverErrorStatuses are the 5xx statuses rtcd answers (apierr: internal
// 500, service_unavailable 503). InitRoutes creates their series for every
// route at start.
var serverErrorStatuses = []string{"500", "503"}

// New creates the collectors on a fresh registry, with Go runtime and
// process collectors.
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		HTTPRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rtcd_http_requests_total",
			Help: "HTTP requests answered, by route pattern, method and status code.",
		}, []string{"route", "method", "status"}),
		HTTPDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rtcd_http_request_duration_seconds",
			Help:    "Time from reading a request to writing its response, by route pattern, method and status code.",
			Buckets: latencyBucketsSeconds,
		}, []string{"route", "method", "status"}),
		ConnectResults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rtcd_connect_results_total",
			Help: "POST /v1/connect outcomes: ok, or the error code returned.",
		}, []string{"code"}),
		JournalApply: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "rtcd_journal_apply_duration_seconds",
			Help:    "Time to apply one state-change batch to the journal, without waiting for fsync.",
			Buckets: latencyBucketsSeconds,
		}),
		JournalSync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "rtcd_journal_sync_duration_seconds",
			Help:    "Time from applying a batch until its WAL fsync completed (group commit wait).",
			Buckets: latencyBucketsSeconds,
		}),
	}
	r.MustRegister(m.HTTPRequests, m.HTTPDuration, m.ConnectResults, m.JournalApply, m.JournalSync,
		newGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.Webhooks = newWebhooks(r)
	m.Billing = newBilling(r)
	m.Media = newMedia(r)
	m.RateLimits = newRateLimits(r)
	m.Cluster = newCluster(r)
	m.Storage = newStorage(r)
	return m
}

// RegisterBuildInfo registers rtcd_build_info: a constant 1 whose labels
// name the running build (version as set at release, Go version), so a
// dashboard can show which build each instance runs and an alert can join
// on it.
func (m *Metrics) RegisterBuildInfo(version string) { registerBuildInfo(m.Registry, version) }

func registerBuildInfo(r *prometheus.Registry, version string) {
	r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "rtcd_build_info",
		Help:        "A constant 1 labelled with the running build's version and Go version.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	}, func() float64 { return 1 }))
}

// goLiveHeapMetric is the runtime/metrics name of the heap the last GC
// found live.
const goLiveHeapMetric = "/gc/heap/live:bytes"

// newGoCollector is the Go runtime's collector with its default series and
// go_gc_heap_live_bytes, the heap the last GC marked live. The
// go_memstats_heap_* gauges also count garbage not yet collected (up to
// GOGC's headroom, twice the live heap by default), so they cannot tell
// what held state costs; the live heap can (the load test's join scenario
// reads it for the memory of a held media socket).
func newGoCollector() prometheus.Collector {
	return collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile("^" + regexp.QuoteMeta(goLiveHeapMetric) + "$")}))
}

// Node holds the collectors of a media node run on its own (rtcd media):
// the media families, rtcd_build_info and the Go runtime and process
// collectors, and nothing of the control plane's (no HTTP, billing or
// storage families, which such a process never moves).
type Node struct {
	Registry *prometheus.Registry
	Media    *Media
}

// NewNode creates a media node's collectors on a fresh registry, with the
// build info of version.
func NewNode(version string) *Node {
	r := prometheus.NewRegistry()
	r.MustRegister(newGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerBuildInfo(r, version)
	return &Node{Registry: r, Media: newMedia(r)}
}

// Handler serves the node's registry in the Prometheus text format.
func (n *Node) Handler() http.Handler {
	return promhttp.HandlerFor(n.Registry, promhttp.HandlerOpts{})
}

// InitRoutes creates, at zero, the rtcd_http_requests_total series of every
// 5xx status rtcd answers for each API route (method to route patterns, as
// the router lists them; the patterns under /v1/, whose route label is the
// pattern itself), so that an alert on the rate of server errors sees the
// first one (a rate needs a sample before the increment).
func (m *Metrics) InitRoutes(routes map[string][]string) {
	for method, paths := range routes {
		mlabel := methodLabel([]byte(method))
		for _, path := range paths {
			if !strings.HasPrefix(path, "/v1/") {
				continue
			}
			for _, status := range serverErrorStatuses {
				m.HTTPRequests.WithLabelValues(path, mlabel, status)
			}
		}
	}
}

// ObserveHTTP counts one answered request and its latency. The method label
// takes a fixed set of values (GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS,
// other) and status is a code the server chose, so no client can create
// label series at will.
func (m *Metrics) ObserveHTTP(route string, method []byte, status int, seconds float64) {
	k := httpKey{route: route, method: methodLabel(method), status: status}
	v, ok := m.httpChildren.Load(k)
	if !ok {
		code := strconv.Itoa(status)
		v, _ = m.httpChildren.LoadOrStore(k, &httpChildren{
			requests: m.HTTPRequests.WithLabelValues(route, k.method, code),
			duration: m.HTTPDuration.WithLabelValues(route, k.method, code),
		})
	}
	c := v.(*httpChildren)
	c.requests.Inc()
	if seconds >= 0 {
		c.duration.Observe(seconds)
	}
}

// httpKey names the children of one route, method and status; there are
// boundedly many (the routes are the router's, the methods eight, the
// statuses 100 to 599), so each is resolved once and kept.
type httpKey struct {
	route, method string
	status        int
}

type httpChildren struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// methodLabel is the method label of a request's method (a constant
// string: no allocation).
func methodLabel(method []byte) string {
	switch string(method) {
	case "GET":
		return "GET"
	case "POST":
		return "POST"
	case "PUT":
		return "PUT"
	case "PATCH":
		return "PATCH"
	case "DELETE":
		return "DELETE"
	case "HEAD":
		return "HEAD"
	case "OPTIONS":
		return "OPTIONS"
	}
	return "other"
}

// EngineGauges are read at scrape time from the engine's counters.
type EngineGauges struct {
	ActiveRooms         func() float64
	ActiveParticipants  func() float64
	ProjectMailboxDepth func() float64
	RoomMailboxDepth    func() float64
}

// RegisterEngine registers the gauges the actors maintain.
func (m *Metrics) RegisterEngine(g EngineGauges) {
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rtcd_active_rooms", Help: "Rooms that have not ended.",
		}, g.ActiveRooms),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rtcd_active_participants", Help: "Participants holding a slot of the participant caps (connected, not removed).",
		}, g.ActiveParticipants),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rtcd_actor_mailbox_depth", Help: "Messages queued in actor mailboxes.", ConstLabels: prometheus.Labels{"kind": "project"},
		}, g.ProjectMailboxDepth),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rtcd_actor_mailbox_depth", Help: "Messages queued in actor mailboxes.", ConstLabels: prometheus.Labels{"kind": "room"},
		}, g.RoomMailboxDepth),
	)
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() fasthttp.RequestHandler {
	return fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
}
