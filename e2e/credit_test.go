package e2e

import (
	"testing"
	"time"

	"rtcd/actors"
)

// The credit gate over the real server: a participant joined through the
// media node keeps running while settlement drains the balance below
// minimum_credit_to_start and below zero; new sessions are refused with 402
// until a sandbox top-up restores service.

// crSettleInterval is --settle-interval-seconds in the credit tests.
const crSettleInterval = 10 * time.Second

// crDrain moves the clock by d in jumps of one settle interval, each
// followed by a ping from every client (a jump stays under the heartbeat
// timeout), then waits until the balance reads want. After the last jump
// at least one settle interval has passed since any earlier settlement, so
// the next sweep settles every session up to the clock's reading: the
// balance then is exact, whatever the sweeps did in between.
func (e *env) crDrain(d time.Duration, want string, clients ...*mediaClient) {
	e.t.Helper()
	if d%crSettleInterval != 0 {
		e.t.Fatalf("crDrain(%v): not a multiple of the settle interval", d)
	}
	for moved := time.Duration(0); moved < d; moved += crSettleInterval {
		e.clock.Advance(crSettleInterval)
		for _, c := range clients {
			c.send(map[string]any{"type": "ping"})
		}
	}
	var got string
	deadline := time.Now().Add(10 * time.Second)
	for got = e.blBalance(); got != want; got = e.blBalance() {
		if time.Now().After(deadline) {
			e.t.Fatalf("balance %s %v after the clock moved %v; want %s", got, e.clock.Now().Sub(testEpoch), d, want)
		}
		time.Sleep(10 * time.Millisecond) // polling the asynchronous settlement, as e.eventually
	}
}

// crPingPong sends a ping with ts and waits for its pong: the socket is
// open and the node still serves the client.
func (c *mediaClient) crPingPong(ts int64) {
	c.t.Helper()
	c.send(map[string]any{"type": "ping", "ts": ts})
	for {
		_ = c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		var m map[string]any
		if err := c.conn.ReadJSON(&m); err != nil {
			c.t.Fatalf("waiting for pong %d: %v", ts, err)
		}
		switch {
		case m["type"] == "pong" && m["ts"] == float64(ts):
			return
		case m["type"] == "error":
			c.t.Fatalf("the node ended the session: %v", m)
		}
	}
}

