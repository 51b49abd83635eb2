package e2e

// The dashboard's "Join in browser": two people of the project hold a call
// in a room from the dashboard alone (its call page, through the web SDK),
// against the real rtcd and its media node, in Chromium with fake devices.

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"rtcd/internal/browsertest"
)

// wsDashboardSees waits until the call page p plays a video of another
// participant whose frames advance, and returns that participant's id.
func wsDashboardSees(t *testing.T, p *browsertest.Page) string {
	t.Helper()
	const sel = `document.querySelector('.call-tile[data-participant] video')`
	p.WaitTrue("another participant's video", sel+"?.videoWidth > 0", wsEventWait)
	frames := func() int {
		var n int
		p.Eval(sel+".getVideoPlaybackQuality().totalVideoFrames", &n)
		return n
	}
	first := frames()
	deadline := time.Now().Add(wsEventWait)
	for frames() <= first {
		if time.Now().After(deadline) {
			t.Fatalf("the other participant's video stays at %d frames", first)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var id string
	p.Eval(`document.querySelector('.call-tile[data-participant]').dataset.participant`, &id)
	return id
}

func TestDashboardBrowserJoinCall(t *testing.T) {
	e := start(t)
	room := e.createRoom(map[string]any{"name": "standup"})
	call := fmt.Sprintf("%s/p/%s/rooms/%s/call", e.Base, e.Boot.ProjectID, room)

	// Only the call page's document may use the camera and microphone and
	// reach the media node.
	for _, c := range []struct {
		url, permissions, connect string
	}{
		{call, "camera=(self), microphone=(self)", "connect-src 'self' ws://" + e.srv.MediaAddr() + ";"},
		{e.Base + "/p/" + e.Boot.ProjectID + "/rooms/" + room, "camera=(), microphone=()", "connect-src 'self';"},
	} {
		res, err := http.Get(c.url)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if pp := res.Header.Get("Permissions-Policy"); !strings.Contains(pp, c.permissions) {
			t.Errorf("%s: Permissions-Policy %q, want %s", c.url, pp, c.permissions)
		}
		if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, c.connect) {
			t.Errorf("%s: Content-Security-Policy %q, want %s", c.url, csp, c.connect)
		}
	}

	b := browsertest.Start(t, browsertest.Options{ExtraFlags: wsChromiumFlags})
	ann := b.NewPage(t, "ann")
	bob := b.NewPage(t, "bob")
	e.browserSignIn(ann, e.Boot.OwnerEmail, false)
	e.browserSignIn(bob, e.Boot.OwnerEmail, false)

	ann.Go(e.Base + "/p/" + e.Boot.ProjectID + "/rooms/" + room)
	ann.WaitText("Join in browser")
	ann.Visit("room")
	ann.Click("Join in browser")
	ann.WaitText("Join the call")
	if u := ann.URL(); u != call {
		t.Fatalf("Join in browser went to %s, want %s", u, call)
	}
	ann.Visit("call-before-joining")
	ann.Click("Join the call")
	ann.WaitText("In the call")
	ann.WaitText("Nobody else is here yet.")

	bob.Go(call)
	bob.Click("Join the call")
	bob.WaitText("In the call")
	annID := wsDashboardSees(t, bob)
	bobID := wsDashboardSees(t, ann)
	if annID == bobID || !strings.HasPrefix(annID, "part_") {
		t.Fatalf("ann sees %s, bob sees %s", bobID, annID)
	}
	ann.Visit("in-call")
	for _, id := range []string{annID, bobID} {
		if st := e.participantStatus(room, id); st != "joined" {
			t.Errorf("participant %s is %s on the server", id, st)
		}
	}

	ann.Click("Mute microphone")
	bob.WaitText("(microphone muted)")
	ann.Click("Turn camera off")
	bob.WaitText("(camera off, microphone muted)")
	bob.WaitText("Camera off")
	bob.Visit("ann-muted")
	ann.Click("Turn camera on")
	ann.Click("Unmute microphone")
	bob.WaitNoText("microphone muted")
	wsDashboardSees(t, bob)

	bob.Click("Leave the call")
	bob.WaitText("You left the call.")
	ann.WaitText("Nobody else is here yet.")
	e.eventually("bob left on the server", func() bool { return e.participantStatus(room, bobID) == "left" })
	bob.Visit("left")
}
