package e2e

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Webhook deliveries survive kill -9: the real binary, a real HTTPS
// receiver that fails every delivery until the process is killed, then a
// restart with a short retry schedule. Every event whose cause was
// acknowledged, and every event the receiver saw before the kill, is then
// delivered (at least once), and no event is invented.

// wcPreKillSchedule keeps failed deliveries retrying (never dead) for the
// whole pre-kill phase, each due again within two seconds.
var wcPreKillSchedule = strings.TrimSuffix(strings.Repeat("2,", 30), ",")

func TestWebhookCrashRedeliversAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the rtcd binary")
	}
	began := time.Now()
	bin := binBuild(t)
	t.Logf("built rtcd in %v", time.Since(began).Round(time.Millisecond))

	rcv := newWHReceiver(t) // real clock: the binary signs with time.Now
	var healthy atomic.Bool
	rcv.on("/hook", func(w http.ResponseWriter, _ *http.Request) {
		if healthy.Load() {
			w.WriteHeader(200)
			return
		}
		w.WriteHeader(500)
	})
	dataDir := t.TempDir()
	boot := binInit(t, bin, dataDir)
	flags := append([]string{"--webhook-allow-private", "--webhook-extra-ca-file=" + rcv.caFile}, binGenerousLimits...)
	p := binServe(t, bin, dataDir, boot.APIKey, append(flags, "--webhook-retry-schedule="+wcPreKillSchedule)...)
	c := binClient(true)
	ep, err := binCall(c, "POST", p.Base+"/v1/webhook-endpoints", boot.APIKey, map[string]any{"url": rcv.url("/hook"), "events": []string{"room.ended"}})
	if err != nil || ep.status != 201 {
		t.Fatalf("create endpoint: %v %d %s", err, ep.status, ep.raw)
	}
	secret, epID := ep.str("signing_secret"), ep.str("id")

	// Rooms deleted: each DELETE acknowledged means a room.ended must follow.
	var rooms []string
	endRooms := func(n int) {
		t.Helper()
		for range n {
			r, err := binCall(c, "POST", p.Base+"/v1/rooms", boot.APIKey, map[string]any{})
			if err != nil || r.status != 201 {
				t.Fatalf("create room: %v %d %s", err, r.status, r.raw)
			}
			d, err := binCall(c, "DELETE", p.Base+"/v1/rooms/"+r.str("id"), boot.APIKey, nil)
			if err != nil || d.status != 200 {
				t.Fatalf("delete room: %v %d %s", err, d.status, d.raw)
			}
			rooms = append(rooms, r.str("id"))
		}
	}
	endRooms(20)
	// Let the failures pile up: every one of those events attempted and
	// refused, and some retried (every 2 s) and refused again.
	deadline := time.Now().Add(30 * time.Second)
	for len(whDistinct(rcv.requests("/hook"))) < 20 || len(rcv.requests("/hook")) < 25 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d events attempted before the kill\n%s", len(whDistinct(rcv.requests("/hook"))), p.logTail())
		}
		time.Sleep(20 * time.Millisecond) // polling the real process
	}
	// More events right before the kill: some still in the outbox or not
	// yet attempted, rooms perhaps still ending.
	endRooms(10)
	p.kill()
	seenBeforeKill := map[string]bool{}
	for _, q := range rcv.requests("/hook") {
		if q.Status == 200 {
			t.Fatalf("a delivery succeeded before the kill: %s", q.Body)
		}
		seenBeforeKill[q.Header.Get("X-RTC-Webhook-Id")] = true
	}
	attemptsBeforeKill := len(rcv.requests("/hook"))

	healthy.Store(true)
	restarted := time.Now()
	p2 := binServe(t, bin, dataDir, boot.APIKey, append(flags, "--webhook-retry-schedule=1,1,1")...)

	// Every room's room.ended is acknowledged (200) by the receiver.
	acked := func() (byRoom map[string]map[string]bool, ids map[string]bool) {
		byRoom, ids = map[string]map[string]bool{}, map[string]bool{}
		for _, q := range rcv.requests("/hook") {
			if q.Status != 200 {
				continue
			}
			var ev whEvent
			if err := json.Unmarshal(q.Body, &ev); err != nil {
				t.Fatalf("body %s: %v", q.Body, err)
			}
			room, _ := ev.Data["room_id"].(string)
			if byRoom[room] == nil {
				byRoom[room] = map[string]bool{}
			}
			byRoom[room][ev.ID] = true
			ids[ev.ID] = true
		}
		return byRoom, ids
	}
	deadline = time.Now().Add(60 * time.Second)
	for {
		byRoom, ids := acked()
		missing := 0
		for _, room := range rooms {
			if len(byRoom[room]) == 0 {
				missing++
			}
		}
		for id := range seenBeforeKill {
			if !ids[id] {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events not delivered %v after the restart\n%s", missing, time.Since(restarted), p2.logTail())
		}
		time.Sleep(20 * time.Millisecond) // polling the real process
	}
	t.Logf("%d events, %d attempts before the kill (%d events seen); all delivered %v after the restart",
		len(rooms), attemptsBeforeKill, len(seenBeforeKill), time.Since(restarted).Round(time.Millisecond))

	// Nothing invented: one event per room, only for rooms that were
	// deleted, and every request verifies (the HMAC recomputed here, the
	// timestamp within five minutes of this machine's clock).
	byRoom, _ := acked()
	if len(byRoom) != len(rooms) {
		t.Fatalf("room.ended for %d rooms, %d were deleted", len(byRoom), len(rooms))
	}
	for room, ids := range byRoom {
		if len(ids) != 1 {
			t.Fatalf("room %s: %d distinct room.ended events %v", room, len(ids), ids)
		}
	}
	for _, q := range rcv.requests("/hook") {
		ts := q.Header.Get("X-RTC-Timestamp")
		if q.Header.Get("X-RTC-Signature") != whSign(secret, ts, q.Body) {
			t.Fatalf("signature of %s does not verify", q.Body)
		}
		unix, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || time.Since(time.Unix(unix, 0)).Abs() > 5*time.Minute {
			t.Fatalf("X-RTC-Timestamp %q", ts)
		}
		var ev whEvent
		_ = json.Unmarshal(q.Body, &ev)
		if ev.ID != q.Header.Get("X-RTC-Webhook-Id") || ev.Type != "room.ended" || ev.ProjectID != boot.ProjectID {
			t.Fatalf("delivery %v: %s", q.Header, q.Body)
		}
	}

	// The service agrees: one delivery per event, each succeeded.
	deadline = time.Now().Add(30 * time.Second)
	for {
		r, err := binCall(c, "GET", p2.Base+"/v1/webhook-endpoints/"+epID+"/deliveries?limit=100", boot.APIKey, nil)
		if err != nil || r.status != 200 {
			t.Fatalf("deliveries: %v %d %s", err, r.status, r.raw)
		}
		data, _ := r.json["data"].([]any)
		succeeded := 0
		for _, v := range data {
			if v.(map[string]any)["status"] == "succeeded" {
				succeeded++
			}
		}
		if len(data) != len(rooms) {
			t.Fatalf("%d deliveries for %d events: %s", len(data), len(rooms), r.raw)
		}
		if succeeded == len(rooms) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d deliveries succeeded: %s", succeeded, len(rooms), r.raw)
		}
		time.Sleep(20 * time.Millisecond) // polling the real process
	}
}