func TestCreditExhaustionKeepsRunningSessionsAndTopupRestores(t *testing.T) {
	e := start(t, "--bootstrap-credit=2.00", "--minimum-credit-to-start=1.00", "--low-credit-threshold=1.50",
		"--participant-minute-price=0.600000", "--settle-interval-seconds=10", "--webhook-allow-private=true")
	hook := e.blWebhooks()
	p := e.do("GET", "/v1/billing/pricing", e.Boot.APIKey, nil).must(t, 200)
	if p.Str("object") != "pricing" || p.Str("currency") != "USD" || p.Str("participant_minute_price") != "0.600000" ||
		p.Str("low_credit_threshold") != "1.50" || p.Str("minimum_credit_to_start") != "1.00" ||
		p.Str("credit_state") != "normal" || p.JSON["billing_enabled"] != true {
		t.Fatalf("pricing: %s", p.Raw)
	}
	if b := e.blBalance(); b != "2.00" {
		t.Fatalf("opening balance %s", b)
	}

	room := e.createRoom(map[string]any{"name": "drain"})
	annID, annToken := e.createParticipant(room, map[string]any{"name": "ann"})
	bobID, bobToken := e.createParticipant(room, map[string]any{"name": "bob"})
	ann := e.joinMedia(annToken)
	e.eventually("ann joined, room active", func() bool {
		return e.participantStatus(room, annID) == "joined" && e.getRoomStatus(room) == "active"
	})

	// 0.600000 a minute is 0.01 a second. 60 s: 2.00 -> 1.40, below 1.50.
	e.crDrain(60*time.Second, "1.40", ann)
	if s := e.blCreditState(); s != "low" {
		t.Fatalf("credit_state %s at 1.40, want low", s)
	}
	// Low still admits new sessions.
	_, carlToken := e.createParticipant(room, map[string]any{"name": "carl"})
	e.connect(carlToken).must(t, 200)

	// 50 s more: 0.90, below minimum_credit_to_start 1.00.
	e.crDrain(50*time.Second, "0.90", ann)
	if s := e.blCreditState(); s != "exhausted" {
		t.Fatalf("credit_state %s at 0.90, want exhausted", s)
	}
	gateClosed := func(when string) {
		t.Helper()
		erRequireEnvelope(t, e.connect(bobToken), 402, "insufficient_credit")
		erRequireEnvelope(t, e.do("POST", "/v1/rooms/"+room+"/participants", e.Boot.APIKey, map[string]any{"name": "dave"}),
			402, "insufficient_credit")
		if st := e.participantStatus(room, bobID); st != "created" {
			t.Fatalf("%s: a refused connect left bob %s", when, st)
		}
		// The running session is untouched: still joined, its socket open.
		if st := e.participantStatus(room, annID); st != "joined" {
			t.Fatalf("%s: ann is %s, want joined", when, st)
		}
		ann.crPingPong(e.clock.Now().UnixMilli())
	}
	gateClosed("at 0.90")

	// Usage always settles: 100 s more takes the balance below zero.
	e.crDrain(100*time.Second, "-0.10", ann)
	if s := e.blCreditState(); s != "exhausted" {
		t.Fatalf("credit_state %s at -0.10", s)
	}
	gateClosed("at -0.10")
	e.blCheckLedgerSum()

	// A sandbox top-up restores service.
	tp := e.blCreateTopup("5.00", "").must(t, 201)
	if tp.Str("status") != "pending" || tp.Str("receipt_url") != "" {
		t.Fatalf("new top-up: %s", tp.Raw)
	}
	if status, html := e.blPage(tp.Str("authorize_url"), ""); status != 200 {
		t.Fatalf("checkout page: %d %s", status, html)
	}
	if status, html := e.blPage(tp.Str("authorize_url"), "succeeded"); status != 200 {
		t.Fatalf("pay: %d %s", status, html)
	}
	if got := e.blTopup(tp.Str("payment_id")); got.Str("status") != "succeeded" || got.Str("receipt_url") == "" {
		t.Fatalf("paid top-up: %s", got.Raw)
	}
	if b, s := e.blBalance(), e.blCreditState(); b != "4.90" || s != "normal" {
		t.Fatalf("after the top-up: balance %s, credit_state %s; want 4.90 normal", b, s)
	}
	bob := e.joinMedia(bobToken)
	e.eventually("bob joined", func() bool { return e.participantStatus(room, bobID) == "joined" })
	e.do("POST", "/v1/rooms/"+room+"/participants", e.Boot.APIKey, map[string]any{"name": "erin"}).must(t, 201)

	// 10 s of both: ann 220 s in all (2.20), bob 10 s (0.10).
	e.crDrain(10*time.Second, "4.70", ann, bob)
	ann.send(map[string]any{"type": "leave"})
	bob.send(map[string]any{"type": "leave"})
	e.eventually("both left", func() bool {
		return e.participantStatus(room, annID) == "left" && e.participantStatus(room, bobID) == "left"
	})
	if b := e.blBalance(); b != "4.70" {
		t.Fatalf("final balance %s, want 4.70", b)
	}
	entries := e.blCheckLedgerSum()
	if by := blSumByType(t, entries); by["adjustment"] != 2_000_000 || by["topup"] != 5_000_000 || by["usage"] != -2_300_000 {
		t.Fatalf("ledger by type %v; want opening 2.00, top-up 5.00, usage -2.30", by)
	}
	day := testEpoch.Format("2006-01-02")
	u := e.do("GET", "/v1/usage/summary?from="+day+"&to="+day, e.Boot.APIKey, nil).must(t, 200)
	if u.JSON["participant_seconds"] != float64(230) || u.JSON["participants"] != float64(2) || u.JSON["rooms"] != float64(1) {
		t.Fatalf("usage summary %s; want 230 participant-seconds of 2 participants", u.Raw)
	}

	// The webhook events, delivered to the project's endpoint.
	evs := hook.await(e, map[string]int{
		actors.EventCreditLow: 1, actors.EventCreditExhausted: 1, actors.EventCreditRestored: 1,
		actors.EventPaymentSucceeded: 1, actors.EventRoomStarted: 1,
		actors.EventParticipantJoined: 2, actors.EventParticipantLeft: 2, actors.EventUsageFinalized: 2,
	})
	if i, j, k := blIndexOf(evs, actors.EventCreditLow), blIndexOf(evs, actors.EventCreditExhausted), blIndexOf(evs, actors.EventCreditRestored); !(i < j && j < k) {
		t.Fatalf("credit events out of order: low %d, exhausted %d, restored %d", i, j, k)
	}
	for typ, states := range map[string][2]string{
		actors.EventCreditLow: {"normal", "low"}, actors.EventCreditExhausted: {"low", "exhausted"}, actors.EventCreditRestored: {"exhausted", "normal"},
	} {
		d := blEventsOf(evs, typ)[0].Data
		if d["previous_state"] != states[0] || d["credit_state"] != states[1] || d["account_id"] != e.Boot.AccountID {
			t.Fatalf("%s data %v", typ, d)
		}
	}
	if d := blEventsOf(evs, actors.EventCreditRestored)[0].Data; d["balance"] != "4.90" {
		t.Fatalf("credit.restored balance %v, want 4.90", d["balance"])
	}
	if d := blEventsOf(evs, actors.EventPaymentSucceeded)[0].Data; d["payment_id"] != tp.Str("payment_id") || d["amount"] != "5.00" {
		t.Fatalf("payment.succeeded data %v", d)
	}
	if d := blEventsOf(evs, actors.EventRoomStarted)[0].Data; d["room_id"] != room {
		t.Fatalf("room.started data %v", d)
	}
	want := map[string][2]any{annID: {float64(220), "2.200000"}, bobID: {float64(10), "0.100000"}}
	for _, ev := range blEventsOf(evs, actors.EventUsageFinalized) {
		w, ok := want[ev.Data["participant_id"].(string)]
		if !ok || ev.Data["participant_seconds"] != w[0] || ev.Data["amount"] != w[1] || ev.Data["room_id"] != room {
			t.Fatalf("usage.finalized %v", ev.Data)
		}
	}
	for _, ev := range blEventsOf(evs, actors.EventParticipantLeft) {
		if ev.Data["reason"] != "left" {
			t.Fatalf("participant.left %v", ev.Data)
		}
	}
}
