package e2e

// Pagination (spec section 4, rules 1-4) on every list: rooms, participants
// of a room, API keys and audit logs.

import (
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"
)

// pgList describes one list endpoint for the shared pagination checks.
type pgList struct {
	name       string
	nextCursor bool // page.next_cursor present (always null)
	// setup prepares a fresh server and returns the list path, the keys of
	// the items that already exist (oldest first), and seed, which creates
	// one item newer than every other and returns its key.
	setup func(e *env) (path string, existing []string, seed func() string)
	// keyOf is the identity of a list item compared against seed's keys.
	keyOf func(item map[string]any) string
}

func pgItemID(item map[string]any) string { s, _ := item["id"].(string); return s }

var pgLists = []pgList{
	{
		name: "rooms", nextCursor: true, keyOf: pgItemID,
		setup: func(e *env) (string, []string, func() string) {
			return "/v1/rooms", nil, func() string {
				e.clock.Advance(time.Millisecond)
				return e.createRoom(nil)
			}
		},
	},
	{
		name: "participants", keyOf: pgItemID,
		setup: func(e *env) (string, []string, func() string) {
			room := e.createRoom(nil)
			return "/v1/rooms/" + room + "/participants", nil, func() string {
				e.clock.Advance(time.Millisecond)
				id, _ := e.createParticipant(room, nil)
				return id
			}
		},
	},
	{
		name: "api-keys", keyOf: pgItemID,
		setup: func(e *env) (string, []string, func() string) {
			n := 0
			return "/v1/api-keys", []string{e.Boot.APIKeyID}, func() string {
				n++
				if n%20 == 0 {
					e.clock.Advance(time.Minute) // the creation guard allows 20 a minute
				}
				e.clock.Advance(time.Millisecond)
				id, _ := erMintKey(e, "rooms:read")
				// Revoke it so the active-key limit never interferes;
				// revoked keys are listed too.
				e.do("DELETE", "/v1/api-keys/"+id, e.Boot.APIKey, nil).must(e.t, 200)
				return id
			}
		},
	},
	{
		name: "audit-logs",
		keyOf: func(item map[string]any) string {
			target, _ := item["target"].(map[string]any)
			s, _ := target["id"].(string)
			return s
		},
		setup: func(e *env) (string, []string, func() string) {
			// The bootstrap wrote api_key.created for the bootstrap key.
			return "/v1/audit-logs", []string{e.Boot.APIKeyID}, func() string {
				e.clock.Advance(time.Millisecond)
				room := e.createRoom(nil)
				e.clock.Advance(time.Millisecond)
				e.do("DELETE", "/v1/rooms/"+room, e.Boot.APIKey, nil).must(e.t, 200) // room.deleted
				return room
			}
		},
	},
}

// pgFetch fetches path+query and checks the page envelope's shape.
func pgFetch(t *testing.T, e *env, l pgList, path, query string) (keys []string, hasMore bool) {
	t.Helper()
	r := e.do("GET", path+query, e.Boot.APIKey, nil).must(t, 200)
	if r.Str("object") != "list" {
		t.Errorf("object %q", r.Str("object"))
	}
	if _, ok := r.JSON["data"].([]any); !ok {
		t.Fatalf("data is not an array: %s", r.Raw)
	}
	page, ok := r.JSON["page"].(map[string]any)
	if !ok {
		t.Fatalf("no page object: %s", r.Raw)
	}
	hm, ok := page["has_more"].(bool)
	if !ok {
		t.Fatalf("page.has_more is not a boolean: %s", r.Raw)
	}
	cursor, present := page["next_cursor"]
	switch {
	case l.nextCursor && (!present || cursor != nil):
		t.Errorf("%s: page.next_cursor must be present and null: %s", l.name, r.Raw)
	case !l.nextCursor && present:
		t.Errorf("%s: page.next_cursor must be absent: %s", l.name, r.Raw)
	}
	prev := ""
	for _, item := range r.Data() {
		keys = append(keys, l.keyOf(item))
		at, _ := item["created_at"].(string)
		if prev != "" && at > prev {
			t.Errorf("created_at %s after %s: not newest first", at, prev)
		}
		prev = at
	}
	return keys, hm
}

// pgNewestFirst is the last n of all (oldest first), newest first.
func pgNewestFirst(all []string, n int) []string {
	out := slices.Clone(all[max(0, len(all)-n):])
	slices.Reverse(out)
	return out
}

