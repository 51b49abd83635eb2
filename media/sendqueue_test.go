package media

import (
	"strconv"
	"testing"
)

// TestSendQueue: the queue keeps order across growth and wrap-around,
// refuses past its bound without losing what it holds, allocates nothing
// until used, and lets go of a grown ring (and of every message it gave
// out) once it drains.
func TestSendQueue(t *testing.T) {
	const limit = 40 // not a power of two: the last doubling stops at the bound
	q := sendQueue{limit: limit}
	if q.ring != nil || q.len() != 0 {
		t.Fatalf("a new queue holds a ring of %d", len(q.ring))
	}
	if _, ok := q.pop(); ok {
		t.Fatal("pop from an empty queue")
	}
	msg := func(i int) []byte { return []byte(strconv.Itoa(i)) }
	next, taken := 0, 0
	take := func(k int) {
		t.Helper()
		for range k {
			m, ok := q.pop()
			if !ok || string(m) != strconv.Itoa(taken) {
				t.Fatalf("pop %d: %q, %v", taken, m, ok)
			}
			taken++
		}
	}
	put := func(k int) {
		t.Helper()
		for range k {
			if !q.push(msg(next)) {
				t.Fatalf("push %d refused with %d queued", next, q.len())
			}
			next++
		}
	}

	// A little traffic uses the smallest ring, and keeps it once drained.
	put(3)
	if len(q.ring) != sendQueueMinSlots {
		t.Fatalf("ring of %d for 3 messages", len(q.ring))
	}
	take(3)
	if len(q.ring) != sendQueueMinSlots {
		t.Fatalf("the smallest ring was released: %d", len(q.ring))
	}

	// Wrap the ring, then grow it while wrapped: order is kept.
	put(3)
	take(2)
	put(3) // 4 queued, starting at slot 1 of 4: the next push grows a wrapped ring
	put(20)
	if len(q.ring) != 32 || q.len() != 24 {
		t.Fatalf("ring %d, %d queued", len(q.ring), q.len())
	}
	take(5)
	put(limit - q.len()) // up to the bound: the ring stops at limit, not 64
	if len(q.ring) != limit || q.len() != limit {
		t.Fatalf("ring %d, %d queued at the bound", len(q.ring), q.len())
	}
	if q.push([]byte("over")) {
		t.Fatal("push past the bound accepted")
	}
	if q.len() != limit {
		t.Fatalf("a refused push changed the queue: %d", q.len())
	}
	for i, m := range q.ring {
		if m == nil {
			t.Fatalf("slot %d empty in a full ring", i)
		}
	}

	// Drain: every message in order, taken slots cleared, then the grown
	// ring released.
	take(limit - 1)
	for i, m := range q.ring {
		if m != nil && i != q.head {
			t.Fatalf("slot %d still holds %q after it was taken", i, m)
		}
	}
	take(1)
	if q.ring != nil || q.len() != 0 || taken != next {
		t.Fatalf("drained: ring %d, %d queued, %d of %d taken", len(q.ring), q.len(), taken, next)
	}

	// Usable again after a release and after clear.
	put(2)
	q.clear()
	if q.ring != nil || q.len() != 0 {
		t.Fatal("clear kept messages")
	}
	if _, ok := q.pop(); ok {
		t.Fatal("pop after clear")
	}
	taken = next
	put(1)
	take(1)
}
