package client

import "time"

// Clock is the time source of a Session: the connect deadline, reconnect
// backoff, heartbeats and media token expiry use it. The default is the
// system clock; tests inject a fake one (WithClock) so a 15-second deadline
// or a backoff runs without waiting.
//
// Socket read deadlines are the one exception: the network poller only
// knows real time, so the SDK's liveness check on an open socket (no frame
// for the media node's heartbeat timeout) always runs on the system clock.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that sends on C once d has passed.
	NewTimer(d time.Duration) Timer
}

// Timer is a Clock's one-shot timer.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }

// SystemClock returns the real clock, the default of WithClock.
func SystemClock() Clock { return systemClock{} }
