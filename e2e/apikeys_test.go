package e2e

// API keys (spec 5.2 and section 8): creation, scope rules, the 50 active
// keys limit, the 20 per minute creation guard, revocation and listing.

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"rtcd/actors"
	"rtcd/auth"
	"rtcd/ids"
)

// akScopes returns the scopes array of an API key object.
func akScopes(t *testing.T, obj map[string]any) []string {
	t.Helper()
	arr, ok := obj["scopes"].([]any)
	if !ok {
		t.Fatalf("scopes is not an array: %v", obj)
	}
	out := make([]string, 0, len(arr))
	for _, v := range arr {
		s, _ := v.(string)
		out = append(out, s)
	}
	return out
}

func akSameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		if m[s] == 0 {
			return false
		}
		m[s]--
	}
	return true
}

func TestAPIKeyCreateResponse(t *testing.T) {
	e := start(t)
	e.clock.Advance(1500 * time.Millisecond)
	r := e.do("POST", "/v1/api-keys", e.Boot.APIKey, map[string]any{"name": "ci deploy", "scopes": []string{"rooms:write", "rooms:read"}}).must(t, 201)
	id, secret, last4 := r.Str("id"), r.Str("secret"), r.Str("last4")
	if !ids.Valid(id, ids.APIKey) {
		t.Errorf("id %q is not a key_ id", id)
	}
	if !strings.HasPrefix(secret, "sk_live_") || !auth.CheckAPIKeyFormat(secret) {
		t.Errorf("secret %q is not a well-formed sk_live_ key", secret)
	}
	if len(secret) < 4 || last4 != secret[len(secret)-4:] {
		t.Errorf("last4 %q, secret ends %q", last4, secret[max(0, len(secret)-4):])
	}
	if got, want := r.Str("created_at"), actors.Timestamp(testEpoch.Add(1500*time.Millisecond)); got != want {
		t.Errorf("created_at %q, want %q", got, want)
	}
	if _, err := time.Parse(time.RFC3339Nano, r.Str("created_at")); err != nil {
		t.Errorf("created_at is not ISO 8601: %v", err)
	}
	if !akSameSet(akScopes(t, r.JSON), []string{"rooms:read", "rooms:write"}) {
		t.Errorf("scopes %v", r.JSON["scopes"])
	}
	if r.Str("name") != "ci deploy" {
		t.Errorf("name %q", r.Str("name"))
	}

	// The secret authenticates with exactly its scopes.
	e.do("GET", "/v1/rooms", secret, nil).must(t, 200)
	e.do("POST", "/v1/rooms", secret, map[string]any{}).must(t, 201)
	d := erRequireEnvelope(t, e.do("GET", "/v1/api-keys", secret, nil), 403, "permission_denied")
	if d["required_scope"] != "api_keys:read" {
		t.Errorf("required_scope %v", d["required_scope"])
	}

	// A second key gets a different id and secret.
	r2 := e.createKey(e.Boot.APIKey, "rooms:read").must(t, 201)
	if r2.Str("id") == id || r2.Str("secret") == secret {
		t.Error("second key repeats the first's id or secret")
	}

	// The secret is never shown again: not in the list, not in audit logs.
	list := e.do("GET", "/v1/api-keys", e.Boot.APIKey, nil).must(t, 200)
	audit := e.do("GET", "/v1/audit-logs", e.Boot.APIKey, nil).must(t, 200)
	for _, raw := range [][]byte{list.Raw, audit.Raw} {
		for _, s := range []string{secret, r2.Str("secret"), e.Boot.APIKey} {
			if strings.Contains(string(raw), s) {
				t.Errorf("a secret appears in %s", raw)
			}
		}
	}
	var found bool
	for _, item := range list.Data() {
		if _, ok := item["secret"]; ok {
			t.Errorf("list item has a secret field: %v", item)
		}
		if item["id"] == id {
			found = true
			if item["last4"] != last4 || item["status"] != "active" || item["created_at"] != r.Str("created_at") || item["name"] != "ci deploy" {
				t.Errorf("list item %v does not match the created key", item)
			}
			if !akSameSet(akScopes(t, item), []string{"rooms:read", "rooms:write"}) {
				t.Errorf("list item scopes %v", item["scopes"])
			}
		}
	}
	if !found {
		t.Errorf("created key %s missing from the list", id)
	}

	// A name is optional.
	e.do("POST", "/v1/api-keys", e.Boot.APIKey, map[string]any{"scopes": []string{"usage:read"}}).must(t, 201)
}

