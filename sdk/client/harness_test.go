package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rtcdBin is the rtcd binary built from this repository by TestMain.
var rtcdBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "rtcd-client-sdk-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	rtcdBin = filepath.Join(dir, "rtcd")
	cmd := exec.Command(goTool, "build", "-o", rtcdBin, "./cmd/rtcd")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/rtcd in %s: %v\n%s", root, err, out)
		return 1
	}
	return m.Run()
}

// repoRoot walks up from the working directory to the directory holding
// cmd/rtcd (the service's module root).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if st, err := os.Stat(filepath.Join(dir, "cmd", "rtcd")); err == nil && st.IsDir() {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no cmd/rtcd above the test's working directory")
		}
		dir = parent
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// server is one `rtcd serve` with its built-in media node.
type server struct {
	t         *testing.T
	Base      string
	Metrics   string
	MediaAddr string
	DataDir   string
	APIKey    string
	AccountID string
	cmd       *exec.Cmd
	exited    chan struct{}
	logPath   string
}

type serverOpts struct {
	initFlags  []string
	serveFlags []string
	// mediaURL, when set, is called with the media node's address and
	// returns the --media-url to advertise (e.g. a proxy's).
	mediaURL func(mediaAddr string) string
	// noMedia runs no media node (connects answer 503).
	noMedia bool
}

