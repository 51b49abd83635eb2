// Package webhookdelivery is the sending side of rtcd's signed webhooks: the
// destination policy applied to endpoint URLs, the delivery HTTP client, the
// request headers of a delivery, the retry schedule and the window of
// attempts in flight per endpoint.
//
// It is a leaf: it knows nothing about storage, outboxes or endpoints. The
// dispatcher that owns those calls CheckURL when an endpoint is created,
// Headers and Client.Deliver for every attempt, NextAttemptAt after every
// failure and NextWindow after every outcome.
//
// # Destination safety
//
// A webhook URL is chosen by a customer, so every delivery is a request the
// customer makes from inside rtcd's network. Three layers keep it pointed at
// the public internet:
//
//  1. CheckURL, at endpoint creation and again by Deliver before every
//     attempt, refuses non-HTTPS URLs, IP literals in forbidden ranges
//     (including every numeric spelling of them) and internal host names.
//  2. The client's dialer resolves the host itself, immediately before
//     connecting, refuses the connection if any resolved address is
//     forbidden, and dials the checked address, never the name, so there is
//     no second resolution an attacker's DNS server could answer differently.
//  3. A net.Dialer Control hook re-checks the address of the socket actually
//     being connected, as a last line should anything above be bypassed.
//
// Redirects are not followed, environment proxies are never used, and the
// timeout and response capture limits bound what a slow or hostile receiver
// can cost.
//
// ClientConfig.AllowPrivate switches the address and name checks off (and
// allows plain HTTP) for local testing against receivers on loopback. It is
// off by default and logs a warning when on.
package webhookdelivery
