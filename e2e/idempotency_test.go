package e2e

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// idem is the Idempotency-Key header for key.
func idem(key string) string { return "Idempotency-Key: " + key }

// mustReplay asserts r is a replay of orig: same status, byte-identical
// body, and Idempotent-Replayed: true.
func mustReplay(t *testing.T, orig, r *resp) {
	t.Helper()
	if r.Status != orig.Status || !bytes.Equal(r.Raw, orig.Raw) {
		t.Fatalf("replay differs:\n got %d %s\nwant %d %s", r.Status, r.Raw, orig.Status, orig.Raw)
	}
	if got := r.Header.Get("Idempotent-Replayed"); got != "true" {
		t.Fatalf("replay has Idempotent-Replayed %q", got)
	}
}

// mustFresh asserts r is an original answer, not a replay.
func mustFresh(t *testing.T, r *resp, status int) *resp {
	t.Helper()
	r.must(t, status)
	if got := r.Header.Get("Idempotent-Replayed"); got != "" {
		t.Fatalf("original answer has Idempotent-Replayed %q: %s", got, r.Raw)
	}
	return r
}

func mustConflict(t *testing.T, r *resp) {
	t.Helper()
	r.mustErr(t, 409, "conflict")
	if r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatal("conflict marked as a replay")
	}
}

func (e *env) countParticipants(room string) int {
	e.t.Helper()
	return len(e.do("GET", "/v1/rooms/"+room+"/participants?limit=100", e.Boot.APIKey, nil).must(e.t, 200).Data())
}

func (e *env) countKeys() int {
	e.t.Helper()
	return len(e.do("GET", "/v1/api-keys?limit=100", e.Boot.APIKey, nil).must(e.t, 200).Data())
}

func TestIdempotencyRoomReplayAndConflict(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	body := `{"name":"standup","expires_in":3600,"metadata":{"a":1}}`
	orig := mustFresh(t, e.do("POST", "/v1/rooms", k, body, idem("room-1")), 201)
	for i := 0; i < 3; i++ {
		mustReplay(t, orig, e.do("POST", "/v1/rooms", k, body, idem("room-1")))
	}
	// The replay is the stored response, not a re-render: it keeps the
	// status the room had at creation even after the room changed.
	e.do("DELETE", "/v1/rooms/"+orig.Str("id"), k, nil).must(t, 200)
	e.waitRoomEnded(orig.Str("id"))
	mustReplay(t, orig, e.do("POST", "/v1/rooms", k, body, idem("room-1")))

	// Same key, another body (even whitespace), another path, another method.
	mustConflict(t, e.do("POST", "/v1/rooms", k, `{"name":"standup2","expires_in":3600,"metadata":{"a":1}}`, idem("room-1")))
	mustConflict(t, e.do("POST", "/v1/rooms", k, `{"name":"standup", "expires_in":3600,"metadata":{"a":1}}`, idem("room-1")))
	mustConflict(t, e.do("POST", "/v1/rooms", k, nil, idem("room-1")))
	other := e.createRoom(nil)
	mustConflict(t, e.do("POST", "/v1/rooms/"+other+"/participants", k, body, idem("room-1")))
	mustConflict(t, e.do("POST", "/v1/api-keys", k, map[string]any{"name": "x", "scopes": []string{"rooms:read"}}, idem("room-1")))
	if n := e.countKeys(); n != 1 {
		t.Fatalf("a conflicting request created a key (%d keys)", n)
	}
	if n := e.countParticipants(other); n != 0 {
		t.Fatalf("a conflicting request created %d participants", n)
	}
	// The conflicts did not overwrite the stored response.
	mustReplay(t, orig, e.do("POST", "/v1/rooms", k, body, idem("room-1")))

	if n := len(e.listRooms()); n != 2 {
		t.Fatalf("%d rooms, want 2", n)
	}
	// Without the header every request creates.
	a := e.do("POST", "/v1/rooms", k, body).must(t, 201)
	b := e.do("POST", "/v1/rooms", k, body).must(t, 201)
	if a.Str("id") == b.Str("id") || a.Header.Get("Idempotent-Replayed") != "" {
		t.Fatal("requests without Idempotency-Key were deduplicated")
	}
}

