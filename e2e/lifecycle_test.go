package e2e

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// --- helpers shared by the core-service tests ------------------------------

// parallel runs n requests at once (released together by a barrier) and
// returns their responses in index order. A transport error fails the test.
func (e *env) parallel(n int, req func(i int) (*resp, error)) []*resp {
	e.t.Helper()
	out := make([]*resp, n)
	errs := make([]error, n)
	var ready, done sync.WaitGroup
	gate := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := 0; i < n; i++ {
		go func(i int) {
			defer done.Done()
			ready.Done()
			<-gate
			out[i], errs[i] = req(i)
		}(i)
	}
	ready.Wait()
	close(gate)
	done.Wait()
	// A burst makes the client dial spare connections it may never use;
	// close them so they do not hold up the server's shutdown.
	e.client.CloseIdleConnections()
	for i, err := range errs {
		if err != nil {
			e.t.Fatalf("request %d: %v", i, err)
		}
	}
	return out
}

// connectAsync is connect for use with parallel.
func (e *env) connectAsync(token string) (*resp, error) {
	return e.send("POST", "/v1/connect", "", map[string]any{"token": token, "sdk": map[string]string{"name": "e2e", "version": "0", "platform": "go"}})
}

// details returns the error envelope's details object.
func (r *resp) details() map[string]any {
	if e, ok := r.JSON["error"].(map[string]any); ok {
		d, _ := e["details"].(map[string]any)
		return d
	}
	return nil
}

// mustErr asserts an error response with status and code.
func (r *resp) mustErr(t *testing.T, status int, code string) *resp {
	t.Helper()
	if r.Status != status || r.ErrCode() != code {
		t.Fatalf("got %d %q, want %d %s: %s", r.Status, r.ErrCode(), status, code, r.Raw)
	}
	if !strings.HasPrefix(r.JSON["error"].(map[string]any)["request_id"].(string), "req_") {
		t.Fatalf("error without a req_ request_id: %s", r.Raw)
	}
	return r
}

// getRoom reads a room.
func (e *env) getRoom(id string) *resp {
	e.t.Helper()
	return e.do("GET", "/v1/rooms/"+id, e.Boot.APIKey, nil).must(e.t, 200)
}

// getParticipant reads a participant.
func (e *env) getParticipant(roomID, id string) *resp {
	e.t.Helper()
	return e.do("GET", "/v1/rooms/"+roomID+"/participants/"+id, e.Boot.APIKey, nil).must(e.t, 200)
}

// listRooms returns every room of the project (at most 100).
func (e *env) listRooms() []map[string]any {
	e.t.Helper()
	return e.do("GET", "/v1/rooms?limit=100", e.Boot.APIKey, nil).must(e.t, 200).Data()
}

// waitRoomEnded waits until the room's record says ended and returns it.
func (e *env) waitRoomEnded(id string) *resp {
	e.t.Helper()
	var r *resp
	e.eventually("room "+id+" ended", func() bool {
		r = e.getRoom(id)
		return r.Str("status") == "ended"
	})
	return r
}

// ts parses a timestamp field.
func ts(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("timestamp %q: %v", s, err)
	}
	return v
}

// fakeID is a well-formed id that names nothing.
func fakeID(prefix string) string { return prefix + strings.Repeat("a", 24) }

// --- room lifecycle ----------------------------------------------------------