// startServer runs rtcd init and rtcd serve on a fresh data directory and
// waits until the API answers.
func startServer(t *testing.T, o serverOpts) *server {
	t.Helper()
	dataDir := t.TempDir()
	var stdout, stderr bytes.Buffer
	init := exec.Command(rtcdBin, append([]string{"init", "--data-dir", dataDir, "--log-level", "error"}, o.initFlags...)...)
	init.Stdout, init.Stderr = &stdout, &stderr
	if err := init.Run(); err != nil {
		t.Fatalf("rtcd init: %v\n%s", err, stderr.String())
	}
	var boot struct {
		AccountID string `json:"account_id"`
		APIKey    string `json:"api_key"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &boot); err != nil || boot.APIKey == "" {
		t.Fatalf("rtcd init printed %q: %v", stdout.String(), err)
	}
	for attempt := 1; ; attempt++ {
		s := launch(t, dataDir, o)
		s.APIKey, s.AccountID = boot.APIKey, boot.AccountID
		err := s.waitReady(30 * time.Second)
		if err == nil {
			return s
		}
		s.kill()
		if attempt == 3 {
			t.Fatalf("rtcd serve did not become ready: %v\n%s", err, s.logTail())
		}
	}
}

func launch(t *testing.T, dataDir string, o serverOpts) *server {
	t.Helper()
	api, metrics, media := freeAddr(t), freeAddr(t), freeAddr(t)
	logf, err := os.CreateTemp(t.TempDir(), "rtcd-*.log")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"serve", "--data-dir", dataDir, "--listen", api, "--metrics-listen", metrics,
		"--media-listen", media, "--log-level", "error"}
	if o.mediaURL != nil {
		args = append(args, "--media-url", o.mediaURL(media))
	}
	args = append(args, o.serveFlags...)
	if o.noMedia {
		args = append(args, "--media-listen=")
		media = ""
	}
	cmd := exec.Command(rtcdBin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start rtcd serve: %v", err)
	}
	s := &server{t: t, Base: "http://" + api, Metrics: "http://" + metrics, MediaAddr: media, DataDir: dataDir,
		cmd: cmd, exited: make(chan struct{}), logPath: logf.Name()}
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(s.exited)
	}()
	t.Cleanup(s.kill)
	return s
}

func (s *server) waitReady(within time.Duration) error {
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("rtcd serve exited during start")
		default:
		}
		req, _ := http.NewRequest("GET", s.Base+"/v1/system/info", nil)
		req.Header.Set("Authorization", "Bearer "+s.APIKey)
		if res, err := c.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			if res.StatusCode == 200 {
				if s.MediaAddr == "" {
					return nil
				}
				// The media node listens too.
				if conn, err := net.DialTimeout("tcp", s.MediaAddr, time.Second); err == nil {
					_ = conn.Close()
					return nil
				}
			} else {
				return fmt.Errorf("GET /v1/system/info answered %d", res.StatusCode)
			}
		}
		time.Sleep(20 * time.Millisecond) // polling a starting process
	}
	return fmt.Errorf("no answer within %v", within)
}

func (s *server) kill() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
}

func (s *server) logTail() string {
	b, _ := os.ReadFile(s.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// call makes an API request with the server's API key (or with auth, when
// given, on the private listener).
func (s *server) call(method, url, auth string, body any) (int, map[string]any) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if auth == "" {
		auth = s.APIKey
	}
	req.Header.Set("Authorization", "Bearer "+auth)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out
}

func (s *server) mustCall(method, path string, body any, want int) map[string]any {
	s.t.Helper()
	status, out := s.call(method, s.Base+path, "", body)
	if status != want {
		s.t.Fatalf("%s %s: %d %v, want %d", method, path, status, out, want)
	}
	return out
}

func (s *server) createRoom() string {
	s.t.Helper()
	return s.mustCall("POST", "/v1/rooms", map[string]any{"name": "sdk test"}, 201)["id"].(string)
}

// createParticipant returns the participant's id and token.
func (s *server) createParticipant(room string, body map[string]any) (string, string) {
	s.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	out := s.mustCall("POST", "/v1/rooms/"+room+"/participants", body, 201)
	return out["id"].(string), out["token"].(string)
}

func (s *server) participantStatus(room, id string) string {
	s.t.Helper()
	st, _ := s.mustCall("GET", "/v1/rooms/"+room+"/participants/"+id, nil, 200)["status"].(string)
	return st
}

// adjust credits (or debits) the workspace through the private listener.
func (s *server) adjust(amount string) {
	s.t.Helper()
	tok, err := os.ReadFile(filepath.Join(s.DataDir, "admin.token"))
	if err != nil {
		s.t.Fatal(err)
	}
	status, out := s.call("POST", s.Metrics+"/admin/billing/adjust", strings.TrimSpace(string(tok)),
		map[string]any{"account_id": s.AccountID, "amount": amount, "reason": "sdk test", "operator": "sdk-test"})
	if status != 200 {
		s.t.Fatalf("adjust %s: %d %v", amount, status, out)
	}
}

// proxy is a TCP proxy between the SDK and the media node, so a test can
// cut connections (a dropped network) and refuse new ones (a network that
// stays down).
type proxy struct {
	ln     net.Listener
	target string
	down   atomic.Bool
	mu     sync.Mutex
	conns  map[net.Conn]bool
}

func newProxy(t *testing.T) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { _ = ln.Close(); p.cut() })
	go p.serve()
	return p
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.down.Load() {
			_ = c.Close()
			continue
		}
		go p.pipe(c)
	}
}

// setTarget sets the media node's address.
func (p *proxy) setTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.mu.Unlock()
}

func (p *proxy) pipe(c net.Conn) {
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	u, err := net.Dial("tcp", target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[u] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = u.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, u)
	p.mu.Unlock()
}

// cut closes every proxied connection, both ways: each side sees its TCP
// connection end without a WebSocket close frame.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// waitLimit bounds every wait in these tests. It is far beyond any honest
// wait (the SDK's own longest timeout is ConnectTimeout, 15 s), so reaching
// it means a hang, which fails the test with what it waited for instead of
// running into the package's -timeout.
const waitLimit = 20 * time.Second

// await returns the next value from ch, failing the test if none comes
// (and ch is not closed) within waitLimit.
func await[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("no %s within %v", what, waitLimit)
		panic("unreachable")
	}
}

// awaitEnd waits for the session to end (Done closed), failing the test
// with its state and r's events (r may be nil) if it does not.
func awaitEnd(t *testing.T, s *Session, r *recorder) {
	t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	select {
	case <-s.Done():
	case <-timer.C:
		var evs []Event
		if r != nil {
			evs = r.snapshot()
		}
		t.Fatalf("the session did not end within %v; events: %s", waitLimit, describe(evs))
	}
}

// closeOK closes the session, failing the test if Close does not return
// within waitLimit or fails.
func closeOK(t *testing.T, s *Session) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	if err := await(t, "return from Close", closed); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// recorder collects a session's events.
type recorder struct {
	mu     sync.Mutex
	events []Event
	notify chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

// options registers the recorder for every event.
func (r *recorder) options() []Option {
	var opts []Option
	for _, name := range EventNames() {
		opts = append(opts, WithHandler(name, r.add))
	}
	return opts
}

func (r *recorder) add(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *recorder) snapshot() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// wait waits until an event matching pred arrived and returns the first.
func (r *recorder) wait(t *testing.T, what string, pred func(Event) bool) Event {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		for _, e := range r.snapshot() {
			if pred(e) {
				return e
			}
		}
		select {
		case <-r.notify:
		case <-deadline:
			t.Fatalf("no %s; events: %s", what, describe(r.snapshot()))
		}
	}
}

// states returns the states of the state_changed events, in order.
func (r *recorder) states() []State {
	var out []State
	for _, e := range r.snapshot() {
		if e.Name == EventStateChanged {
			out = append(out, e.State)
		}
	}
	return out
}

// waitStates waits until the states seen so far are exactly want
// (fmt.Sprint of the list), failing if they go past it.
func (r *recorder) waitStates(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		got := fmt.Sprint(r.states())
		if got == want {
			return
		}
		if len(got) >= len(want) {
			t.Fatalf("states %s, want %s; events: %s", got, want, describe(r.snapshot()))
		}
		select {
		case <-r.notify:
		case <-deadline:
			t.Fatalf("states %s, want %s; events: %s", got, want, describe(r.snapshot()))
		}
	}
}

func (r *recorder) count(name string) int {
	n := 0
	for _, e := range r.snapshot() {
		if e.Name == name {
			n++
		}
	}
	return n
}

func describe(evs []Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\n  %s", e.Name)
		if e.State != "" {
			fmt.Fprintf(&b, " %s->%s", e.PreviousState, e.State)
		}
		if e.Participant != nil {
			fmt.Fprintf(&b, " %s %s", e.Participant.ID, e.Participant.State)
		}
		if e.Reason != "" {
			fmt.Fprintf(&b, " reason=%s", e.Reason)
		}
		if e.Attempt != 0 {
			fmt.Fprintf(&b, " attempt=%d", e.Attempt)
		}
		if e.Err != nil {
			fmt.Fprintf(&b, " err=%s %v", e.Err.Code, e.Err.Debug)
		}
	}
	return b.String()
}

// eventually polls cond (a server's state) until it holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// countingTransport counts POST /v1/connect requests.
type countingTransport struct {
	n atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/v1/connect") {
		c.n.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}
