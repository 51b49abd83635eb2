package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Bounds of the Redis store.
const (
	// DefaultRedisCallTimeout bounds one rate decision in Redis (one
	// EVALSHA round trip). Past it the request is decided locally: a rate
	// limit protects the service, so it must never be what makes the
	// service slow.
	DefaultRedisCallTimeout = 100 * time.Millisecond

	// redisDownSeconds is how long, after a failed call, requests are
	// decided locally without asking Redis. Without it, every request
	// during an outage would wait out the call timeout first; with it, one
	// request per redisDownSeconds probes whether Redis is back.
	redisDownSeconds = 1

	// MaxRedisKeyPrefixBytes bounds --redis-key-prefix.
	MaxRedisKeyPrefixBytes = 64
)

// RedisConfig configures the Redis store.
type RedisConfig struct {
	// URL is redis://[user:password@]host:port/db, or rediss:// for TLS
	// (go-redis's ParseURL).
	URL string
	// KeyPrefix starts every counter's key after redis_rate's own "rate:"
	// (the key in Redis is "rate:" + KeyPrefix + key), so deployments (or
	// tests) can share one Redis. Empty: "rtcd:".
	KeyPrefix string
	// CallTimeout bounds one decision in Redis; 0: DefaultRedisCallTimeout.
	CallTimeout time.Duration
	// OnLocalDecision, if set, is called for every request decided by this
	// node's own counters because Redis did not answer (a metric).
	OnLocalDecision func()
	// OnReachable, if set, is called when Redis stops answering (false)
	// and when it answers again (true) (a gauge).
	OnReachable func(reachable bool)
}

// Redis is the Store several nodes share: GCRA counters (go-redis's
// redis_rate, one Lua script per decision) in one Redis, read against
// Redis's own clock, so every node's requests draw on one budget per key.
//
// A limit of L per minute is GCRA with rate L per minute and burst L: a
// quiet key admits L requests at once, then one every 60/L seconds. Unlike
// the fixed windows of Memory it never admits 2L around a window's edge.
//
// A key Redis denied is answered from memory until the wait Redis gave
// has passed (denialCache): exact, since nothing but time frees budget,
// and it keeps a flood from one source off Redis.
//
// When Redis does not answer within the call timeout (down, paused, or the
// network dropped), the request is decided by this node's in-process
// counters (a Memory) and the decision is counted (OnLocalDecision); the
// first failure and the recovery are logged once each. Rate limits protect
// the service from floods, while admission rules that must be exact (room
// caps, quotas, credit) never depend on Redis, so failing to local counters
// keeps the service up and every node still bounded by the full limit: a
// cluster of N nodes admits at most N times the limit until Redis is back.
type Redis struct {
	client          *redis.Client
	limiter         *redis_rate.Limiter
	keyPrefix       string
	callTimeout     time.Duration
	local           *Memory
	denials         denialCache // keys Redis denied, until when (see denialCache)
	onLocalDecision func()
	onReachable     func(bool)

	// downUntilUnixNano is when, after a failure, Redis is asked again;
	// zero while Redis answers.
	downUntilUnixNano atomic.Int64
	// stateMu orders the reachable/unreachable transitions so the log
	// lines and the gauge do not interleave (see markUnreachable).
	stateMu        sync.Mutex
	unreachable    bool
	unreachableNow atomic.Bool
}

// Compile-time check that Redis satisfies Store.
var _ Store = (*Redis)(nil)

// NewRedis returns a Redis store for cfg. It does not connect: the first
// decision (or Ping) does.
func NewRedis(cfg RedisConfig) (*Redis, error) {
	opts, err := ParseRedisURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	if err := CheckRedisKeyPrefix(cfg.KeyPrefix); err != nil {
		return nil, err
	}
	timeout := cfg.CallTimeout
	if timeout <= 0 {
		timeout = DefaultRedisCallTimeout
	}
	// One try per decision, bounded by the context: go-redis's default
	// retries would multiply the wait during an outage.
	opts.MaxRetries = -1
	opts.DialTimeout = timeout
	opts.ReadTimeout = timeout
	opts.WriteTimeout = timeout
	opts.ContextTimeoutEnabled = true
	prefix := cfg.KeyPrefix
	if prefix == "" {
		prefix = "rtcd:"
	}
	client := redis.NewClient(opts)
	return &Redis{
		client: client, limiter: redis_rate.NewLimiter(client),
		keyPrefix: prefix, callTimeout: timeout, local: NewMemory(),
		onLocalDecision: cfg.OnLocalDecision, onReachable: cfg.OnReachable,
	}, nil
}

// ParseRedisURL checks a --redis-url and returns go-redis's options for it.
func ParseRedisURL(u string) (*redis.Options, error) {
	if u == "" {
		return nil, errors.New("the Redis URL is empty")
	}
	opts, err := redis.ParseURL(u)
	if err != nil {
		return nil, fmt.Errorf("Redis URL: %w (want redis://host:port/db or rediss://…)", err)
	}
	return opts, nil
}

