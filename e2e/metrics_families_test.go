package e2e

// The metrics an operator runs the service on (docs/metrics.md): each
// family exists from the start with its bounded label values, and moves
// where its event happens (a webhook attempt, a credit move, a media join,
// a rate-limit refusal, a snapshot).

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	dto "github.com/prometheus/client_model/go"

	"rtcd/internal/testtools"
	"rtcd/metrics"
	"rtcd/server"
)

// mfLabels is a label set, for readability.
type mfLabels = map[string]string

// mfValue reads one series (-1 when it is absent or not single).
func (e *env) mfValue(name string, labels mfLabels) float64 {
	e.t.Helper()
	_, fams := obsScrape(e.t, e)
	return obsValue(e.t, fams, name, labels)
}

// mfAwait waits until the series reads want.
func (e *env) mfAwait(name string, labels mfLabels, want float64) {
	e.t.Helper()
	var got float64
	deadline := time.Now().Add(10 * time.Second)
	for got = e.mfValue(name, labels); got != want; got = e.mfValue(name, labels) {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s%v = %v, want %v", name, labels, got, want)
		}
		time.Sleep(10 * time.Millisecond) // polling asynchronous delivery, as e.eventually
	}
}

// mfAdjust is an operator's balance adjustment through the private listener.
func (e *env) mfAdjust(amount string) {
	e.t.Helper()
	token, err := os.ReadFile(filepath.Join(e.dataDir, "admin.token"))
	if err != nil {
		e.t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"account_id": e.Boot.AccountID, "amount": amount, "reason": "metrics test", "operator": "ops"})
	req, _ := http.NewRequest("POST", e.Metrics+"/admin/billing/adjust", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	res, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	if b, _ := io.ReadAll(res.Body); res.StatusCode != 200 {
		e.t.Fatalf("adjust %s: %d %s", amount, res.StatusCode, b)
	}
}

