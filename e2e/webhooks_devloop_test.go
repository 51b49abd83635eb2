package e2e

import (
	"strings"
	"testing"
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
