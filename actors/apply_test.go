package actors

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-json"
	"rtcd/actors/core"
	"rtcd/actors/room"
	"rtcd/apierr"
	"rtcd/scopes"
)

// t0 is the instant the test rooms and projects are created.
var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// mustApply applies one event and fails the test if it does not apply.
func mustApply[E any, S core.State[E]](t *testing.T, s S, e *E) {
	t.Helper()
	if err := s.Apply(e); err != nil {
		t.Fatal(err)
	}
}

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

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

// --- project -------------------------------------------------------------

func testProject() core.Project {
	return core.Project{ID: "prj_1", AccountID: "acct_1", Name: "Default project", Status: core.ProjectActive, CreatedAt: t0}
}

func roomOpened(id string) projectEvent { return projectEvent{RoomCreated: &roomRef{RoomID: id}} }
func roomShut(id string) projectEvent   { return projectEvent{RoomClosed: &roomRef{RoomID: id}} }

func keyMade(id string, sec int) projectEvent {
	var hash [32]byte
	copy(hash[:], id)
	hash[31] = 0xff
	return projectEvent{APIKeyCreated: &APIKey{
		ID: id, Name: "key " + id, Scopes: uint32(scopes.All), Last4: "abcd", Hash: hash,
		CreatedAt: at(sec), CreatedBy: core.Actor{Type: "operator", ID: "rtcd init"},
	}}
}

func keyRevoked(id string, sec int) projectEvent {
	return projectEvent{APIKeyRevoked: &apiKeyRevoke{KeyID: id, At: at(sec)}}
}

