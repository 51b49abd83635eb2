package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"rtcd/config"
	"rtcd/internal/testtools"
	"rtcd/server"
)

// rtcd given a certificate (--tls-cert, --tls-key) serves the API over
// HTTPS and the built-in media node over wss://, end to end, as a browser
// needs: a page served over https may only open wss:// sockets.

// startTLS runs a server with a certificate of a test CA for 127.0.0.1 and
// localhost; the env's client trusts that CA (as a browser trusts a public
// one) and talks https. It returns the env and the CA's pool.
func startTLS(t *testing.T, extraArgs ...string) (*env, *x509.CertPool) {
	t.Helper()
	ca := testtools.NewTestCA(t)
	cert, key := ca.Issue(t, "127.0.0.1", "localhost")
	e := start(t, append([]string{"--tls-cert", cert, "--tls-key", key}, extraArgs...)...)
	pem, err := os.ReadFile(ca.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("test CA does not parse")
	}
	e.Base = strings.Replace(e.Base, "http://", "https://", 1)
	e.Media = strings.Replace(e.Media, "ws://", "wss://", 1)
	e.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
	return e, pool
}

// The API answers over HTTPS only, connect names a wss:// endpoint, and two
// participants meet on the media node over wss://.
func TestTLSEndToEnd(t *testing.T) {
	e, pool := startTLS(t)
	if got := e.do("GET", "/v1/system/info", e.Boot.APIKey, nil).must(t, 200).Str("object"); got != "system_info" {
		t.Fatalf("system info over https: %q", got)
	}
	// Plain HTTP to the TLS listener gets no API answer.
	plain := &http.Client{Timeout: 5 * time.Second}
	if res, err := plain.Get(strings.Replace(e.Base, "https://", "http://", 1) + "/v1/system/info"); err == nil {
		res.Body.Close()
		if res.StatusCode == 200 {
			t.Fatal("the TLS listener served plain HTTP")
		}
	}

	room := e.createRoom(nil)
	_, tokA := e.createParticipant(room, nil)
	_, tokB := e.createParticipant(room, nil)
	dialer := &websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, HandshakeTimeout: 5 * time.Second}
	join := func(token string) (*mediaClient, map[string]any) {
		cs := e.connect(token).must(t, 200)
		endpoint := cs.Str("endpoint")
		if endpoint != e.Media {
			t.Fatalf("connect endpoint %q, want %q (wss:// of the built-in node)", endpoint, e.Media)
		}
		conn, _, err := dialer.Dial(endpoint, nil)
		if err != nil {
			t.Fatalf("dial %s: %v", endpoint, err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		c := &mediaClient{t: t, conn: conn}
		c.send(map[string]any{"type": "join", "media_token": cs.Str("media_token")})
		joined := c.read()
		if joined["type"] != "joined" {
			t.Fatalf("join over wss answered %v", joined)
		}
		return c, joined
	}
	a, _ := join(tokA)
	_, joinedB := join(tokB)
	if others, _ := joinedB["participants"].([]any); len(others) != 1 {
		t.Fatalf("B joined beside %v, want A", joinedB["participants"])
	}
	if m := a.read(); m["type"] != "participant.joined" {
		t.Fatalf("A saw %v, want participant.joined", m)
	}

	// A plain ws:// dial to the wss:// node fails.
	if conn, _, err := websocket.DefaultDialer.Dial(strings.Replace(e.Media, "wss://", "ws://", 1), nil); err == nil {
		conn.Close()
		t.Fatal("the media node accepted a plain WebSocket")
	}
}

// The sandbox payment provider posts its signed callback to the API's own
// TLS listener (pinned to the served certificate) and the top-up credits
// the wallet; its pages are https.
func TestTLSSandboxTopup(t *testing.T) {
	e, _ := startTLS(t)
	before := e.do("GET", "/v1/billing/balance", e.Boot.APIKey, nil).must(t, 200).Str("available")
	top := e.blCreateTopup("25.00", "").must(t, 201)
	page := top.Str("authorize_url")
	if !strings.HasPrefix(page, e.Base+"/") {
		t.Fatalf("authorize_url %q is not on %s", page, e.Base)
	}
	if status, body := e.blPage(page, "succeeded"); status != 200 {
		t.Fatalf("checkout: %d %s", status, body)
	}
	if got := e.blTopup(top.Str("payment_id")).Str("status"); got != "succeeded" {
		t.Fatalf("top-up %s after a paid checkout over TLS", got)
	}
	after := e.do("GET", "/v1/billing/balance", e.Boot.APIKey, nil).must(t, 200).Str("available")
	if after == before {
		t.Fatalf("balance %s unchanged by the top-up", after)
	}
}

// A certificate that cannot be loaded stops the start with a clear error,
// never a fallback to plain HTTP.
func TestTLSBadCertificateFailsStart(t *testing.T) {
	ca := testtools.NewTestCA(t)
	cert, _ := ca.Issue(t, "127.0.0.1")
	_, otherKey := ca.Issue(t, "127.0.0.1")
	for name, files := range map[string][2]string{
		"missing":    {cert + ".missing", otherKey},
		"mismatched": {cert, otherKey},
	} {
		cfg, err := config.Parse("test", []string{"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
			"--media-listen", "127.0.0.1:0", "--tls-cert", files[0], "--tls-key", files[1]}, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		srv, err := server.Start(cfg, server.Options{BootstrapOut: &strings.Builder{}})
		if err == nil {
			_ = srv.Shutdown(t.Context())
			t.Fatalf("%s: started with an unusable certificate", name)
		}
		if !strings.Contains(err.Error(), "--tls-cert") {
			t.Errorf("%s: error %q does not name --tls-cert", name, err)
		}
	}
}
