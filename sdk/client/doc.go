// Package client is the Go client SDK of rtcd: an application trades a
// participant token (rtc_pt_…, created by its backend) for a media session
// and holds the connection to the media node, with connection states,
// events, automatic reconnects and normalized errors.
//
//	s, err := client.Connect(ctx, "https://api.example.com", participantToken,
//		client.WithHandler(client.EventParticipantJoined, func(e client.Event) { … }))
//	if err != nil {
//		var ce *client.Error
//		errors.As(err, &ce) // ce.Code: room_ended, rate_limited (ce.RetryAfter), …
//	}
//	defer s.Close()
//
// Connect calls POST <origin>/v1/connect (trailing slashes and a trailing
// /v1 of the origin are stripped), then opens the WebSocket endpoint it
// returned and joins with the short-lived media token, which the
// application never sees. The whole connect has a 15-second deadline
// (ConnectTimeout) and is cancellable through its context.
//
// # Connection states
//
// A Session moves only along these transitions; any other move is refused
// by its state machine:
//
//	from           to             when
//	idle           connecting     Connect starts
//	connecting     connected      the media node answered the join
//	connecting     failed         the exchange or the join failed, the 15 s deadline passed, or ctx ended
//	connected      reconnecting   the media socket dropped (network, heartbeat, node shutdown)
//	connected      disconnecting  Leave or Close
//	connected      disconnected   the server ended the session: room ended, participant removed, connection replaced
//	connected      failed         the media node refused this SDK's messages (bad_message)
//	reconnecting   connected      a reconnect attempt joined again
//	reconnecting   disconnecting  Leave or Close
//	reconnecting   disconnected   an attempt learnt that the room ended or the participant was removed
//	reconnecting   failed         attempts exhausted (ReconnectPolicy) or an error no retry can fix
//	disconnecting  disconnected   the socket closed
//
// disconnected and failed are final. Handlers given with WithHandler see
// every move from idle on; Connect returns once connected.
//
// # Reconnects
//
// After a drop the session reconnects with exponential backoff and jitter
// (ReconnectPolicy: by default 10 attempts within 2 minutes). A media
// token admits one media session: once its socket has dropped, the control
// plane has closed that session, so every reconnect after a drop exchanges
// the participant token again at POST /v1/connect (a new connect session,
// metered as a new join). A retry whose join never succeeded reuses the
// media token while it has more than a second left; a media token that has
// expired, or that the media node refuses (token_expired, token_invalid),
// is exchanged again at once.
//
// # Events
//
// Session.On(name, handler) and WithHandler subscribe to the eleven events
// of EventNames. Handlers run on one goroutine per session, in order, never
// on the socket's reader.
//
// # Errors
//
// Every error is an *Error with a Code of spec 7 ("Client SDK errors").
// What the API or the media node said is only in Error.Debug.
package client
