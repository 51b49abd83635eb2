package project

import (
	"bytes"
	"fmt"
	"rtcd/actors/core/coretest"
	"sort"
	"strings"
	"testing"

	"rtcd/actors/core"
	"rtcd/scopes"

	"github.com/goccy/go-json"
)

func testProject() core.Project {
	return core.Project{ID: "prj_1", AccountID: "acct_1", Name: "Default project", Status: core.ProjectActive, CreatedAt: coretest.T0}
}

func roomOpened(id string) projectEvent {
	return projectEvent{RoomCreated: &roomRef{RoomID: id}}
}

func roomShut(id string) projectEvent {
	return projectEvent{RoomClosed: &roomRef{RoomID: id}}
}

func keyMade(id string, sec int) projectEvent {
	var hash [32]byte
	copy(hash[:], id)
	hash[31] = 0xff
	return projectEvent{APIKeyCreated: &APIKey{
		ID: id, Name: "key " + id, Scopes: uint32(scopes.All), Last4: "abcd", Hash: hash,
		CreatedAt: coretest.At(sec), CreatedBy: core.Actor{Type: "operator", ID: "rtcd init"},
	}}
}

func keyRevoked(id string, sec int) projectEvent {
	return projectEvent{APIKeyRevoked: &apiKeyRevoke{KeyID: id, At: coretest.At(sec)}}
}

func keyUsed(id string, sec int) projectEvent {
	return projectEvent{APIKeyUsed: &apiKeyUsed{KeyID: id, At: coretest.At(sec)}}
}

func summarizeProject(s *projectState) string {
	var b strings.Builder
	rooms := make([]string, 0, len(s.ActiveRooms))
	for id := range s.ActiveRooms {
		rooms = append(rooms, id)
	}
	sort.Strings(rooms)
	fmt.Fprintf(&b, "active rooms %v; active keys %d\n", rooms, s.ActiveKeys)
	keys := make([]string, 0, len(s.Keys))
	for id := range s.Keys {
		keys = append(keys, id)
	}
	sort.Strings(keys)
	for _, id := range keys {
		fmt.Fprintf(&b, "%s revoked=%s used=%s\n", id, coretest.Offset(s.Keys[id].RevokedAt), coretest.Offset(s.Keys[id].LastUsedAt))
	}
	return b.String()
}

func checkProjectInvariants(t *testing.T, s *projectState, after string) {
	t.Helper()
	n := 0
	for _, k := range s.Keys {
		if k.RevokedAt.IsZero() {
			n++
		}
	}
	if n != s.ActiveKeys {
		t.Fatalf("after %s: ActiveKeys=%d but %d keys are not revoked", after, s.ActiveKeys, n)
	}
}

var projectCases = []struct {
	name   string
	events []projectEvent
	want   string
}{
	{"new project", nil, "active rooms []; active keys 0\n"},
	{"rooms open and close", []projectEvent{roomOpened("r1"), roomOpened("r2"), roomOpened("r3"), roomShut("r2")},
		"active rooms [r1 r3]; active keys 0\n"},
	{"closing twice or closing an unknown room changes nothing", []projectEvent{roomOpened("r1"), roomShut("r1"), roomShut("r1"), roomShut("r9")},
		"active rooms []; active keys 0\n"},
	{"keys", []projectEvent{keyMade("k1", 1), keyMade("k2", 2), keyMade("k3", 3)},
		"active rooms []; active keys 3\nk1 revoked=- used=-\nk2 revoked=- used=-\nk3 revoked=- used=-\n"},
	{"revocation is counted once and keeps its first time", []projectEvent{keyMade("k1", 1), keyMade("k2", 2), keyRevoked("k1", 5), keyRevoked("k1", 9)},
		"active rooms []; active keys 1\nk1 revoked=+5 used=-\nk2 revoked=- used=-\n"},
	{"mixed", []projectEvent{keyMade("k1", 1), roomOpened("r1"), roomOpened("r2"), keyMade("k2", 2), roomShut("r1"), keyRevoked("k2", 3), roomOpened("r3")},
		"active rooms [r2 r3]; active keys 1\nk1 revoked=- used=-\nk2 revoked=+3 used=-\n"},
	{"a use sets last use; later uses move it forward", []projectEvent{keyMade("k1", 1), keyMade("k2", 2), keyUsed("k1", 70), keyUsed("k1", 200)},
		"active rooms []; active keys 2\nk1 revoked=- used=+200\nk2 revoked=- used=-\n"},
	{"a use journaled late never moves last use back", []projectEvent{keyMade("k1", 1), keyUsed("k1", 200), keyUsed("k1", 70)},
		"active rooms []; active keys 1\nk1 revoked=- used=+200\n"},
	{"a revoked key keeps its last use and records a use from before the revocation", []projectEvent{keyMade("k1", 1), keyUsed("k1", 10), keyRevoked("k1", 20), keyUsed("k1", 19)},
		"active rooms []; active keys 0\nk1 revoked=+20 used=+19\n"},
	{"a use of an unknown key changes nothing", []projectEvent{keyMade("k1", 1), keyUsed("k9", 10)},
		"active rooms []; active keys 1\nk1 revoked=- used=-\n"},
}

