package room

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-json"
	"rtcd/actors/core"
)

// t0 is the instant the test rooms are created.
var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

// mustApply applies one event and fails the test if it does not apply.
func mustApply[E any, S core.State[E]](t *testing.T, s S, e *E) {
	t.Helper()
	if err := s.Apply(e); err != nil {
		t.Fatal(err)
	}
}

// offset renders a time as seconds after t0, or "-" for the zero time.
func offset(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return fmt.Sprintf("%+d", int(t.Sub(t0)/time.Second))
}

// roundTrip passes v through its journal or snapshot encoding.
func roundTrip[T any](t *testing.T, v *T) *T {
	t.Helper()
	var out T
	if err := json.Unmarshal(core.Encode(v), &out); err != nil {
		t.Fatalf("decode %T: %v", v, err)
	}
	return &out
}

func testRoom() Room {
	return Room{
		ID: "room_1", ProjectID: "prj_1", Name: "standup", Status: RoomWaiting, Region: "global",
		MaxParticipants: 3, Metadata: json.RawMessage(`{"team":"core"}`), CreatedAt: t0, ExpiresAt: at(3600),
	}
}

// Room events, by name, as the room actor produces them.
func created(id string, sec int) roomEvent {
	return roomEvent{ParticipantCreated: &Participant{
		ID: id, RoomID: "room_1", Name: "name of " + id, Role: RolePublisher, Status: ParticipantCreated,
		CreatedAt: at(sec), ExpiresAt: at(sec + 600),
	}}
}

func connected(id string, sec int) roomEvent {
	return roomEvent{ParticipantConnected: &participantConnected{ParticipantID: id, SessionID: "cs_" + id, At: at(sec)}}
}

func removed(id string, sec int) roomEvent {
	return roomEvent{ParticipantRemoved: &participantRemoved{ParticipantID: id, At: at(sec)}}
}

func endingStarted(reason string, sec int) roomEvent {
	return roomEvent{RoomEndingStarted: &roomEndingStarted{Reason: reason, At: at(sec)}}
}

func ended(sec int) roomEvent { return roomEvent{RoomEnded: &roomEnded{At: at(sec)}} }

// summarize renders what a room's state means, one participant per line in
// id order, for table comparisons.
func summarize(s *roomState) string {
	var b strings.Builder
	fmt.Fprintf(&b, "room %s reason=%q ended=%s connected=%d\n", s.Room.Status, s.Room.EndReason, offset(s.Room.EndedAt), s.Connected)
	ids := make([]string, 0, len(s.Participants))
	for id := range s.Participants {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		p := s.Participants[id]
		fmt.Fprintf(&b, "%s %s connected=%s ended=%s\n", id, p.Status, offset(p.ConnectedAt), offset(p.EndedAt))
	}
	return b.String()
}

// checkRoomInvariants asserts what must hold after every event: Connected
// is exactly the number of participants holding a cap slot, and an ended
// room has no open session.
func checkRoomInvariants(t *testing.T, s *roomState, after string) {
	t.Helper()
	n := 0
	for _, p := range s.Participants {
		if p.counts() {
			n++
		}
		if s.Room.Status == RoomEnded && (p.Status == ParticipantCreated || p.Status == ParticipantConnected) {
			t.Fatalf("after %s: participant %s is %s in an ended room", after, p.ID, p.Status)
		}
	}
	if n != s.Connected {
		t.Fatalf("after %s: Connected=%d but %d participants hold a slot", after, s.Connected, n)
	}
}

func eventName(e roomEvent) string {
	b := core.Encode(&e)
	name, _, _ := strings.Cut(strings.TrimPrefix(string(b), `{"`), `"`)
	return name
}

