package webhookdelivery

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"rtcd/webhooksig"
)

const testSecret = "whsec_client_test_secret"

var testEnvelope = []byte(`{"id":"evt_01","type":"room.started","created_at":"2024-03-01T12:00:00Z","project_id":"prj_01","data":{"room_id":"room_01","sequence":1}}`)

// discardLogger keeps the testing-settings warning out of test output.
var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// newTLSReceiver starts an HTTPS server on loopback with its own test CA and
// returns it with the path of a PEM file holding that CA's certificate.
func newTLSReceiver(t *testing.T, handler http.Handler) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewTLSServer(handler)
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "receiver-ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, caFile
}

func serverPort(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	return strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
}

// staticResolver answers every lookup with addrs and counts the lookups.
type staticResolver struct {
	addrs []netip.Addr
	calls atomic.Int32
}

func (r *staticResolver) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	r.calls.Add(1)
	return r.addrs, nil
}

// recordingDialer stands in for the client's dial step: it records the
// addresses it is asked to dial and connects to nothing.
type recordingDialer struct {
	mu        sync.Mutex
	addresses []string
}

func (d *recordingDialer) dial(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.addresses = append(d.addresses, address)
	return nil, errors.New("test: recorded, not connecting")
}

func (d *recordingDialer) dialled() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addresses...)
}

func signedHeaders(eventID string) map[string]string {
	return Headers(eventID, time.Now().Unix(), testEnvelope, testSecret)
}

func TestDeliverSignedToHTTPSReceiver(t *testing.T) {
	type received struct {
		header http.Header
		body   []byte
		err    error
	}
	got := make(chan received, 1)
	srv, caFile := newTLSReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = webhooksig.VerifyRequest(testSecret, r, body, webhooksig.DefaultTolerance)
		}
		got <- received{header: r.Header.Clone(), body: body, err: err}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Write([]byte("ok"))
	}))

	c := NewClient(ClientConfig{AllowPrivate: true, ExtraCAFile: caFile, Logger: discardLogger})
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	attempt := c.Deliver(context.Background(), srv.URL+"/hook", signedHeaders("evt_01"), testEnvelope)
	if !attempt.Success || attempt.StatusCode != http.StatusOK || attempt.ResponseBody != "ok" || attempt.Err != "" {
		t.Fatalf("attempt = %+v, want a 200 success with body ok", attempt)
	}
	if attempt.LatencyMillis < 0 {
		t.Fatalf("LatencyMillis = %d", attempt.LatencyMillis)
	}

	r := <-got
	if r.err != nil {
		t.Fatalf("receiver could not verify the delivery: %v", r.err)
	}
	if !bytes.Equal(r.body, testEnvelope) {
		t.Fatalf("receiver got body %q", r.body)
	}
	wantHeaders := map[string]string{
		"Content-Type":             "application/json",
		"User-Agent":               "rtcd-Webhooks/0.1",
		webhooksig.HeaderID:        "evt_01",
		webhooksig.HeaderSignature: webhooksig.Sign(testSecret, mustAtoi(t, r.header.Get(webhooksig.HeaderTimestamp)), testEnvelope),
	}
	for name, want := range wantHeaders {
		if v := r.header.Get(name); v != want {
			t.Errorf("header %s = %q, want %q", name, v, want)
		}
	}
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("timestamp header %q: %v", s, err)
	}
	return n
}