func TestIdempotencyParticipantReplayAndConflict(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	room := e.createRoom(nil)
	other := e.createRoom(nil)
	path := "/v1/rooms/" + room + "/participants"
	body := map[string]any{"name": "ann", "role": "subscriber"}
	orig := mustFresh(t, e.do("POST", path, k, body, idem("p-1")), 201)
	if !strings.HasPrefix(orig.Str("token"), "rtc_pt_") {
		t.Fatalf("create response: %s", orig.Raw)
	}
	rep := e.do("POST", path, k, body, idem("p-1"))
	mustReplay(t, orig, rep)
	// The replayed token is the same working token.
	e.connect(rep.Str("token")).must(t, 200)
	mustReplay(t, orig, e.do("POST", path, k, body, idem("p-1")))

	mustConflict(t, e.do("POST", path, k, map[string]any{"name": "bob", "role": "subscriber"}, idem("p-1")))
	mustConflict(t, e.do("POST", "/v1/rooms/"+other+"/participants", k, body, idem("p-1")))
	mustConflict(t, e.do("POST", "/v1/rooms", k, map[string]any{"name": "ann"}, idem("p-1")))
	if n := e.countParticipants(room); n != 1 {
		t.Fatalf("%d participants, want 1", n)
	}
	if n := e.countParticipants(other); n != 0 {
		t.Fatalf("%d participants in the other room, want 0", n)
	}
}

func TestIdempotencyAPIKeyReplayAndConflict(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	body := map[string]any{"name": "ci", "scopes": []string{"rooms:read", "rooms:write"}}
	orig := mustFresh(t, e.do("POST", "/v1/api-keys", k, body, idem("key-1")), 201)
	secret := orig.Str("secret")
	if !strings.HasPrefix(secret, "sk_live_") {
		t.Fatalf("create response: %s", orig.Raw)
	}
	mustReplay(t, orig, e.do("POST", "/v1/api-keys", k, body, idem("key-1")))
	mustConflict(t, e.do("POST", "/v1/api-keys", k, map[string]any{"name": "ci", "scopes": []string{"rooms:read"}}, idem("key-1")))
	if n := e.countKeys(); n != 2 {
		t.Fatalf("%d keys, want 2 (bootstrap + one)", n)
	}
	// The replayed secret is the one key that exists, and it works.
	e.do("GET", "/v1/rooms", secret, nil).must(t, 200)
}

// A key is scoped to the caller: the same value sent by another API key of
// the project is a different key.
func TestIdempotencyScopedToCaller(t *testing.T) {
	e := start(t)
	second := e.createKey(e.Boot.APIKey, "rooms:read", "rooms:write", "participants:write", "participants:read").must(t, 201).Str("secret")
	body := map[string]any{"name": "shared"}
	a := mustFresh(t, e.do("POST", "/v1/rooms", e.Boot.APIKey, body, idem("same")), 201)
	b := mustFresh(t, e.do("POST", "/v1/rooms", second, body, idem("same")), 201)
	if a.Str("id") == b.Str("id") {
		t.Fatal("two callers got the same room")
	}
	mustReplay(t, a, e.do("POST", "/v1/rooms", e.Boot.APIKey, body, idem("same")))
	mustReplay(t, b, e.do("POST", "/v1/rooms", second, body, idem("same")))
	if n := len(e.listRooms()); n != 2 {
		t.Fatalf("%d rooms, want 2", n)
	}

	room := a.Str("id")
	pa := mustFresh(t, e.do("POST", "/v1/rooms/"+room+"/participants", e.Boot.APIKey, body, idem("p")), 201)
	pb := mustFresh(t, e.do("POST", "/v1/rooms/"+room+"/participants", second, body, idem("p")), 201)
	if pa.Str("id") == pb.Str("id") {
		t.Fatal("two callers got the same participant")
	}
	// A different body from the other caller is no conflict either.
	mustFresh(t, e.do("POST", "/v1/rooms", second, map[string]any{"name": "other"}, idem("only-first")), 201)
	mustFresh(t, e.do("POST", "/v1/rooms", e.Boot.APIKey, map[string]any{"name": "x"}, idem("only-first")), 201)
}

