package clock

import (
	"sync"
	"time"
)

// Clock reports the current time.
type Clock interface {
	// Now is the wall-clock time: for timestamps, expiry, UTC days.
	Now() time.Time
	// Monotonic is the time elapsed since a fixed origin on a clock that
	// only moves as time passes: a step of the wall clock (NTP, an
	// operator, a virtual machine resumed) moves Now but not Monotonic.
	// Timeouts that must not fire on such a step measure silence with it.
	// Only the difference of two readings means anything.
	Monotonic() time.Duration
}

// Real is the production Clock backed by the system clock.
type Real struct{}

// Now returns the current system time in UTC. UTC keeps timestamps that end
// up in logs, headers and stores independent of the host's time zone.
// Converting to UTC drops Go's monotonic clock reading, so the difference
// of two Now readings follows every step of the wall clock: use Monotonic
// to measure time that passed.
func (Real) Now() time.Time {
	return time.Now().UTC()
}

// realOrigin keeps Go's monotonic clock reading (time.Now before any
// conversion), so time.Since(realOrigin) ignores wall-clock steps.
var realOrigin = time.Now()

// Monotonic returns the time since the process started measuring, on the
// operating system's monotonic clock.
func (Real) Monotonic() time.Duration {
	return time.Since(realOrigin)
}

// Fake is a Clock for tests whose time only changes when told to.
// It is safe for concurrent use, so it can be shared with goroutines under
// test while the test advances it.
type Fake struct {
	mu        sync.Mutex
	now       time.Time
	monotonic time.Duration
}

// NewFake returns a Fake clock reading t.
func NewFake(t time.Time) *Fake {
	return &Fake{now: t}
}

// Now returns the fake clock's current time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Monotonic returns how much time the fake clock has been advanced by.
func (f *Fake) Monotonic() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.monotonic
}

// Advance lets d pass: Now and Monotonic both move forward by d. A negative
// d moves Now backwards, as a stepped system clock would, and leaves
// Monotonic, which never runs backwards.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	if d > 0 {
		f.monotonic += d
	}
}

// Set moves the clock to t, as Advance(t - Now()) does.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d := t.Sub(f.now); d > 0 {
		f.monotonic += d
	}
	f.now = t
}

// Step jumps the wall clock by d without any time passing: Now moves by
// d, Monotonic does not (an NTP correction, an operator setting the date).
func (f *Fake) Step(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// Compile-time checks that both implementations satisfy Clock.
var (
	_ Clock = Real{}
	_ Clock = (*Fake)(nil)
)
