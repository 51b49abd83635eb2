package e2e

// The web SDK's media in Chromium (fake cameras and microphones) through
// the real rtcd's media node (its WebRTC SFU).

import (
	"slices"
	"testing"

	"rtcd/internal/browsertest"
)

// Two pages join one room and publish camera and microphone: each decodes
// the other's video (frames decoded grow, the element has the camera's
// size) and receives its audio. A muted camera or microphone sends
// nothing and the other page sees it muted; unmuted, it flows again. A
// switch to the other camera keeps the same track flowing. When one
// leaves, the other sees participant.left and track.unsubscribed. A screen
// share arrives as a third track and goes when unpublished.
func TestWebSDKBrowserMediaCall(t *testing.T) {
	e := start(t)
	page := wsServePages(t)
	b := browsertest.Start(t, browsertest.Options{ExtraFlags: wsChromiumFlags})
	room := e.createRoom(nil)
	annID, annToken := e.createParticipant(room, nil)
	bobID, bobToken := e.createParticipant(room, nil)
	ann := wsOpen(t, b, page, "ann")
	bob := wsOpen(t, b, page, "bob")
	ann.mustJoin("s", e.Base, annToken)
	bob.mustJoin("s", e.Base, bobToken)
	for _, p := range []*wsPage{ann, bob} {
		if r := p.mustPublish("s", "camera"); r.Value.Kind != "video" || r.Value.DeviceID == "" || r.Value.Muted {
			t.Fatalf("%s: camera published as %+v", p.name, r.Value)
		}
		p.mustPublish("s", "microphone")
	}
	for _, c := range []struct {
		p    *wsPage
		from string
	}{{ann, bobID}, {bob, annID}} {
		for _, source := range []string{"camera", "microphone"} {
			c.p.waitEvent("s", "track.subscribed", func(ev wsEvent) bool { return ev.Participant == c.from && ev.Source == source })
		}
		c.p.waitEvent("s", "participant.updated", func(ev wsEvent) bool {
			return ev.Participant == c.from && slices.Contains(ev.Tracks, "camera") && slices.Contains(ev.Tracks, "microphone")
		})
		v := c.p.waitReceiving("s", c.from, "camera")
		if v.Width != 640 || v.Height != 480 {
			t.Errorf("%s receives a %dx%d video, want the fake camera's 640x480", c.p.name, v.Width, v.Height)
		}
		c.p.waitReceiving("s", c.from, "microphone")
	}
	ann.Visit("call")

	// Mute: the other page sees it in participant.updated, and nothing
	// more arrives; unmute: it flows again.
	for _, source := range []string{"camera", "microphone"} {
		if r := bob.local("s", source, "mute"); !r.OK || !r.Value.Muted {
			t.Fatalf("mute %s: %+v", source, r)
		}
		ann.waitEvent("s", "participant.updated", func(ev wsEvent) bool {
			return ev.Participant == bobID && slices.Contains(ev.Muted, source)
		})
		ann.waitStill("s", bobID, source)
	}
	ann.Visit("bob-muted")
	for _, source := range []string{"camera", "microphone"} {
		if r := bob.local("s", source, "unmute"); !r.OK || r.Value.Muted {
			t.Fatalf("unmute %s: %+v", source, r)
		}
		ann.waitEvent("s", "participant.updated", func(ev wsEvent) bool {
			return ev.Participant == bobID && !slices.Contains(ev.Muted, source) && slices.Contains(ev.Tracks, source)
		})
		ann.waitReceiving("s", bobID, source)
	}
	if st := bob.received("s", annID, "camera"); st == nil {
		t.Fatal("bob lost ann's camera")
	}

	// A switch to the other camera keeps the same track flowing: no new
	// track.subscribed at ann's.
	first := bob.device("videoinput", "fake_device_0")
	other := bob.device("videoinput", "fake_device_2")
	if r := bob.local("s", "camera", "unmute"); r.Value.DeviceID != first { // unmute of an unmuted track: no-op
		t.Fatalf("bob's camera is %s, want the default fake_device_0 %s", r.Value.DeviceID, first)
	}
	subscribed := len(wsNamed(ann.events("s"), "track.subscribed"))
	if r := bob.local("s", "camera", "switchDevice", jsQuote(other)); !r.OK || r.Value.DeviceID != other {
		t.Fatalf("switchDevice to %s: %+v", other, r)
	}
	ann.waitReceiving("s", bobID, "camera")
	ann.Visit("bob-switched-camera")
	if n := len(wsNamed(ann.events("s"), "track.subscribed")); n != subscribed {
		t.Errorf("the switch made %d new track.subscribed at ann's", n-subscribed)
	}

	// Ann shares her screen (Chromium's fake display), then stops: bob
	// receives it as a third track, then sees it go.
	if r := ann.mustPublish("s", "screen_share"); r.Value.Kind != "video" {
		t.Fatalf("screen_share published as %+v", r.Value)
	}
	bob.waitEvent("s", "track.subscribed", func(ev wsEvent) bool { return ev.Participant == annID && ev.Source == "screen_share" })
	bob.waitReceiving("s", annID, "screen_share")
	bob.Visit("ann-shares-her-screen")
	if r := ann.local("s", "screen_share", "unpublish"); !r.OK {
		t.Fatalf("unpublish screen_share: %+v", r)
	}
	bob.waitEvent("s", "track.unsubscribed", func(ev wsEvent) bool {
		return ev.Participant == annID && ev.Source == "screen_share" && ev.Reason == "unpublished"
	})
	bob.waitReceiving("s", annID, "camera") // the rest flows on

	// Bob leaves: ann sees him go, and his tracks with him.
	if r := bob.call("s", "leave"); !r.OK {
		t.Fatalf("leave: %+v", r)
	}
	ann.waitEvent("s", "participant.left", func(ev wsEvent) bool { return ev.Participant == bobID && ev.Reason == "left" })
	for _, source := range []string{"camera", "microphone"} {
		ann.waitEvent("s", "track.unsubscribed", func(ev wsEvent) bool {
			return ev.Participant == bobID && ev.Source == source && ev.Reason == "unpublished"
		})
	}
	if r := ann.received("s", bobID, "camera"); r != nil {
		t.Errorf("ann still has bob's camera: %+v", r)
	}
	ann.Visit("bob-left")
}

