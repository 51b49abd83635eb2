package dispatch

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"rtcd/clock"
	"rtcd/webhookdelivery"
)

// roomEvents writes rooms events of each of rooms rooms to the outbox,
// interleaving the rooms by rng while each room's sequence numbers rise,
// all at one reading of the clock (as a busy second of production can),
// and returns each room's event ids in sequence order.
func (tw *testWorld) roomEvents(rng *rand.Rand, rooms, events int) map[string][]string {
	next := map[string]int{}
	ids := map[string][]string{}
	var open []string
	for r := range rooms {
		open = append(open, fmt.Sprintf("room_%02d", r))
	}
	for len(open) > 0 {
		i := rng.Intn(len(open))
		room := open[i]
		next[room]++
		ids[room] = append(ids[room], tw.roomEvent(room, next[room]))
		if next[room] == events {
			open = append(open[:i], open[i+1:]...)
		}
	}
	return ids
}

// firstAttempts are the events of calls in the order of their first
// attempt, by room.
func firstAttempts(calls []call) map[string][]int {
	seen := map[string]bool{}
	out := map[string][]int{}
	for _, c := range calls {
		if seen[c.event.ID] {
			continue
		}
		seen[c.event.ID] = true
		room, _ := c.event.Data["room_id"].(string)
		out[room] = append(out[room], int(c.event.Data["sequence"].(float64)))
	}
	return out
}

// With one attempt at a time, a room's events reach the receiver in
// outbox order, though they were all written in one clock reading, across
// more than one fan-out step; and a delivery whose first attempt failed
// does not hold back the room's later events: they are attempted while it
// waits for its retry.
func TestFirstAttemptsArriveInOutboxOrder(t *testing.T) {
	clk := clock.NewFake(testStart)
	failedOnce := map[string]bool{}
	sender := &recordingSender{}
	tw := newTestWorld(t, clk, sender, Settings{ScheduleSeconds: []int{60}, WindowAttempts: 1})
	tw.endpoint("we_1", "whsec_order")
	const rooms, events = 30, 10 // 300 events: two fan-out steps
	ids := tw.roomEvents(rand.New(rand.NewSource(1)), rooms, events)
	// The first attempt of room_03's third event fails.
	stuck := ids["room_03"][2]
	sender.answer = func(c call, _ int) webhookdelivery.Attempt {
		if c.event.ID == stuck && !failedOnce[stuck] {
			failedOnce[stuck] = true
			return failure()
		}
		return webhookdelivery.Attempt{StatusCode: 204, Success: true}
	}

	for range 2 * rooms * events {
		tw.d.Step()
		if len(firstAttempts(sender.recorded())) == rooms && len(sender.recorded()) == rooms*events {
			break
		}
	}
	clk.Advance(time.Minute)
	tw.d.Step()

	calls := sender.recorded()
	if len(calls) != rooms*events+1 {
		t.Fatalf("%d attempts, want %d (one per event, and the retry)", len(calls), rooms*events+1)
	}
	for room, seqs := range firstAttempts(calls) {
		for i, seq := range seqs {
			if seq != i+1 {
				t.Fatalf("%s: first attempts in the order %v, want 1 to %d", room, seqs, events)
			}
		}
	}
	if last := calls[len(calls)-1]; last.event.ID != stuck {
		t.Fatalf("the last attempt is of %s, want the retry of %s: the failed delivery held back later ones", last.event.ID, stuck)
	}
	for id, dl := range tw.deliveries("we_1") {
		if dl.Status != DeliverySucceeded {
			t.Fatalf("delivery of %s is %s", id, dl.Status)
		}
	}
}
