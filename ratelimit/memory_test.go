package ratelimit

import (
	"hash/fnv"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rtcd/clock"
)

// noon is a minute-aligned reference time; tests offset from it.
var noon = time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC)

// at returns noon plus the given minutes, seconds and milliseconds.
func at(minutes, seconds, millis int) time.Time {
	return noon.Add(time.Duration(minutes)*time.Minute +
		time.Duration(seconds)*time.Second +
		time.Duration(millis)*time.Millisecond)
}

// keysInShard returns n distinct keys that all hash to the same shard.
func keysInShard(t *testing.T, shardIdx, n int) []string {
	t.Helper()
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if i > 1_000_000 {
			t.Fatalf("could not find %d keys for shard %d", n, shardIdx)
		}
		k := "key-" + strconv.Itoa(i)
		if shardIndex(k) == shardIdx {
			keys = append(keys, k)
		}
	}
	return keys
}

// totalKeys counts entries across all shards.
func totalKeys(m *Memory) int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		n += len(s.counters)
		s.mu.Unlock()
	}
	return n
}

func TestAllowCountsDownRemaining(t *testing.T) {
	m := NewMemory()
	now := at(0, 10, 0)
	for i := 1; i <= 3; i++ {
		d := m.Allow("k", 3, now)
		want := Decision{Allowed: true, Limit: 3, Remaining: 3 - i}
		if d != want {
			t.Fatalf("call %d: got %+v, want %+v", i, d, want)
		}
	}
	d := m.Allow("k", 3, now)
	want := Decision{Allowed: false, Limit: 3, Remaining: 0, RetryAfterSeconds: 50}
	if d != want {
		t.Fatalf("over limit: got %+v, want %+v", d, want)
	}
}

func TestAllowKeysAreIndependent(t *testing.T) {
	m := NewMemory()
	now := at(0, 0, 0)
	if d := m.Allow("a", 1, now); !d.Allowed {
		t.Fatalf("a first call denied: %+v", d)
	}
	if d := m.Allow("a", 1, now); d.Allowed {
		t.Fatalf("a second call allowed: %+v", d)
	}
	if d := m.Allow("b", 1, now); !d.Allowed {
		t.Fatalf("b first call denied after a was limited: %+v", d)
	}
}

func TestAllowExactCountUnderConcurrency(t *testing.T) {
	const (
		goroutines        = 100
		callsPerGoroutine = 10
		limit             = 250
	)
	m := NewMemory()
	now := at(0, 30, 0)

	var allowed, denials atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range callsPerGoroutine {
				d := m.Allow("shared", limit, now)
				if d.Allowed {
					allowed.Add(1)
					continue
				}
				denials.Add(1)
				if d.Remaining != 0 || d.RetryAfterSeconds != 30 {
					t.Errorf("bad denial %+v", d)
				}
			}
		}()
	}
	wg.Wait()

	if got := allowed.Load(); got != limit {
		t.Fatalf("allowed = %d, want exactly %d", got, limit)
	}
	if got := denials.Load(); got != goroutines*callsPerGoroutine-limit {
		t.Fatalf("denied = %d, want %d", got, goroutines*callsPerGoroutine-limit)
	}
}

func TestAllowWindowResetWithFakeClock(t *testing.T) {
	m := NewMemory()
	clk := clock.NewFake(at(0, 10, 0))

	for i := range 3 {
		if d := m.Allow("k", 3, clk.Now()); !d.Allowed {
			t.Fatalf("call %d denied: %+v", i, d)
		}
	}
	if d := m.Allow("k", 3, clk.Now()); d.Allowed {
		t.Fatalf("4th call in window allowed: %+v", d)
	}

	// Last instant of the same window: still limited.
	clk.Set(at(0, 59, 999))
	if d := m.Allow("k", 3, clk.Now()); d.Allowed || d.RetryAfterSeconds != 1 {
		t.Fatalf("at 12:00:59.999 got %+v, want denied with RetryAfterSeconds 1", d)
	}

	// First instant of the next window: full budget again, same entry reused.
	clk.Set(at(1, 0, 0))
	d := m.Allow("k", 3, clk.Now())
	want := Decision{Allowed: true, Limit: 3, Remaining: 2}
	if d != want {
		t.Fatalf("at 12:01:00 got %+v, want %+v", d, want)
	}
	if n := totalKeys(m); n != 1 {
		t.Fatalf("entries = %d, want 1 (old entry reused in place)", n)
	}
}

