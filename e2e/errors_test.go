package e2e

// Error contract: the envelope on every error, X-Request-Id on every
// response, protocol-level failures (unknown route, wrong method, oversized
// body), strict JSON decoding, authentication and per-route scopes.

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"rtcd/auth"
	"rtcd/ids"
)

// erAllScopes is the complete scope list of the interface.
var erAllScopes = []string{
	"rooms:read", "rooms:write", "participants:read", "participants:write", "usage:read",
	"billing:read", "billing:write", "api_keys:read", "api_keys:write", "webhooks:read",
	"webhooks:write", "project:read", "audit_logs:read",
}

// erRequireEnvelope asserts r is an error of status and code in the
// spec's envelope, with X-Request-Id equal to the envelope's request_id, and
// returns the details object.
func erRequireEnvelope(t *testing.T, r *resp, status int, code string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d (%s): %s", r.Status, status, code, r.Raw)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want application/json: %s", ct, r.Raw)
	}
	if len(r.JSON) != 1 {
		t.Fatalf("error body must be exactly {\"error\":{...}}: %s", r.Raw)
	}
	obj, ok := r.JSON["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object: %s", r.Raw)
	}
	for k := range obj {
		if !slices.Contains([]string{"code", "message", "request_id", "details"}, k) {
			t.Errorf("unexpected error field %q: %s", k, r.Raw)
		}
	}
	if got, _ := obj["code"].(string); got != code {
		t.Fatalf("code %q, want %q: %s", got, code, r.Raw)
	}
	if msg, _ := obj["message"].(string); strings.TrimSpace(msg) == "" {
		t.Errorf("empty message: %s", r.Raw)
	}
	rid, _ := obj["request_id"].(string)
	if !strings.HasPrefix(rid, "req_") {
		t.Errorf("request_id %q lacks req_: %s", rid, r.Raw)
	}
	if h := r.Header.Get("X-Request-Id"); h != rid {
		t.Errorf("X-Request-Id header %q != envelope request_id %q", h, rid)
	}
	details, ok := obj["details"].(map[string]any)
	if !ok {
		t.Fatalf("details must be an object: %s", r.Raw)
	}
	return details
}

// erRequireField asserts details.field.
func erRequireField(t *testing.T, details map[string]any, field string, raw []byte) {
	t.Helper()
	if got, _ := details["field"].(string); got != field {
		t.Errorf("details.field %q, want %q: %s", got, field, raw)
	}
}

// erUnknownSecret is a well-formed sk_live_ secret no server knows.
func erUnknownSecret(t *testing.T) string {
	t.Helper()
	s, err := auth.NewAPIKeySecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// erMintKey creates a key holding scopes with the bootstrap key and
// returns its id and secret.
func erMintKey(e *env, scopeNames ...string) (id, secret string) {
	e.t.Helper()
	r := e.createKey(e.Boot.APIKey, scopeNames...).must(e.t, 201)
	return r.Str("id"), r.Str("secret")
}

// erRawDo sends req and decodes the response like env.do.
func erRawDo(t *testing.T, e *env, req *http.Request) *resp {
	t.Helper()
	res, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	r := &resp{Status: res.StatusCode, Header: res.Header, Raw: raw}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &r.JSON)
	}
	return r
}