func keyUsed(id string, sec int) projectEvent {
	return projectEvent{APIKeyUsed: &apiKeyUsed{KeyID: id, At: at(sec)}}
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
		fmt.Fprintf(&b, "%s revoked=%s used=%s\n", id, offset(s.Keys[id].RevokedAt), offset(s.Keys[id].LastUsedAt))
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
				mustApply(t, s, &tc.events[i])
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
					mustApply(t, live, &tc.events[i])
				}
				want := core.Encode(live)
				for k := 0; k <= len(tc.events); k++ {
					s := newProjectState(p)
					for i := 0; i < k; i++ {
						mustApply(t, s, roundTrip(t, &tc.events[i]))
					}
					rec := roundTrip(t, s)
					if rec.ActiveRooms == nil || rec.Keys == nil {
						t.Fatalf("snapshot at %d decodes with nil maps", k)
					}
					for i := k; i < len(tc.events); i++ {
						mustApply(t, rec, roundTrip(t, &tc.events[i]))
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
	if v := core.MustJSON(k.view()); !bytes.Contains(v, []byte(`"last_used_at":null`)) {
		t.Fatalf("old key renders %s, want last_used_at null", v)
	}
	ev := keyUsed("k1", 90)
	mustApply(t, &s, roundTrip(t, &ev))
	if got := core.MustJSON(k.view()); !bytes.Contains(got, []byte(`"last_used_at":"2026-11-22T12:01:30.000Z"`)) {
		t.Fatalf("after a use the key renders %s", got)
	}
}

// TestUpgradeKeyRecord: the list serves ki/ records written before
// last_used_at existed with the field as null, and current records as
// they are.
func TestUpgradeKeyRecord(t *testing.T) {
	old := `{"object":"api_key","id":"key_qlt7eq66qkk5yfx2vfinfj37","name":"ci","scopes":["rooms:read","rooms:write"],` +
		`"last4":"HKHQ","status":"active","created_at":"2026-11-22T12:30:14.266Z","revoked_at":null}`
	got, err := upgradeKeyRecord([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSuffix(old, "}") + `,"last_used_at":null}`
	if string(got) != want {
		t.Fatalf("upgraded record:\n%s\nwant:\n%s", got, want)
	}
	k := APIKey{ID: "key_qlt7eq66qkk5yfx2vfinfj37", Name: "ci \"quoted\" <b>", Scopes: uint32(scopes.All), Last4: "HKHQ",
		CreatedAt: at(1), RevokedAt: at(5), LastUsedAt: at(3)}
	current := core.MustJSON(k.view())
	if got, err := upgradeKeyRecord(current); err != nil || !bytes.Equal(got, current) {
		t.Fatalf("current record changed:\n%s\nwas:\n%s (%v)", got, current, err)
	}
	if _, err := upgradeKeyRecord([]byte(`{"object":`)); err == nil {
		t.Fatal("a broken record was served")
	}
}

// --- validation bounds ---------------------------------------------------

func ptr[T any](v T) *T { return &v }

func wantInvalid(t *testing.T, err *apierr.Error, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want invalid_request on %s", field)
	}
	if err.Code != apierr.InvalidRequest || err.Details["field"] != field {
		t.Fatalf("error %v (details %v); want invalid_request on field %s", err, err.Details, field)
	}
}

func TestValidateRoom(t *testing.T) {
	ok := []struct {
		name  string
		p     RoomParams
		check func(v validatedRoom) bool
	}{
		{"empty body takes defaults", RoomParams{}, func(v validatedRoom) bool {
			return v.name == "" && v.maxParticipants == 0 && v.expiresInSecs == RoomExpiresInDefaultSeconds && v.region == "global" && v.metadata == nil
		}},
		{"name of exactly MaxNameBytes", RoomParams{Name: ptr(strings.Repeat("a", MaxNameBytes))}, func(v validatedRoom) bool { return len(v.name) == MaxNameBytes }},
		{"multibyte name at the bound", RoomParams{Name: ptr(strings.Repeat("é", MaxNameBytes/2))}, func(v validatedRoom) bool { return len(v.name) == MaxNameBytes }},
		{"max_participants 1", RoomParams{MaxParticipants: ptr(1)}, func(v validatedRoom) bool { return v.maxParticipants == 1 }},
		{"shortest expiry", RoomParams{ExpiresIn: ptr(RoomExpiresInMinSeconds)}, func(v validatedRoom) bool { return v.expiresInSecs == RoomExpiresInMinSeconds }},
		{"longest expiry", RoomParams{ExpiresIn: ptr(RoomExpiresInMaxSeconds)}, func(v validatedRoom) bool { return v.expiresInSecs == RoomExpiresInMaxSeconds }},
		{"the server's region", RoomParams{Region: ptr("global")}, func(v validatedRoom) bool { return v.region == "global" }},
		{"metadata compacted", RoomParams{Metadata: json.RawMessage(`{ "a" : [1, 2] }`)}, func(v validatedRoom) bool { return string(v.metadata) == `{"a":[1,2]}` }},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			v, err := validateRoom(&tc.p, "global")
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if !tc.check(v) {
				t.Fatalf("validated to %+v", v)
			}
		})
	}
	bad := []struct {
		name  string
		p     RoomParams
		field string
	}{
		{"name one byte too long", RoomParams{Name: ptr(strings.Repeat("a", MaxNameBytes+1))}, "name"},
		{"name not UTF-8", RoomParams{Name: ptr("a\xffb")}, "name"},
		{"name with a newline", RoomParams{Name: ptr("a\nb")}, "name"},
		{"name with a tab", RoomParams{Name: ptr("a\tb")}, "name"},
		{"name with DEL", RoomParams{Name: ptr("a\x7fb")}, "name"},
		{"max_participants 0", RoomParams{MaxParticipants: ptr(0)}, "max_participants"},
		{"max_participants negative", RoomParams{MaxParticipants: ptr(-1)}, "max_participants"},
		{"expiry one second short", RoomParams{ExpiresIn: ptr(RoomExpiresInMinSeconds - 1)}, "expires_in"},
		{"expiry one second long", RoomParams{ExpiresIn: ptr(RoomExpiresInMaxSeconds + 1)}, "expires_in"},
		{"another region", RoomParams{Region: ptr("eu-west")}, "region"},
		{"metadata not an object", RoomParams{Metadata: json.RawMessage(`[1]`)}, "metadata"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := validateRoom(&tc.p, "global")
			wantInvalid(t, err, tc.field)
		})
	}
	_, err := validateRoom(&RoomParams{Region: ptr("eu-west")}, "global")
	if allowed, _ := err.Details["allowed"].([]string); len(allowed) != 1 || allowed[0] != "global" {
		t.Fatalf("region error details %v; want allowed [global]", err.Details)
	}
}