// Only 2xx answers are stored: a refused request can be retried with the
// same key, and then it runs.
func TestIdempotencyFailuresNotStored(t *testing.T) {
	t.Run("validation", func(t *testing.T) {
		e := start(t, "--default-max-participants-per-room=10")
		k := e.Boot.APIKey
		// Refused by the HTTP layer's validation.
		e.do("POST", "/v1/rooms", k, map[string]any{"expires_in": 59}, idem("v")).mustErr(t, 400, "invalid_request")
		// Refused inside the project actor (after the key was admitted).
		e.do("POST", "/v1/rooms", k, map[string]any{"max_participants": 11}, idem("v")).mustErr(t, 400, "invalid_request")
		e.do("POST", "/v1/rooms", k, map[string]any{"max_participants": 11}, idem("v")).mustErr(t, 400, "invalid_request")
		// Had either been stored, this would be a conflict.
		ok := mustFresh(t, e.do("POST", "/v1/rooms", k, map[string]any{"max_participants": 10}, idem("v")), 201)
		mustReplay(t, ok, e.do("POST", "/v1/rooms", k, map[string]any{"max_participants": 10}, idem("v")))
		mustConflict(t, e.do("POST", "/v1/rooms", k, map[string]any{"max_participants": 11}, idem("v")))

		e.do("POST", "/v1/api-keys", k, map[string]any{"name": "x", "scopes": []string{"nope"}}, idem("kv")).mustErr(t, 400, "invalid_request")
		mustFresh(t, e.do("POST", "/v1/api-keys", k, map[string]any{"name": "x", "scopes": []string{"rooms:read"}}, idem("kv")), 201)
	})

	t.Run("rate_limited_room", func(t *testing.T) {
		e := start(t, "--default-room-creates-per-minute=1")
		k := e.Boot.APIKey
		e.createRoom(nil)
		body := map[string]any{"name": "later"}
		for i := 0; i < 2; i++ {
			r := e.do("POST", "/v1/rooms", k, body, idem("rl"))
			r.mustErr(t, 429, "rate_limited")
			if r.Header.Get("Idempotent-Replayed") != "" {
				t.Fatal("a 429 was replayed")
			}
		}
		e.clock.Advance(time.Minute)
		ok := mustFresh(t, e.do("POST", "/v1/rooms", k, body, idem("rl")), 201)
		// The replay does not need (or use) rate budget: the window is spent.
		mustReplay(t, ok, e.do("POST", "/v1/rooms", k, body, idem("rl")))
		e.do("POST", "/v1/rooms", k, body).mustErr(t, 429, "rate_limited")
		if n := len(e.listRooms()); n != 2 {
			t.Fatalf("%d rooms, want 2", n)
		}
	})

	t.Run("rate_limited_participant", func(t *testing.T) {
		e := start(t, "--default-participant-creates-per-minute=1")
		k := e.Boot.APIKey
		room := e.createRoom(nil)
		e.createParticipant(room, nil)
		path := "/v1/rooms/" + room + "/participants"
		e.do("POST", path, k, map[string]any{"name": "z"}, idem("rlp")).mustErr(t, 429, "rate_limited")
		e.clock.Advance(time.Minute)
		ok := mustFresh(t, e.do("POST", path, k, map[string]any{"name": "z"}, idem("rlp")), 201)
		mustReplay(t, ok, e.do("POST", path, k, map[string]any{"name": "z"}, idem("rlp")))
		if n := e.countParticipants(room); n != 2 {
			t.Fatalf("%d participants, want 2", n)
		}
	})

	t.Run("rate_limited_api_key", func(t *testing.T) {
		e := start(t)
		k := e.Boot.APIKey
		for i := 0; i < 20; i++ { // the fixed abuse guard: 20 per minute
			e.createKey(k, "rooms:read").must(t, 201)
		}
		body := map[string]any{"name": "21st", "scopes": []string{"rooms:read"}}
		e.do("POST", "/v1/api-keys", k, body, idem("rlk")).mustErr(t, 429, "rate_limited")
		e.clock.Advance(time.Minute)
		ok := mustFresh(t, e.do("POST", "/v1/api-keys", k, body, idem("rlk")), 201)
		mustReplay(t, ok, e.do("POST", "/v1/api-keys", k, body, idem("rlk")))
	})

	t.Run("quota_exceeded", func(t *testing.T) {
		e := start(t, "--default-max-active-rooms=1")
		k := e.Boot.APIKey
		first := e.createRoom(nil)
		body := map[string]any{"name": "second"}
		e.do("POST", "/v1/rooms", k, body, idem("q")).mustErr(t, 409, "quota_exceeded")
		e.do("DELETE", "/v1/rooms/"+first, k, nil).must(t, 200)
		e.waitRoomEnded(first)
		ok := mustFresh(t, e.do("POST", "/v1/rooms", k, body, idem("q")), 201)
		mustReplay(t, ok, e.do("POST", "/v1/rooms", k, body, idem("q")))
	})

	t.Run("room_ended", func(t *testing.T) {
		e := start(t)
		k := e.Boot.APIKey
		room := e.createRoom(nil)
		e.do("DELETE", "/v1/rooms/"+room, k, nil).must(t, 200)
		e.waitRoomEnded(room)
		e.do("POST", "/v1/rooms/"+room+"/participants", k, map[string]any{}, idem("re")).mustErr(t, 410, "room_ended")
		// Not stored: the same key on the same body elsewhere is a fresh request,
		// not a conflict with a stored 410.
		other := e.createRoom(nil)
		mustFresh(t, e.do("POST", "/v1/rooms/"+other+"/participants", k, map[string]any{}, idem("re")), 201)
	})
}

