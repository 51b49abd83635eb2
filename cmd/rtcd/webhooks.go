package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/goccy/go-json"
	"rtcd/ids"
	"rtcd/webhookdelivery"
)

// `rtcd webhooks test` is the local development loop of a webhook receiver
// (docs/webhooks.md): it sends one signed event of a chosen type to a URL,
// exactly as rtcd delivers one (the same client, headers and signature),
// without causing the event on a server. It is a command, not an API
// route: it needs nothing but the URL and the endpoint's signing secret.

// webhookTestUsage is the usage line of `rtcd webhooks`.
const webhookTestUsage = "usage: rtcd webhooks test --url URL --type TYPE [--secret whsec_… | RTCD_WEBHOOK_SECRET] [--project-id prj_…]"

// webhookTestCurrency is the currency of the sample events (rtcd bills in USD only).
const webhookTestCurrency = "USD"

// webhookTestResult is what `rtcd webhooks test` prints: the event sent
// and what the receiver answered.
type webhookTestResult struct {
	Event         json.RawMessage `json:"event"`
	Success       bool            `json:"success"`
	StatusCode    int             `json:"status_code"`
	LatencyMillis int64           `json:"latency_ms"`
	ResponseBody  string          `json:"response_body"`
	Error         string          `json:"error,omitempty"`
}

