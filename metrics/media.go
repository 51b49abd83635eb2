package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Leave reasons of the media node, the reason label of
// rtcd_media_leaves_total (media.Reason*), and the codes the control plane
// ends a joined session with (media.ValidSessionCloseCode: superseded by a
// newer session, refused, or ended).
var MediaLeaveReasons = []string{"left", "disconnected", "heartbeat_timeout", "slow_consumer", "bad_message", "removed", "room_closed", "node_shutdown",
	"session_superseded", "participant_limit_reached", "insufficient_credit", "token_expired"}

// Media node timeouts, the kind label of rtcd_media_timeouts_total.
const (
	MediaTimeoutHeartbeat = "heartbeat" // a joined client silent for the heartbeat timeout
	MediaTimeoutJoin      = "join"      // a socket that did not join within the join timeout, or whose join the control plane did not admit in time
)

// Report types and results, the labels of rtcd_media_reports_total.
var (
	MediaReportTypes = []string{"joined", "left", "presence"}
	// sent: handed to the control plane (in process) or answered 2xx (over
	// HTTP); failed: dropped, because the queue was full, the reporter was
	// closed, or the retries ran out.
	MediaReportResults = []string{"sent", "failed"}
)

// Media kinds, the kind label of the track and RTP families: what a
// published track carries (media.kindOfSource). A track of any other kind
// is never published, so it is never counted.
var MediaKinds = []string{"audio", "video"}

// Directions of a simulcast layer switch, the direction label of
// rtcd_media_layer_switches_total.
const (
	MediaLayerUp   = "up"   // to a higher-quality layer
	MediaLayerDown = "down" // to a lower one
)

// Media are the media node's collectors, moved by its hub (sessions, joins,
// leaves, timeouts), by its reporter (reports) and by its WebRTC side
// (tracks, subscriptions, RTP, layer switches, keyframe requests, TURN).
// Every method is a no-op on a nil *Media, so a node built without metrics
// counts nothing.
type Media struct {
	sessions    prometheus.Gauge
	connections prometheus.Gauge
	joins       prometheus.Counter
	leaves      *prometheus.CounterVec
	timeouts    *prometheus.CounterVec
	reports     *prometheus.CounterVec

	kinds             map[string]*MediaKind // by MediaKinds; written only by newMedia
	layerUp           prometheus.Counter
	layerDown         prometheus.Counter
	keyframeRequests  prometheus.Counter
	turnAllocationsOf atomic.Pointer[func() int] // the running TURN server's count; nil: none
}

// MediaKind are the collectors of one media kind, resolved once (Kind) so
// the forwarding loops never look a label up. Every method is a no-op on a
// nil *MediaKind.
type MediaKind struct {
	publishedTracks  prometheus.Gauge
	subscriptions    prometheus.Gauge
	receivedPackets  prometheus.Counter
	receivedBytes    prometheus.Counter
	forwardedPackets prometheus.Counter
	forwardedBytes   prometheus.Counter
	droppedPackets   prometheus.Counter
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
	m.registerWebRTC(r)
	return m
}

