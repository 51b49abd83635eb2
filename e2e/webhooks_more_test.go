package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"rtcd/actors"
)

// Webhook endpoints and deliveries over the real server, with real HTTPS
// receivers on loopback (httptest's test CA, trusted through
// --webhook-extra-ca-file, and --webhook-allow-private) except where the
// destination rules themselves are tested, which run with the testing
// setting off. Every delivery is checked against the spec's envelope and
// headers, and its signature is recomputed here with crypto/hmac, not with
// the project's own verification package.

// whAllEventTypes is spec section 6's list of event types, spelled out here
// rather than taken from the code under test.
var whAllEventTypes = []string{
	"room.started", "room.ended", "participant.joined", "participant.left", "usage.finalized",
	"credit.low", "credit.exhausted", "credit.restored",
	"payment.succeeded", "payment.failed", "payment.expired", "payment.canceled", "payment.refunded",
}

// --- receiver ----------------------------------------------------------------

// whReq is one request a receiver got.
type whReq struct {
	Path   string // path, plus "?query" when there is one
	Method string
	Header http.Header
	Body   []byte
	At     time.Time       // the receiver's clock (the server's clock) at receipt
	Ctx    context.Context // done once the sender gave up on the request
	Status int             // the status answered; 0 while the handler runs
}

// whReceiver is a real HTTPS server on loopback that records every request
// and answers per path: a handler set with on, else 200.
type whReceiver struct {
	t       *testing.T
	srv     *httptest.Server
	caFile  string
	now     func() time.Time
	mu      sync.Mutex
	reqs    []*whReq
	routes  map[string]http.HandlerFunc
	release chan struct{} // closed by unblock: blocked handlers return
	once    sync.Once
}

type whStatusWriter struct {
	http.ResponseWriter
	status int
}

func (w *whStatusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *whStatusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = 200
	}
	return w.ResponseWriter.Write(b)
}

func newWHReceiver(t *testing.T) *whReceiver {
	t.Helper()
	r := &whReceiver{t: t, now: time.Now, routes: map[string]http.HandlerFunc{}, release: make(chan struct{})}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		path := req.URL.Path
		if req.URL.RawQuery != "" {
			path += "?" + req.URL.RawQuery
		}
		r.mu.Lock()
		rec := &whReq{Path: path, Method: req.Method, Header: req.Header.Clone(), Body: body, At: r.now(), Ctx: req.Context()}
		r.reqs = append(r.reqs, rec)
		h := r.routes[req.URL.Path]
		r.mu.Unlock()
		sw := &whStatusWriter{ResponseWriter: w}
		if h != nil {
			h(sw, req)
		}
		if sw.status == 0 {
			sw.WriteHeader(200)
		}
		r.mu.Lock()
		rec.Status = sw.status
		r.mu.Unlock()
	}))
	// Cleanups run last-registered first: unblock, then close the server
	// (Close waits for the handlers).
	t.Cleanup(r.srv.Close)
	t.Cleanup(r.unblock)
	r.caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(r.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

// flags are the `rtcd serve` flags that let the server deliver to r.
func (r *whReceiver) flags(extra ...string) []string {
	return append([]string{"--webhook-allow-private", "--webhook-extra-ca-file=" + r.caFile}, extra...)
}

func (r *whReceiver) url(path string) string { return r.srv.URL + path }

// setNow sets the clock that stamps receipts: the server's fake clock.
func (r *whReceiver) setNow(now func() time.Time) {
	r.mu.Lock()
	r.now = now
	r.mu.Unlock()
}

// on sets the handler of path.
func (r *whReceiver) on(path string, h http.HandlerFunc) {
	r.mu.Lock()
	r.routes[path] = h
	r.mu.Unlock()
}

// unblock releases every handler blocked in whBlock (idempotent). A test
// whose handlers block must register it with t.Cleanup after starting the
// server, so that it runs before the server's shutdown waits for them.
func (r *whReceiver) unblock() { r.once.Do(func() { close(r.release) }) }

// whStatus answers status.
func whStatus(status int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }
}

// block answers nothing until unblock (the end of the test).
func (r *whReceiver) block() http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		<-r.release
		w.WriteHeader(200)
	}
}

// requests returns copies of the requests to path (its URL path without
// the query; "" for all), in arrival order.
func (r *whReceiver) requests(path string) []whReq {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []whReq
	for _, q := range r.reqs {
		p, _, _ := strings.Cut(q.Path, "?")
		if path == "" || p == path {
			out = append(out, *q)
		}
	}
	return out
}

// whDistinct returns the requests with a distinct X-RTC-Webhook-Id (the
// first of each).
func whDistinct(reqs []whReq) []whReq {
	seen := map[string]bool{}
	var out []whReq
	for _, q := range reqs {
		id := q.Header.Get("X-RTC-Webhook-Id")
		if !seen[id] {
			seen[id] = true
			out = append(out, q)
		}
	}
	return out
}

// waitEvents waits until path received at least n distinct events, then
// requires exactly n and returns them (first request of each, in arrival
// order).
func (r *whReceiver) waitEvents(e *env, path string, n int) []whReq {
	e.t.Helper()
	e.eventually(fmt.Sprintf("%d events delivered to %s", n, path), func() bool { return len(whDistinct(r.requests(path))) >= n })
	got := whDistinct(r.requests(path))
	if len(got) != n {
		e.t.Fatalf("%d distinct events delivered to %s, want %d: %v", len(got), path, n, whTypes(e.t, got))
	}
	return got
}

// --- verification, independent of package webhooksig -----------------------

