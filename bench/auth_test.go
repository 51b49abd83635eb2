package bench

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"rtcd/auth"
)

// Claims shaped like the engine's: ids are a prefix and 26 characters.
var (
	benchParticipantClaims = auth.ParticipantClaims{
		ProjectID:     "prj_abcdefghijklmnopqrstuvwxyz",
		RoomID:        "room_abcdefghijklmnopqrstuvwxyz",
		ParticipantID: "part_abcdefghijklmnopqrstuvwxyz",
		ExpiresAt:     benchStart.Add(3600e9),
	}
	benchMediaClaims = auth.MediaClaims{
		SessionID:     "cs_abcdefghijklmnopqrstuvwxyz",
		ProjectID:     benchParticipantClaims.ProjectID,
		RoomID:        benchParticipantClaims.RoomID,
		ParticipantID: benchParticipantClaims.ParticipantID,
		Role:          "publisher",
		ExpiresAt:     benchStart.Add(60e9),
	}
)

// hmacOfSignedPart is the floor of verifying token: one HMAC-SHA256 of the
// bytes its MAC covers (everything before the last '.'), under a key of the
// same size. Verification can not be cheaper than that.
func hmacOfSignedPart(token string) func() error {
	key := make([]byte, 32)
	signed := []byte(token[:strings.LastIndexByte(token, '.')])
	var sink [32]byte
	return func() error {
		m := hmac.New(sha256.New, key)
		m.Write(signed)
		m.Sum(sink[:0])
		return nil
	}
}

// BenchmarkTokenVerify is the first step of POST /v1/connect (participant
// token) and of every media node join (media token). x_hmac is the time as
// a multiple of a bare HMAC-SHA256 of the same bytes.
func BenchmarkTokenVerify(b *testing.B) {
	keys := benchKeys(b)
	b.Run("participant", func(b *testing.B) {
		token := keys.SignParticipantToken(benchParticipantClaims)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := keys.VerifyParticipantToken(token, benchStart); err != nil {
				b.Fatal(err)
			}
		}
		reportVsBaseline(b, "hmac", hmacOfSignedPart(token))
	})
	b.Run("media", func(b *testing.B) {
		token := keys.SignMediaToken(benchMediaClaims)
		v := keys.MediaVerifier()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := v.Verify(token, benchStart); err != nil {
				b.Fatal(err)
			}
		}
		reportVsBaseline(b, "hmac", hmacOfSignedPart(token))
	})
	// A forged token is refused after the MAC: the cost an attacker can
	// impose per request.
	b.Run("participant_forged", func(b *testing.B) {
		token := keys.SignParticipantToken(benchParticipantClaims)
		forged := token[:len(token)-2] + "AA"
		if forged == token {
			forged = token[:len(token)-2] + "BA"
		}
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := keys.VerifyParticipantToken(forged, benchStart); !errors.Is(err, auth.ErrTokenInvalid) {
				b.Fatalf("forged token: %v", err)
			}
		}
		reportVsBaseline(b, "hmac", hmacOfSignedPart(token))
	})
}

// BenchmarkTokenSign is the signing done by participant creation
// (participant token) and by every connect (media token).
func BenchmarkTokenSign(b *testing.B) {
	keys := benchKeys(b)
	b.Run("participant", func(b *testing.B) {
		b.ReportAllocs()
		var token string
		for i := 0; i < b.N; i++ {
			token = keys.SignParticipantToken(benchParticipantClaims)
		}
		reportVsBaseline(b, "hmac", hmacOfSignedPart(token))
	})
	b.Run("media", func(b *testing.B) {
		b.ReportAllocs()
		var token string
		for i := 0; i < b.N; i++ {
			token = keys.SignMediaToken(benchMediaClaims)
		}
		reportVsBaseline(b, "hmac", hmacOfSignedPart(token))
	})
}
