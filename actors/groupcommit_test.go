package actors

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"rtcd/actors/room"
	"rtcd/apierr"
	"rtcd/internal/walgate"
	"rtcd/persistence"
)

// waitTimeout bounds every wait of these tests for something that must
// happen promptly; waitPollInterval is how often a condition is read.
const (
	waitTimeout      = 10 * time.Second
	waitPollInterval = time.Millisecond
)

// waitUntil reads cond until it holds, failing the test after waitTimeout.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, waitTimeout)
		}
		time.Sleep(waitPollInterval)
	}
}

// answer is an engine call's outcome, sent from the goroutine that waited for it.
type answer struct {
	res Result
	err *apierr.Error
}

// ask runs call on its own goroutine; its answer arrives on the channel.
func ask(call func() (Result, *apierr.Error)) <-chan answer {
	c := make(chan answer, 1)
	go func() {
		res, err := call()
		c <- answer{res, err}
	}()
	return c
}

// awaitSignal waits for a value on c, or for c to be closed.
func awaitSignal(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(waitTimeout):
		t.Fatalf("%s: not within %s", what, waitTimeout)
	}
}

func awaitAnswer(t *testing.T, c <-chan answer, what string) answer {
	t.Helper()
	select {
	case a := <-c:
		return a
	case <-time.After(waitTimeout):
		t.Fatalf("%s: no answer within %s", what, waitTimeout)
		return answer{}
	}
}

// statusReader returns a function that reads the "status" field of a
// record the API returns, failing t on an error.
func statusReader(t *testing.T) func(body []byte, aerr *apierr.Error) string {
	return func(body []byte, aerr *apierr.Error) string {
		t.Helper()
		if aerr != nil {
			t.Fatalf("read: %v", aerr)
		}
		var v struct {
			Status string `json:"status"`
		}
		if err := jsonUnmarshal(body, &v); err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
		return v.Status
	}
}

// TestRoomActorDoesNotWaitForFsync: group commit as storage.md promises it.
// With the WAL fsync held back, a room applies a participant's removal and
// then, without waiting for that fsync, the room's deletion: both are
// visible to readers while neither caller has its reply. When the fsync
// completes, both replies go out.
func TestRoomActorDoesNotWaitForFsync(t *testing.T) {
	gate := walgate.Wrap(vfs.Default)
	e, _, caller := newTestEngineWith(t, persistence.Options{FS: gate.FS}, nil)
	t.Cleanup(gate.Release) // before the engine and store close
	res, aerr := e.CreateRoom(caller, &RoomParams{}, nil)
	if aerr != nil {
		t.Fatal(aerr)
	}
	roomID := decodeID(t, res.Body)
	res, aerr = e.CreateParticipant(caller, roomID, &ParticipantParams{}, nil)
	if aerr != nil {
		t.Fatal(aerr)
	}
	partID := decodeID(t, res.Body)
	statusOf := statusReader(t)

	gate.Hold()
	removed := ask(func() (Result, *apierr.Error) { return e.RemoveParticipant(caller, roomID, partID) })
	waitUntil(t, "the removal is visible to a read", func() bool {
		return statusOf(e.GetParticipant(caller, roomID, partID)) == room.ParticipantRemoved
	})
	awaitSignal(t, gate.Waiting(), "the removal's WAL sync reaches the gate")
	deleted := ask(func() (Result, *apierr.Error) { return e.DeleteRoom(caller, roomID) })
	waitUntil(t, "the room's deletion, the second command, is applied while the first one's fsync is held", func() bool {
		return statusOf(e.GetRoom(caller, roomID)) == room.RoomEnded
	})
	select {
	case a := <-removed:
		t.Fatalf("the removal was answered (%d, %v) before its batch was durable", a.res.Status, a.err)
	case a := <-deleted:
		t.Fatalf("the deletion was answered (%d, %v) before its batch was durable", a.res.Status, a.err)
	default:
	}

	gate.Release()
	for what, c := range map[string]<-chan answer{"removal": removed, "deletion": deleted} {
		if a := awaitAnswer(t, c, what+" once its fsync completed"); a.err != nil || a.res.Status != 200 {
			t.Fatalf("%s answered %d, %v; want 200", what, a.res.Status, a.err)
		}
	}
}
