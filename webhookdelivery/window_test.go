package webhookdelivery

import (
	"slices"
	"testing"
)

// A success grows the window by one up to its limit; a failure halves it,
// down to one, so consecutive failures bring a full window to one.
func TestNextWindow(t *testing.T) {
	w := 1
	for range 40 {
		w = NextWindow(w, 32, true)
	}
	if w != 32 {
		t.Fatalf("after 40 successes the window is %d, want the limit 32", w)
	}
	var shrinking []int
	for range 6 {
		w = NextWindow(w, 32, false)
		shrinking = append(shrinking, w)
	}
	if want := []int{16, 8, 4, 2, 1, 1}; !slices.Equal(shrinking, want) {
		t.Fatalf("consecutive failures: %v, want %v", shrinking, want)
	}
	if w = NextWindow(w, 32, true); w != 2 {
		t.Fatalf("a success after the failures: %d, want 2", w)
	}
	if w = NextWindow(40, 32, true); w != 32 {
		t.Fatalf("a window above a lowered limit: %d after a success, want 32", w)
	}
}

func TestWindowLimit(t *testing.T) {
	for configured, want := range map[int]int{-1: DefaultWindowAttempts, 0: DefaultWindowAttempts, 1: 1, 8: 8, MaxWindowAttempts: MaxWindowAttempts, 1000: MaxWindowAttempts} {
		if got := WindowLimit(configured); got != want {
			t.Errorf("WindowLimit(%d) = %d, want %d", configured, got, want)
		}
	}
}
