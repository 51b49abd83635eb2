package dispatch

import (
	"math/rand"
	"sync"
	"testing"
	"time"

	"rtcd/clock"
	"rtcd/webhookdelivery"
)

// steppingClock moves step forward at every reading once step is set, so
// each attempt's requested_at (read by the worker as it starts the
// attempt) tells the order in which the attempts started.
type steppingClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

func (c *steppingClock) stepEveryReading(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.step = d
}

func (c *steppingClock) Monotonic() time.Duration { return 0 }

func (c *steppingClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

var _ clock.Clock = (*steppingClock)(nil)

// concurrency counts the attempts inside a sender at once.
type concurrency struct {
	mu      sync.Mutex
	inside  int
	atEntry []int // attempts inside, this one included, as each entered
}

func (c *concurrency) enter() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inside++
	c.atEntry = append(c.atEntry, c.inside)
	return c.inside
}

func (c *concurrency) leave() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inside--
}

func (c *concurrency) entries() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.atEntry...)
}

func (tw *testWorld) worker(id string) *endpointWorker {
	v, ok := tw.d.workers.Load(id)
	if !ok {
		tw.t.Fatalf("no worker for %s", id)
	}
	return v.(*endpointWorker)
}

// Under a window of 8 attempts in flight, with several in flight at once
// (the sender holds the attempts after the first eight until four are
// inside together), each room's first attempts start in outbox order,
// though the events were written and fanned out in one clock reading, as
// the attempts' requested_at (the clock then moves at every reading)
// shows; a failed first attempt is retried later, after the room's other
// events started.
func TestFirstAttemptsStartInOutboxOrderUnderTheWindow(t *testing.T) {
	clk := &steppingClock{now: testStart}
	var conc concurrency
	four := make(chan struct{})
	var once sync.Once
	sender := &recordingSender{}
	tw := newTestWorld(t, clk, sender, Settings{ScheduleSeconds: []int{60}, WindowAttempts: 8})
	tw.endpoint("we_1", "whsec_window")
	const rooms, events = 12, 10
	ids := tw.roomEvents(rand.New(rand.NewSource(2)), rooms, events)
	stuck := ids["room_05"][3]
	failed := false
	sender.answer = func(c call, n int) webhookdelivery.Attempt {
		if conc.enter() >= 4 {
			once.Do(func() { close(four) })
		}
		defer conc.leave()
		if n >= 8 {
			select {
			case <-four:
			case <-time.After(10 * time.Second): // a failure guard, not timing: the window never held four attempts
				t.Error("four attempts were never in flight at once")
				once.Do(func() { close(four) })
			}
		}
		if c.event.ID == stuck && !failed {
			failed = true // only this goroutine can see stuck's first attempt
			return failure()
		}
		return webhookdelivery.Attempt{StatusCode: 204, Success: true}
	}

	for n, _ := tw.d.fanout(); n > 0; n, _ = tw.d.fanout() {
	}
	clk.stepEveryReading(time.Millisecond)
	tw.d.Step()
	if n := len(sender.recorded()); n != rooms*events {
		t.Fatalf("%d attempts in one step, want every event's first: %d", n, rooms*events)
	}
	clk.advance(time.Minute)
	tw.d.Step()

	maxInside := 0
	for _, n := range conc.entries() {
		maxInside = max(maxInside, n)
	}
	if maxInside < 4 || maxInside > 8 {
		t.Fatalf("at most %d attempts in flight at once, want 4 to 8 (the window)", maxInside)
	}
	deliveries := tw.deliveries("we_1")
	for room, events := range ids {
		var starts []time.Time
		for _, id := range events {
			dl := deliveries[id]
			if dl.Status != DeliverySucceeded || len(dl.Attempts) == 0 {
				t.Fatalf("%s: delivery of %s is %s with %d attempts", room, id, dl.Status, len(dl.Attempts))
			}
			at, err := time.Parse(time.RFC3339Nano, dl.Attempts[0].RequestedAt)
			if err != nil {
				t.Fatal(err)
			}
			starts = append(starts, at)
		}
		for i := 1; i < len(starts); i++ {
			if !starts[i].After(starts[i-1]) {
				t.Fatalf("%s: the first attempt of sequence %d started at %s, not after sequence %d's at %s",
					room, i+1, starts[i].Format(time.StampMilli), i, starts[i-1].Format(time.StampMilli))
			}
		}
	}
	retry := deliveries[stuck]
	if len(retry.Attempts) != 2 {
		t.Fatalf("the failed delivery has %d attempts, want 2", len(retry.Attempts))
	}
	last := deliveries[ids["room_05"][events-1]]
	if retry.Attempts[1].RequestedAt <= last.Attempts[0].RequestedAt {
		t.Fatal("the retry started before the room's later events: it held them back")
	}
}