// Keys are kept 24 hours; after that the key is fresh again.
func TestIdempotencyRetention24h(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	body := map[string]any{"name": "daily", "expires_in": 604800}
	orig := mustFresh(t, e.do("POST", "/v1/rooms", k, body, idem("day")), 201)
	room := orig.Str("id")
	pBody := map[string]any{"name": "ann"}
	pOrig := mustFresh(t, e.do("POST", "/v1/rooms/"+room+"/participants", k, pBody, idem("pday")), 201)
	kBody := map[string]any{"name": "kday", "scopes": []string{"rooms:read"}}
	kOrig := mustFresh(t, e.do("POST", "/v1/api-keys", k, kBody, idem("kday")), 201)

	e.clock.Advance(24*time.Hour - time.Second)
	mustReplay(t, orig, e.do("POST", "/v1/rooms", k, body, idem("day")))
	mustReplay(t, pOrig, e.do("POST", "/v1/rooms/"+room+"/participants", k, pBody, idem("pday")))
	mustReplay(t, kOrig, e.do("POST", "/v1/api-keys", k, kBody, idem("kday")))
	mustConflict(t, e.do("POST", "/v1/rooms", k, map[string]any{"name": "other"}, idem("day")))

	e.clock.Advance(2 * time.Second) // 24h + 1s after the creates
	again := mustFresh(t, e.do("POST", "/v1/rooms", k, body, idem("day")), 201)
	if again.Str("id") == room {
		t.Fatal("an expired key replayed its old room")
	}
	mustReplay(t, again, e.do("POST", "/v1/rooms", k, body, idem("day")))
	p2 := mustFresh(t, e.do("POST", "/v1/rooms/"+room+"/participants", k, pBody, idem("pday")), 201)
	if p2.Str("id") == pOrig.Str("id") {
		t.Fatal("an expired key replayed its old participant")
	}
	k2 := mustFresh(t, e.do("POST", "/v1/api-keys", k, kBody, idem("kday")), 201)
	if k2.Str("id") == kOrig.Str("id") {
		t.Fatal("an expired key replayed its old API key")
	}
	// An expired key may also be reused with another body.
	e.clock.Advance(24*time.Hour + time.Second)
	mustFresh(t, e.do("POST", "/v1/rooms", k, map[string]any{"name": "different"}, idem("day")), 201)
	if n := len(e.listRooms()); n != 3 {
		t.Fatalf("%d rooms, want 3", n)
	}
}

// 64 identical requests at once with one key make exactly one room; every
// answer is the room (original or replay) or idempotency_in_progress.
func TestIdempotencyConcurrent(t *testing.T) {
	e := start(t)
	body := map[string]any{"name": "race"}
	rs := e.parallel(64, func(int) (*resp, error) {
		return e.send("POST", "/v1/rooms", e.Boot.APIKey, body, idem("burst"))
	})
	var created []*resp
	inProgress, originals := 0, 0
	for _, r := range rs {
		switch {
		case r.Status == 201:
			created = append(created, r)
			if r.Header.Get("Idempotent-Replayed") == "" {
				originals++
			}
		case r.Status == 409 && r.ErrCode() == "idempotency_in_progress":
			inProgress++
		default:
			t.Fatalf("unexpected answer %d: %s", r.Status, r.Raw)
		}
	}
	if len(created) == 0 || originals != 1 {
		t.Fatalf("%d created answers, %d originals (want exactly 1 original)", len(created), originals)
	}
	for _, r := range created[1:] {
		if !bytes.Equal(r.Raw, created[0].Raw) {
			t.Fatalf("answers differ:\n%s\n%s", r.Raw, created[0].Raw)
		}
	}
	rooms := e.listRooms()
	if len(rooms) != 1 || rooms[0]["id"] != created[0].Str("id") {
		t.Fatalf("%d rooms after the burst, want exactly the one answered", len(rooms))
	}
	// Afterwards the key replays.
	mustReplay(t, created[0], e.do("POST", "/v1/rooms", e.Boot.APIKey, body, idem("burst")))
	t.Logf("burst: %d created answers, %d in progress", len(created), inProgress)

	// The same for participants.
	room := created[0].Str("id")
	path := "/v1/rooms/" + room + "/participants"
	rs = e.parallel(64, func(int) (*resp, error) {
		return e.send("POST", path, e.Boot.APIKey, map[string]any{"name": "p"}, idem("pburst"))
	})
	var first *resp
	for _, r := range rs {
		switch {
		case r.Status == 201:
			if first == nil {
				first = r
			} else if !bytes.Equal(r.Raw, first.Raw) {
				t.Fatalf("answers differ:\n%s\n%s", r.Raw, first.Raw)
			}
		case r.Status == 409 && r.ErrCode() == "idempotency_in_progress":
		default:
			t.Fatalf("unexpected answer %d: %s", r.Status, r.Raw)
		}
	}
	if first == nil {
		t.Fatal("no participant answer")
	}
	if n := e.countParticipants(room); n != 1 {
		t.Fatalf("%d participants after the burst, want 1", n)
	}
}

