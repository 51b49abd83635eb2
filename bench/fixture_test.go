package bench

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goccy/go-json"
	"rtcd/actors"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/metrics"
	"rtcd/persistence"
	"rtcd/ratelimit"
)

// unlimited is a limit no benchmark reaches, so the engine's quotas and rate
// limits are checked (their cost is measured) but never refuse.
const unlimited = 1 << 30

// benchStart is the fake clock's start. The clock never advances, so no
// room or token expires during a run whatever its length.
var benchStart = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// benchSettings are the server's defaults (config: media token TTL 60 s,
// a snapshot every 1000 events) with limits no benchmark reaches.
func benchSettings() actors.Settings {
	return actors.Settings{
		Region:   "global",
		MediaURL: "ws://127.0.0.1:1/rtc",
		DefaultLimits: actors.Limits{
			MaxActiveRooms: unlimited, MaxActiveParticipants: unlimited,
			MaxParticipantsPerRoom: actors.MaxParticipantSessionsPerRoom,
			RoomCreatesPerMinute:   unlimited, ParticipantCreatesPerMinute: unlimited,
			ConnectRequestsPerMinute: unlimited,
		},
		ConnectPerIPPerMinute: unlimited,
		MediaTokenTTL:         time.Minute,
		SnapshotEveryEvents:   1000,
		Billing:               actors.Billing{Currency: "USD"},
	}
}

// benchKeys derives the keys every benchmark signs and verifies with.
func benchKeys(tb testing.TB) auth.Keys {
	tb.Helper()
	master := make([]byte, auth.MinMasterKeyLength)
	for i := range master {
		master[i] = byte(i + 1)
	}
	k, err := auth.DeriveKeys(master)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// openStore opens a Pebble store in dir whose fsync failures fail tb.
func openStore(tb testing.TB, dir string) *persistence.Store {
	tb.Helper()
	s, err := persistence.Open(dir, persistence.Metrics{}, func(err error) { tb.Errorf("store fatal: %v", err) })
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// fixture is a real engine on a real store in a temporary directory, with
// the bootstrap workspace and a caller holding every scope.
type fixture struct {
	dir      string
	keys     auth.Keys
	clk      *clock.Fake
	settings actors.Settings
	metrics  *metrics.Metrics // nil: the engine's own, read by nobody
	limiter  ratelimit.Store  // nil: in process (ratelimit.Memory)
	store    *persistence.Store
	e        *actors.Engine
	caller   *actors.Caller
}

// newFixture bootstraps a data directory and starts an engine on it, the way
// `rtcd serve` does on first start. Stop runs at cleanup.
func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	return newFixtureWith(tb, benchSettings(), nil)
}

// newFixtureWith is newFixture with other settings, and collectors the
// benchmark reads (m nil: none).
func newFixtureWith(tb testing.TB, settings actors.Settings, m *metrics.Metrics) *fixture {
	tb.Helper()
	return newFixtureLimited(tb, settings, m, nil)
}

// newFixtureLimited is newFixtureWith counting rates in limiter (nil: in
// process).
func newFixtureLimited(tb testing.TB, settings actors.Settings, m *metrics.Metrics, limiter ratelimit.Store) *fixture {
	tb.Helper()
	f := &fixture{dir: tb.TempDir(), keys: benchKeys(tb), clk: clock.NewFake(benchStart), settings: settings, metrics: m, limiter: limiter}
	f.store = openStore(tb, f.dir)
	boot, err := actors.Bootstrap(f.store, f.keys, f.clk, actors.Billing{Currency: "USD"}, "owner@example.com")
	if err != nil {
		tb.Fatal(err)
	}
	f.start(tb)
	caller, aerr := f.e.Authenticate(boot.APIKey)
	if aerr != nil {
		tb.Fatal(aerr)
	}
	f.caller = caller
	tb.Cleanup(f.close)
	return f
}

// start recovers an engine from the store (New and Start).
func (f *fixture) start(tb testing.TB) {
	tb.Helper()
	limiter := f.limiter
	if limiter == nil {
		limiter = ratelimit.NewMemory()
	}
	e, err := actors.New(f.settings, f.store, f.clk, limiter, f.keys, f.metrics)
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.Start(); err != nil {
		tb.Fatal(err)
	}
	f.e = e
}

// close stops the engine, then closes the store (in that order: no actor
// may commit after Store.Close). Safe to call twice.
func (f *fixture) close() {
	if f.e != nil {
		f.e.Stop()
		f.e = nil
	}
	if f.store != nil {
		_ = f.store.Close()
		f.store = nil
	}
}

// createRoom creates a room through the engine and returns its id. Safe
// from any goroutine (set-up workers): it returns errors, never fails tb.
func (f *fixture) createRoom() (string, error) {
	res, aerr := f.e.CreateRoom(f.caller, &actors.RoomParams{}, nil)
	if aerr != nil {
		return "", fmt.Errorf("create room: %v", aerr)
	}
	return decodeField(res.Body, "id")
}

// createParticipant creates a participant in roomID and returns its token.
// Safe from any goroutine.
func (f *fixture) createParticipant(roomID string) (string, error) {
	res, aerr := f.e.CreateParticipant(f.caller, roomID, &actors.ParticipantParams{}, nil)
	if aerr != nil {
		return "", fmt.Errorf("create participant: %v", aerr)
	}
	return decodeField(res.Body, "token")
}

// connect exchanges token for a connect session. Safe from any goroutine.
func (f *fixture) connect(token string) error {
	if _, aerr := f.e.Connect(&actors.ConnectParams{Token: &token}, "192.0.2.1"); aerr != nil {
		return fmt.Errorf("connect: %v", aerr)
	}
	return nil
}

// connectedParticipant creates a room with one participant, connects it
// once, and returns the participant's token; it fails tb on error.
func (f *fixture) connectedParticipant(tb testing.TB) (roomID, token string) {
	tb.Helper()
	roomID, err := f.createRoom()
	if err == nil {
		token, err = f.createParticipant(roomID)
	}
	if err == nil {
		err = f.connect(token)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return roomID, token
}

// decodeField returns the string field name of a JSON object.
func decodeField(body []byte, name string) (string, error) {
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		return "", fmt.Errorf("decode %s: %v", body, err)
	}
	s, _ := v[name].(string)
	if s == "" {
		return "", fmt.Errorf("no %q in %s", name, body)
	}
	return s, nil
}

// setupWorkers is how many goroutines build a benchmark's fixture in
// parallel: every durable create waits for an fsync, and concurrent ones
// share it (group commit), so set-up of thousands of objects stays short.
const setupWorkers = 32

// parallel runs fn(0..n-1) on setupWorkers goroutines and returns the first
// error.
func parallel(n int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < min(setupWorkers, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// liveHeap is the heap still reachable after two full collections: what the
// process holds, not garbage waiting to be swept. Pebble's memtables and
// block cache are allocated outside the Go heap (cgo), so this is the
// engine's own memory.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// reportVsBaseline runs baseline b.N times with the timer stopped and reports
// the measured loop's time as a multiple of the baseline's (unit
// "x_"+name), so each figure has a floor measured in the same run on the same
// machine. Call it right after the measured loop.
func reportVsBaseline(b *testing.B, name string, baseline func() error) {
	b.StopTimer()
	measured := b.Elapsed()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if err := baseline(); err != nil {
			b.Fatal(err)
		}
	}
	if base := time.Since(start); base > 0 {
		b.ReportMetric(float64(measured)/float64(base), "x_"+name)
	}
}
