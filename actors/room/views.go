package room

import (
	"github.com/goccy/go-json"
	"rtcd/actors/core"
	"rtcd/persistence"
)

var emptyObject = json.RawMessage(`{}`)

func metadataOrEmpty(m json.RawMessage) json.RawMessage {
	if len(m) == 0 || string(m) == "null" {
		return emptyObject
	}
	return m
}

// RoomView is the public room object.
type RoomView struct {
	Object          string          `json:"object"`
	ID              string          `json:"id"`
	Name            *string         `json:"name"`
	Status          string          `json:"status"`
	Region          string          `json:"region"`
	MaxParticipants int             `json:"max_participants"`
	Metadata        json.RawMessage `json:"metadata"`
	CreatedAt       string          `json:"created_at"`
	ExpiresAt       string          `json:"expires_at"`
	EndedAt         *string         `json:"ended_at"`
	EndReason       *string         `json:"end_reason"`
}

func (r *Room) view() RoomView {
	return RoomView{
		Object: "room", ID: r.ID, Name: core.OptionalString(r.Name), Status: r.Status, Region: r.Region,
		MaxParticipants: r.MaxParticipants, Metadata: metadataOrEmpty(r.Metadata),
		CreatedAt: core.Timestamp(r.CreatedAt), ExpiresAt: core.Timestamp(r.ExpiresAt),
		EndedAt: core.OptionalTimestamp(r.EndedAt), EndReason: core.OptionalString(r.EndReason),
	}
}

// ParticipantView is the public participant object (get and list).
type ParticipantView struct {
	Object      string          `json:"object"`
	ID          string          `json:"id"`
	RoomID      string          `json:"room_id"`
	ExternalID  *string         `json:"external_id"`
	Name        *string         `json:"name"`
	Role        string          `json:"role"`
	Status      string          `json:"status"`
	Metadata    json.RawMessage `json:"metadata"`
	CreatedAt   string          `json:"created_at"`
	ExpiresAt   string          `json:"expires_at"`
	ConnectedAt *string         `json:"connected_at"`
	EndedAt     *string         `json:"ended_at"`
}

func (p *Participant) view() ParticipantView {
	return ParticipantView{
		Object: "participant", ID: p.ID, RoomID: p.RoomID, ExternalID: core.OptionalString(p.ExternalID),
		Name: core.OptionalString(p.Name), Role: p.Role, Status: p.Status, Metadata: metadataOrEmpty(p.Metadata),
		CreatedAt: core.Timestamp(p.CreatedAt), ExpiresAt: core.Timestamp(p.ExpiresAt),
		ConnectedAt: core.OptionalTimestamp(p.ConnectedAt), EndedAt: core.OptionalTimestamp(p.EndedAt),
	}
}

// ParticipantCreatedView is the create response: the participant plus its
// token, which is shown only here and never stored.
type ParticipantCreatedView struct {
	ParticipantView
	Token string `json:"token"`
}

// ConnectView is the connect session (POST /v1/connect response).
type ConnectView struct {
	Object      string       `json:"object"`
	SessionID   string       `json:"session_id"`
	Endpoint    string       `json:"endpoint"`
	MediaToken  string       `json:"media_token"`
	ExpiresAt   string       `json:"expires_at"`
	Room        idRef        `json:"room"`
	Participant idRef        `json:"participant"`
	Features    FeaturesView `json:"features"`
}

type idRef struct {
	ID string `json:"id"`
}

// FeaturesView says what the participant may publish.
type FeaturesView struct {
	Audio       bool `json:"audio"`
	Video       bool `json:"video"`
	ScreenShare bool `json:"screen_share"`
}

func featuresOf(role string) FeaturesView {
	if role == RolePublisher {
		return FeaturesView{Audio: true, Video: true, ScreenShare: true}
	}
	return FeaturesView{}
}

// RecordKey is r/<project_id>/<room_id>: the room as the API shows it.
func RecordKey(projectID, roomID string) []byte {
	return []byte(persistence.PrefixRoom + projectID + "/" + roomID)
}

// ParticipantRecordKey is pt/<project_id>/<room_id>/<participant_id>: the
// participant as the API shows it.
func ParticipantRecordKey(projectID, roomID, participantID string) []byte {
	return []byte(persistence.PrefixPart + projectID + "/" + roomID + "/" + participantID)
}
