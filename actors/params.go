package actors

import (
	"bytes"
	stdjson "encoding/json"
	"unicode/utf8"

	"github.com/goccy/go-json"
	"rtcd/actors/project"
	"rtcd/actors/room"
	"rtcd/apierr"
)

// Named bounds of request fields. docs/api.md lists them.
const (
	MaxNameBytes       = 128
	MaxExternalIDBytes = 128
	MaxMetadataBytes   = 4096 // encoded JSON object

	RoomExpiresInMinSeconds     = 60
	RoomExpiresInMaxSeconds     = 7 * 24 * 3600
	RoomExpiresInDefaultSeconds = 24 * 3600

	ParticipantExpiresInMinSeconds     = 60
	ParticipantExpiresInMaxSeconds     = 24 * 3600
	ParticipantExpiresInDefaultSeconds = 3600

	// MaxAPIKeyNameBytes bounds an API key's name.
	MaxAPIKeyNameBytes = 128
)

// RoomParams is the body of POST /v1/rooms. Pointers tell absent from zero.
type RoomParams struct {
	Name            *string         `json:"name"`
	MaxParticipants *int            `json:"max_participants"`
	ExpiresIn       *int            `json:"expires_in"`
	Region          *string         `json:"region"`
	Metadata        json.RawMessage `json:"metadata"`
}

// ParticipantParams is the body of POST /v1/rooms/{room_id}/participants.
type ParticipantParams struct {
	ExternalID *string         `json:"external_id"`
	Name       *string         `json:"name"`
	Role       *string         `json:"role"`
	ExpiresIn  *int            `json:"expires_in"`
	Metadata   json.RawMessage `json:"metadata"`
}

// APIKeyParams is the body of POST /v1/api-keys.
type APIKeyParams struct {
	Name   *string  `json:"name"`
	Scopes []string `json:"scopes"`
}

// ConnectParams is the body of POST /v1/connect.
type ConnectParams struct {
	Token *string    `json:"token"` // nil: absent (400); "" is a token that fails verification (401)
	SDK   *SDKParams `json:"sdk"`
}

// SDKParams describes the calling client SDK.
type SDKParams struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Platform string `json:"platform"`
}

// MaxSDKFieldBytes bounds each string of the connect request's sdk object.
const MaxSDKFieldBytes = 64

// checkOptionalText checks a text field that is shown as given or as null
// (room and participant name, external_id, API key name): "" is refused,
// since it would read back as null, not as given; omit the field or send
// null for none.
func checkOptionalText(field string, v *string, maxBytes int) *apierr.Error {
	if v != nil && *v == "" {
		return apierr.Invalid(field, "%s must not be empty; omit it or send null for none", field)
	}
	return checkText(field, v, maxBytes)
}

func checkText(field string, v *string, maxBytes int) *apierr.Error {
	if v == nil {
		return nil
	}
	if len(*v) > maxBytes {
		return apierr.Invalid(field, "%s must be at most %d bytes", field, maxBytes)
	}
	if !utf8.ValidString(*v) {
		return apierr.Invalid(field, "%s must be valid UTF-8", field)
	}
	for _, r := range *v {
		if r < 0x20 || r == 0x7f {
			return apierr.Invalid(field, "%s must not contain control characters", field)
		}
	}
	return nil
}

func checkSeconds(field string, v *int, minSeconds, maxSeconds, defaultSeconds int) (int, *apierr.Error) {
	if v == nil {
		return defaultSeconds, nil
	}
	if *v < minSeconds || *v > maxSeconds {
		return 0, apierr.Invalid(field, "%s must be an integer from %d to %d (seconds)", field, minSeconds, maxSeconds)
	}
	return *v, nil
}

// checkMetadata accepts an absent or null metadata, or a JSON object of at
// most MaxMetadataBytes. It returns the value to store (nil for none).
//
// The HTTP layer has already checked the whole request body strictly
// (package strictjson: UTF-8, no lone surrogate escapes, no duplicate keys,
// finite numbers, nesting depth), so metadata from the API is I-JSON (RFC
// 7493) that any client can decode. The UTF-8 check here is a second line
// for other callers: compacting keeps invalid bytes as they are.
func checkMetadata(m json.RawMessage) (json.RawMessage, *apierr.Error) {
	if len(m) == 0 || string(m) == "null" {
		return nil, nil
	}
	if len(m) > MaxMetadataBytes {
		return nil, apierr.Invalid("metadata", "metadata must be at most %d bytes of JSON", MaxMetadataBytes)
	}
	if !utf8.Valid(m) {
		return nil, apierr.Invalid("metadata", "metadata must be valid UTF-8")
	}
	compact, err := compactJSON(m)
	if err != nil || len(compact) == 0 || compact[0] != '{' {
		return nil, apierr.Invalid("metadata", "metadata must be a JSON object")
	}
	return compact, nil
}

// compactJSON removes insignificant whitespace, keeping numbers exactly as
// sent (decoding into interfaces would round them through float64).
func compactJSON(m json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	if err := stdjson.Compact(&buf, m); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func validateRoom(p *RoomParams, serverRegion string) (project.NewRoom, *apierr.Error) {
	var v project.NewRoom
	if err := checkOptionalText("name", p.Name, MaxNameBytes); err != nil {
		return v, err
	}
	if p.Name != nil {
		v.Name = *p.Name
	}
	if p.MaxParticipants != nil {
		if *p.MaxParticipants < 1 {
			return v, apierr.Invalid("max_participants", "max_participants must be at least 1")
		}
		v.MaxParticipants = *p.MaxParticipants
	}
	secs, err := checkSeconds("expires_in", p.ExpiresIn, RoomExpiresInMinSeconds, RoomExpiresInMaxSeconds, RoomExpiresInDefaultSeconds)
	if err != nil {
		return v, err
	}
	v.ExpiresInSeconds = secs
	v.Region = serverRegion
	if p.Region != nil && *p.Region != serverRegion {
		return v, apierr.Invalid("region", "region must be %q, the region this server runs in", serverRegion).
			WithDetails("allowed", []string{serverRegion})
	}
	if v.Metadata, err = checkMetadata(p.Metadata); err != nil {
		return v, err
	}
	return v, nil
}

func validateParticipant(p *ParticipantParams) (room.NewParticipant, *apierr.Error) {
	var v room.NewParticipant
	if err := checkOptionalText("external_id", p.ExternalID, MaxExternalIDBytes); err != nil {
		return v, err
	}
	if err := checkOptionalText("name", p.Name, MaxNameBytes); err != nil {
		return v, err
	}
	if p.ExternalID != nil {
		v.ExternalID = *p.ExternalID
	}
	if p.Name != nil {
		v.Name = *p.Name
	}
	v.Role = room.RolePublisher
	if p.Role != nil {
		switch *p.Role {
		case room.RolePublisher, room.RoleSubscriber:
			v.Role = *p.Role
		default:
			return v, apierr.Invalid("role", "role must be %q or %q", room.RolePublisher, room.RoleSubscriber).
				WithDetails("allowed", []string{room.RolePublisher, room.RoleSubscriber})
		}
	}
	secs, err := checkSeconds("expires_in", p.ExpiresIn, ParticipantExpiresInMinSeconds, ParticipantExpiresInMaxSeconds, ParticipantExpiresInDefaultSeconds)
	if err != nil {
		return v, err
	}
	v.ExpiresInSeconds = secs
	if v.Metadata, err = checkMetadata(p.Metadata); err != nil {
		return v, err
	}
	return v, nil
}
