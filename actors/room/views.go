package room

import (
	"time"

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

// ShowReservation is a participant's record as the API shows it while its
// room lives: connected when the room holds a live connect reservation for
// it (in memory; never recorded), and with its first connect, connectedAt,
// when the record has none yet (a connect is recorded with the
// participant's join, removal or its room's end).
func ShowReservation(record []byte, connectedAt time.Time, reserved bool) []byte {
	if !reserved && connectedAt.IsZero() {
		return record
	}
	var v ParticipantView
	if json.Unmarshal(record, &v) != nil {
		return record // a record is always a view; never worse than what is stored
	}
	changed := false
	if reserved && v.Status != ParticipantConnected {
		v.Status, changed = ParticipantConnected, true
	}
	if v.ConnectedAt == nil && !connectedAt.IsZero() {
		v.ConnectedAt, changed = core.OptionalTimestamp(connectedAt), true
	}
	if !changed {
		return record
	}
	return core.MustJSON(v)
}

// ConnectBody is the connect session (POST /v1/connect's answer) of s,
// served by the media node at endpoint with mediaToken, as its ConnectView
// encodes (AppendConnectBody writes the same bytes faster).
func ConnectBody(s ConnectSession, endpoint, mediaToken string) []byte {
	return core.MustJSON(ConnectView{
		Object: "connect_session", SessionID: s.SessionID, Endpoint: endpoint, MediaToken: mediaToken,
		ExpiresAt: core.Timestamp(s.ExpiresAt), Room: idRef{s.RoomID}, Participant: idRef{s.ParticipantID}, Features: featuresOf(s.Role),
	})
}

// AppendConnectBody appends ConnectBody(s, endpoint, mediaToken) to dst,
// byte for byte, without reflection: its constant parts are written as they
// are (encoded once, here), endpointJSON is the media node's address
// already encoded (EncodeEndpoint), and the rest is appended (issue 15:
// the answer is the hot path's).
func AppendConnectBody(dst []byte, s ConnectSession, endpointJSON []byte, mediaToken string) []byte {
	dst = append(dst, `{"object":"connect_session","session_id":`...)
	dst = appendJSONString(dst, s.SessionID)
	dst = append(dst, `,"endpoint":`...)
	dst = append(dst, endpointJSON...)
	dst = append(dst, `,"media_token":`...)
	dst = appendJSONString(dst, mediaToken)
	dst = append(dst, `,"expires_at":"`...)
	dst = core.AppendTimestamp(dst, s.ExpiresAt)
	dst = append(dst, `","room":{"id":`...)
	dst = appendJSONString(dst, s.RoomID)
	dst = append(dst, `},"participant":{"id":`...)
	dst = appendJSONString(dst, s.ParticipantID)
	dst = append(dst, `},"features":`...)
	if s.Role == RolePublisher {
		dst = append(dst, publisherFeaturesJSON...)
	} else {
		dst = append(dst, subscriberFeaturesJSON...)
	}
	return append(dst, '}')
}

// The features objects of a connect session, encoded once.
var (
	publisherFeaturesJSON  = core.MustJSON(featuresOf(RolePublisher))
	subscriberFeaturesJSON = core.MustJSON(featuresOf(RoleSubscriber))
)

// EncodeEndpoint is the media node's address as a JSON string, for
// AppendConnectBody.
func EncodeEndpoint(endpoint string) []byte { return core.MustJSON(endpoint) }

// appendJSONString appends s as a JSON string, as the encoder writes it: a
// string of plain printable ASCII (ids, tokens) as it is, any other
// through the encoder.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return append(dst, core.MustJSON(s)...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
