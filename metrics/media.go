package metrics

import "github.com/prometheus/client_golang/prometheus"

// Leave reasons of the media node, the reason label of
// rtcd_media_leaves_total (media.Reason*).
var MediaLeaveReasons = []string{"left", "disconnected", "heartbeat_timeout", "slow_consumer", "bad_message", "removed", "room_closed", "node_shutdown"}

// Media node timeouts, the kind label of rtcd_media_timeouts_total.
const (
	MediaTimeoutHeartbeat = "heartbeat" // a joined client silent for the heartbeat timeout
	MediaTimeoutJoin      = "join"      // a socket that did not join within the join timeout
)

// Report types and results, the labels of rtcd_media_reports_total.
var (
	MediaReportTypes = []string{"joined", "left", "presence"}
	// sent: handed to the control plane (in process) or answered 2xx (over
	// HTTP); failed: dropped, because the queue was full, the reporter was
	// closed, or the retries ran out.
	MediaReportResults = []string{"sent", "failed"}
)

// Media are the media node's collectors, moved by its hub (sessions, joins,
// leaves, timeouts) and by its reporter (reports). Every method is a no-op
// on a nil *Media, so a node built without metrics counts nothing.
type Media struct {
	sessions    prometheus.Gauge
	connections prometheus.Gauge
	joins       prometheus.Counter
	leaves      *prometheus.CounterVec
	timeouts    *prometheus.CounterVec
	reports     *prometheus.CounterVec
}

func newMedia(r *prometheus.Registry) *Media {
	m := &Media{
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rtcd_media_sessions",
			Help: "Participant sessions joined on the media node.",
		}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rtcd_media_connections",
			Help: "WebSocket connections the media node holds, joined or not yet.",
		}),
		joins: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rtcd_media_joins_total",
			Help: "Media sessions that joined the media node.",
		}),
		leaves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rtcd_media_leaves_total",
			Help: "Media sessions that left the media node, by reason.",
		}, []string{"reason"}),
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rtcd_media_timeouts_total",
			Help: "Sockets the media node dropped for silence, by kind: heartbeat (a joined client) or join (no join message in time).",
		}, []string{"kind"}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rtcd_media_reports_total",
			Help: "Reports of the media node to the control plane, by type and result (sent, or failed: dropped).",
		}, []string{"type", "result"}),
	}
	for _, reason := range MediaLeaveReasons {
		m.leaves.WithLabelValues(reason)
	}
	m.timeouts.WithLabelValues(MediaTimeoutHeartbeat)
	m.timeouts.WithLabelValues(MediaTimeoutJoin)
	for _, typ := range MediaReportTypes {
		for _, result := range MediaReportResults {
			m.reports.WithLabelValues(typ, result)
		}
	}
	r.MustRegister(m.sessions, m.connections, m.joins, m.leaves, m.timeouts, m.reports)
	return m
}

// Joined counts a session that joined.
func (m *Media) Joined() {
	if m == nil {
		return
	}
	m.joins.Inc()
}

// Left counts a session that left for reason.
func (m *Media) Left(reason string) {
	if m == nil {
		return
	}
	m.leaves.WithLabelValues(reason).Inc()
}

// Sessions sets the number of sessions joined on the node.
func (m *Media) Sessions(n int) {
	if m == nil {
		return
	}
	m.sessions.Set(float64(n))
}

// TimedOut counts a socket dropped for a timeout of kind.
func (m *Media) TimedOut(kind string) {
	if m == nil {
		return
	}
	m.timeouts.WithLabelValues(kind).Inc()
}

// Connections sets the number of sockets the node holds.
func (m *Media) Connections(n int) {
	if m == nil {
		return
	}
	m.connections.Set(float64(n))
}

// Report counts one report of typ with result ("sent" or "failed").
func (m *Media) Report(typ, result string) {
	if m == nil {
		return
	}
	m.reports.WithLabelValues(typ, result).Inc()
}
