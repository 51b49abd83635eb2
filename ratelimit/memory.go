package ratelimit

import (
	"math"
	"sync"
	"time"
)

const (
	// shardCount is the number of independently locked shards. Spreading
	// keys over many locks keeps unrelated keys from contending with each
	// other under parallel load.
	shardCount = 64

	// maxKeysPerShard bounds the number of live keys in one shard
	// (64 shards x 65536 keys = about 4M keys in total). Without a bound,
	// a client that sends every request with a fresh key (a different API
	// key, IP or path) could grow the maps until the process runs out of
	// memory.
	maxKeysPerShard = 65536

	// cacheLineBytes pads each shard so two shards' mutexes do not share a
	// CPU cache line; otherwise locking one shard would slow its neighbour.
	cacheLineBytes = 64

	// FNV-1a 32-bit parameters. The hash is written out by hand because
	// hash/fnv works on []byte through an interface, and converting the key
	// would allocate on every call.
	fnvOffset32 uint32 = 2166136261
	fnvPrime32  uint32 = 16777619
)

// counter is the request count for one key in one window.
type counter struct {
	// windowStartUnix is the start of the window being counted, in Unix
	// seconds.
	windowStartUnix int64
	// count is the number of allowed requests in that window.
	count int
}

// shard is one independently locked part of the key space.
type shard struct {
	mu sync.Mutex
	// counters maps a key to its counter. Counters are pointers so an entry
	// from an old window can be reset in place without writing the map.
	counters map[string]*counter
	// sweptWindowUnix is the latest window (Unix seconds) this shard was
	// swept for. After a sweep for window W no entry older than W remains,
	// and no newer entry can expire until W ends, so sweeping again within W
	// is wasted work. Remembering it keeps a full shard from being rescanned
	// (65536 entries under the lock) on every new key during a key-spraying
	// attack.
	sweptWindowUnix int64

	_ [cacheLineBytes]byte
}

// Memory is the in-process Store. It is safe for concurrent use.
// The zero value is not usable; create one with NewMemory.
type Memory struct {
	shards          [shardCount]shard
	maxKeysPerShard int
}

// Compile-time check that Memory satisfies Store.
var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-process Store.
func NewMemory() *Memory {
	return newMemory(maxKeysPerShard)
}

// newMemory returns a Memory with a custom per-shard key bound, so tests can
// reach the full-shard path without inserting 65536 keys.
func newMemory(maxKeys int) *Memory {
	m := &Memory{maxKeysPerShard: maxKeys}
	for i := range m.shards {
		m.shards[i].counters = make(map[string]*counter)
		// No sweep has happened yet; the minimum value never matches a real
		// window, so the first full-shard event always sweeps.
		m.shards[i].sweptWindowUnix = math.MinInt64
	}
	return m
}

// Allow implements Store.
//
// When the key is new and its shard already holds maxKeysPerShard keys, the
// shard is swept of entries from ended windows; if it is still full the
// request is denied until the next window. This fails closed on purpose:
// admitting the request without counting it would let a key-spraying client
// bypass limits, and counting it would need unbounded memory. Existing keys
// are unaffected, so legitimate clients that are already tracked keep their
// normal budget.
func (m *Memory) Allow(key string, limitPerMinute int, now time.Time) Decision {
	if limitPerMinute <= 0 {
		// Zero means "nothing is allowed", never "unlimited". Nothing is
		// stored, so a misconfigured limit cannot fill the shards.
		return denied(limitPerMinute, now)
	}
	window := windowStart(now).Unix()

	s := &m.shards[shardIndex(key)]
	s.mu.Lock()
	defer s.mu.Unlock()

	c, ok := s.counters[key]
	if !ok {
		if len(s.counters) >= m.maxKeysPerShard && s.sweptWindowUnix < window {
			s.sweepLocked(window)
		}
		if len(s.counters) >= m.maxKeysPerShard {
			return denied(limitPerMinute, now)
		}
		c = &counter{windowStartUnix: window}
		s.counters[key] = c
	} else if c.windowStartUnix < window {
		// Reuse the entry for the new window instead of reallocating it.
		c.windowStartUnix = window
		c.count = 0
	}
	// If c.windowStartUnix > window, the caller's now is slightly behind a
	// caller that already opened the next window (clocks read just before a
	// minute boundary). The request is counted against the newer window:
	// moving the counter back would hand out that window's budget twice.

	if c.count >= limitPerMinute {
		// Denied requests are not counted: count means "requests admitted
		// this window", so Remaining stays truthful and a limit raised
		// mid-window admits exactly the difference.
		return denied(limitPerMinute, now)
	}
	c.count++
	return Decision{
		Allowed:           true,
		Limit:             limitPerMinute,
		Remaining:         limitPerMinute - c.count,
		RetryAfterSeconds: 0,
	}
}

// AllowPair is Allow of first, then of second if first allowed.
func (m *Memory) AllowPair(first, second Check, now time.Time) (Decision, Decision) {
	d := m.Allow(first.Key, first.LimitPerMinute, now)
	if !d.Allowed {
		return d, Decision{}
	}
	return d, m.Allow(second.Key, second.LimitPerMinute, now)
}

// Sweep deletes every entry whose window has ended at now and returns how
// many entries it removed. Callers run it periodically so memory follows
// the number of keys active in the current minute rather than the number
// ever seen.
func (m *Memory) Sweep(now time.Time) int {
	window := windowStart(now).Unix()
	removed := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		removed += s.sweepLocked(window)
		s.mu.Unlock()
	}
	return removed
}

// sweepLocked deletes entries from windows before window and returns how
// many it removed. s.mu must be held.
func (s *shard) sweepLocked(window int64) int {
	removed := 0
	for key, c := range s.counters {
		if c.windowStartUnix < window {
			delete(s.counters, key)
			removed++
		}
	}
	// Never move the marker backwards: a caller with a slightly stale now
	// must not make the next current-window caller rescan the shard.
	if window > s.sweptWindowUnix {
		s.sweptWindowUnix = window
	}
	return removed
}

// shardIndex picks the shard for key using 32-bit FNV-1a.
func shardIndex(key string) int {
	h := fnvOffset32
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= fnvPrime32
	}
	return int(h % shardCount)
}
