package client

import (
	"math"
	"time"
)

// ReconnectPolicy bounds the automatic reconnect after a dropped media
// connection. Zero fields take the defaults of DefaultReconnectPolicy.
//
// Attempt n (from 1) waits
//
//	d = min(MaxDelay, InitialDelay × Multiplier^(n-1))
//
// reduced by a random part of up to Jitter × d (so it waits between
// (1-Jitter)×d and d), and at least the Retry-After of a rate-limited or
// unavailable answer. The SDK gives up (state failed, error
// connection_lost or the last attempt's error) after MaxAttempts attempts,
// or when the next attempt would start more than MaxElapsed after the drop,
// whichever comes first. Errors that no retry can fix (the room ended, the
// participant was removed, the participant token was refused or expired,
// no credit) end the reconnect at once.
type ReconnectPolicy struct {
	InitialDelay time.Duration // default 250 ms
	MaxDelay     time.Duration // default 10 s
	Multiplier   float64       // default 2
	Jitter       float64       // up to 1; default 0.5; negative: no jitter
	// MaxAttempts is the number of attempts (default 10). Negative: never
	// reconnect; a drop moves the session straight to failed (no
	// reconnecting state), with the drop's error (connection_lost, …).
	MaxAttempts int
	MaxElapsed  time.Duration // default 2 minutes
}

// DefaultReconnectPolicy is the policy used without WithReconnectPolicy:
// attempts after about 0.25, 0.5, 1, 2, 4, 8, 10, 10, 10 and 10 seconds
// (each minus up to half for jitter), at most 10 attempts within 2 minutes.
func DefaultReconnectPolicy() ReconnectPolicy {
	return ReconnectPolicy{
		InitialDelay: 250 * time.Millisecond,
		MaxDelay:     10 * time.Second,
		Multiplier:   2,
		Jitter:       0.5,
		MaxAttempts:  10,
		MaxElapsed:   2 * time.Minute,
	}
}

func (p ReconnectPolicy) withDefaults() ReconnectPolicy {
	d := DefaultReconnectPolicy()
	if p.InitialDelay <= 0 {
		p.InitialDelay = d.InitialDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = d.MaxDelay
	}
	if p.MaxDelay < p.InitialDelay {
		p.MaxDelay = p.InitialDelay
	}
	if p.Multiplier < 1 {
		p.Multiplier = d.Multiplier
	}
	switch {
	case p.Jitter == 0 || p.Jitter > 1:
		p.Jitter = d.Jitter
	case p.Jitter < 0:
		p.Jitter = 0 // no jitter
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.MaxElapsed <= 0 {
		p.MaxElapsed = d.MaxElapsed
	}
	return p
}

// delay is the wait before attempt n (n ≥ 1); rnd is uniform in [0, 1).
func (p ReconnectPolicy) delay(n int, rnd float64) time.Duration {
	base := float64(p.InitialDelay) * math.Pow(p.Multiplier, float64(n-1))
	if base > float64(p.MaxDelay) || math.IsInf(base, 0) || math.IsNaN(base) {
		base = float64(p.MaxDelay)
	}
	return time.Duration(base * (1 - p.Jitter*rnd))
}