func TestAPIKeyScopeValidation(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	fourteen := append(append([]string{}, erAllScopes...), "rooms:read")
	cases := []struct {
		name  string
		body  any
		field string
	}{
		{"scopes absent", map[string]any{"name": "x"}, "scopes"},
		{"scopes null", map[string]any{"scopes": nil}, "scopes"},
		{"scopes empty", map[string]any{"scopes": []string{}}, "scopes"},
		{"unknown scope", map[string]any{"scopes": []string{"rooms:admin"}}, "scopes"},
		{"unknown among valid", map[string]any{"scopes": []string{"rooms:read", "nope"}}, "scopes"},
		{"wrong case", map[string]any{"scopes": []string{"Rooms:Read"}}, "scopes"},
		{"padded", map[string]any{"scopes": []string{" rooms:read"}}, "scopes"},
		{"empty string", map[string]any{"scopes": []string{""}}, "scopes"},
		{"wildcard", map[string]any{"scopes": []string{"*"}}, "scopes"},
		{"duplicate", map[string]any{"scopes": []string{"rooms:read", "rooms:read"}}, "scopes"},
		{"duplicate among others", map[string]any{"scopes": []string{"rooms:read", "rooms:write", "rooms:read"}}, "scopes"},
		{"fourteen (oversized)", map[string]any{"scopes": fourteen}, "scopes"},
		{"hundred (oversized)", map[string]any{"scopes": strings.Split(strings.Repeat("rooms:read,", 99)+"rooms:read", ",")}, "scopes"},
		{"unknown and lacking", map[string]any{"scopes": []string{"rooms:write", "bogus"}}, "scopes"},
		{"name too long", map[string]any{"name": strings.Repeat("n", 129), "scopes": []string{"rooms:read"}}, "name"},
		{"name control char", map[string]any{"name": "a\nb", "scopes": []string{"rooms:read"}}, "name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", "/v1/api-keys", k, c.body)
			erRequireField(t, erRequireEnvelope(t, r, 400, "invalid_request"), c.field, r.Raw)
		})
	}
	if n := len(e.do("GET", "/v1/api-keys", k, nil).must(t, 200).Data()); n != 1 {
		t.Errorf("keys after rejected creations: %d, want 1", n)
	}

	t.Run("all thirteen", func(t *testing.T) {
		r := e.createKey(k, erAllScopes...).must(t, 201)
		if !akSameSet(akScopes(t, r.JSON), erAllScopes) {
			t.Errorf("scopes %v", r.JSON["scopes"])
		}
	})
	t.Run("name of 128 bytes", func(t *testing.T) {
		e.do("POST", "/v1/api-keys", k, map[string]any{"name": strings.Repeat("n", 128), "scopes": []string{"rooms:read"}}).must(t, 201)
	})
}

func TestAPIKeyCannotGrantScopesItLacks(t *testing.T) {
	e := start(t)
	_, limited := erMintKey(e, "api_keys:write", "api_keys:read", "rooms:read")
	for _, scopes := range [][]string{
		{"rooms:write"},
		{"rooms:read", "rooms:write"},
		{"audit_logs:read"},
		{"billing:write"},
		erAllScopes,
	} {
		t.Run(strings.Join(scopes, ","), func(t *testing.T) {
			erRequireEnvelope(t, e.createKey(limited, scopes...), 403, "permission_denied")
		})
	}
	// Subsets of its own scopes are fine, including api_keys:write itself.
	for _, scopes := range [][]string{{"rooms:read"}, {"api_keys:write"}, {"api_keys:write", "api_keys:read", "rooms:read"}} {
		sub := e.createKey(limited, scopes...).must(t, 201)
		if !akSameSet(akScopes(t, sub.JSON), scopes) {
			t.Errorf("scopes %v, want %v", sub.JSON["scopes"], scopes)
		}
	}
	// Neither the 403s nor the 400s created anything.
	if n := len(e.do("GET", "/v1/api-keys", limited, nil).must(t, 200).Data()); n != 5 {
		t.Errorf("keys: %d, want 5 (bootstrap, limited and three subsets)", n)
	}
}

