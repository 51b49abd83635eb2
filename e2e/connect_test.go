package e2e

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"
)

const testMediaURL = "wss://media.example.test/v1/media"

// connectWith sends a connect with an arbitrary body.
func (e *env) connectWith(body any) *resp {
	e.t.Helper()
	return e.do("POST", "/v1/connect", "", body)
}

// connectResults reads rtcd_connect_results_total by code.
func (e *env) connectResults() map[string]float64 {
	e.t.Helper()
	res, err := e.client.Get(e.Metrics + "/metrics")
	if err != nil {
		e.t.Fatalf("metrics: %v", err)
	}
	defer res.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	const prefix = `rtcd_connect_results_total{code="`
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		code, value, ok := strings.Cut(rest, `"} `)
		if !ok {
			e.t.Fatalf("metrics line %q", line)
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			e.t.Fatalf("metrics line %q: %v", line, err)
		}
		out[code] = v
	}
	if err := sc.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func TestConnectSession(t *testing.T) {
	e := start(t, "--media-url="+testMediaURL, "--media-token-ttl-seconds=30")
	room := e.createRoom(nil)
	pubID, pub := e.createParticipant(room, map[string]any{"role": "publisher"})
	subID, sub := e.createParticipant(room, map[string]any{"role": "subscriber"})
	defID, def := e.createParticipant(room, nil)

	check := func(tok, pid string, publish bool) *resp {
		t.Helper()
		r := e.connect(tok).must(t, 200)
		if !strings.HasPrefix(r.Str("session_id"), "cs_") || len(r.Str("session_id")) <= 3 {
			t.Fatalf("session_id: %s", r.Raw)
		}
		if r.Str("endpoint") != testMediaURL {
			t.Fatalf("endpoint %q, want %q", r.Str("endpoint"), testMediaURL)
		}
		if r.Str("media_token") == "" || r.Str("media_token") == tok {
			t.Fatalf("media_token: %s", r.Raw)
		}
		if !ts(t, r.Str("expires_at")).Equal(e.clock.Now().Add(30 * time.Second)) {
			t.Fatalf("expires_at %s, want now + 30s", r.Str("expires_at"))
		}
		if rm, _ := r.JSON["room"].(map[string]any); rm["id"] != room {
			t.Fatalf("room: %s", r.Raw)
		}
		if p, _ := r.JSON["participant"].(map[string]any); p["id"] != pid {
			t.Fatalf("participant: %s", r.Raw)
		}
		f, _ := r.JSON["features"].(map[string]any)
		for _, k := range []string{"audio", "video", "screen_share"} {
			if v, ok := f[k].(bool); !ok || v != publish {
				t.Fatalf("features.%s = %v, want %v: %s", k, f[k], publish, r.Raw)
			}
		}
		return r
	}
	a := check(pub, pubID, true)
	check(sub, subID, false)
	check(def, defID, true)
	// Every connect is a new session.
	e.clock.Advance(time.Second)
	if b := check(pub, pubID, true); b.Str("session_id") == a.Str("session_id") || b.Str("media_token") == a.Str("media_token") {
		t.Fatal("a second connect reused the session")
	}
	// An Authorization header is ignored; the token decides.
	r := e.do("POST", "/v1/connect", "sk_live_nonsense", map[string]any{"token": sub})
	r.must(t, 200)
	// sdk is optional.
	e.connectWith(map[string]any{"token": sub}).must(t, 200)
}