// wsCall joins ann and bob to a new room of e with camera and microphone
// and waits until each decodes the other's video and receives its audio.
func wsCall(t *testing.T, e *env, b *browsertest.Browser, page string) (ann, bob *wsPage, annID, bobID string) {
	t.Helper()
	room := e.createRoom(nil)
	annID, annToken := e.createParticipant(room, nil)
	bobID, bobToken := e.createParticipant(room, nil)
	ann = wsOpen(t, b, page, "ann")
	bob = wsOpen(t, b, page, "bob")
	ann.mustJoin("s", e.Base, annToken)
	bob.mustJoin("s", e.Base, bobToken)
	for _, p := range []*wsPage{ann, bob} {
		p.mustPublish("s", "camera")
		p.mustPublish("s", "microphone")
	}
	ann.waitReceiving("s", bobID, "camera")
	ann.waitReceiving("s", bobID, "microphone")
	bob.waitReceiving("s", annID, "camera")
	bob.waitReceiving("s", annID, "microphone")
	return ann, bob, annID, bobID
}

// Ann's media socket is cut (a network failure; the server runs on): her
// page goes connected, reconnecting, connected, her tracks are published
// again, and each page decodes the other's media again. Bob sees her leave
// (disconnected) and come back with new tracks.
func TestWebSDKBrowserMediaReconnectAfterCut(t *testing.T) {
	proxy := wsStartCutProxy(t)
	e := start(t, "--media-url", "ws://"+proxy.Addr()+"/rtc")
	proxy.SetTarget(e.srv.MediaAddr())
	page := wsServePages(t)
	b := browsertest.Start(t, browsertest.Options{ExtraFlags: wsChromiumFlags})
	ann, bob, annID, bobID := wsCall(t, e, b, page)
	annCamera := bob.waitEvent("s", "track.subscribed", func(ev wsEvent) bool { return ev.Participant == annID && ev.Source == "camera" })

	proxy.Cut(t, 0) // ann joined first
	ann.waitEvent("s", "connection.reconnected", nil)
	if got := ann.states("s"); !slices.Equal(got, []string{"connecting", "connected", "reconnecting", "connected"}) {
		t.Fatalf("ann's states %v", got)
	}
	rec := ann.waitEvent("s", "connection.reconnecting", nil)
	if rec.Attempt != 1 || rec.Code != "connection_lost" {
		t.Errorf("connection.reconnecting %v, want attempt 1 after connection_lost", rec)
	}
	for _, source := range []string{"camera", "microphone"} {
		ann.waitEvent("s", "track.unsubscribed", func(ev wsEvent) bool {
			return ev.Participant == bobID && ev.Source == source && ev.Reason == "disconnected"
		})
	}
	bob.waitEvent("s", "participant.left", func(ev wsEvent) bool { return ev.Participant == annID && ev.Reason == "disconnected" })
	bob.waitEvent("s", "track.unsubscribed", func(ev wsEvent) bool { return ev.TrackID == annCamera.TrackID && ev.Reason == "unpublished" })
	bob.waitEvent("s", "track.subscribed", func(ev wsEvent) bool {
		return ev.Participant == annID && ev.Source == "camera" && ev.TrackID != annCamera.TrackID
	})
	for _, source := range []string{"camera", "microphone"} {
		ann.waitReceiving("s", bobID, source)
		bob.waitReceiving("s", annID, source)
	}
	ann.Visit("reconnected")
	bob.Visit("ann-is-back")
}

// rtcd restarts (a deploy) on the same addresses: the node tells both
// pages node_shutdown, they reconnect once the API answers again, publish
// their tracks again, and each decodes the other's media again.
func TestWebSDKBrowserMediaReconnectAfterRestart(t *testing.T) {
	e := start(t)
	page := wsServePages(t)
	b := browsertest.Start(t, browsertest.Options{ExtraFlags: wsChromiumFlags})
	ann, bob, annID, bobID := wsCall(t, e, b, page)
	for _, p := range []*wsPage{ann, bob} {
		p.AllowFailed(e.Base + "/v1/connect") // refused while rtcd is down
	}
	e.rsRestart(t, "--listen", e.srv.APIAddr(), "--media-listen", e.srv.MediaAddr())
	for _, p := range []*wsPage{ann, bob} {
		p.waitEvent("s", "connection.reconnected", nil)
		rec := p.waitEvent("s", "connection.reconnecting", nil)
		if rec.Attempt != 1 || rec.Code != "service_unavailable" {
			t.Errorf("%s: connection.reconnecting %v, want attempt 1 after node_shutdown (service_unavailable)", p.name, rec)
		}
		if got := p.states("s"); !slices.Equal(got, []string{"connecting", "connected", "reconnecting", "connected"}) {
			t.Errorf("%s's states %v", p.name, got)
		}
	}
	for _, source := range []string{"camera", "microphone"} {
		ann.waitReceiving("s", bobID, source)
		bob.waitReceiving("s", annID, source)
	}
	ann.Visit("after-restart")
}
