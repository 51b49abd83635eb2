package testtools

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// blockedPollInterval is how often AwaitChanSend reads the goroutines.
const blockedPollInterval = 2 * time.Millisecond

// AwaitChanSend waits until some goroutine is parked sending on a channel
// directly in the function at (its first frame outside the runtime), called
// at any depth from each of callers, and fails the test after timeout.
// Function names are as in a stack trace: "rtcd/persistence.(*Store).Commit".
// It proves that a call blocks, which "has not returned yet" cannot.
func AwaitChanSend(t testing.TB, timeout time.Duration, at string, callers ...string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !chanSendIn(at, callers) {
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine blocked sending on a channel in %s (called from %v) within %s", at, callers, timeout)
		}
		time.Sleep(blockedPollInterval)
	}
}

func chanSendIn(at string, callers []string) bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, frames, _ := strings.Cut(g, "\n")
		if !strings.Contains(header, "[chan send") {
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
		first := ""
		for _, f := range funcs {
			if !strings.HasPrefix(f, "runtime.") {
				first = f
				break
			}
		}
		if first != at {
			continue
		}
		all := true
		for _, c := range callers {
			found := false
			for _, f := range funcs {
				found = found || f == c
			}
			all = all && found
		}
		if all {
			return true
		}
	}
	return false
}
