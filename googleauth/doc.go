// Package googleauth owns dashboard sign-in with Google (OpenID Connect,
// authorization-code flow with PKCE): it builds the URL that sends a browser
// to the provider, and turns the code the provider sends back into a
// verified Identity. It does not own sessions, cookies or the mapping from
// an Identity to an account; its callers do.
//
// The server keeps no per-login storage. The caller picks a random state
// (see ValidState), binds it to the browser (for example in a short-lived
// cookie) and passes it to AuthURL. The OIDC nonce and the PKCE code
// verifier are derived from that state with HMAC-SHA256 under
// Config.StateKey, so Exchange can re-derive them from the state alone. On
// the callback the caller passes Exchange the state bound to the browser,
// not only the one in the query string: a code obtained for any other state
// then fails PKCE at the provider and the nonce check here, which stops
// login CSRF and code injection without a server-side table.
//
// Provider discovery happens on first use and is cached only once it
// succeeds, so a provider that is down when the server starts does not stop
// the server; sign-in simply reports ErrUnavailable until it is back.
//
// Every error is one of ErrInvalidState, ErrRejected or ErrUnavailable
// (test with errors.Is). Error messages never contain tokens, codes or
// secrets.
package googleauth
