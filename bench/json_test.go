package bench

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/goccy/go-json"
	"rtcd/actors"
)

// benchConnectRequest is a typical POST /v1/connect body.
func benchConnectRequest(b *testing.B) []byte {
	token := benchKeys(b).SignParticipantToken(benchParticipantClaims)
	body, err := json.Marshal(map[string]any{
		"token": token,
		"sdk":   map[string]string{"name": "rtcd-js", "version": "1.4.2", "platform": "web"},
	})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// benchConnectView is a connect response as the room actor builds it.
func benchConnectView(b *testing.B) actors.ConnectView {
	v := actors.ConnectView{
		Object:     "connect_session",
		SessionID:  benchMediaClaims.SessionID,
		Endpoint:   "wss://media.example.com/rtc",
		MediaToken: benchKeys(b).SignMediaToken(benchMediaClaims),
		ExpiresAt:  actors.Timestamp(benchMediaClaims.ExpiresAt),
		Features:   actors.FeaturesView{Audio: true, Video: true, ScreenShare: true},
	}
	v.Room.ID = benchMediaClaims.RoomID
	v.Participant.ID = benchMediaClaims.ParticipantID
	return v
}

// decodeLikeServer decodes one JSON object as the HTTP layer does after its
// strict check (http/decode.go): a decoder refusing unknown fields, then a
// second Decode that must find the end of the body.
func decodeLikeServer(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return errors.New("trailing data")
	}
	return nil
}

// decodeLikeServerStd is decodeLikeServer with encoding/json, the baseline.
func decodeLikeServerStd(body []byte, v any) error {
	dec := stdjson.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	var extra stdjson.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return errors.New("trailing data")
	}
	return nil
}

// BenchmarkConnectJSON is the JSON of the connect exchange with goccy/go-json,
// as the server uses it. x_stdlib is the multiple of encoding/json doing the
// same (below 1: goccy is faster).
//
//   - decode_request: the server reading a ConnectParams body (without the
//     strict pre-check, which strictjson.BenchmarkStrictJSONConnect measures, and
//     which BenchmarkConnectHTTP includes).
//   - encode_response: the room actor encoding the ConnectView.
//   - decode_response: a client decoding the ConnectView.
func BenchmarkConnectJSON(b *testing.B) {
	b.Run("decode_request", func(b *testing.B) {
		body := benchConnectRequest(b)
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var p actors.ConnectParams
			if err := decodeLikeServer(body, &p); err != nil || p.Token == nil {
				b.Fatal(err)
			}
		}
		reportVsBaseline(b, "stdlib", func() error {
			var p actors.ConnectParams
			return decodeLikeServerStd(body, &p)
		})
	})
	b.Run("encode_response", func(b *testing.B) {
		v := benchConnectView(b)
		probe, _ := json.Marshal(v)
		b.SetBytes(int64(len(probe)))
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := json.Marshal(v); err != nil {
				b.Fatal(err)
			}
		}
		reportVsBaseline(b, "stdlib", func() error {
			_, err := stdjson.Marshal(v)
			return err
		})
	})
	b.Run("decode_response", func(b *testing.B) {
		body, err := json.Marshal(benchConnectView(b))
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var v actors.ConnectView
			if err := json.Unmarshal(body, &v); err != nil || v.MediaToken == "" {
				b.Fatal(err)
			}
		}
		reportVsBaseline(b, "stdlib", func() error {
			var v actors.ConnectView
			return stdjson.Unmarshal(body, &v)
		})
	})
}