// whSign is the spec's signature: "v1=" + hex HMAC-SHA256 of
// timestamp + "." + body under the signing secret.
func whSign(secret, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write([]byte("."))
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// whEvent is a decoded envelope.
type whEvent struct {
	ID        string         `json:"id"`
	Type      string         `json:"type"`
	CreatedAt string         `json:"created_at"`
	ProjectID string         `json:"project_id"`
	Data      map[string]any `json:"data"`
}

func (ev whEvent) seq(t *testing.T) int {
	t.Helper()
	s, ok := ev.Data["sequence"].(float64)
	if !ok || s < 1 || s != float64(int(s)) {
		t.Fatalf("%s %s: data.sequence %v is not a positive integer", ev.Type, ev.ID, ev.Data["sequence"])
	}
	return int(s)
}

func whHeader(t *testing.T, q whReq, name string) string {
	t.Helper()
	v := q.Header.Values(name)
	if len(v) != 1 {
		t.Fatalf("%s: header %s sent %d times: %v", q.Path, name, len(v), v)
	}
	return v[0]
}

// whCheck verifies one delivery request exactly as the spec describes it
// and returns its envelope: POST, Content-Type application/json, User-Agent
// rtcd-Webhooks/0.1, X-RTC-Webhook-Id equal to the body's evt_ id,
// X-RTC-Timestamp in Unix seconds, not before the event and not after the
// receipt, and X-RTC-Signature the HMAC recomputed here. The envelope has
// exactly the fields id, type, created_at, project_id and data.
func whCheck(t *testing.T, q whReq, secret, projectID string) whEvent {
	t.Helper()
	if q.Method != http.MethodPost {
		t.Fatalf("%s: method %s", q.Path, q.Method)
	}
	if ct := whHeader(t, q, "Content-Type"); ct != "application/json" {
		t.Fatalf("%s: Content-Type %q", q.Path, ct)
	}
	if ua := whHeader(t, q, "User-Agent"); ua != "rtcd-Webhooks/0.1" {
		t.Fatalf("%s: User-Agent %q", q.Path, ua)
	}
	ts := whHeader(t, q, "X-RTC-Timestamp")
	sig := whHeader(t, q, "X-RTC-Signature")
	id := whHeader(t, q, "X-RTC-Webhook-Id")
	if want := whSign(secret, ts, q.Body); !hmac.Equal([]byte(sig), []byte(want)) {
		t.Fatalf("%s: X-RTC-Signature %q, recomputed %q over %q.%s", q.Path, sig, want, ts, q.Body)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(q.Body, &raw); err != nil {
		t.Fatalf("%s: body is not a JSON object: %v: %s", q.Path, err, q.Body)
	}
	var keys []string
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if !slices.Equal(keys, []string{"created_at", "data", "id", "project_id", "type"}) {
		t.Fatalf("%s: envelope fields %v: %s", q.Path, keys, q.Body)
	}
	var ev whEvent
	dec := json.NewDecoder(bytes.NewReader(q.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil || ev.Data == nil {
		t.Fatalf("%s: envelope %v: %s", q.Path, err, q.Body)
	}
	if ev.ID != id || !strings.HasPrefix(id, "evt_") || len(id) != len("evt_")+24 {
		t.Fatalf("%s: X-RTC-Webhook-Id %q, body id %q", q.Path, id, ev.ID)
	}
	if !slices.Contains(whAllEventTypes, ev.Type) {
		t.Fatalf("%s: unknown type %q", q.Path, ev.Type)
	}
	if ev.ProjectID != projectID {
		t.Fatalf("%s: project_id %q, want %q", q.Path, ev.ProjectID, projectID)
	}
	created, err := time.Parse(time.RFC3339Nano, ev.CreatedAt)
	if err != nil || !strings.HasSuffix(ev.CreatedAt, "Z") {
		t.Fatalf("%s: created_at %q is not an ISO 8601 UTC timestamp: %v", q.Path, ev.CreatedAt, err)
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || strconv.FormatInt(unix, 10) != ts {
		t.Fatalf("%s: X-RTC-Timestamp %q is not decimal Unix seconds", q.Path, ts)
	}
	if unix < created.Unix() || unix > q.At.Unix() {
		t.Fatalf("%s: X-RTC-Timestamp %d outside [event created %d, received %d]", q.Path, unix, created.Unix(), q.At.Unix())
	}
	return ev
}

// whCheckAll checks every request and returns the envelopes of the distinct
// events, in arrival order. Repeated deliveries of one event carry the same
// body bytes.
func whCheckAll(t *testing.T, reqs []whReq, secret, projectID string) []whEvent {
	t.Helper()
	bodies := map[string][]byte{}
	var out []whEvent
	for _, q := range reqs {
		ev := whCheck(t, q, secret, projectID)
		if prev, ok := bodies[ev.ID]; ok {
			if !bytes.Equal(prev, q.Body) {
				t.Fatalf("event %s delivered with different bodies:\n%s\n%s", ev.ID, prev, q.Body)
			}
			continue
		}
		bodies[ev.ID] = q.Body
		out = append(out, ev)
	}
	return out
}

func whTypes(t *testing.T, reqs []whReq) []string {
	var out []string
	for _, q := range reqs {
		var ev whEvent
		_ = json.Unmarshal(q.Body, &ev)
		out = append(out, ev.Type)
	}
	return out
}

// --- API helpers -------------------------------------------------------------

// whCreate creates an endpoint with the bootstrap key; events nil omits the
// field. It returns the endpoint id and its signing secret.
func (e *env) whCreate(url string, events []string) (id, secret string) {
	e.t.Helper()
	body := map[string]any{"url": url}
	if events != nil {
		body["events"] = events
	}
	r := e.do("POST", "/v1/webhook-endpoints", e.Boot.APIKey, body).must(e.t, 201)
	return r.Str("id"), r.Str("signing_secret")
}

// whDeliveries is the first page (limit 100) of an endpoint's deliveries.
func (e *env) whDeliveries(endpointID string) []map[string]any {
	e.t.Helper()
	return e.do("GET", "/v1/webhook-endpoints/"+endpointID+"/deliveries?limit=100", e.Boot.APIKey, nil).must(e.t, 200).Data()
}

// whAudit returns the audit log entries (newest first) with action.
func (e *env) whAudit(action string) []map[string]any {
	e.t.Helper()
	var out []map[string]any
	for _, en := range e.do("GET", "/v1/audit-logs?limit=100", e.Boot.APIKey, nil).must(e.t, 200).Data() {
		if en["action"] == action {
			out = append(out, en)
		}
	}
	return out
}

func whTargetID(entry map[string]any) string {
	target, _ := entry["target"].(map[string]any)
	s, _ := target["id"].(string)
	return s
}

// whRoomEnd deletes a room and waits until it has ended.
func (e *env) whRoomEnd(room string) {
	e.t.Helper()
	e.do("DELETE", "/v1/rooms/"+room, e.Boot.APIKey, nil).must(e.t, 200)
	e.eventually("room "+room+" ended", func() bool { return e.getRoomStatus(room) == "ended" })
}

// --- endpoint API --------------------------------------------------------------

// TestWebhookEndpointForbiddenDestinations: with the testing setting off,
// plain http and every non-public destination is refused at creation.
func TestWebhookEndpointForbiddenDestinations(t *testing.T) {
	e := start(t) // no --webhook-allow-private
	forbidden := []string{
		// scheme
		"http://example.com/hook",
		"ftp://example.com/hook",
		// loopback
		"https://127.0.0.1/hook",
		"https://127.255.255.254:8443/hook",
		"https://[::1]/hook",
		"https://[0:0:0:0:0:0:0:1]/hook",
		// private (RFC 1918) and shared address space
		"https://10.0.0.1/hook",
		"https://172.16.0.1/hook",
		"https://172.31.255.254/hook",
		"https://192.168.1.1/hook",
		"https://100.64.0.1/hook",
		// link-local, cloud metadata
		"https://169.254.169.254/latest/meta-data/",
		"https://169.254.0.1/hook",
		"https://[fe80::1]/hook",
		"https://[fe80::1%25eth0]/hook",
		// unique-local and site-local
		"https://[fc00::1]/hook",
		"https://[fd12:3456:789a::1]/hook",
		"https://[fec0::1]/hook",
		// multicast
		"https://224.0.0.1/hook",
		"https://239.255.255.250/hook",
		"https://[ff02::1]/hook",
		"https://[ff05::2]/hook",
		// unspecified and "this network"
		"https://0.0.0.0/hook",
		"https://0.1.2.3/hook",
		"https://[::]/hook",
		// IPv4-mapped and IPv4-compatible IPv6
		"https://[::ffff:127.0.0.1]/hook",
		"https://[::ffff:7f00:1]/hook",
		"https://[::ffff:10.0.0.1]/hook",
		"https://[::ffff:169.254.169.254]/hook",
		"https://[::ffff:192.168.0.1]/hook",
		"https://[::127.0.0.1]/hook",
		// NAT64 (well-known and local-use) and 6to4 forms
		"https://[64:ff9b::7f00:1]/hook",
		"https://[64:ff9b::10.0.0.1]/hook",
		"https://[64:ff9b::169.254.169.254]/hook",
		"https://[64:ff9b:1::a00:1]/hook",
		"https://[2002:7f00:1::1]/hook",
		"https://[2002:c0a8:101::1]/hook",
		"https://[2002:a9fe:a9fe::1]/hook",
		// Teredo
		"https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook",
		// reserved, broadcast, IETF, documentation
		"https://240.0.0.1/hook",
		"https://255.255.255.255/hook",
		"https://192.0.0.8/hook",
		"https://192.0.2.10/hook",
		"https://198.51.100.7/hook",
		"https://203.0.113.9/hook",
		"https://[2001:db8::1]/hook",
		"https://[100::1]/hook",
		// benchmarking
		"https://198.18.0.1/hook",
		"https://198.19.255.254/hook",
		// numeric tricks: decimal, octal, hex, short and mixed forms
		"https://2130706433/hook",
		"https://3232235777/hook",
		"https://017700000001/hook",
		"https://0177.0.0.1/hook",
		"https://0x7f.0.0.1/hook",
		"https://0x7f000001/hook",
		"https://0X7F.0.0.1/hook",
		"https://127.1/hook",
		"https://127.0.1/hook",
		"https://10.1/hook",
		"https://0x7f.1/hook",
		"https://0177.0.1/hook",
		"https://127.0.0.01/hook",
		"https://127.000.000.001/hook",
		"https://0/hook",
		"https://8.8.8.010/hook", // a leading zero: octal to some parsers, even for a public address
		"https://1.2.3.4.5/hook",
		// localhost and internal names
		"https://localhost/hook",
		"https://LOCALHOST:8443/hook",
		"https://localhost./hook",
		"https://api.localhost/hook",
		"https://printer.local/hook",
		"https://metadata.google.internal/computeMetadata/v1/",
		"https://router.home.arpa/hook",
		"https://intranet/hook",
		// userinfo tricks
		"https://example.com@127.0.0.1/hook",
	}
	if len(forbidden) < 30 {
		t.Fatalf("only %d destinations", len(forbidden))
	}
	for _, u := range forbidden {
		r := e.do("POST", "/v1/webhook-endpoints", e.Boot.APIKey, map[string]any{"url": u})
		if r.Status == 201 {
			t.Errorf("%s was accepted: %s", u, r.Raw)
			continue
		}
		if r.Status != 400 || r.ErrCode() != "invalid_request" || r.details()["field"] != "url" {
			t.Errorf("%s: %d %s, want 400 invalid_request with details.field url", u, r.Status, r.Raw)
		}
	}
	erRequireField(t, erRequireEnvelope(t, e.do("POST", "/v1/webhook-endpoints", e.Boot.APIKey, map[string]any{"url": "https://[::1]/x"}), 400, "invalid_request"), "url", nil)
	if list := e.do("GET", "/v1/webhook-endpoints", e.Boot.APIKey, nil).must(t, 200).Data(); len(list) != 0 {
		t.Fatalf("refused destinations left endpoints behind: %v", list)
	}

	// Public destinations pass the same checks (the table is not refusing
	// everything). Nothing is emitted here, so nothing is sent to them.
	for _, u := range []string{"https://example.com/hook", "https://93.184.215.14/hook", "https://[2606:4700:4700::1111]:8443/hook", "https://hooks.example.org./a?b=c"} {
		e.do("POST", "/v1/webhook-endpoints", e.Boot.APIKey, map[string]any{"url": u}).must(t, 201)
	}
}

// TestWebhookEndpointCreateListDelete: validation, the events default, the
// secret shown once, idempotent replays, DELETE, and the audit log.
func TestWebhookEndpointCreateListDelete(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	post := func(body any, headers ...string) *resp {
		return e.do("POST", "/v1/webhook-endpoints", k, body, headers...)
	}
	for _, c := range []struct {
		body  any
		field string
	}{
		{map[string]any{}, "url"},
		{map[string]any{"url": ""}, "url"},
		{map[string]any{"url": "http://example.com/hook"}, "url"},
		{map[string]any{"url": "example.com/hook"}, "url"},
		{map[string]any{"url": "https://example.com/hook", "events": []string{"room.exploded"}}, "events"},
		{map[string]any{"url": "https://example.com/hook", "events": []string{"room.started", "Room.Ended"}}, "events"},
		{map[string]any{"url": "https://example.com/hook", "events": []string{}}, "events"},
		{map[string]any{"url": "https://example.com/hook", "events": []string{"room.started", "room.started"}}, "events"},
	} {
		r := post(c.body)
		erRequireField(t, erRequireEnvelope(t, r, 400, "invalid_request"), c.field, r.Raw)
	}
	erRequireEnvelope(t, post(`{"url":"https://example.com/hook","events":"room.started"}`), 400, "invalid_request")

	// Omitted events: every type.
	all := post(map[string]any{"url": "https://example.com/all"}).must(t, 201)
	var allEvents []string
	for _, v := range all.JSON["events"].([]any) {
		allEvents = append(allEvents, v.(string))
	}
	if got, want := slices.Sorted(slices.Values(allEvents)), slices.Sorted(slices.Values(whAllEventTypes)); !slices.Equal(got, want) {
		t.Fatalf("omitted events lists %v, want all %d types %v", allEvents, len(want), want)
	}
	secretAll := all.Str("signing_secret")
	if all.Str("object") != "webhook_endpoint" || !strings.HasPrefix(all.Str("id"), "we_") || all.Str("url") != "https://example.com/all" ||
		all.Str("status") != "enabled" || all.JSON["disabled_at"] != nil || all.Str("created_at") == "" ||
		!strings.HasPrefix(secretAll, "whsec_") || len(secretAll) < len("whsec_")+32 {
		t.Fatalf("create response: %s", all.Raw)
	}
	one := post(map[string]any{"url": "https://example.com/one", "events": []string{"participant.joined"}}).must(t, 201)
	if evs := one.JSON["events"].([]any); len(evs) != 1 || evs[0] != "participant.joined" {
		t.Fatalf("events %v", evs)
	}
	if one.Str("signing_secret") == secretAll || !strings.HasPrefix(one.Str("signing_secret"), "whsec_") {
		t.Fatalf("secrets %q and %q", secretAll, one.Str("signing_secret"))
	}

	// Idempotency-Key: the replay returns the same endpoint and secret,
	// and creates nothing.
	body := `{"url":"https://example.com/idem","events":["room.ended"]}`
	first := post(body, idem("ep-1")).must(t, 201)
	replay := post(body, idem("ep-1")).must(t, 201)
	if !bytes.Equal(first.Raw, replay.Raw) || replay.Header.Get("Idempotent-Replayed") != "true" ||
		replay.Str("signing_secret") != first.Str("signing_secret") || replay.Str("id") != first.Str("id") {
		t.Fatalf("replay:\n%s\n%s (replayed %q)", first.Raw, replay.Raw, replay.Header.Get("Idempotent-Replayed"))
	}
	post(`{"url":"https://example.com/other","events":["room.ended"]}`, idem("ep-1")).mustErr(t, 409, "conflict")
	secrets := []string{secretAll, one.Str("signing_secret"), first.Str("signing_secret")}

	// The list: three endpoints, newest first, never a secret.
	list := e.do("GET", "/v1/webhook-endpoints", k, nil).must(t, 200)
	var listed []string
	for _, ep := range list.Data() {
		listed = append(listed, ep["id"].(string))
	}
	if !slices.Equal(listed, []string{first.Str("id"), one.Str("id"), all.Str("id")}) {
		t.Fatalf("list: %s", list.Raw)
	}
	for _, ep := range list.Data() {
		if _, ok := ep["signing_secret"]; ok {
			t.Fatalf("list shows a secret: %s", list.Raw)
		}
	}
	for _, s := range secrets {
		if bytes.Contains(list.Raw, []byte(s)) || bytes.Contains(list.Raw, []byte("whsec_")) {
			t.Fatalf("list leaks a secret: %s", list.Raw)
		}
	}

	// DELETE disables, idempotently; the record stays listed.
	del := e.do("DELETE", "/v1/webhook-endpoints/"+one.Str("id"), k, nil).must(t, 200)
	if del.Str("status") != "disabled" || del.Str("disabled_at") == "" || del.Str("id") != one.Str("id") || bytes.Contains(del.Raw, []byte("whsec_")) {
		t.Fatalf("DELETE: %s", del.Raw)
	}
	e.clock.Advance(time.Second)
	again := e.do("DELETE", "/v1/webhook-endpoints/"+one.Str("id"), k, nil).must(t, 200)
	if again.Str("status") != "disabled" || again.Str("disabled_at") != del.Str("disabled_at") {
		t.Fatalf("second DELETE: %s (first %s)", again.Raw, del.Raw)
	}
	for _, ep := range e.do("GET", "/v1/webhook-endpoints", k, nil).must(t, 200).Data() {
		want := "enabled"
		if ep["id"] == one.Str("id") {
			want = "disabled"
		}
		if ep["status"] != want {
			t.Fatalf("listed %v, want status %s", ep, want)
		}
	}
	for _, id := range []string{"we_aaaaaaaaaaaaaaaaaaaaaaaa", "we_nope", "room_aaaaaaaaaaaaaaaaaaaaaaaa", one.Str("id") + "x"} {
		erRequireEnvelope(t, e.do("DELETE", "/v1/webhook-endpoints/"+id, k, nil), 404, "webhook_endpoint_not_found")
		erRequireEnvelope(t, e.do("GET", "/v1/webhook-endpoints/"+id+"/deliveries", k, nil), 404, "webhook_endpoint_not_found")
		erRequireEnvelope(t, e.do("POST", "/v1/webhook-endpoints/"+id+"/deliveries/wdl_aaaaaaaaaaaaaaaaaaaaaaaa/retry", k, nil), 404, "webhook_endpoint_not_found")
	}

	// Audit: one created entry per endpoint (the replay wrote none), one
	// disabled entry (the repeated DELETE wrote none), and no secret.
	created := e.whAudit("webhook_endpoint.created")
	var createdIDs []string
	for _, en := range created {
		createdIDs = append(createdIDs, whTargetID(en))
		if tg := en["target"].(map[string]any); tg["type"] != "webhook_endpoint" {
			t.Fatalf("audit target %v", tg)
		}
	}
	if !slices.Equal(createdIDs, []string{first.Str("id"), one.Str("id"), all.Str("id")}) {
		t.Fatalf("webhook_endpoint.created entries for %v", createdIDs)
	}
	if d := e.whAudit("webhook_endpoint.disabled"); len(d) != 1 || whTargetID(d[0]) != one.Str("id") {
		t.Fatalf("webhook_endpoint.disabled entries %v", d)
	}
	if raw := e.do("GET", "/v1/audit-logs?limit=100", k, nil).must(t, 200).Raw; bytes.Contains(raw, []byte("whsec_")) {
		t.Fatalf("the audit log holds a secret: %s", raw)
	}
}

func TestWebhookEndpointScopes(t *testing.T) {
	e := start(t)
	epID, _ := e.whCreate("https://example.com/hook", nil)
	_, readKey := erMintKey(e, "webhooks:read")
	_, writeKey := erMintKey(e, "webhooks:write")
	_, otherKey := erMintKey(e, "rooms:read", "rooms:write", "billing:read", "audit_logs:read")
	good := map[string]any{"url": "https://example.com/x"}
	deliveries := "/v1/webhook-endpoints/" + epID + "/deliveries"
	retry := deliveries + "/wdl_aaaaaaaaaaaaaaaaaaaaaaaa/retry"
	denied := func(r *resp) { t.Helper(); erRequireEnvelope(t, r, 403, "permission_denied") }

	// webhooks:read reads, and nothing else.
	e.do("GET", "/v1/webhook-endpoints", readKey, nil).must(t, 200)
	e.do("GET", deliveries, readKey, nil).must(t, 200)
	denied(e.do("POST", "/v1/webhook-endpoints", readKey, good))
	denied(e.do("POST", "/v1/webhook-endpoints", readKey, map[string]any{"url": "http://127.0.0.1/"})) // scope before validation
	denied(e.do("DELETE", "/v1/webhook-endpoints/"+epID, readKey, nil))
	denied(e.do("POST", retry, readKey, nil))

	// webhooks:write writes, and reads nothing.
	denied(e.do("GET", "/v1/webhook-endpoints", writeKey, nil))
	denied(e.do("GET", deliveries, writeKey, nil))
	created := e.do("POST", "/v1/webhook-endpoints", writeKey, good).must(t, 201)
	erRequireEnvelope(t, e.do("POST", retry, writeKey, nil), 404, "invalid_request")
	e.do("DELETE", "/v1/webhook-endpoints/"+created.Str("id"), writeKey, nil).must(t, 200)

	// Other scopes: nothing.
	denied(e.do("GET", "/v1/webhook-endpoints", otherKey, nil))
	denied(e.do("GET", deliveries, otherKey, nil))
	denied(e.do("POST", "/v1/webhook-endpoints", otherKey, good))
	denied(e.do("DELETE", "/v1/webhook-endpoints/"+epID, otherKey, nil))
	denied(e.do("POST", retry, otherKey, nil))

	// Nothing the denied calls asked for happened.
	list := e.do("GET", "/v1/webhook-endpoints", e.Boot.APIKey, nil).must(t, 200).Data()
	if len(list) != 2 || list[1]["id"] != epID || list[1]["status"] != "enabled" || list[0]["status"] != "disabled" {
		t.Fatalf("endpoints after the denied calls: %v", list)
	}
}

func TestWebhookEndpointLimits(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	n := 0
	create := func() *resp {
		n++
		return e.do("POST", "/v1/webhook-endpoints", k, map[string]any{"url": fmt.Sprintf("https://example.com/hook/%d", n)})
	}
	var active []string
	for range 16 {
		active = append(active, create().must(t, 201).Str("id"))
	}
	d := erRequireEnvelope(t, create(), 409, "webhook_endpoint_limit_reached")
	if d["limit"] != float64(16) {
		t.Errorf("details %v, want limit 16", d)
	}
	// A disabled endpoint frees its slot; disabled endpoints do not count.
	e.do("DELETE", "/v1/webhook-endpoints/"+active[0], k, nil).must(t, 200)
	active = append(active[1:], create().must(t, 201).Str("id"))
	erRequireEnvelope(t, create(), 409, "webhook_endpoint_limit_reached")

	// A new minute: 20 creations pass, the 21st is rate limited, with
	// fewer than 16 active endpoints throughout.
	e.clock.Advance(time.Minute)
	for _, id := range active {
		e.do("DELETE", "/v1/webhook-endpoints/"+id, k, nil).must(t, 200)
	}
	active = nil
	for i := range 20 {
		active = append(active, create().must(t, 201).Str("id"))
		if i == 15 { // keep room under the active limit
			for _, id := range active[:5] {
				e.do("DELETE", "/v1/webhook-endpoints/"+id, k, nil).must(t, 200)
			}
		}
	}
	if got := len(active) - 5; got != 15 {
		t.Fatalf("%d active", got)
	}
	mustRateLimited(t, create(), 20, "webhook_endpoint_creates_per_minute", 60)
	e.clock.Advance(30 * time.Second)
	mustRateLimited(t, create(), 20, "webhook_endpoint_creates_per_minute", 30)
	e.clock.Advance(30 * time.Second)
	create().must(t, 201)
	erRequireEnvelope(t, create(), 409, "webhook_endpoint_limit_reached")
	listed := 0
	for _, ep := range e.do("GET", "/v1/webhook-endpoints?limit=100", k, nil).must(t, 200).Data() {
		if ep["status"] == "enabled" {
			listed++
		}
	}
	if listed != 16 {
		t.Fatalf("%d enabled endpoints listed, want 16", listed)
	}
}

// --- delivery ------------------------------------------------------------------

// TestWebhookDeliveryEnvelopeSignatureAndSequence: a room's whole life
// through the media node, delivered to an endpoint of every type, one
// subscribed to participant.joined only, and one disabled halfway.
func TestWebhookDeliveryEnvelopeSignatureAndSequence(t *testing.T) {
	rcv := newWHReceiver(t)
	e := start(t, rcv.flags()...)
	rcv.setNow(e.clock.Now)
	project := e.Boot.ProjectID
	allID, allSecret := e.whCreate(rcv.url("/all?src=rtcd&x=%2F"), nil)
	joinedID, joinedSecret := e.whCreate(rcv.url("/joined"), []string{"participant.joined"})
	goneID, goneSecret := e.whCreate(rcv.url("/gone"), nil)

	room := e.createRoom(map[string]any{"name": "seq"})
	annID, annToken := e.createParticipant(room, map[string]any{"name": "ann"})
	bobID, bobToken := e.createParticipant(room, map[string]any{"name": "bob"})
	ann := e.joinMedia(annToken)
	e.eventually("ann joined", func() bool { return e.participantStatus(room, annID) == "joined" })
	e.stay(10*time.Second, ann)
	bob := e.joinMedia(bobToken)
	e.eventually("bob joined", func() bool { return e.participantStatus(room, bobID) == "joined" })

	// The third endpoint got room.started and both joins; disabled now, it
	// gets nothing more.
	gone := whCheckAll(t, rcv.waitEvents(e, "/gone", 3), goneSecret, project)
	e.do("DELETE", "/v1/webhook-endpoints/"+goneID, e.Boot.APIKey, nil).must(t, 200)

	e.stay(20*time.Second, ann, bob)
	ann.send(map[string]any{"type": "leave"})
	e.eventually("ann left", func() bool { return e.participantStatus(room, annID) == "left" })
	e.stay(10*time.Second, bob)
	e.whRoomEnd(room) // finalizes bob's open session, then room.ended

	// room.started, 2 joined, 2 left, 2 usage.finalized, room.ended.
	allReqs := rcv.waitEvents(e, "/all", 8)
	for _, q := range rcv.requests("/all") {
		if q.Path != "/all?src=rtcd&x=%2F" {
			t.Fatalf("delivered to %q: the endpoint's path and query must be kept", q.Path)
		}
	}
	events := whCheckAll(t, rcv.requests("/all"), allSecret, project)
	if len(events) != len(allReqs) {
		t.Fatalf("%d events", len(events))
	}
	sort.Slice(events, func(i, j int) bool { return events[i].seq(t) < events[j].seq(t) })
	var types []string
	pos := map[string]int{} // type/participant -> sequence
	for i, ev := range events {
		if ev.Data["room_id"] != room {
			t.Fatalf("%s: data.room_id %v, want %s", ev.Type, ev.Data["room_id"], room)
		}
		if ev.seq(t) != i+1 {
			t.Fatalf("sequences of the room are not 1..8 without gaps or repeats: %+v", events)
		}
		if i > 0 && ev.CreatedAt < events[i-1].CreatedAt {
			t.Fatalf("sequence %d created at %s, before sequence %d at %s", i+1, ev.CreatedAt, i, events[i-1].CreatedAt)
		}
		types = append(types, ev.Type)
		pid, _ := ev.Data["participant_id"].(string)
		pos[ev.Type+"/"+pid] = ev.seq(t)
		switch ev.Type {
		case "participant.joined", "participant.left", "usage.finalized":
			if pid != annID && pid != bobID {
				t.Fatalf("%s: data.participant_id %v", ev.Type, ev.Data["participant_id"])
			}
		}
	}
	if types[0] != "room.started" || types[1] != "participant.joined" || types[7] != "room.ended" {
		t.Fatalf("event order by sequence: %v", types)
	}
	for _, p := range []string{annID, bobID} {
		j, l, u := pos["participant.joined/"+p], pos["participant.left/"+p], pos["usage.finalized/"+p]
		if j == 0 || l == 0 || u == 0 || j >= l || l >= u {
			t.Fatalf("participant %s: joined %d, left %d, usage.finalized %d: %v", p, j, l, u, types)
		}
	}
	if pos["participant.left/"+annID] >= pos["participant.left/"+bobID] {
		t.Fatalf("ann left first: %v", pos)
	}
	byID := map[string]whEvent{}
	for _, ev := range events {
		byID[ev.ID] = ev
	}

	// participant.joined only: exactly the two joins, byte for byte the
	// same events, signed with that endpoint's own secret.
	joined := rcv.waitEvents(e, "/joined", 2)
	for _, ev := range whCheckAll(t, rcv.requests("/joined"), joinedSecret, project) {
		if ev.Type != "participant.joined" || byID[ev.ID].Type != "participant.joined" {
			t.Fatalf("the participant.joined endpoint got %s %s", ev.Type, ev.ID)
		}
	}
	if q := joined[0]; whSign(allSecret, q.Header.Get("X-RTC-Timestamp"), q.Body) == q.Header.Get("X-RTC-Signature") {
		t.Fatal("two endpoints sign with the same secret")
	}
	if dl := e.whDeliveries(joinedID); len(dl) != 2 || dl[0]["event_type"] != "participant.joined" || dl[1]["event_type"] != "participant.joined" {
		t.Fatalf("deliveries of the participant.joined endpoint: %v", dl)
	}

	// The disabled endpoint: every event after room.started and the joins
	// was fanned out with the others (all 8 reached /all), none to it.
	for _, ev := range gone {
		if ev.Type != "room.started" && ev.Type != "participant.joined" {
			t.Fatalf("the endpoint got %s before it was disabled", ev.Type)
		}
	}
	if n := len(whDistinct(rcv.requests("/gone"))); n != 3 {
		t.Fatalf("a disabled endpoint received %d events, want the 3 before it was disabled", n)
	}
	if dl := e.whDeliveries(goneID); len(dl) != 3 {
		t.Fatalf("a disabled endpoint has %d deliveries, want 3: %v", len(dl), dl)
	}
	if dl := e.whDeliveries(allID); len(dl) != 8 {
		t.Fatalf("%d deliveries to the all-events endpoint", len(dl))
	}
}

// TestWebhookDeliveryEveryEmittedType: every event type this server can
// produce with the sandbox provider reaches a subscribed endpoint.
// (payment.refunded comes only from a real provider's refund callback.)
func TestWebhookDeliveryEveryEmittedType(t *testing.T) {
	rcv := newWHReceiver(t)
	e := start(t, rcv.flags("--bootstrap-credit=2.00", "--minimum-credit-to-start=1.00", "--low-credit-threshold=1.50",
		"--participant-minute-price=0.600000", "--settle-interval-seconds=10", "--topup-expiry-seconds=60")...)
	rcv.setNow(e.clock.Now)
	project := e.Boot.ProjectID
	allID, allSecret := e.whCreate(rcv.url("/all"), nil)
	_, failedSecret := e.whCreate(rcv.url("/failed"), []string{"payment.failed"})

	room := e.createRoom(map[string]any{"name": "every"})
	annID, annToken := e.createParticipant(room, map[string]any{"name": "ann"})
	ann := e.joinMedia(annToken)
	e.eventually("ann joined", func() bool { return e.participantStatus(room, annID) == "joined" })
	e.crDrain(60*time.Second, "1.40", ann) // below 1.50: credit.low
	e.crDrain(50*time.Second, "0.90", ann) // below 1.00: credit.exhausted
	ann.send(map[string]any{"type": "leave"})
	e.eventually("ann left", func() bool { return e.participantStatus(room, annID) == "left" })
	e.whRoomEnd(room)

	paid := e.blCreateTopup("5.00", "card").must(t, 201) // 5.90: credit.restored
	failed := e.blCreateTopup("6.00", "card").must(t, 201)
	canceled := e.blCreateTopup("7.00", "card").must(t, 201)
	for tp, outcome := range map[*resp]string{paid: "succeeded", failed: "failed", canceled: "canceled"} {
		if status, html := e.blPage(tp.Str("authorize_url"), outcome); status != 200 {
			t.Fatalf("%s: %d %s", outcome, status, html)
		}
	}
	expired := e.blCreateTopup("8.00", "card").must(t, 201)
	// Past expires_at (its creation instant is a few ns after the clock's
	// reading when other records were created at the same reading).
	e.clock.Advance(61 * time.Second)
	e.eventually("the unpaid top-up expired", func() bool { return e.blTopup(expired.Str("payment_id")).Str("status") == "expired" })

	want := map[string]int{
		"room.started": 1, "participant.joined": 1, "credit.low": 1, "credit.exhausted": 1,
		"participant.left": 1, "usage.finalized": 1, "room.ended": 1,
		"payment.succeeded": 1, "credit.restored": 1, "payment.failed": 1, "payment.canceled": 1, "payment.expired": 1,
	}
	rcv.waitEvents(e, "/all", len(want))
	events := whCheckAll(t, rcv.requests("/all"), allSecret, project)
	got := map[string]int{}
	byType := map[string]whEvent{}
	for _, ev := range events {
		got[ev.Type]++
		byType[ev.Type] = ev
	}
	for typ, n := range want {
		if got[typ] != n {
			t.Fatalf("delivered types %v, want %v", got, want)
		}
	}
	if d := byType["participant.joined"].Data; d["room_id"] != room || d["participant_id"] != annID {
		t.Fatalf("participant.joined data %v", d)
	}
	if d := byType["usage.finalized"].Data; d["participant_id"] != annID || d["participant_seconds"] != float64(110) {
		t.Fatalf("usage.finalized data %v", d)
	}
	if d := byType["room.ended"].Data; d["room_id"] != room {
		t.Fatalf("room.ended data %v", d)
	}
	for typ, state := range map[string]string{"credit.low": "low", "credit.exhausted": "exhausted", "credit.restored": "normal"} {
		if d := byType[typ].Data; d["credit_state"] != state || d["account_id"] != e.Boot.AccountID {
			t.Fatalf("%s data %v", typ, d)
		}
	}
	for typ, tp := range map[string]*resp{"payment.succeeded": paid, "payment.failed": failed, "payment.canceled": canceled, "payment.expired": expired} {
		if d := byType[typ].Data; d["payment_id"] != tp.Str("payment_id") || d["status"] != strings.TrimPrefix(typ, "payment.") {
			t.Fatalf("%s data %v", typ, d)
		}
	}
	// The sequence of room events is per room and starts at 1.
	if byType["room.started"].seq(t) != 1 || byType["room.ended"].seq(t) != 5 {
		t.Fatalf("room sequences: started %v, ended %v", byType["room.started"].Data, byType["room.ended"].Data)
	}

	// The payment.failed endpoint got exactly that event.
	only := whCheckAll(t, rcv.waitEvents(e, "/failed", 1), failedSecret, project)
	if only[0].Type != "payment.failed" || only[0].ID != byType["payment.failed"].ID {
		t.Fatalf("the payment.failed endpoint got %+v", only)
	}
	for _, dl := range e.whDeliveries(allID) {
		if dl["status"] != "succeeded" {
			t.Fatalf("delivery %v", dl)
		}
	}
}

// TestWebhookSlowEndpointsDoNotDelayOthers: fifteen endpoints whose
// receiver never answers hold their attempts open for the whole timeout; a
// healthy endpoint gets every event meanwhile. The timeout is the longest
// allowed (60 s), far beyond the test's run, so that the stuck attempts
// cannot time out while a slow machine is still delivering to the healthy
// endpoint.
func TestWebhookSlowEndpointsDoNotDelayOthers(t *testing.T) {
	rcv := newWHReceiver(t)
	e := start(t, rcv.flags("--webhook-timeout-seconds=60")...)
	t.Cleanup(rcv.unblock)
	rcv.setNow(e.clock.Now)
	const slow = 15
	for i := range slow {
		path := fmt.Sprintf("/slow/%d", i)
		rcv.on(path, rcv.block())
		e.whCreate(rcv.url(path), []string{"room.ended"})
	}
	fastID, fastSecret := e.whCreate(rcv.url("/fast"), []string{"room.ended"})

	e.whRoomEnd(e.createRoom(nil))
	e.eventually("every slow endpoint holds an attempt open", func() bool {
		n := 0
		for _, q := range rcv.requests("") {
			if strings.HasPrefix(q.Path, "/slow/") {
				n++
			}
		}
		return n == slow
	})
	stuckSince := time.Now()
	const more = 10
	for range more {
		e.whRoomEnd(e.createRoom(nil))
	}
	fast := rcv.waitEvents(e, "/fast", 1+more)
	elapsed := time.Since(stuckSince)
	// Every slow attempt is still open: the sender has not given up on any
	// (nor can it have, before its 60 s timeout), and none has had a second
	// request.
	for i := range slow {
		reqs := rcv.requests(fmt.Sprintf("/slow/%d", i))
		if len(reqs) != 1 || reqs[0].Ctx.Err() != nil || reqs[0].Status != 0 {
			t.Fatalf("slow endpoint %d: %d requests, first abandoned: %v; the healthy endpoint waited for it (%v)", i, len(reqs), reqs[0].Ctx.Err() != nil, elapsed)
		}
	}
	whCheckAll(t, fast, fastSecret, e.Boot.ProjectID)
	// The receiver has answered; the sender records each attempt just
	// after, so the last ones may still be on their way to the log.
	e.eventually("every healthy delivery recorded as succeeded", func() bool {
		dls := e.whDeliveries(fastID)
		for _, dl := range dls {
			if dl["status"] != "succeeded" {
				return false
			}
		}
		return len(dls) == 1+more
	})
	t.Logf("%d deliveries to the healthy endpoint %v after %d endpoints got stuck", more, elapsed.Round(time.Millisecond), slow)
}

// TestWebhookRedirectTimeoutAndErrorsAreFailures: 3xx is a failure and is
// not followed, a receiver that does not answer within the timeout is a
// failure, and a large error body is captured only up to the bound. Each is
// retried on the (fake-clock) schedule and then succeeds.
//
// The receiver that never answers meets a 1 s timeout on a server of its
// own; the receivers that do answer run under the longest timeout (60 s),
// so that a slow machine cannot turn their answers into timeouts.
func TestWebhookRedirectTimeoutAndErrorsAreFailures(t *testing.T) {
	t.Run("redirects and errors", func(t *testing.T) { whFailuresAreRetried(t, 60, false) })
	t.Run("timeout", func(t *testing.T) { whFailuresAreRetried(t, 1, true) })
}

// whFailuresAreRetried runs TestWebhookRedirectTimeoutAndErrorsAreFailures'
// cases (the one that never answers, or the others) on a server with the
// given delivery timeout.
func whFailuresAreRetried(t *testing.T, timeoutSeconds int, unanswered bool) {
	rcv := newWHReceiver(t)
	e := start(t, rcv.flags(fmt.Sprintf("--webhook-timeout-seconds=%d", timeoutSeconds), "--webhook-retry-schedule=10,60")...)
	t.Cleanup(rcv.unblock)
	rcv.setNow(e.clock.Now)
	redirect := func(code int, to string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, code) }
	}
	big := strings.Repeat("x", 100<<10)
	type failure struct {
		path    string
		handler http.HandlerFunc
		status  float64
		errHas  string
	}
	cases := []failure{
		{"/r301", redirect(301, "/target"), 301, "redirect"},
		{"/r302", redirect(302, rcv.url("/target")), 302, "redirect"},
		{"/r307", redirect(307, "/target"), 307, "redirect"},
		{"/r308", redirect(308, rcv.url("/target")), 308, "redirect"},
		{"/big", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503); _, _ = io.WriteString(w, big) }, 503, "503"},
	}
	if unanswered {
		cases = []failure{{"/slow", rcv.block(), 0, "timeout"}}
	}
	ids := map[string]string{}
	for _, c := range cases {
		rcv.on(c.path, c.handler)
		ids[c.path], _ = e.whCreate(rcv.url(c.path), []string{"room.ended"})
	}
	e.whRoomEnd(e.createRoom(nil))
	latest := func(path string) map[string]any {
		dl := e.whDeliveries(ids[path])
		if len(dl) > 1 {
			t.Fatalf("%s: %d deliveries", path, len(dl))
		}
		if len(dl) == 0 {
			return map[string]any{}
		}
		return dl[0]
	}
	for _, c := range cases {
		e.eventually(c.path+" first attempt recorded", func() bool { return latest(c.path)["attempt_count"] == float64(1) })
		dl := latest(c.path)
		att := dl["attempts"].([]any)[0].(map[string]any)
		errText, _ := att["error"].(string)
		if dl["status"] != "retrying" || att["response_status"] != c.status || !strings.Contains(errText, c.errHas) {
			t.Fatalf("%s: delivery %v", c.path, dl)
		}
		requested, err1 := time.Parse(time.RFC3339Nano, att["requested_at"].(string))
		next, err2 := time.Parse(time.RFC3339Nano, dl["next_attempt_at"].(string))
		if err1 != nil || err2 != nil || next.Sub(requested) != 10*time.Second || att["next_attempt_at"] != dl["next_attempt_at"] {
			t.Fatalf("%s: requested %v, next %v; want 10 s apart", c.path, att["requested_at"], dl["next_attempt_at"])
		}
		body, _ := att["response_body"].(string)
		switch c.path {
		case "/slow":
			if ms, _ := att["latency_ms"].(float64); ms < float64(timeoutSeconds)*900 {
				t.Fatalf("timed out after %v ms with a %d s timeout", ms, timeoutSeconds)
			}
		case "/big":
			if len(body) == 0 || len(body) > 4096 || !strings.HasPrefix(big, body) {
				t.Fatalf("captured %d bytes of a %d-byte body", len(body), len(big))
			}
		}
	}
	// Had a redirect been followed, /target would have been requested before
	// the attempt was recorded.
	if n := len(rcv.requests("/target")); n != 0 {
		t.Fatalf("a redirect was followed %d times", n)
	}

	// Healthy again: the retry 10 s later (fake clock) succeeds.
	for _, c := range cases {
		rcv.on(c.path, whStatus(204))
	}
	e.clock.Advance(10 * time.Second)
	for _, c := range cases {
		e.eventually(c.path+" retried", func() bool { return latest(c.path)["status"] == "succeeded" })
		dl := latest(c.path)
		if dl["attempt_count"] != float64(2) || dl["next_attempt_at"] != nil {
			t.Fatalf("%s: %v", c.path, dl)
		}
		if att := dl["attempts"].([]any)[1].(map[string]any); att["response_status"] != float64(204) || att["error"] != nil || att["next_attempt_at"] != nil {
			t.Fatalf("%s: second attempt %v", c.path, att)
		}
	}
	if n := len(rcv.requests("/target")); n != 0 {
		t.Fatalf("a redirect was followed %d times", n)
	}
}

// TestWebhookDeliveriesListAndRetry: the deliveries list's pagination and
// shape, and POST …/retry on unknown, succeeded and pending deliveries.
func TestWebhookDeliveriesListAndRetry(t *testing.T) {
	rcv := newWHReceiver(t)
	e := start(t, rcv.flags("--webhook-timeout-seconds=5", "--webhook-retry-schedule=10")...)
	t.Cleanup(rcv.unblock)
	rcv.setNow(e.clock.Now)
	k := e.Boot.APIKey
	epID, secret := e.whCreate(rcv.url("/ok"), []string{"room.ended"})
	path := "/v1/webhook-endpoints/" + epID + "/deliveries"

	page := func(query string) ([]map[string]any, bool) {
		t.Helper()
		r := e.do("GET", path+query, k, nil).must(t, 200)
		pg, _ := r.JSON["page"].(map[string]any)
		more, ok := pg["has_more"].(bool)
		if r.Str("object") != "list" || !ok {
			t.Fatalf("page envelope: %s", r.Raw)
		}
		return r.Data(), more
	}
	if items, more := page(""); len(items) != 0 || more {
		t.Fatalf("deliveries before any event: %v %v", items, more)
	}
	var rooms []string
	grow := func(n int) {
		t.Helper()
		for len(rooms) < n {
			e.clock.Advance(time.Millisecond)
			room := e.createRoom(nil)
			e.whRoomEnd(room)
			rooms = append(rooms, room)
		}
		rcv.waitEvents(e, "/ok", n)
		e.eventually("every delivery recorded", func() bool {
			items, _ := page("?limit=100")
			for _, dl := range items {
				if dl["status"] != "succeeded" {
					return false
				}
			}
			return true
		})
	}
	// The newest n deliveries, by the room of their event, newest first.
	roomOf := map[string]string{} // event id -> room
	check := func(query string, n int, wantMore bool) {
		t.Helper()
		for _, q := range rcv.requests("/ok") {
			var ev whEvent
			_ = json.Unmarshal(q.Body, &ev)
			roomOf[ev.ID], _ = ev.Data["room_id"].(string)
		}
		items, more := page(query)
		var got []string
		prev := ""
		for _, dl := range items {
			got = append(got, roomOf[dl["event_id"].(string)])
			if at := dl["created_at"].(string); prev != "" && at > prev {
				t.Fatalf("GET %s: created_at %s after %s: not newest first", query, at, prev)
			}
			prev = dl["created_at"].(string)
		}
		if want := pgNewestFirst(rooms, n); !slices.Equal(got, want) || more != wantMore {
			t.Fatalf("GET %s with %d deliveries: %d items (has_more %v), want %d (has_more %v)\n got %v\nwant %v", query, len(rooms), len(got), more, n, wantMore, got, want)
		}
	}
	grow(3)
	check("", 3, false)
	check("?limit=3", 3, false)
	check("?limit=2", 2, true)
	check("?limit=1", 1, true)
	whCheckAll(t, rcv.requests("/ok"), secret, e.Boot.ProjectID)
	items, _ := page("?limit=1")
	dl := items[0]
	att, _ := dl["attempts"].([]any)
	if dl["object"] != "webhook_delivery" || !strings.HasPrefix(dl["id"].(string), "wdl_") || dl["endpoint_id"] != epID ||
		!strings.HasPrefix(dl["event_id"].(string), "evt_") || dl["event_type"] != "room.ended" || dl["status"] != "succeeded" ||
		dl["attempt_count"] != float64(1) || dl["next_attempt_at"] != nil || len(att) != 1 {
		t.Fatalf("delivery: %v", dl)
	}
	if a := att[0].(map[string]any); a["attempt"] != float64(1) || a["response_status"] != float64(200) || a["requested_at"] == nil ||
		a["error"] != nil || a["next_attempt_at"] != nil {
		t.Fatalf("attempt: %v", a)
	}
	for _, bad := range []string{"0", "101", "-1", "abc", "1.5", ""} {
		r := e.do("GET", path+"?limit="+bad, k, nil)
		erRequireField(t, erRequireEnvelope(t, r, 400, "invalid_request"), "limit", r.Raw)
	}
	grow(50)
	check("", 50, false)
	check("?limit=49", 49, true)
	grow(101)
	check("", 50, true)
	check("?limit=100", 100, true)
	check("?limit=1", 1, true)

	// Retry: unknown deliveries are 404; a succeeded one is 409.
	for _, id := range []string{"wdl_aaaaaaaaaaaaaaaaaaaaaaaa", "wdl_x", "evt_aaaaaaaaaaaaaaaaaaaaaaaa"} {
		r := e.do("POST", path+"/"+id+"/retry", k, nil)
		erRequireField(t, erRequireEnvelope(t, r, 404, "invalid_request"), "delivery_id", r.Raw)
	}
	e.do("POST", path+"/"+dl["id"].(string)+"/retry", k, nil).mustErr(t, 409, "conflict")
	// Another endpoint's delivery is not this endpoint's.
	otherID, _ := e.whCreate(rcv.url("/busy"), []string{"room.ended"})
	r := e.do("POST", "/v1/webhook-endpoints/"+otherID+"/deliveries/"+dl["id"].(string)+"/retry", k, nil)
	erRequireField(t, erRequireEnvelope(t, r, 404, "invalid_request"), "delivery_id", r.Raw)

	// A dead delivery: two failed attempts under --webhook-retry-schedule=10.
	rcv.on("/busy", whStatus(500))
	e.whRoomEnd(e.createRoom(nil))
	var dead map[string]any
	e.eventually("first attempt failed", func() bool {
		dls := e.whDeliveries(otherID)
		return len(dls) == 1 && dls[0]["status"] == "retrying"
	})
	e.clock.Advance(10 * time.Second)
	e.eventually("dead", func() bool { dead = e.whDeliveries(otherID)[0]; return dead["status"] == "dead" })
	if dead["attempt_count"] != float64(2) || dead["next_attempt_at"] != nil {
		t.Fatalf("dead delivery %v", dead)
	}

	// Pending deliveries: the receiver holds the next attempt open, a
	// second event waits behind it. Retrying any delivery of the endpoint
	// answers at once, while that attempt is still open: the pending ones
	// stay pending, the dead one is due again.
	rcv.on("/busy", rcv.block())
	e.whRoomEnd(e.createRoom(nil))
	e.eventually("an attempt is open", func() bool { return len(rcv.requests("/busy")) == 3 })
	e.whRoomEnd(e.createRoom(nil))
	var listed []map[string]any
	e.eventually("two more deliveries", func() bool { listed = e.whDeliveries(otherID); return len(listed) == 3 })
	pending := listed[:2] // newest first, then the dead one
	if listed[2]["id"] != dead["id"] {
		t.Fatalf("deliveries %v", listed)
	}
	for _, p := range pending {
		if p["status"] != "pending" || p["attempt_count"] != float64(0) || p["next_attempt_at"] == nil {
			t.Fatalf("delivery behind an open attempt: %v", p)
		}
		r := e.do("POST", "/v1/webhook-endpoints/"+otherID+"/deliveries/"+p["id"].(string)+"/retry", k, nil).must(t, 200)
		if r.Str("id") != p["id"] || r.Str("status") != "pending" || r.JSON["attempt_count"] != float64(0) {
			t.Fatalf("retry of a pending delivery: %s", r.Raw)
		}
	}
	r = e.do("POST", "/v1/webhook-endpoints/"+otherID+"/deliveries/"+dead["id"].(string)+"/retry", k, nil).must(t, 200)
	if r.Str("status") != "retrying" || r.Str("next_attempt_at") != actors.Timestamp(e.clock.Now()) || r.JSON["attempt_count"] != float64(2) {
		t.Fatalf("retry of a dead delivery: %s", r.Raw)
	}
	if reqs := rcv.requests("/busy"); len(reqs) != 3 || reqs[2].Ctx.Err() != nil || reqs[2].Status != 0 {
		t.Fatal("the retries were answered only after the open attempt ended")
	}
	// A disabled endpoint's deliveries cannot be retried.
	e.do("DELETE", "/v1/webhook-endpoints/"+otherID, k, nil).must(t, 200)
	e.do("POST", "/v1/webhook-endpoints/"+otherID+"/deliveries/"+pending[0]["id"].(string)+"/retry", k, nil).mustErr(t, 409, "conflict")
}

// TestWebhookDisableRacingCreate: an endpoint deleted while another
// endpoint's creation is being committed stays disabled; the creation's
// publication must not bring back the endpoint list as it was before the
// delete.
func TestWebhookDisableRacingCreate(t *testing.T) {
	rcv := newWHReceiver(t)
	e := start(t, rcv.flags()...)
	rcv.setNow(e.clock.Now)
	k := e.Boot.APIKey
	e.whCreate(rcv.url("/sentinel"), []string{"room.ended"})
	const rounds = 25
	for i := range rounds {
		e.clock.Advance(time.Minute) // a fresh creation window per round
		oldID, _ := e.whCreate(rcv.url(fmt.Sprintf("/old/%d", i)), []string{"room.ended"})
		rs := e.parallel(2, func(j int) (*resp, error) {
			if j == 0 {
				return e.send("POST", "/v1/webhook-endpoints", k, map[string]any{"url": rcv.url(fmt.Sprintf("/new/%d", i)), "events": []string{"room.ended"}})
			}
			return e.send("DELETE", "/v1/webhook-endpoints/"+oldID, k, nil)
		})
		newID := rs[0].must(t, 201).Str("id")
		if rs[1].must(t, 200).Str("status") != "disabled" {
			t.Fatalf("DELETE: %s", rs[1].Raw)
		}
		// An event after both answered: the sentinel and the new endpoint
		// get it, the deleted endpoint does not (all three are fanned out
		// together, so once the sentinel has it the others' are decided).
		e.whRoomEnd(e.createRoom(nil))
		rcv.waitEvents(e, "/sentinel", i+1)
		if dl := e.whDeliveries(oldID); len(dl) != 0 {
			t.Fatalf("round %d: the deleted endpoint got a delivery after its DELETE answered: %v", i, dl)
		}
		if dl := e.whDeliveries(newID); len(dl) != 1 {
			t.Fatalf("round %d: the new endpoint has %d deliveries, want 1", i, len(dl))
		}
		e.do("DELETE", "/v1/webhook-endpoints/"+newID, k, nil).must(t, 200)
	}
}
