package clock

import (
	"sync"
	"time"
)

// Clock reports the current time.
type Clock interface {
	Now() time.Time
}

// Real is the production Clock backed by the system clock.
type Real struct{}

// Now returns the current system time in UTC. UTC keeps timestamps that end
// up in logs, headers and stores independent of the host's time zone.
func (Real) Now() time.Time {
	return time.Now().UTC()
}

// Fake is a Clock for tests whose time only changes when told to.
// It is safe for concurrent use, so it can be shared with goroutines under
// test while the test advances it.
type Fake struct {
	mu  sync.Mutex
	now time.Time
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

// Advance moves the clock forward by d. A negative d moves it backwards,
// which is occasionally useful to simulate a stepped system clock.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// Set moves the clock to t.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = t
}

// Compile-time checks that both implementations satisfy Clock.
var (
	_ Clock = Real{}
	_ Clock = (*Fake)(nil)
)
