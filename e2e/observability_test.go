package e2e

// Observability and project introspection: audit log entries, project
// limits, system info, and the Prometheus metrics listener.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"rtcd/actors"
	"rtcd/internal/testtools"
)

// obsAudit is the part of an audit log entry the tests compare.
type obsAudit struct {
	action, actorType, actorID, targetType, targetID, requestID, createdAt string
}

func obsAuditEntries(t *testing.T, e *env) []obsAudit {
	t.Helper()
	r := e.do("GET", "/v1/audit-logs?limit=100", e.Boot.APIKey, nil).must(t, 200)
	var out []obsAudit
	for _, item := range r.Data() {
		actor, _ := item["actor"].(map[string]any)
		target, _ := item["target"].(map[string]any)
		str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
		out = append(out, obsAudit{
			action: str(item, "action"), actorType: str(actor, "type"), actorID: str(actor, "id"),
			targetType: str(target, "type"), targetID: str(target, "id"),
			requestID: str(item, "request_id"), createdAt: str(item, "created_at"),
		})
	}
	return out
}

func TestAuditLogEntries(t *testing.T) {
	e := start(t)
	boot := e.Boot.APIKey
	at := func() string { return actors.Timestamp(e.clock.Now()) }
	var want []obsAudit // oldest first
	record := func(action, actorID, targetType, targetID string, r *resp) {
		t.Helper()
		rid := r.Header.Get("X-Request-Id")
		if !strings.HasPrefix(rid, "req_") {
			t.Fatalf("response lacks X-Request-Id: %v", r.Header)
		}
		want = append(want, obsAudit{action, "api_key", actorID, targetType, targetID, rid, at()})
	}
	room := e.createRoom(nil) // creating a room writes no audit entry of these kinds

	// 1. The bootstrap key creates an operator key, with a caller request id.
	e.clock.Advance(time.Second)
	r := e.do("POST", "/v1/api-keys", boot, map[string]any{"name": "ops", "scopes": []string{"api_keys:write", "api_keys:read", "rooms:write", "rooms:read"}},
		"X-Request-Id: audit-create-ops").must(t, 201)
	opsID, ops := r.Str("id"), r.Str("secret")
	if r.Header.Get("X-Request-Id") != "req_audit-create-ops" {
		t.Fatalf("request id not echoed: %v", r.Header)
	}
	record("api_key.created", e.Boot.APIKeyID, "api_key", opsID, r)

	// 2. The operator key creates a key, with a generated request id.
	e.clock.Advance(time.Second)
	r = e.createKey(ops, "rooms:read").must(t, 201)
	victimID := r.Str("id")
	record("api_key.created", opsID, "api_key", victimID, r)

	// 3. It revokes that key.
	e.clock.Advance(time.Second)
	r = e.do("DELETE", "/v1/api-keys/"+victimID, ops, nil, "X-Request-Id: req_audit-revoke").must(t, 200)
	record("api_key.revoked", opsID, "api_key", victimID, r)

	// 4. It deletes a room the bootstrap key created.
	e.clock.Advance(time.Second)
	r = e.do("DELETE", "/v1/rooms/"+room, ops, nil, "X-Request-Id: del-room").must(t, 200)
	record("room.deleted", opsID, "room", room, r)

	// 5. An idempotent creation, sent twice, is one entry.
	e.clock.Advance(time.Second)
	r = e.do("POST", "/v1/api-keys", ops, map[string]any{"scopes": []string{"rooms:read"}}, "Idempotency-Key: audit-once").must(t, 201)
	record("api_key.created", opsID, "api_key", r.Str("id"), r)
	e.clock.Advance(time.Second)
	e.do("POST", "/v1/api-keys", ops, map[string]any{"scopes": []string{"rooms:read"}}, "Idempotency-Key: audit-once").must(t, 201)

	// Nothing else is an auditable change: repeats, refusals and failures.
	e.clock.Advance(time.Second)
	e.do("DELETE", "/v1/api-keys/"+victimID, ops, nil).must(t, 200)                        // already revoked
	e.do("DELETE", "/v1/rooms/"+room, ops, nil).must(t, 200)                               // already ending or ended
	erRequireEnvelope(t, e.do("DELETE", "/v1/api-keys/"+opsID, ops, nil), 409, "conflict") // itself
	erRequireEnvelope(t, e.do("DELETE", "/v1/api-keys/key_aaaaaaaaaaaaaaaaaaaaaaaa", ops, nil), 404, "api_key_not_found")
	erRequireEnvelope(t, e.createKey(ops, "billing:write"), 403, "permission_denied") // lacks the scope
	erRequireEnvelope(t, e.createKey(ops, "nope"), 400, "invalid_request")            // unknown scope
	erRequireEnvelope(t, e.do("DELETE", "/v1/rooms/"+room, "", nil), 401, "authentication_failed")

	got := obsAuditEntries(t, e)
	var relevant []obsAudit
	for _, g := range got {
		switch g.action {
		case "api_key.created", "api_key.revoked", "room.deleted":
			relevant = append(relevant, g)
		}
	}
	// Newest first; the oldest is the bootstrap's own api_key.created.
	if len(relevant) != len(want)+1 {
		t.Fatalf("%d audit entries, want %d: %+v", len(relevant), len(want)+1, relevant)
	}
	for i, w := range want {
		g := relevant[len(want)-1-i]
		if g != w {
			t.Errorf("entry %d:\n got %+v\nwant %+v", len(want)-1-i, g, w)
		}
	}
	bootEntry := relevant[len(relevant)-1]
	if bootEntry.action != "api_key.created" || bootEntry.targetID != e.Boot.APIKeyID {
		t.Errorf("oldest entry %+v, want the bootstrap key's creation", bootEntry)
	}

	// Entries carry the documented envelope fields.
	raw := e.do("GET", "/v1/audit-logs", e.Boot.APIKey, nil).must(t, 200)
	for _, item := range raw.Data() {
		for _, f := range []string{"id", "action", "actor", "target", "request_id", "created_at"} {
			if _, ok := item[f]; !ok {
				t.Errorf("audit entry lacks %s: %v", f, item)
			}
		}
		if _, err := time.Parse(time.RFC3339Nano, item["created_at"].(string)); err != nil {
			t.Errorf("created_at: %v", err)
		}
	}
	if _, ok := raw.JSON["page"].(map[string]any)["next_cursor"]; ok {
		t.Errorf("audit log page has next_cursor: %s", raw.Raw)
	}
}

