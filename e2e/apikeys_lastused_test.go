package e2e

// An API key's last_used_at: null until the key authenticates a request,
// then the time of a use, journaled at most once a minute per key
// (api_key_used), surviving restarts, and read as null from data
// directories written before the field existed.

import (
	"regexp"
	"testing"
	"time"

	"rtcd/actors"
	"rtcd/ids"
	"rtcd/persistence"
)

// luLastUsed returns an API key object's last_used_at, "" for null. The
// field must be present (the API never omits one).
func luLastUsed(t *testing.T, obj map[string]any) string {
	t.Helper()
	v, ok := obj["last_used_at"]
	if !ok {
		t.Fatalf("API key object without last_used_at: %v", obj)
	}
	if v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		t.Fatalf("last_used_at is %T, want a string or null: %v", v, obj)
	}
	return s
}

// luListed returns key id's item of the project's key list (read with the
// bootstrap key).
func (e *env) luListed(id string) map[string]any {
	e.t.Helper()
	for _, k := range e.do("GET", "/v1/api-keys?limit=100", e.Boot.APIKey, nil).must(e.t, 200).Data() {
		if k["id"] == id {
			return k
		}
	}
	e.t.Fatalf("key %s not listed", id)
	return nil
}

// luBarrier returns once the project actor has handled every message sent
// to it before: a use is journaled by a message authentication sends to
// the project without waiting, and the actor handles its mailbox in order,
// so after this round trip (a revoke of an unknown key, answered by the
// actor, changing nothing) a use that was due is in the ki/ record.
func (e *env) luBarrier() {
	e.t.Helper()
	rsRequireErr(e.t, e.do("DELETE", "/v1/api-keys/"+ids.New(ids.APIKey), e.Boot.APIKey, nil), 404, "api_key_not_found")
}

// luUse authenticates one request with secret.
func (e *env) luUse(secret string) {
	e.t.Helper()
	e.do("GET", "/v1/rooms?limit=1", secret, nil).must(e.t, 200)
}

func (e *env) luRequireListed(id, want, when string) {
	e.t.Helper()
	if got := luLastUsed(e.t, e.luListed(id)); got != want {
		e.t.Fatalf("%s: listed last_used_at %q, want %q", when, got, want)
	}
}

// TestAPIKeyLastUsedAt runs the whole life of last_used_at through the real
// server on the fake clock, once recovering the project from its journal
// (the default cadence: nothing but the bootstrap snapshot) and once from a
// snapshot (a snapshot after every event: no journal tail).
func TestAPIKeyLastUsedAt(t *testing.T) {
	for _, tc := range []struct {
		name         string
		flags        []string
		fromSnapshot bool
	}{
		{"replayed from the journal", nil, false},
		{"recovered from a snapshot", []string{"--snapshot-every-events=1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startIn(t, t.TempDir(), nil, tc.flags...)
			boot := e.Boot.APIKey
			e.clock.Advance(1500 * time.Millisecond)
			created := e.do("POST", "/v1/api-keys", boot, map[string]any{"name": "last use", "scopes": []string{"rooms:read"}}).must(t, 201)
			id, secret := created.Str("id"), created.Str("secret")
			if got := luLastUsed(t, created.JSON); got != "" {
				t.Fatalf("create response last_used_at %q, want null", got)
			}
			e.luRequireListed(id, "", "never used")

			// The first use is recorded at once, with its time.
			e.clock.Advance(10*time.Second + 250*time.Millisecond)
			first := e.clock.Now()
			e.luUse(secret)
			e.luBarrier()
			e.luRequireListed(id, actors.Timestamp(first), "after the first use")

			// Later uses move it only once a minute has passed since the use
			// recorded: 59.999 s later it still shows the first use.
			e.clock.Advance(59 * time.Second)
			e.luUse(secret)
			e.clock.Advance(999 * time.Millisecond)
			e.luUse(secret)
			e.luBarrier()
			e.luRequireListed(id, actors.Timestamp(first), "uses within a minute of the recorded one")
			e.clock.Advance(time.Millisecond)
			second := e.clock.Now() // exactly a minute after the first
			e.luUse(secret)
			e.luBarrier()
			e.luRequireListed(id, actors.Timestamp(second), "a use a minute after the recorded one")

			// The recovery path under test is the one the name says.
			e.Stop()
			s := rsOpenStore(t, e.dataDir)
			snapSeq, tail := rsJournalShape(t, s, "project/"+e.Boot.ProjectID)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if fromSnapshot := snapSeq > 0 && len(tail) == 0; fromSnapshot != tc.fromSnapshot {
				t.Fatalf("project journal: snapshot at %d, tail %v", snapSeq, tail)
			}
			if fromJournal := snapSeq == 0 && len(tail) > 0; fromJournal == tc.fromSnapshot {
				t.Fatalf("project journal: snapshot at %d, tail %v", snapSeq, tail)
			}

			e = e.rsRestart(t, tc.flags...)
			e.luRequireListed(id, actors.Timestamp(second), "after the restart")
			// The recovered state still holds the recorded use: a use within
			// the minute is not journaled (it would be if the restart had
			// forgotten the last use).
			e.clock.Advance(30 * time.Second)
			e.luUse(secret)
			e.luBarrier()
			e.luRequireListed(id, actors.Timestamp(second), "a use within the minute after the restart")

			// A request the key authenticates but may not make still uses it.
			e.clock.Advance(30 * time.Second)
			third := e.clock.Now()
			rsRequireErr(t, e.do("POST", "/v1/rooms", secret, map[string]any{}), 403, "permission_denied")
			e.luBarrier()
			e.luRequireListed(id, actors.Timestamp(third), "a use refused for its scope")

			// The revoke response shows it too (rendered from the actor's
			// state, not from the ki/ record).
			revoked := e.do("DELETE", "/v1/api-keys/"+id, boot, nil).must(t, 200)
			if got := luLastUsed(t, revoked.JSON); got != actors.Timestamp(third) || revoked.Str("status") != "revoked" {
				t.Fatalf("revoke response %s, want last_used_at %s", revoked.Raw, actors.Timestamp(third))
			}
			e.luRequireListed(id, actors.Timestamp(third), "after the revocation")
		})
	}
}

