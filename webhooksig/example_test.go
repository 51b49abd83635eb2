package webhooksig_test

import (
	"fmt"
	"time"

	"rtcd/webhooksig"
)

// Example signs a delivery the way rtcd does and verifies it the way a
// receiver should: with the exact raw body bytes and the two headers.
func Example() {
	secret := "whsec_example_secret"
	body := []byte(`{"id":"evt_123","type":"room.started","created_at":"2024-03-01T12:00:00Z","project_id":"prj_1","data":{}}`)
	timestamp := int64(1709294400) // 2024-03-01T12:00:00Z
	timestampHeader := "1709294400"
	signatureHeader := webhooksig.Sign(secret, timestamp, body)

	// A receiver would pass time.Now(); a fixed time keeps the output stable.
	now := time.Unix(timestamp, 0).Add(30 * time.Second)

	err := webhooksig.Verify(secret, body, timestampHeader, signatureHeader, webhooksig.DefaultTolerance, now)
	fmt.Println("authentic:", err)

	tampered := append([]byte{}, body...)
	tampered[len(tampered)-2] = ' '
	err = webhooksig.Verify(secret, tampered, timestampHeader, signatureHeader, webhooksig.DefaultTolerance, now)
	fmt.Println("tampered:", err)

	err = webhooksig.Verify(secret, body, timestampHeader, signatureHeader, webhooksig.DefaultTolerance, now.Add(time.Hour))
	fmt.Println("replayed an hour later:", err)

	// Output:
	// authentic: <nil>
	// tampered: webhook: signature mismatch
	// replayed an hour later: webhook: timestamp outside tolerance
}
