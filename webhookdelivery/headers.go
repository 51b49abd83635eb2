package webhookdelivery

import (
	"strconv"

	"rtcd/webhooksig"
)

// Fixed request header values of every delivery (spec section 6).
const (
	ContentType = "application/json"
	UserAgent   = "rtcd-Webhooks/0.1"
)

// Headers returns the request headers of one delivery attempt of the event
// eventID whose envelope is body, signed with secret at timestamp (Unix
// seconds): Content-Type, User-Agent, X-RTC-Webhook-Id, X-RTC-Timestamp and
// X-RTC-Signature.
//
// Sign every attempt with the time of that attempt, not the event's
// creation time: receivers reject timestamps older than their tolerance
// (five minutes by default), and retries run for a day.
func Headers(eventID string, timestamp int64, body []byte, secret string) map[string]string {
	return map[string]string{
		"Content-Type":             ContentType,
		"User-Agent":               UserAgent,
		webhooksig.HeaderID:        eventID,
		webhooksig.HeaderTimestamp: strconv.FormatInt(timestamp, 10),
		webhooksig.HeaderSignature: webhooksig.Sign(secret, timestamp, body),
	}
}
