package media

import (
	"bytes"
	"net/http"
	"runtime"
	"testing"
	"time"
)

// TestHeldSocketKeepsOneGoroutine: once joined and answered, a held socket
// is served by one goroutine, its reader. The HTTP handler returned after
// the upgrade (net/http's goroutine and request state are gone), and a
// writer runs only while messages wait.
func TestHeldSocketKeepsOneGoroutine(t *testing.T) {
	tn := newTestNode(t, nil)
	a, _ := tn.join(t, "1", "a", "1")
	b, _ := tn.join(t, "1", "b", "2")
	a.expect(typeParticipantJoined)
	tn.rec.nextJoin(t)
	tn.rec.nextJoin(t)
	a.ping(1)
	b.ping(2)
	awaitGoroutines(t, map[string]int{
		"rtcd/media.(*Node).serveSocket": 2,
		"rtcd/media.(*conn).writeLoop":   0,
		"rtcd/media.(*Node).ServeHTTP":   0,
	})
	// Still served: a writer starts again for the next message.
	a.ping(3)
	b.send(map[string]any{"type": "update", "state": map[string]any{"hand": true}})
	if m := a.expect(typeParticipantUpdated); m.ParticipantID != "part_b" {
		t.Fatalf("update = %+v", m)
	}
}

// TestFailedUpgradeReleasesItsSlot: a request that passes the upgrade
// check but fails the WebSocket handshake is answered by the upgrader and
// gives its connection slot back; its socket never gets a writer.
func TestFailedUpgradeReleasesItsSlot(t *testing.T) {
	tn := newTestNode(t, func(c *NodeConfig) { c.MaxConnections = 1 })
	for range 3 {
		req, err := http.NewRequest(http.MethodGet, tn.srv.URL+RTCPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "12") // not 13: the upgrader refuses
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		expectHTTPStatus(t, resp, http.StatusBadRequest)
	}
	c, _ := tn.join(t, "1", "a", "1") // the one slot is free
	tn.rec.nextJoin(t)
	c.ping(1)
}

// awaitGoroutines waits until, for each function, exactly that many
// goroutines have it on their stack (goroutines of earlier tests may
// still be finishing), and fails with the dump after testWaitSeconds.
func awaitGoroutines(t *testing.T, want map[string]int) {
	t.Helper()
	deadline := time.Now().Add(testWaitSeconds * time.Second)
	buf := make([]byte, 1<<20)
	for {
		dump := buf[:runtime.Stack(buf, true)]
		got := make(map[string]int, len(want))
		for _, g := range bytes.Split(dump, []byte("\n\n")) {
			for fn := range want {
				if bytes.Contains(g, []byte(fn+"(")) {
					got[fn]++
				}
			}
		}
		ok := true
		for fn, n := range want {
			ok = ok && got[fn] == n
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines by function %v, want %v\n%s", got, want, dump)
		}
		time.Sleep(10 * time.Millisecond) // polling goroutines that are finishing
	}
}
