package server

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// signVectors were produced by rtcd/webhooksig.Sign (the server's signer) with
// a throwaway program in the root module; the first is also the example of
// docs/webhooks.md.
var signVectors = []struct {
	secret    string
	timestamp int64
	body      string
	signature string
}{
	{secret: "whsec_YnooyT15O_7t8kx9Ry_mt3wVQ7rz62aVwL06iugKaCc", timestamp: 1795355728, body: "{\"id\":\"evt_akfi6y3jtxljmd7wzk3jmqfm\",\"type\":\"room.ended\",\"created_at\":\"2026-11-22T13:55:28.268Z\",\"project_id\":\"prj_nu3vhxcbdps7rv2bkmqatu47\",\"data\":{\"reason\":\"deleted\",\"room_id\":\"room_jc4ikc6urwbvilvvepmb3dhv\",\"sequence\":1}}", signature: "v1=98e42ce6ff52f5f9f6e236bc40d435ffd05f4396806b456a192f4ec553f793a5"},
	{secret: "whsec_test", timestamp: 1700000000, body: "{}", signature: "v1=35495024f4ef3f94e5a93e22221544c4b75e9a42300cd965ab81cb85cd994e91"},
	{secret: "whsec_unicode", timestamp: 1, body: "{\"id\":\"evt_x\",\"type\":\"participant.joined\",\"created_at\":\"2026-01-01T00:00:00.000Z\",\"project_id\":\"prj_x\",\"data\":{\"name\":\"Zoë ☃\"}}\n", signature: "v1=c28d313ccb7cf9a3d4d93347c8be92882bfac4b7df11c2770513013891028d0e"},
}

func webhookHeader(ts, sig string) http.Header {
	h := http.Header{}
	h.Set(HeaderWebhookTimestamp, ts)
	h.Set(HeaderWebhookSignature, sig)
	return h
}

func TestSignWebhookMatchesServer(t *testing.T) {
	for _, v := range signVectors {
		if got := SignWebhook(v.secret, v.timestamp, []byte(v.body)); got != v.signature {
			t.Errorf("SignWebhook(%q, %d) = %s, want %s", v.secret, v.timestamp, got, v.signature)
		}
	}
}