func TestRoomLifecycleDelete(t *testing.T) {
	e := start(t)
	r := e.do("POST", "/v1/rooms", e.Boot.APIKey, map[string]any{"name": "standup"}).must(t, 201)
	room := r.Str("id")
	if !strings.HasPrefix(room, "room_") || r.Str("status") != "waiting" || r.Str("name") != "standup" {
		t.Fatalf("created room: %s", r.Raw)
	}
	if r.JSON["ended_at"] != nil || r.JSON["end_reason"] != nil {
		t.Fatalf("fresh room has an end: %s", r.Raw)
	}
	if got := e.getRoom(room); got.Str("status") != "waiting" {
		t.Fatalf("GET after create: %s", got.Raw)
	}
	pCreated, _ := e.createParticipant(room, nil)
	pConnected, tok := e.createParticipant(room, nil)
	_, spare := e.createParticipant(room, nil)
	e.connect(tok).must(t, 200)

	d := e.do("DELETE", "/v1/rooms/"+room, e.Boot.APIKey, nil).must(t, 200)
	if s := d.Str("status"); s != "ending" && s != "ended" {
		t.Fatalf("DELETE answered status %q: %s", s, d.Raw)
	}
	if d.Str("id") != room {
		t.Fatalf("DELETE answered another room: %s", d.Raw)
	}
	again := e.do("DELETE", "/v1/rooms/"+room, e.Boot.APIKey, nil).must(t, 200)
	if s := again.Str("status"); s != "ending" && s != "ended" {
		t.Fatalf("second DELETE answered status %q: %s", s, again.Raw)
	}

	ended := e.waitRoomEnded(room)
	if ended.Str("end_reason") != "deleted" {
		t.Fatalf("end_reason: %s", ended.Raw)
	}
	if at := ended.Str("ended_at"); at == "" || !ts(t, at).Equal(testEpoch) {
		t.Fatalf("ended_at %q, want the clock's time %s: %s", at, testEpoch, ended.Raw)
	}
	for _, id := range []string{pCreated, pConnected} {
		p := e.getParticipant(room, id)
		if p.Str("status") != "ended" || p.Str("ended_at") == "" {
			t.Fatalf("participant %s of an ended room: %s", id, p.Raw)
		}
	}
	for _, p := range e.do("GET", "/v1/rooms/"+room+"/participants", e.Boot.APIKey, nil).must(t, 200).Data() {
		if p["status"] != "ended" {
			t.Fatalf("listed participant of an ended room: %v", p)
		}
	}

	e.do("POST", "/v1/rooms/"+room+"/participants", e.Boot.APIKey, map[string]any{}).mustErr(t, 410, "room_ended")
	e.connect(spare).mustErr(t, 410, "room_ended")
	e.connect(tok).mustErr(t, 410, "room_ended")
	e.do("DELETE", "/v1/rooms/"+room, e.Boot.APIKey, nil).must(t, 200)
	if s := e.do("DELETE", "/v1/rooms/"+room, e.Boot.APIKey, nil).must(t, 200).Str("status"); s != "ended" {
		t.Fatalf("DELETE of an ended room answered %q", s)
	}

	// Long after the end (the room's actor may have been passivated) the
	// answers stay the same.
	e.clock.Advance(5 * time.Minute)
	e.do("POST", "/v1/rooms/"+room+"/participants", e.Boot.APIKey, map[string]any{}).mustErr(t, 410, "room_ended")
	e.connect(spare).mustErr(t, 410, "room_ended")
	if s := e.do("DELETE", "/v1/rooms/"+room, e.Boot.APIKey, nil).must(t, 200).Str("status"); s != "ended" {
		t.Fatalf("DELETE of an ended room answered %q", s)
	}
	if s := e.getRoom(room).Str("end_reason"); s != "deleted" {
		t.Fatalf("end_reason changed to %q", s)
	}
}

func TestRoomExpiry(t *testing.T) {
	e := start(t)
	room := e.createRoom(map[string]any{"expires_in": 60})
	r := e.getRoom(room)
	if !ts(t, r.Str("expires_at")).Equal(testEpoch.Add(60 * time.Second)) {
		t.Fatalf("expires_at: %s", r.Raw)
	}
	pid, tok := e.createParticipant(room, nil)

	e.clock.Advance(61 * time.Second)
	e.do("POST", "/v1/rooms/"+room+"/participants", e.Boot.APIKey, map[string]any{}).mustErr(t, 410, "room_expired")
	// The token (default 3600 s) is still valid, so the room's status is
	// what refuses the connect.
	e.connect(tok).mustErr(t, 410, "room_expired")

	ended := e.waitRoomEnded(room)
	if ended.Str("end_reason") != "expired" || ended.Str("ended_at") == "" {
		t.Fatalf("expired room: %s", ended.Raw)
	}
	if p := e.getParticipant(room, pid); p.Str("status") != "ended" {
		t.Fatalf("participant of an expired room: %s", p.Raw)
	}
	e.do("POST", "/v1/rooms/"+room+"/participants", e.Boot.APIKey, map[string]any{}).mustErr(t, 410, "room_expired")
	// Deleting an expired room is idempotent and keeps its end reason.
	if d := e.do("DELETE", "/v1/rooms/"+room, e.Boot.APIKey, nil).must(t, 200); d.Str("end_reason") != "expired" {
		t.Fatalf("DELETE of an expired room: %s", d.Raw)
	}
}