func TestConnectTamperedTokens(t *testing.T) {
	e := start(t)
	room := e.createRoom(nil)
	_, tok := e.createParticipant(room, nil)
	e.connect(tok).must(t, 200)

	payload, sig, ok := strings.Cut(strings.TrimPrefix(tok, "rtc_pt_"), ".")
	if !ok || !strings.HasPrefix(tok, "rtc_pt_") {
		t.Fatalf("token %q is not rtc_pt_<payload>.<mac>", tok)
	}
	flip := func(s string, i int) string {
		c := byte('A')
		if s[i] == 'A' {
			c = 'B'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	other := start(t) // another server: another master key
	_, foreign := other.createParticipant(other.createRoom(nil), nil)
	media := e.connect(tok).must(t, 200).Str("media_token")

	bad := map[string]string{
		"payload char flipped":   "rtc_pt_" + flip(payload, 3) + "." + sig,
		"payload last char":      "rtc_pt_" + flip(payload, len(payload)-2) + "." + sig,
		"signature char flipped": "rtc_pt_" + payload + "." + flip(sig, len(sig)/2),
		"signature first char":   "rtc_pt_" + payload + "." + flip(sig, 0),
		"truncated by one":       tok[:len(tok)-1],
		"truncated to half":      tok[:len(tok)/2],
		"no signature":           "rtc_pt_" + payload,
		"empty signature":        "rtc_pt_" + payload + ".",
		"extra char":             tok + "A",
		"two dots":               tok + ".x",
		"wrong prefix":           "rtc_xx_" + payload + "." + sig,
		"media prefix":           "rtc_mt_" + payload + "." + sig,
		"no prefix":              payload + "." + sig,
		"upper-case prefix":      "RTC_PT_" + payload + "." + sig,
		"empty":                  "",
		"space padded":           " " + tok,
		"media token":            media,
		"api key":                e.Boot.APIKey,
		"other server's token":   foreign,
		"very long":              tok + strings.Repeat("A", 4000),
	}
	for what, b := range bad {
		r := e.connect(b)
		if r.Status != 401 || r.ErrCode() != "participant_token_invalid" {
			t.Errorf("%s: got %d %s, want 401 participant_token_invalid", what, r.Status, r.Raw)
		}
	}
	// The real token still works.
	e.connect(tok).must(t, 200)
}

func TestConnectExpiredToken(t *testing.T) {
	e := start(t)
	room := e.createRoom(nil)
	pid, tok := e.createParticipant(room, map[string]any{"expires_in": 60})
	_, later := e.createParticipant(room, map[string]any{"expires_in": 120})
	exp := ts(t, e.getParticipant(room, pid).Str("expires_at"))
	e.clock.Set(exp.Add(-time.Second))
	e.connect(tok).must(t, 200)
	e.clock.Set(exp) // at expires_at the token is expired
	e.connect(tok).mustErr(t, 401, "participant_token_expired")
	e.clock.Advance(time.Hour)
	e.connect(tok).mustErr(t, 401, "participant_token_expired")
	e.connect(later).mustErr(t, 401, "participant_token_expired")
	// Tampering with an expired token is still invalid, never "expired".
	payload, sig, _ := strings.Cut(tok, ".")
	e.connect(payload+"."+strings.Repeat("A", len(sig))).mustErr(t, 401, "participant_token_invalid")
}

func TestConnectRemovedParticipant(t *testing.T) {
	e := start(t)
	room := e.createRoom(nil)
	connected, ctok := e.createParticipant(room, nil)
	fresh, ftok := e.createParticipant(room, nil)
	e.connect(ctok).must(t, 200)
	for _, id := range []string{connected, fresh} {
		e.do("DELETE", "/v1/rooms/"+room+"/participants/"+id, e.Boot.APIKey, nil).must(t, 200)
	}
	for _, tok := range []string{ctok, ftok} {
		r := e.connect(tok).mustErr(t, 404, "participant_not_found")
		if r.details()["participant_status"] != "removed" {
			t.Fatalf("details: %s", r.Raw)
		}
	}
	if s := e.getParticipant(room, connected).Str("status"); s != "removed" {
		t.Fatalf("a refused connect changed the status to %s", s)
	}
}

func TestConnectRequestValidation(t *testing.T) {
	e := start(t)
	room := e.createRoom(nil)
	_, tok := e.createParticipant(room, nil)
	sdk := func(name, version, platform string) map[string]any {
		return map[string]any{"token": tok, "sdk": map[string]string{"name": name, "version": version, "platform": platform}}
	}
	long := strings.Repeat("x", 65)
	max := strings.Repeat("x", 64)

	for what, body := range map[string]any{
		"missing token":    map[string]any{"sdk": map[string]string{"name": "web"}},
		"null token":       `{"token":null}`,
		"empty object":     `{}`,
		"no body":          nil,
		"array body":       `[]`,
		"not JSON":         `token=abc`,
		"number token":     map[string]any{"token": 42},
		"unknown field":    map[string]any{"token": tok, "room": "x"},
		"unknown sdk key":  map[string]any{"token": tok, "sdk": map[string]string{"os": "linux"}},
		"sdk not object":   map[string]any{"token": tok, "sdk": "web"},
		"long sdk name":    sdk(long, "1", "web"),
		"long sdk version": sdk("web", long, "web"),
		"long platform":    sdk("web", "1", long),
		"control char":     sdk("we\nb", "1", "web"),
		"trailing data":    `{"token":"` + tok + `"} {}`,
	} {
		r := e.connectWith(body)
		if r.Status != 400 || r.ErrCode() != "invalid_request" {
			t.Errorf("%s: got %d %s, want 400 invalid_request", what, r.Status, r.Raw)
		}
	}
	if r := e.connectWith(map[string]any{}); r.details()["field"] != "token" {
		t.Fatalf("missing token details: %s", r.Raw)
	}
	if s := e.getRoom(room).Str("status"); s != "waiting" {
		t.Fatalf("refused connects changed the room: %s", s)
	}
	e.connectWith(sdk(max, max, max)).must(t, 200)
	e.connectWith(sdk("", "", "")).must(t, 200)
	// A multi-byte name is measured in bytes: 22 three-byte runes are 66 bytes.
	e.connectWith(sdk(strings.Repeat("€", 22), "1", "web")).mustErr(t, 400, "invalid_request")
	e.connectWith(sdk(strings.Repeat("€", 21), "1", "web")).must(t, 200)
}

// Every connect outcome is counted by code on the metrics listener.
func TestConnectResultsMetric(t *testing.T) {
	e := start(t, "--connect-per-ip-per-minute=1000", "--default-connect-requests-per-minute=1000")
	before := e.connectResults()
	room := e.createRoom(map[string]any{"max_participants": 1})
	_, a := e.createParticipant(room, nil)
	_, b := e.createParticipant(room, nil)
	gone, g := e.createParticipant(room, nil)
	e.do("DELETE", "/v1/rooms/"+room+"/participants/"+gone, e.Boot.APIKey, nil).must(t, 200)
	_, short := e.createParticipant(room, map[string]any{"expires_in": 60})

	e.connect(a).must(t, 200)
	e.connect(a).must(t, 200)
	e.connect(b).mustErr(t, 409, "quota_exceeded")
	e.connect(g).mustErr(t, 404, "participant_not_found")
	e.connect("rtc_pt_nope").mustErr(t, 401, "participant_token_invalid")
	e.connect("").mustErr(t, 401, "participant_token_invalid")
	e.connectWith(`{}`).mustErr(t, 400, "invalid_request")
	e.connectWith(`not json`).mustErr(t, 400, "invalid_request")
	ended := e.createRoom(nil)
	_, et := e.createParticipant(ended, nil)
	e.do("DELETE", "/v1/rooms/"+ended, e.Boot.APIKey, nil).must(t, 200)
	e.waitRoomEnded(ended)
	e.connect(et).mustErr(t, 410, "room_ended")
	e.clock.Advance(61 * time.Second)
	e.connect(short).mustErr(t, 401, "participant_token_expired")

	want := map[string]float64{
		"ok": 2, "quota_exceeded": 1, "participant_not_found": 1, "participant_token_invalid": 2,
		"invalid_request": 2, "room_ended": 1, "participant_token_expired": 1,
	}
	got := e.connectResults()
	for code, n := range want {
		if d := got[code] - before[code]; d != n {
			t.Errorf("rtcd_connect_results_total{code=%q} rose by %v, want %v", code, d, n)
		}
	}
	for code, v := range got {
		if _, ok := want[code]; !ok && v != before[code] {
			t.Errorf("unexpected count for code %q: %v", code, v-before[code])
		}
	}

	// Rate-limited connects are counted too.
	e2 := start(t, "--connect-per-ip-per-minute=1")
	r2 := e2.createRoom(nil)
	_, t2 := e2.createParticipant(r2, nil)
	e2.connect(t2).must(t, 200)
	e2.connect(t2).mustErr(t, 429, "rate_limited")
	if got := e2.connectResults(); got["rate_limited"] != 1 || got["ok"] != 1 {
		t.Fatalf("counts %v, want ok 1 and rate_limited 1", got)
	}
	if !bytes.Contains(mustGet(t, e2, "/metrics"), []byte("# TYPE rtcd_connect_results_total counter")) {
		t.Fatal("rtcd_connect_results_total is not a counter")
	}
}

func mustGet(t *testing.T, e *env, path string) []byte {
	t.Helper()
	res, err := e.client.Get(e.Metrics + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(res.Body); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