func TestErrorUnknownRouteAndWrongMethod(t *testing.T) {
	e := start(t)
	room := e.createRoom(nil)
	k := e.Boot.APIKey
	cases := []struct {
		method, path string
		key          string
		status       int
		allow        []string // methods the 405's Allow header must list
	}{
		{"GET", "/v1", k, 404, nil},
		{"GET", "/v1/", k, 404, nil},
		{"GET", "/v1/nope", k, 404, nil},
		{"GET", "/v1/nope", "", 404, nil}, // unknown route beats authentication
		{"GET", "/v2/rooms", k, 404, nil},
		{"GET", "/v1/ROOMS", k, 404, nil},
		{"GET", "/v1/rooms/", k, 404, nil}, // no trailing-slash redirect
		{"GET", "/v1/rooms/" + room + "/participants/", k, 404, nil},
		{"GET", "/v1/rooms/" + room + "/nope", k, 404, nil},
		{"POST", "/v1/rooms/" + room + "/participants/x/y", k, 404, nil},
		{"GET", "/metrics", "", 404, nil},
		{"GET", "/healthz", "", 404, nil},
		{"GET", "/sign-in/email/x", "", 404, nil}, // beside the dashboard's pages
		{"GET", "/assets/nope.js", "", 404, nil},
		{"GET", "/p", "", 404, nil},
		{"PUT", "/v1/rooms", k, 405, []string{"GET", "POST"}},
		{"PATCH", "/v1/rooms", "", 405, []string{"GET", "POST"}}, // wrong method beats authentication
		{"DELETE", "/v1/rooms", k, 405, []string{"GET", "POST"}},
		{"PATCH", "/v1/rooms/" + room, k, 405, []string{"GET", "DELETE"}},
		{"POST", "/v1/rooms/" + room, k, 405, []string{"GET", "DELETE"}},
		{"PUT", "/v1/rooms/" + room + "/participants", k, 405, []string{"GET", "POST"}},
		{"GET", "/v1/connect", "", 405, []string{"POST", "OPTIONS"}}, // its preflight (browser_test.go)
		{"DELETE", "/v1/api-keys", k, 405, []string{"GET", "POST"}},
		{"GET", "/v1/api-keys/key_x", k, 405, []string{"DELETE"}},
		{"POST", "/v1/project/limits", k, 405, []string{"GET"}},
		{"DELETE", "/v1/audit-logs", k, 405, []string{"GET"}},
		{"POST", "/v1/system/info", k, 405, []string{"GET"}},
		{"TRACE", "/v1/rooms", k, 405, []string{"GET", "POST"}},
		// OPTIONS is refused like any other method these paths do not serve,
		// so Allow never lists it.
		{"OPTIONS", "/v1/rooms", k, 405, []string{"GET", "POST"}},
		{"OPTIONS", "/v1/rooms/" + room, "", 405, []string{"GET", "DELETE"}},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			r := e.do(c.method, c.path, c.key, nil)
			d := erRequireEnvelope(t, r, c.status, "invalid_request")
			if len(d) != 0 {
				t.Errorf("details %v, want {}", d)
			}
			// Allow lists exactly the methods the path serves (RFC 9110
			// section 10.2.1), in any order.
			var allow []string
			for _, m := range strings.Split(r.Header.Get("Allow"), ",") {
				if m = strings.TrimSpace(m); m != "" {
					allow = append(allow, m)
				}
			}
			slices.Sort(allow)
			if want := slices.Sorted(slices.Values(c.allow)); !slices.Equal(allow, want) {
				t.Errorf("Allow %q, want exactly %v", r.Header.Get("Allow"), want)
			}
		})
	}
	// HEAD gets the status and headers of the error, without a body.
	r := e.do("HEAD", "/v1/nope", k, nil)
	if r.Status != 404 || !strings.HasPrefix(r.Header.Get("X-Request-Id"), "req_") {
		t.Errorf("HEAD unknown route: %d %v", r.Status, r.Header)
	}
}