func TestAPIKeyActiveLimit(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	// The bootstrap key is active; a second key that can create keys and 48
	// more reach the limit of 50.
	_, second := erMintKey(e, "api_keys:write", "rooms:read")
	var created []string
	for i := range 48 {
		if i%19 == 18 {
			e.clock.Advance(time.Minute) // stay under the creation guard
		}
		id, _ := erMintKey(e, "rooms:read")
		created = append(created, id)
	}
	e.clock.Advance(time.Minute)
	for _, key := range []string{k, second} {
		d := erRequireEnvelope(t, e.createKey(key, "rooms:read"), 409, "api_key_limit_reached")
		if lim, ok := d["limit"].(float64); ok && lim != 50 {
			t.Errorf("details.limit %v, want 50", lim)
		}
	}

	// Revoked keys do not count; revoking twice frees only one slot.
	e.do("DELETE", "/v1/api-keys/"+created[0], k, nil).must(t, 200)
	e.do("DELETE", "/v1/api-keys/"+created[0], second, nil).must(t, 200)
	e.createKey(second, "rooms:read").must(t, 201)
	erRequireEnvelope(t, e.createKey(k, "rooms:read"), 409, "api_key_limit_reached")
	erRequireEnvelope(t, e.createKey(second, "rooms:read"), 409, "api_key_limit_reached")

	list := e.do("GET", "/v1/api-keys?limit=100", k, nil).must(t, 200)
	active, revoked := 0, 0
	for _, item := range list.Data() {
		switch item["status"] {
		case "active":
			active++
		case "revoked":
			revoked++
		}
	}
	if active != 50 || revoked != 1 {
		t.Errorf("list: %d active, %d revoked; want 50 and 1", active, revoked)
	}

	// The count survives a restart.
	e.Stop()
	e2 := startIn(t, e.dataDir, e.clock)
	e2.clock.Advance(time.Minute)
	erRequireEnvelope(t, e2.createKey(k, "rooms:read"), 409, "api_key_limit_reached")
	e2.do("DELETE", "/v1/api-keys/"+created[1], k, nil).must(t, 200)
	e2.createKey(k, "rooms:read").must(t, 201)
	erRequireEnvelope(t, e2.createKey(k, "rooms:read"), 409, "api_key_limit_reached")
}

func TestAPIKeyCreationRateLimit(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	// The first creation makes a second key that can create keys; both
	// draw on the same per-project budget of 20 per minute.
	_, second := erMintKey(e, "api_keys:write", "rooms:read")
	for i := 1; i < 20; i++ {
		e.clock.Advance(time.Second)
		e.createKey(k, "rooms:read").must(t, 201)
	}
	// 19 seconds into the window.
	for _, key := range []string{second, k} {
		r := e.createKey(key, "rooms:read")
		erRequireEnvelope(t, r, 429, "rate_limited")
		ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
		if err != nil || ra != 41 {
			t.Errorf("Retry-After %q, want 41 (seconds to the next window)", r.Header.Get("Retry-After"))
		}
		if got := r.Header.Get("X-RateLimit-Limit"); got != "20" {
			t.Errorf("X-RateLimit-Limit %q, want 20", got)
		}
		if got := r.Header.Get("X-RateLimit-Remaining"); got != "0" {
			t.Errorf("X-RateLimit-Remaining %q, want 0", got)
		}
	}
	// Still limited later in the same window, with a shorter wait.
	e.clock.Advance(30 * time.Second)
	r := e.createKey(k, "rooms:read")
	erRequireEnvelope(t, r, 429, "rate_limited")
	if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < 1 || ra > 11 {
		t.Errorf("Retry-After %q, want 1..11", r.Header.Get("Retry-After"))
	}
	// Rate-limited creations created nothing.
	if n := len(e.do("GET", "/v1/api-keys", k, nil).must(t, 200).Data()); n != 21 {
		t.Errorf("keys: %d, want 21", n)
	}
	// A new window opens a new budget of exactly 20.
	e.clock.Advance(time.Minute)
	for range 20 {
		e.createKey(second, "rooms:read").must(t, 201)
	}
	erRequireEnvelope(t, e.createKey(k, "rooms:read"), 429, "rate_limited")
	// Room creation is not throttled by the key creation guard.
	e.do("POST", "/v1/rooms", k, map[string]any{}).must(t, 201)
}