func TestProjectApply(t *testing.T) {
	for _, tc := range projectCases {
		t.Run(tc.name, func(t *testing.T) {
			s := newProjectState(testProject())
			for i := range tc.events {
				coretest.MustApply(t, s, &tc.events[i])
				checkProjectInvariants(t, s, fmt.Sprintf("event %d", i))
			}
			if got := summarizeProject(s); got != tc.want {
				t.Fatalf("state:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestProjectReplayEquivalence(t *testing.T) {
	limits := &core.Limits{MaxActiveRooms: 7, MaxActiveParticipants: 70, MaxParticipantsPerRoom: 10,
		RoomCreatesPerMinute: 1, ParticipantCreatesPerMinute: 2, ConnectRequestsPerMinute: 3}
	for _, withLimits := range []bool{false, true} {
		for _, tc := range projectCases {
			t.Run(fmt.Sprintf("%s/limits=%v", tc.name, withLimits), func(t *testing.T) {
				p := testProject()
				if withLimits {
					p.Limits = limits
				}
				live := newProjectState(p)
				for i := range tc.events {
					coretest.MustApply(t, live, &tc.events[i])
				}
				want := core.Encode(live)
				for k := 0; k <= len(tc.events); k++ {
					s := newProjectState(p)
					for i := 0; i < k; i++ {
						coretest.MustApply(t, s, coretest.RoundTrip(t, &tc.events[i]))
					}
					rec := coretest.RoundTrip(t, s)
					if rec.ActiveRooms == nil || rec.Keys == nil {
						t.Fatalf("snapshot at %d decodes with nil maps", k)
					}
					for i := k; i < len(tc.events); i++ {
						coretest.MustApply(t, rec, coretest.RoundTrip(t, &tc.events[i]))
						checkProjectInvariants(t, rec, fmt.Sprintf("replaying event %d after a snapshot at %d", i, k))
					}
					if got := core.Encode(rec); !bytes.Equal(got, want) {
						t.Fatalf("snapshot at %d + replay:\n%s\nwant:\n%s", k, got, want)
					}
					for id, k := range live.Keys {
						if rec.Keys[id].Hash != k.Hash || rec.Keys[id].Scopes != k.Scopes {
							t.Fatalf("key %s lost its hash or scopes in the snapshot", id)
						}
					}
					if withLimits && (rec.Project.Limits == nil || *rec.Project.Limits != *limits) {
						t.Fatalf("project limits after recovery = %+v, want %+v", rec.Project.Limits, limits)
					}
					if !withLimits && rec.Project.Limits != nil {
						t.Fatalf("a project following the defaults recovered with limits %+v", rec.Project.Limits)
					}
				}
			})
		}
	}
}

// TestProjectSnapshotBeforeLastUse: a project snapshot written before
// api_key_used existed (its keys have no last_used_at) recovers with
// never-used keys, and a journaled use then applies to it.
func TestProjectSnapshotBeforeLastUse(t *testing.T) {
	old := `{"project":{"id":"prj_1","account_id":"acct_1","name":"Default project","status":"active","created_at":"2026-11-22T12:00:00Z","archived_at":"0001-01-01T00:00:00Z"},` +
		`"active_rooms":{},"keys":{"k1":{"id":"k1","name":"ci","scopes":3,"last4":"abcd","hash":[` + strings.Repeat("0,", 31) + `1],` +
		`"created_at":"2026-11-22T12:00:01Z","created_by":{"type":"operator","id":"rtcd init"},"revoked_at":"0001-01-01T00:00:00Z"}},"active_keys":1}`
	var s projectState
	if err := json.Unmarshal([]byte(old), &s); err != nil {
		t.Fatal(err)
	}
	k := s.Keys["k1"]
	if k == nil || !k.LastUsedAt.IsZero() {
		t.Fatalf("old key decoded as %+v, want never used", k)
	}
	if v := core.MustJSON(k.View()); !bytes.Contains(v, []byte(`"last_used_at":null`)) {
		t.Fatalf("old key renders %s, want last_used_at null", v)
	}
	ev := keyUsed("k1", 90)
	coretest.MustApply(t, &s, coretest.RoundTrip(t, &ev))
	if got := core.MustJSON(k.View()); !bytes.Contains(got, []byte(`"last_used_at":"2026-11-22T12:01:30.000Z"`)) {
		t.Fatalf("after a use the key renders %s", got)
	}
}
