// Package ratelimit owns the request-rate counter store.
//
// The spec says "Request-rate limits use a shared counter store". Store is
// that contract; Memory is the in-process implementation. A Redis-backed
// Store may follow, so callers must depend on Store, not on Memory.
//
// Limits are counted in fixed one-minute windows aligned to the minute
// (window start = now.Truncate(time.Minute)). A request that is denied does
// not consume budget, and a limit of zero or less allows nothing: zero is
// never treated as "unlimited".
package ratelimit
