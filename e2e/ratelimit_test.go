package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"rtcd/internal/testtools"
)

// mustRateLimited asserts a 429 rate_limited with the spec's headers.
// retryAfter < 0 accepts any value of at least 1.
func mustRateLimited(t *testing.T, r *resp, limit int, limitName string, retryAfter int) {
	t.Helper()
	r.mustErr(t, 429, "rate_limited")
	ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 60 {
		t.Fatalf("Retry-After %q: %s", r.Header.Get("Retry-After"), r.Raw)
	}
	if retryAfter >= 0 && ra != retryAfter {
		t.Fatalf("Retry-After %d, want %d", ra, retryAfter)
	}
	if got := r.Header.Get("X-RateLimit-Limit"); got != strconv.Itoa(limit) {
		t.Fatalf("X-RateLimit-Limit %q, want %d", got, limit)
	}
	if got := r.Header.Get("X-RateLimit-Remaining"); got != "0" {
		t.Fatalf("X-RateLimit-Remaining %q, want 0", got)
	}
	if d := r.details(); d["limit_name"] != limitName {
		t.Fatalf("details.limit_name %v, want %s: %s", d["limit_name"], limitName, r.Raw)
	}
}

func TestRateLimitRoomCreates(t *testing.T) {
	e := start(t, "--default-room-creates-per-minute=3")
	k := e.Boot.APIKey
	for i := 0; i < 3; i++ {
		e.createRoom(nil)
	}
	// At 12:00:00 the next window is a full minute away.
	mustRateLimited(t, e.do("POST", "/v1/rooms", k, map[string]any{}), 3, "room_creates_per_minute", 60)
	e.clock.Advance(30 * time.Second)
	mustRateLimited(t, e.do("POST", "/v1/rooms", k, map[string]any{}), 3, "room_creates_per_minute", 30)
	// Refused requests did not consume budget of the next window.
	e.clock.Advance(30 * time.Second)
	for i := 0; i < 3; i++ {
		e.createRoom(nil)
	}
	mustRateLimited(t, e.do("POST", "/v1/rooms", k, map[string]any{}), 3, "room_creates_per_minute", 60)
	if n := len(e.listRooms()); n != 6 {
		t.Fatalf("%d rooms, want 6", n)
	}
	// The limit is the project's, from GET /v1/project/limits.
	if l := e.do("GET", "/v1/project/limits", k, nil).must(t, 200); l.JSON["room_creates_per_minute"] != float64(3) {
		t.Fatalf("project limits: %s", l.Raw)
	}
}

// Exactly the limit is admitted when the creates arrive at once.
func TestRateLimitRoomCreatesConcurrent(t *testing.T) {
	e := start(t, "--default-room-creates-per-minute=5")
	rs := e.parallel(40, func(int) (*resp, error) {
		return e.send("POST", "/v1/rooms", e.Boot.APIKey, map[string]any{})
	})
	ok := 0
	for _, r := range rs {
		if r.Status == 201 {
			ok++
			continue
		}
		mustRateLimited(t, r, 5, "room_creates_per_minute", 60)
	}
	if ok != 5 || len(e.listRooms()) != 5 {
		t.Fatalf("%d created, %d rooms; want 5", ok, len(e.listRooms()))
	}
}

func TestRateLimitRetryAfterMidWindow(t *testing.T) {
	e := start(t, "--default-room-creates-per-minute=2")
	e.clock.Advance(45 * time.Second) // 12:00:45
	e.createRoom(nil)
	e.createRoom(nil)
	mustRateLimited(t, e.do("POST", "/v1/rooms", e.Boot.APIKey, map[string]any{}), 2, "room_creates_per_minute", 15)
	e.clock.Advance(14*time.Second + 500*time.Millisecond) // 12:00:59.5: rounded up
	mustRateLimited(t, e.do("POST", "/v1/rooms", e.Boot.APIKey, map[string]any{}), 2, "room_creates_per_minute", 1)
	e.clock.Advance(500 * time.Millisecond) // 12:01:00
	e.createRoom(nil)
}

func TestRateLimitParticipantCreates(t *testing.T) {
	e := start(t, "--default-participant-creates-per-minute=3")
	k := e.Boot.APIKey
	a := e.createRoom(nil)
	b := e.createRoom(nil)
	e.createParticipant(a, nil)
	e.createParticipant(b, nil)
	e.createParticipant(a, nil)
	// The limit is per project, across its rooms.
	mustRateLimited(t, e.do("POST", "/v1/rooms/"+b+"/participants", k, map[string]any{}), 3, "participant_creates_per_minute", 60)
	mustRateLimited(t, e.do("POST", "/v1/rooms/"+a+"/participants", k, map[string]any{}), 3, "participant_creates_per_minute", 60)
	e.clock.Advance(time.Minute)
	e.createParticipant(b, nil)
	if n := e.countParticipants(a) + e.countParticipants(b); n != 4 {
		t.Fatalf("%d participants, want 4", n)
	}
}

