package auth

import "time"

// mediaTokenPrefix starts every media token.
const mediaTokenPrefix = "rtc_mt_"

// mediaTokenFieldCount is the number of payload fields in a media token.
const mediaTokenFieldCount = 5

// mediaTokenKind: payload fields are SessionID, ProjectID, RoomID,
// ParticipantID, Role, in that order. Role has no prefix, only a non-empty
// requirement.
var mediaTokenKind = tokenKind{
	prefix:        mediaTokenPrefix,
	fieldPrefixes: []string{sessionIDPrefix, projectIDPrefix, roomIDPrefix, participantIDPrefix, ""},
	issued:        true,
}

// MediaClaims is what a media token asserts: this client session may use
// media for this participant, with this role, until ExpiresAt. Media tokens
// are meant to be short-lived, since a media node cannot revoke them.
//
// SessionID starts with cs_; the other ids follow the rules on
// ParticipantClaims. Role must be non-empty. Every field is at most
// MaxIDLength bytes. ExpiresAt is carried with one-second precision;
// IssuedAt, when the connect session was created, to the nanosecond. The
// control plane orders a participant's sessions by it: a join with a token
// issued before the participant's latest session is refused. A token
// signed by the release before carries none (the zero time, the oldest).
type MediaClaims struct {
	SessionID     string
	ProjectID     string
	RoomID        string
	ParticipantID string
	Role          string
	ExpiresAt     time.Time
	IssuedAt      time.Time
}

// SignMediaToken returns a media token for c. Claims that break the rules on
// MediaClaims still produce a token, but one that never verifies.
func (k Keys) SignMediaToken(c MediaClaims) string {
	return mediaTokenKind.sign(k.mediaToken, c.ExpiresAt, c.IssuedAt, c.SessionID, c.ProjectID, c.RoomID, c.ParticipantID, c.Role)
}

// MediaVerifier verifies media tokens. It holds only the media token key, so
// a media node can verify tokens without being able to mint participant
// tokens or hash API keys. The zero MediaVerifier rejects every token.
type MediaVerifier struct {
	key [32]byte
}

// NewMediaVerifier returns a verifier for media tokens signed with key, as
// returned by Keys.MediaToken.
func NewMediaVerifier(key [32]byte) MediaVerifier {
	return MediaVerifier{key: key}
}

// MediaVerifier returns a verifier for media tokens signed with k.
func (k Keys) MediaVerifier() MediaVerifier {
	return NewMediaVerifier(k.mediaToken)
}

// Verify returns the claims of an authentic, well-formed media token. It
// returns ErrTokenExpired if the token is authentic but now is at or after
// its expiry, and ErrTokenInvalid for anything else. It never panics,
// whatever token contains.
func (v MediaVerifier) Verify(token string, now time.Time) (MediaClaims, error) {
	var f [mediaTokenFieldCount]string
	expiresAt, issuedAt, err := mediaTokenKind.verify(v.key, token, now, f[:])
	if err != nil {
		return MediaClaims{}, err
	}
	return MediaClaims{
		SessionID:     f[0],
		ProjectID:     f[1],
		RoomID:        f[2],
		ParticipantID: f[3],
		Role:          f[4],
		ExpiresAt:     expiresAt,
		IssuedAt:      issuedAt,
	}, nil
}

// String redacts the key so an accidental log line cannot leak it.
func (MediaVerifier) String() string { return "auth.MediaVerifier{REDACTED}" }

// GoString redacts the key for %#v as well.
func (MediaVerifier) GoString() string { return "auth.MediaVerifier{REDACTED}" }