// CheckRedisKeyPrefix checks a --redis-key-prefix: printable ASCII without
// spaces, at most MaxRedisKeyPrefixBytes.
func CheckRedisKeyPrefix(p string) error {
	if len(p) > MaxRedisKeyPrefixBytes {
		return fmt.Errorf("the Redis key prefix is %d bytes, at most %d", len(p), MaxRedisKeyPrefixBytes)
	}
	if strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return fmt.Errorf("the Redis key prefix %q: use printable ASCII without spaces", p)
	}
	return nil
}

// Ping asks Redis once whether it answers.
func (r *Redis) Ping(ctx context.Context) error {
	return r.client.Ping(ctx).Err()
}

// Allow decides one request in Redis, or locally while Redis does not
// answer (see Redis). now is only used for the local decisions and for
// when to ask Redis again: Redis decides against its own clock, the one
// clock every node shares.
func (r *Redis) Allow(key string, limitPerMinute int, now time.Time) Decision {
	if limitPerMinute <= 0 {
		return denied(limitPerMinute, now)
	}
	key = r.keyPrefix + key
	if d, ok := r.cachedDenial(key, limitPerMinute, now); ok {
		return d
	}
	if !r.mayAsk(now) {
		return r.decideLocally(key, limitPerMinute, now)
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.callTimeout)
	res, err := r.limiter.Allow(ctx, key, redis_rate.PerMinute(limitPerMinute))
	cancel()
	if err != nil {
		r.markUnreachable(err, now)
		return r.decideLocally(key, limitPerMinute, now)
	}
	r.markReachable()
	if res.Allowed > 0 {
		return Decision{Allowed: true, Limit: limitPerMinute, Remaining: res.Remaining}
	}
	r.denials.deny(key, now.Add(res.RetryAfter), now)
	return Decision{Allowed: false, Limit: limitPerMinute, RetryAfterSeconds: wholeSecondsUp(res.RetryAfter)}
}

// mayAsk says whether to ask Redis now: yes while it answers; after a
// failure, no until the retry interval has passed, then yes for the one
// caller whose swap of the retry time wins (the probe), no for the others.
func (r *Redis) mayAsk(now time.Time) bool {
	until := r.downUntilUnixNano.Load()
	if until == 0 {
		return true
	}
	return now.UnixNano() >= until && r.downUntilUnixNano.CompareAndSwap(until, now.Add(redisDownSeconds*time.Second).UnixNano())
}

// cachedDenial is the Decision for a key whose denial is remembered.
func (r *Redis) cachedDenial(key string, limitPerMinute int, now time.Time) (Decision, bool) {
	until, ok := r.denials.deniedUntil(key, now)
	if !ok {
		return Decision{}, false
	}
	return Decision{Allowed: false, Limit: limitPerMinute, RetryAfterSeconds: wholeSecondsUp(until.Sub(now))}, true
}

// pairScript decides two GCRA limits in one round trip, the second only
// when the first allows. It keeps redis_rate's storage (the key "rate:" +
// key holds the theoretical arrival time, in seconds since 2017-01-01 by
// Redis's clock, expiring when it has passed) and its arithmetic, with a
// burst of the limit, so Allow (redis_rate) and AllowPair draw on the same
// budgets. Each result is {allowed, remaining, retry after in seconds}.
var pairScript = redis.NewScript(`
redis.replicate_commands()
local t = redis.call("TIME")
local now = (t[1] - 1483228800) + (t[2] / 1000000)
local function decide(key, perMinute)
  local interval = 60 / perMinute
  local tat = tonumber(redis.call("GET", key)) or now
  if tat < now then tat = now end
  local newTat = tat + interval
  local allowAt = newTat - interval * perMinute
  if now < allowAt then
    return {0, 0, tostring(allowAt - now)}
  end
  if newTat > now then -- a huge limit's interval can vanish in the sum
    redis.call("SET", key, newTat, "EX", math.ceil(newTat - now))
  end
  return {1, math.floor((now - allowAt) / interval), "-1"}
end
local first = decide(KEYS[1], tonumber(ARGV[1]))
if first[1] == 0 then
  return {first}
end
return {first, decide(KEYS[2], tonumber(ARGV[2]))}
`)

// redisRateKeyPrefix is what redis_rate puts before every key.
const redisRateKeyPrefix = "rate:"

