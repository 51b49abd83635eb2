package room

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"rtcd/actors/core"
	"rtcd/internal/walgate"
)

// A repeated DELETE of a participant or of the room, arriving while the
// first one's batch waits for its fsync, changes nothing, but must not be
// answered before that batch is durable: a crash could then undo what the
// repeat acknowledged (the rule the repeat of a key's revocation follows).
// Found by the crash simulation (package sim): the repeats were answered
// at once.
func TestRepeatedDeleteIsAnsweredOnceTheFirstIsDurable(t *testing.T) {
	gate := walgate.Wrap(vfs.NewMem())
	c := newConnectRoom(t, connectCase{events: []roomEvent{created("p1", 1)}, fs: gate.FS})
	t.Cleanup(gate.Release) // before the store closes (cleanups run last first)

	send := func(run func(*core.Envelope)) <-chan core.Reply {
		req, answer := core.NewEnvelope(nil)
		run(req)
		return answer
	}
	caller := core.Caller{ProjectID: "prj_1", ActorType: "api_key", ActorID: "key_1"}
	gate.Hold()
	answers := map[string]<-chan core.Reply{}
	for _, name := range []string{"first removal", "repeated removal"} {
		answers[name] = send(func(r *core.Envelope) {
			c.room.removeParticipant(RemoveParticipant{Caller: caller, ParticipantID: "p1"}, r)
		})
	}
	for _, name := range []string{"first deletion", "repeated deletion"} {
		answers[name] = send(func(r *core.Envelope) { c.room.deleteRoom(Delete{Caller: caller}, r) })
	}
	for name, answer := range answers {
		select {
		case r := <-answer:
			t.Fatalf("the %s was answered (%d %s) before the first one's batch was durable", name, r.Status, r.Body)
		default:
		}
	}
	gate.Release()
	for name, answer := range answers {
		select {
		case r := <-answer:
			if r.Err != nil || r.Status != 200 {
				t.Fatalf("the %s: %d %v", name, r.Status, r.Err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the %s was not answered once durable", name)
		}
	}
}

// A repeated join report of a session, arriving while the first report's
// record waits for its fsync, is admitted only once that record is
// durable: the node serves nothing a crash could take off the record.
// Found by the crash simulation (package sim): the repeat was admitted at
// once.
func TestRepeatedJoinIsAdmittedOnceTheFirstIsDurable(t *testing.T) {
	gate := walgate.Wrap(vfs.NewMem())
	c := newConnectRoom(t, connectCase{events: []roomEvent{created("p1", 1)}, fs: gate.FS})
	t.Cleanup(gate.Release) // before the store closes (cleanups run last first)

	s := c.mustConnect("p1")
	gate.Hold()
	c.room.join(c.report(s))
	c.room.join(c.report(s)) // the node asks again (a second socket, a lost answer)
	select {
	case got := <-c.media.calls:
		t.Fatalf("the media engine was told %q before the join was durable", got)
	case <-time.After(100 * time.Millisecond):
	}
	gate.Release()
	for range 2 {
		if got, want := c.media.next(t), "admit p1 "+s.SessionID; got != want {
			t.Fatalf("media command %q, want %q", got, want)
		}
	}
}