// TestDeliverUsesHostNameForTLS connects to a name that the resolver maps
// to the receiver: the certificate is checked against the name (SNI), while
// the connection goes to the resolved address.
func TestDeliverUsesHostNameForTLS(t *testing.T) {
	srv, caFile := newTLSReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Host, "example.com:") {
			http.Error(w, "wrong host "+r.Host, http.StatusBadRequest)
			return
		}
		if r.TLS == nil || r.TLS.ServerName != "example.com" {
			http.Error(w, "wrong SNI", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	resolver := &staticResolver{addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}
	c := NewClient(ClientConfig{AllowPrivate: true, ExtraCAFile: caFile, Resolver: resolver.resolve, Logger: discardLogger})
	attempt := c.Deliver(context.Background(), "https://example.com:"+serverPort(t, srv)+"/hook", signedHeaders("evt_02"), testEnvelope)
	if !attempt.Success || attempt.StatusCode != http.StatusNoContent {
		t.Fatalf("attempt = %+v, want 204 success", attempt)
	}
	if n := resolver.calls.Load(); n != 1 {
		t.Fatalf("resolver called %d times, want 1", n)
	}
}

func TestDeliverRefusesNameResolvingToPrivateAddress(t *testing.T) {
	var hits atomic.Int32
	srv, caFile := newTLSReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
	}))
	port := serverPort(t, srv)

	for _, answers := range [][]string{
		{"127.0.0.1"},
		{"::ffff:127.0.0.1"},
		{"93.184.216.34", "10.0.0.1"}, // one bad answer spoils the set
		{"169.254.169.254"},
		{"::1"},
	} {
		t.Run(strings.Join(answers, ","), func(t *testing.T) {
			resolver := &staticResolver{}
			for _, a := range answers {
				resolver.addrs = append(resolver.addrs, netip.MustParseAddr(a))
			}
			// The extra CA is trusted, so only the address policy can stop it.
			c := NewClient(ClientConfig{ExtraCAFile: caFile, Resolver: resolver.resolve, Logger: discardLogger})
			dialer := &recordingDialer{}
			c.dial = dialer.dial
			attempt := c.Deliver(context.Background(), "https://evil.test:"+port+"/hook", signedHeaders("evt_03"), testEnvelope)
			if attempt.Success || attempt.StatusCode != 0 || !strings.Contains(attempt.Err, ErrForbiddenDestination.Error()) {
				t.Fatalf("attempt = %+v, want a refusal naming %q", attempt, ErrForbiddenDestination)
			}
			if attempt.Result() != OutcomeRefused {
				t.Fatalf("outcome %q, want %q", attempt.Result(), OutcomeRefused)
			}
			if dialled := dialer.dialled(); len(dialled) != 0 {
				t.Fatalf("dialled %v, want no dial at all", dialled)
			}
			if resolver.calls.Load() == 0 {
				t.Fatal("resolver was not consulted")
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("receiver got %d requests, want 0", n)
	}
}

// TestDeliverDialsTheCheckedAddress simulates DNS rebinding: the first
// answer is public, every later one is loopback. The client must resolve
// once and dial exactly the address it checked.
func TestDeliverDialsTheCheckedAddress(t *testing.T) {
	var calls atomic.Int32
	rebinding := func(ctx context.Context, host string) ([]netip.Addr, error) {
		if calls.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	c := NewClient(ClientConfig{Resolver: rebinding, Logger: discardLogger})
	dialer := &recordingDialer{}
	c.dial = dialer.dial
	attempt := c.Deliver(context.Background(), "https://rebind.test/hook", signedHeaders("evt_04"), testEnvelope)
	if attempt.Success {
		t.Fatalf("attempt = %+v, want failure", attempt)
	}
	if dialled := dialer.dialled(); len(dialled) != 1 || dialled[0] != "93.184.216.34:443" {
		t.Fatalf("dialled %v, want exactly [93.184.216.34:443]", dialled)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("resolver called %d times, want 1", n)
	}
}

// TestDialerControlHookRefusesForbiddenAddress proves the last line: even a
// direct dial of a forbidden address through the client's dialer fails,
// before any connection is made.
func TestDialerControlHookRefusesForbiddenAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	c := NewClient(ClientConfig{Logger: discardLogger})
	conn, err := c.dial(context.Background(), "tcp", ln.Addr().String())
	if err == nil {
		conn.Close()
		t.Fatal("dial of loopback succeeded, want the Control hook to refuse it")
	}
	if !errors.Is(err, ErrForbiddenDestination) {
		t.Fatalf("dial error = %v, want ErrForbiddenDestination", err)
	}

	for _, address := range []string{"127.0.0.1:443", "[::1]:443", "[::ffff:10.0.0.1]:443", "[fe80::1%eth0]:443", "not-an-address"} {
		if err := checkDialledAddress("tcp", address, nil); !errors.Is(err, ErrForbiddenDestination) {
			t.Errorf("checkDialledAddress(%q) = %v, want ErrForbiddenDestination", address, err)
		}
	}
	for _, address := range []string{"93.184.216.34:443", "[2606:4700:4700::1111]:443"} {
		if err := checkDialledAddress("tcp6", address, nil); err != nil {
			t.Errorf("checkDialledAddress(%q) = %v, want nil", address, err)
		}
	}
}

func TestDeliverRedirectIsFailureAndNotFollowed(t *testing.T) {
	var followed atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		followed.Add(1)
	})
	srv, caFile := newTLSReceiver(t, mux)
	c := NewClient(ClientConfig{AllowPrivate: true, ExtraCAFile: caFile, Logger: discardLogger})

	attempt := c.Deliver(context.Background(), srv.URL+"/hook", signedHeaders("evt_05"), testEnvelope)
	if attempt.Success || attempt.StatusCode != http.StatusFound || !strings.Contains(attempt.Err, "redirect") {
		t.Fatalf("attempt = %+v, want a failed 302", attempt)
	}
	if n := followed.Load(); n != 0 {
		t.Fatalf("redirect target hit %d times, want 0", n)
	}
}

