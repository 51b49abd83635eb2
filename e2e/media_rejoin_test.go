package e2e

import (
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestMediaTokenIsGoodForOneSession: a client that lost a joined connection
// cannot rejoin the node with its old, unexpired media token (its session's
// usage is closed, so it would be on the node unmetered); a new
// POST /v1/connect starts a new, metered session.
func TestMediaTokenIsGoodForOneSession(t *testing.T) {
	e := start(t)
	room := e.createRoom(nil)
	pid, token := e.createParticipant(room, nil)
	cs := e.connect(token).must(t, 200)
	endpoint, mediaToken := cs.Str("endpoint"), cs.Str("media_token")

	dialJoin := func() *mediaClient {
		conn, _, err := websocket.DefaultDialer.Dial(endpoint, nil)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		c := &mediaClient{t: t, conn: conn}
		c.send(map[string]any{"type": "join", "media_token": mediaToken})
		if m := c.read(); m["type"] != "joined" {
			t.Fatalf("join answered %v", m)
		}
		return c
	}
	first := dialJoin()
	e.eventually("participant joined", func() bool { return e.participantStatus(room, pid) == "joined" })
	_ = first.conn.Close() // the connection drops
	e.eventually("participant left", func() bool { return e.participantStatus(room, pid) == "left" })

	// Rejoining with the spent token is refused at the join.
	conn, _, err := websocket.DefaultDialer.Dial(endpoint, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	again := &mediaClient{t: t, conn: conn}
	again.send(map[string]any{"type": "join", "media_token": mediaToken})
	if m := again.read(); m["type"] != "error" || m["code"] != "token_expired" {
		t.Fatalf("a rejoin with a spent media token answered %v, want error token_expired", m)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := conn.ReadMessage(); err == nil {
		t.Fatal("the socket stayed open after the refusal")
	} else if ce, ok := err.(*websocket.CloseError); !ok || ce.Code != 4002 {
		t.Fatalf("close: %v, want code 4002", err)
	}
	if got := e.participantStatus(room, pid); got != "left" {
		t.Fatalf("participant is %q after the refused rejoin, want left", got)
	}

	// A new connect starts a new, metered session.
	e.joinMedia(token)
	e.eventually("participant joined again", func() bool { return e.participantStatus(room, pid) == "joined" })
}