func TestRequestIDOnEveryResponse(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	long64 := strings.Repeat("a", 64)
	long65 := strings.Repeat("a", 65)
	type call struct {
		name, method, path, key string
		body                    any
		status                  int
	}
	calls := []call{
		{"success", "GET", "/v1/rooms", k, nil, 200},
		{"created", "POST", "/v1/rooms", k, map[string]any{}, 201},
		{"no key", "GET", "/v1/rooms", "", nil, 401},
		{"unknown route", "GET", "/v1/nope", k, nil, 404},
		{"wrong method", "PUT", "/v1/rooms", k, nil, 405},
		{"bad body", "POST", "/v1/rooms", k, "{", 400},
		{"bad limit", "GET", "/v1/rooms?limit=0", k, nil, 400},
		{"no auth route", "POST", "/v1/connect", "", map[string]any{"token": "rtc_pt_nope"}, 401},
		{"too large", "POST", "/v1/rooms", k, strings.Repeat(" ", 64*1024+1), 413},
	}
	sent := []struct {
		name, header, want string // want "": a fresh generated id
	}{
		{"absent", "", ""},
		{"plain", "trace-1.A_b", "req_trace-1.A_b"},
		{"prefixed", "req_abc123", "req_abc123"},
		{"bare prefix", "req_", ""},
		{"64 bytes", long64, "req_" + long64},
		{"65 bytes", long65, ""},
		{"space", "a b", ""},
		{"slash", "a/b", ""},
		{"quote", `a"b`, ""},
		{"semicolon", "a;b", ""},
		{"percent", "a%20b", ""},
	}
	seen := map[string]bool{}
	for _, c := range calls {
		for _, s := range sent {
			t.Run(c.name+"/"+s.name, func(t *testing.T) {
				var hdr []string
				if s.header != "" {
					hdr = append(hdr, "X-Request-Id: "+s.header)
				}
				r := e.do(c.method, c.path, c.key, c.body, hdr...)
				if r.Status != c.status {
					t.Fatalf("status %d, want %d: %s", r.Status, c.status, r.Raw)
				}
				got := r.Header.Get("X-Request-Id")
				if s.want != "" {
					if got != s.want {
						t.Errorf("X-Request-Id %q, want %q", got, s.want)
					}
				} else {
					if !ids.Valid(got, ids.Request) {
						t.Errorf("X-Request-Id %q is not a generated req_ id", got)
					}
					if seen[got] {
						t.Errorf("generated request id %q repeated", got)
					}
					seen[got] = true
				}
				if c.status >= 400 {
					erRequireEnvelope(t, r, c.status, r.ErrCode())
				}
			})
		}
	}
}

