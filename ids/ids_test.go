package ids

import (
	"strings"
	"sync"
	"testing"
)

func TestNewIsValidAndUnique(t *testing.T) {
	const draws = 100_000
	seen := make(map[string]struct{}, draws)
	for i := 0; i < draws; i++ {
		id := New(Room)
		if !Valid(id, Room) {
			t.Fatalf("New gave %q, which Valid refuses", id)
		}
		if _, dup := seen[id]; dup {
			t.Fatalf("duplicate id %q after %d draws", id, i)
		}
		seen[id] = struct{}{}
	}
}

// TestNewConcurrent draws from many goroutines at once: the generators are
// pooled, never shared (the race detector checks), and no two goroutines
// get the same stream.
func TestNewConcurrent(t *testing.T) {
	const goroutines, each = 16, 5_000
	var mu sync.Mutex
	seen := make(map[string]struct{}, goroutines*each)
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]string, each)
			for i := range local {
				local[i] = New(Participant)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range local {
				if _, dup := seen[id]; dup {
					t.Errorf("duplicate id %q across goroutines", id)
					return
				}
				seen[id] = struct{}{}
			}
		}()
	}
	wg.Wait()
}

func TestValidRefuses(t *testing.T) {
	good := New(Room)
	for _, bad := range []string{"", "room_", good + "a", good[:len(good)-1], "part_" + good[len(Room):], good[:len(good)-1] + "1", good[:len(good)-1] + "A"} {
		if Valid(bad, Room) {
			t.Errorf("Valid(%q) = true", bad)
		}
	}
}

func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = New(ConnectSession)
		}
	})
}

// A seeded run draws the same ids in the same order; restoring it brings
// back ids no seed predicts.
func TestSeedReplaysIDs(t *testing.T) {
	draw := func() []string {
		restore := Seed(42)
		defer restore()
		return []string{New(Room), New(Participant), New(Event)}
	}
	first, second := draw(), draw()
	for i := range first {
		if first[i] != second[i] {
			t.Fatalf("draw %d: %q then %q under the same seed", i, first[i], second[i])
		}
		if !Valid(first[i], first[i][:strings.IndexByte(first[i], '_')+1]) {
			t.Fatalf("seeded id %q is not valid", first[i])
		}
	}
	restore := Seed(43)
	other := New(Room)
	restore()
	if other == first[0] {
		t.Fatal("another seed gave the same id")
	}
	if New(Room) == first[0] {
		t.Fatal("after restore, New still draws from the seeded generator")
	}
}