// luOldFields matches last_used_at as this version writes it in a key's
// ki/ record (null or a timestamp) and in the project's state and journal
// (an RFC 3339 time, the zero time when never used); it always follows
// another field.
var luOldFields = regexp.MustCompile(`,"last_used_at":(null|"[^"]*")`)

// TestAPIKeyLastUsedAtOnOlderDataDir: a data directory written before
// last_used_at existed has key records, project snapshots and api_key_created
// events without it. Here every one of them is rewritten that way on disk
// (the bootstrap key's own api_key_used events, which an older version
// would not have written, stay: they name only that key). It recovers, its
// keys list with last_used_at null, and a use is recorded as usual.
func TestAPIKeyLastUsedAtOnOlderDataDir(t *testing.T) {
	flags := []string{restartSnapshotEvery}
	e := startIn(t, t.TempDir(), nil, flags...)
	boot := e.Boot.APIKey
	var keyIDs, secrets []string
	for i := 0; i < 4; i++ { // with a snapshot every 3 events: keys in the snapshot and in the tail
		r := e.createKey(boot, "rooms:read").must(t, 201)
		keyIDs, secrets = append(keyIDs, r.Str("id")), append(secrets, r.Str("secret"))
	}
	e.Stop()

	s := rsOpenStore(t, e.dataDir)
	project := "project/" + e.Boot.ProjectID
	rsRequireSnapshotAndTail(t, s, project)
	// The test rewrites the journal: it becomes its writer (a fenced store
	// refuses a journal's writes from anyone who has not claimed it).
	if err := s.ClaimJournal(project); err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	stripped := map[string]int{}
	for family, prefix := range map[string][]byte{
		"ki/ records": persistence.IndexPrefix(persistence.PrefixKeyIdx, e.Boot.ProjectID),
		"snapshot":    persistence.SnapshotKey(project),
		"journal":     persistence.JournalKey(project, 0)[:len(persistence.JournalKey(project, 0))-8],
	} {
		if err := s.Scan(prefix, 0, func(k, v []byte) bool {
			if old := luOldFields.ReplaceAll(v, nil); len(old) != len(v) {
				stripped[family]++
				b.Set(append([]byte(nil), k...), old)
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	if stripped["ki/ records"] != 5 || stripped["snapshot"] != 1 || stripped["journal"] == 0 {
		t.Fatalf("rewrote %v; want the 5 ki/ records, the snapshot and the tail's api_key_created events", stripped)
	}
	if err := s.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	e = e.rsRestart(t, flags...)
	for _, id := range keyIDs {
		e.luRequireListed(id, "", "a key never used, from an older data directory")
	}
	e.clock.Advance(2 * time.Minute)
	used := e.clock.Now()
	e.luUse(secrets[3])
	e.luBarrier()
	e.luRequireListed(keyIDs[3], actors.Timestamp(used), "a key of an older data directory, used")
	e.luRequireListed(keyIDs[0], "", "another key, still never used")

	// And the recorded use survives the next restart.
	e = e.rsRestart(t, flags...)
	e.luRequireListed(keyIDs[3], actors.Timestamp(used), "after another restart")
	revoked := e.do("DELETE", "/v1/api-keys/"+keyIDs[0], boot, nil).must(t, 200)
	if got := luLastUsed(t, revoked.JSON); got != "" {
		t.Fatalf("revoking a never-used key of an older data directory: last_used_at %q", got)
	}
}
