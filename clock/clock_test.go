package clock

import (
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