func TestRateLimitConnectPerProject(t *testing.T) {
	e := start(t, "--default-connect-requests-per-minute=3")
	room := e.createRoom(nil)
	_, t1 := e.createParticipant(room, nil)
	_, t2 := e.createParticipant(room, nil)
	e.connect(t1).must(t, 200)
	e.connect(t2).must(t, 200)
	e.connect(t1).must(t, 200)
	mustRateLimited(t, e.connect(t2), 3, "connect_requests_per_minute", 60)
	e.clock.Advance(20 * time.Second)
	mustRateLimited(t, e.connect(t1), 3, "connect_requests_per_minute", 40)
	e.clock.Advance(40 * time.Second)
	e.connect(t2).must(t, 200)
}

func TestRateLimitConnectPerIP(t *testing.T) {
	e := start(t, "--connect-per-ip-per-minute=5")
	room := e.createRoom(nil)
	_, tok := e.createParticipant(room, nil)
	e.connect(tok).must(t, 200)
	// Refused connects (a bad token, a missing token) count against the
	// abuse guard too.
	e.connect("rtc_pt_garbage").mustErr(t, 401, "participant_token_invalid")
	e.do("POST", "/v1/connect", "", map[string]any{}).mustErr(t, 400, "invalid_request")
	e.connect(tok).must(t, 200)
	e.connect(tok).must(t, 200)
	mustRateLimited(t, e.connect(tok), 5, "connect_per_ip_per_minute", 60)
	mustRateLimited(t, e.connect("rtc_pt_garbage"), 5, "connect_per_ip_per_minute", 60)
	// The management API from the same address is not limited by it.
	e.createParticipant(room, nil)
	e.clock.Advance(time.Minute)
	e.connect(tok).must(t, 200)
}

// Two servers on one Redis (--rate-limit-store=redis) draw on one budget:
// the per-source-IP connect limit (checked before the token, so it needs no
// shared project) admits its limit across both, then refuses on both, and
// keeps refusing from memory until Redis's wait has passed. While Redis
// does not answer each server limits by its own counters, says so in its
// metrics, and shares again once Redis is back.
func TestRateLimitsSharedThroughRedis(t *testing.T) {
	redis := testtools.StartRedis(t)
	const limit = 4
	flags := []string{"--rate-limit-store=redis", "--redis-url=" + redis.URL,
		"--redis-key-prefix=" + strings.ReplaceAll(t.Name(), "/", "_") + ":",
		"--connect-per-ip-per-minute=" + strconv.Itoa(limit)}
	a, b := start(t, flags...), start(t, flags...)
	connect := func(e *env) *resp { return e.do("POST", "/v1/connect", "", map[string]any{"token": "not-a-token"}) }
	for i := 0; i < limit; i++ {
		node := []*env{a, b}[i%2]
		connect(node).mustErr(t, 401, "participant_token_invalid")
	}
	for _, node := range []*env{a, b} {
		// GCRA at 4 per minute frees one request every 15 seconds.
		r := connect(node)
		mustRateLimited(t, r, limit, "connect_per_ip_per_minute", -1)
		if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra > 15 {
			t.Fatalf("Retry-After %d, want at most 15 (one request every 15 s)", ra)
		}
		node.mfAwait("rtcd_rate_limit_store_reachable", nil, 1)
		node.mfAwait("rtcd_rate_limit_local_decisions_total", nil, 0)
	}

	// The refusal is remembered until Redis's wait has passed: with Redis
	// paused, still refused, without asking it.
	redis.Pause(t)
	for _, node := range []*env{a, b} {
		mustRateLimited(t, connect(node), limit, "connect_per_ip_per_minute", -1)
		node.mfAwait("rtcd_rate_limit_local_decisions_total", nil, 0)
	}

	// Past the wait, Redis is asked and does not answer: each server
	// decides alone, with its own full budget, and reports it.
	for _, node := range []*env{a, b} {
		node.clock.Advance(16 * time.Second)
		for i := 0; i < limit; i++ {
			connect(node).mustErr(t, 401, "participant_token_invalid")
		}
		mustRateLimited(t, connect(node), limit, "connect_per_ip_per_minute", -1)
		node.mfAwait("rtcd_rate_limit_store_reachable", nil, 0)
		node.mfAwait("rtcd_rate_limit_local_decisions_total", nil, limit+1)
	}

	// Back: after the retry interval each server asks Redis again, whose
	// shared budget is still spent (Redis's clock has moved on by the
	// test's real time only).
	redis.Resume(t)
	for _, node := range []*env{a, b} {
		node.clock.Advance(time.Second)
		mustRateLimited(t, connect(node), limit, "connect_per_ip_per_minute", -1)
		node.mfAwait("rtcd_rate_limit_store_reachable", nil, 1)
		node.mfAwait("rtcd_rate_limit_local_decisions_total", nil, limit+1)
	}
}