// The window shrinks towards one on consecutive failures and grows back on
// successes, by the attempts' outcomes alone (no time passes but the
// retry delay): a failing endpoint is sent one attempt at a time.
func TestWindowShrinksOnFailuresAndGrowsBack(t *testing.T) {
	clk := clock.NewFake(testStart)
	var conc concurrency
	var mu sync.Mutex
	healthy := true
	sender := &recordingSender{answer: func(c call, n int) webhookdelivery.Attempt {
		conc.enter()
		defer conc.leave()
		mu.Lock()
		defer mu.Unlock()
		if healthy {
			return webhookdelivery.Attempt{StatusCode: 204, Success: true}
		}
		return failure()
	}}
	tw := newTestWorld(t, clk, sender, Settings{ScheduleSeconds: []int{60, 60}, WindowAttempts: 8})
	tw.endpoint("we_1", "whsec_window")
	w := tw.worker("we_1")
	if w.window != 1 {
		t.Fatalf("a new endpoint's window is %d, want 1", w.window)
	}

	events := func(room string, n int) {
		for i := range n {
			tw.roomEvent(room, i+1)
		}
	}
	events("room_ok", 20)
	tw.d.Step()
	if w.window != 8 {
		t.Fatalf("window %d after 20 successes, want the limit 8", w.window)
	}

	// The receiver fails everything: from the ninth attempt on (the eight
	// started while the window was full have answered by then), one
	// attempt at a time.
	mu.Lock()
	healthy = false
	mu.Unlock()
	before := len(conc.entries())
	events("room_down", 20)
	tw.d.Step()
	if w.window != 1 {
		t.Fatalf("window %d after 20 failures, want 1", w.window)
	}
	down := conc.entries()[before:]
	if len(down) != 20 {
		t.Fatalf("%d attempts to the failing endpoint, want 20", len(down))
	}
	for i, inside := range down {
		if i >= 8 && inside != 1 {
			t.Fatalf("attempt %d to the failing endpoint started with %d in flight: %v, want 1 from the ninth on", i+1, inside, down)
		}
		if inside > 8 {
			t.Fatalf("%d attempts in flight, above the window: %v", inside, down)
		}
	}
	// Their retries fail too: the window stays at one.
	clk.Advance(time.Minute)
	before = len(conc.entries())
	tw.d.Step()
	for _, inside := range conc.entries()[before:] {
		if inside != 1 {
			t.Fatalf("a retry to the failing endpoint started with %d in flight", inside)
		}
	}
	if w.window != 1 {
		t.Fatalf("window %d, want 1", w.window)
	}

	// The endpoint recovers: the last retries succeed and the window grows
	// back to its limit.
	mu.Lock()
	healthy = true
	mu.Unlock()
	clk.Advance(time.Minute)
	tw.d.Step()
	if w.window != 8 {
		t.Fatalf("window %d after 20 successes, want 8 again", w.window)
	}
	for id, dl := range tw.deliveries("we_1") {
		if dl.Status != DeliverySucceeded {
			t.Fatalf("delivery of %s is %s", id, dl.Status)
		}
	}
}