func TestAllowDeniedDoesNotConsumeBudget(t *testing.T) {
	m := NewMemory()
	now := at(0, 5, 0)
	for range 2 {
		m.Allow("k", 2, now)
	}
	for range 10 {
		if d := m.Allow("k", 2, now); d.Allowed {
			t.Fatalf("allowed over limit: %+v", d)
		}
	}
	s := &m.shards[shardIndex("k")]
	s.mu.Lock()
	count := s.counters["k"].count
	s.mu.Unlock()
	if count != 2 {
		t.Fatalf("count = %d, want 2 (denials must not be counted)", count)
	}

	// Raising the limit within the window admits exactly the difference,
	// which only holds if the denials above were not counted.
	if d := m.Allow("k", 3, now); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("after raising limit got %+v, want allowed with Remaining 0", d)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	tests := []struct {
		name string
		now  time.Time
		want int
	}{
		{"start of window", at(0, 0, 0), 60},
		{"12:00:45 exactly", at(0, 45, 0), 15},
		{"fraction rounds up", at(0, 44, 200), 16},
		{"last second", at(0, 59, 0), 1},
		{"last millisecond", at(0, 59, 999), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMemory()
			m.Allow("k", 1, tt.now) // fill the window
			d := m.Allow("k", 1, tt.now)
			if d.Allowed {
				t.Fatalf("second call allowed: %+v", d)
			}
			if d.RetryAfterSeconds != tt.want {
				t.Fatalf("RetryAfterSeconds = %d, want %d", d.RetryAfterSeconds, tt.want)
			}
		})
	}
}

func TestAllowZeroOrNegativeLimitAllowsNothing(t *testing.T) {
	m := NewMemory()
	now := at(0, 45, 0)
	for _, limit := range []int{0, -1, -100} {
		d := m.Allow("k", limit, now)
		want := Decision{Allowed: false, Limit: 0, Remaining: 0, RetryAfterSeconds: 15}
		if d != want {
			t.Fatalf("limit %d: got %+v, want %+v", limit, d, want)
		}
	}
	if n := totalKeys(m); n != 0 {
		t.Fatalf("entries = %d, want 0 (a non-positive limit stores nothing)", n)
	}
}

func TestAllowStaleNowCountsAgainstNewerWindow(t *testing.T) {
	m := NewMemory()
	if d := m.Allow("k", 1, at(1, 0, 0)); !d.Allowed {
		t.Fatalf("first call in 12:01 window denied: %+v", d)
	}
	// A caller whose now was read just before the boundary must not reset
	// the 12:01 counter and get a second request through.
	if d := m.Allow("k", 1, at(0, 59, 999)); d.Allowed {
		t.Fatalf("stale-now call allowed: %+v", d)
	}
	if d := m.Allow("k", 1, at(1, 0, 1)); d.Allowed {
		t.Fatalf("second call in 12:01 window allowed: %+v", d)
	}
}

func TestSweep(t *testing.T) {
	m := NewMemory()
	for i := range 10 {
		m.Allow("old-"+strconv.Itoa(i), 5, at(0, 30, 0))
	}
	for i := range 4 {
		m.Allow("new-"+strconv.Itoa(i), 5, at(1, 10, 0))
	}

	// Within the 12:00 window nothing has ended yet.
	if got := m.Sweep(at(0, 59, 999)); got != 0 {
		t.Fatalf("Sweep at 12:00:59.999 removed %d, want 0", got)
	}
	if got := m.Sweep(at(1, 20, 0)); got != 10 {
		t.Fatalf("Sweep at 12:01:20 removed %d, want 10", got)
	}
	if got := m.Sweep(at(1, 20, 0)); got != 0 {
		t.Fatalf("second Sweep removed %d, want 0", got)
	}
	if n := totalKeys(m); n != 4 {
		t.Fatalf("entries after Sweep = %d, want 4", n)
	}
	// Surviving entries keep their counts.
	if d := m.Allow("new-0", 5, at(1, 30, 0)); d.Remaining != 3 {
		t.Fatalf("new-0 after Sweep got %+v, want Remaining 3", d)
	}
	// Once their window ends they go too.
	if got := m.Sweep(at(2, 0, 0)); got != 4 {
		t.Fatalf("Sweep at 12:02:00 removed %d, want 4", got)
	}
}

