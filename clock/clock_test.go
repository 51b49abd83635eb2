package clock

import (
	"strings"
	"sync"
	"testing"
	"time"
)

var testStart = time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC)

func TestRealIsUTC(t *testing.T) {
	if loc := (Real{}).Now().Location(); loc != time.UTC {
		t.Fatalf("Real.Now location = %v, want UTC", loc)
	}
}

func TestFakeNowReturnsStartTime(t *testing.T) {
	f := NewFake(testStart)
	if got := f.Now(); !got.Equal(testStart) {
		t.Fatalf("Now = %v, want %v", got, testStart)
	}
	// Reading must not move time.
	if got := f.Now(); !got.Equal(testStart) {
		t.Fatalf("second Now = %v, want %v", got, testStart)
	}
}

func TestFakeAdvance(t *testing.T) {
	f := NewFake(testStart)
	f.Advance(45 * time.Second)
	if want := testStart.Add(45 * time.Second); !f.Now().Equal(want) {
		t.Fatalf("after Advance(45s) Now = %v, want %v", f.Now(), want)
	}
	f.Advance(-5 * time.Second)
	if want := testStart.Add(40 * time.Second); !f.Now().Equal(want) {
		t.Fatalf("after Advance(-5s) Now = %v, want %v", f.Now(), want)
	}
}

func TestFakeSet(t *testing.T) {
	f := NewFake(testStart)
	later := testStart.Add(24 * time.Hour)
	f.Set(later)
	if got := f.Now(); !got.Equal(later) {
		t.Fatalf("after Set Now = %v, want %v", got, later)
	}
}

func TestFakeConcurrentAdvance(t *testing.T) {
	const goroutines = 100
	f := NewFake(testStart)

	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.Advance(time.Second)
			_ = f.Now()
		}()
	}
	wg.Wait()

	if want := testStart.Add(goroutines * time.Second); !f.Now().Equal(want) {
		t.Fatalf("after %d concurrent Advance(1s) Now = %v, want %v", goroutines, f.Now(), want)
	}
}

func TestFakeMonotonicMovesOnlyWithTimePassing(t *testing.T) {
	f := NewFake(testStart)
	if got := f.Monotonic(); got != 0 {
		t.Fatalf("new Fake Monotonic = %v, want 0", got)
	}
	f.Advance(10 * time.Second)
	if got := f.Monotonic(); got != 10*time.Second {
		t.Fatalf("after Advance(10s) Monotonic = %v, want 10s", got)
	}
	f.Step(time.Hour) // a wall-clock step forward: no time passed
	if got := f.Monotonic(); got != 10*time.Second {
		t.Fatalf("after Step(1h) Monotonic = %v, want 10s", got)
	}
	if want := testStart.Add(10*time.Second + time.Hour); !f.Now().Equal(want) {
		t.Fatalf("after Step(1h) Now = %v, want %v", f.Now(), want)
	}
	f.Advance(-time.Minute) // a step back never runs Monotonic backwards
	f.Step(-time.Hour)
	if got := f.Monotonic(); got != 10*time.Second {
		t.Fatalf("after stepping back Monotonic = %v, want 10s", got)
	}
	f.Set(f.Now().Add(5 * time.Second))
	if got := f.Monotonic(); got != 15*time.Second {
		t.Fatalf("after Set 5s ahead Monotonic = %v, want 15s", got)
	}
}

// TestRealMonotonicIgnoresWallSteps: Real.Monotonic is measured from an
// origin that carries Go's monotonic clock reading (time.Time.String shows
// it as "m=..."), so wall-clock steps do not move it. An origin without
// one (taken through UTC, like Real.Now) would make every reading follow
// the wall clock.
func TestRealMonotonicIgnoresWallSteps(t *testing.T) {
	if !strings.Contains(realOrigin.String(), " m=") {
		t.Fatalf("realOrigin %v has no monotonic clock reading", realOrigin)
	}
	if strings.Contains(Real{}.Now().String(), " m=") {
		t.Fatal("Real.Now carries a monotonic reading; update the comments that say it does not")
	}
	if a, b := (Real{}).Monotonic(), (Real{}).Monotonic(); b < a {
		t.Fatalf("Monotonic went from %v back to %v", a, b)
	}
}
