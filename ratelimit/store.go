package ratelimit

import "time"

// windowLength is the length of one counting window. Limits are expressed
// per minute, so windows are one minute long and aligned to the minute.
const windowLength = time.Minute

// Decision is the outcome of one Allow call.
type Decision struct {
	// Allowed reports whether the request fits in the current window.
	Allowed bool
	// Limit is the per-minute limit the request was checked against.
	// A negative configured limit is reported as 0.
	Limit int
	// Remaining is how many more requests the current window admits after
	// this one. It is 0 when the request is not allowed.
	Remaining int
	// RetryAfterSeconds is, when the request is not allowed, the number of
	// whole seconds (rounded up, at least 1) until a request would be
	// admitted: the next window (Memory), or the next freed request
	// (Redis). It is 0 when the request is allowed.
	RetryAfterSeconds int
}

// Store counts requests per key against a per-minute limit.
//
// Allow records one request for key at time now and reports whether it is
// within limitPerMinute (how a minute is counted is the implementation's:
// see Memory and Redis). A denied request does not consume budget.
// limitPerMinute <= 0 allows nothing.
//
// Implementations must be safe for concurrent use.
type Store interface {
	Allow(key string, limitPerMinute int, now time.Time) Decision
	// AllowPair decides first and, only if first allows, second: a request
	// that first denies never spends second's budget (second's Decision is
	// then the zero value). It equals two Allow calls in that order; the
	// Redis store makes them one round trip (whose answer, if lost after
	// Redis counted it, leaves both counted there and decided again
	// locally, as a lost single decision would).
	AllowPair(first, second Check, now time.Time) (Decision, Decision)
}

// Check is one limit of an AllowPair.
type Check struct {
	Key            string
	LimitPerMinute int
}

// windowStart returns the start of the window containing now.
func windowStart(now time.Time) time.Time {
	return now.Truncate(windowLength)
}

// secondsToNextWindow returns the whole seconds from now until the window
// after the one containing now starts. It rounds up because a client that
// retries after a rounded-down value would arrive too early and be denied
// again; it is at least 1 because Retry-After: 0 invites a tight retry loop.
func secondsToNextWindow(now time.Time) int {
	return wholeSecondsUp(windowStart(now).Add(windowLength).Sub(now))
}

// wholeSecondsUp rounds a wait up to whole seconds, at least 1.
func wholeSecondsUp(wait time.Duration) int {
	seconds := int(wait / time.Second)
	if wait%time.Second != 0 {
		seconds++
	}
	if seconds < 1 {
		seconds = 1
	}
	return seconds
}

// denied builds the Decision for a request that is not allowed.
func denied(limitPerMinute int, now time.Time) Decision {
	if limitPerMinute < 0 {
		limitPerMinute = 0
	}
	return Decision{
		Allowed:           false,
		Limit:             limitPerMinute,
		Remaining:         0,
		RetryAfterSeconds: secondsToNextWindow(now),
	}
}