func TestAPIKeyRevoke(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	victimID, victim := erMintKey(e, "rooms:read", "rooms:write")
	adminID, admin := erMintKey(e, "api_keys:write", "api_keys:read")
	e.do("GET", "/v1/rooms", victim, nil).must(t, 200)

	e.clock.Advance(5 * time.Second)
	r := e.do("DELETE", "/v1/api-keys/"+victimID, admin, nil).must(t, 200)
	if r.Str("id") != victimID || r.Str("status") != "revoked" || r.Str("object") != "api_key" {
		t.Errorf("revoke response %s", r.Raw)
	}
	revokedAt := r.Str("revoked_at")
	if revokedAt != actors.Timestamp(testEpoch.Add(5*time.Second)) {
		t.Errorf("revoked_at %q", revokedAt)
	}
	if _, ok := r.JSON["secret"]; ok || strings.Contains(string(r.Raw), victim) {
		t.Errorf("revoke response shows the secret: %s", r.Raw)
	}
	if !akSameSet(akScopes(t, r.JSON), []string{"rooms:read", "rooms:write"}) || r.Str("last4") != victim[len(victim)-4:] {
		t.Errorf("revoke response does not describe the key: %s", r.Raw)
	}

	// The revoked key is refused everywhere, at once.
	for _, p := range []struct{ method, path string }{
		{"GET", "/v1/rooms"}, {"POST", "/v1/rooms"}, {"GET", "/v1/system/info"}, {"DELETE", "/v1/api-keys/" + victimID},
	} {
		erRequireEnvelope(t, e.do(p.method, p.path, victim, map[string]any{}), 401, "authentication_failed")
	}

	// Idempotent: the same key object, the original revoked_at.
	e.clock.Advance(5 * time.Second)
	for _, key := range []string{admin, k} {
		r2 := e.do("DELETE", "/v1/api-keys/"+victimID, key, nil).must(t, 200)
		if r2.Str("status") != "revoked" || r2.Str("revoked_at") != revokedAt {
			t.Errorf("repeat revoke %s", r2.Raw)
		}
	}

	// Unknown and malformed ids.
	for _, id := range []string{ids.New(ids.APIKey), "key_x", "nope", ids.New(ids.Room), strings.ToUpper(victimID)} {
		erRequireEnvelope(t, e.do("DELETE", "/v1/api-keys/"+id, k, nil), 404, "api_key_not_found")
	}

	// A key cannot revoke itself.
	for _, c := range []struct{ id, secret string }{{adminID, admin}, {e.Boot.APIKeyID, k}} {
		erRequireEnvelope(t, e.do("DELETE", "/v1/api-keys/"+c.id, c.secret, nil), 409, "conflict")
		e.do("GET", "/v1/api-keys", c.secret, nil).must(t, 200) // still works
	}

	// The list shows the revoked key with its status; the others are active.
	list := e.do("GET", "/v1/api-keys", k, nil).must(t, 200)
	statuses := map[string]string{}
	for _, item := range list.Data() {
		statuses[item["id"].(string)], _ = item["status"].(string)
		if item["id"] == victimID && item["revoked_at"] != revokedAt {
			t.Errorf("listed revoked_at %v, want %s", item["revoked_at"], revokedAt)
		}
	}
	want := map[string]string{victimID: "revoked", adminID: "active", e.Boot.APIKeyID: "active"}
	for id, s := range want {
		if statuses[id] != s {
			t.Errorf("key %s listed as %q, want %q", id, statuses[id], s)
		}
	}

	// Another key can revoke the bootstrap key; the bootstrap key then fails.
	e.do("DELETE", "/v1/api-keys/"+e.Boot.APIKeyID, admin, nil).must(t, 200)
	erRequireEnvelope(t, e.do("GET", "/v1/rooms", k, nil), 401, "authentication_failed")

	// Revocations survive a restart.
	e.Stop()
	e2 := startIn(t, e.dataDir, e.clock)
	for _, s := range []string{victim, k} {
		erRequireEnvelope(t, e2.do("GET", "/v1/system/info", s, nil), 401, "authentication_failed")
	}
	e2.do("GET", "/v1/api-keys", admin, nil).must(t, 200)
}