func TestDeliverStatusDecidesSuccess(t *testing.T) {
	cases := []struct {
		status  int
		success bool
	}{
		{http.StatusOK, true},
		{http.StatusAccepted, true},
		{http.StatusNoContent, true},
		{http.StatusMultipleChoices, false},
		{http.StatusNotModified, false},
		{http.StatusBadRequest, false},
		{http.StatusGone, false},
		{http.StatusInternalServerError, false},
	}
	for _, tc := range cases {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			srv, caFile := newTLSReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				w.Write([]byte("receiver says so"))
			}))
			c := NewClient(ClientConfig{AllowPrivate: true, ExtraCAFile: caFile, Logger: discardLogger})
			attempt := c.Deliver(context.Background(), srv.URL+"/hook", signedHeaders("evt_06"), testEnvelope)
			if attempt.StatusCode != tc.status || attempt.Success != tc.success || (attempt.Err == "") != tc.success {
				t.Fatalf("attempt = %+v, want status %d success %v", attempt, tc.status, tc.success)
			}
			if want := map[bool]string{true: OutcomeSucceeded, false: OutcomeHTTPError}[tc.success]; attempt.Result() != want {
				t.Fatalf("outcome %q, want %q", attempt.Result(), want)
			}
		})
	}
}

func TestDeliverTimeout(t *testing.T) {
	release := make(chan struct{})
	srv, caFile := newTLSReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	// Registered after the server's cleanup, so it runs first and unblocks
	// the handler before srv.Close waits for it.
	t.Cleanup(func() { close(release) })

	const timeoutSeconds = 1
	c := NewClient(ClientConfig{AllowPrivate: true, ExtraCAFile: caFile, TimeoutSeconds: timeoutSeconds, Logger: discardLogger})
	attempt := c.Deliver(context.Background(), srv.URL+"/hook", signedHeaders("evt_07"), testEnvelope)
	if attempt.Success || attempt.StatusCode != 0 || !strings.Contains(attempt.Err, "timeout") || attempt.Result() != OutcomeTimeout {
		t.Fatalf("attempt = %+v (outcome %q), want a timeout failure", attempt, attempt.Result())
	}
	if attempt.LatencyMillis < timeoutSeconds*1000 {
		t.Fatalf("LatencyMillis = %d, want at least the timeout", attempt.LatencyMillis)
	}
}

func TestDeliverHonoursContext(t *testing.T) {
	srv, caFile := newTLSReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	c := NewClient(ClientConfig{AllowPrivate: true, ExtraCAFile: caFile, Logger: discardLogger})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	attempt := c.Deliver(ctx, srv.URL+"/hook", signedHeaders("evt_08"), testEnvelope)
	if attempt.Success || !strings.Contains(attempt.Err, "canceled") {
		t.Fatalf("attempt = %+v, want a cancelled failure", attempt)
	}
}

func TestDeliverTruncatesHugeResponse(t *testing.T) {
	const hugeBytes = 4 << 20 // 4 MiB, far beyond capture and discard bounds
	srv, caFile := newTLSReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for written := 0; written < hugeBytes; written += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	c := NewClient(ClientConfig{AllowPrivate: true, ExtraCAFile: caFile, Logger: discardLogger})
	attempt := c.Deliver(context.Background(), srv.URL+"/hook", signedHeaders("evt_09"), testEnvelope)
	if !attempt.Success {
		t.Fatalf("attempt = %+v, want success", attempt)
	}
	if len(attempt.ResponseBody) != DefaultMaxResponseCaptureBytes {
		t.Fatalf("captured %d bytes, want %d", len(attempt.ResponseBody), DefaultMaxResponseCaptureBytes)
	}

	t.Run("configured bound, cut inside a character", func(t *testing.T) {
		srv, caFile := newTLSReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(strings.Repeat("é", 100))) // 2 bytes each
		}))
		c := NewClient(ClientConfig{AllowPrivate: true, ExtraCAFile: caFile, MaxResponseCaptureBytes: 7, Logger: discardLogger})
		attempt := c.Deliver(context.Background(), srv.URL+"/hook", signedHeaders("evt_10"), testEnvelope)
		if attempt.ResponseBody != "ééé" {
			t.Fatalf("ResponseBody = %q, want %q", attempt.ResponseBody, "ééé")
		}
	})
}

