package actors

import (
	"testing"
	"time"
)

// TestRoomMailboxBoundSheds: a room's mailbox grows on demand, so its bound
// is enforced by the senders: with roomMailboxCapacity commands queued, a
// request gets 503 with Retry-After instead of queueing more; the depth
// counter follows the real mailbox back to zero.
func TestRoomMailboxBoundSheds(t *testing.T) {
	e, _, caller := newTestEngine(t)
	res, aerr := e.CreateRoom(caller, &RoomParams{}, nil)
	if aerr != nil {
		t.Fatal(aerr)
	}
	roomID := decodeID(t, res.Body)
	if _, aerr := e.CreateParticipant(caller, roomID, &ParticipantParams{}, nil); aerr != nil {
		t.Fatal(aerr)
	}
	rh, _ := e.room(roomID)
	deadline := time.Now().Add(5 * time.Second)
	for rh.depth.Load() != 0 { // every message posted was also received
		if time.Now().After(deadline) {
			t.Fatalf("room mailbox depth stays at %d with nothing queued", rh.depth.Load())
		}
		time.Sleep(time.Millisecond)
	}

	rh.depth.Add(roomMailboxCapacity) // as if that many commands were waiting
	_, aerr = e.CreateParticipant(caller, roomID, &ParticipantParams{}, nil)
	if aerr == nil || aerr.Code != "service_unavailable" || aerr.RetryAfterSeconds != 1 {
		t.Fatalf("a request to a room with a full mailbox: %v, want service_unavailable with Retry-After 1", aerr)
	}
	rh.depth.Add(-roomMailboxCapacity)
	if _, aerr := e.CreateParticipant(caller, roomID, &ParticipantParams{}, nil); aerr != nil {
		t.Fatalf("after the queue drained: %v", aerr)
	}
}