func TestAPIKeyListShape(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	var order []string // creation order
	order = append(order, e.Boot.APIKeyID)
	for range 3 {
		e.clock.Advance(time.Millisecond)
		id, _ := erMintKey(e, "rooms:read")
		order = append(order, id)
	}
	e.clock.Advance(time.Millisecond)
	e.do("DELETE", "/v1/api-keys/"+order[2], k, nil).must(t, 200)

	r := e.do("GET", "/v1/api-keys", k, nil).must(t, 200)
	if r.Str("object") != "list" {
		t.Errorf("object %q", r.Str("object"))
	}
	page, ok := r.JSON["page"].(map[string]any)
	if !ok || page["has_more"] != false {
		t.Fatalf("page %v", r.JSON["page"])
	}
	if _, ok := page["next_cursor"]; ok {
		t.Errorf("next_cursor present on the API key list: %s", r.Raw)
	}
	data := r.Data()
	if len(data) != 4 {
		t.Fatalf("%d keys, want 4", len(data))
	}
	for i, item := range data {
		if want := order[len(order)-1-i]; item["id"] != want {
			t.Errorf("item %d is %v, want %s (newest first)", i, item["id"], want)
		}
		if item["object"] != "api_key" {
			t.Errorf("item object %v", item["object"])
		}
		for _, f := range []string{"id", "last4", "created_at", "status", "scopes"} {
			if _, ok := item[f]; !ok {
				t.Errorf("item lacks %s: %v", f, item)
			}
		}
		if _, ok := item["secret"]; ok {
			t.Errorf("item has a secret: %v", item)
		}
	}
	if data[1]["status"] != "revoked" {
		t.Errorf("revoked key listed as %v", data[1]["status"])
	}
}

func TestAPIKeyIdempotentCreate(t *testing.T) {
	e := start(t)
	k := e.Boot.APIKey
	body := map[string]any{"name": "idem", "scopes": []string{"rooms:read"}}
	r1 := e.do("POST", "/v1/api-keys", k, body, "Idempotency-Key: key-create-1").must(t, 201)
	r2 := e.do("POST", "/v1/api-keys", k, body, "Idempotency-Key: key-create-1").must(t, 201)
	if r1.Str("id") != r2.Str("id") || r1.Str("secret") != r2.Str("secret") {
		t.Errorf("replay returned a different key: %s vs %s", r1.Raw, r2.Raw)
	}
	if r2.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay lacks Idempotent-Replayed: %v", r2.Header)
	}
	if n := len(e.do("GET", "/v1/api-keys", k, nil).must(t, 200).Data()); n != 2 {
		t.Errorf("keys: %d, want 2", n)
	}
	// Same key, different body: refused with 409.
	r3 := e.do("POST", "/v1/api-keys", k, map[string]any{"name": "idem", "scopes": []string{"rooms:write"}}, "Idempotency-Key: key-create-1")
	if r3.Status != 409 {
		t.Errorf("reuse with a different body: %d %s", r3.Status, r3.Raw)
	}
}