func TestErrorMalformedBodies(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	room := e.createRoom(nil)
	rooms := "/v1/rooms"
	parts := "/v1/rooms/" + room + "/participants"
	keys := "/v1/api-keys"
	connect := "/v1/connect"
	deep := `{"metadata":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`
	cases := []struct {
		name, path, body string
		field            string // "" : details.field not asserted absent, only not required
	}{
		{"truncated", rooms, `{"name":"a"`, ""},
		{"open brace", rooms, `{`, ""},
		{"trailing comma", rooms, `{"name":"a",}`, ""},
		{"single quotes", rooms, `{'name':'a'}`, ""},
		{"bare word", rooms, `{name:"a"}`, ""},
		{"array body", rooms, `[]`, ""},
		{"array of object", rooms, `[{"name":"a"}]`, ""},
		{"string body", rooms, `"room"`, ""},
		{"number body", rooms, `42`, ""},
		{"null body", rooms, `null`, ""},
		{"true body", rooms, `true`, ""},
		{"two objects", rooms, `{}{}`, ""},
		{"object then garbage", rooms, `{"name":"a"} x`, ""},
		{"object then array", rooms, `{} []`, ""},
		{"deep nesting", rooms, deep, ""},
		{"name number", rooms, `{"name":5}`, "name"},
		{"name object", rooms, `{"name":{}}`, "name"},
		{"name control char", rooms, `{"name":"a\u0001b"}`, "name"},
		{"name too long", rooms, `{"name":"` + strings.Repeat("n", 129) + `"}`, "name"},
		{"max_participants string", rooms, `{"max_participants":"5"}`, "max_participants"},
		{"max_participants fraction", rooms, `{"max_participants":1.5}`, "max_participants"},
		{"max_participants overflow", rooms, `{"max_participants":99999999999999999999999}`, "max_participants"},
		{"max_participants zero", rooms, `{"max_participants":0}`, "max_participants"},
		{"expires_in bool", rooms, `{"expires_in":true}`, "expires_in"},
		{"expires_in exponent", rooms, `{"expires_in":1e3}`, "expires_in"},
		{"expires_in too small", rooms, `{"expires_in":1}`, "expires_in"},
		{"region array", rooms, `{"region":["global"]}`, "region"},
		{"region other", rooms, `{"region":"mars"}`, "region"},
		{"metadata string", rooms, `{"metadata":"x"}`, "metadata"},
		{"metadata array", rooms, `{"metadata":[1]}`, "metadata"},
		{"metadata number", rooms, `{"metadata":5}`, "metadata"},
		{"metadata too large", rooms, `{"metadata":{"k":"` + strings.Repeat("m", 5000) + `"}}`, "metadata"},
		{"unknown field", rooms, `{"bogus":1}`, "bogus"},
		{"unknown project_id", rooms, `{"project_id":"prj_x"}`, "project_id"},
		{"participant role number", parts, `{"role":5}`, "role"},
		{"participant role unknown", parts, `{"role":"admin"}`, "role"},
		{"participant expires_in string", parts, `{"expires_in":"60"}`, "expires_in"},
		{"participant external_id number", parts, `{"external_id":7}`, "external_id"},
		{"participant unknown field", parts, `{"token":"x"}`, "token"},
		{"participant array", parts, `[]`, ""},
		{"participant trailing", parts, `{}x`, ""},
		{"key empty body", keys, ``, ""},
		{"key scopes string", keys, `{"scopes":"rooms:read"}`, "scopes"},
		{"key name number", keys, `{"name":5,"scopes":["rooms:read"]}`, "name"},
		{"key unknown field", keys, `{"scopes":["rooms:read"],"secret":"sk_live_x"}`, "secret"},
		{"key array", keys, `["rooms:read"]`, ""},
		{"key trailing", keys, `{"scopes":["rooms:read"]}{}`, ""},
		{"connect empty body", connect, ``, ""},
		{"connect token number", connect, `{"token":5}`, "token"},
		{"connect sdk number", connect, `{"sdk":5}`, "sdk"},
		{"connect sdk.name number", connect, `{"token":"x","sdk":{"name":5}}`, "sdk.name"},
		{"connect unknown field", connect, `{"token":"x","room":"y"}`, "room"},
		{"connect nested unknown field", connect, `{"token":"x","sdk":{"extra":"y"}}`, ""},
		{"connect missing token", connect, `{}`, "token"},
		{"connect array", connect, `[]`, ""},
		{"connect trailing", connect, `{"token":"x"} {}`, ""},
		// A body of only whitespace is not empty: it holds no JSON object.
		{"room body one space", rooms, " ", ""},
		{"room body newline", rooms, "\n", ""},
		{"room body CRLF", rooms, "\r\n", ""},
		{"participant body tab", parts, "\t", ""},
		// "" would read back as null, not as given: refused.
		{"room name empty", rooms, `{"name":""}`, "name"},
		{"participant name empty", parts, `{"name":""}`, "name"},
		{"participant external_id empty", parts, `{"external_id":""}`, "external_id"},
		{"key name empty", keys, `{"name":"","scopes":["rooms:read"]}`, "name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := k
			if c.path == connect {
				key = ""
			}
			r := e.do("POST", c.path, key, c.body)
			d := erRequireEnvelope(t, r, 400, "invalid_request")
			if c.field != "" {
				erRequireField(t, d, c.field, r.Raw)
			}
			// No Go type names or internals leak into messages.
			msg := r.JSON["error"].(map[string]any)["message"].(string)
			for _, leak := range []string{"*int", "*string", "RawMessage", "actors.", "goccy", "json.", "reflect"} {
				if strings.Contains(msg, leak) {
					t.Errorf("message leaks %q: %s", leak, msg)
				}
			}
		})
	}
	// Nothing was created by any rejected request.
	if n := len(e.do("GET", "/v1/rooms", k, nil).must(t, 200).Data()); n != 1 {
		t.Errorf("rooms after rejected creates: %d, want 1", n)
	}
	if n := len(e.do("GET", parts, k, nil).must(t, 200).Data()); n != 0 {
		t.Errorf("participants after rejected creates: %d, want 0", n)
	}
	if n := len(e.do("GET", keys, k, nil).must(t, 200).Data()); n != 1 {
		t.Errorf("api keys after rejected creates: %d, want 1", n)
	}
	// Bodies that are optional still accept an empty body (no bytes at all).
	// JSON whitespace (space, tab, CR, LF) around the object is insignificant.
	for _, b := range []string{"", " \n\t{ } \n", "\r\n{\"name\":\"ws\"}\r\n"} {
		if r := e.do("POST", rooms, k, b); r.Status != 201 {
			t.Errorf("POST /v1/rooms %q: %d %s", b, r.Status, r.Raw)
		}
	}
	e.do("POST", keys, k, "\r\n{\"scopes\":[\"rooms:read\"]}\n").must(t, 201)
	erRequireEnvelope(t, e.do("POST", keys, k, " \r\n "), 400, "invalid_request")
}