func TestValidUTF8Prefix(t *testing.T) {
	cases := []struct {
		in    []byte
		limit int
		want  string
	}{
		{[]byte("hello"), 10, "hello"},
		{[]byte("hello"), 3, "hel"},
		{[]byte("aé"), 2, "a"},
		{[]byte{'a', 0xff, 'b'}, 10, "a\uFFFDb"},
		{[]byte{'a', 0xff, 'b'}, 3, "a"},
		{[]byte("日本"), 3, "日"},
		{nil, 10, ""},
	}
	for _, tc := range cases {
		got := validUTF8Prefix(tc.in, tc.limit)
		if got != tc.want || len(got) > tc.limit || !utf8.ValidString(got) {
			t.Errorf("validUTF8Prefix(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
		}
	}
}

func TestDeliverRequiresHTTPSWithoutAllowPrivate(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
	}))
	defer srv.Close()
	resolver := &staticResolver{addrs: []netip.Addr{netip.MustParseAddr("93.184.216.34")}}
	c := NewClient(ClientConfig{Resolver: resolver.resolve, Logger: discardLogger})
	dialer := &recordingDialer{}
	c.dial = dialer.dial
	for _, raw := range []string{"http://example.com/hook", srv.URL + "/hook"} {
		attempt := c.Deliver(context.Background(), raw, signedHeaders("evt_11"), testEnvelope)
		if attempt.Success || !strings.Contains(attempt.Err, "https is required") {
			t.Fatalf("Deliver(%s) = %+v, want refusal for plain http", raw, attempt)
		}
	}
	if resolver.calls.Load() != 0 || hits.Load() != 0 || len(dialer.dialled()) != 0 {
		t.Fatalf("resolver calls %d, dials %v, receiver hits %d; want none", resolver.calls.Load(), dialer.dialled(), hits.Load())
	}

	// The testing setting accepts plain http to loopback.
	testingClient := NewClient(ClientConfig{AllowPrivate: true, Logger: discardLogger})
	if attempt := testingClient.Deliver(context.Background(), srv.URL+"/hook", signedHeaders("evt_12"), testEnvelope); !attempt.Success {
		t.Fatalf("AllowPrivate plain http attempt = %+v, want success", attempt)
	}
}

func TestDeliverIgnoresEnvironmentProxy(t *testing.T) {
	var proxyHits atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxyHits.Add(1)
		http.Error(w, "bogus proxy", http.StatusBadGateway)
	}))
	defer proxy.Close()
	for _, name := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY"} {
		t.Setenv(name, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")

	srv, caFile := newTLSReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("direct"))
	}))
	// A name rather than 127.0.0.1, because proxy-from-environment logic
	// skips loopback literals and would prove nothing.
	resolver := &staticResolver{addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}
	c := NewClient(ClientConfig{AllowPrivate: true, ExtraCAFile: caFile, Resolver: resolver.resolve, Logger: discardLogger})
	attempt := c.Deliver(context.Background(), "https://example.com:"+serverPort(t, srv)+"/hook", signedHeaders("evt_13"), testEnvelope)
	if !attempt.Success || attempt.ResponseBody != "direct" {
		t.Fatalf("attempt = %+v, want a direct success", attempt)
	}
	if n := proxyHits.Load(); n != 0 {
		t.Fatalf("proxy hit %d times, want 0", n)
	}
}

func TestDeliverUntrustedCertificateFails(t *testing.T) {
	srv, _ := newTLSReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	c := NewClient(ClientConfig{AllowPrivate: true, Logger: discardLogger})
	attempt := c.Deliver(context.Background(), srv.URL+"/hook", signedHeaders("evt_14"), testEnvelope)
	if attempt.Success || !strings.Contains(attempt.Err, "certificate") {
		t.Fatalf("attempt = %+v, want a certificate failure", attempt)
	}
}

func TestBadExtraCAFileMakesClientUnusable(t *testing.T) {
	emptyFile := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(emptyFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(t.TempDir(), "missing.pem"), emptyFile} {
		c := NewClient(ClientConfig{AllowPrivate: true, ExtraCAFile: path, Logger: discardLogger})
		if c.Err() == nil {
			t.Fatalf("NewClient(ExtraCAFile=%s).Err() = nil, want an error", path)
		}
		if attempt := c.Deliver(context.Background(), "https://example.com/", nil, nil); attempt.Success || attempt.Err == "" {
			t.Fatalf("attempt = %+v, want failure", attempt)
		}
	}
}