// AllowPair decides first and then, if it allows, second, in one round
// trip (pairScript); a remembered denial of first needs none. While Redis
// does not answer, both are decided locally.
func (r *Redis) AllowPair(first, second Check, now time.Time) (Decision, Decision) {
	if first.LimitPerMinute <= 0 {
		return denied(first.LimitPerMinute, now), Decision{}
	}
	k1, k2 := r.keyPrefix+first.Key, r.keyPrefix+second.Key
	if d, ok := r.cachedDenial(k1, first.LimitPerMinute, now); ok {
		return d, Decision{}
	}
	if second.LimitPerMinute <= 0 {
		d := r.Allow(first.Key, first.LimitPerMinute, now)
		if !d.Allowed {
			return d, Decision{}
		}
		return d, denied(second.LimitPerMinute, now)
	}
	if d2, ok := r.cachedDenial(k2, second.LimitPerMinute, now); ok {
		d := r.Allow(first.Key, first.LimitPerMinute, now)
		if !d.Allowed {
			return d, Decision{}
		}
		return d, d2
	}
	if !r.mayAsk(now) {
		return r.decidePairLocally(k1, k2, first, second, now)
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.callTimeout)
	res, err := pairScript.Run(ctx, r.client, []string{redisRateKeyPrefix + k1, redisRateKeyPrefix + k2},
		first.LimitPerMinute, second.LimitPerMinute).Slice()
	cancel()
	var d1, d2 Decision
	if err == nil {
		d1, err = r.pairResult(res, 0, k1, first.LimitPerMinute, now)
	}
	if err == nil && d1.Allowed {
		d2, err = r.pairResult(res, 1, k2, second.LimitPerMinute, now)
	}
	if err != nil {
		r.markUnreachable(err, now)
		return r.decidePairLocally(k1, k2, first, second, now)
	}
	r.markReachable()
	return d1, d2
}

// decidePairLocally is AllowPair on this node's own counters (keys k1 and
// k2, already prefixed).
func (r *Redis) decidePairLocally(k1, k2 string, first, second Check, now time.Time) (Decision, Decision) {
	d := r.decideLocally(k1, first.LimitPerMinute, now)
	if !d.Allowed {
		return d, Decision{}
	}
	return d, r.decideLocally(k2, second.LimitPerMinute, now)
}

// pairResult reads result i of pairScript's reply as a Decision, and
// remembers a denial.
func (r *Redis) pairResult(res []any, i int, key string, limitPerMinute int, now time.Time) (Decision, error) {
	if i >= len(res) {
		return Decision{}, fmt.Errorf("ratelimit: pair script answered %d results", len(res))
	}
	fields, ok := res[i].([]any)
	if !ok || len(fields) != 3 {
		return Decision{}, fmt.Errorf("ratelimit: pair script answered %v", res[i])
	}
	allowed, ok1 := fields[0].(int64)
	remaining, ok2 := fields[1].(int64)
	retryText, ok3 := fields[2].(string)
	if !ok1 || !ok2 || !ok3 {
		return Decision{}, fmt.Errorf("ratelimit: pair script answered %v", fields)
	}
	if allowed == 1 {
		return Decision{Allowed: true, Limit: limitPerMinute, Remaining: int(remaining)}, nil
	}
	retrySeconds, err := strconv.ParseFloat(retryText, 64)
	if err != nil {
		return Decision{}, fmt.Errorf("ratelimit: pair script retry %q: %w", retryText, err)
	}
	retry := time.Duration(retrySeconds * float64(time.Second))
	r.denials.deny(key, now.Add(retry), now)
	return Decision{Allowed: false, Limit: limitPerMinute, RetryAfterSeconds: wholeSecondsUp(retry)}, nil
}

func (r *Redis) decideLocally(key string, limitPerMinute int, now time.Time) Decision {
	if r.onLocalDecision != nil {
		r.onLocalDecision()
	}
	return r.local.Allow(key, limitPerMinute, now)
}

// markUnreachable and markReachable change the down window and the
// reachable state together under stateMu, so a late success and a failure
// racing each other end in one state or the other, never in the gauge
// saying unreachable while the window is closed. unreachableNow lets a
// success skip the lock while Redis answers.
func (r *Redis) markUnreachable(err error, now time.Time) {
	r.stateMu.Lock()
	defer r.stateMu.Unlock()
	r.downUntilUnixNano.Store(now.Add(redisDownSeconds * time.Second).UnixNano())
	if r.unreachable {
		return
	}
	r.unreachable = true
	r.unreachableNow.Store(true)
	slog.Warn("the rate-limit store (Redis) failed: requests are limited by this node's own counters until it answers",
		"err", err, "retry_seconds", redisDownSeconds)
	if r.onReachable != nil {
		r.onReachable(false)
	}
}

func (r *Redis) markReachable() {
	if !r.unreachableNow.Load() {
		return
	}
	r.stateMu.Lock()
	defer r.stateMu.Unlock()
	r.downUntilUnixNano.Store(0)
	if !r.unreachable {
		return
	}
	r.unreachable = false
	r.unreachableNow.Store(false)
	slog.Info("the rate-limit store (Redis) answers again: limits are shared by every node again")
	if r.onReachable != nil {
		r.onReachable(true)
	}
}

// Sweep drops the local counters of past windows (see Memory.Sweep); the
// counters in Redis expire on their own.
func (r *Redis) Sweep(now time.Time) int { return r.local.Sweep(now) }

// Close closes the connections to Redis.
func (r *Redis) Close() error { return r.client.Close() }
