package e2e

// The web SDK's example page (sdk/web/examples) as a person uses it: two
// people paste their participant tokens, join with camera and microphone,
// see each other, mute, and leave.

import (
	"fmt"
	"testing"
	"time"

	"rtcd/internal/browsertest"
)

// wsExampleJoin fills the example's form and joins.
func wsExampleJoin(t *testing.T, p *browsertest.Page, pageURL, api, token string) {
	t.Helper()
	p.Go(pageURL + "examples/")
	p.Fill("API address", api)
	p.Fill("Participant token", token)
	p.Click("Join")
	p.WaitText("Connected")
}

// wsExampleSees waits until p plays a video of another participant whose
// frames advance.
func wsExampleSees(t *testing.T, p *browsertest.Page, participantID string) {
	t.Helper()
	sel := fmt.Sprintf(`document.querySelector('#others figure[data-participant=%q] video')`, participantID)
	p.WaitTrue("the video of "+participantID, sel+"?.videoWidth > 0", wsEventWait)
	frames := func() int {
		var n int
		p.Eval(sel+".getVideoPlaybackQuality().totalVideoFrames", &n)
		return n
	}
	first := frames()
	deadline := time.Now().Add(wsEventWait)
	for frames() <= first {
		if time.Now().After(deadline) {
			t.Fatalf("the video of %s stays at %d frames", participantID, first)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestWebSDKBrowserExamplePage(t *testing.T) {
	e := start(t)
	pageURL := wsServePages(t)
	b := browsertest.Start(t, browsertest.Options{ExtraFlags: wsChromiumFlags})
	room := e.createRoom(nil)
	annID, annToken := e.createParticipant(room, nil)
	bobID, bobToken := e.createParticipant(room, nil)
	ann := b.NewPage(t, "ann")
	bob := b.NewPage(t, "bob")

	ann.Go(pageURL + "examples/")
	ann.Visit("join-form")
	wsExampleJoin(t, ann, pageURL, e.Base, annToken)
	ann.WaitText("Nobody else is here yet.")
	wsExampleJoin(t, bob, pageURL, e.Base, bobToken)
	wsExampleSees(t, ann, bobID)
	wsExampleSees(t, bob, annID)
	ann.Visit("in-call")

	ann.Click("Mute microphone")
	ann.WaitText("Unmute microphone")
	bob.WaitText(annID + " (microphone muted)")
	ann.Click("Turn camera off")
	bob.WaitText(annID + " (camera off, microphone muted)")
	bob.Visit("ann-muted")
	ann.Click("Unmute microphone")
	ann.Click("Turn camera on")
	bob.WaitNoText(annID + " (") // the caption without "(camera off, microphone muted)"
	wsExampleSees(t, bob, annID)

	ann.Click("Leave")
	ann.WaitText("Join")
	bob.WaitText("Nobody else is here yet.")
	bob.Visit("alone-again")
	e.eventually("ann left on the server", func() bool { return e.participantStatus(room, annID) == "left" })
}