// TestWebhookCrashMidStreamRepeatsAtMostAWindow: kill -9 of the real binary
// while deliveries stream to a healthy receiver, with a window of attempts
// in flight (the receiver holds them, so the kill finds the window full).
// Attempts are recorded in groups, and an attempt counts in its endpoint's
// window until its record is durable, so only a window of events can have
// been sent without a record: after the restart every event is delivered,
// the service holds one delivery per event, each succeeded, and the
// receiver got at most a window of events twice (at least once, never
// more than that).
func TestWebhookCrashMidStreamRepeatsAtMostAWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the rtcd binary")
	}
	const window, rooms, answeredFreely = 8, 80, 40
	bin := binBuild(t)
	rcv := newWHReceiver(t) // real clock: the binary signs with time.Now
	killed := make(chan struct{})
	var requests, holding atomic.Int32
	rcv.on("/hook", func(w http.ResponseWriter, r *http.Request) {
		// After the first answeredFreely, requests wait for the kill (the
		// process never learns their answer).
		if requests.Add(1) > answeredFreely {
			holding.Add(1)
			select {
			case <-killed:
			case <-r.Context().Done():
			}
		}
		w.WriteHeader(200)
	})
	dataDir := t.TempDir()
	boot := binInit(t, bin, dataDir)
	flags := append(rcv.flags("--webhook-window="+strconv.Itoa(window)), binGenerousLimits...)
	p := binServe(t, bin, dataDir, boot.APIKey, flags...)
	c := binClient(true)
	epID := binMust(t, c, p, "POST", "/v1/webhook-endpoints", boot.APIKey,
		map[string]any{"url": rcv.url("/hook"), "events": []string{"room.ended"}}, 201).str("id")
	ended := map[string]bool{}
	for range rooms {
		id := binMust(t, c, p, "POST", "/v1/rooms", boot.APIKey, map[string]any{}, 201).str("id")
		binMust(t, c, p, "DELETE", "/v1/rooms/"+id, boot.APIKey, nil, 200)
		ended[id] = true
	}
	// The window fills with held requests: the kill comes with a window of
	// attempts in flight.
	for deadline := time.Now().Add(30 * time.Second); holding.Load() < window; {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests held, want the window of %d in flight\n%s", holding.Load(), window, p.logTail())
		}
		time.Sleep(20 * time.Millisecond) // polling the real process
	}
	p.kill()
	close(killed)
	sentBeforeKill := map[string]int{}
	requestsBeforeKill := rcv.requests("/hook")
	for _, q := range requestsBeforeKill {
		sentBeforeKill[q.Header.Get("X-RTC-Webhook-Id")]++
	}

	p2 := binServe(t, bin, dataDir, boot.APIKey, flags...)
	// Every room's room.ended delivered (some were still in the outbox at
	// the kill), and recorded once, as succeeded.
	for deadline := time.Now().Add(60 * time.Second); ; {
		r, err := binCall(c, "GET", p2.Base+"/v1/webhook-endpoints/"+epID+"/deliveries?limit=100", boot.APIKey, nil)
		if err != nil || r.status != 200 {
			t.Fatalf("deliveries: %v %d %s", err, r.status, r.raw)
		}
		data, _ := r.json["data"].([]any)
		succeeded, events := 0, map[string]bool{}
		for _, v := range data {
			dl := v.(map[string]any)
			events[dl["event_id"].(string)] = true
			if dl["status"] == "succeeded" {
				succeeded++
			}
		}
		if len(data) > rooms || len(events) != len(data) {
			t.Fatalf("%d deliveries of %d events, for %d rooms", len(data), len(events), rooms)
		}
		if succeeded == rooms {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries, %d of them succeeded, for %d events after the restart\n%s", len(data), succeeded, rooms, p2.logTail())
		}
		time.Sleep(20 * time.Millisecond) // polling the real process
	}

	received := map[string]int{} // event id -> requests
	roomsSeen := map[string]bool{}
	for _, q := range rcv.requests("/hook") {
		var ev whEvent
		if err := json.Unmarshal(q.Body, &ev); err != nil || ev.Type != "room.ended" || ev.ID != q.Header.Get("X-RTC-Webhook-Id") {
			t.Fatalf("delivery %v: %s", q.Header, q.Body)
		}
		received[ev.ID]++
		room, _ := ev.Data["room_id"].(string)
		if !ended[room] {
			t.Fatalf("room.ended of %s, a room that was not deleted", room)
		}
		roomsSeen[room] = true
	}
	if len(received) != rooms || len(roomsSeen) != rooms {
		t.Fatalf("%d events of %d rooms received, want one per deleted room (%d)", len(received), len(roomsSeen), rooms)
	}
	repeated := 0
	for id, n := range received {
		if n > 2 || (n == 2 && sentBeforeKill[id] != 1) {
			t.Fatalf("event %s received %d times (%d before the kill)", id, n, sentBeforeKill[id])
		}
		if n == 2 {
			repeated++
		}
	}
	if repeated == 0 || repeated > window {
		t.Fatalf("%d events sent again after the restart, want 1 to the window (%d): the held ones had no record", repeated, window)
	}
	t.Logf("%d events, %d requests before the kill; %d sent again after the restart (window %d)",
		rooms, len(requestsBeforeKill), repeated, window)
}
