package auth

import "time"

// Id prefixes. Checking them at verification catches a token built with ids
// swapped between fields (say a room id where a project id belongs), which
// would otherwise be a valid token that authorises the wrong thing.
const (
	projectIDPrefix     = "prj_"
	roomIDPrefix        = "room_"
	participantIDPrefix = "part_"
	sessionIDPrefix     = "cs_"
)

// participantTokenPrefix starts every participant token.
const participantTokenPrefix = "rtc_pt_"

// participantTokenFieldCount is the number of payload fields in a
// participant token.
const participantTokenFieldCount = 3

// participantTokenKind: payload fields are ProjectID, RoomID, ParticipantID,
// in that order.
var participantTokenKind = tokenKind{
	prefix:        participantTokenPrefix,
	fieldPrefixes: []string{projectIDPrefix, roomIDPrefix, participantIDPrefix},
}

// ParticipantClaims is what a participant token asserts: this participant
// may join this room of this project until ExpiresAt.
//
// Each id must start with its prefix (prj_, room_, part_), have at least one
// character after it, and be at most MaxIDLength bytes. ExpiresAt is carried
// with one-second precision.
type ParticipantClaims struct {
	ProjectID     string
	RoomID        string
	ParticipantID string
	ExpiresAt     time.Time
}

// SignParticipantToken returns a participant token for c. Claims that break
// the rules on ParticipantClaims still produce a token, but one that never
// verifies (see tokenKind.sign for why there is no error return).
func (k Keys) SignParticipantToken(c ParticipantClaims) string {
	return participantTokenKind.sign(k.participantToken, c.ExpiresAt, time.Time{}, c.ProjectID, c.RoomID, c.ParticipantID)
}

// VerifyParticipantToken returns the claims of an authentic, well-formed
// participant token. It returns ErrTokenExpired if the token is authentic but
// now is at or after its expiry, and ErrTokenInvalid for anything else. It
// never panics, whatever token contains.
func (k Keys) VerifyParticipantToken(token string, now time.Time) (ParticipantClaims, error) {
	var f [participantTokenFieldCount]string
	expiresAt, _, err := participantTokenKind.verify(k.participantToken, token, now, f[:])
	if err != nil {
		return ParticipantClaims{}, err
	}
	return ParticipantClaims{
		ProjectID:     f[0],
		RoomID:        f[1],
		ParticipantID: f[2],
		ExpiresAt:     expiresAt,
	}, nil
}