func TestPagination(t *testing.T) {
	for _, l := range pgLists {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			e := start(t)
			path, all, seed := l.setup(e)
			growTo := func(n int) {
				for len(all) < n {
					all = append(all, seed())
				}
			}
			expect := func(query string, wantN int, wantMore bool) {
				t.Helper()
				keys, more := pgFetch(t, e, l, path, query)
				if want := pgNewestFirst(all, wantN); !slices.Equal(keys, want) {
					t.Errorf("GET %s%s with %d items: got %d items %v, want %v", path, query, len(all), len(keys), keys, want)
				}
				if more != wantMore {
					t.Errorf("GET %s%s with %d items: has_more %v, want %v", path, query, len(all), more, wantMore)
				}
			}

			// Whatever exists at the start (nothing, or the bootstrap's item).
			expect("", len(all), false)

			growTo(3)
			expect("", 3, false)
			expect("?limit=4", 3, false)
			expect("?limit=3", 3, false) // exactly full: no more
			expect("?limit=2", 2, true)
			expect("?limit=1", 1, true)

			growTo(50)
			expect("", 50, false) // default 50, exactly full
			expect("?limit=49", 49, true)

			growTo(51)
			expect("", 50, true)

			growTo(100)
			expect("?limit=100", 100, false) // the maximum, exactly full
			expect("?limit=99", 99, true)
			expect("", 50, true)

			growTo(101)
			expect("?limit=100", 100, true)
			expect("?limit=1", 1, true)
			expect("", 50, true)

			// Other parameters are ignored; there is no cursor.
			oldest := all[0]
			for _, q := range []string{
				"?limit=5&after=" + oldest,
				"?after=" + oldest + "&limit=5",
				"?limit=5&status=ended",
				"?limit=5&cursor=abc",
				"?limit=5&next_cursor=" + oldest,
				"?limit=5&starting_after=" + oldest + "&ending_before=" + all[100],
				"?limit=5&page=2&offset=10&order=asc&sort=created_at",
				"?LIMIT=1&limit=5",
			} {
				expect(q, 5, true)
			}
			expect("?cursor=abc&after="+oldest, 50, true) // default limit still applies
		})
	}
}

func TestPaginationInvalidLimit(t *testing.T) {
	e := start(t)
	room := e.createRoom(nil)
	values := []string{
		"0", "101", "-1", "abc", "1.5", "", "%2B5", "+5", "-0", "1e2", "0x10", "5a", "%205", "5%20",
		"100000000000000000000", "1000", "null", "1,2", "%EF%BC%95", // fullwidth digit five
		"9223372036854775808",
	}
	paths := []string{"/v1/rooms", "/v1/rooms/" + room + "/participants", "/v1/api-keys", "/v1/audit-logs"}
	for _, p := range paths {
		for _, v := range values {
			t.Run(fmt.Sprintf("%s limit=%q", p, v), func(t *testing.T) {
				r := e.do("GET", p+"?limit="+v, e.Boot.APIKey, nil)
				erRequireField(t, erRequireEnvelope(t, r, 400, "invalid_request"), "limit", r.Raw)
			})
		}
		t.Run(p+" bare limit", func(t *testing.T) {
			r := e.do("GET", p+"?limit", e.Boot.APIKey, nil)
			erRequireField(t, erRequireEnvelope(t, r, 400, "invalid_request"), "limit", r.Raw)
		})
		// The bounds themselves are valid.
		for _, v := range []string{"1", "100", "50"} {
			e.do("GET", p+"?limit="+url.QueryEscape(v), e.Boot.APIKey, nil).must(t, 200)
		}
	}
}

func TestPaginationRoomsListAllStatuses(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	var rooms []string
	for range 3 {
		e.clock.Advance(time.Millisecond)
		rooms = append(rooms, e.createRoom(nil))
	}
	e.do("DELETE", "/v1/rooms/"+rooms[1], k, nil).must(t, 200)
	e.eventually("room ended", func() bool {
		return e.do("GET", "/v1/rooms/"+rooms[1], k, nil).Str("status") == "ended"
	})
	r := e.do("GET", "/v1/rooms", k, nil).must(t, 200)
	var got, statuses []string
	for _, item := range r.Data() {
		got = append(got, pgItemID(item))
		statuses = append(statuses, item["status"].(string))
	}
	if !slices.Equal(got, pgNewestFirst(rooms, 3)) {
		t.Errorf("rooms %v, want %v", got, pgNewestFirst(rooms, 3))
	}
	if !slices.Equal(statuses, []string{"waiting", "ended", "waiting"}) {
		t.Errorf("statuses %v", statuses)
	}
	// status is not a filter.
	r2 := e.do("GET", "/v1/rooms?status=ended", k, nil).must(t, 200)
	if len(r2.Data()) != 3 {
		t.Errorf("status=ended filtered the list: %s", r2.Raw)
	}
	// Participants of an unknown room: 404, not an empty page.
	erRequireEnvelope(t, e.do("GET", "/v1/rooms/room_aaaaaaaaaaaaaaaaaaaaaaaa/participants", k, nil), 404, "room_not_found")
}
