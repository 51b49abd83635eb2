package testtools

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// blockedPollInterval is how often the waits below read the goroutines.
const blockedPollInterval = 2 * time.Millisecond

// AwaitChanSend waits until some goroutine is parked sending on a channel
// directly in the function at (its first frame outside the runtime), called
// at any depth from each of callers, and fails the test after timeout.
// Function names are as in a stack trace: "rtcd/persistence.(*Store).Commit".
// It proves that a call blocks, which "has not returned yet" cannot.
func AwaitChanSend(t testing.TB, timeout time.Duration, at string, callers ...string) {
	t.Helper()
	AwaitParked(t, timeout, 1, "chan send", at, callers...)
}

// AwaitParked waits until at least n goroutines are parked in state (as
// Parked counts them), and fails the test after timeout.
func AwaitParked(t testing.TB, timeout time.Duration, n int, state, at string, callers ...string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for Parked(state, at, callers...) < n {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d goroutines parked in %s in %s (called from %v) within %s", n, state, at, callers, timeout)
		}
		time.Sleep(blockedPollInterval)
	}
}

// Parked counts the goroutines parked in the given state ("chan send",
// "chan receive", "select", as a stack trace names it) directly in the
// function at, called at any depth from each of callers.
func Parked(state, at string, callers ...string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, frames, _ := strings.Cut(g, "\n")
		if !strings.Contains(header, "["+state+"]") && !strings.Contains(header, "["+state+",") {
			continue
		}
		var funcs []string
		for _, line := range strings.Split(frames, "\n") {
			if line == "" || strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "created by ") {
				continue
			}
			if i := strings.LastIndexByte(line, '('); i > 0 {
				line = line[:i]
			}
			funcs = append(funcs, line)
		}
		if firstOutsideRuntime(funcs) == at && containsAll(funcs, callers) {
			count++
		}
	}
	return count
}

func firstOutsideRuntime(funcs []string) string {
	for _, f := range funcs {
		if !strings.HasPrefix(f, "runtime.") {
			return f
		}
	}
	return ""
}

func containsAll(funcs, want []string) bool {
	for _, w := range want {
		found := false
		for _, f := range funcs {
			found = found || f == w
		}
		if !found {
			return false
		}
	}
	return true
}
