package room

import (
	"bytes"
	"fmt"
	"rtcd/actors/core/coretest"
	"sort"
	"strings"
	"testing"

	"rtcd/actors/core"

	"github.com/goccy/go-json"
)

func testRoom() Room {
	return Room{
		ID: "room_1", ProjectID: "prj_1", Name: "standup", Status: RoomWaiting, Region: "global",
		MaxParticipants: 3, Metadata: json.RawMessage(`{"team":"core"}`), CreatedAt: coretest.T0, ExpiresAt: coretest.At(3600),
	}
}

// Room events, by name, as the room actor produces them.
func created(id string, sec int) roomEvent {
	return roomEvent{ParticipantCreated: &Participant{
		ID: id, RoomID: "room_1", Name: "name of " + id, Role: RolePublisher, Status: ParticipantCreated,
		CreatedAt: coretest.At(sec), ExpiresAt: coretest.At(sec + 600),
	}}
}

// connected is the retired connect event, as the release before wrote it.
func connected(id string, sec int) roomEvent {
	return roomEvent{ParticipantConnected: &participantConnected{ParticipantID: id, SessionID: "cs_" + id, At: coretest.At(sec)}}
}

// joinedAs is a recorded join of session, issued one second before it
// joins at sec.
func joinedAs(id, session string, sec int) roomEvent {
	return roomEvent{ParticipantJoined: &participantJoined{ParticipantID: id, SessionID: session, IssuedAt: coretest.At(sec - 1), At: coretest.At(sec)}}
}

func renewed(id, session string, sec int) roomEvent {
	return roomEvent{SessionRenewed: &participantRenewed{ParticipantID: id, SessionID: session, IssuedAt: coretest.At(sec - 1), At: coretest.At(sec)}}
}

func left(id string, sec int) roomEvent {
	return roomEvent{ParticipantLeft: &participantLeft{ParticipantID: id, At: coretest.At(sec), Reason: LeftReasonLeft}}
}

func removed(id string, sec int) roomEvent {
	return roomEvent{ParticipantRemoved: &participantRemoved{ParticipantID: id, At: coretest.At(sec)}}
}

func endingStarted(reason string, sec int) roomEvent {
	return roomEvent{RoomEndingStarted: &roomEndingStarted{Reason: reason, At: coretest.At(sec)}}
}

func ended(sec int) roomEvent { return roomEvent{RoomEnded: &roomEnded{At: coretest.At(sec)}} }

