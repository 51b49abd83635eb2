package e2e

import (
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"rtcd/webhooksig"
)

// tlsReceiver is a real HTTPS webhook receiver on loopback whose answer
// status the test controls; it verifies every delivery's signature.
type tlsReceiver struct {
	srv    *httptest.Server
	caFile string
	mu     sync.Mutex
	status int
	got    []received
	secret string
	now    func() time.Time // the server's (fake) clock, which signs the timestamps
}

type received struct {
	id, typ string
	verr    error
}

func newTLSReceiver(t *testing.T) *tlsReceiver {
	r := &tlsReceiver{status: 200}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		verr := webhooksig.Verify(r.secret, body, req.Header.Get(webhooksig.HeaderTimestamp), req.Header.Get(webhooksig.HeaderSignature), webhooksig.DefaultTolerance, r.now())
		r.got = append(r.got, received{id: req.Header.Get(webhooksig.HeaderID), typ: string(body), verr: verr})
		w.WriteHeader(r.status)
	}))
	t.Cleanup(r.srv.Close)
	cert := r.srv.Certificate()
	r.caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(r.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *tlsReceiver) deliveries() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func (r *tlsReceiver) setStatus(s int) {
	r.mu.Lock()
	r.status = s
	r.mu.Unlock()
}

func TestWebhookDeliveryRetryDeadAndRedeliver(t *testing.T) {
	rcv := newTLSReceiver(t)
	e := start(t, "--webhook-allow-private", "--webhook-extra-ca-file="+rcv.caFile, "--webhook-retry-schedule=10,60")
	ep := e.do("POST", "/v1/webhook-endpoints", e.Boot.APIKey, map[string]any{"url": rcv.srv.URL + "/hook", "events": []string{"room.ended"}}).must(t, 201)
	rcv.secret = ep.Str("signing_secret")
	rcv.now = e.clock.Now
	if len(rcv.secret) < 10 || rcv.secret[:6] != "whsec_" {
		t.Fatalf("signing secret: %s", ep.Raw)
	}
	epID := ep.Str("id")
	if list := e.do("GET", "/v1/webhook-endpoints", e.Boot.APIKey, nil).must(t, 200); string(list.Raw) == "" ||
		len(list.Data()) != 1 || list.Data()[0]["signing_secret"] != nil {
		t.Fatalf("list shows the secret or not the endpoint: %s", list.Raw)
	}

	// Success: a signed delivery the receiver verifies.
	room := e.createRoom(nil)
	e.do("DELETE", "/v1/rooms/"+room, e.Boot.APIKey, nil).must(t, 200)
	e.eventually("room.ended delivered", func() bool { return len(rcv.deliveries()) == 1 })
	if d := rcv.deliveries()[0]; d.verr != nil || d.id == "" {
		t.Fatalf("delivery did not verify: %+v", d)
	}

	// Failure: 500 -> retried after 10 s and 60 s (fake clock), then dead.
	rcv.setStatus(500)
	room2 := e.createRoom(nil)
	e.do("DELETE", "/v1/rooms/"+room2, e.Boot.APIKey, nil).must(t, 200)
	e.eventually("first failed attempt", func() bool { return len(rcv.deliveries()) == 2 })
	latest := func() map[string]any {
		return e.do("GET", "/v1/webhook-endpoints/"+epID+"/deliveries?limit=1", e.Boot.APIKey, nil).must(t, 200).Data()[0]
	}
	e.eventually("retrying recorded", func() bool { return latest()["status"] == "retrying" })
	if next := latest()["next_attempt_at"]; next != testEpoch.Add(10*time.Second).Format("2006-01-02T15:04:05.000Z") {
		t.Fatalf("next attempt at %v, want 10 s after the first", next) // exact timing: TestWebhookRedirectTimeoutAndErrorsAreFailures
	}
	e.clock.Advance(10 * time.Second)
	e.eventually("second attempt at +10 s", func() bool { return len(rcv.deliveries()) == 3 })
	e.clock.Advance(60 * time.Second)
	e.eventually("third attempt at +60 s", func() bool { return len(rcv.deliveries()) == 4 })
	e.eventually("dead", func() bool { return latest()["status"] == "dead" })
	d := latest()
	if d["attempt_count"] != float64(3) || len(d["attempts"].([]any)) != 3 {
		t.Fatalf("dead delivery: %v", d)
	}
	first := d["attempts"].([]any)[0].(map[string]any)
	if first["response_status"] != float64(500) || first["next_attempt_at"] == nil || first["requested_at"] == nil {
		t.Fatalf("attempt record: %v", first)
	}

	// Redelivery of the dead delivery once the receiver is healthy.
	rcv.setStatus(204)
	e.do("POST", "/v1/webhook-endpoints/"+epID+"/deliveries/"+d["id"].(string)+"/retry", e.Boot.APIKey, nil).must(t, 200)
	e.eventually("redelivered", func() bool { return latest()["status"] == "succeeded" })
	if got := rcv.deliveries(); got[len(got)-1].verr != nil {
		t.Fatalf("redelivery did not verify: %v", got[len(got)-1].verr)
	}
	// A succeeded delivery cannot be retried.
	e.do("POST", "/v1/webhook-endpoints/"+epID+"/deliveries/"+d["id"].(string)+"/retry", e.Boot.APIKey, nil).must(t, 409)
}
