package webhookdelivery

// The window: how many attempts one endpoint may have in flight at once.
// The dispatcher keeps a sliding window per endpoint. It starts at one
// attempt, grows by one with every success up to the configured size, and
// halves with every failure down to one: a healthy receiver is sent up to
// the configured number of requests at once, a failing or dead one a
// single request at a time, so it holds one slot, not the whole window.
const (
	// DefaultWindowAttempts is the window when none is configured
	// (--webhook-window). 32 attempts in flight are 1,600 a second to a
	// receiver answering in 20 ms, above the 1,000 a second rtcd aims at.
	DefaultWindowAttempts = 32
	// MaxWindowAttempts bounds a configured window: the requests one
	// receiver can be sent at once. The client keeps as many idle
	// connections per host, so a full window reuses its connections.
	MaxWindowAttempts = 64
)

// NextWindow is the window after an attempt's outcome: one more after a
// success, up to limit; half after a failure, down to one. Consecutive
// failures therefore bring any window to one within a few attempts, and
// successes grow it back (doubling per round trip while the window is
// full, as each success adds one).
func NextWindow(window, limit int, success bool) int {
	if success {
		return max(min(window+1, limit), 1)
	}
	return max(window/2, 1)
}

// WindowLimit is the window a configured value allows: DefaultWindowAttempts
// for zero or less, at most MaxWindowAttempts.
func WindowLimit(configured int) int {
	if configured <= 0 {
		return DefaultWindowAttempts
	}
	return min(configured, MaxWindowAttempts)
}
