package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-json"
	"rtcd/actors"
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
	eventType := fs.String("type", "", "the event type to send: "+strings.Join(actors.EventTypes, ", "))
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
	if !slices.Contains(actors.EventTypes, *eventType) {
		return fmt.Errorf("--type %q is not an event type; one of %s", *eventType, strings.Join(actors.EventTypes, ", "))
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

// sampleWebhookEvent returns the id and the envelope of a made-up event of
// eventType for projectID, with every data field the type carries
// (docs/webhooks.md#event-types), fresh ids, and created_at now.
func sampleWebhookEvent(eventType, projectID string, now time.Time) (string, []byte, error) {
	ts := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
	room, part, session := ids.New(ids.Room), ids.New(ids.Participant), ids.New(ids.ConnectSession)
	account, payment := ids.New(ids.Account), ids.New(ids.Payment)
	credit := func(from, to, balance string) map[string]any {
		return map[string]any{"account_id": account, "previous_state": from, "credit_state": to,
			"balance": balance, "currency": webhookTestCurrency}
	}
	pay := func(status, refunded, receipt string) map[string]any {
		return map[string]any{"payment_id": payment, "account_id": account, "amount": "20.00",
			"amount_refunded": refunded, "currency": webhookTestCurrency, "status": status, "receipt_url": receipt}
	}
	receipt := "https://payments.example.com/receipts/" + payment
	var data map[string]any
	switch eventType {
	case actors.EventRoomStarted:
		data = map[string]any{"room_id": room, "sequence": 1}
	case actors.EventParticipantJoined:
		data = map[string]any{"room_id": room, "participant_id": part, "session_id": session, "sequence": 2}
	case actors.EventParticipantLeft:
		data = map[string]any{"room_id": room, "participant_id": part, "session_id": session, "reason": "left", "sequence": 3}
	case actors.EventUsageFinalized:
		data = map[string]any{"room_id": room, "participant_id": part, "session_id": session,
			"started_at": ts(now.Add(-90 * time.Second)), "ended_at": ts(now), "participant_seconds": 90,
			"participant_minutes": 1.5, "amount": "0.006000", "currency": webhookTestCurrency, "sequence": 4}
	case actors.EventRoomEnded:
		data = map[string]any{"room_id": room, "reason": "deleted", "sequence": 5}
	case actors.EventCreditLow:
		data = credit("normal", "low", "4.50")
	case actors.EventCreditExhausted:
		data = credit("low", "exhausted", "0.50")
	case actors.EventCreditRestored:
		data = credit("exhausted", "normal", "20.50")
	case actors.EventPaymentSucceeded:
		data = pay("succeeded", "0.00", receipt)
	case actors.EventPaymentFailed:
		data = pay("failed", "0.00", "")
	case actors.EventPaymentCanceled:
		data = pay("canceled", "0.00", "")
	case actors.EventPaymentExpired:
		data = pay("expired", "0.00", "")
	case actors.EventPaymentRefunded:
		data = pay("refunded", "20.00", receipt)
	default:
		return "", nil, fmt.Errorf("rtcd webhooks test has no sample of %q", eventType)
	}
	id := ids.New(ids.Event)
	body, err := json.Marshal(webhookEnvelope{ID: id, Type: eventType, CreatedAt: ts(now), ProjectID: projectID, Data: data})
	return id, body, err
}
