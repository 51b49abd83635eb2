package ratelimit

import (
	"context"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"rtcd/internal/testtools"
)

// redisEvents records what a Redis store reports.
type redisEvents struct {
	localDecisions atomic.Int64
	mu             sync.Mutex
	reachable      []bool
}

func (e *redisEvents) config(url, prefix string) RedisConfig {
	return RedisConfig{URL: url, KeyPrefix: prefix,
		OnLocalDecision: func() { e.localDecisions.Add(1) },
		OnReachable: func(up bool) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.reachable = append(e.reachable, up)
		}}
}

func (e *redisEvents) transitions() []bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]bool(nil), e.reachable...)
}

func newRedisStore(t *testing.T, cfg RedisConfig) *Redis {
	t.Helper()
	s, err := NewRedis(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Two stores on one Redis (two nodes) draw on one budget per key.
func TestRedisSharesTheBudgetBetweenNodes(t *testing.T) {
	srv := testtools.StartRedis(t)
	var events redisEvents
	a := newRedisStore(t, events.config(srv.URL, "t1:"))
	b := newRedisStore(t, events.config(srv.URL, "t1:"))
	now := at(0, 0, 0)
	const limit = 10
	for i := 0; i < limit; i++ {
		node := a
		if i%2 == 1 {
			node = b
		}
		d := node.Allow("k", limit, now)
		if !d.Allowed || d.Limit != limit || d.Remaining != limit-1-i {
			t.Fatalf("request %d: %+v, want allowed with %d remaining", i, d, limit-1-i)
		}
	}
	for _, node := range []*Redis{a, b} {
		d := node.Allow("k", limit, now)
		// GCRA at 10 per minute frees one request every 6 seconds.
		if d.Allowed || d.Remaining != 0 || d.Limit != limit || d.RetryAfterSeconds < 1 || d.RetryAfterSeconds > 6 {
			t.Fatalf("request past the limit: %+v, want denied, retry in 1..6 s", d)
		}
	}
	// Another key has its own budget.
	if d := b.Allow("other", limit, now); !d.Allowed {
		t.Fatalf("another key: %+v", d)
	}
	if n := events.localDecisions.Load(); n != 0 {
		t.Fatalf("%d decisions were local with Redis up", n)
	}

	// The counters expire on their own (no sweep in Redis).
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()
	keys, err := raw.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 {
		t.Fatalf("keys in Redis: %v, want the two counters", keys)
	}
	for _, k := range keys {
		if !strings.Contains(k, "t1:") {
			t.Fatalf("key %q lacks the prefix", k)
		}
		ttl, err := raw.TTL(context.Background(), k).Result()
		if err != nil || ttl <= 0 || ttl > time.Minute {
			t.Fatalf("TTL of %q: %v, %v, want within a minute", k, ttl, err)
		}
	}
}

// Deployments sharing one Redis under different prefixes do not share
// budgets.
func TestRedisKeyPrefixSeparatesDeployments(t *testing.T) {
	srv := testtools.StartRedis(t)
	var events redisEvents
	a := newRedisStore(t, events.config(srv.URL, "east:"))
	b := newRedisStore(t, events.config(srv.URL, "west:"))
	now := at(0, 0, 0)
	if d := a.Allow("k", 1, now); !d.Allowed {
		t.Fatalf("east: %+v", d)
	}
	if d := b.Allow("k", 1, now); !d.Allowed {
		t.Fatalf("west, same key: %+v, want its own budget", d)
	}
	if d := a.Allow("k", 1, now); d.Allowed {
		t.Fatalf("east again: %+v, want denied", d)
	}
}

// A limit of zero or less allows nothing, without asking Redis.
func TestRedisZeroLimitAllowsNothing(t *testing.T) {
	var events redisEvents
	// Nothing listens on port 1: asking would be a local decision.
	s := newRedisStore(t, events.config("redis://127.0.0.1:1/0", ""))
	for _, limit := range []int{0, -3} {
		d := s.Allow("k", limit, at(0, 30, 0))
		if d.Allowed || d.Limit != 0 || d.RetryAfterSeconds != 30 {
			t.Fatalf("limit %d: %+v", limit, d)
		}
	}
	if n := events.localDecisions.Load(); n != 0 {
		t.Fatalf("%d local decisions, want none", n)
	}
}

// While Redis does not answer, requests are decided by the node's own
// counters (still bounded by the limit), counted, and the outage is
// reported once; Redis is asked again after redisDownSeconds and, once it
// answers, decides again.
func TestRedisUnreachableFallsBackToLocalCounters(t *testing.T) {
	srv := testtools.StartRedis(t)
	var events redisEvents
	s := newRedisStore(t, events.config(srv.URL, "t2:"))
	now := at(0, 0, 0)
	if d := s.Allow("k", 3, now); !d.Allowed {
		t.Fatalf("with Redis up: %+v", d)
	}

	srv.Pause(t)
	for i := 0; i < 3; i++ {
		if d := s.Allow("k", 3, now); !d.Allowed || d.Remaining != 2-i {
			t.Fatalf("local request %d: %+v", i, d)
		}
	}
	if d := s.Allow("k", 3, now); d.Allowed || d.RetryAfterSeconds != 60 {
		t.Fatalf("past the local limit: %+v, want denied until the next minute", d)
	}
	if n := events.localDecisions.Load(); n != 4 {
		t.Fatalf("%d local decisions, want 4", n)
	}
	if got := events.transitions(); len(got) != 1 || got[0] {
		t.Fatalf("reachability reports %v, want [false]", got)
	}

	// Back up, but within redisDownSeconds of the failure: still local.
	srv.Resume(t)
	if d := s.Allow("j", 3, now.Add(redisDownSeconds*time.Second-time.Millisecond)); !d.Allowed {
		t.Fatalf("%+v", d)
	}
	if n := events.localDecisions.Load(); n != 5 {
		t.Fatalf("%d local decisions, want 5: Redis is not asked again before %d s", n, redisDownSeconds)
	}
	// After it, Redis decides again: a second node shares the budget of a
	// fresh key. ("k" is not used: the request that timed out may still be
	// counted in Redis once it resumed.)
	later := now.Add(redisDownSeconds * time.Second)
	other := newRedisStore(t, RedisConfig{URL: srv.URL, KeyPrefix: "t2:"})
	for i, node := range []*Redis{s, other} {
		if d := node.Allow("fresh", 2, later); !d.Allowed {
			t.Fatalf("Redis back, request %d: %+v", i, d)
		}
	}
	if d := s.Allow("fresh", 2, later); d.Allowed {
		t.Fatalf("Redis back, past the shared limit: %+v, want denied", d)
	}
	if n := events.localDecisions.Load(); n != 5 {
		t.Fatalf("%d local decisions, want still 5 once Redis answers", n)
	}
	if got := events.transitions(); len(got) != 2 || !got[1] {
		t.Fatalf("reachability reports %v, want [false true]", got)
	}
}

// A denial is answered from memory until the wait Redis gave has passed:
// with Redis paused, a denied key is still denied without asking it (no
// local decision), with a Retry-After that counts down; past the wait,
// Redis is asked again.
func TestRedisDenialsAreAnsweredFromMemory(t *testing.T) {
	srv := testtools.StartRedis(t)
	var events redisEvents
	s := newRedisStore(t, events.config(srv.URL, "t3:"))
	now := at(0, 0, 0)
	for i := 0; i < 2; i++ {
		if d := s.Allow("k", 2, now); !d.Allowed {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	first := s.Allow("k", 2, now)
	// GCRA at 2 per minute frees one request every 30 seconds.
	if first.Allowed || first.RetryAfterSeconds < 29 || first.RetryAfterSeconds > 30 {
		t.Fatalf("past the limit: %+v, want denied for 30 s", first)
	}
	srv.Pause(t)
	defer srv.Resume(t)
	later := now.Add(10 * time.Second)
	if d := s.Allow("k", 2, later); d.Allowed || d.RetryAfterSeconds != first.RetryAfterSeconds-10 || d.Limit != 2 {
		t.Fatalf("10 s later: %+v, want denied for %d s", d, first.RetryAfterSeconds-10)
	}
	if n := events.localDecisions.Load(); n != 0 {
		t.Fatalf("%d local decisions: the cached denial asked Redis", n)
	}
	// Past the wait, Redis is asked (and, paused, decides nothing).
	if d := s.Allow("k", 2, now.Add(time.Duration(first.RetryAfterSeconds)*time.Second)); !d.Allowed {
		t.Fatalf("past the wait: %+v", d)
	}
	if n := events.localDecisions.Load(); n != 1 {
		t.Fatalf("%d local decisions, want 1 (Redis asked and silent)", n)
	}
}

// The denial cache is bounded per shard: when a shard is full of denials
// that have not ended, a new one is not cached; ended ones make room.
func TestDenialCacheIsBounded(t *testing.T) {
	var c denialCache
	now := at(0, 0, 0)
	keys := keysInShard(t, 7, maxDenialsPerShard+1)
	for _, k := range keys[:maxDenialsPerShard] {
		c.deny(k, now.Add(time.Minute), now)
	}
	last := keys[maxDenialsPerShard]
	c.deny(last, now.Add(time.Minute), now)
	if _, ok := c.deniedUntil(last, now); ok {
		t.Fatal("a denial was cached in a full shard")
	}
	// A minute later every cached denial has ended: room again.
	later := now.Add(time.Minute)
	c.deny(last, later.Add(time.Minute), later)
	if _, ok := c.deniedUntil(last, later); !ok {
		t.Fatal("no room after the denials ended")
	}
	if n := len(c.shards[7].untilNano); n != 1 {
		t.Fatalf("%d denials left in the shard, want 1", n)
	}
}

// AllowPair decides both limits in one round trip, on the same budgets as
// Allow (redis_rate), and a request the first denies spends nothing of the
// second.
func TestRedisPairSharesBudgetsWithAllow(t *testing.T) {
	srv := testtools.StartRedis(t)
	var events redisEvents
	s := newRedisStore(t, events.config(srv.URL, "t4:"))
	other := newRedisStore(t, RedisConfig{URL: srv.URL, KeyPrefix: "t4:"})
	now := at(0, 0, 0)
	ip, project := Check{Key: "ip", LimitPerMinute: 3}, Check{Key: "project", LimitPerMinute: 2}
	for i := 0; i < 2; i++ {
		d1, d2 := s.AllowPair(ip, project, now)
		if !d1.Allowed || d1.Remaining != 2-i || !d2.Allowed || d2.Remaining != 1-i || d2.Limit != 2 {
			t.Fatalf("pair %d: %+v %+v", i, d1, d2)
		}
	}
	// Another node's Allow (redis_rate) sees the pair's spending.
	if d := other.Allow("project", 2, now); d.Allowed || d.RetryAfterSeconds < 1 || d.RetryAfterSeconds > 30 {
		t.Fatalf("Allow after two pairs: %+v, want denied for up to 30 s", d)
	}
	if d := other.Allow("ip", 3, now); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("Allow of the first key: %+v, want its last request", d)
	}
	// The first now denies: the second is not decided.
	d1, d2 := s.AllowPair(ip, Check{Key: "fresh", LimitPerMinute: 1}, now)
	if d1.Allowed || d1.RetryAfterSeconds < 1 || d2 != (Decision{}) {
		t.Fatalf("pair past the first limit: %+v %+v", d1, d2)
	}
	if d := other.Allow("fresh", 1, now); !d.Allowed {
		t.Fatalf("the denied pair spent the second's budget: %+v", d)
	}
	// The first allows and the second denies, in one script.
	d1, d2 = s.AllowPair(Check{Key: "ip2", LimitPerMinute: 5}, Check{Key: "fresh", LimitPerMinute: 1}, now)
	if !d1.Allowed || d2.Allowed || d2.Limit != 1 || d2.RetryAfterSeconds < 1 {
		t.Fatalf("pair with the second spent: %+v %+v", d1, d2)
	}
	if n := events.localDecisions.Load(); n != 0 {
		t.Fatalf("%d local decisions with Redis up", n)
	}

	// A limit so large its interval vanishes beside Redis's clock (an
	// operator's "unlimited") is allowed, not an error.
	huge := Check{Key: "huge", LimitPerMinute: math.MaxInt32}
	for i := 0; i < 3; i++ {
		if d1, d2 := s.AllowPair(huge, huge, now); !d1.Allowed || !d2.Allowed {
			t.Fatalf("huge limits: %+v %+v", d1, d2)
		}
	}
	if n := events.localDecisions.Load(); n != 0 {
		t.Fatalf("%d local decisions with huge limits: the script failed", n)
	}

	// Redis paused: both decided locally.
	srv.Pause(t)
	defer srv.Resume(t)
	d1, d2 = s.AllowPair(Check{Key: "x", LimitPerMinute: 1}, Check{Key: "y", LimitPerMinute: 1}, now)
	if !d1.Allowed || !d2.Allowed || events.localDecisions.Load() != 2 {
		t.Fatalf("paused: %+v %+v, %d local decisions", d1, d2, events.localDecisions.Load())
	}
}

func TestMemoryPair(t *testing.T) {
	m := NewMemory()
	now := at(0, 0, 0)
	a, b := Check{Key: "a", LimitPerMinute: 1}, Check{Key: "b", LimitPerMinute: 1}
	if d1, d2 := m.AllowPair(a, b, now); !d1.Allowed || !d2.Allowed {
		t.Fatalf("%+v %+v", d1, d2)
	}
	if d1, d2 := m.AllowPair(a, Check{Key: "c", LimitPerMinute: 1}, now); d1.Allowed || d2 != (Decision{}) {
		t.Fatalf("%+v %+v", d1, d2)
	}
	if d := m.Allow("c", 1, now); !d.Allowed {
		t.Fatalf("c spent by a denied pair: %+v", d)
	}
}

func TestRedisConfigIsChecked(t *testing.T) {
	for _, tc := range []struct {
		cfg  RedisConfig
		want string
	}{
		{RedisConfig{URL: ""}, "empty"},
		{RedisConfig{URL: "http://127.0.0.1:6379"}, "redis://"},
		{RedisConfig{URL: "redis://127.0.0.1:6379/0", KeyPrefix: "has space"}, "printable"},
		{RedisConfig{URL: "redis://127.0.0.1:6379/0", KeyPrefix: strings.Repeat("p", MaxRedisKeyPrefixBytes+1)}, "at most"},
	} {
		if _, err := NewRedis(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error saying %q", tc.cfg, err, tc.want)
		}
	}
}

// One decision in Redis against one answered from the denial cache: what a
// flood from one source costs once it is over its limit.
func BenchmarkRedisAllow(b *testing.B) {
	srv := testtools.StartRedis(b)
	s, err := NewRedis(RedisConfig{URL: srv.URL, KeyPrefix: "bench:"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := at(0, 0, 0)
	b.Run("asked", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if d := s.Allow("open", 1<<30, now); !d.Allowed {
				b.Fatalf("%+v", d)
			}
		}
	})
	b.Run("denied_from_memory", func(b *testing.B) {
		s.Allow("flood", 1, now)
		if d := s.Allow("flood", 1, now); d.Allowed {
			b.Fatalf("%+v", d)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if d := s.Allow("flood", 1, now); d.Allowed {
				b.Fatalf("%+v", d)
			}
		}
	})
}