func TestProjectLimits(t *testing.T) {
	check := func(t *testing.T, e *env, want map[string]float64) {
		t.Helper()
		r := e.do("GET", "/v1/project/limits", e.Boot.APIKey, nil).must(t, 200)
		if r.Str("project_id") != e.Boot.ProjectID || !strings.HasPrefix(r.Str("project_id"), "prj_") {
			t.Errorf("project_id %q, want %q", r.Str("project_id"), e.Boot.ProjectID)
		}
		for name, v := range want {
			got, ok := r.JSON[name].(float64)
			if !ok || got != v {
				t.Errorf("%s = %v, want %v", name, r.JSON[name], v)
			}
		}
		for k := range r.JSON {
			if _, ok := want[k]; !ok && k != "project_id" && k != "object" {
				t.Errorf("unexpected field %s", k)
			}
		}
		var literal map[string]json.RawMessage
		if err := json.Unmarshal(r.Raw, &literal); err != nil {
			t.Fatal(err)
		}
		for name := range want {
			if _, err := strconv.Atoi(string(literal[name])); err != nil {
				t.Errorf("%s = %s is not an integer literal", name, literal[name])
			}
		}
	}
	t.Run("defaults", func(t *testing.T) {
		check(t, start(t), map[string]float64{
			"max_active_rooms": 1000, "max_active_participants": 10000, "max_participants_per_room": 100,
			"room_creates_per_minute": 600, "participant_creates_per_minute": 6000, "connect_requests_per_minute": 60000,
		})
	})
	t.Run("flags", func(t *testing.T) {
		e := start(t,
			"--default-max-active-rooms=7", "--default-max-active-participants=8", "--default-max-participants-per-room=9",
			"--default-room-creates-per-minute=10", "--default-participant-creates-per-minute=11",
			"--default-connect-requests-per-minute=12")
		check(t, e, map[string]float64{
			"max_active_rooms": 7, "max_active_participants": 8, "max_participants_per_room": 9,
			"room_creates_per_minute": 10, "participant_creates_per_minute": 11, "connect_requests_per_minute": 12,
		})
		// The reported values are the enforced ones.
		erRequireField(t, erRequireEnvelope(t, e.do("POST", "/v1/rooms", e.Boot.APIKey, map[string]any{"max_participants": 10}), 400, "invalid_request"),
			"max_participants", nil)
		if r := e.do("POST", "/v1/rooms", e.Boot.APIKey, map[string]any{}).must(t, 201); r.JSON["max_participants"] != float64(9) {
			t.Errorf("default max_participants %v, want 9", r.JSON["max_participants"])
		}
		for range 6 {
			e.createRoom(nil)
		}
		erRequireEnvelope(t, e.do("POST", "/v1/rooms", e.Boot.APIKey, map[string]any{}), 409, "quota_exceeded")
	})
}