// A room expires in the sweep even when nobody asks it anything.
func TestRoomExpirySweep(t *testing.T) {
	e := start(t)
	room := e.createRoom(map[string]any{"expires_in": 60})
	keep := e.createRoom(map[string]any{"expires_in": 120})
	e.clock.Advance(60 * time.Second) // at expires_at exactly
	ended := e.waitRoomEnded(room)
	if ended.Str("end_reason") != "expired" {
		t.Fatalf("expired room: %s", ended.Raw)
	}
	if !ts(t, ended.Str("ended_at")).Equal(testEpoch.Add(60 * time.Second)) {
		t.Fatalf("ended_at: %s", ended.Raw)
	}
	if s := e.getRoom(keep).Str("status"); s != "waiting" {
		t.Fatalf("room expiring later has status %q", s)
	}
}

func TestRoomExpiresInBoundsAndDefaults(t *testing.T) {
	e := start(t)
	for _, v := range []any{59, 604801, 0, -1, "60", 60.5} {
		e.do("POST", "/v1/rooms", e.Boot.APIKey, map[string]any{"expires_in": v}).mustErr(t, 400, "invalid_request")
	}
	for _, v := range []int{60, 604800} {
		r := e.do("POST", "/v1/rooms", e.Boot.APIKey, map[string]any{"expires_in": v}).must(t, 201)
		if !ts(t, r.Str("expires_at")).Equal(testEpoch.Add(time.Duration(v) * time.Second)) {
			t.Fatalf("expires_in %d: %s", v, r.Raw)
		}
	}
	r := e.do("POST", "/v1/rooms", e.Boot.APIKey, map[string]any{}).must(t, 201)
	if !ts(t, r.Str("created_at")).Equal(testEpoch) || !ts(t, r.Str("expires_at")).Equal(testEpoch.Add(86400*time.Second)) {
		t.Fatalf("default room expiry is not 86400s: %s", r.Raw)
	}
	room := r.Str("id")

	for _, v := range []any{59, 86401, 0, "60"} {
		e.do("POST", "/v1/rooms/"+room+"/participants", e.Boot.APIKey, map[string]any{"expires_in": v}).mustErr(t, 400, "invalid_request")
	}
	p := e.do("POST", "/v1/rooms/"+room+"/participants", e.Boot.APIKey, map[string]any{}).must(t, 201)
	if !ts(t, p.Str("expires_at")).Equal(testEpoch.Add(3600 * time.Second)) {
		t.Fatalf("default participant expiry is not 3600s: %s", p.Raw)
	}
	p = e.do("POST", "/v1/rooms/"+room+"/participants", e.Boot.APIKey, map[string]any{"expires_in": 60}).must(t, 201)
	if !ts(t, p.Str("expires_at")).Equal(testEpoch.Add(60 * time.Second)) {
		t.Fatalf("participant expires_in 60: %s", p.Raw)
	}
}

// A participant's expires_at is its own (not capped at the room's), so a
// connect with a valid token to a room past expires_at says room_expired,
// and one after both expired says participant_token_expired (token checks
// come first in the spec's connect order).
func TestParticipantExpiryIndependentOfRoom(t *testing.T) {
	e := start(t)
	room := e.createRoom(map[string]any{"expires_in": 120})
	r := e.do("POST", "/v1/rooms/"+room+"/participants", e.Boot.APIKey, map[string]any{"expires_in": 600}).must(t, 201)
	if !ts(t, r.Str("expires_at")).Equal(testEpoch.Add(600 * time.Second)) {
		t.Fatalf("participant expires_at: %s", r.Raw)
	}
	tok := r.Str("token")
	e.clock.Advance(121 * time.Second)
	e.connect(tok).mustErr(t, 410, "room_expired")
	e.waitRoomEnded(room)
	e.connect(tok).mustErr(t, 410, "room_expired") // also once the room has ended
	e.clock.Advance(600 * time.Second)
	e.connect(tok).mustErr(t, 401, "participant_token_expired")
}

