// Package server is the Go server SDK of rtcd, the control plane of the
// real-time room and participant service. A customer backend uses it with a
// secret API key (sk_live_…) to create rooms and participant sessions, read
// usage and billing, manage API keys and webhook endpoints, and verify the
// signed webhook deliveries it receives.
//
// It covers every public /v1 route except POST /v1/connect (client SDKs
// only) and the dashboard routes, and depends on the standard library only.
//
// # Client
//
//	client, err := server.New(os.Getenv("RTCD_API_KEY"), server.WithBaseURL("https://rtc.example.com"))
//	room, err := client.CreateRoom(ctx, &server.CreateRoomParams{Name: server.String("standup")})
//
// Every method takes a context.Context first. Optional request fields are
// pointers (String and Int make them); a nil params pointer sends {}.
// List methods take a page size (1 to 100; 0 means the server's default of
// 50) and return a Page with HasMore; the API has no cursor, so only the
// newest items can be read.
//
// # Errors
//
// An error answered by the API is an *APIError carrying the HTTP status, the
// stable code (the Code… constants), the message, the request id, the
// details object and the Retry-After value:
//
//	var apiErr *server.APIError
//	if errors.As(err, &apiErr) && apiErr.Code == server.CodeRoomNotFound { … }
//
// # Retries
//
// Only requests that are safe to repeat are retried: GET and DELETE, and
// the creates that carry an Idempotency-Key (rooms, participants, API keys,
// webhook endpoints; the SDK generates a key for them when retries are on).
// They are retried after a connection error, a 429 (after its Retry-After),
// a 503, and a 409 idempotency_in_progress; never after any other 4xx. Top-up
// creation and delivery retries take no Idempotency-Key and are never
// retried. See WithRetries and WithBackoff.
//
// # Webhooks
//
// VerifyWebhook checks a delivery's X-RTC-Signature over the raw body and
// its X-RTC-Timestamp against a tolerance, then decodes the event.
package server