func TestSystemInfo(t *testing.T) {
	e := start(t)
	_, narrow := erMintKey(e, "usage:read")
	for _, key := range []string{e.Boot.APIKey, narrow} {
		r := e.do("GET", "/v1/system/info", key, nil).must(t, 200)
		if r.Str("region") != "global" {
			t.Errorf("region %q, want global: %s", r.Str("region"), r.Raw)
		}
		if !strings.HasPrefix(r.Header.Get("X-Request-Id"), "req_") {
			t.Errorf("no X-Request-Id: %v", r.Header)
		}
	}
	erRequireEnvelope(t, e.do("GET", "/v1/system/info", "", nil), 401, "authentication_failed")

	eu := start(t, "--region=eu-west")
	if r := eu.do("GET", "/v1/system/info", eu.Boot.APIKey, nil).must(t, 200); r.Str("region") != "eu-west" {
		t.Errorf("region %q, want eu-west", r.Str("region"))
	}
}

// obsScrape fetches the metrics listener's /metrics.
func obsScrape(t *testing.T, e *env) ([]byte, map[string]*dto.MetricFamily) {
	t.Helper()
	return obsScrapeURL(t, e.client, e.Metrics+"/metrics")
}

// obsScrapeURL scrapes url (any process's /metrics) and parses it.
func obsScrapeURL(t *testing.T, c *http.Client, url string) ([]byte, map[string]*dto.MetricFamily) {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("scrape status %d: %s", res.StatusCode, raw)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") && !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Errorf("Content-Type %q", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("parse metrics: %v\n%s", err, raw)
	}
	return raw, fams
}

