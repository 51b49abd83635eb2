package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBaseURLForms(t *testing.T) {
	cases := map[string]string{
		"http://h":              "http://h/v1",
		"http://h/":             "http://h/v1",
		"http://h/v1":           "http://h/v1",
		"http://h/v1/":          "http://h/v1",
		"http://h/v2":           "http://h/v2",
		"http://h/v2/":          "http://h/v2",
		"http://h/v10":          "http://h/v10",
		"http://h/prefix":       "http://h/prefix/v1",
		"http://h/prefix/":      "http://h/prefix/v1",
		"http://h/prefix/v1":    "http://h/prefix/v1",
		"https://h:8443//":      "https://h:8443/v1",
		"https://h/vx":          "https://h/vx/v1",
		"https://h/v1beta":      "https://h/v1beta/v1",
		"http://127.0.0.1:8080": "http://127.0.0.1:8080/v1",
	}
	for in, want := range cases {
		c, err := New("sk_live_x", WithBaseURL(in))
		if err != nil {
			t.Errorf("WithBaseURL(%q): %v", in, err)
			continue
		}
		if got := c.BaseURL(); got != want {
			t.Errorf("WithBaseURL(%q) = %q, want %q", in, got, want)
		}
	}
	for _, bad := range []string{"", "h", "/v1", "ftp://h", "http://", "http://h/?x=1", "http://h/#f", "http://u:p@h/"} {
		if _, err := New("sk_live_x", WithBaseURL(bad)); err == nil {
			t.Errorf("WithBaseURL(%q) accepted", bad)
		}
	}
	c, err := New("sk_live_x")
	if err != nil || c.BaseURL() != "http://127.0.0.1:8080/v1" {
		t.Errorf("default base = %v, %v", c, err)
	}
	if _, err := New(""); err == nil {
		t.Error("New accepted an empty API key")
	}
	if _, err := New("k", WithRetries(-1)); err == nil {
		t.Error("WithRetries(-1) accepted")
	}
}

// TestBaseURLPaths checks the path a call reaches for each base form.
func TestBaseURLPaths(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.URL.RequestURI())
		_, _ = io.WriteString(w, `{"object":"system_info","service":"rtcd"}`)
	}))
	defer srv.Close()
	for suffix, want := range map[string]string{
		"": "/v1/system/info", "/": "/v1/system/info", "/v1/": "/v1/system/info",
		"/v2": "/v2/system/info", "/prefix": "/prefix/v1/system/info",
	} {
		c, err := New("sk_live_x", WithBaseURL(srv.URL+suffix))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.GetSystemInfo(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got.Load() != want {
			t.Errorf("base %q: request went to %v, want %s", suffix, got.Load(), want)
		}
	}
}

// scripted answers each request with the next of its responses (the last
// one repeats) and records the requests.
type scripted struct {
	mu        sync.Mutex
	responses []func(w http.ResponseWriter)
	requests  []*http.Request
	bodies    []string
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	i := min(len(s.requests), len(s.responses)-1)
	s.requests = append(s.requests, r)
	s.bodies = append(s.bodies, string(b))
	s.mu.Unlock()
	s.responses[i](w)
}

func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

func status(code int, body string, headers ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

const roomJSON = `{"object":"room","id":"room_a","name":null,"status":"waiting","region":"global","max_participants":10,"metadata":{"n":123456789012345678901234567890},"created_at":"2026-11-22T12:30:07.723Z","expires_at":"2026-11-23T12:30:07.723Z","ended_at":null,"end_reason":null}`

func envelope(code, msg string) string {
	return `{"error":{"code":"` + code + `","message":"` + msg + `","request_id":"req_abc","details":{}}}`
}

// recorder is a BackoffFunc that records its arguments and never waits.
type recorder struct {
	mu    sync.Mutex
	calls [][2]time.Duration
}

func (r *recorder) backoff(retry int, retryAfter time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, [2]time.Duration{time.Duration(retry), retryAfter})
	return 0
}

