// Package webhooksig verifies signed webhook deliveries sent by rtcd.
//
// Every delivery is an HTTP POST whose body is a JSON event envelope and
// whose headers carry:
//
//	X-RTC-Webhook-Id: evt_...            the event id (process idempotently by it)
//	X-RTC-Timestamp:  1700000000         Unix time in seconds when it was signed
//	X-RTC-Signature:  v1=<hex>           HMAC-SHA256 of "<timestamp>.<raw body>"
//
// The HMAC key is the endpoint's whole signing secret string, including its
// "whsec_" prefix. During a secret rotation the signature header may carry
// several comma-separated v1= values; a delivery is authentic when any of
// them matches.
//
// A receiver verifies a delivery with the exact bytes it received, before
// parsing them: re-serialised JSON (other whitespace, key order or escaping)
// does not verify. Read the body once, verify it, then decode it:
//
//	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
//	if err != nil { ... }
//	if err := webhooksig.VerifyRequest(secret, r, body, webhooksig.DefaultTolerance); err != nil {
//		http.Error(w, "bad signature", http.StatusBadRequest)
//		return
//	}
//	// json.Unmarshal(body, &event) ...
//
// The timestamp check (DefaultTolerance, five minutes either way) limits how
// long a captured delivery can be replayed; the event id lets a receiver drop
// the replays and retries that arrive inside that window.
//
// This package depends only on the standard library, so a Go receiver can
// use or copy it without the rest of rtcd. The Go server SDK (sdk/server, a
// module of its own) carries its own implementation of the same scheme,
// pinned to this signer by test vectors. The sending side (destination
// policy, delivery client, retry schedule) is package webhookdelivery.
package webhooksig