func TestMetadataValidation(t *testing.T) {
	e := start(t)
	pad := func(total int) string { // a JSON object of exactly total bytes
		return `{"k":"` + strings.Repeat("x", total-8) + `"}`
	}
	if len(pad(4096)) != 4096 {
		t.Fatal("pad is wrong")
	}
	bad := []string{`[1,2]`, `"text"`, `42`, `true`, pad(4097)}
	for _, m := range bad {
		e.do("POST", "/v1/rooms", e.Boot.APIKey, `{"metadata":`+m+`}`).mustErr(t, 400, "invalid_request")
	}
	r := e.do("POST", "/v1/rooms", e.Boot.APIKey, `{"metadata":`+pad(4096)+`}`).must(t, 201)
	if md, _ := r.JSON["metadata"].(map[string]any); len(md["k"].(string)) != 4088 {
		t.Fatalf("metadata not kept: %.200s", r.Raw)
	}
	room := e.do("POST", "/v1/rooms", e.Boot.APIKey, `{"metadata":{"team":"a","n":1}}`).must(t, 201)
	if md, _ := room.JSON["metadata"].(map[string]any); md["team"] != "a" || md["n"] != float64(1) {
		t.Fatalf("room metadata: %s", room.Raw)
	}
	if md, _ := e.getRoom(room.Str("id")).JSON["metadata"].(map[string]any); md["team"] != "a" {
		t.Fatalf("stored room metadata lost")
	}
	if md, ok := e.do("POST", "/v1/rooms", e.Boot.APIKey, `{}`).must(t, 201).JSON["metadata"].(map[string]any); !ok || len(md) != 0 {
		t.Fatal("absent metadata is not an empty object")
	}

	path := "/v1/rooms/" + room.Str("id") + "/participants"
	for _, m := range bad {
		e.do("POST", path, e.Boot.APIKey, `{"metadata":`+m+`}`).mustErr(t, 400, "invalid_request")
	}
	p := e.do("POST", path, e.Boot.APIKey, `{"metadata":`+pad(4096)+`}`).must(t, 201)
	if md, _ := p.JSON["metadata"].(map[string]any); len(md["k"].(string)) != 4088 {
		t.Fatalf("participant metadata not kept: %.200s", p.Raw)
	}
}

func TestParticipantRoleValidation(t *testing.T) {
	e := start(t)
	room := e.createRoom(nil)
	path := "/v1/rooms/" + room + "/participants"
	for _, role := range []any{"admin", "", "Publisher", 1} {
		e.do("POST", path, e.Boot.APIKey, map[string]any{"role": role}).mustErr(t, 400, "invalid_request")
	}
	for _, role := range []string{"publisher", "subscriber"} {
		r := e.do("POST", path, e.Boot.APIKey, map[string]any{"role": role}).must(t, 201)
		if g := e.getParticipant(room, r.Str("id")); g.Str("role") != role {
			t.Fatalf("role %s: %s", role, g.Raw)
		}
	}
	if r := e.do("POST", path, e.Boot.APIKey, map[string]any{}).must(t, 201); e.getParticipant(room, r.Str("id")).Str("role") != "publisher" {
		t.Fatal("default role is not publisher")
	}
}

func TestUnknownRoomAndParticipant(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	for _, id := range []string{fakeID("room_"), "room_nope", "garbage", fakeID("part_")} {
		e.do("GET", "/v1/rooms/"+id, k, nil).mustErr(t, 404, "room_not_found")
		e.do("DELETE", "/v1/rooms/"+id, k, nil).mustErr(t, 404, "room_not_found")
		e.do("POST", "/v1/rooms/"+id+"/participants", k, map[string]any{}).mustErr(t, 404, "room_not_found")
		e.do("GET", "/v1/rooms/"+id+"/participants", k, nil).mustErr(t, 404, "room_not_found")
		e.do("GET", "/v1/rooms/"+id+"/participants/"+fakeID("part_"), k, nil).mustErr(t, 404, "room_not_found")
	}
	room := e.createRoom(nil)
	for _, id := range []string{fakeID("part_"), "part_x", fakeID("room_")} {
		e.do("GET", "/v1/rooms/"+room+"/participants/"+id, k, nil).mustErr(t, 404, "participant_not_found")
		e.do("DELETE", "/v1/rooms/"+room+"/participants/"+id, k, nil).mustErr(t, 404, "participant_not_found")
	}
	// A participant addressed through another room of the project is unknown there.
	other := e.createRoom(nil)
	pid, _ := e.createParticipant(room, nil)
	e.do("GET", "/v1/rooms/"+other+"/participants/"+pid, k, nil).mustErr(t, 404, "participant_not_found")
	e.do("DELETE", "/v1/rooms/"+other+"/participants/"+pid, k, nil).mustErr(t, 404, "participant_not_found")
	if s := e.getParticipant(room, pid).Str("status"); s != "created" {
		t.Fatalf("participant touched through another room: %s", s)
	}
}

