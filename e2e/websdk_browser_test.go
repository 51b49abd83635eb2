package e2e

// The web client SDK in a real Chromium against the real rtcd and media
// node (harness: websdk_harness_test.go).

import (
	"slices"
	"testing"

	"rtcd/internal/browsertest"
)

// Two pages of another origin join one room: each sees the other's
// participant.joined, a state update arrives as participant.updated, and
// when one leaves the other sees participant.left (reason left) while the
// leaver goes disconnecting, disconnected.
func TestWebSDKBrowserTwoPagesMeet(t *testing.T) {
	e := start(t)
	page := wsServePages(t)
	b := browsertest.Start(t, browsertest.Options{ExtraFlags: wsChromiumFlags})
	room := e.createRoom(nil)
	annID, annToken := e.createParticipant(room, map[string]any{"name": "ann"})
	bobID, bobToken := e.createParticipant(room, map[string]any{"name": "bob"})

	ann := wsOpen(t, b, page, "ann")
	bob := wsOpen(t, b, page, "bob")
	if r := ann.mustJoin("s", e.Base+"/v1/", annToken); r.ParticipantID != annID || r.RoomID != room {
		t.Fatalf("ann joined as %+v", r)
	}
	bob.mustJoin("s", e.Base, bobToken)
	bob.waitEvent("s", "participant.joined", func(ev wsEvent) bool { return ev.Participant == annID })
	ann.waitEvent("s", "participant.joined", func(ev wsEvent) bool { return ev.Participant == bobID })
	if got := ann.states("s"); !slices.Equal(got, []string{"connecting", "connected"}) {
		t.Fatalf("ann's states %v", got)
	}
	if st := e.participantStatus(room, annID); st != "joined" {
		t.Fatalf("ann is %s on the server", st)
	}

	if r := bob.call("s", "updateState", `{"hand":"raised"}`); !r.OK {
		t.Fatalf("updateState: %+v", r)
	}
	ann.waitEvent("s", "participant.updated", func(ev wsEvent) bool {
		return ev.Participant == bobID && ev.ParticipantState["hand"] == "raised"
	})
	if r := bob.call("s", "updateState", `"not an object"`); r.OK || r.Code != "invalid_request" {
		t.Fatalf("updateState with a string: %+v", r)
	}

	if r := bob.call("s", "leave"); !r.OK {
		t.Fatalf("leave: %+v", r)
	}
	left := ann.waitEvent("s", "participant.left", func(ev wsEvent) bool { return ev.Participant == bobID })
	if left.Reason != "left" {
		t.Errorf("participant.left reason %q, want left", left.Reason)
	}
	if got := bob.states("s"); !slices.Equal(got, []string{"connecting", "connected", "disconnecting", "disconnected"}) {
		t.Errorf("bob's states %v", got)
	}
	bob.waitEvent("s", "connection.disconnected", func(ev wsEvent) bool { return ev.Reason == "left" && ev.Code == "" })
	e.eventually("bob left on the server", func() bool { return e.participantStatus(room, bobID) == "left" })
	ann.Visit("one-left")
}
