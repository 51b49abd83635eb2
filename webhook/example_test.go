package webhook_test

import (
	"fmt"
	"time"

	"rtcd/webhook"
)

// Example signs a delivery the way rtcd does and verifies it the way a
// receiver should: with the exact raw body bytes and the two headers.
func Example() {
	secret := "whsec_example_secret"
	body := []byte(`{"id":"evt_123","type":"room.started","created_at":"2024-03-01T12:00:00Z","project_id":"prj_1","data":{}}`)
	timestamp := int64(1709294400) // 2024-03-01T12:00:00Z
	timestampHeader := "1709294400"
	signatureHeader := webhook.Sign(secret, timestamp, body)

	// A receiver would pass time.Now(); a fixed time keeps the output stable.
	now := time.Unix(timestamp, 0).Add(30 * time.Second)

	err := webhook.Verify(secret, body, timestampHeader, signatureHeader, webhook.DefaultTolerance, now)
	fmt.Println("authentic:", err)

	tampered := append([]byte{}, body...)
	tampered[len(tampered)-2] = ' '
	err = webhook.Verify(secret, tampered, timestampHeader, signatureHeader, webhook.DefaultTolerance, now)
	fmt.Println("tampered:", err)

	err = webhook.Verify(secret, body, timestampHeader, signatureHeader, webhook.DefaultTolerance, now.Add(time.Hour))
	fmt.Println("replayed an hour later:", err)

	// Output:
	// authentic: <nil>
	// tampered: webhook: signature mismatch
	// replayed an hour later: webhook: timestamp outside tolerance
}
