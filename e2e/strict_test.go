package e2e

// Input strictness over the real server: request bodies are checked as raw
// bytes before decoding (UTF-8, lone surrogate escapes, duplicate keys,
// finite numbers, nesting depth, exact field names at every struct level),
// request heads up to 16 KiB are read and larger ones refused with 431, the
// Authorization scheme is case-insensitive and Idempotency-Key may appear
// once.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// stNest returns depth nested arrays around v.
func stNest(depth int, v string) string {
	return strings.Repeat("[", depth) + v + strings.Repeat("]", depth)
}

// stObjects returns depth nested {"a":…} objects around v.
func stObjects(depth int, v string) string {
	return strings.Repeat(`{"a":`, depth) + v + strings.Repeat("}", depth)
}

func TestStrictBodies(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	room := e.createRoom(nil)
	rooms := "/v1/rooms"
	parts := "/v1/rooms/" + room + "/participants"
	keys := "/v1/api-keys"
	connect := "/v1/connect"
	// Within metadata's 4096 bytes, so only the depth refuses it.
	deep := `{"metadata":{"a":` + stNest(2000, "") + `}}`
	if len(deep) > 4096+len(`{"metadata":}`) {
		t.Fatalf("deep body too long: %d", len(deep))
	}
	cases := []struct {
		name, path, body string
		field            string
		msg              string // the message holds this
	}{
		// Invalid UTF-8: the decoder would turn it into U+FFFD (fields) or
		// keep it raw (metadata).
		{"room name bad utf8", rooms, "{\"name\":\"a\xffb\"}", "name", "UTF-8"},
		{"room metadata value bad utf8", rooms, "{\"metadata\":{\"k\":\"caf\xe9\"}}", "metadata", "UTF-8"},
		{"room metadata key bad utf8", rooms, "{\"metadata\":{\"\xc3\x28\":1}}", "metadata", "UTF-8"},
		{"participant external_id bad utf8", parts, "{\"external_id\":\"\xed\xa0\x80\"}", "external_id", "UTF-8"},
		{"participant metadata bad utf8", parts, "{\"metadata\":{\"k\":[\"\x80\"]}}", "metadata", "UTF-8"},
		{"connect sdk.name bad utf8", connect, "{\"token\":\"x\",\"sdk\":{\"name\":\"\xff\"}}", "sdk.name", "UTF-8"},
		{"key name bad utf8", keys, "{\"name\":\"\xfe\",\"scopes\":[\"rooms:read\"]}", "name", "UTF-8"},
		// Lone UTF-16 surrogate escapes.
		{"room name lone high surrogate", rooms, `{"name":"\ud800"}`, "name", "surrogate"},
		{"room name lone low surrogate", rooms, `{"name":"x\udc00y"}`, "name", "surrogate"},
		{"room metadata lone surrogate", rooms, `{"metadata":{"k":"\ud83d"}}`, "metadata", "surrogate"},
		{"room metadata key lone surrogate", rooms, `{"metadata":{"\udfff":1}}`, "metadata", "surrogate"},
		{"participant metadata lone surrogate", parts, `{"metadata":{"a":{"b":"\ude00\ud83d"}}}`, "metadata", "surrogate"},
		// Duplicate keys.
		{"room duplicate field", rooms, `{"name":"a","name":"b"}`, "name", "more than once"},
		{"room metadata duplicate key", rooms, `{"metadata":{"a":1,"b":2,"a":3}}`, "metadata", `"a"`},
		{"room metadata nested duplicate key", rooms, `{"metadata":{"x":[{"y":1,"y":2}]}}`, "metadata", `"y"`},
		{"participant metadata duplicate key", parts, `{"metadata":{"k":1,"k":1}}`, "metadata", `"k"`},
		{"participant duplicate role", parts, `{"role":"publisher","role":"subscriber"}`, "role", "more than once"},
		{"connect duplicate token", connect, `{"token":"x","token":"y"}`, "token", "more than once"},
		{"connect duplicate sdk.version", connect, `{"token":"x","sdk":{"version":"1","version":"2"}}`, "sdk.version", "more than once"},
		// Numbers that are not finite float64s.
		{"room metadata 1e400", rooms, `{"metadata":{"n":1e400}}`, "metadata", "finite"},
		{"room metadata -1e400", rooms, `{"metadata":{"n":[-1e400]}}`, "metadata", "finite"},
		{"room metadata 400 digits", rooms, `{"metadata":{"n":1` + strings.Repeat("0", 400) + `}}`, "metadata", "finite"},
		{"participant metadata 1.8e308", parts, `{"metadata":{"n":1.8e308}}`, "metadata", "finite"},
		// Nesting deeper than strictjson.MaxDepth (16), counted from the body.
		{"room metadata depth 2002", rooms, deep, "metadata", "deeper than 16"},
		{"room metadata depth 17", rooms, `{"metadata":` + stObjects(16, "1") + `}`, "metadata", "deeper than 16"},
		{"participant metadata depth 17", parts, `{"metadata":{"a":` + stNest(15, "") + `}}`, "metadata", "deeper than 16"},
		// Field names match exactly, at every struct level.
		{"room NAME", rooms, `{"NAME":"x"}`, "NAME", `unknown field "NAME"`},
		{"room Name", rooms, `{"Name":"x"}`, "Name", "unknown field"},
		{"room Metadata", rooms, `{"Metadata":{}}`, "Metadata", "unknown field"},
		{"room max_Participants", rooms, `{"max_Participants":5}`, "max_Participants", "unknown field"},
		{"participant EXTERNAL_ID", parts, `{"EXTERNAL_ID":"u"}`, "EXTERNAL_ID", "unknown field"},
		{"participant Role", parts, `{"Role":"publisher"}`, "Role", "unknown field"},
		{"key Scopes", keys, `{"Scopes":["rooms:read"]}`, "Scopes", "unknown field"},
		{"key Name", keys, `{"Name":"k","scopes":["rooms:read"]}`, "Name", "unknown field"},
		{"connect Token", connect, `{"Token":"x"}`, "Token", "unknown field"},
		{"connect SDK", connect, `{"token":"x","SDK":{}}`, "SDK", "unknown field"},
		{"connect sdk.Name", connect, `{"token":"x","sdk":{"Name":"js"}}`, "sdk.Name", `unknown field "sdk.Name"`},
		{"connect sdk.extra", connect, `{"token":"x","sdk":{"extra":"y"}}`, "sdk.extra", `unknown field "sdk.extra"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := k
			if c.path == connect {
				key = ""
			}
			r := e.do("POST", c.path, key, c.body)
			d := erRequireEnvelope(t, r, 400, "invalid_request")
			erRequireField(t, d, c.field, r.Raw)
			if msg, _ := r.JSON["error"].(map[string]any)["message"].(string); !strings.Contains(msg, c.msg) {
				t.Errorf("message %q lacks %q", msg, c.msg)
			}
			if !utf8.Valid(r.Raw) || !json.Valid(r.Raw) {
				t.Errorf("error body is not valid UTF-8 JSON: %q", r.Raw)
			}
		})
	}
	// Nothing was created by any refused request.
	if n := len(e.do("GET", rooms, k, nil).must(t, 200).Data()); n != 1 {
		t.Errorf("rooms after refused creates: %d, want 1", n)
	}
	if n := len(e.do("GET", parts, k, nil).must(t, 200).Data()); n != 0 {
		t.Errorf("participants after refused creates: %d, want 0", n)
	}
	if n := len(e.do("GET", keys, k, nil).must(t, 200).Data()); n != 1 {
		t.Errorf("api keys after refused creates: %d, want 1", n)
	}
}

// What the strict check accepts is stored and echoed as JSON any client
// decodes, and reads back the same.
func TestStrictAcceptedMetadataRoundTrips(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	metadata := `{"emoji":"\ud83d\ude00 😀","accents":"é\u00e9","nul":"\u0000","big":123456789012345678901234567890,` +
		`"tiny":1e-400,"max":1.7976931348623157e308,"neg":-0.5e-3,"case":{"A":1,"a":2},"":"empty key",` +
		`"deep":` + stObjects(14, "true") + `}` // the body's object is level 1, metadata level 2: 16 in all
	r := e.do("POST", "/v1/rooms", k, `{"name":"caf\u00e9 \ud83d\ude00","metadata":`+metadata+`}`).must(t, 201)
	id := r.Str("id")
	for _, got := range []*resp{r, e.do("GET", "/v1/rooms/"+id, k, nil).must(t, 200)} {
		if !utf8.Valid(got.Raw) {
			t.Fatalf("response is not UTF-8: %q", got.Raw)
		}
		if got.Str("name") != "café 😀" {
			t.Errorf("name %q", got.Str("name"))
		}
		var strict struct {
			Metadata json.RawMessage `json:"metadata"`
		}
		dec := json.NewDecoder(bytes.NewReader(got.Raw))
		if err := dec.Decode(&strict); err != nil {
			t.Fatalf("response does not decode: %v: %s", err, got.Raw)
		}
		var want, have any
		if err := json.Unmarshal([]byte(metadata), &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(strict.Metadata, &have); err != nil {
			t.Fatalf("stored metadata does not decode: %v: %s", err, strict.Metadata)
		}
		wantJ, _ := json.Marshal(want)
		haveJ, _ := json.Marshal(have)
		if !bytes.Equal(wantJ, haveJ) {
			t.Errorf("metadata changed:\n got %s\nwant %s", haveJ, wantJ)
		}
	}
	// A participant's metadata and an exact-case connect body pass too.
	_, token := e.createParticipant(id, map[string]any{"name": "ann", "metadata": map[string]any{"k": []any{1, "x", nil}}})
	e.do("POST", "/v1/connect", "", `{"token":"`+token+`","sdk":{"name":"js","version":"1.0.0","platform":"web"}}`).must(t, 200)
}

func TestStrictRequestHeaders(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	get := func(t *testing.T, path string, headers map[string]string) *resp {
		t.Helper()
		req, err := http.NewRequest("GET", e.Base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range headers {
			req.Header.Set(name, v)
		}
		return erRawDo(t, e, req)
	}
	auth := "Bearer " + k
	t.Run("5000-byte Authorization is judged as a credential", func(t *testing.T) {
		r := get(t, "/v1/rooms", map[string]string{"Authorization": "Bearer sk_live_" + strings.Repeat("a", 5000)})
		erRequireEnvelope(t, r, 401, "authentication_failed")
	})
	t.Run("large headers within the limits are served", func(t *testing.T) {
		get(t, "/v1/rooms", map[string]string{"Authorization": auth, "X-Pad": strings.Repeat("p", 5000)}).must(t, 200)
		get(t, "/v1/rooms", map[string]string{"Authorization": auth, "X-Pad": strings.Repeat("p", 8000)}).must(t, 200)
		get(t, "/v1/rooms", map[string]string{"Authorization": auth,
			"X-Pad-1": strings.Repeat("p", 7000), "X-Pad-2": strings.Repeat("q", 7000)}).must(t, 200)
	})
	// A head over 16 KiB: 431 in the envelope, every time (not lost to a
	// connection reset), whether one header or several make it up.
	t.Run("head over 16 KiB", func(t *testing.T) {
		for range 5 {
			r := get(t, "/v1/rooms", map[string]string{"Authorization": auth, "X-Big": strings.Repeat("b", 20000)})
			d := erRequireEnvelope(t, r, 431, "invalid_request")
			if lb, _ := d["limit_bytes"].(float64); lb != 16384 {
				t.Errorf("details.limit_bytes %v, want 16384: %s", d["limit_bytes"], r.Raw)
			}
			r = get(t, "/v1/rooms", map[string]string{"Authorization": auth,
				"X-Pad-1": strings.Repeat("p", 6000), "X-Pad-2": strings.Repeat("q", 6000), "X-Pad-3": strings.Repeat("r", 6000)})
			erRequireEnvelope(t, r, 431, "invalid_request")
			r = get(t, "/v1/connect", map[string]string{"X-Big": strings.Repeat("b", 1<<20)}) // 1 MiB
			erRequireEnvelope(t, r, 431, "invalid_request")
		}
	})
	t.Run("one header line over 8 KiB", func(t *testing.T) {
		r := get(t, "/v1/rooms", map[string]string{"Authorization": auth, "X-Big": strings.Repeat("b", 9000)})
		d := erRequireEnvelope(t, r, 431, "invalid_request")
		if lb, _ := d["limit_bytes"].(float64); lb != 8192 {
			t.Errorf("details.limit_bytes %v, want 8192: %s", d["limit_bytes"], r.Raw)
		}
	})
	t.Run("request target over 8 KiB", func(t *testing.T) {
		r := get(t, "/v1/rooms/"+strings.Repeat("a", 9000), map[string]string{"Authorization": auth})
		erRequireEnvelope(t, r, 414, "invalid_request")
		// Up to the bound, routed as usual.
		r = get(t, "/v1/rooms/"+strings.Repeat("a", 8000), map[string]string{"Authorization": auth})
		erRequireEnvelope(t, r, 404, "room_not_found")
	})
	// The server still serves.
	e.do("GET", "/v1/rooms", k, nil).must(t, 200)
}

func TestStrictAuthorizationScheme(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	for _, scheme := range []string{"Bearer", "bearer", "BEARER", "bEaReR"} {
		t.Run(scheme, func(t *testing.T) {
			e.do("GET", "/v1/rooms", "", nil, "Authorization: "+scheme+" "+k).must(t, 200)
			e.do("POST", "/v1/rooms", "", `{}`, "Authorization: "+scheme+" "+k).must(t, 201)
		})
	}
	t.Run("other schemes", func(t *testing.T) {
		for _, bad := range []string{"Basic " + k, "Bearerx " + k, "bearer", "Bearer\t" + k, "Token " + k, k} {
			erRequireEnvelope(t, e.do("GET", "/v1/rooms", "", nil, "Authorization: "+bad), 401, "authentication_failed")
		}
	})
}

func TestStrictIdempotencyKeyOnce(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	room := e.createRoom(nil)
	post := func(t *testing.T, path, body string, idemKeys ...string) *resp {
		t.Helper()
		req, err := http.NewRequest("POST", e.Base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+k)
		req.Header.Set("Content-Type", "application/json")
		for _, v := range idemKeys {
			req.Header.Add("Idempotency-Key", v)
		}
		return erRawDo(t, e, req)
	}
	routes := []struct{ path, body string }{
		{"/v1/rooms", `{}`},
		{"/v1/rooms/" + room + "/participants", `{}`},
		{"/v1/api-keys", `{"scopes":["rooms:read"]}`},
	}
	for i, rt := range routes {
		t.Run(rt.path, func(t *testing.T) {
			one := fmt.Sprintf("one-%d", i)
			for _, keys := range [][]string{{one, "b"}, {one, one}, {"x", "y", one}} {
				d := erRequireEnvelope(t, post(t, rt.path, rt.body, keys...), 400, "invalid_request")
				erRequireField(t, d, "Idempotency-Key", nil)
			}
			// One key still works, and the refused requests stored nothing
			// under it.
			post(t, rt.path, rt.body, one).must(t, 201)
			if r := post(t, rt.path, rt.body, one).must(t, 201); r.Header.Get("Idempotent-Replayed") != "true" {
				t.Errorf("%s: retry with one key not replayed", rt.path)
			}
		})
	}
	if n := len(e.do("GET", "/v1/rooms", k, nil).must(t, 200).Data()); n != 2 {
		t.Errorf("rooms: %d, want 2", n)
	}
}

// stRaw writes a raw request on a new connection and reads one response.
// It returns the response, its body, and whether the server closed the
// connection after it (EOF within two seconds, not a read timeout).
func stRaw(t *testing.T, e *env, request string) (*http.Response, []byte, bool) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.Base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the response to %q: %v", request, err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err = br.ReadByte()
	return res, body, errors.Is(err, io.EOF)
}

// stRequireEnvelope checks a raw response's status and error envelope.
func stRequireEnvelope(t *testing.T, res *http.Response, body []byte, status int, code string) map[string]any {
	t.Helper()
	r := &resp{Status: res.StatusCode, Header: res.Header, Raw: body}
	if err := json.Unmarshal(body, &r.JSON); err != nil {
		t.Fatalf("status %d, body not JSON: %q", res.StatusCode, body)
	}
	return erRequireEnvelope(t, r, status, code)
}

// TestStrictRequestFraming: a request whose body framing is ambiguous
// (Content-Length and Transfer-Encoding together, the request smuggling
// shape) and a request line of an HTTP version other than 1.x are refused
// in the envelope, and the connection is closed after the answer.
func TestStrictRequestFraming(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	host := strings.TrimPrefix(e.Base, "http://")
	chunk := `{"name":"smuggled"}`
	chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(chunk), chunk)
	for _, order := range []string{"CL first", "TE first"} {
		t.Run("Content-Length and Transfer-Encoding, "+order, func(t *testing.T) {
			cl := fmt.Sprintf("Content-Length: %d\r\n", len(chunked))
			te := "Transfer-Encoding: chunked\r\n"
			framing := cl + te
			if order == "TE first" {
				framing = te + cl
			}
			res, body, closed := stRaw(t, e, "POST /v1/rooms HTTP/1.1\r\nHost: "+host+"\r\nAuthorization: Bearer "+k+
				"\r\nContent-Type: application/json\r\n"+framing+"\r\n"+chunked)
			d := stRequireEnvelope(t, res, body, 400, "invalid_request")
			if d["header"] != "Transfer-Encoding" {
				t.Errorf("details %v, want header Transfer-Encoding", d)
			}
			if !res.Close {
				t.Errorf("no Connection: close on the refusal: %v", res.Header)
			}
			if !closed {
				t.Error("the connection stayed open after refusing ambiguous framing")
			}
		})
	}
	t.Run("chunked alone is served", func(t *testing.T) {
		res, body, _ := stRaw(t, e, "POST /v1/rooms HTTP/1.1\r\nHost: "+host+"\r\nAuthorization: Bearer "+k+
			"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"+chunked)
		if res.StatusCode != 201 || !strings.Contains(string(body), `"name":"smuggled"`) {
			t.Fatalf("chunked create: %d %s", res.StatusCode, body)
		}
	})
	// Only the chunked create above made a room (with the bootstrap's none).
	if n := len(e.do("GET", "/v1/rooms", k, nil).must(t, 200).Data()); n != 1 {
		t.Errorf("rooms %d, want 1: a refused request was applied", n)
	}
	for _, proto := range []string{"HTTP/9.9", "HTTP/2.0", "HTTP/0.9", "HTTP/3.1"} {
		t.Run(proto, func(t *testing.T) {
			res, body, closed := stRaw(t, e, "GET /v1/rooms "+proto+"\r\nHost: "+host+"\r\nAuthorization: Bearer "+k+"\r\n\r\n")
			stRequireEnvelope(t, res, body, 505, "invalid_request")
			if !closed {
				t.Errorf("the connection stayed open after a %s request", proto)
			}
		})
	}
	for _, proto := range []string{"HTTP/1.0", "HTTP/1.1", "HTTP/1.2"} {
		t.Run(proto+" is served", func(t *testing.T) {
			res, body, _ := stRaw(t, e, "GET /v1/rooms "+proto+"\r\nHost: "+host+"\r\nAuthorization: Bearer "+k+"\r\nConnection: close\r\n\r\n")
			if res.StatusCode != 200 {
				t.Fatalf("%s: %d %s", proto, res.StatusCode, body)
			}
		})
	}
}

// TestStrictRepeatedQueryParameter: a query parameter sent twice is
// refused whichever value comes first, rather than read by one of them.
func TestStrictRepeatedQueryParameter(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	cases := []struct{ path, field string }{
		{"/v1/rooms?limit=1&limit=500", "limit"},
		{"/v1/rooms?limit=500&limit=1", "limit"},
		{"/v1/rooms?limit=5&limit=5", "limit"},
		{"/v1/api-keys?limit=2&x=1&limit=3", "limit"},
		{"/v1/usage/summary?from=2026-01-01&to=2026-01-02&from=2026-01-02", "from"},
		{"/v1/usage/daily?to=2026-01-02&from=2026-01-01&to=2026-01-03", "to"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			d := erRequireEnvelope(t, e.do("GET", c.path, k, nil), 400, "invalid_request")
			erRequireField(t, d, c.field, nil)
		})
	}
	e.do("GET", "/v1/rooms?limit=1&other=2", k, nil).must(t, 200)
	e.do("GET", "/v1/usage/daily?from=2026-01-01&to=2026-01-02", k, nil).must(t, 200)
}

// TestStrictUsageDatesAreTimestamps: period.to is the instant after the
// last day, so the last day whose end is still a four-digit-year RFC 3339
// timestamp is 9999-12-30; a later `to` is refused.
func TestStrictUsageDatesAreTimestamps(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	for _, route := range []string{"/v1/usage/summary", "/v1/usage/daily"} {
		t.Run(route, func(t *testing.T) {
			for _, q := range []string{"?from=9999-12-31&to=9999-12-31", "?from=9999-12-01&to=9999-12-31"} {
				d := erRequireEnvelope(t, e.do("GET", route+q, k, nil), 400, "invalid_request")
				erRequireField(t, d, "to", nil)
			}
			for _, q := range []string{"?from=9999-12-30&to=9999-12-30", "?from=0001-01-01&to=0001-01-01"} {
				r := e.do("GET", route+q, k, nil).must(t, 200)
				period, _ := r.JSON["period"].(map[string]any)
				for _, f := range []string{"from", "to"} {
					s, _ := period[f].(string)
					if _, err := time.Parse(time.RFC3339Nano, s); err != nil || len(s) != len("2006-01-02T15:04:05.000Z") {
						t.Errorf("%s%s: period.%s %q is not an RFC 3339 timestamp: %v", route, q, f, s, err)
					}
				}
			}
		})
	}
}
