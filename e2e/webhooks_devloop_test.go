package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The local development loop of a webhook receiver (docs/webhooks.md): an
// endpoint on the developer's machine is refused with a message naming the
// setting that allows it, and `rtcd webhooks test` sends a signed event of
// any type to a receiver, as rtcd delivers one.

func TestWebhookLocalEndpointRefusalNamesTheSetting(t *testing.T) {
	e := start(t)
	for _, url := range []string{"http://localhost:3000/webhooks", "https://127.0.0.1:3000/webhooks"} {
		r := e.do("POST", "/v1/webhook-endpoints", e.Boot.APIKey, map[string]any{"url": url}).must(t, 400)
		msg, _ := r.JSON["error"].(map[string]any)["message"].(string)
		if r.ErrCode() != "invalid_request" || !strings.Contains(msg, "--webhook-allow-private") {
			t.Errorf("POST %s: %s; want invalid_request naming --webhook-allow-private", url, r.Raw)
		}
	}
	dev := start(t, "--webhook-allow-private")
	dev.do("POST", "/v1/webhook-endpoints", dev.Boot.APIKey, map[string]any{"url": "http://localhost:3000/webhooks"}).must(t, 201)
}

// devloopDataKeys are the data fields of each event type, from
// docs/webhooks.md#event-types.
var devloopDataKeys = func() map[string][]string {
	room := []string{"room_id", "sequence"}
	session := []string{"room_id", "participant_id", "session_id", "sequence"}
	credit := []string{"account_id", "previous_state", "credit_state", "balance", "currency"}
	payment := []string{"payment_id", "account_id", "amount", "amount_refunded", "currency", "status", "receipt_url"}
	return map[string][]string{
		"room.started": room, "room.ended": append(slices.Clone(room), "reason"),
		"participant.joined": session, "participant.left": append(slices.Clone(session), "reason"),
		"usage.finalized": append(slices.Clone(session), "started_at", "ended_at", "participant_seconds",
			"participant_minutes", "amount", "currency"),
		"credit.low": credit, "credit.exhausted": credit, "credit.restored": credit,
		"payment.succeeded": payment, "payment.failed": payment, "payment.canceled": payment,
		"payment.expired": payment, "payment.refunded": payment,
	}
}()

// devloopDelivery is one request a test receiver got.
type devloopDelivery struct {
	header http.Header
	body   []byte
}

func TestWebhooksTestCommand(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("builds and runs the rtcd binary")
	}
	bin := binBuild(t)
	const secret = "whsec_devloopdevloopdevloopdevloopdevloopdevloo"
	var mu sync.Mutex
	var got []devloopDelivery
	status := http.StatusNoContent
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, devloopDelivery{header: r.Header.Clone(), body: body})
		code := status
		mu.Unlock()
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "seen")
	}))
	defer receiver.Close()
	doc := openAPIDocument(t)
	schema := doc.Components.Schemas["WebhookEvent"].Value
	env := []string{"RTCD_WEBHOOK_SECRET=" + secret}

	// Every type the document lists (the server's own list is held to it
	// by the endpoint tests), and the spec's list.
	var types []string
	for _, v := range doc.Components.Schemas["EventType"].Value.Enum {
		types = append(types, v.(string))
	}
	if !slices.Equal(slices.Sorted(slices.Values(types)), slices.Sorted(slices.Values(whAllEventTypes))) {
		t.Fatalf("docs/openapi.yaml lists event types %v, the spec %v", types, whAllEventTypes)
	}
	for _, typ := range types {
		t.Run(typ, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			stdout, stderr, code := cliRun(t, bin, env, "webhooks", "test", "--url", receiver.URL+"/rtcd/webhooks",
				"--type", typ, "--project-id", "prj_devloopdevloopdevloopdev")
			if code != 0 {
				t.Fatalf("exit %d: %s %s", code, stdout, stderr)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 {
				t.Fatalf("the receiver got %d requests, want 1", len(got))
			}
			d := got[0]
			// The signature, checked from the spec's formula, not with rtcd's code.
			ts := d.header.Get("X-RTC-Timestamp")
			mac := hmac.New(sha256.New, []byte(secret))
			mac.Write([]byte(ts + "."))
			mac.Write(d.body)
			if want := "v1=" + hex.EncodeToString(mac.Sum(nil)); d.header.Get("X-RTC-Signature") != want {
				t.Errorf("X-RTC-Signature %q, want %q", d.header.Get("X-RTC-Signature"), want)
			}
			sec, err := strconv.ParseInt(ts, 10, 64)
			if err != nil || time.Since(time.Unix(sec, 0)).Abs() > time.Minute {
				t.Errorf("X-RTC-Timestamp %q is not now", ts)
			}
			if d.header.Get("Content-Type") != "application/json" || d.header.Get("User-Agent") != "rtcd-Webhooks/0.1" {
				t.Errorf("headers %v", d.header)
			}
			var ev map[string]any
			if err := json.Unmarshal(d.body, &ev); err != nil {
				t.Fatalf("body %s: %v", d.body, err)
			}
			if err := schema.VisitJSON(ev); err != nil {
				t.Errorf("body does not match the WebhookEvent schema of docs/openapi.yaml: %v\n%s", err, d.body)
			}
			if ev["type"] != typ || ev["project_id"] != "prj_devloopdevloopdevloopdev" || ev["id"] != d.header.Get("X-RTC-Webhook-Id") {
				t.Errorf("envelope %s, headers %v", d.body, d.header)
			}
			data, _ := ev["data"].(map[string]any)
			keys := make([]string, 0, len(data))
			for k := range data {
				keys = append(keys, k)
			}
			want := slices.Clone(devloopDataKeys[typ])
			sort.Strings(keys)
			sort.Strings(want)
			if !slices.Equal(keys, want) {
				t.Errorf("data fields %v, docs/webhooks.md lists %v", keys, want)
			}
			var printed struct {
				Success    bool            `json:"success"`
				StatusCode int             `json:"status_code"`
				Event      json.RawMessage `json:"event"`
			}
			if err := json.Unmarshal([]byte(stdout), &printed); err != nil || !printed.Success || printed.StatusCode != 204 ||
				string(printed.Event) != string(d.body) {
				t.Errorf("printed %s (%v)", stdout, err)
			}
		})
	}

	t.Run("a receiver that refuses", func(t *testing.T) {
		mu.Lock()
		status = http.StatusInternalServerError
		mu.Unlock()
		stdout, stderr, code := cliRun(t, bin, env, "webhooks", "test", "--url", receiver.URL, "--type", "room.ended")
		if code == 0 || !strings.Contains(stdout, `"status_code":500`) || !strings.Contains(stderr, "did not accept") {
			t.Errorf("exit %d, %s %s; want a failure that shows the 500", code, stdout, stderr)
		}
	})
	t.Run("bad usage", func(t *testing.T) {
		for _, args := range [][]string{
			{"webhooks", "test", "--url", receiver.URL, "--type", "room.exploded"},
			{"webhooks", "test", "--type", "room.ended"},
			{"webhooks", "send"},
		} {
			if _, stderr, code := cliRun(t, bin, env, args...); code == 0 || stderr == "" {
				t.Errorf("rtcd %v: exit %d, %q", args, code, stderr)
			}
		}
		_, stderr, code := cliRun(t, bin, []string{"RTCD_WEBHOOK_SECRET="}, "webhooks", "test", "--url", receiver.URL, "--type", "room.ended")
		if code == 0 || !strings.Contains(stderr, "RTCD_WEBHOOK_SECRET") {
			t.Errorf("no secret: exit %d, %q", code, stderr)
		}
	})
}