// registerWebRTC creates the families of the node's WebRTC side, with every
// kind and direction at zero.
func (m *Media) registerWebRTC(r *prometheus.Registry) {
	byKind := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"kind"})
	}
	countByKind := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"kind"})
	}
	published := byKind("rtcd_media_published_tracks",
		"Tracks published on the media node, by kind (audio, video).")
	subscriptions := byKind("rtcd_media_subscriptions",
		"Subscriber copies of published tracks on the media node (down tracks), by kind.")
	receivedPackets := countByKind("rtcd_media_received_packets_total",
		"RTP packets the media node received on published tracks, by kind.")
	receivedBytes := countByKind("rtcd_media_received_bytes_total",
		"RTP payload bytes the media node received on published tracks, by kind.")
	forwardedPackets := countByKind("rtcd_media_forwarded_packets_total",
		"RTP packets the media node wrote to subscribers' connections, by kind.")
	forwardedBytes := countByKind("rtcd_media_forwarded_bytes_total",
		"RTP payload bytes the media node wrote to subscribers' connections, by kind.")
	dropped := countByKind("rtcd_media_dropped_packets_total",
		"RTP packets the media node dropped for a subscriber whose send queue was full, by kind.")
	switches := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rtcd_media_layer_switches_total",
		Help: "Simulcast layer switches of subscriber copies, by direction (up, down).",
	}, []string{"direction"})
	m.keyframeRequests = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "rtcd_media_keyframe_requests_total",
		Help: "Keyframe requests (PLI) the media node sent to publishers.",
	})
	turn := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rtcd_media_turn_allocations",
		Help: "Relay allocations held by the media node's embedded TURN server (0 when it runs none).",
	}, func() float64 {
		if count := m.turnAllocationsOf.Load(); count != nil {
			return float64((*count)())
		}
		return 0
	})
	m.kinds = make(map[string]*MediaKind, len(MediaKinds))
	for _, kind := range MediaKinds {
		m.kinds[kind] = &MediaKind{
			publishedTracks:  published.WithLabelValues(kind),
			subscriptions:    subscriptions.WithLabelValues(kind),
			receivedPackets:  receivedPackets.WithLabelValues(kind),
			receivedBytes:    receivedBytes.WithLabelValues(kind),
			forwardedPackets: forwardedPackets.WithLabelValues(kind),
			forwardedBytes:   forwardedBytes.WithLabelValues(kind),
			droppedPackets:   dropped.WithLabelValues(kind),
		}
	}
	m.layerUp = switches.WithLabelValues(MediaLayerUp)
	m.layerDown = switches.WithLabelValues(MediaLayerDown)
	r.MustRegister(published, subscriptions, receivedPackets, receivedBytes, forwardedPackets, forwardedBytes, dropped,
		switches, m.keyframeRequests, turn)
}

// Kind returns the collectors of kind ("audio" or "video"), or nil (which
// counts nothing) for another kind or a nil *Media.
func (m *Media) Kind(kind string) *MediaKind {
	if m == nil {
		return nil
	}
	return m.kinds[kind]
}

// LayerSwitch counts a subscriber copy's switch to a higher (up) or lower
// simulcast layer.
func (m *Media) LayerSwitch(up bool) {
	if m == nil {
		return
	}
	if up {
		m.layerUp.Inc()
	} else {
		m.layerDown.Inc()
	}
}

// KeyframeRequested counts a keyframe request sent to a publisher.
func (m *Media) KeyframeRequested() {
	if m == nil {
		return
	}
	m.keyframeRequests.Inc()
}

// SetTURNAllocations makes rtcd_media_turn_allocations read count at each
// scrape (the embedded TURN server's allocations); nil reads 0 again.
func (m *Media) SetTURNAllocations(count func() int) {
	if m == nil {
		return
	}
	if count == nil {
		m.turnAllocationsOf.Store(nil)
		return
	}
	m.turnAllocationsOf.Store(&count)
}

// TrackPublished and TrackUnpublished move the published tracks gauge.
func (k *MediaKind) TrackPublished() {
	if k != nil {
		k.publishedTracks.Inc()
	}
}

func (k *MediaKind) TrackUnpublished() {
	if k != nil {
		k.publishedTracks.Dec()
	}
}

// Subscribed counts one new subscriber copy; Unsubscribed n copies gone.
func (k *MediaKind) Subscribed() {
	if k != nil {
		k.subscriptions.Inc()
	}
}

func (k *MediaKind) Unsubscribed(n int) {
	if k != nil && n > 0 {
		k.subscriptions.Sub(float64(n))
	}
}

// Received adds packets and payload bytes read from publishers, and the
// copies of them dropped for full subscriber queues. The forwarding loops
// call it once per batch of packets, not per packet.
func (k *MediaKind) Received(packets, bytes, dropped int) {
	if k == nil {
		return
	}
	k.receivedPackets.Add(float64(packets))
	k.receivedBytes.Add(float64(bytes))
	if dropped > 0 {
		k.droppedPackets.Add(float64(dropped))
	}
}

// Forwarded adds packets and payload bytes written to subscribers, once per
// batch.
func (k *MediaKind) Forwarded(packets, bytes int) {
	if k == nil {
		return
	}
	k.forwardedPackets.Add(float64(packets))
	k.forwardedBytes.Add(float64(bytes))
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
