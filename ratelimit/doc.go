// Package ratelimit owns the request-rate counter store.
//
// The spec says "Request-rate limits use a shared counter store". Store is
// that contract; Memory is the in-process implementation (one node), Redis
// the one every node of a cluster shares (docs/cluster.md), so callers
// depend on Store.
//
// Memory counts fixed one-minute windows aligned to the minute (window
// start = now.Truncate(time.Minute)); Redis runs GCRA with a burst of the
// limit. In both, a request that is denied does not consume budget, and a
// limit of zero or less allows nothing: zero is never treated as
// "unlimited".
package ratelimit