// Participant status over its life, in GET and in the list.
func TestParticipantStatuses(t *testing.T) {
	e := start(t)
	room := e.createRoom(nil)
	c := e.do("POST", "/v1/rooms/"+room+"/participants", e.Boot.APIKey,
		map[string]any{"name": "ann", "external_id": "u-1", "role": "subscriber"}).must(t, 201)
	pid, tok := c.Str("id"), c.Str("token")
	if !strings.HasPrefix(pid, "part_") || c.Str("room_id") != room || !strings.HasPrefix(tok, "rtc_pt_") || c.Str("expires_at") == "" {
		t.Fatalf("create response: %s", c.Raw)
	}
	listed := func() map[string]any {
		t.Helper()
		for _, p := range e.do("GET", "/v1/rooms/"+room+"/participants", e.Boot.APIKey, nil).must(t, 200).Data() {
			if p["id"] == pid {
				if _, leaked := p["token"]; leaked {
					t.Fatalf("list shows the token: %v", p)
				}
				return p
			}
		}
		t.Fatalf("participant %s not listed", pid)
		return nil
	}

	g := e.getParticipant(room, pid)
	if g.Str("status") != "created" || g.JSON["connected_at"] != nil || g.Str("name") != "ann" || g.Str("external_id") != "u-1" {
		t.Fatalf("new participant: %s", g.Raw)
	}
	if _, leaked := g.JSON["token"]; leaked || bytes.Contains(g.Raw, []byte(tok)) {
		t.Fatalf("GET shows the token: %s", g.Raw)
	}
	if l := listed(); l["status"] != "created" {
		t.Fatalf("listed new participant: %v", l)
	}

	e.clock.Advance(5 * time.Second)
	e.connect(tok).must(t, 200)
	g = e.getParticipant(room, pid)
	if g.Str("status") != "connected" || !ts(t, g.Str("connected_at")).Equal(testEpoch.Add(5*time.Second)) {
		t.Fatalf("connected participant: %s", g.Raw)
	}
	if l := listed(); l["status"] != "connected" || l["connected_at"] == nil {
		t.Fatalf("listed connected participant: %v", l)
	}

	// A reconnect keeps the first connected_at.
	e.clock.Advance(5 * time.Second)
	e.connect(tok).must(t, 200)
	if g = e.getParticipant(room, pid); !ts(t, g.Str("connected_at")).Equal(testEpoch.Add(5 * time.Second)) {
		t.Fatalf("reconnect moved connected_at: %s", g.Raw)
	}

	e.clock.Advance(5 * time.Second)
	d := e.do("DELETE", "/v1/rooms/"+room+"/participants/"+pid, e.Boot.APIKey, nil).must(t, 200)
	if d.Str("status") != "removed" {
		t.Fatalf("DELETE participant: %s", d.Raw)
	}
	g = e.getParticipant(room, pid)
	if g.Str("status") != "removed" || !ts(t, g.Str("ended_at")).Equal(testEpoch.Add(15*time.Second)) || g.Str("connected_at") == "" {
		t.Fatalf("removed participant: %s", g.Raw)
	}
	if l := listed(); l["status"] != "removed" {
		t.Fatalf("listed removed participant: %v", l)
	}
	// DELETE is idempotent.
	if d := e.do("DELETE", "/v1/rooms/"+room+"/participants/"+pid, e.Boot.APIKey, nil).must(t, 200); d.Str("status") != "removed" {
		t.Fatalf("second DELETE: %s", d.Raw)
	}
	// Removing a participant that never connected.
	p2, _ := e.createParticipant(room, nil)
	e.do("DELETE", "/v1/rooms/"+room+"/participants/"+p2, e.Boot.APIKey, nil).must(t, 200)
	if g := e.getParticipant(room, p2); g.Str("status") != "removed" || g.JSON["connected_at"] != nil {
		t.Fatalf("removed unconnected participant: %s", g.Raw)
	}
	if s := e.getRoom(room).Str("status"); s == "ending" || s == "ended" {
		t.Fatalf("removing participants ended the room: %s", s)
	}
}

// A room is usable the moment its creation is answered: the first request
// for it never finds it missing (service_unavailable).
func TestRoomUsableRightAfterCreate(t *testing.T) {
	e := start(t)
	rs := e.parallel(32, func(int) (*resp, error) {
		var last *resp
		for i := 0; i < 10; i++ {
			r, err := e.send("POST", "/v1/rooms", e.Boot.APIKey, map[string]any{})
			if err != nil || r.Status != 201 {
				return r, err
			}
			if last, err = e.send("POST", "/v1/rooms/"+r.Str("id")+"/participants", e.Boot.APIKey, map[string]any{}); err != nil || last.Status != 201 {
				return last, err
			}
		}
		return last, nil
	})
	for _, r := range rs {
		r.must(t, 201)
	}
}
