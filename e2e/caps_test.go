package e2e

import (
	"fmt"
	"testing"
	"time"
)

// mustQuota asserts a 409 quota_exceeded naming limitName and its limit.
func mustQuota(t *testing.T, r *resp, limitName string, limit int) {
	t.Helper()
	r.mustErr(t, 409, "quota_exceeded")
	d := r.details()
	if d["limit_name"] != limitName || d["limit"] != float64(limit) {
		t.Fatalf("details %v, want limit_name %s, limit %d", d, limitName, limit)
	}
}

// tokens creates n participants in room and returns their ids and tokens.
func (e *env) tokens(room string, n int) (ids, toks []string) {
	e.t.Helper()
	for i := 0; i < n; i++ {
		id, tok := e.createParticipant(room, map[string]any{"name": fmt.Sprintf("p%d", i)})
		ids = append(ids, id)
		toks = append(toks, tok)
	}
	return ids, toks
}

// connectAll connects every token at once and splits the answers into the
// indexes admitted and the refusals.
func (e *env) connectAll(toks []string) (admitted []int, refused []*resp) {
	e.t.Helper()
	rs := e.parallel(len(toks), func(i int) (*resp, error) { return e.connectAsync(toks[i]) })
	for i, r := range rs {
		if r.Status == 200 {
			admitted = append(admitted, i)
		} else {
			refused = append(refused, r)
		}
	}
	return admitted, refused
}

// statusCount counts the room's participants by status.
func (e *env) statusCount(room string) map[string]int {
	e.t.Helper()
	out := map[string]int{}
	for _, p := range e.do("GET", "/v1/rooms/"+room+"/participants?limit=100", e.Boot.APIKey, nil).must(e.t, 200).Data() {
		out[p["status"].(string)]++
	}
	return out
}