// Stored responses are sealed: neither a participant token nor an API key
// secret from an idempotent create is anywhere on disk in clear.
func TestIdempotencyEncryptedAtRest(t *testing.T) {
	e := start(t)
	room := e.createRoom(nil)
	p := e.do("POST", "/v1/rooms/"+room+"/participants", e.Boot.APIKey, map[string]any{"name": "secretive"}, idem("enc")).must(t, 201)
	token := p.Str("token")
	_, sig, ok := strings.Cut(token, ".")
	if !ok || len(sig) < 40 {
		t.Fatalf("token %q has no signature part", token)
	}
	kr := e.do("POST", "/v1/api-keys", e.Boot.APIKey, map[string]any{"name": "enc", "scopes": []string{"rooms:read"}}, idem("enc-key")).must(t, 201)
	secret := kr.Str("secret")
	mustReplay(t, p, e.do("POST", "/v1/rooms/"+room+"/participants", e.Boot.APIKey, map[string]any{"name": "secretive"}, idem("enc")))
	e.Stop()

	secrets := map[string][]byte{
		"participant token":           []byte(token),
		"participant token signature": []byte(sig),
		"API key secret":              []byte(secret),
		"API key secret body":         []byte(strings.TrimPrefix(secret, "sk_live_")),
	}
	var files int
	sawParticipantID := false
	// On JetStream the state is in the NATS servers' store directories
	// (every stream of the suite's cluster, this test's among them).
	dirs := []string{e.dataDir}
	if onJetStream() {
		dirs = append(dirs, jsSuite.cluster.Dir())
	}
	for _, dir := range dirs {
		if err := scanFilesFor(t, dir, secrets, p.Str("id"), &files, &sawParticipantID); err != nil {
			t.Fatal(err)
		}
	}
	// The scan does see the data: the participant's id is stored in clear.
	if files == 0 || !sawParticipantID {
		t.Fatalf("scan of %d files did not find the participant id; the scan proves nothing", files)
	}
}

// scanFilesFor reads every file under dir, counting them, reports any of
// secrets found in clear, and notes whether clear (an id stored as is)
// was seen.
func scanFilesFor(t *testing.T, dir string, secrets map[string][]byte, clear string, files *int, sawClear *bool) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		*files++
		for what, s := range secrets {
			if bytes.Contains(data, s) {
				t.Errorf("%s found in clear in %s", what, path)
			}
		}
		if bytes.Contains(data, []byte(clear)) {
			*sawClear = true
		}
		return nil
	})
}

func TestIdempotencyKeyHeaderBounds(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	room := e.createRoom(nil)
	long := strings.Repeat("k", 256)
	e.do("POST", "/v1/rooms", k, map[string]any{}, idem(long)).mustErr(t, 400, "invalid_request")
	e.do("POST", "/v1/rooms/"+room+"/participants", k, map[string]any{}, idem(long)).mustErr(t, 400, "invalid_request")
	e.do("POST", "/v1/api-keys", k, map[string]any{"name": "x", "scopes": []string{"rooms:read"}}, idem(long)).mustErr(t, 400, "invalid_request")
	if n := len(e.listRooms()); n != 1 {
		t.Fatalf("%d rooms, want 1: an over-long key still created", n)
	}
	if n := e.countParticipants(room); n != 0 {
		t.Fatalf("%d participants: an over-long key still created", n)
	}
	max := strings.Repeat("k", 255)
	orig := mustFresh(t, e.do("POST", "/v1/rooms", k, map[string]any{}, idem(max)), 201)
	mustReplay(t, orig, e.do("POST", "/v1/rooms", k, map[string]any{}, idem(max)))
	// A key one character shorter is another key.
	mustFresh(t, e.do("POST", "/v1/rooms", k, map[string]any{}, idem(max[1:])), 201)
}