// Every family is there from the start, typed, with HELP, with its label
// values at zero; the histograms reach the slowest waits; and the whole
// exposition passes promtool.
func TestMetricsFamiliesFromTheStart(t *testing.T) {
	e := start(t, "--snapshot-every-events=1")
	e.createRoom(nil) // journal and snapshot writes
	raw, fams := obsScrape(t, e)

	types := map[string]dto.MetricType{
		"rtcd_build_info":                             dto.MetricType_GAUGE,
		"rtcd_webhook_attempts_total":                 dto.MetricType_COUNTER,
		"rtcd_webhook_attempt_duration_seconds":       dto.MetricType_HISTOGRAM,
		"rtcd_webhook_deliveries_created_total":       dto.MetricType_COUNTER,
		"rtcd_webhook_deliveries_dead_total":          dto.MetricType_COUNTER,
		"rtcd_webhook_backlog_deliveries":             dto.MetricType_GAUGE,
		"rtcd_webhook_oldest_undelivered_age_seconds": dto.MetricType_GAUGE,
		"rtcd_billing_settlements_total":              dto.MetricType_COUNTER,
		"rtcd_billing_charges_applied_total":          dto.MetricType_COUNTER,
		"rtcd_billing_credit_transitions_total":       dto.MetricType_COUNTER,
		"rtcd_billing_topups_total":                   dto.MetricType_COUNTER,
		"rtcd_billing_workspaces":                     dto.MetricType_GAUGE,
		"rtcd_media_sessions":                         dto.MetricType_GAUGE,
		"rtcd_media_connections":                      dto.MetricType_GAUGE,
		"rtcd_media_joins_total":                      dto.MetricType_COUNTER,
		"rtcd_media_leaves_total":                     dto.MetricType_COUNTER,
		"rtcd_media_timeouts_total":                   dto.MetricType_COUNTER,
		"rtcd_media_reports_total":                    dto.MetricType_COUNTER,
		"rtcd_media_published_tracks":                 dto.MetricType_GAUGE,
		"rtcd_media_subscriptions":                    dto.MetricType_GAUGE,
		"rtcd_media_received_packets_total":           dto.MetricType_COUNTER,
		"rtcd_media_received_bytes_total":             dto.MetricType_COUNTER,
		"rtcd_media_forwarded_packets_total":          dto.MetricType_COUNTER,
		"rtcd_media_forwarded_bytes_total":            dto.MetricType_COUNTER,
		"rtcd_media_dropped_packets_total":            dto.MetricType_COUNTER,
		"rtcd_media_layer_switches_total":             dto.MetricType_COUNTER,
		"rtcd_media_keyframe_requests_total":          dto.MetricType_COUNTER,
		"rtcd_media_turn_allocations":                 dto.MetricType_GAUGE,
		"rtcd_rate_limit_rejections_total":            dto.MetricType_COUNTER,
		"rtcd_rate_limit_local_decisions_total":       dto.MetricType_COUNTER,
		"rtcd_rate_limit_store_reachable":             dto.MetricType_GAUGE,
		"rtcd_cluster_members":                        dto.MetricType_GAUGE,
		"rtcd_cluster_fenced_batches_total":           dto.MetricType_COUNTER,
		"rtcd_snapshot_write_duration_seconds":        dto.MetricType_HISTOGRAM,
		"rtcd_recovery_duration_seconds":              dto.MetricType_GAUGE,
		"rtcd_pebble_compactions_total":               dto.MetricType_COUNTER,
		"rtcd_pebble_compactions_in_progress":         dto.MetricType_GAUGE,
		"rtcd_pebble_compaction_debt_bytes":           dto.MetricType_GAUGE,
		"rtcd_pebble_flushes_total":                   dto.MetricType_COUNTER,
		"rtcd_pebble_l0_files":                        dto.MetricType_GAUGE,
		"rtcd_pebble_l0_sublevels":                    dto.MetricType_GAUGE,
		"rtcd_pebble_read_amplification":              dto.MetricType_GAUGE,
		"rtcd_pebble_wal_files":                       dto.MetricType_GAUGE,
		"rtcd_pebble_wal_size_bytes":                  dto.MetricType_GAUGE,
		"rtcd_pebble_wal_bytes_written_total":         dto.MetricType_COUNTER,
		"rtcd_pebble_disk_usage_bytes":                dto.MetricType_GAUGE,
		"rtcd_pebble_memtable_size_bytes":             dto.MetricType_GAUGE,
		"rtcd_pebble_write_stalls_total":              dto.MetricType_COUNTER,
	}
	for name, typ := range types {
		f := fams[name]
		switch {
		case onJetStream() && strings.HasPrefix(name, "rtcd_pebble_"):
			// The Pebble store's own families: none on JetStream.
			if f != nil {
				t.Errorf("%s exported by a server on JetStream", name)
			}
		case f == nil:
			t.Errorf("metric %s missing", name)
		case f.GetType() != typ:
			t.Errorf("%s is a %v, want %v", name, f.GetType(), typ)
		case f.GetHelp() == "":
			t.Errorf("%s has no HELP", name)
		}
	}

	zero := func(name string, labels mfLabels) {
		t.Helper()
		if got := obsValue(t, fams, name, labels); got != 0 {
			t.Errorf("%s%v = %v, want a series at 0", name, labels, got)
		}
	}
	for _, o := range metrics.WebhookAttemptOutcomes {
		zero("rtcd_webhook_attempts_total", mfLabels{"outcome": o})
		zero("rtcd_webhook_attempt_duration_seconds", mfLabels{"outcome": o})
	}
	for _, s := range []string{"pending", "retrying"} {
		zero("rtcd_webhook_backlog_deliveries", mfLabels{"status": s})
	}
	zero("rtcd_webhook_oldest_undelivered_age_seconds", nil)
	for _, from := range metrics.CreditStates {
		for _, to := range metrics.CreditStates {
			if from != to {
				zero("rtcd_billing_credit_transitions_total", mfLabels{"from": from, "to": to})
			}
		}
	}
	for _, o := range metrics.TopupOutcomes {
		zero("rtcd_billing_topups_total", mfLabels{"outcome": o})
	}
	for _, k := range []string{"running", "final"} {
		zero("rtcd_billing_settlements_total", mfLabels{"kind": k})
	}
	for _, r := range metrics.MediaLeaveReasons {
		zero("rtcd_media_leaves_total", mfLabels{"reason": r})
	}
	for _, k := range []string{"heartbeat", "join"} {
		zero("rtcd_media_timeouts_total", mfLabels{"kind": k})
	}
	for _, typ := range metrics.MediaReportTypes {
		for _, res := range metrics.MediaReportResults {
			zero("rtcd_media_reports_total", mfLabels{"type": typ, "result": res})
		}
	}
	for _, kind := range metrics.MediaKinds {
		for _, name := range []string{"rtcd_media_published_tracks", "rtcd_media_subscriptions", "rtcd_media_received_packets_total",
			"rtcd_media_received_bytes_total", "rtcd_media_forwarded_packets_total", "rtcd_media_forwarded_bytes_total",
			"rtcd_media_dropped_packets_total"} {
			zero(name, mfLabels{"kind": kind})
		}
	}
	for _, dir := range []string{metrics.MediaLayerUp, metrics.MediaLayerDown} {
		zero("rtcd_media_layer_switches_total", mfLabels{"direction": dir})
	}
	zero("rtcd_media_keyframe_requests_total", nil)
	zero("rtcd_media_turn_allocations", nil)
	for _, name := range metrics.RateLimitNames {
		zero("rtcd_rate_limit_rejections_total", mfLabels{"limit": name})
	}
	// 5xx series of every API route exist before any error.
	for _, status := range []string{"500", "503"} {
		zero("rtcd_http_requests_total", mfLabels{"route": "/v1/rooms", "method": "POST", "status": status})
		zero("rtcd_http_requests_total", mfLabels{"route": "/v1/connect", "method": "POST", "status": status})
	}
	// The bootstrap workspace (10.00 of opening credit) is in normal.
	if got := obsValue(t, fams, "rtcd_billing_workspaces", mfLabels{"credit_state": "normal"}); got != 1 {
		t.Errorf("workspaces in normal = %v, want 1", got)
	}
	if got := obsValue(t, fams, "rtcd_build_info", mfLabels{"version": server.Version, "goversion": runtime.Version()}); got != 1 {
		t.Errorf("rtcd_build_info{version=%q} = %v, want 1", server.Version, got)
	}
	positive := func(name string) {
		t.Helper()
		if got := obsValue(t, fams, name, nil); got <= 0 {
			t.Errorf("%s = %v, want > 0", name, got)
		}
	}
	if !onJetStream() {
		positive("rtcd_pebble_disk_usage_bytes")
		positive("rtcd_pebble_wal_bytes_written_total")
	}
	positive("rtcd_snapshot_write_duration_seconds") // the room's creation made a snapshot due
	if got := obsValue(t, fams, "rtcd_recovery_duration_seconds", nil); got < 0 {
		t.Errorf("rtcd_recovery_duration_seconds = %v", got)
	}

	// Latency buckets reach the slowest waits: a webhook attempt's 10 s
	// timeout (up to 60 s when configured) and a connect's 15 s deadline.
	for _, want := range []string{
		`rtcd_http_request_duration_seconds_bucket{method="POST",route="/v1/rooms",status="201",le="10"}`,
		`rtcd_http_request_duration_seconds_bucket{method="POST",route="/v1/rooms",status="201",le="15"}`,
		`rtcd_http_request_duration_seconds_bucket{method="POST",route="/v1/rooms",status="201",le="30"}`,
		`rtcd_webhook_attempt_duration_seconds_bucket{outcome="timeout",le="10"}`,
		`rtcd_webhook_attempt_duration_seconds_bucket{outcome="timeout",le="60"}`,
	} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Errorf("no bucket %s", want)
		}
	}
	// No identifier is a label value.
	for _, id := range []string{e.Boot.AccountID, e.Boot.ProjectID, e.Boot.APIKeyID} {
		if bytes.Contains(raw, []byte(id)) {
			t.Errorf("metrics expose %q", id)
		}
	}

	promtool := testtools.RequireOnPath(t, "promtool", "apt-get install prometheus (Debian), or a Prometheus release's promtool on PATH")
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(raw)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// A failing receiver moves the failed outcome, the backlog and the age of
// the oldest undelivered event; the schedule's end counts a dead delivery;
// a restart counts the backlog from the store; a disabled endpoint's
// deliveries leave the backlog.
func TestMetricsWebhookDelivery(t *testing.T) {
	rcv := newTLSReceiver(t)
	dir := t.TempDir()
	args := []string{"--webhook-allow-private", "--webhook-extra-ca-file=" + rcv.caFile, "--webhook-retry-schedule=10,60"}
	e := startIn(t, dir, nil, args...)
	ep := e.do("POST", "/v1/webhook-endpoints", e.Boot.APIKey, map[string]any{"url": rcv.srv.URL + "/hook", "events": []string{"room.ended"}}).must(t, 201)
	rcv.secret, rcv.now = ep.Str("signing_secret"), e.clock.Now
	endRoom := func(e *env) {
		room := e.createRoom(nil)
		e.do("DELETE", "/v1/rooms/"+room, e.Boot.APIKey, nil).must(t, 200)
	}

	endRoom(e)
	e.mfAwait("rtcd_webhook_attempts_total", mfLabels{"outcome": "succeeded"}, 1)
	e.mfAwait("rtcd_webhook_attempt_duration_seconds", mfLabels{"outcome": "succeeded"}, 1)
	e.mfAwait("rtcd_webhook_deliveries_created_total", nil, 1)
	e.mfAwait("rtcd_webhook_backlog_deliveries", mfLabels{"status": "pending"}, 0)

	rcv.setStatus(500)
	endRoom(e)
	e.mfAwait("rtcd_webhook_attempts_total", mfLabels{"outcome": "http_error"}, 1)
	e.mfAwait("rtcd_webhook_backlog_deliveries", mfLabels{"status": "retrying"}, 1)
	e.mfAwait("rtcd_webhook_backlog_deliveries", mfLabels{"status": "pending"}, 0)
	e.clock.Advance(5 * time.Second)
	// Creation instants are the clock's, nudged a few nanoseconds apart.
	if age := e.mfValue("rtcd_webhook_oldest_undelivered_age_seconds", nil); age < 4.999 || age > 5.001 {
		t.Fatalf("oldest undelivered age %v s, want 5 s after the event", age)
	}

	// A restart counts the retrying delivery from the store.
	e.Stop()
	boot := e.Boot
	e = startIn(t, dir, e.clock, args...)
	e.Boot = boot
	e.mfAwait("rtcd_webhook_backlog_deliveries", mfLabels{"status": "retrying"}, 1)
	if age := e.mfValue("rtcd_webhook_oldest_undelivered_age_seconds", nil); age < 4.999 || age > 5.001 {
		t.Fatalf("oldest undelivered age after a restart %v s, want 5", age)
	}

	// Two more failures: the schedule (10, 60) runs out and it is dead.
	e.clock.Advance(5 * time.Second)
	e.mfAwait("rtcd_webhook_attempts_total", mfLabels{"outcome": "http_error"}, 1) // this process's count
	e.clock.Advance(60 * time.Second)
	e.mfAwait("rtcd_webhook_deliveries_dead_total", nil, 1)
	e.mfAwait("rtcd_webhook_attempts_total", mfLabels{"outcome": "http_error"}, 2)
	e.mfAwait("rtcd_webhook_backlog_deliveries", mfLabels{"status": "retrying"}, 0)
	e.mfAwait("rtcd_webhook_oldest_undelivered_age_seconds", nil, 0)

	// A manual retry brings it back into the backlog until it is attempted.
	deliveries := e.do("GET", "/v1/webhook-endpoints/"+ep.Str("id")+"/deliveries?limit=1", e.Boot.APIKey, nil).must(t, 200).Data()
	rcv.setStatus(204)
	e.do("POST", "/v1/webhook-endpoints/"+ep.Str("id")+"/deliveries/"+deliveries[0]["id"].(string)+"/retry", e.Boot.APIKey, nil).must(t, 200)
	e.mfAwait("rtcd_webhook_attempts_total", mfLabels{"outcome": "succeeded"}, 1)
	e.mfAwait("rtcd_webhook_backlog_deliveries", mfLabels{"status": "retrying"}, 0)

	// A failing delivery of an endpoint then disabled is never attempted
	// again, and leaves the backlog.
	rcv.setStatus(500)
	endRoom(e)
	e.mfAwait("rtcd_webhook_backlog_deliveries", mfLabels{"status": "retrying"}, 1)
	e.do("DELETE", "/v1/webhook-endpoints/"+ep.Str("id"), e.Boot.APIKey, nil).must(t, 200)
	e.mfAwait("rtcd_webhook_backlog_deliveries", mfLabels{"status": "retrying"}, 0)
	e.mfAwait("rtcd_webhook_oldest_undelivered_age_seconds", nil, 0)
}