func TestErrorBodyTooLarge(t *testing.T) {
	// No subtests: a lost 413 surfaces as a transport error in e.do, which
	// fails e.t, and that must be this test.
	e := start(t)
	k := e.Boot.APIKey
	const limit = 64 * 1024
	padded := func(n int) string { // a valid room body of exactly n bytes
		b := `{"name":"big"}`
		return b + strings.Repeat(" ", n-len(b))
	}
	// Exactly 64 KiB is accepted.
	e.do("POST", "/v1/rooms", k, padded(limit)).must(t, 201)

	// One byte over, repeatedly: the 413 must reach the client every time,
	// not be lost to a connection reset; a caller's request id is echoed.
	for i := range 10 {
		r := e.do("POST", "/v1/rooms", k, padded(limit+1), fmt.Sprintf("X-Request-Id: big-%d", i))
		d := erRequireEnvelope(t, r, 413, "invalid_request")
		if got := r.Header.Get("X-Request-Id"); got != fmt.Sprintf("req_big-%d", i) {
			t.Errorf("X-Request-Id %q not echoed on 413", got)
		}
		if lb, ok := d["limit_bytes"]; ok && lb != float64(limit) {
			t.Errorf("details.limit_bytes %v", lb)
		}
	}
	// Bodies of several MiB (the larger the unread rest, the likelier a
	// reset destroys the response, so these catch a lost 413 best).
	for range 4 {
		erRequireEnvelope(t, e.do("POST", "/v1/rooms", k, strings.Repeat("x", 1<<20)), 413, "invalid_request")
		erRequireEnvelope(t, e.do("POST", "/v1/rooms", k, strings.Repeat("x", 4<<20-1024)), 413, "invalid_request")
	}
	// Every route, authenticated or not.
	for _, path := range []string{"/v1/rooms/" + ids.New(ids.Room) + "/participants", "/v1/api-keys", "/v1/connect", "/v1/nope"} {
		erRequireEnvelope(t, e.do("POST", path, k, padded(limit+100)), 413, "invalid_request")
		erRequireEnvelope(t, e.do("POST", path, "", padded(limit+100)), 413, "invalid_request")
	}
	// Chunked bodies, whose size is not declared up front.
	chunked := func(body string) *http.Request {
		// A MultiReader has no known length: the client sends it chunked.
		req, err := http.NewRequest("POST", e.Base+"/v1/rooms", io.MultiReader(strings.NewReader(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+k)
		req.Header.Set("Content-Type", "application/json")
		return req
	}
	erRawDo(t, e, chunked(padded(1000))).must(t, 201)
	for range 3 {
		erRequireEnvelope(t, erRawDo(t, e, chunked(padded(limit+1))), 413, "invalid_request")
		erRequireEnvelope(t, erRawDo(t, e, chunked(padded(1<<20))), 413, "invalid_request")
	}
	// The server still serves, and no oversized request created anything.
	if n := len(e.do("GET", "/v1/rooms", k, nil).must(t, 200).Data()); n != 2 {
		t.Errorf("rooms: %d, want 2 (the 64 KiB one and the chunked 1000-byte one)", n)
	}
}

func TestErrorAuthenticationFailed(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	revokedID, revoked := erMintKey(e, erAllScopes...)
	e.do("DELETE", "/v1/api-keys/"+revokedID, k, nil).must(t, 200)
	room := e.createRoom(nil)
	part, token := e.createParticipant(room, nil)

	credentials := []struct{ name, header string }{
		{"absent", ""},
		{"empty", "Authorization: "},
		{"basic", "Authorization: Basic " + k},
		{"lowercase bearer, bad key", "Authorization: bearer " + k + "A"}, // the scheme is case-insensitive (RFC 9110); see TestStrictAuthorizationScheme
		{"bearer only", "Authorization: Bearer"},
		{"bearer space", "Authorization: Bearer "},
		{"no scheme", "Authorization: " + k},
		{"two spaces", "Authorization: Bearer  " + k},
		{"test prefix", "Authorization: Bearer sk_test_" + k[len("sk_live_"):]},
		{"truncated", "Authorization: Bearer " + k[:len(k)-1]},
		{"extended", "Authorization: Bearer " + k + "A"},
		{"bad checksum", "Authorization: Bearer " + erFlipLastChar(k)},
		{"garbage", "Authorization: Bearer sk_live_garbage"},
		{"unknown", "Authorization: Bearer " + erUnknownSecret(t)},
		{"revoked", "Authorization: Bearer " + revoked},
		{"participant token", "Authorization: Bearer " + token},
		{"key id", "Authorization: Bearer " + e.Boot.APIKeyID},
	}
	routes := []struct{ method, path string }{
		{"POST", "/v1/rooms"},
		{"GET", "/v1/rooms"},
		{"GET", "/v1/rooms/" + room},
		{"DELETE", "/v1/rooms/" + room},
		{"POST", "/v1/rooms/" + room + "/participants"},
		{"GET", "/v1/rooms/" + room + "/participants"},
		{"GET", "/v1/rooms/" + room + "/participants/" + part},
		{"DELETE", "/v1/rooms/" + room + "/participants/" + part},
		{"POST", "/v1/api-keys"},
		{"GET", "/v1/api-keys"},
		{"DELETE", "/v1/api-keys/" + e.Boot.APIKeyID},
		{"GET", "/v1/project/limits"},
		{"GET", "/v1/audit-logs"},
		{"GET", "/v1/system/info"},
	}
	for _, c := range credentials {
		for _, rt := range routes {
			t.Run(c.name+"/"+rt.method+" "+rt.path, func(t *testing.T) {
				var hdr []string
				if c.header != "" {
					hdr = append(hdr, c.header)
				}
				var body any
				if rt.method == "POST" {
					body = map[string]any{"scopes": []string{"rooms:read"}}
					if rt.path != "/v1/api-keys" {
						body = map[string]any{}
					}
				}
				erRequireEnvelope(t, e.do(rt.method, rt.path, "", body, hdr...), 401, "authentication_failed")
			})
		}
	}
	// Nothing above changed anything: the room and participant are intact
	// and the bootstrap key still works.
	if s := e.do("GET", "/v1/rooms/"+room, k, nil).must(t, 200).Str("status"); s != "waiting" {
		t.Errorf("room status %q after rejected DELETEs", s)
	}
	if s := e.do("GET", "/v1/rooms/"+room+"/participants/"+part, k, nil).must(t, 200).Str("status"); s != "created" {
		t.Errorf("participant status %q after rejected DELETEs", s)
	}
	if n := len(e.do("GET", "/v1/rooms", k, nil).must(t, 200).Data()); n != 1 {
		t.Errorf("rooms: %d, want 1", n)
	}
}

// erFlipLastChar changes a secret's last character, breaking its checksum.
func erFlipLastChar(s string) string {
	last := s[len(s)-1]
	repl := byte('A')
	if last == 'A' {
		repl = 'B'
	}
	return s[:len(s)-1] + string(repl)
}

func TestErrorPermissionDeniedPerRoute(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	room := e.createRoom(nil)

	// Per scope: a key with every scope but it, and a key with only it.
	routeScopes := []string{
		"rooms:read", "rooms:write", "participants:read", "participants:write",
		"api_keys:read", "api_keys:write", "project:read", "audit_logs:read",
	}
	without := map[string]string{}
	only := map[string]string{}
	for _, s := range routeScopes {
		rest := slices.DeleteFunc(slices.Clone(erAllScopes), func(n string) bool { return n == s })
		_, without[s] = erMintKey(e, rest...)
		_, only[s] = erMintKey(e, s)
	}
	e.clock.Advance(time.Minute) // a fresh key-creation window

	type route struct {
		name, method, path string
		body               any
		scope              string
		okStatus           int
		fresh              func() (path string) // path for the success call, when it consumes something
	}
	newRoom := func() string { return e.createRoom(nil) }
	newPart := func() string { id, _ := e.createParticipant(room, nil); return id }
	part := newPart()
	victimKey := func() string { id, _ := erMintKey(e, "rooms:read"); return id }
	routes := []route{
		{"create room", "POST", "/v1/rooms", map[string]any{}, "rooms:write", 201, nil},
		{"list rooms", "GET", "/v1/rooms", nil, "rooms:read", 200, nil},
		{"get room", "GET", "/v1/rooms/" + room, nil, "rooms:read", 200, nil},
		{"get unknown room", "GET", "/v1/rooms/" + ids.New(ids.Room), nil, "rooms:read", 404, nil},
		{"delete room", "DELETE", "/v1/rooms/" + room, nil, "rooms:write", 200,
			func() string { return "/v1/rooms/" + newRoom() }},
		{"create participant", "POST", "/v1/rooms/" + room + "/participants", map[string]any{}, "participants:write", 201, nil},
		{"list participants", "GET", "/v1/rooms/" + room + "/participants", nil, "participants:read", 200, nil},
		{"get participant", "GET", "/v1/rooms/" + room + "/participants/" + part, nil, "participants:read", 200, nil},
		{"remove participant", "DELETE", "/v1/rooms/" + room + "/participants/" + part, nil, "participants:write", 200,
			func() string { return "/v1/rooms/" + room + "/participants/" + newPart() }},
		{"create key", "POST", "/v1/api-keys", map[string]any{"scopes": []string{"api_keys:write"}}, "api_keys:write", 201, nil},
		{"list keys", "GET", "/v1/api-keys", nil, "api_keys:read", 200, nil},
		{"revoke key", "DELETE", "/v1/api-keys/" + e.Boot.APIKeyID, nil, "api_keys:write", 200,
			func() string { return "/v1/api-keys/" + victimKey() }},
		{"project limits", "GET", "/v1/project/limits", nil, "project:read", 200, nil},
		{"audit logs", "GET", "/v1/audit-logs", nil, "audit_logs:read", 200, nil},
		// Scope is checked before the body is looked at.
		{"create room bad body", "POST", "/v1/rooms", "{not json", "rooms:write", 400, nil},
		{"create key bad scopes", "POST", "/v1/api-keys", map[string]any{"scopes": []string{}}, "api_keys:write", 400, nil},
		{"list rooms bad limit", "GET", "/v1/rooms?limit=0", nil, "rooms:read", 400, nil},
	}
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			r := e.do(rt.method, rt.path, without[rt.scope], rt.body)
			d := erRequireEnvelope(t, r, 403, "permission_denied")
			if got, _ := d["required_scope"].(string); got != rt.scope {
				t.Errorf("details.required_scope %q, want %q: %s", got, rt.scope, r.Raw)
			}
			path := rt.path
			if rt.fresh != nil {
				path = rt.fresh()
			}
			if r := e.do(rt.method, path, only[rt.scope], rt.body); r.Status != rt.okStatus {
				t.Errorf("with only %s: status %d, want %d: %s", rt.scope, r.Status, rt.okStatus, r.Raw)
			}
		})
	}
	// The 403s changed nothing: the room and participant are untouched and
	// the bootstrap key is still active.
	if s := e.do("GET", "/v1/rooms/"+room, k, nil).must(t, 200).Str("status"); s != "waiting" {
		t.Errorf("room status %q", s)
	}
	if s := e.do("GET", "/v1/rooms/"+room+"/participants/"+part, k, nil).must(t, 200).Str("status"); s != "created" {
		t.Errorf("participant status %q", s)
	}
	t.Run("system info needs only a valid key", func(t *testing.T) {
		for _, s := range routeScopes {
			if r := e.do("GET", "/v1/system/info", only[s], nil); r.Status != 200 {
				t.Errorf("key with only %s: %d %s", s, r.Status, r.Raw)
			}
		}
	})
}

