package room

import (
	"fmt"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/goccy/go-json"
	"rtcd/actors/core"
	"rtcd/persistence"
)

// The end of a room closes its participants' sessions in the order they
// were created, never in Go's map order: their participant.left events are
// numbered that way, every time. The ids sort in another order than the
// creation, so an id-ordered loop fails, and so does a map-ordered one
// (over ten rounds of twelve participants, all but surely).
func TestRoomEndNumbersWebhookEventsInCreationOrder(t *testing.T) {
	const participants = 12
	var creation, want []string
	var events []roomEvent
	for i := 0; i < participants; i++ {
		id := fmt.Sprintf("p%02d", (i*7)%participants) // p00 p07 p02 p09 ...
		creation = append(creation, id)
		events = append(events, created(id, i+1), joinedAs(id, "cs_"+id, i+2))
		// Each leave is numbered, then its usage.finalized (the joins of
		// these journals carry no numbers).
		want = append(want, fmt.Sprintf("%s#%d", id, 2*i+1))
	}
	for round := 0; round < 10; round++ {
		c := newConnectRoom(t, connectCase{events: events})
		req, answer := core.NewEnvelope(Delete{Caller: core.Caller{ProjectID: "prj_1", ActorType: "api_key", ActorID: "key_1"}})
		c.room.deleteRoom(req.Msg.(Delete), req)
		if r := <-answer; r.Err != nil {
			t.Fatalf("delete: %v", r.Err)
		}
		var left []string
		err := c.env.Store.Scan([]byte(persistence.PrefixOutbox), 0, func(_, value []byte) bool {
			var ev core.OutboxEvent
			if err := json.Unmarshal(value, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Type == core.EventParticipantLeft {
				left = append(left, fmt.Sprintf("%v#%v", ev.Data["participant_id"], ev.Data["sequence"]))
			}
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(left) != fmt.Sprint(want) {
			t.Fatalf("round %d: participant.left events %v, want %v (creation order %v)", round, left, want, creation)
		}
	}
}

// What recovery would rebuild (Replay) is the live room's state (ReadState)
// once its batches are applied: the journal holds everything the room
// holds, after a connect (which records nothing), its join and the room's
// end.
func TestReplayIsTheLiveState(t *testing.T) {
	c := newConnectRoom(t, connectCase{events: []roomEvent{created("p1", 1), created("p2", 2)}})
	same := func(when string) {
		t.Helper()
		req, answer := core.NewEnvelope(ReadState{})
		c.room.Receive(&readContext{msg: req})
		live := (<-answer).Value.([]byte)
		replayed, err := Replay(c.env.Store, "room_1")
		if err != nil {
			t.Fatal(err)
		}
		if string(live) != string(replayed) {
			t.Fatalf("%s: replay differs from the live state:\nlive     %s\nreplayed %s", when, live, replayed)
		}
	}
	same("after recovery")
	s := c.mustConnect("p1")
	same("after a connect")
	c.join(s)
	same("after its join")
	req, answer := core.NewEnvelope(Delete{})
	c.room.deleteRoom(req.Msg.(Delete), req)
	<-answer
	same("after the end")
}

// readContext is the actor context of one message delivered by hand.
type readContext struct {
	actor.Context // nil: Receive uses only Message for an envelope
	msg           any
}

func (c *readContext) Message() any { return c.msg }
