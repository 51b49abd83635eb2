package media

// sendQueueMinSlots is the ring a socket's send queue starts with, and
// keeps once it has been used: enough for the few messages an idle room
// sends at once (a pong, a participant joined or left), at 24 bytes a
// slot.
const sendQueueMinSlots = 4

// sendQueue is one socket's FIFO of encoded messages, at most limit long.
// Its ring is allocated on the first push, doubles when full (from
// sendQueueMinSlots up to limit), and is released when it drains after it
// grew past sendQueueMinSlots, so a burst for a slow reader leaves nothing
// behind and an idle socket holds at most sendQueueMinSlots slots (a
// channel of limit slots would hold them all, always). Messages are shared
// between the sockets of a room, so the queue never reuses or frees them;
// a taken slot is cleared, so the queue never keeps a message alive.
//
// It is not safe for concurrent use: conn.mu guards it.
type sendQueue struct {
	ring  [][]byte
	head  int // index in ring of the oldest message
	n     int // messages queued
	limit int // most messages queued; push refuses beyond
}

// len is the number of messages queued.
func (q *sendQueue) len() int { return q.n }

// push appends msg, or reports false when limit messages are queued.
func (q *sendQueue) push(msg []byte) bool {
	if q.n >= q.limit {
		return false
	}
	if q.n == len(q.ring) {
		q.grow()
	}
	q.ring[(q.head+q.n)%len(q.ring)] = msg
	q.n++
	return true
}

// grow doubles the ring (at least sendQueueMinSlots, at most limit slots),
// keeping the order.
func (q *sendQueue) grow() {
	size := min(max(2*len(q.ring), sendQueueMinSlots), q.limit)
	ring := make([][]byte, size)
	copied := copy(ring, q.ring[q.head:])
	copy(ring[copied:], q.ring[:q.head])
	q.ring, q.head = ring, 0
}

// pop takes the oldest message, or reports false when none is queued.
func (q *sendQueue) pop() ([]byte, bool) {
	if q.n == 0 {
		return nil, false
	}
	msg := q.ring[q.head]
	q.ring[q.head] = nil
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	if q.n == 0 {
		q.head = 0
		if len(q.ring) > sendQueueMinSlots {
			q.ring = nil // the burst is over: its ring goes
		}
	}
	return msg, true
}

// clear drops every message and the ring.
func (q *sendQueue) clear() {
	q.ring, q.head, q.n = nil, 0, 0
}
