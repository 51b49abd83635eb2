package e2e

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"rtcd/auth"
	"rtcd/media"
	"rtcd/server"
)

// A media node run on its own (as `rtcd media` runs it): the control plane
// has no embedded node, the node reports joins and leaves over signed HTTP to
// the private listener, and room closure reaches the node as a signed
// command through --media-control-url.
func TestStandaloneMediaNode(t *testing.T) {
	nodeLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nodeAddr := nodeLn.Addr().String()
	e := start(t, "--media-listen=", "--media-url=ws://"+nodeAddr+media.RTCPath, "--media-control-url=http://"+nodeAddr)

	keys := e.masterKeys()
	signing := server.MediaReportKey(keys.MediaToken())
	reporter, err := media.NewHTTPReporter(media.HTTPConfig{BaseURL: e.Metrics, Key: signing, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	node, err := media.NewNode(media.NodeConfig{NodeID: "standalone", Verifier: auth.NewMediaVerifier(keys.MediaToken()), Clock: e.clock, Reporter: reporter})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- node.Serve(ctx, nodeLn, media.NewControlHandler(node, signing, e.clock)) }()
	t.Cleanup(func() {
		cancel()
		<-served
		_ = reporter.Close(context.Background())
	})

	room := e.createRoom(nil)
	pid, token := e.createParticipant(room, nil)
	c := e.joinMedia(token) // the connect endpoint is the standalone node
	e.eventually("join reported over HTTP", func() bool { return e.participantStatus(room, pid) == "joined" })
	// The node reports presence on a real 5 s ticker, which the fake clock
	// outruns; a node on its own silent for 15 s counts as gone. So after
	// each step the node's own snapshot is delivered (and taken) at once.
	for moved := time.Duration(0); moved < 30*time.Second; moved += 5 * time.Second {
		e.stay(5*time.Second, c)
		p := node.Presence()
		e.postReport(signing, media.Report{Type: media.ReportPresence, Presence: &p})
	}

	// Ending the room sends close_room to the node; the client is told and
	// the node's leave report finalizes nothing twice.
	e.do("DELETE", "/v1/rooms/"+room, e.Boot.APIKey, nil).must(t, 200)
	for {
		m := c.read()
		if m["type"] == "error" || m["type"] == "room.closed" {
			break
		}
	}
	e.eventually("room ended", func() bool { return e.getRoomStatus(room) == "ended" })
	day := testEpoch.Format("2006-01-02")
	u := e.do("GET", "/v1/usage/summary?from="+day+"&to="+day, e.Boot.APIKey, nil).must(t, 200)
	if u.JSON["participant_seconds"] != float64(30) {
		t.Fatalf("usage finalized by the room's end: %s", u.Raw)
	}

	// A forged report is refused by the private listener.
	res, err := e.client.Post(e.Metrics+media.ReportsPath, "application/json", strings.NewReader(`{"type":"left","left":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 {
		t.Fatalf("unsigned report answered %d, want 401", res.StatusCode)
	}
}
