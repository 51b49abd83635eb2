package ratelimit

import (
	"sync"
	"time"
)

// maxDenialsPerShard bounds the denials one shard of a denialCache holds
// (64 shards x 1024 = 65536 keys). A full shard sweeps its ended denials;
// if none ended, the new one is not cached (Redis is asked again).
const maxDenialsPerShard = 1024

// denialCache remembers, per key, until when Redis denied it. GCRA frees
// budget only as time passes, and other nodes can only spend more, so a
// key Redis denied until T stays denied until T whatever any node does:
// answering such requests from memory is exact, and a flood from one
// source (the case rate limits exist for) costs Redis one round trip per
// retry interval instead of one per request. T is the node's clock before
// the call plus Redis's wait, so it ends up to one round trip before
// Redis's own (Redis is then asked again, and may deny again): never
// looser. A raised limit takes effect when the cached denial ends (at most
// 60/L seconds).
type denialCache struct {
	shards [shardCount]denialShard
}

type denialShard struct {
	mu        sync.Mutex
	untilNano map[string]int64
	_         [cacheLineBytes]byte
}

// deniedUntil reports until when key is denied, if a denial that has not
// ended at now is cached.
func (c *denialCache) deniedUntil(key string, now time.Time) (time.Time, bool) {
	s := &c.shards[shardIndex(key)]
	s.mu.Lock()
	until, ok := s.untilNano[key]
	if ok && until <= now.UnixNano() {
		delete(s.untilNano, key)
		ok = false
	}
	s.mu.Unlock()
	return time.Unix(0, until), ok
}

// deny caches that key is denied until until.
func (c *denialCache) deny(key string, until, now time.Time) {
	s := &c.shards[shardIndex(key)]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.untilNano == nil {
		s.untilNano = make(map[string]int64)
	}
	if _, ok := s.untilNano[key]; !ok && len(s.untilNano) >= maxDenialsPerShard {
		for k, u := range s.untilNano {
			if u <= now.UnixNano() {
				delete(s.untilNano, k)
			}
		}
		if len(s.untilNano) >= maxDenialsPerShard {
			return
		}
	}
	s.untilNano[key] = until.UnixNano()
}
