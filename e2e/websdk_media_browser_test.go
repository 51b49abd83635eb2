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
// leaves, the other sees participant.left and track.unsubscribed.
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