func newTestClient(t *testing.T, h http.Handler, opts ...Option) (*Client, *recorder) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	rec := &recorder{}
	c, err := New("sk_live_test", append([]Option{WithBaseURL(srv.URL), WithBackoff(rec.backoff)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c, rec
}

func TestRetry503Then200(t *testing.T) {
	s := &scripted{responses: []func(http.ResponseWriter){
		status(503, envelope("service_unavailable", "busy")), status(200, roomJSON),
	}}
	c, rec := newTestClient(t, s)
	room, err := c.GetRoom(context.Background(), "room_a")
	if err != nil {
		t.Fatal(err)
	}
	if room.ID != "room_a" || s.count() != 2 {
		t.Fatalf("room %+v after %d requests", room, s.count())
	}
	if len(rec.calls) != 1 || rec.calls[0] != [2]time.Duration{1, 0} {
		t.Fatalf("backoff calls %v, want one (retry 1, no Retry-After)", rec.calls)
	}
	// Metadata numbers keep every digit.
	if n := room.Metadata["n"]; n == nil || n.(interface{ String() string }).String() != "123456789012345678901234567890" {
		t.Fatalf("metadata n = %#v", n)
	}
}

func TestRetry429HonoursRetryAfter(t *testing.T) {
	s := &scripted{responses: []func(http.ResponseWriter){
		status(429, envelope("rate_limited", "slow down"), "Retry-After", "7", "X-RateLimit-Limit", "1", "X-RateLimit-Remaining", "0"),
		status(201, roomJSON),
	}}
	c, rec := newTestClient(t, s)
	if _, err := c.CreateRoom(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if len(rec.calls) != 1 || rec.calls[0][1] != 7*time.Second {
		t.Fatalf("backoff calls %v, want Retry-After 7s passed", rec.calls)
	}
	// A create with retries on carries a generated Idempotency-Key, the same
	// on both attempts, and the same body.
	k1, k2 := s.requests[0].Header.Get("Idempotency-Key"), s.requests[1].Header.Get("Idempotency-Key")
	if k1 == "" || k1 != k2 || s.bodies[0] != "{}" || s.bodies[1] != "{}" {
		t.Fatalf("keys %q %q, bodies %q", k1, k2, s.bodies)
	}
}

func TestRetriesExhausted(t *testing.T) {
	s := &scripted{responses: []func(http.ResponseWriter){status(429, envelope("rate_limited", "x"), "Retry-After", "3")}}
	c, rec := newTestClient(t, s, WithRetries(3))
	_, err := c.ListRooms(context.Background(), 10)
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 429 || apiErr.Code != CodeRateLimited || apiErr.RetryAfter != 3*time.Second {
		t.Fatalf("err = %v", err)
	}
	if s.count() != 4 || len(rec.calls) != 3 || rec.calls[2][0] != 3 {
		t.Fatalf("%d requests, backoff calls %v", s.count(), rec.calls)
	}
	if got := s.requests[0].URL.RawQuery; got != "limit=10" {
		t.Fatalf("query %q", got)
	}
}

func TestNoRetryOnOther4xx(t *testing.T) {
	for _, code := range []int{400, 401, 402, 403, 404, 409, 410} {
		s := &scripted{responses: []func(http.ResponseWriter){status(code, envelope("conflict", "no"))}}
		c, rec := newTestClient(t, s)
		_, err := c.DeleteRoom(context.Background(), "room_a")
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Status != code || s.count() != 1 || len(rec.calls) != 0 {
			t.Fatalf("%d: err %v after %d requests", code, err, s.count())
		}
		if apiErr.RequestID != "req_abc" || apiErr.Message != "no" || apiErr.Details == nil {
			t.Fatalf("%d: %+v", code, apiErr)
		}
	}
}

func TestNoRetryWithoutIdempotency(t *testing.T) {
	// Top-up creation and a delivery retry take no Idempotency-Key: never retried.
	s := &scripted{responses: []func(http.ResponseWriter){status(503, envelope("service_unavailable", "x"))}}
	c, _ := newTestClient(t, s)
	if _, err := c.CreateTopup(context.Background(), &CreateTopupParams{Amount: "5.00"}); err == nil {
		t.Fatal("no error")
	}
	if _, err := c.RetryWebhookDelivery(context.Background(), "we_a", "wdl_a"); err == nil {
		t.Fatal("no error")
	}
	if s.count() != 2 {
		t.Fatalf("%d requests, want 2 (no retries)", s.count())
	}
	if s.requests[0].Header.Get("Idempotency-Key") != "" {
		t.Fatal("top-up sent an Idempotency-Key")
	}
	if _, err := c.CreateTopup(context.Background(), &CreateTopupParams{Amount: "5.00"}, WithIdempotencyKey("k")); !errors.Is(err, ErrIdempotencyNotSupported) {
		t.Fatalf("WithIdempotencyKey on a top-up: %v", err)
	}
	// With retries off, a create is sent once and gets no generated key.
	c0, _ := newTestClient(t, s, WithRetries(0))
	before := s.count()
	if _, err := c0.CreateRoom(context.Background(), nil); err == nil {
		t.Fatal("no error")
	}
	if s.count() != before+1 || s.requests[before].Header.Get("Idempotency-Key") != "" {
		t.Fatal("retries off: retried or sent a generated key")
	}
	// A caller's key is sent as given, and makes the create retryable.
	before = s.count()
	if _, err := c0.CreateRoom(context.Background(), nil, WithIdempotencyKey("mine-1")); err == nil {
		t.Fatal("no error")
	}
	if s.requests[before].Header.Get("Idempotency-Key") != "mine-1" {
		t.Fatal("caller's key not sent")
	}
}

func TestRetryIdempotencyInProgress(t *testing.T) {
	s := &scripted{responses: []func(http.ResponseWriter){
		status(409, envelope("idempotency_in_progress", "running")), status(201, roomJSON),
	}}
	c, _ := newTestClient(t, s)
	if _, err := c.CreateRoom(context.Background(), &CreateRoomParams{Name: String("a")}, WithIdempotencyKey("k1")); err != nil {
		t.Fatal(err)
	}
	if s.count() != 2 {
		t.Fatalf("%d requests", s.count())
	}
	// Another 409 is not retried.
	s2 := &scripted{responses: []func(http.ResponseWriter){status(409, envelope("conflict", "reused"))}}
	c2, _ := newTestClient(t, s2)
	if _, err := c2.CreateRoom(context.Background(), nil, WithIdempotencyKey("k1")); err == nil || s2.count() != 1 {
		t.Fatalf("conflict: %v after %d", err, s2.count())
	}
}

func TestRetryConnectionError(t *testing.T) {
	// A listener that accepts and closes the first connection, then serves.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			_ = conn.Close()
			return
		}
		_, _ = io.WriteString(w, roomJSON)
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	rec := &recorder{}
	c, _ := New("sk_live_x", WithBaseURL("http://"+ln.Addr().String()), WithBackoff(rec.backoff))
	if _, err := c.GetRoom(context.Background(), "room_a"); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 2 || len(rec.calls) != 1 {
		t.Fatalf("%d requests, backoff %v", n.Load(), rec.calls)
	}
	// A POST without a key is not retried after a connection error.
	n.Store(0)
	if _, err := c.CreateTopup(context.Background(), &CreateTopupParams{Amount: "5.00"}); err == nil || n.Load() != 1 {
		t.Fatalf("top-up after a dropped connection: %v, %d requests", err, n.Load())
	}
}

func TestBackoffRespectsContext(t *testing.T) {
	s := &scripted{responses: []func(http.ResponseWriter){status(429, envelope("rate_limited", "x"), "Retry-After", "30")}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, _ := New("sk_live_x", WithBaseURL(srv.URL)) // DefaultBackoff: would wait 30 s
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.GetRoom(ctx, "room_a")
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 429 {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > time.Second || s.count() != 1 {
		t.Fatalf("waited %v, %d requests: should give up at once when the wait outlives the context", time.Since(start), s.count())
	}
}

func TestDefaultBackoff(t *testing.T) {
	if d := DefaultBackoff(1, 4*time.Second); d != 4*time.Second {
		t.Fatalf("Retry-After not used: %v", d)
	}
	for retry, hi := range map[int]time.Duration{1: 500 * time.Millisecond, 2: time.Second, 3: 2 * time.Second, 9: 8 * time.Second} {
		for range 50 {
			if d := DefaultBackoff(retry, 0); d < hi/2 || d > hi {
				t.Fatalf("retry %d: %v outside [%v, %v]", retry, d, hi/2, hi)
			}
		}
	}
}

func TestRequestHeaders(t *testing.T) {
	s := &scripted{responses: []func(http.ResponseWriter){status(200, `{"service":"rtcd"}`)}}
	c, _ := newTestClient(t, s, WithUserAgent("acme/2.3"))
	if _, err := c.GetSystemInfo(context.Background(), WithRequestID("trace-1")); err != nil {
		t.Fatal(err)
	}
	h := s.requests[0].Header
	if h.Get("Authorization") != "Bearer sk_live_test" || h.Get("X-Request-Id") != "trace-1" ||
		h.Get("User-Agent") != "acme/2.3 rtcd-go-server/"+Version || h.Get("Content-Type") != "" {
		t.Fatalf("headers %v", h)
	}
	if _, err := c.CreateRoom(context.Background(), &CreateRoomParams{Name: String("x"), Metadata: Metadata{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	if s.requests[1].Header.Get("Content-Type") != "application/json" || s.bodies[1] != `{"name":"x","metadata":{"k":"v"}}` {
		t.Fatalf("create: %v %q", s.requests[1].Header, s.bodies[1])
	}
}

func TestNonEnvelopeError(t *testing.T) {
	s := &scripted{responses: []func(http.ResponseWriter){func(w http.ResponseWriter) {
		w.Header().Set("X-Request-Id", "req_hdr")
		w.WriteHeader(502)
		_, _ = io.WriteString(w, "<html>bad gateway</html>")
	}}}
	c, _ := newTestClient(t, s)
	_, err := c.GetBalance(context.Background())
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 502 || apiErr.Code != "" || apiErr.RequestID != "req_hdr" ||
		!strings.Contains(apiErr.Message, "bad gateway") || s.count() != 1 {
		t.Fatalf("err = %#v", err)
	}
	if !strings.Contains(apiErr.Error(), "502") {
		t.Fatal(apiErr.Error())
	}
}

func TestEmptyIDsRefused(t *testing.T) {
	c, _ := New("sk_live_x")
	ctx := context.Background()
	for _, err := range []error{
		func() error { _, err := c.GetRoom(ctx, ""); return err }(),
		func() error { _, err := c.GetParticipant(ctx, "room_a", ""); return err }(),
		func() error { _, err := c.RetryWebhookDelivery(ctx, "", "wdl"); return err }(),
	} {
		if err == nil || !strings.Contains(err.Error(), "empty") {
			t.Fatalf("err = %v", err)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	if d := parseRetryAfter("12"); d != 12*time.Second {
		t.Fatal(d)
	}
	if d := parseRetryAfter(time.Now().Add(time.Minute).UTC().Format(http.TimeFormat)); d < 50*time.Second || d > time.Minute {
		t.Fatal(d)
	}
	for _, v := range []string{"", "-1", "soon"} {
		if d := parseRetryAfter(v); d != 0 {
			t.Fatal(v, d)
		}
	}
}

// TestClientNeverPrintsTheAPIKey: neither fmt (any verb, pointer or value)
// nor slog (text or JSON) shows the secret key.
func TestClientNeverPrintsTheAPIKey(t *testing.T) {
	const key = "sk_live_supersecret_4242"
	c, err := New(key, WithBaseURL("http://h"))
	if err != nil {
		t.Fatal(err)
	}
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		outs = append(outs, fmt.Sprintf(verb, c), fmt.Sprintf(verb, *c))
	}
	outs = append(outs, fmt.Sprint(c), fmt.Sprint(*c), fmt.Sprintf("%v", []any{c}), fmt.Sprintf("%+v", struct{ C Client }{*c}))
	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&buf, nil), slog.NewJSONHandler(&buf, nil)} {
		l := slog.New(h)
		l.Info("client", "c", c, "v", *c)
		l.Info("client", slog.Any("c", c))
	}
	outs = append(outs, buf.String())
	for _, out := range outs {
		if strings.Contains(out, key) || strings.Contains(out, "supersecret") {
			t.Fatalf("the API key printed: %s", out)
		}
	}
	if !strings.Contains(buf.String(), "[redacted]") || !strings.Contains(fmt.Sprint(c), "http://h/v1") {
		t.Fatalf("unexpected output: %s / %s", fmt.Sprint(c), buf.String())
	}
}

// TestLongRetryAfterIsNotWaited: above MaxRetryAfter, DefaultBackoff
// declines to wait and the call returns the 429 at once.
func TestLongRetryAfterIsNotWaited(t *testing.T) {
	if d := DefaultBackoff(1, MaxRetryAfter); d != MaxRetryAfter {
		t.Fatalf("Retry-After of exactly the cap: %v", d)
	}
	if d := DefaultBackoff(1, MaxRetryAfter+time.Second); d >= 0 {
		t.Fatalf("Retry-After above the cap: %v, want a negative (no retry)", d)
	}
	s := &scripted{responses: []func(http.ResponseWriter){status(429, envelope("rate_limited", "x"), "Retry-After", "3600")}}
	var calls atomic.Int32
	c, _ := newTestClient(t, s, WithBackoff(func(retry int, ra time.Duration) time.Duration {
		calls.Add(1)
		return DefaultBackoff(retry, ra)
	}))
	start := time.Now()
	_, err := c.GetRoom(context.Background(), "room_a")
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 429 || apiErr.RetryAfter != time.Hour {
		t.Fatalf("err = %v", err)
	}
	if s.count() != 1 || calls.Load() != 1 || time.Since(start) > 5*time.Second {
		t.Fatalf("%d requests, %d backoff calls in %v: want one request and no wait", s.count(), calls.Load(), time.Since(start))
	}
	// Any BackoffFunc may decline: a negative wait stops the retries.
	s2 := &scripted{responses: []func(http.ResponseWriter){status(503, envelope("service_unavailable", "x"))}}
	c2, _ := newTestClient(t, s2, WithBackoff(func(int, time.Duration) time.Duration { return -1 }))
	if _, err := c2.GetRoom(context.Background(), "room_a"); !errors.As(err, &apiErr) || apiErr.Status != 503 || s2.count() != 1 {
		t.Fatalf("err %v after %d requests", err, s2.count())
	}
}