func TestFullShardFailsClosed(t *testing.T) {
	const maxKeys = 3
	m := newMemory(maxKeys)
	keys := keysInShard(t, 7, maxKeys+2)
	full, extra, later := keys[:maxKeys], keys[maxKeys], keys[maxKeys+1]

	now := at(0, 45, 0)
	for _, k := range full {
		if d := m.Allow(k, 10, now); !d.Allowed {
			t.Fatalf("filling key %q denied: %+v", k, d)
		}
	}

	// A new key in the full shard is denied until the next window.
	d := m.Allow(extra, 10, now)
	want := Decision{Allowed: false, Limit: 10, Remaining: 0, RetryAfterSeconds: 15}
	if d != want {
		t.Fatalf("new key in full shard: got %+v, want %+v", d, want)
	}
	// Keys already tracked keep working.
	if d := m.Allow(full[0], 10, now); !d.Allowed || d.Remaining != 8 {
		t.Fatalf("existing key in full shard: got %+v, want allowed with Remaining 8", d)
	}
	// Other shards are unaffected.
	other := keysInShard(t, 8, 1)[0]
	if d := m.Allow(other, 10, now); !d.Allowed {
		t.Fatalf("key in another shard denied: %+v", d)
	}

	// In the next window the full shard sweeps its ended entries and admits
	// the new key.
	next := at(1, 0, 0)
	if d := m.Allow(extra, 10, next); !d.Allowed {
		t.Fatalf("new key after window ended denied: %+v", d)
	}
	s := &m.shards[7]
	s.mu.Lock()
	n := len(s.counters)
	s.mu.Unlock()
	if n != 1 {
		t.Fatalf("shard entries after sweep = %d, want 1", n)
	}

	// Refill the shard within the new window; a sweep now frees nothing,
	// so the next new key is denied again.
	for _, k := range full[:maxKeys-1] {
		if d := m.Allow(k, 10, next); !d.Allowed {
			t.Fatalf("refilling key %q denied: %+v", k, d)
		}
	}
	if d := m.Allow(later, 10, next); d.Allowed || d.RetryAfterSeconds != 60 {
		t.Fatalf("new key in refilled shard: got %+v, want denied with RetryAfterSeconds 60", d)
	}
}

func TestShardIndexMatchesFNV1a(t *testing.T) {
	for _, key := range []string{"", "a", "client-42", "203.0.113.7", "ключ"} {
		h := fnv.New32a()
		h.Write([]byte(key))
		want := int(h.Sum32() % shardCount)
		if got := shardIndex(key); got != want {
			t.Fatalf("shardIndex(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestAllowExistingKeyDoesNotAllocate(t *testing.T) {
	m := NewMemory()
	now := at(0, 0, 0)
	m.Allow("existing", 1_000_000, now)
	allocs := testing.AllocsPerRun(1000, func() {
		m.Allow("existing", 1_000_000, now)
	})
	if allocs != 0 {
		t.Fatalf("Allow on an existing key allocated %.1f times per call, want 0", allocs)
	}
}

func BenchmarkAllowParallel(b *testing.B) {
	const keyCount = 1024
	m := NewMemory()
	now := at(0, 0, 0)
	keys := make([]string, keyCount)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
		m.Allow(keys[i], 1<<62, now)
	}

	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			m.Allow(keys[i%keyCount], 1<<62, now)
			i++
		}
	})
}
