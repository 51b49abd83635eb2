package actors

import (
	"bytes"
	stdjson "encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-json"
	"rtcd/actors/core"
	"rtcd/actors/directory"
	"rtcd/actors/project"
	"rtcd/actors/room"
	"rtcd/apierr"
	"rtcd/mail"
	"rtcd/webhookdelivery"
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

// Request bodies of the dashboard routes. Pointers tell absent from zero.
type (
	// EmailStartParams is the body of POST /v1/auth/email/start.
	EmailStartParams struct {
		Email           *string `json:"email"`
		InvitationToken *string `json:"invitation_token"`
	}
	// EmailTokenParams is the body of POST /v1/auth/email/peek and verify.
	EmailTokenParams struct {
		Token *string `json:"token"`
	}
	// NameParams is the body of PATCH /v1/me, POST and PATCH of accounts
	// and projects.
	NameParams struct {
		Name *string `json:"name"`
	}
	// MemberParams is the body of PATCH /v1/accounts/{id}/members/{user_id}.
	MemberParams struct {
		Role *string `json:"role"`
	}
	// InvitationParams is the body of POST /v1/accounts/{id}/invitations.
	InvitationParams struct {
		Email *string `json:"email"`
		Role  *string `json:"role"`
	}
	// AcceptParams is the body of POST /v1/invitations/accept.
	AcceptParams struct {
		InvitationToken *string `json:"invitation_token"`
	}
)

// Bounds of the dashboard's request fields.
const (
	// MaxDisplayNameBytes bounds user, workspace and project names.
	MaxDisplayNameBytes = 128
	// maxPlausibleEmailBytes: a longer "address" is not one (RFC 5321).
	maxPlausibleEmailBytes = mail.MaxAddressBytes
	// SignInStartsPerIPPerMinute limits POST /v1/auth/email/start per
	// source IP (429); the per-address limit is SignInMailsPerAddressPerHour.
	SignInStartsPerIPPerMinute = 10
	// SignInAttemptsPerIPPerMinute limits peek, verify and Google sign-in
	// per source IP (429).
	SignInAttemptsPerIPPerMinute = 30
)

// emailStartAccepted is the one body of POST /v1/auth/email/start: the same
// bytes whether or not the address has an account, is malformed but
// plausible, or is over its limit, so the answer tells nothing.
var emailStartAccepted = []byte(`{"object":"email_sign_in","status":"accepted","message":"If the address can sign in, a link is on its way."}`)

// EmailStartAccepted returns the 202 body of POST /v1/auth/email/start.
func EmailStartAccepted() []byte { return append([]byte(nil), emailStartAccepted...) }

// normalizeEmail trims and lowercases an address; ok is false when it is
// not even plausible (no @, too long, control characters): those get 400.
func normalizeEmail(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" || len(s) > maxPlausibleEmailBytes || strings.Count(s, "@") != 1 || strings.HasPrefix(s, "@") || strings.HasSuffix(s, "@") {
		return "", false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == ' ' {
			return "", false
		}
	}
	return s, true
}

// deliverableEmail normalizes an address and reports whether mail can be
// sent to it: plausible (normalizeEmail) and a valid bare address.
func deliverableEmail(s string) (string, bool) {
	email, ok := normalizeEmail(s)
	if !ok {
		return "", false
	}
	_, err := mail.ParseAddress(email)
	return email, err == nil
}

func checkDisplayName(p *NameParams, required bool) (string, *apierr.Error) {
	if p.Name == nil {
		if required {
			return "", apierr.Invalid("name", "name is required")
		}
		return "", nil
	}
	if err := checkText("name", p.Name, MaxDisplayNameBytes); err != nil {
		return "", err
	}
	name := strings.TrimSpace(*p.Name)
	if name == "" {
		return "", apierr.Invalid("name", "name must not be empty")
	}
	return name, nil
}

func validRole(role string) bool {
	return role == directory.RoleOwner || role == directory.RoleAdmin || role == directory.RoleMember
}

// EndpointParams is the body of POST /v1/webhook-endpoints.
type EndpointParams struct {
	URL    *string  `json:"url"`
	Events []string `json:"events"`
}

// validateEndpoint checks a create request: an https URL that is not a
// forbidden destination, and known, distinct event types. An omitted events
// list subscribes to every type; an empty one is refused (it would receive
// nothing).
func (e *Engine) validateEndpoint(p *EndpointParams) (string, []string, *apierr.Error) {
	if p.URL == nil || *p.URL == "" {
		return "", nil, apierr.Invalid("url", "url is required: the https address that receives events")
	}
	u, err := webhookdelivery.CheckURL(*p.URL, e.env.Settings.WebhookAllowPrivate)
	if err != nil {
		return "", nil, apierr.Invalid("url", "url is not allowed: %v", err)
	}
	if p.Events == nil {
		return u.String(), nil, nil
	}
	if len(p.Events) == 0 {
		return "", nil, apierr.Invalid("events", "events must list at least one event type, or be omitted for all").
			WithDetails("allowed", core.EventTypes)
	}
	if len(p.Events) > len(core.EventTypes) {
		return "", nil, apierr.Invalid("events", "events may list at most %d types", len(core.EventTypes))
	}
	seen := map[string]bool{}
	for _, t := range p.Events {
		known := false
		for _, k := range core.EventTypes {
			known = known || k == t
		}
		if !known {
			return "", nil, apierr.Invalid("events", "unknown event type %q", t).WithDetails("allowed", core.EventTypes)
		}
		if seen[t] {
			return "", nil, apierr.Invalid("events", "event type %q is listed twice", t)
		}
		seen[t] = true
	}
	return u.String(), append([]string(nil), p.Events...), nil
}

// TopupParams is the body of POST /v1/billing/topups.
type TopupParams struct {
	Amount *string `json:"amount"`
	Method *string `json:"method"`
}