// summarize renders what a room's state means, one participant per line in
// id order, for table comparisons.
func summarize(s *roomState) string {
	var b strings.Builder
	fmt.Fprintf(&b, "room %s reason=%q ended=%s\n", s.Room.Status, s.Room.EndReason, coretest.Offset(s.Room.EndedAt))
	ids := make([]string, 0, len(s.Participants))
	for id := range s.Participants {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		p := s.Participants[id]
		fmt.Fprintf(&b, "%s %s connected=%s ended=%s session=%s issued=%s", id, p.Status, coretest.Offset(p.ConnectedAt), coretest.Offset(p.EndedAt),
			p.SessionID, coretest.Offset(p.SessionIssuedAt))
		if p.Usage != nil {
			fmt.Fprintf(&b, " usage=%s@%s", p.Usage.SessionID, coretest.Offset(p.Usage.StartedAt))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// checkRoomInvariants asserts what must hold after every event: connected
// is never recorded (it is a reservation, in memory only), usage is open
// exactly while joined, and an ended room has no open session.
func checkRoomInvariants(t *testing.T, s *roomState, after string) {
	t.Helper()
	for _, p := range s.Participants {
		if p.Status == ParticipantConnected {
			t.Fatalf("after %s: participant %s is recorded connected", after, p.ID)
		}
		if (p.Usage != nil) != (p.Status == ParticipantJoined) {
			t.Fatalf("after %s: participant %s is %s with usage %v", after, p.ID, p.Status, p.Usage)
		}
		if s.Room.Status == RoomEnded && (p.Status == ParticipantCreated || p.Status == ParticipantJoined || p.Status == ParticipantLeft) {
			t.Fatalf("after %s: participant %s is %s in an ended room", after, p.ID, p.Status)
		}
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
		want:   "room waiting reason=\"\" ended=-\n",
	},
	{
		name:   "created participants",
		events: []roomEvent{created("p1", 1), created("p2", 2)},
		want: "room waiting reason=\"\" ended=-\n" +
			"p1 created connected=- ended=- session= issued=-\n" +
			"p2 created connected=- ended=- session= issued=-\n",
	},
	{
		name:   "a retired connect leaves its time and session, never a status",
		events: []roomEvent{created("p1", 1), created("p2", 2), connected("p2", 3)},
		want: "room waiting reason=\"\" ended=-\n" +
			"p1 created connected=- ended=- session= issued=-\n" +
			"p2 created connected=+3 ended=- session=cs_p2 issued=+3\n",
	},
	{
		name:   "the first connect time stays",
		events: []roomEvent{created("p1", 1), connected("p1", 2), connected("p1", 5), joinedAs("p1", "cs_b", 9)},
		want: "room active reason=\"\" ended=-\n" +
			"p1 joined connected=+2 ended=- session=cs_b issued=+8 usage=cs_b@+9\n",
	},
	{
		name:   "a join without a connect on record starts usage and the room",
		events: []roomEvent{created("p1", 1), joinedAs("p1", "cs_a", 4)},
		want: "room active reason=\"\" ended=-\n" +
			"p1 joined connected=+4 ended=- session=cs_a issued=+3 usage=cs_a@+4\n",
	},
	{
		name:   "a renewal moves the session, not the usage",
		events: []roomEvent{created("p1", 1), joinedAs("p1", "cs_a", 4), renewed("p1", "cs_b", 8)},
		want: "room active reason=\"\" ended=-\n" +
			"p1 joined connected=+4 ended=- session=cs_b issued=+7 usage=cs_a@+4\n",
	},
	{
		name:   "a leave keeps the last session, so it never joins again",
		events: []roomEvent{created("p1", 1), joinedAs("p1", "cs_a", 4), left("p1", 9), connected("p1", 10)},
		want: "room active reason=\"\" ended=-\n" +
			"p1 left connected=+4 ended=- session=cs_p1 issued=+10\n",
	},
	{
		name:   "a removed participant: a retired connect changes nothing",
		events: []roomEvent{created("p1", 1), connected("p1", 2), removed("p1", 3), connected("p1", 4)},
		want: "room waiting reason=\"\" ended=-\n" +
			"p1 removed connected=+2 ended=+3 session=cs_p1 issued=+2\n",
	},
	{
		name:   "ending keeps sessions open",
		events: []roomEvent{created("p1", 1), joinedAs("p1", "cs_a", 2), endingStarted(EndReasonDeleted, 10)},
		want: "room ending reason=\"deleted\" ended=-\n" +
			"p1 joined connected=+2 ended=- session=cs_a issued=+1 usage=cs_a@+2\n",
	},
	{
		name: "ended closes open sessions, keeps removed ones",
		events: []roomEvent{
			created("p1", 1), joinedAs("p1", "cs_1", 2), created("p2", 3), connected("p2", 4), created("p3", 5),
			created("p4", 6), connected("p4", 7), removed("p4", 8),
			endingStarted(EndReasonExpired, 3600), left("p1", 3600), ended(3601),
		},
		want: "room ended reason=\"expired\" ended=+3601\n" +
			"p1 ended connected=+2 ended=+3601 session=cs_1 issued=+1\n" +
			"p2 ended connected=+4 ended=+3601 session=cs_p2 issued=+4\n" +
			"p3 ended connected=- ended=+3601 session= issued=-\n" +
			"p4 removed connected=+7 ended=+8 session=cs_p4 issued=+7\n",
	},
}

func TestRoomApply(t *testing.T) {
	for _, tc := range roomCases {
		t.Run(tc.name, func(t *testing.T) {
			s := newRoomState(testRoom())
			for i := range tc.events {
				coretest.MustApply(t, s, &tc.events[i])
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
	coretest.MustApply(t, s, &ev)
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
				coretest.MustApply(t, live, &tc.events[i])
			}
			want := core.Encode(live)
			for k := 0; k <= len(tc.events); k++ {
				s := newRoomState(testRoom())
				for i := 0; i < k; i++ {
					coretest.MustApply(t, s, coretest.RoundTrip(t, &tc.events[i]))
				}
				rec := coretest.RoundTrip(t, s) // the snapshot at k
				if rec.Participants == nil {
					t.Fatalf("snapshot at %d decodes with a nil participant map", k)
				}
				for i := k; i < len(tc.events); i++ {
					coretest.MustApply(t, rec, coretest.RoundTrip(t, &tc.events[i]))
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

// A snapshot written by the release before may hold participants
// connected, whose reservations are gone: each reads as what it was before
// that connect (created, or left when it had left), keeping its first
// connect and session, and the state says its records need writing again.
func TestRoomLoadedRetiresConnectedParticipants(t *testing.T) {
	old := []byte(`{"room":{"id":"room_1","project_id":"prj_1","status":"active","max_participants":3},"connected":2,"participants":{` +
		`"p1":{"id":"p1","status":"connected","connected_at":"2026-11-22T12:00:02Z","session_id":"cs_1","connect_expires_at":"2026-11-22T12:01:02Z"},` +
		`"p2":{"id":"p2","status":"connected","left_at":"2026-11-22T12:00:05Z","session_id":"cs_2"},` +
		`"p3":{"id":"p3","status":"joined","session_id":"cs_3","usage":{"session_id":"cs_3"}}}}`)
	var s roomState
	if err := json.Unmarshal(old, &s); err != nil {
		t.Fatal(err)
	}
	s.Loaded()
	if !s.retired {
		t.Fatal("a snapshot with connected participants is not marked retired")
	}
	for id, want := range map[string]string{"p1": ParticipantCreated, "p2": ParticipantLeft, "p3": ParticipantJoined} {
		if got := s.Participants[id].Status; got != want {
			t.Fatalf("%s reads as %s, want %s", id, got, want)
		}
	}
	if p := s.Participants["p1"]; p.SessionID != "cs_1" || !p.ConnectedAt.Equal(coretest.At(2)) {
		t.Fatalf("p1 lost its session or first connect: %+v", p)
	}
	if bytes.Contains(core.Encode(&s), []byte(`"connected"`)) {
		t.Fatalf("the state still encodes a connected count or status: %s", core.Encode(&s))
	}
	var fresh roomState
	if err := json.Unmarshal(core.Encode(newRoomState(testRoom())), &fresh); err != nil {
		t.Fatal(err)
	}
	fresh.Loaded()
	if fresh.retired {
		t.Fatal("a snapshot of this release is marked retired")
	}
}