// obsFind returns the metrics of family name whose labels include labels.
func obsFind(fams map[string]*dto.MetricFamily, name string, labels map[string]string) []*dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
	var out []*dto.Metric
	for _, m := range f.GetMetric() {
		ok := true
		for k, v := range labels {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			ok = ok && found
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// obsValue is the value of the single metric of name with labels (-1: none).
func obsValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	ms := obsFind(fams, name, labels)
	if len(ms) != 1 {
		return -1
	}
	m := ms[0]
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return -1
}

func TestMetrics(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	room := e.createRoom(nil)
	e.do("GET", "/v1/rooms/"+room, k, nil).must(t, 200)
	e.do("GET", "/v1/nope", k, nil).must(t, 404)
	part, token := e.createParticipant(room, nil)
	e.connect(token).must(t, 200)
	e.connect("rtc_pt_bogus").must(t, 401)
	e.do("POST", "/v1/connect", "", "{").must(t, 400)

	raw, fams := obsScrape(t, e)
	types := map[string]dto.MetricType{
		"rtcd_http_requests_total":            dto.MetricType_COUNTER,
		"rtcd_http_request_duration_seconds":  dto.MetricType_HISTOGRAM,
		"rtcd_connect_results_total":          dto.MetricType_COUNTER,
		"rtcd_active_rooms":                   dto.MetricType_GAUGE,
		"rtcd_active_participants":            dto.MetricType_GAUGE,
		"rtcd_journal_apply_duration_seconds": dto.MetricType_HISTOGRAM,
		"rtcd_journal_sync_duration_seconds":  dto.MetricType_HISTOGRAM,
		"rtcd_actor_mailbox_depth":            dto.MetricType_GAUGE,
		"go_goroutines":                       dto.MetricType_GAUGE,
	}
	for name, typ := range types {
		f := fams[name]
		if f == nil {
			t.Errorf("metric %s missing", name)
			continue
		}
		if f.GetType() != typ {
			t.Errorf("%s is a %v, want %v", name, f.GetType(), typ)
		}
		if f.GetHelp() == "" {
			t.Errorf("%s has no HELP", name)
		}
	}
	expect := func(name string, labels map[string]string, want float64) {
		t.Helper()
		if got := obsValue(t, fams, name, labels); got != want {
			t.Errorf("%s%v = %v, want %v", name, labels, got, want)
		}
	}
	atLeast := func(name string, labels map[string]string, min float64) {
		t.Helper()
		if got := obsValue(t, fams, name, labels); got < min {
			t.Errorf("%s%v = %v, want >= %v", name, labels, got, min)
		}
	}
	expect("rtcd_connect_results_total", map[string]string{"code": "ok"}, 1)
	expect("rtcd_connect_results_total", map[string]string{"code": "participant_token_invalid"}, 1)
	expect("rtcd_connect_results_total", map[string]string{"code": "invalid_request"}, 1)
	expect("rtcd_http_requests_total", map[string]string{"route": "/v1/rooms", "method": "POST", "status": "201"}, 1)
	expect("rtcd_http_requests_total", map[string]string{"route": "/v1/rooms/{room_id}", "method": "GET", "status": "200"}, 1)
	expect("rtcd_http_requests_total", map[string]string{"method": "GET", "status": "404"}, 1)
	expect("rtcd_http_requests_total", map[string]string{"route": "/v1/connect", "method": "POST", "status": "200"}, 1)
	expect("rtcd_http_requests_total", map[string]string{"route": "/v1/connect", "method": "POST", "status": "401"}, 1)
	atLeast("rtcd_http_request_duration_seconds", map[string]string{"route": "/v1/rooms", "method": "POST", "status": "201"}, 1)
	atLeast("rtcd_http_request_duration_seconds", map[string]string{"route": "/v1/connect", "method": "POST", "status": "200"}, 1)
	atLeast("rtcd_http_request_duration_seconds", map[string]string{"route": "/v1/connect", "method": "POST", "status": "401"}, 1)
	expect("rtcd_active_rooms", nil, 1)
	expect("rtcd_active_participants", nil, 1)
	atLeast("rtcd_journal_apply_duration_seconds", nil, 1)
	atLeast("rtcd_journal_sync_duration_seconds", nil, 1)
	atLeast("go_goroutines", nil, 1)
	for _, kind := range []string{"project", "room"} {
		atLeast("rtcd_actor_mailbox_depth", map[string]string{"kind": kind}, 0)
	}
	// Route labels are patterns: no identifier ever becomes a label value.
	for _, id := range []string{room, part, e.Boot.ProjectID, e.Boot.APIKeyID, "/v1/nope"} {
		if bytes.Contains(raw, []byte(id)) {
			t.Errorf("metrics expose %q in a label", id)
		}
	}
	// Histograms have buckets, a sum and a count.
	for _, name := range []string{"rtcd_http_request_duration_seconds", "rtcd_journal_apply_duration_seconds", "rtcd_journal_sync_duration_seconds"} {
		for _, suffix := range []string{"_bucket{", "_sum", "_count"} {
			if !bytes.Contains(raw, []byte(name+suffix)) {
				t.Errorf("%s lacks %s", name, suffix)
			}
		}
	}

	t.Run("promtool check metrics", func(t *testing.T) {
		promtool := testtools.RequireOnPath(t, "promtool", "apt-get install prometheus (Debian), or a Prometheus release's promtool on PATH")
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(raw)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		} else if len(bytes.TrimSpace(out)) > 0 {
			t.Logf("promtool check metrics: %s", out)
		}
	})

	// Gauges follow state: the participant leaves, then the room ends.
	e.do("DELETE", "/v1/rooms/"+room+"/participants/"+part, k, nil).must(t, 200)
	_, fams = obsScrape(t, e)
	expect2 := func(name string, want float64) {
		t.Helper()
		if got := obsValue(t, fams, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	expect2("rtcd_active_participants", 0)
	expect2("rtcd_active_rooms", 1)
	e.do("DELETE", "/v1/rooms/"+room, k, nil).must(t, 200)
	e.eventually("rtcd_active_rooms 0", func() bool {
		_, f := obsScrape(t, e)
		return obsValue(t, f, "rtcd_active_rooms", nil) == 0
	})
	// Counters only grow.
	_, later := obsScrape(t, e)
	if a, b := obsValue(t, fams, "rtcd_http_requests_total", map[string]string{"route": "/v1/rooms", "method": "POST", "status": "201"}),
		obsValue(t, later, "rtcd_http_requests_total", map[string]string{"route": "/v1/rooms", "method": "POST", "status": "201"}); b < a {
		t.Errorf("counter went down: %v -> %v", a, b)
	}
}

func TestMetricsNotOnAPIListener(t *testing.T) {
	e := start(t)
	for _, key := range []string{"", e.Boot.APIKey} {
		for _, path := range []string{"/metrics", "/metrics/", "/v1/metrics"} {
			r := e.do("GET", path, key, nil)
			erRequireEnvelope(t, r, 404, "invalid_request")
			if bytes.Contains(r.Raw, []byte("# HELP")) || bytes.Contains(r.Raw, []byte("go_goroutines")) {
				t.Errorf("API listener served metrics at %s", path)
			}
		}
	}
	// The metrics listener serves no API.
	res, err := e.client.Get(e.Metrics + "/v1/system/info")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 404 {
		t.Errorf("metrics listener GET /v1/system/info: %d, want 404", res.StatusCode)
	}
}

// Client-chosen HTTP methods never become label values: any method outside
// the fixed set is counted as "other", so a client cannot grow the series.
func TestMetricsMethodLabelIsBounded(t *testing.T) {
	e := start(t)
	for _, m := range []string{"FOO", "BAR", "BAZ1", "X-Y"} {
		e.do(m, "/v1/rooms", e.Boot.APIKey, nil)
	}
	res, err := http.Get(e.Metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	text := string(raw)
	for _, m := range []string{"FOO", "BAR", "BAZ1", "X-Y"} {
		if strings.Contains(text, `method="`+m+`"`) {
			t.Fatalf("method %q became a label value", m)
		}
	}
	if !strings.Contains(text, `method="other"`) {
		t.Fatal(`no method="other" series for unknown methods`)
	}
}
