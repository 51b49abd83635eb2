package actors

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/goccy/go-json"
	"rtcd/actors/room"
	"rtcd/apierr"
	"rtcd/ids"
	"rtcd/internal/testtools"
	"rtcd/internal/walgate"
	"rtcd/persistence"
)

// TestRoomMailboxBoundSheds floods a real room mailbox. The room actor is
// stopped in the middle of a command by the disk: the WAL sync is held and
// the store's sync queue (one batch here) is full, so its Commit blocks.
// Then roomMailboxCapacity real commands queue up behind it, and:
//   - one more request is shed at once with 503 and Retry-After: 1;
//   - the sweeper does not add a sweep to the full mailbox;
//   - media reports are still accepted without waiting, and applied once
//     the room runs again.
//
// When the sync completes, the room answers every queued command.
func TestRoomMailboxBoundSheds(t *testing.T) {
	gate := walgate.Wrap(vfs.Default)
	e, clk, caller := newTestEngineWith(t, persistence.Options{FS: gate.FS, SyncQueueCapacity: 1}, nil)
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
	tok := decodeToken(t, res.Body)
	res, aerr = e.Connect(&ConnectParams{Token: &tok}, "127.0.0.1")
	if aerr != nil {
		t.Fatal(aerr)
	}
	var cs struct {
		SessionID   string `json:"session_id"`
		Participant struct {
			ID string `json:"id"`
		} `json:"participant"`
	}
	if err := json.Unmarshal(res.Body, &cs); err != nil {
		t.Fatal(err)
	}
	rh, _ := e.room(roomID)

	// Stop the room actor inside a Commit: the syncer holds one batch, the
	// queue the next, and the room's next Commit waits.
	gate.Hold()
	var creates []<-chan answer
	for i := 0; i < 3; i++ {
		creates = append(creates, ask(func() (Result, *apierr.Error) {
			return e.CreateParticipant(caller, roomID, &ParticipantParams{}, nil)
		}))
	}
	testtools.AwaitChanSend(t, waitTimeout, "rtcd/persistence.(*Store).Commit", "rtcd/actors/room.(*roomActor).createParticipant")

	// Flood it with real commands (removals of participants it does not
	// have) until every one is either queued, its caller waiting for the
	// answer, or refused.
	const flood = roomMailboxCapacity
	var refused atomic.Int64
	answers := make(chan answer, flood)
	for i := 0; i < flood; i++ {
		go func() {
			res, aerr := e.RemoveParticipant(caller, roomID, ids.New(ids.Participant))
			if aerr != nil && aerr.Code == apierr.ServiceUnavailable {
				refused.Add(1)
			}
			answers <- answer{res, aerr}
		}()
	}
	waiting := func() int {
		return testtools.Parked("select", "rtcd/actors.(*Engine).ask", "rtcd/actors.(*Engine).RemoveParticipant")
	}
	waitUntil(t, "the mailbox fills", func() bool { return rh.depth.Load() >= roomMailboxCapacity })
	// Reading every goroutine's stack is slow with thousands of them: only
	// now, when (nearly) all have settled.
	waitUntil(t, "every flooding request queued or refused", func() bool {
		return waiting()+int(refused.Load()) == flood
	})

	// Past the bound: shed at once, 503 with Retry-After.
	_, aerr = e.RemoveParticipant(caller, roomID, ids.New(ids.Participant))
	if aerr == nil || apierr.StatusOf(aerr) != 503 || aerr.RetryAfterSeconds != 1 {
		t.Fatalf("a request to a room with a full mailbox: %v, want 503 with Retry-After 1", aerr)
	}

	// The sweeper skips the full room.
	before := rh.depth.Load()
	e.sweepRooms()
	if after := rh.depth.Load(); after != before {
		t.Fatalf("the sweeper queued %d messages to a full room", after-before)
	}

	// Media reports are neither blocked nor refused: a join for the
	// connected participant and a presence snapshot that shows it.
	reported := make(chan struct{})
	go func() {
		join := room.MediaJoin{SessionID: cs.SessionID, ProjectID: caller.ProjectID, RoomID: roomID, ParticipantID: cs.Participant.ID, At: clk.Now()}
		e.MediaJoined(join)
		e.MediaPresence(room.MediaPresence{NodeID: "test", At: clk.Now(), Sessions: []room.MediaJoin{join}})
		close(reported)
	}()
	awaitSignal(t, reported, "media reports to a full room returned")
	if after := rh.depth.Load(); after != before+2 {
		t.Fatalf("mailbox depth %d after two media reports, want %d: they must be queued, not dropped", after, before+2)
	}

	// The disk catches up: the room answers everything queued and applies the join.
	gate.Release()
	for i, c := range creates {
		if a := awaitAnswer(t, c, "a participant creation"); a.err != nil {
			t.Fatalf("creation %d: %v", i, a.err)
		}
	}
	for i := 0; i < flood; i++ {
		var a answer
		select {
		case a = <-answers:
		case <-time.After(waitTimeout):
			t.Fatalf("%d of %d flooding requests unanswered", flood-i, flood)
		}
		if a.err == nil || (a.err.Code != apierr.ParticipantNotFound && a.err.Code != apierr.ServiceUnavailable) {
			t.Fatalf("a removal of an unknown participant answered %d, %v", a.res.Status, a.err)
		}
	}
	statusOf := statusReader(t)
	waitUntil(t, "the join reported while the mailbox was full is applied", func() bool {
		return statusOf(e.GetParticipant(caller, roomID, cs.Participant.ID)) == room.ParticipantJoined
	})
	waitUntil(t, "the mailbox drains", func() bool { return rh.depth.Load() == 0 })
}
