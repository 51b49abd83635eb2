// Package clock owns the service's notion of "now".
//
// Code in rtcd never calls time.Now directly; it takes a Clock instead, so
// tests can control time (window resets, expiry, retry-after values) without
// sleeping. Production code uses Real; tests use Fake. Now is the wall
// clock; Monotonic measures time that passed, which a step of the wall
// clock does not change (Fake.Step simulates one).
package clock
