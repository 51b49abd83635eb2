package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"rtcd/clock"
	"rtcd/config"
	"rtcd/server"
)

// testEpoch is the fake clock's start: a minute boundary, so rate-limit
// windows in tests start fresh.
var testEpoch = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// env is one running server and what a test needs to talk to it.
type env struct {
	t       *testing.T
	srv     *server.Server
	clock   *clock.Fake
	dataDir string
	Base    string // http://127.0.0.1:port
	Metrics string // http://127.0.0.1:port of the metrics listener
	Media   string // ws://127.0.0.1:port/rtc of the embedded media node
	Boot    bootstrap
	client  *http.Client
	stop    func()
	// outboxes are where the dashboard's mails to read may be: every
	// node's of a cluster (the directory's node sends them), else this
	// server's (nil).
	outboxes []string
}

type bootstrap struct {
	AccountID string `json:"account_id"`
	ProjectID string `json:"project_id"`
	APIKeyID  string `json:"api_key_id"`
	APIKey    string `json:"api_key"`
	// OwnerEmail signs in to the dashboard as the workspace's owner.
	OwnerEmail string `json:"owner_email"`
}

// start runs a server with a fresh data dir. extraArgs are `rtcd serve`
// flags, e.g. "--default-max-participants-per-room=10".
func start(t *testing.T, extraArgs ...string) *env {
	t.Helper()
	return startIn(t, t.TempDir(), nil, extraArgs...)
}

// startIn runs a server on dataDir with clk (nil: a new fake clock at testEpoch).
func startIn(t *testing.T, dataDir string, clk *clock.Fake, extraArgs ...string) *env {
	t.Helper()
	args := append([]string{"--data-dir", dataDir, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
		"--media-listen", "127.0.0.1:0", "--log-level", "error"}, withStore(t, dataDir, extraArgs...)...)
	cfg, err := config.Parse("test", args, func(string) string { return "" })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if clk == nil {
		clk = clock.NewFake(testEpoch)
	}
	var out bytes.Buffer
	srv, err := server.Start(cfg, server.Options{Clock: clk, BootstrapOut: &out, Fatal: func(err error) { t.Errorf("fatal storage error: %v", err) }})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	e := &env{
		t: t, srv: srv, clock: clk, dataDir: dataDir,
		Base: "http://" + srv.APIAddr(), Metrics: "http://" + srv.MetricsAddr(), Media: "ws://" + srv.MediaAddr() + "/rtc",
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}},
	}
	if out.Len() > 0 {
		if err := json.Unmarshal(out.Bytes(), &e.Boot); err != nil {
			t.Fatalf("bootstrap output %q: %v", out.String(), err)
		}
	}
	var once sync.Once
	e.stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
	}
	t.Cleanup(e.stop)
	return e
}

// stop shuts the server down cleanly (idempotent; also run at cleanup).
func (e *env) Stop() { e.stop() }

// resp is a decoded HTTP response.
type resp struct {
	Status int
	Header http.Header
	Raw    []byte
	JSON   map[string]any
}

// ErrCode is the error envelope's code, or "".
func (r *resp) ErrCode() string {
	if e, ok := r.JSON["error"].(map[string]any); ok {
		s, _ := e["code"].(string)
		return s
	}
	return ""
}

// Str returns a top-level string field.
func (r *resp) Str(field string) string {
	s, _ := r.JSON[field].(string)
	return s
}

// Data returns the data array of a page envelope.
func (r *resp) Data() []map[string]any {
	arr, _ := r.JSON["data"].([]any)
	out := make([]map[string]any, 0, len(arr))
	for _, v := range arr {
		m, _ := v.(map[string]any)
		out = append(out, m)
	}
	return out
}

// do sends a request. body may be nil, a string (sent as is) or any value
// (JSON-encoded). headers are "Name: value" strings. key "" sends no
// Authorization header; otherwise it is sent as a bearer credential.
func (e *env) do(method, path, key string, body any, headers ...string) *resp {
	e.t.Helper()
	r, err := e.send(method, path, key, body, headers...)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// send is do without the testing.T: safe to call from any goroutine. It
// returns the transport error instead of failing the test.
func (e *env) send(method, path, key string, body any, headers ...string) (*resp, error) {
	var payload []byte
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		payload = []byte(b)
	case []byte:
		payload = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		payload = j
	}
	if body != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequest(method, e.Base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	res, err := e.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	r := &resp{Status: res.StatusCode, Header: res.Header, Raw: raw}
	e.checkOpenAPI(req, payload, res.StatusCode, res.Header, raw) // docs/openapi.yaml
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &r.JSON)
	}
	return r, nil
}

// must asserts the status and returns the response.
func (r *resp) must(t *testing.T, status int) *resp {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Raw)
	}
	return r
}

// createRoom creates a room with the bootstrap key and returns its id.
func (e *env) createRoom(body map[string]any) string {
	e.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	return e.do("POST", "/v1/rooms", e.Boot.APIKey, body).must(e.t, 201).Str("id")
}

// createParticipant creates a participant and returns its id and token.
func (e *env) createParticipant(roomID string, body map[string]any) (id, token string) {
	e.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	r := e.do("POST", "/v1/rooms/"+roomID+"/participants", e.Boot.APIKey, body).must(e.t, 201)
	return r.Str("id"), r.Str("token")
}

// connect exchanges a participant token.
func (e *env) connect(token string) *resp {
	e.t.Helper()
	return e.do("POST", "/v1/connect", "", map[string]any{"token": token, "sdk": map[string]string{"name": "e2e", "version": "0", "platform": "go"}})
}

// createKey creates an API key with scopes using key and returns the response.
func (e *env) createKey(key string, scopes ...string) *resp {
	e.t.Helper()
	return e.do("POST", "/v1/api-keys", key, map[string]any{"name": fmt.Sprintf("k%d", time.Now().UnixNano()), "scopes": scopes})
}

// eventually polls cond every 10ms until it holds or 10s pass. For states
// the server reaches asynchronously (ending -> ended); never for timing.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
