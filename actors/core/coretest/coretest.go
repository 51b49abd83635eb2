// Package coretest holds what the owners' state tests share: the instant
// their histories start, times as offsets from it, applying an event that
// must apply, and a pass through the journal encoding. It is imported by
// _test.go files only.
package coretest

import (
	"fmt"
	"testing"
	"time"

	"github.com/goccy/go-json"
	"rtcd/actors/core"
)

// T0 is the instant the tests' histories start.
var T0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// At is sec seconds after T0.
func At(sec int) time.Time { return T0.Add(time.Duration(sec) * time.Second) }

// Offset renders a time as seconds after T0, or "-" for the zero time.
func Offset(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return fmt.Sprintf("%+d", int(t.Sub(T0)/time.Second))
}

// MustApply applies one event and fails the test if it does not apply.
func MustApply[E any, S core.State[E]](t testing.TB, s S, e *E) {
	t.Helper()
	if err := s.Apply(e); err != nil {
		t.Fatal(err)
	}
}

// RoundTrip passes v through its journal or snapshot encoding.
func RoundTrip[T any](t testing.TB, v *T) *T {
	t.Helper()
	var out T
	if err := json.Unmarshal(core.Encode(v), &out); err != nil {
		t.Fatalf("decode %T: %v", v, err)
	}
	return &out
}
