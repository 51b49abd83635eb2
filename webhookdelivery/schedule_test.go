package webhookdelivery

import (
	"testing"
	"time"
)

func TestNextAttemptAtDefaultSchedule(t *testing.T) {
	start := time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC)
	wantGaps := []time.Duration{
		10 * time.Second, time.Minute, 5 * time.Minute, 30 * time.Minute,
		2 * time.Hour, 6 * time.Hour, 24 * time.Hour,
	}
	last := start
	for i, gap := range wantGaps {
		attempt := i + 1
		next, ok := NextAttemptAt(attempt, last, DefaultScheduleSeconds)
		if !ok || !next.Equal(last.Add(gap)) {
			t.Fatalf("after attempt %d at %v: NextAttemptAt = %v, %v; want %v, true", attempt, last, next, ok, last.Add(gap))
		}
		last = next
	}
	if next, ok := NextAttemptAt(len(wantGaps)+1, last, DefaultScheduleSeconds); ok {
		t.Fatalf("after the last retry: NextAttemptAt = %v, true; want dead", next)
	}
	if total := last.Sub(start); total != 117370*time.Second {
		t.Fatalf("whole window = %v, want 117370 s", total)
	}
}

func TestNextAttemptAtEdges(t *testing.T) {
	last := time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC)
	if next, ok := NextAttemptAt(0, last, []int{5}); !ok || !next.Equal(last.Add(5*time.Second)) {
		t.Fatalf("attempt 0 = %v, %v; want treated as attempt 1", next, ok)
	}
	if _, ok := NextAttemptAt(1, last, nil); ok {
		t.Fatal("empty schedule: want dead after the first attempt")
	}
	if next, ok := NextAttemptAt(1, last, []int{-5}); !ok || !next.Equal(last) {
		t.Fatalf("negative delay = %v, %v; want last, true", next, ok)
	}
}

func TestValidateSchedule(t *testing.T) {
	for _, ok := range [][]int{nil, {}, DefaultScheduleSeconds, {1}, {MaxRetryDelaySeconds}} {
		if err := ValidateSchedule(ok); err != nil {
			t.Errorf("ValidateSchedule(%v) = %v, want nil", ok, err)
		}
	}
	for _, bad := range [][]int{{0}, {-1}, {10, MaxRetryDelaySeconds + 1}, make([]int, MaxScheduleRetries+1)} {
		if err := ValidateSchedule(bad); err == nil {
			t.Errorf("ValidateSchedule(%v) = nil, want an error", bad)
		}
	}
}