var roomCases = []struct {
	name   string
	events []roomEvent
	want   string
}{
	{
		name:   "new room",
		events: nil,
		want:   "room waiting reason=\"\" ended=- connected=0\n",
	},
	{
		name:   "created participants hold no slot",
		events: []roomEvent{created("p1", 1), created("p2", 2)},
		want: "room waiting reason=\"\" ended=- connected=0\n" +
			"p1 created connected=- ended=-\n" +
			"p2 created connected=- ended=-\n",
	},
	{
		name:   "connect takes a slot",
		events: []roomEvent{created("p1", 1), created("p2", 2), connected("p2", 3)},
		want: "room waiting reason=\"\" ended=- connected=1\n" +
			"p1 created connected=- ended=-\n" +
			"p2 connected connected=+3 ended=-\n",
	},
	{
		name:   "reconnect keeps its one slot and first connect time",
		events: []roomEvent{created("p1", 1), connected("p1", 2), connected("p1", 5), connected("p1", 9)},
		want: "room waiting reason=\"\" ended=- connected=1\n" +
			"p1 connected connected=+2 ended=-\n",
	},
	{
		name:   "removing a connected participant frees its slot",
		events: []roomEvent{created("p1", 1), connected("p1", 2), created("p2", 3), connected("p2", 4), removed("p1", 5)},
		want: "room waiting reason=\"\" ended=- connected=1\n" +
			"p1 removed connected=+2 ended=+5\n" +
			"p2 connected connected=+4 ended=-\n",
	},
	{
		name:   "removing a never connected participant frees nothing",
		events: []roomEvent{created("p1", 1), connected("p1", 2), created("p2", 3), removed("p2", 4)},
		want: "room waiting reason=\"\" ended=- connected=1\n" +
			"p1 connected connected=+2 ended=-\n" +
			"p2 removed connected=- ended=+4\n",
	},
	{
		name:   "a removed participant cannot reconnect",
		events: []roomEvent{created("p1", 1), connected("p1", 2), removed("p1", 3), connected("p1", 4)},
		want: "room waiting reason=\"\" ended=- connected=0\n" +
			"p1 removed connected=+2 ended=+3\n",
	},
	{
		name:   "ending keeps sessions open",
		events: []roomEvent{created("p1", 1), connected("p1", 2), endingStarted(EndReasonDeleted, 10)},
		want: "room ending reason=\"deleted\" ended=- connected=1\n" +
			"p1 connected connected=+2 ended=-\n",
	},
	{
		name: "ended closes open sessions, keeps removed ones, frees every slot",
		events: []roomEvent{
			created("p1", 1), connected("p1", 2), created("p2", 3), connected("p2", 4), created("p3", 5),
			created("p4", 6), connected("p4", 7), removed("p4", 8),
			endingStarted(EndReasonExpired, 3600), ended(3601),
		},
		want: "room ended reason=\"expired\" ended=+3601 connected=0\n" +
			"p1 ended connected=+2 ended=+3601\n" +
			"p2 ended connected=+4 ended=+3601\n" +
			"p3 ended connected=- ended=+3601\n" +
			"p4 removed connected=+7 ended=+8\n",
	},
	{
		name:   "a full room: three of three connected",
		events: []roomEvent{created("p1", 1), created("p2", 1), created("p3", 1), connected("p1", 2), connected("p2", 2), connected("p3", 2)},
		want: "room waiting reason=\"\" ended=- connected=3\n" +
			"p1 connected connected=+2 ended=-\n" +
			"p2 connected connected=+2 ended=-\n" +
			"p3 connected connected=+2 ended=-\n",
	},
}

func TestRoomApply(t *testing.T) {
	for _, tc := range roomCases {
		t.Run(tc.name, func(t *testing.T) {
			s := newRoomState(testRoom())
			for i := range tc.events {
				mustApply(t, s, &tc.events[i])
				checkRoomInvariants(t, s, fmt.Sprintf("event %d (%s)", i, eventName(tc.events[i])))
			}
			if got := summarize(s); got != tc.want {
				t.Fatalf("state:\n%s\nwant:\n%s", got, tc.want)
			}
			// The room's own record is untouched by participant events.
			if s.Room.ID != "room_1" || s.Room.MaxParticipants != 3 || string(s.Room.Metadata) != `{"team":"core"}` {
				t.Fatalf("room record changed: %+v", s.Room)
			}
		})
	}
}

func TestRoomApplyCopiesTheCreatedParticipant(t *testing.T) {
	s := newRoomState(testRoom())
	ev := created("p1", 1)
	mustApply(t, s, &ev)
	ev.ParticipantCreated.Status = "tampered"
	if s.Participants["p1"].Status != ParticipantCreated {
		t.Fatal("the state aliases the event's participant")
	}
}

// TestRoomReplayEquivalence: for every case and every point k at which a
// snapshot could have been taken, recovering (decode the snapshot of the
// state after k events, then replay the rest as decoded from the journal)
// gives the state that applying every event at run time gave.
func TestRoomReplayEquivalence(t *testing.T) {
	for _, tc := range roomCases {
		t.Run(tc.name, func(t *testing.T) {
			live := newRoomState(testRoom())
			for i := range tc.events {
				mustApply(t, live, &tc.events[i])
			}
			want := core.Encode(live)
			for k := 0; k <= len(tc.events); k++ {
				s := newRoomState(testRoom())
				for i := 0; i < k; i++ {
					mustApply(t, s, roundTrip(t, &tc.events[i]))
				}
				rec := roundTrip(t, s) // the snapshot at k
				if rec.Participants == nil {
					t.Fatalf("snapshot at %d decodes with a nil participant map", k)
				}
				for i := k; i < len(tc.events); i++ {
					mustApply(t, rec, roundTrip(t, &tc.events[i]))
					checkRoomInvariants(t, rec, fmt.Sprintf("replaying event %d after a snapshot at %d", i, k))
				}
				if got := core.Encode(rec); !bytes.Equal(got, want) {
					t.Fatalf("snapshot at %d + replay:\n%s\nwant (run time):\n%s", k, got, want)
				}
				if summarize(rec) != summarize(live) {
					t.Fatalf("snapshot at %d + replay:\n%s\nwant:\n%s", k, summarize(rec), summarize(live))
				}
			}
		})
	}
}
