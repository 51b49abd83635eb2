package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// mediaClient is a participant's socket on the embedded media node.
type mediaClient struct {
	t    *testing.T
	conn *websocket.Conn
}

// joinMedia connects a participant (POST /v1/connect), opens the media
// node's WebSocket at the returned endpoint and joins with the media token.
func (e *env) joinMedia(token string) *mediaClient {
	e.t.Helper()
	cs := e.connect(token).must(e.t, 200)
	conn, _, err := websocket.DefaultDialer.Dial(cs.Str("endpoint"), nil)
	if err != nil {
		e.t.Fatalf("dial %s: %v", cs.Str("endpoint"), err)
	}
	c := &mediaClient{t: e.t, conn: conn}
	e.t.Cleanup(func() { _ = conn.Close() })
	c.send(map[string]any{"type": "join", "media_token": cs.Str("media_token")})
	if m := c.read(); m["type"] != "joined" {
		e.t.Fatalf("join answered %v", m)
	}
	return c
}

func (c *mediaClient) send(v any) {
	c.t.Helper()
	_ = c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if err := c.conn.WriteJSON(v); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// read returns the next message that is not a pong.
func (c *mediaClient) read() map[string]any {
	c.t.Helper()
	for {
		_ = c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, raw, err := c.conn.ReadMessage()
		if err != nil {
			c.t.Fatalf("read: %v", err)
		}
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		if m["type"] != "pong" {
			return m
		}
	}
}

// stay moves the shared fake clock forward by d in heartbeat-sized steps,
// pinging after each so the node never sees the client go quiet.
func (e *env) stay(d time.Duration, clients ...*mediaClient) {
	const step = 5 * time.Second
	for moved := time.Duration(0); moved < d; {
		s := step
		if d-moved < s {
			s = d - moved
		}
		e.clock.Advance(s)
		moved += s
		for _, c := range clients {
			c.send(map[string]any{"type": "ping", "ts": moved.Milliseconds()})
		}
	}
}

func TestMediaJoinStayLeaveIsMeteredAndCharged(t *testing.T) {
	e := start(t)
	room := e.createRoom(map[string]any{"name": "standup"})
	pid, token := e.createParticipant(room, map[string]any{"name": "ann"})

	c := e.joinMedia(token)
	e.eventually("room active and participant joined", func() bool {
		return e.getRoomStatus(room) == "active" && e.participantStatus(room, pid) == "joined"
	})

	e.stay(125*time.Second, c)
	c.send(map[string]any{"type": "leave"})
	e.eventually("participant left", func() bool { return e.participantStatus(room, pid) == "left" })

	day := testEpoch.Format("2006-01-02")
	u := e.do("GET", "/v1/usage/summary?from="+day+"&to="+day, e.Boot.APIKey, nil).must(t, 200)
	if u.JSON["participant_seconds"] != float64(125) || u.JSON["rooms"] != float64(1) || u.JSON["participants"] != float64(1) {
		t.Fatalf("usage summary: %s", u.Raw)
	}
	// 125 participant-seconds at 0.004000 per minute: floor(125 x 4000 / 60)
	// = 8333 micro-units, from the 10.00 opening credit.
	e.eventually("usage charged to the wallet", func() bool {
		b := e.do("GET", "/v1/billing/balance", e.Boot.APIKey, nil).must(t, 200)
		return b.Str("available") == "9.991667" // exact: never rounded away
	})
	ledger := e.do("GET", "/v1/billing/ledger", e.Boot.APIKey, nil).must(t, 200).Data()
	var charged, sum float64
	for _, entry := range ledger {
		var amt float64
		_ = json.Unmarshal([]byte(entry["amount"].(string)), &amt)
		sum += amt
		if entry["type"] == "usage" {
			charged += amt
		}
	}
	if charged > -0.008332 || charged < -0.008334 {
		t.Fatalf("usage charged %.6f, want -0.008333; ledger %v", charged, ledger)
	}
	if got := ledger[0]["balance_after"]; got != "9.991667" {
		t.Fatalf("balance after the last entry %v, want 9.991667", got)
	}
	if sum < 9.991666 || sum > 9.991668 {
		t.Fatalf("ledger sums to %.6f, want the balance 9.991667", sum)
	}
}

func (e *env) getRoomStatus(room string) string {
	return e.do("GET", "/v1/rooms/"+room, e.Boot.APIKey, nil).Str("status")
}

func (e *env) participantStatus(room, pid string) string {
	return e.do("GET", "/v1/rooms/"+room+"/participants/"+pid, e.Boot.APIKey, nil).Str("status")
}
