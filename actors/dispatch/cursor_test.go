package dispatch

import (
	"testing"

	"rtcd/clock"
	"rtcd/webhookdelivery"
)

// A worker's scans start past the deleted entries at the head of its due
// index, at the first entry the last scan found; an entry added below
// that point is still found: new deliveries the fan-out adds before a
// retry due later, and a manual retry made due now.
func TestScansFindEntriesAddedBelowWhereTheyStart(t *testing.T) {
	clk := clock.NewFake(testStart)
	var failFirst string
	sender := &recordingSender{}
	tw := newTestWorld(t, clk, sender, Settings{ScheduleSeconds: []int{60, 60}})
	tw.endpoint("we_1", "whsec_cursor")
	w := tw.worker("we_1")
	sender.answer = func(c call, _ int) webhookdelivery.Attempt {
		if c.event.ID == failFirst {
			return failure()
		}
		return webhookdelivery.Attempt{StatusCode: 204, Success: true}
	}
	attempts := func(eventID string) int { return tw.deliveries("we_1")[eventID].AttemptCount }

	a := tw.roomEvent("room_1", 1)
	failFirst = a
	b, c := tw.roomEvent("room_1", 2), tw.roomEvent("room_1", 3)
	tw.d.Step()
	if attempts(a) != 1 || attempts(b) != 1 || attempts(c) != 1 {
		t.Fatalf("attempts %d %d %d, want one each", attempts(a), attempts(b), attempts(c))
	}
	retryAt := tw.deliveries("we_1")[a].NextAttemptAt
	tw.d.Step() // nothing due: the scan finds only the retry, a minute ahead
	if w.scanFrom != retryAt.UnixNano() {
		t.Fatalf("scans start at %d, want the retry's due time %d", w.scanFrom, retryAt.UnixNano())
	}

	// New deliveries are due now, before the retry.
	d, e := tw.roomEvent("room_1", 4), tw.roomEvent("room_1", 5)
	tw.d.Step()
	if attempts(d) != 1 || attempts(e) != 1 {
		t.Fatalf("deliveries fanned out below the scans' start were attempted %d and %d times, want once", attempts(d), attempts(e))
	}

	// A manual retry makes the failed one due now, below the retry time.
	failFirst = ""
	if r := w.answerRetry(tw.deliveries("we_1")[a].ID); r.Err != nil {
		t.Fatal(r.Err)
	}
	tw.d.Step()
	if dl := tw.deliveries("we_1")[a]; dl.Status != DeliverySucceeded || dl.AttemptCount != 2 {
		t.Fatalf("after the manual retry: %s with %d attempts, want succeeded at the second", dl.Status, dl.AttemptCount)
	}
}
