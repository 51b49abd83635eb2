package actors

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-json"
	"rtcd/actors/core"
	"rtcd/actors/project"
	"rtcd/actors/room"
	"rtcd/apierr"
	"rtcd/scopes"
)

// t0 is the instant the test rooms and projects are created.
var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

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
	k := project.APIKey{ID: "key_qlt7eq66qkk5yfx2vfinfj37", Name: "ci \"quoted\" <b>", Scopes: uint32(scopes.All), Last4: "HKHQ",
		CreatedAt: at(1), RevokedAt: at(5), LastUsedAt: at(3)}
	current := core.MustJSON(k.View())
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
		check func(v project.NewRoom) bool
	}{
		{"empty body takes defaults", RoomParams{}, func(v project.NewRoom) bool {
			return v.Name == "" && v.MaxParticipants == 0 && v.ExpiresInSeconds == RoomExpiresInDefaultSeconds && v.Region == "global" && v.Metadata == nil
		}},
		{"name of exactly MaxNameBytes", RoomParams{Name: ptr(strings.Repeat("a", MaxNameBytes))}, func(v project.NewRoom) bool { return len(v.Name) == MaxNameBytes }},
		{"multibyte name at the bound", RoomParams{Name: ptr(strings.Repeat("é", MaxNameBytes/2))}, func(v project.NewRoom) bool { return len(v.Name) == MaxNameBytes }},
		{"max_participants 1", RoomParams{MaxParticipants: ptr(1)}, func(v project.NewRoom) bool { return v.MaxParticipants == 1 }},
		{"shortest expiry", RoomParams{ExpiresIn: ptr(RoomExpiresInMinSeconds)}, func(v project.NewRoom) bool { return v.ExpiresInSeconds == RoomExpiresInMinSeconds }},
		{"longest expiry", RoomParams{ExpiresIn: ptr(RoomExpiresInMaxSeconds)}, func(v project.NewRoom) bool { return v.ExpiresInSeconds == RoomExpiresInMaxSeconds }},
		{"the server's region", RoomParams{Region: ptr("global")}, func(v project.NewRoom) bool { return v.Region == "global" }},
		{"metadata compacted", RoomParams{Metadata: json.RawMessage(`{ "a" : [1, 2] }`)}, func(v project.NewRoom) bool { return string(v.Metadata) == `{"a":[1,2]}` }},
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