// A receiver that cannot be reached counts a network error.
func TestMetricsWebhookUnreachable(t *testing.T) {
	e := start(t, "--webhook-allow-private")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close() // nothing listens there any more: the connection is refused
	e.do("POST", "/v1/webhook-endpoints", e.Boot.APIKey, map[string]any{"url": "http://" + closed + "/hook", "events": []string{"room.ended"}}).must(t, 201)
	room := e.createRoom(nil)
	e.do("DELETE", "/v1/rooms/"+room, e.Boot.APIKey, nil).must(t, 200)
	e.mfAwait("rtcd_webhook_attempts_total", mfLabels{"outcome": "network_error"}, 1)
}

// Media sessions join and leave, a silent client times out, the node's
// reports reach the control plane, usage settles and is charged, top-ups
// and credit moves are counted, and workspaces move between credit states.
func TestMetricsMediaAndBilling(t *testing.T) {
	e := start(t)
	e.blPastBootstrap()
	room := e.createRoom(nil)
	_, tokenA := e.createParticipant(room, nil)
	_, tokenB := e.createParticipant(room, nil)
	a := e.joinMedia(tokenA)
	b := e.joinMedia(tokenB)
	e.mfAwait("rtcd_media_joins_total", nil, 2)
	e.mfAwait("rtcd_media_sessions", nil, 2)
	e.mfAwait("rtcd_media_connections", nil, 2)
	e.mfAwait("rtcd_media_reports_total", mfLabels{"type": "joined", "result": "sent"}, 2)

	// A settle interval (60 s) with both pinging: each session settles.
	e.stay(60*time.Second, a, b)
	e.mfAwait("rtcd_billing_settlements_total", mfLabels{"kind": "running"}, 2)

	// a leaves; b goes silent past the heartbeat timeout (15 s).
	a.send(map[string]any{"type": "leave"})
	e.mfAwait("rtcd_media_leaves_total", mfLabels{"reason": "left"}, 1)
	e.clock.Advance(16 * time.Second)
	e.mfAwait("rtcd_media_timeouts_total", mfLabels{"kind": "heartbeat"}, 1)
	e.mfAwait("rtcd_media_leaves_total", mfLabels{"reason": "heartbeat_timeout"}, 1)
	e.mfAwait("rtcd_media_sessions", nil, 0)
	e.mfAwait("rtcd_media_reports_total", mfLabels{"type": "left", "result": "sent"}, 2)
	e.mfAwait("rtcd_billing_settlements_total", mfLabels{"kind": "final"}, 2)
	e.eventually("usage charges applied", func() bool { return e.mfValue("rtcd_billing_charges_applied_total", nil) >= 2 })

	// A top-up paid in the sandbox: created, then succeeded.
	tp := e.blCreateTopup("25.00", "card").must(t, 201)
	e.mfAwait("rtcd_billing_topups_total", mfLabels{"outcome": "created"}, 1)
	if status, html := e.blPage(tp.Str("authorize_url"), "succeeded"); status != 200 {
		t.Fatalf("pay: %d %s", status, html)
	}
	e.mfAwait("rtcd_billing_topups_total", mfLabels{"outcome": "succeeded"}, 1)
	e.mfAwait("rtcd_billing_workspaces", mfLabels{"credit_state": "normal"}, 1)

	// The operator takes the balance below the minimum (1.00), then back.
	e.mfAdjust("-34.50")
	e.mfAwait("rtcd_billing_credit_transitions_total", mfLabels{"from": "normal", "to": "exhausted"}, 1)
	e.mfAwait("rtcd_billing_workspaces", mfLabels{"credit_state": "exhausted"}, 1)
	e.mfAwait("rtcd_billing_workspaces", mfLabels{"credit_state": "normal"}, 0)
	e.mfAdjust("2.00")
	e.mfAwait("rtcd_billing_credit_transitions_total", mfLabels{"from": "exhausted", "to": "low"}, 1)
	e.mfAwait("rtcd_billing_workspaces", mfLabels{"credit_state": "low"}, 1)
	e.mfAwait("rtcd_billing_workspaces", mfLabels{"credit_state": "exhausted"}, 0)
}

// A socket that never joins times out as a join timeout.
func TestMetricsMediaJoinTimeout(t *testing.T) {
	e := start(t)
	conn, _, err := websocket.DefaultDialer.Dial(e.Media, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	e.mfAwait("rtcd_media_connections", nil, 1)
	e.clock.Advance(6 * time.Second) // past the 5 s join timeout
	e.mfAwait("rtcd_media_timeouts_total", mfLabels{"kind": "join"}, 1)
	e.mfAwait("rtcd_media_connections", nil, 0)
}

// Refusals are counted by the name of the limit that refused them.
func TestMetricsRateLimitRejections(t *testing.T) {
	e := start(t, "--default-room-creates-per-minute=1")
	e.createRoom(nil)
	e.do("POST", "/v1/rooms", e.Boot.APIKey, map[string]any{}).must(t, 429)
	e.do("POST", "/v1/rooms", e.Boot.APIKey, map[string]any{}).must(t, 429)
	e.mfAwait("rtcd_rate_limit_rejections_total", mfLabels{"limit": "room_creates_per_minute"}, 2)
	e.mfAwait("rtcd_rate_limit_rejections_total", mfLabels{"limit": "connect_requests_per_minute"}, 0)
}
