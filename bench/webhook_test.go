package bench

import (
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"rtcd/actors"
	"rtcd/actors/dispatch"
	"rtcd/metrics"
	"rtcd/webhookdelivery"
)

// BenchmarkWebhookDelivery is deliveries per second to one endpoint after
// a burst of b.N events (issue 15 measures 2,000: -benchtime=2000x), with
// a receiver that answers at once or after 20 ms. A real engine on a real
// store: b.N rooms are created and deleted before the clock starts, so b.N
// room.ended events wait in the outbox; then the dispatcher starts with
// the production delivery client (SSRF-safe dialer, the test CA trusted,
// HTTP/2 negotiated with the receiver, an httptest HTTPS server on
// loopback) and the default window, and the clock stops when every
// delivery is recorded as succeeded (the backlog gauge at zero). One op
// is one event delivered and recorded. Reports deliveries/s (the target:
// at least 1,000 at 20 ms) and the most requests the receiver had in
// flight at once.
func BenchmarkWebhookDelivery(b *testing.B) {
	for _, latency := range []time.Duration{0, 20 * time.Millisecond} {
		b.Run(fmt.Sprintf("receiver_%dms", latency.Milliseconds()), func(b *testing.B) {
			benchWebhookDelivery(b, latency)
		})
	}
}

// webhookReceiver answers each delivery after latency and closes all once
// it has answered want distinct events.
type webhookReceiver struct {
	latency time.Duration
	want    int
	all     chan struct{}

	mu          sync.Mutex
	seen        map[string]bool
	inFlight    int
	maxInFlight int
	protos      map[string]int
}

func (r *webhookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	r.mu.Lock()
	r.inFlight++
	r.maxInFlight = max(r.maxInFlight, r.inFlight)
	r.protos[req.Proto]++
	r.mu.Unlock()
	if r.latency > 0 {
		time.Sleep(r.latency) // the receiver's own latency: what is measured is rtcd keeping pace with it
	}
	w.WriteHeader(http.StatusNoContent)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inFlight--
	if id := req.Header.Get("X-RTC-Webhook-Id"); !r.seen[id] {
		r.seen[id] = true
		if len(r.seen) == r.want {
			close(r.all)
		}
	}
}

func benchWebhookDelivery(b *testing.B, latency time.Duration) {
	rcv := &webhookReceiver{latency: latency, want: b.N, all: make(chan struct{}), seen: map[string]bool{}, protos: map[string]int{}}
	srv := httptest.NewUnstartedServer(rcv)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	b.Cleanup(srv.Close)
	caFile := filepath.Join(b.TempDir(), "receiver-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		b.Fatal(err)
	}

	settings := benchSettings()
	settings.WebhookAllowPrivate = true // the receiver is on loopback
	m := metrics.New()
	f := newFixtureWith(b, settings, m)
	url := srv.URL + "/hook"
	if _, aerr := f.e.CreateEndpoint(f.caller, &actors.EndpointParams{URL: &url, Events: []string{"room.ended"}}, nil); aerr != nil {
		b.Fatal(aerr)
	}
	// The burst: b.N rooms ended, each room.ended waiting in the outbox
	// (nothing delivers before SetWebhookSender).
	rooms := make([]string, b.N)
	if err := parallel(b.N, func(i int) error {
		id, err := f.createRoom()
		if err != nil {
			return err
		}
		if _, aerr := f.e.DeleteRoom(f.caller, id); aerr != nil {
			return fmt.Errorf("delete room: %v", aerr)
		}
		rooms[i] = id
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	if err := parallel(b.N, func(i int) error {
		for {
			body, aerr := f.e.GetRoom(f.caller, rooms[i])
			if aerr != nil {
				return fmt.Errorf("get room: %v", aerr)
			}
			if status, err := decodeField(body, "status"); err != nil || status == "ended" {
				return err
			}
			time.Sleep(time.Millisecond) // the room's end follows its DELETE on the room's goroutine
		}
	}); err != nil {
		b.Fatal(err)
	}
	client := webhookdelivery.NewClient(webhookdelivery.ClientConfig{AllowPrivate: true, ExtraCAFile: caFile,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := client.Err(); err != nil {
		b.Fatal(err)
	}

	b.ReportAllocs()
	b.ResetTimer()
	f.e.SetWebhookSender(client, dispatch.Settings{})
	select {
	case <-rcv.all:
	case <-time.After(10 * time.Minute):
		b.Fatalf("%d of %d events delivered in 10 minutes", len(rcv.seen), b.N)
	}
	for pendingDeliveries(b, m) > 0 {
		time.Sleep(100 * time.Microsecond) // the last group's record follows the last answer
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	b.ReportMetric(float64(rcv.maxInFlight), "max_in_flight")
	if rcv.protos["HTTP/2.0"] == 0 || len(rcv.protos) != 1 {
		b.Fatalf("the receiver saw %v, want HTTP/2 only", rcv.protos)
	}
}

// pendingDeliveries reads rtcd_webhook_backlog_deliveries{status="pending"}:
// deliveries not yet recorded as attempted.
func pendingDeliveries(b *testing.B, m *metrics.Metrics) float64 {
	families, err := m.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() != "rtcd_webhook_backlog_deliveries" {
			continue
		}
		for _, metric := range fam.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "status" && l.GetValue() == metrics.BacklogPending {
					return metric.GetGauge().GetValue()
				}
			}
		}
	}
	b.Fatal("no rtcd_webhook_backlog_deliveries{status=\"pending\"}")
	return 0
}