func TestCapMaxParticipantsConcurrent(t *testing.T) {
	e := start(t)
	room := e.createRoom(map[string]any{"max_participants": 10})
	ids, toks := e.tokens(room, 100)
	admitted, refused := e.connectAll(toks)
	if len(admitted) != 10 {
		t.Fatalf("%d admitted, want exactly 10", len(admitted))
	}
	for _, r := range refused {
		mustQuota(t, r, "max_participants", 10)
	}
	if c := e.statusCount(room); c["connected"] != 10 || c["created"] != 90 {
		t.Fatalf("participant statuses %v, want 10 connected, 90 created", c)
	}
	// Those admitted reconnect (all at once) without taking more slots.
	again := make([]string, 0, 30)
	for _, i := range admitted {
		again = append(again, toks[i], toks[i], toks[i])
	}
	if a, _ := e.connectAll(again); len(a) != len(again) {
		t.Fatalf("%d of %d reconnects admitted", len(a), len(again))
	}
	// Still full for everyone else.
	for i := range toks {
		if !contains(admitted, i) {
			mustQuota(t, e.connect(toks[i]), "max_participants", 10)
			break
		}
	}
	// Removing one frees exactly one slot.
	gone := admitted[0]
	e.do("DELETE", "/v1/rooms/"+room+"/participants/"+ids[gone], e.Boot.APIKey, nil).must(t, 200)
	var waiting []string
	for i := range toks {
		if !contains(admitted, i) {
			waiting = append(waiting, toks[i])
		}
	}
	if a, _ := e.connectAll(waiting); len(a) != 1 {
		t.Fatalf("%d admitted after one removal, want 1", len(a))
	}
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func TestCapReconnectKeepsOneSlot(t *testing.T) {
	e := start(t)
	room := e.createRoom(map[string]any{"max_participants": 2})
	_, toks := e.tokens(room, 3)
	// One participant connecting many times at once holds one slot.
	burst := make([]string, 20)
	for i := range burst {
		burst[i] = toks[0]
	}
	if a, _ := e.connectAll(burst); len(a) != 20 {
		t.Fatalf("%d of 20 connects of one participant admitted", len(a))
	}
	e.connect(toks[0]).must(t, 200)
	e.connect(toks[1]).must(t, 200)
	mustQuota(t, e.connect(toks[2]), "max_participants", 2)
	e.connect(toks[1]).must(t, 200)
	e.connect(toks[0]).must(t, 200)
	if c := e.statusCount(room); c["connected"] != 2 || c["created"] != 1 {
		t.Fatalf("participant statuses %v", c)
	}
}

func TestCapMaxActiveParticipantsAcrossRooms(t *testing.T) {
	e := start(t, "--default-max-active-participants=5")
	var rooms []string
	var toks []string
	owner := map[int]string{}
	ids := map[int]string{}
	for r := 0; r < 4; r++ {
		room := e.createRoom(nil)
		rooms = append(rooms, room)
		pids, ts := e.tokens(room, 5)
		for i := range ts {
			owner[len(toks)] = room
			ids[len(toks)] = pids[i]
			toks = append(toks, ts[i])
		}
	}
	admitted, refused := e.connectAll(toks)
	if len(admitted) != 5 {
		t.Fatalf("%d admitted across rooms, want exactly 5", len(admitted))
	}
	for _, r := range refused {
		mustQuota(t, r, "max_active_participants", 5)
	}
	total := 0
	for _, room := range rooms {
		total += e.statusCount(room)["connected"]
	}
	if total != 5 {
		t.Fatalf("%d connected across rooms, want 5", total)
	}
	// A reconnect of an admitted participant is no new slot.
	e.connect(toks[admitted[0]]).must(t, 200)

	var waiting []int
	for i := range toks {
		if !contains(admitted, i) {
			waiting = append(waiting, i)
		}
	}
	// Removing one participant frees one project slot.
	gone := admitted[0]
	e.do("DELETE", "/v1/rooms/"+owner[gone]+"/participants/"+ids[gone], e.Boot.APIKey, nil).must(t, 200)
	e.connect(toks[gone]).mustErr(t, 404, "participant_not_found")
	w := make([]string, len(waiting))
	for j, i := range waiting {
		w[j] = toks[i]
	}
	a, _ := e.connectAll(w)
	if len(a) != 1 {
		t.Fatalf("%d admitted after one removal, want 1", len(a))
	}
	newcomer := waiting[a[0]]
	mustQuota(t, e.connect(w[(a[0]+1)%len(w)]), "max_active_participants", 5)

	// Ending a room frees the slots its participants held once it has ended.
	room := owner[newcomer]
	held := e.statusCount(room)["connected"]
	e.do("DELETE", "/v1/rooms/"+room, e.Boot.APIKey, nil).must(t, 200)
	e.waitRoomEnded(room)
	var rest []string
	for _, i := range waiting {
		if owner[i] != room && i != newcomer {
			rest = append(rest, toks[i])
		}
	}
	if a, _ := e.connectAll(rest); len(a) != held {
		t.Fatalf("%d admitted after ending a room that held %d slots", len(a), held)
	}
}

func TestCapMaxActiveRooms(t *testing.T) {
	e := start(t, "--default-max-active-rooms=3")
	k := e.Boot.APIKey
	a := e.createRoom(nil)
	e.createRoom(nil)
	e.createRoom(nil)
	mustQuota(t, e.do("POST", "/v1/rooms", k, map[string]any{}), "max_active_rooms", 3)
	if n := len(e.listRooms()); n != 3 {
		t.Fatalf("%d rooms, want 3", n)
	}
	e.do("DELETE", "/v1/rooms/"+a, k, nil).must(t, 200)
	e.waitRoomEnded(a)
	// Once the room shows ended, its slot is free.
	e.createRoom(nil)
	mustQuota(t, e.do("POST", "/v1/rooms", k, map[string]any{}), "max_active_rooms", 3)
}

func TestCapMaxActiveRoomsConcurrent(t *testing.T) {
	e := start(t, "--default-max-active-rooms=3")
	rs := e.parallel(30, func(int) (*resp, error) {
		return e.send("POST", "/v1/rooms", e.Boot.APIKey, map[string]any{})
	})
	ok := 0
	for _, r := range rs {
		if r.Status == 201 {
			ok++
			continue
		}
		mustQuota(t, r, "max_active_rooms", 3)
	}
	if ok != 3 || len(e.listRooms()) != 3 {
		t.Fatalf("%d created, %d listed; want 3", ok, len(e.listRooms()))
	}
}

func TestCapRoomMaxParticipantsBounds(t *testing.T) {
	e := start(t, "--default-max-participants-per-room=10")
	k := e.Boot.APIKey
	r := e.do("POST", "/v1/rooms", k, map[string]any{"max_participants": 11}).mustErr(t, 400, "invalid_request")
	if r.details()["field"] != "max_participants" {
		t.Fatalf("details: %s", r.Raw)
	}
	for _, v := range []any{0, -1, "5", 2.5} {
		e.do("POST", "/v1/rooms", k, map[string]any{"max_participants": v}).mustErr(t, 400, "invalid_request")
	}
	if n := len(e.listRooms()); n != 0 {
		t.Fatalf("refused creates made %d rooms", n)
	}
	if got := e.do("POST", "/v1/rooms", k, map[string]any{"max_participants": 10}).must(t, 201).JSON["max_participants"]; got != float64(10) {
		t.Fatalf("max_participants %v", got)
	}
	if got := e.do("POST", "/v1/rooms", k, map[string]any{}).must(t, 201).JSON["max_participants"]; got != float64(10) {
		t.Fatalf("default max_participants %v, want the project's 10", got)
	}
	if got := e.do("POST", "/v1/rooms", k, map[string]any{"max_participants": 1}).must(t, 201).JSON["max_participants"]; got != float64(1) {
		t.Fatalf("max_participants %v", got)
	}
}

func TestCapRemoveParticipantFreesSlot(t *testing.T) {
	e := start(t)
	room := e.createRoom(map[string]any{"max_participants": 1})
	ids, toks := e.tokens(room, 3)
	e.connect(toks[0]).must(t, 200)
	mustQuota(t, e.connect(toks[1]), "max_participants", 1)
	// Removing a participant that never connected frees nothing.
	e.do("DELETE", "/v1/rooms/"+room+"/participants/"+ids[2], e.Boot.APIKey, nil).must(t, 200)
	mustQuota(t, e.connect(toks[1]), "max_participants", 1)
	e.do("DELETE", "/v1/rooms/"+room+"/participants/"+ids[0], e.Boot.APIKey, nil).must(t, 200)
	// A second DELETE does not free a second slot.
	e.do("DELETE", "/v1/rooms/"+room+"/participants/"+ids[0], e.Boot.APIKey, nil).must(t, 200)
	e.connect(toks[1]).must(t, 200)
	e.connect(toks[0]).mustErr(t, 404, "participant_not_found")
	e.connect(toks[2]).mustErr(t, 404, "participant_not_found")
	_, more := e.tokens(room, 1)
	mustQuota(t, e.connect(more[0]), "max_participants", 1)
}

// The moment a room reads as ended its max_active_rooms slot is free: a
// create right after never gets quota_exceeded. (Polls without pausing, so
// the create lands as close to the end as a client can get.)
func TestCapEndedRoomFreesSlotAtOnce(t *testing.T) {
	e := start(t, "--default-max-active-rooms=1")
	room := e.createRoom(nil)
	for i := 0; i < 100; i++ {
		e.do("DELETE", "/v1/rooms/"+room, e.Boot.APIKey, nil).must(t, 200)
		deadline := time.Now().Add(10 * time.Second)
		for e.getRoom(room).Str("status") != "ended" {
			if time.Now().After(deadline) {
				t.Fatalf("room %s never ended", room)
			}
		}
		r := e.do("POST", "/v1/rooms", e.Boot.APIKey, map[string]any{})
		if r.Status != 201 {
			t.Fatalf("iteration %d: create right after the end: %d %s", i, r.Status, r.Raw)
		}
		room = r.Str("id")
	}
}
