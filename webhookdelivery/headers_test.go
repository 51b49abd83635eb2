package webhookdelivery

import (
	"testing"
	"time"

	"rtcd/webhooksig"
)

func TestHeaders(t *testing.T) {
	body := []byte(`{"id":"evt_9"}`)
	const ts = int64(1709294400)
	h := Headers("evt_9", ts, body, "whsec_x")
	want := map[string]string{
		"Content-Type":     "application/json",
		"User-Agent":       "rtcd-Webhooks/0.1",
		"X-RTC-Webhook-Id": "evt_9",
		"X-RTC-Timestamp":  "1709294400",
		"X-RTC-Signature":  webhooksig.Sign("whsec_x", ts, body),
	}
	if len(h) != len(want) {
		t.Fatalf("Headers = %v, want %v", h, want)
	}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("header %s = %q, want %q", k, h[k], v)
		}
	}
	if err := webhooksig.Verify("whsec_x", body, h[webhooksig.HeaderTimestamp], h[webhooksig.HeaderSignature], webhooksig.DefaultTolerance, time.Unix(ts, 0)); err != nil {
		t.Fatalf("Verify(Headers) = %v", err)
	}
}