// TestErrorNeverA500 throws mutated bodies, odd paths and odd queries at
// every route and requires a 4xx envelope (or a success) every time.
func TestErrorNeverA500(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	room := e.createRoom(nil)
	part, token := e.createParticipant(room, nil)
	valid := map[string]string{
		"/v1/rooms":                              `{"name":"a","max_participants":5,"expires_in":600,"region":"global","metadata":{"k":[1,2.5,{"x":null,"y":"é"}]}}`,
		"/v1/rooms/" + room + "/participants":    `{"external_id":"u1","name":"ann","role":"publisher","expires_in":600,"metadata":{"a":{"b":[true,false]}}}`,
		"/v1/api-keys":                           `{"name":"k","scopes":["rooms:read","rooms:write"]}`,
		"/v1/connect":                            `{"token":"` + token + `","sdk":{"name":"js","version":"1.0.0","platform":"web"}}`,
		"/v1/rooms/" + room + "/participants/px": `{}`,
	}
	values := []string{`null`, `0`, `-1`, `1e400`, `-0`, `""`, `"x"`, `[]`, `{}`, `[null]`, `{"":""}`, `true`, `9223372036854775808`, `"\ud800"`, `"\u0000"`}
	check := func(t *testing.T, r *resp, what string) {
		t.Helper()
		if r.Status >= 500 {
			t.Fatalf("%s: status %d: %s", what, r.Status, r.Raw)
		}
		if r.Status >= 400 {
			erRequireEnvelope(t, r, r.Status, r.ErrCode())
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 0
	for path, body := range valid {
		key := k
		if path == "/v1/connect" {
			key = ""
		}
		var bodies []string
		for i := 0; i < len(body); i++ { // every truncation
			bodies = append(bodies, body[:i])
		}
		for range 60 { // random byte flips and insertions
			b := []byte(body)
			pos := rng.IntN(len(b))
			switch rng.IntN(3) {
			case 0:
				b[pos] = byte(rng.IntN(256))
			case 1:
				const insert = "{}[]\":,\\\x00\xff"
				b = slices.Insert(b, pos, insert[rng.IntN(len(insert))])
			default:
				b = slices.Delete(b, pos, pos+1)
			}
			bodies = append(bodies, string(b))
		}
		for _, field := range []string{"name", "max_participants", "expires_in", "region", "metadata", "external_id", "role", "scopes", "token", "sdk"} {
			for _, v := range values {
				bodies = append(bodies, `{"`+field+`":`+v+`}`)
			}
		}
		for _, b := range bodies {
			check(t, e.do("POST", path, key, b), fmt.Sprintf("POST %s %q", path, b))
			n++
		}
		// Keep the api-key creation guard from turning everything into 429s.
		e.clock.Advance(time.Minute)
	}
	oddIDs := []string{"x", "%00", "room_", ids.New(ids.Room), ids.New(ids.Participant), ids.New(ids.APIKey),
		strings.ToUpper(room), room + "x", strings.Repeat("a", 300), "%F0%9F%98%80", "room_%20"}
	for _, id := range oddIDs {
		for _, p := range []struct{ method, path string }{
			{"GET", "/v1/rooms/" + id},
			{"DELETE", "/v1/rooms/" + id},
			{"GET", "/v1/rooms/" + id + "/participants"},
			{"POST", "/v1/rooms/" + id + "/participants"},
			{"GET", "/v1/rooms/" + room + "/participants/" + id},
			{"DELETE", "/v1/rooms/" + room + "/participants/" + id},
			{"GET", "/v1/rooms/" + id + "/participants/" + part},
			{"DELETE", "/v1/api-keys/" + id},
		} {
			r := e.do(p.method, p.path, k, nil)
			check(t, r, p.method+" "+p.path)
			if r.Status != 404 && r.Status != 400 {
				t.Errorf("%s %s: status %d, want a 404 or 400: %s", p.method, p.path, r.Status, r.Raw)
			}
			n++
		}
	}
	for _, q := range []string{"?limit=%00", "?limit=1&limit=2", "?limit=%FF", "?=", "?&&&", "?limit=9999999999999999999999", "?" + strings.Repeat("a=b&", 200)} {
		for _, p := range []string{"/v1/rooms", "/v1/rooms/" + room + "/participants", "/v1/api-keys", "/v1/audit-logs", "/v1/project/limits", "/v1/system/info"} {
			check(t, e.do("GET", p+q, k, nil), "GET "+p+q)
			n++
		}
	}
	// Oversized request lines and headers are refused in the envelope too.
	r := e.do("GET", "/v1/rooms/"+strings.Repeat("a", 9000), k, nil)
	if r.Status < 400 || r.Status >= 500 {
		t.Errorf("9000-byte path: status %d", r.Status)
	} else {
		erRequireEnvelope(t, r, r.Status, "invalid_request")
	}
	r = e.do("GET", "/v1/rooms", k, nil, "X-Big: "+strings.Repeat("b", 9000))
	if r.Status < 400 || r.Status >= 500 {
		t.Errorf("9000-byte header: status %d", r.Status)
	} else {
		erRequireEnvelope(t, r, r.Status, "invalid_request")
	}
	t.Logf("%d requests, no 5xx", n)
	// The seeded room and participant are still readable: nothing broke.
	e.do("GET", "/v1/rooms/"+room+"/participants/"+part, k, nil).must(t, 200)
}