func TestVerifyWebhookVectors(t *testing.T) {
	for _, v := range signVectors {
		at := time.Unix(v.timestamp, 0)
		h := webhookHeader(strconv.FormatInt(v.timestamp, 10), v.signature)
		ev, err := VerifyWebhook(v.secret, []byte(v.body), h, 0, at.Add(4*time.Minute))
		if v.body == "{}" {
			// Authentic, but not an event.
			if !errors.Is(err, ErrWebhookMalformed) {
				t.Errorf("{}: %v", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", v.secret, err)
			continue
		}
		if ev.ID == "" || ev.Type == "" || ev.ProjectID == "" || len(ev.Data) == 0 {
			t.Errorf("event %+v", ev)
		}
		// Tampered body, wrong secret, stale and future timestamps.
		if _, err := VerifyWebhook(v.secret, []byte(v.body+" "), h, 0, at); !errors.Is(err, ErrWebhookSignatureMismatch) {
			t.Errorf("tampered: %v", err)
		}
		if _, err := VerifyWebhook(v.secret+"x", []byte(v.body), h, 0, at); !errors.Is(err, ErrWebhookSignatureMismatch) {
			t.Errorf("wrong secret: %v", err)
		}
		if _, err := VerifyWebhook(v.secret, []byte(v.body), h, 0, at.Add(5*time.Minute+time.Second)); !errors.Is(err, ErrWebhookTimestampOutsideTolerance) {
			t.Errorf("stale: %v", err)
		}
		if _, err := VerifyWebhook(v.secret, []byte(v.body), h, 0, at.Add(-5*time.Minute-time.Second)); !errors.Is(err, ErrWebhookTimestampOutsideTolerance) {
			t.Errorf("future: %v", err)
		}
		if _, err := VerifyWebhook(v.secret, []byte(v.body), h, time.Hour, at.Add(59*time.Minute)); err != nil {
			t.Errorf("custom tolerance: %v", err)
		}
	}
}

func TestVerifyWebhookHeaders(t *testing.T) {
	v := signVectors[0]
	body := []byte(v.body)
	ts := strconv.FormatInt(v.timestamp, 10)
	now := time.Unix(v.timestamp, 0)
	other := SignWebhook("whsec_other", v.timestamp, body)

	// Several entries (secret rotation), other schemes ignored, several lines.
	for _, sig := range []string{other + "," + v.signature, "v2=abc, " + v.signature, v.signature + " , " + other} {
		if _, err := VerifyWebhook(v.secret, body, webhookHeader(ts, sig), 0, now); err != nil {
			t.Errorf("%q: %v", sig, err)
		}
	}
	h := webhookHeader(ts, other)
	h.Add(HeaderWebhookSignature, v.signature)
	if _, err := VerifyWebhook(v.secret, body, h, 0, now); err != nil {
		t.Errorf("two header lines: %v", err)
	}
	// Header names are case-insensitive through http.Header.
	raw := http.Header{"X-Rtc-Timestamp": {ts}, "X-Rtc-Signature": {v.signature}}
	if _, err := VerifyWebhook(v.secret, body, raw, 0, now); err != nil {
		t.Errorf("canonical names: %v", err)
	}

	malformed := []http.Header{
		webhookHeader("", v.signature),
		webhookHeader("+"+ts, v.signature),
		webhookHeader(ts+".0", v.signature),
		webhookHeader("12345678901234567890", v.signature),
		webhookHeader(ts, ""),
		webhookHeader(ts, "v1"),
		webhookHeader(ts, "v1=zz"),
		webhookHeader(ts, "v1="+v.signature[3:]+"00"),
		webhookHeader(ts, "v2="+v.signature[3:]),
		webhookHeader(ts, "v1=a,v1=a,v1=a,v1=a,v1=a,v1=a,v1=a,v1=a,v1=a"),
	}
	for _, h := range malformed {
		if _, err := VerifyWebhook(v.secret, body, h, 0, now); !errors.Is(err, ErrWebhookMalformed) {
			t.Errorf("%v: %v", h, err)
		}
	}
	if _, err := VerifyWebhook("", body, webhookHeader(ts, v.signature), 0, now); !errors.Is(err, ErrWebhookEmptySecret) {
		t.Errorf("empty secret: %v", err)
	}
	// The signature is checked before the timestamp: a forgery with an old
	// timestamp is a mismatch, not a replay.
	if _, err := VerifyWebhook(v.secret, body, webhookHeader(ts, other), 0, now.Add(time.Hour)); !errors.Is(err, ErrWebhookSignatureMismatch) {
		t.Errorf("order: %v", err)
	}
	// The signed timestamp is the header as received: re-formatting it breaks it.
	if _, err := VerifyWebhook(v.secret, body, webhookHeader("0"+ts, v.signature), 0, now); !errors.Is(err, ErrWebhookSignatureMismatch) {
		t.Errorf("leading zero: %v", err)
	}
	ev, err := VerifyWebhook(v.secret, body, webhookHeader(ts, v.signature), 0, now)
	if err != nil {
		t.Fatal(err)
	}
	var data struct {
		RoomID   string `json:"room_id"`
		Sequence int    `json:"sequence"`
	}
	if err := ev.DecodeData(&data); err != nil || data.RoomID != "room_jc4ikc6urwbvilvvepmb3dhv" || data.Sequence != 1 {
		t.Fatalf("data %+v, %v", data, err)
	}
	if ev.Type != EventRoomEnded || !ev.CreatedAt.Equal(time.Date(2026, 11, 22, 13, 55, 28, 268e6, time.UTC)) {
		t.Fatalf("event %+v", ev)
	}
}