func TestTestingSettingsWarnOnce(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))

	NewClient(ClientConfig{Logger: logger})
	if logs.Len() != 0 {
		t.Fatalf("default client logged %q, want nothing", logs.String())
	}
	NewClient(ClientConfig{AllowPrivate: true, Logger: logger})
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Fatalf("AllowPrivate client logged %d warnings, want 1: %q", n, logs.String())
	}
}

func TestClientConfigDefaultsAndCaps(t *testing.T) {
	c := NewClient(ClientConfig{Logger: discardLogger})
	if c.timeout != DefaultTimeoutSeconds*time.Second || c.captureBytes != DefaultMaxResponseCaptureBytes {
		t.Fatalf("defaults: timeout %v capture %d", c.timeout, c.captureBytes)
	}
	c = NewClient(ClientConfig{TimeoutSeconds: 3600, MaxResponseCaptureBytes: 1 << 30, Logger: discardLogger})
	if c.timeout != MaxTimeoutSeconds*time.Second || c.captureBytes != MaxResponseCaptureBytes {
		t.Fatalf("caps: timeout %v capture %d", c.timeout, c.captureBytes)
	}
	transport := c.http.Transport.(*http.Transport)
	if transport.Proxy != nil {
		t.Fatal("transport has a Proxy function, want nil")
	}
	if transport.TLSClientConfig.MinVersion < 0x0303 { // TLS 1.2
		t.Fatalf("TLS MinVersion = %x, want at least TLS 1.2", transport.TLSClientConfig.MinVersion)
	}
	// A full window to one receiver keeps its connections; HTTP/2 is
	// asked for where offered.
	if transport.MaxIdleConnsPerHost < MaxWindowAttempts || transport.MaxIdleConns < transport.MaxIdleConnsPerHost || !transport.ForceAttemptHTTP2 {
		t.Fatalf("idle connections %d per host, %d in all, HTTP/2 %v: want at least a window (%d) per host, and HTTP/2",
			transport.MaxIdleConnsPerHost, transport.MaxIdleConns, transport.ForceAttemptHTTP2, MaxWindowAttempts)
	}
}

// A TLS receiver that offers HTTP/2 is sent deliveries over HTTP/2, dialled
// through the client's own dialer (the name resolved by the client's
// resolver, the checked address dialled), and concurrent deliveries share
// the one connection; a receiver that offers only HTTP/1.1 gets HTTP/1.1.
func TestDeliverSpeaksHTTP2WhereOffered(t *testing.T) {
	for _, offered := range []bool{true, false} {
		t.Run(map[bool]string{true: "h2", false: "http1.1"}[offered], func(t *testing.T) {
			var mu sync.Mutex
			protos := map[string]int{}
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				protos[r.Proto]++
				mu.Unlock()
				w.WriteHeader(http.StatusNoContent)
			}))
			srv.EnableHTTP2 = offered
			srv.StartTLS()
			t.Cleanup(srv.Close)
			caFile := filepath.Join(t.TempDir(), "receiver-ca.pem")
			if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
				t.Fatal(err)
			}
			resolver := &staticResolver{addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}
			c := NewClient(ClientConfig{AllowPrivate: true, ExtraCAFile: caFile, Resolver: resolver.resolve, Logger: discardLogger})
			var dials atomic.Int32
			dial := c.dial
			c.dial = func(ctx context.Context, network, address string) (net.Conn, error) {
				dials.Add(1)
				return dial(ctx, network, address)
			}
			url := "https://example.com:" + serverPort(t, srv) + "/hook"
			deliver := func() {
				if a := c.Deliver(context.Background(), url, signedHeaders("evt_h2"), testEnvelope); !a.Success {
					t.Errorf("attempt = %+v, want success", a)
				}
			}
			deliver() // the connection, then a window of deliveries at once
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() { defer wg.Done(); deliver() }()
			}
			wg.Wait()

			want := "HTTP/1.1"
			if offered {
				want = "HTTP/2.0"
				if n := dials.Load(); n != 1 {
					t.Errorf("%d connections dialled for 9 deliveries over HTTP/2, want 1", n)
				}
			}
			if protos[want] != 9 || len(protos) != 1 {
				t.Fatalf("the receiver saw %v, want 9 requests over %s", protos, want)
			}
			if n := resolver.calls.Load(); n != dials.Load() {
				t.Fatalf("%d resolutions for %d dials: every connection must be resolved and checked by the client", n, dials.Load())
			}
		})
	}
}