func TestValidateParticipant(t *testing.T) {
	v, err := validateParticipant(&ParticipantParams{})
	if err != nil || v.Role != room.RolePublisher || v.ExpiresInSeconds != ParticipantExpiresInDefaultSeconds || v.Metadata != nil {
		t.Fatalf("defaults: %+v, %v", v, err)
	}
	for _, role := range []string{room.RolePublisher, room.RoleSubscriber} {
		if v, err := validateParticipant(&ParticipantParams{Role: ptr(role)}); err != nil || v.Role != role {
			t.Fatalf("role %s: %+v, %v", role, v, err)
		}
	}
	for _, secs := range []int{ParticipantExpiresInMinSeconds, ParticipantExpiresInMaxSeconds} {
		if v, err := validateParticipant(&ParticipantParams{ExpiresIn: ptr(secs)}); err != nil || v.ExpiresInSeconds != secs {
			t.Fatalf("expires_in %d: %+v, %v", secs, v, err)
		}
	}
	v, err = validateParticipant(&ParticipantParams{
		ExternalID: ptr(strings.Repeat("x", MaxExternalIDBytes)), Name: ptr(strings.Repeat("n", MaxNameBytes)),
		Metadata: json.RawMessage(`{"seat":12}`),
	})
	if err != nil || len(v.ExternalID) != MaxExternalIDBytes || len(v.Name) != MaxNameBytes || string(v.Metadata) != `{"seat":12}` {
		t.Fatalf("fields at their bounds: %+v, %v", v, err)
	}

	bad := []struct {
		name  string
		p     ParticipantParams
		field string
	}{
		{"external_id one byte too long", ParticipantParams{ExternalID: ptr(strings.Repeat("x", MaxExternalIDBytes+1))}, "external_id"},
		{"external_id with a control character", ParticipantParams{ExternalID: ptr("u\x00")}, "external_id"},
		{"name one byte too long", ParticipantParams{Name: ptr(strings.Repeat("n", MaxNameBytes+1))}, "name"},
		{"unknown role", ParticipantParams{Role: ptr("admin")}, "role"},
		{"empty role", ParticipantParams{Role: ptr("")}, "role"},
		{"role in another case", ParticipantParams{Role: ptr("Publisher")}, "role"},
		{"expiry one second short", ParticipantParams{ExpiresIn: ptr(ParticipantExpiresInMinSeconds - 1)}, "expires_in"},
		{"expiry one second long", ParticipantParams{ExpiresIn: ptr(ParticipantExpiresInMaxSeconds + 1)}, "expires_in"},
		{"metadata a string", ParticipantParams{Metadata: json.RawMessage(`"x"`)}, "metadata"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := validateParticipant(&tc.p)
			wantInvalid(t, err, tc.field)
		})
	}
}

func TestCheckMetadata(t *testing.T) {
	// objectOf returns a JSON object of exactly n bytes.
	objectOf := func(n int) json.RawMessage {
		const frame = len(`{"k":""}`)
		return json.RawMessage(`{"k":"` + strings.Repeat("v", n-frame) + `"}`)
	}
	cases := []struct {
		name string
		in   json.RawMessage
		want string // "" with ok: stored as none
		ok   bool
	}{
		{"absent", nil, "", true},
		{"empty", json.RawMessage{}, "", true},
		{"null", json.RawMessage(`null`), "", true},
		{"empty object", json.RawMessage(`{}`), `{}`, true},
		{"whitespace removed", json.RawMessage("{\n  \"a\": 1,\t\"b\": {\"c\": null}\n}"), `{"a":1,"b":{"c":null}}`, true},
		{"leading whitespace", json.RawMessage(` {"a":1}`), `{"a":1}`, true},
		{"big numbers kept exactly", json.RawMessage(`{"n": 123456789012345678901234567890, "f": 1.10}`), `{"n":123456789012345678901234567890,"f":1.10}`, true},
		{"exactly MaxMetadataBytes", objectOf(MaxMetadataBytes), string(objectOf(MaxMetadataBytes)), true},
		{"one byte over MaxMetadataBytes", objectOf(MaxMetadataBytes + 1), "", false},
		{"over the bound even if it compacts under it", json.RawMessage(`{"a":1}` + strings.Repeat(" ", MaxMetadataBytes)), "", false},
		{"array", json.RawMessage(`[]`), "", false},
		{"string", json.RawMessage(`"meta"`), "", false},
		{"number", json.RawMessage(`42`), "", false},
		{"true", json.RawMessage(`true`), "", false},
		{"malformed", json.RawMessage(`{"a":`), "", false},
		{"trailing data", json.RawMessage(`{} {}`), "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkMetadata(tc.in)
			if !tc.ok {
				wantInvalid(t, err, "metadata")
				if got != nil {
					t.Fatalf("rejected metadata still returned %q", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if string(got) != tc.want || (tc.want == "" && got != nil) {
				t.Fatalf("checkMetadata(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseScopes(t *testing.T) {
	all := scopes.All.Names()
	if len(all) != scopes.MaxScopesPerKey {
		t.Fatalf("%d scopes exist but MaxScopesPerKey is %d", len(all), scopes.MaxScopesPerKey)
	}
	set, err := parseScopes(all)
	if err != nil || set != scopes.All {
		t.Fatalf("every scope: %v, %v", set, err)
	}
	set, err = parseScopes([]string{"rooms:read", "participants:write"})
	if err != nil || set != scopes.Set(scopes.RoomsRead|scopes.ParticipantsWrite) {
		t.Fatalf("two scopes: %v, %v", set, err)
	}
	bad := []struct {
		name  string
		names []string
	}{
		{"nil", nil},
		{"empty", []string{}},
		{"one more than exist", append(append([]string{}, all...), "rooms:read")},
		{"unknown", []string{"rooms:read", "rooms:admin"}},
		{"empty name", []string{""}},
		{"different case", []string{"Rooms:Read"}},
		{"listed twice", []string{"rooms:read", "rooms:write", "rooms:read"}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseScopes(tc.names)
			wantInvalid(t, err, "scopes")
		})
	}
}