func runWebhooks(args []string) error {
	if len(args) == 0 || args[0] != "test" {
		return errors.New(webhookTestUsage)
	}
	fs := flag.NewFlagSet("rtcd webhooks test", flag.ContinueOnError)
	url := fs.String("url", "", "the receiver's URL; http:// and loopback or private addresses are allowed (a development command)")
	eventType := fs.String("type", "", "the event type to send: "+strings.Join(webhookEventTypes(), ", "))
	secret := fs.String("secret", os.Getenv("RTCD_WEBHOOK_SECRET"), "the endpoint's signing secret (whsec_…); prefer RTCD_WEBHOOK_SECRET, a flag shows in the process list")
	projectID := fs.String("project-id", "", "project_id of the event; empty: a made-up prj_ id")
	timeoutSeconds := fs.Int("timeout-seconds", webhookdelivery.DefaultTimeoutSeconds, "timeout of the attempt, as --webhook-timeout-seconds of rtcd serve")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q; %s", fs.Arg(0), webhookTestUsage)
	}
	if *url == "" || *eventType == "" {
		return fmt.Errorf("--url and --type are required; %s", webhookTestUsage)
	}
	if *secret == "" {
		return errors.New("no signing secret: set RTCD_WEBHOOK_SECRET (or --secret) to the endpoint's whsec_… secret")
	}
	if *timeoutSeconds < 1 || *timeoutSeconds > webhookdelivery.MaxTimeoutSeconds {
		return fmt.Errorf("--timeout-seconds must be 1 to %d", webhookdelivery.MaxTimeoutSeconds)
	}
	if *projectID == "" {
		*projectID = ids.New(ids.Project)
	}
	now := time.Now()
	eventID, body, err := sampleWebhookEvent(*eventType, *projectID, now)
	if err != nil {
		return err
	}
	// The client's testing-settings warning is for servers; here allowing
	// private destinations is the point.
	client := webhookdelivery.NewClient(webhookdelivery.ClientConfig{AllowPrivate: true, TimeoutSeconds: *timeoutSeconds,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	attempt := client.Deliver(context.Background(), *url, webhookdelivery.Headers(eventID, now.Unix(), body, *secret), body)
	out, _ := json.Marshal(webhookTestResult{Event: body, Success: attempt.Success, StatusCode: attempt.StatusCode,
		LatencyMillis: attempt.LatencyMillis, ResponseBody: attempt.ResponseBody, Error: attempt.Err})
	fmt.Println(string(out))
	if !attempt.Success {
		return fmt.Errorf("the receiver did not accept the event (rtcd would retry it): %s", attempt.Err)
	}
	return nil
}

// webhookEnvelope is the body of a delivery (spec section 6), in the field
// order rtcd writes it.
type webhookEnvelope struct {
	ID        string         `json:"id"`
	Type      string         `json:"type"`
	CreatedAt string         `json:"created_at"`
	ProjectID string         `json:"project_id"`
	Data      map[string]any `json:"data"`
}

// webhookSample is a made-up event of one type.
type webhookSample struct {
	eventType string
	// data returns the type's data fields (docs/webhooks.md#event-types)
	// with fresh ids, the session ending at now.
	data func(ids webhookSampleIDs, now time.Time) map[string]any
}

// webhookSampleIDs are the made-up ids one sample event names.
type webhookSampleIDs struct {
	room, participant, session, account, payment string
}

// webhookSamples has one sample per event type of spec section 6, in its
// order. The e2e test sends each type the OpenAPI document lists, so a new
// type without a sample here fails it.
var webhookSamples = []webhookSample{
	{"room.started", func(id webhookSampleIDs, _ time.Time) map[string]any {
		return map[string]any{"room_id": id.room, "sequence": 1}
	}},
	{"room.ended", func(id webhookSampleIDs, _ time.Time) map[string]any {
		return map[string]any{"room_id": id.room, "reason": "deleted", "sequence": 5}
	}},
	{"participant.joined", func(id webhookSampleIDs, _ time.Time) map[string]any {
		return map[string]any{"room_id": id.room, "participant_id": id.participant, "session_id": id.session, "sequence": 2}
	}},
	{"participant.left", func(id webhookSampleIDs, _ time.Time) map[string]any {
		return map[string]any{"room_id": id.room, "participant_id": id.participant, "session_id": id.session, "reason": "left", "sequence": 3}
	}},
	{"usage.finalized", func(id webhookSampleIDs, now time.Time) map[string]any {
		return map[string]any{"room_id": id.room, "participant_id": id.participant, "session_id": id.session,
			"started_at": webhookTimestamp(now.Add(-90 * time.Second)), "ended_at": webhookTimestamp(now), "participant_seconds": 90,
			"participant_minutes": 1.5, "amount": "0.006000", "currency": webhookTestCurrency, "sequence": 4}
	}},
	{"credit.low", creditSample("normal", "low", "4.50")},
	{"credit.exhausted", creditSample("low", "exhausted", "0.50")},
	{"credit.restored", creditSample("exhausted", "normal", "20.50")},
	{"payment.succeeded", paymentSample("succeeded", "0.00", true)},
	{"payment.failed", paymentSample("failed", "0.00", false)},
	{"payment.expired", paymentSample("expired", "0.00", false)},
	{"payment.canceled", paymentSample("canceled", "0.00", false)},
	{"payment.refunded", paymentSample("refunded", "20.00", true)},
}

func creditSample(from, to, balance string) func(webhookSampleIDs, time.Time) map[string]any {
	return func(id webhookSampleIDs, _ time.Time) map[string]any {
		return map[string]any{"account_id": id.account, "previous_state": from, "credit_state": to,
			"balance": balance, "currency": webhookTestCurrency}
	}
}

func paymentSample(status, refunded string, receipt bool) func(webhookSampleIDs, time.Time) map[string]any {
	return func(id webhookSampleIDs, _ time.Time) map[string]any {
		url := ""
		if receipt {
			url = "https://payments.example.com/receipts/" + id.payment
		}
		return map[string]any{"payment_id": id.payment, "account_id": id.account, "amount": "20.00",
			"amount_refunded": refunded, "currency": webhookTestCurrency, "status": status, "receipt_url": url}
	}
}

// webhookEventTypes lists the types rtcd webhooks test can send.
func webhookEventTypes() []string {
	types := make([]string, 0, len(webhookSamples))
	for _, s := range webhookSamples {
		types = append(types, s.eventType)
	}
	return types
}

// webhookTimestamp formats t as rtcd's events do: millisecond ISO 8601 UTC.
func webhookTimestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// sampleWebhookEvent returns the id and the envelope of a made-up event of
// eventType for projectID, with every data field the type carries
// (docs/webhooks.md#event-types), fresh ids, and created_at now.
func sampleWebhookEvent(eventType, projectID string, now time.Time) (string, []byte, error) {
	for _, sample := range webhookSamples {
		if sample.eventType != eventType {
			continue
		}
		data := sample.data(webhookSampleIDs{room: ids.New(ids.Room), participant: ids.New(ids.Participant),
			session: ids.New(ids.ConnectSession), account: ids.New(ids.Account), payment: ids.New(ids.Payment)}, now)
		id := ids.New(ids.Event)
		body, err := json.Marshal(webhookEnvelope{ID: id, Type: eventType, CreatedAt: webhookTimestamp(now), ProjectID: projectID, Data: data})
		return id, body, err
	}
	return "", nil, fmt.Errorf("--type %q is not an event type; one of %s", eventType, strings.Join(webhookEventTypes(), ", "))
}
