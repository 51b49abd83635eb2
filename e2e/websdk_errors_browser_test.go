package e2e

// The errors of issue 17 as a page sees them: each an RtcError with its
// spec 7 code, from the real server (or a stalled one) and the browser.

import (
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"rtcd/internal/browsertest"
)

// A participant token past its expiry is token_expired; a denied camera
// is media_permission_denied, a camera that is not there
// device_not_found, and a subscriber's publish permission_denied, while
// the session stays connected; a workspace without credit gets
// insufficient_credit.
func TestWebSDKBrowserErrors(t *testing.T) {
	e := start(t, "--bootstrap-credit=2.00")
	page := wsServePages(t)
	b := browsertest.Start(t, browsertest.Options{ExtraFlags: wsChromiumFlags})
	room := e.createRoom(nil)
	p := wsOpen(t, b, page, "ann")

	_, expiring := e.createParticipant(room, map[string]any{"expires_in": 60})
	e.clock.Advance(61 * time.Second)
	p.Allow(401, "/v1/connect")
	if r := p.join("expired", e.Base, expiring); r.OK || r.Code != "token_expired" || r.Debug["api_code"] != "participant_token_expired" {
		t.Errorf("an expired participant token: %+v", r)
	}
	if got := p.states("expired"); !slices.Equal(got, []string{"connecting", "failed"}) {
		t.Errorf("states of the expired token's session: %v", got)
	}
	p.waitEvent("expired", "error", func(ev wsEvent) bool { return ev.Code == "token_expired" })

	_, annToken := e.createParticipant(room, nil)
	p.mustJoin("s", e.Base, annToken)
	if r := p.publishWith("s", "camera", `{deviceId: "no-such-camera"}`); r.OK || r.Code != "device_not_found" || r.Debug["dom_error"] != "OverconstrainedError" {
		t.Errorf("publishing a missing camera: %+v", r)
	}
	p.mustPublish("s", "camera") // the camera that is there
	_, subToken := e.createParticipant(room, map[string]any{"role": "subscriber"})
	p.mustJoin("sub", e.Base, subToken)
	if r := p.publish("sub", "microphone"); r.OK || r.Code != "permission_denied" {
		t.Errorf("a subscriber publishing: %+v", r)
	}
	for _, s := range []string{"s", "sub"} {
		if got := p.states(s); !slices.Equal(got, []string{"connecting", "connected"}) {
			t.Errorf("%s's states after refused publishes: %v", s, got)
		}
	}
	p.Visit("refused-publishes")

	// A person who refuses the camera: a browser whose permission prompt
	// answers no (--use-fake-ui-for-media-stream=deny).
	denying := browsertest.Start(t, browsertest.Options{ExtraFlags: []string{"use-fake-device-for-media-stream", "use-fake-ui-for-media-stream=deny"}})
	d := wsOpen(t, denying, page, "dan")
	_, danToken := e.createParticipant(room, nil)
	d.mustJoin("s", e.Base, danToken)
	for _, source := range []string{"camera", "microphone"} {
		if r := d.publish("s", source); r.OK || r.Code != "media_permission_denied" || r.Debug["dom_error"] != "NotAllowedError" {
			t.Errorf("publishing a refused %s: %+v", source, r)
		}
	}
	if got := d.states("s"); !slices.Equal(got, []string{"connecting", "connected"}) {
		t.Errorf("dan's states after refused publishes: %v", got)
	}
	d.Visit("camera-refused")

	_, poor := e.createParticipant(room, nil)
	e.adminAdjust("-1.50") // 2.00 - 1.50 = 0.50, below --minimum-credit-to-start 1.00
	p.Allow(402, "/v1/connect")
	if r := p.join("poor", e.Base, poor); r.OK || r.Code != "insufficient_credit" || r.Debug["http_status"] != float64(402) {
		t.Errorf("a workspace without credit: %+v", r)
	}
}

// Over the project's connect rate the page gets rate_limited with
// retryAfter in seconds, the server's Retry-After; and a server that
// accepts the connection but never answers gets timeout when the
// 15-second connect deadline passes.
func TestWebSDKBrowserRateLimitAndTimeout(t *testing.T) {
	e := start(t, "--default-connect-requests-per-minute=1")
	page := wsServePages(t)
	b := browsertest.Start(t, browsertest.Options{ExtraFlags: wsChromiumFlags})
	room := e.createRoom(nil)
	_, tok := e.createParticipant(room, nil)
	p := wsOpen(t, b, page, "ann")

	e.connect(tok).must(t, 200)
	e.clock.Advance(20 * time.Second)
	p.Allow(429, "/v1/connect")
	r := p.join("limited", e.Base, tok)
	if r.OK || r.Code != "rate_limited" || r.RetryAfter == nil || *r.RetryAfter != 40 {
		t.Errorf("over the connect rate: %+v (retryAfter %v), want rate_limited with retryAfter 40", r, r.RetryAfter)
	}
	if ev := p.waitEvent("limited", "error", nil); ev.Code != "rate_limited" || ev.RetryAfter == nil || *ev.RetryAfter != 40 {
		t.Errorf("the error event: %v", ev)
	}

	// A stalled API: it accepts and reads, and answers nothing.
	stalled, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stalled.Close() })
	go func() {
		for {
			c, err := stalled.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	began := time.Now()
	p.startJoin("stalled", "http://"+stalled.Addr().String(), tok)
	r = p.waitJoin("stalled", 25*time.Second)
	took := time.Since(began)
	if r.OK || r.Code != "timeout" {
		t.Errorf("a stalled server: %+v", r)
	}
	if took < 14*time.Second { // waitJoin bounds it from above
		t.Errorf("the stalled connect ended after %v, before the 15 s deadline", took)
	}
	if got := p.states("stalled"); !slices.Equal(got, []string{"connecting", "failed"}) {
		t.Errorf("states of the stalled connect: %v", got)
	}
	p.Visit("timed-out")
}
