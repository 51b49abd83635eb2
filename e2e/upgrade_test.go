package e2e

// Upgrades keep working: a data directory written by an earlier release
// (kept in testdata/upgrade/<release>/, with what it holds in
// manifest.json) must recover under this one, with every record as it was.
// A renamed journal, event or key keeps a reader for its old form, or this
// test fails.
//
// The fixture is written by TestWriteUpgradeFixture, which runs only when
// RTCD_WRITE_UPGRADE_FIXTURE names the release to write (e.g. v0.1); run it
// on the release *before* a change to the storage layout, commit what it
// writes, and keep every older fixture.

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rtcd/clock"
)

// upgradeManifest is what a fixture holds, as the API answered when it was
// written. Its secrets are test fixtures, valid only against this data
// directory's master key.
type upgradeManifest struct {
	Release      string    `json:"release"`
	WrittenAt    time.Time `json:"written_at"` // the fake clock when the server stopped
	Boot         bootstrap `json:"boot"`
	Session      string    `json:"session"`        // the owner's dashboard session
	SecondKey    string    `json:"second_key"`     // an active key made after bootstrap
	RevokedKeyID string    `json:"revoked_key_id"` // a revoked key
	WaitingRoom  string    `json:"waiting_room"`
	Participants []string  `json:"participants"` // of the waiting room, created
	EndedRoom    string    `json:"ended_room"`   // deleted, then ended
	UsedRoom     string    `json:"used_room"`    // a session joined and left: usage and charges
	Endpoint     string    `json:"endpoint"`     // an enabled webhook endpoint
	Topup        string    `json:"topup"`        // a sandbox top-up, paid
	Balance      string    `json:"balance"`
	LedgerLen    int       `json:"ledger_len"`
	UsageSeconds float64   `json:"usage_seconds"`
	SecondAcct   string    `json:"second_account"` // a workspace made from the dashboard
	Invitation   string    `json:"invitation"`     // pending, in the first workspace
	// ReservedRoom holds participants connected (not joined) when the
	// server stopped: Reserved[0] connected in the room's snapshot,
	// Reserved[1] in its journal tail (written by a release that journaled
	// connects, as participant_connected; v0.1-connects).
	ReservedRoom string   `json:"reserved_room,omitempty"`
	Reserved     []string `json:"reserved,omitempty"`
}

// upgradeFixtureFiles are the files of a data directory a fixture keeps
// (the mail outbox is not state).
func upgradeFixtureFile(rel string) bool {
	return rel == "master.key" || rel == "admin.token" || strings.HasPrefix(rel, "pebble"+string(filepath.Separator)) || rel == "pebble"
}

func TestWriteUpgradeFixture(t *testing.T) {
	release := os.Getenv("RTCD_WRITE_UPGRADE_FIXTURE")
	if release == "" {
		t.Skip("writes a fixture only when RTCD_WRITE_UPGRADE_FIXTURE names its release")
	}
	// Snapshots every 3 events: recovery replays both snapshots and tails.
	e := start(t, "--snapshot-every-events=3", "--webhook-allow-private", "--settle-interval-seconds=10")
	k := e.Boot.APIKey
	m := upgradeManifest{Release: release, Boot: e.Boot}

	m.SecondKey = e.createKey(k, "rooms:read", "rooms:write").must(t, 201).Str("secret")
	m.RevokedKeyID = e.createKey(k, "usage:read").must(t, 201).Str("id")
	e.do("DELETE", "/v1/api-keys/"+m.RevokedKeyID, k, nil).must(t, 200)

	m.WaitingRoom = e.createRoom(map[string]any{"name": "waiting", "metadata": map[string]any{"team": "a"}})
	for _, name := range []string{"ann", "bob"} {
		id, _ := e.createParticipant(m.WaitingRoom, map[string]any{"name": name, "external_id": "u-" + name})
		m.Participants = append(m.Participants, id)
	}
	m.EndedRoom = e.createRoom(map[string]any{"name": "ended"})
	e.do("DELETE", "/v1/rooms/"+m.EndedRoom, k, nil).must(t, 200)
	e.eventually("the deleted room ended", func() bool { return e.getRoomStatus(m.EndedRoom) == "ended" })

	m.Endpoint = e.do("POST", "/v1/webhook-endpoints", k, map[string]any{"url": "http://127.0.0.1:1/hook", "events": []string{"room.ended"}}).
		must(t, 201).Str("id")

	m.UsedRoom = e.createRoom(map[string]any{"name": "used"})
	pid, token := e.createParticipant(m.UsedRoom, nil)
	c := e.joinMedia(token)
	e.eventually("joined", func() bool { return e.participantStatus(m.UsedRoom, pid) == "joined" })
	e.stay(65*time.Second, c)
	c.send(map[string]any{"type": "leave"})
	e.eventually("left", func() bool { return e.participantStatus(m.UsedRoom, pid) == "left" })

	tp := e.blCreateTopup("25.00", "").must(t, 201)
	m.Topup = tp.Str("payment_id")
	if status, _ := e.blPage(tp.Str("authorize_url"), "succeeded"); status != 200 {
		t.Fatalf("sandbox pay: %d", status)
	}
	e.eventually("top-up succeeded", func() bool { return e.blTopup(m.Topup).Str("status") == "succeeded" })

	m.Session = e.signIn(e.Boot.OwnerEmail)
	m.SecondAcct = e.do("POST", "/v1/accounts", m.Session, map[string]any{"name": "Second"}).must(t, 201).Str("id")
	m.Invitation = e.do("POST", "/v1/accounts/"+e.Boot.AccountID+"/invitations", m.Session,
		map[string]any{"email": "invitee@example.com", "role": "admin"}).must(t, 201).Str("id")

	e.eventually("usage charged", func() bool { return e.blBalance() != "35.000000" })
	m.Balance = e.blBalance()
	m.LedgerLen = len(e.blLedger())
	day := testEpoch.Format("2006-01-02")
	m.UsageSeconds, _ = e.do("GET", "/v1/usage/summary?from="+day+"&to="+day, k, nil).must(t, 200).JSON["participant_seconds"].(float64)
	m.WrittenAt = e.clock.Now()
	e.Stop()

	dst := filepath.Join("testdata", "upgrade", release)
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	copyTree(t, e.dataDir, dst, upgradeFixtureFile)
	raw, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(dst, "manifest.json"), append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", dst)
}

// copyTree copies the regular files under src for which keep(relative
// path) holds into dst.
func copyTree(t *testing.T, src, dst string, keep func(rel string) bool) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() || !keep(rel) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestUpgradeRecoversOlderDataDirs starts this release on a copy of every
// fixture in testdata/upgrade and checks that each record it holds reads
// back as it was written, and that the recovered server takes new writes.
func TestUpgradeRecoversOlderDataDirs(t *testing.T) {
	skipOnJetStream(t, "the fixtures are Pebble data directories of older versions")
	fixtures, _ := filepath.Glob(filepath.Join("testdata", "upgrade", "*", "manifest.json"))
	if len(fixtures) == 0 {
		t.Fatal("no fixture in testdata/upgrade")
	}
	for _, mf := range fixtures {
		dir := filepath.Dir(mf)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			var m upgradeManifest
			raw, err := os.ReadFile(mf)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			data := t.TempDir()
			copyTree(t, dir, data, func(rel string) bool { return rel != "manifest.json" })
			e := startIn(t, data, clock.NewFake(m.WrittenAt.Add(time.Second)))
			e.Boot = m.Boot
			k := m.Boot.APIKey
			upgradeChecks(t, e, m, k)
			// And again after a restart of the recovered data (it may
			// have rewritten records in the new form).
			e = e.rsRestart(t)
			upgradeChecks(t, e, m, k)
		})
	}
}

func upgradeChecks(t *testing.T, e *env, m upgradeManifest, k string) {
	t.Helper()
	// Credentials: the bootstrap key, the second key; the revoked key stays
	// revoked; the dashboard session still signs in.
	e.do("GET", "/v1/rooms", k, nil).must(t, 200)
	e.do("GET", "/v1/rooms", m.SecondKey, nil).must(t, 200)
	for _, key := range e.do("GET", "/v1/api-keys", k, nil).must(t, 200).Data() {
		if key["id"] == m.RevokedKeyID && key["status"] != "revoked" {
			t.Errorf("revoked key %s is %v", m.RevokedKeyID, key["status"])
		}
	}
	me := e.do("GET", "/v1/me", m.Session, nil).must(t, 200)
	if accts, _ := me.JSON["accounts"].([]any); len(accts) != 2 {
		t.Errorf("the owner's workspaces: %s", me.Raw)
	}

	// Rooms and participants.
	if s := e.getRoomStatus(m.WaitingRoom); s != "waiting" {
		t.Errorf("waiting room is %s", s)
	}
	room := e.do("GET", "/v1/rooms/"+m.WaitingRoom, k, nil).must(t, 200)
	if md, _ := room.JSON["metadata"].(map[string]any); md["team"] != "a" || room.Str("name") != "waiting" {
		t.Errorf("waiting room: %s", room.Raw)
	}
	for _, p := range m.Participants {
		if s := e.participantStatus(m.WaitingRoom, p); s != "created" {
			t.Errorf("participant %s is %s", p, s)
		}
	}
	if s := e.getRoomStatus(m.EndedRoom); s != "ended" {
		t.Errorf("ended room is %s", s)
	}
	if m.ReservedRoom != "" {
		upgradeReservations(t, e, m)
	}
	if s := e.getRoomStatus(m.UsedRoom); s != "active" {
		t.Errorf("used room is %s", s)
	}

	// Money and usage: the balance, the ledger, the paid top-up.
	if b := e.blBalance(); b != m.Balance {
		t.Errorf("balance %s, want %s", b, m.Balance)
	}
	if n := len(e.blLedger()); n != m.LedgerLen {
		t.Errorf("ledger has %d entries, want %d", n, m.LedgerLen)
	}
	e.blCheckLedgerSum()
	if s := e.blTopup(m.Topup).Str("status"); s != "succeeded" {
		t.Errorf("top-up is %s", s)
	}
	day := testEpoch.Format("2006-01-02")
	if got, _ := e.do("GET", "/v1/usage/summary?from="+day+"&to="+day, k, nil).must(t, 200).JSON["participant_seconds"].(float64); got != m.UsageSeconds {
		t.Errorf("usage %v s, want %v", got, m.UsageSeconds)
	}

	// Webhooks, workspaces, invitations.
	var found bool
	for _, ep := range e.do("GET", "/v1/webhook-endpoints", k, nil).must(t, 200).Data() {
		found = found || (ep["id"] == m.Endpoint && ep["status"] == "enabled")
	}
	if !found {
		t.Errorf("webhook endpoint %s is not listed enabled", m.Endpoint)
	}
	var invited bool
	for _, inv := range e.do("GET", "/v1/accounts/"+m.Boot.AccountID+"/invitations", m.Session, nil).must(t, 200).Data() {
		invited = invited || (inv["id"] == m.Invitation && inv["status"] == "pending")
	}
	if !invited {
		t.Errorf("invitation %s is not pending", m.Invitation)
	}

	// The recovered server takes new writes.
	room2 := e.createRoom(map[string]any{"name": "after the upgrade"})
	e.createParticipant(room2, nil)
	e.do("GET", "/v1/accounts/"+m.SecondAcct+"/members", m.Session, nil).must(t, 200)
}

// upgradeReservations: participants a release that journaled connects left
// connected (in a snapshot, in a journal tail) recover as what they were
// before that connect: a connect is now a reservation in memory, lost with
// the process that made it (the crash contract, docs/storage.md). They
// keep their first connect, and hold no slot: two newcomers fill the room
// (max_participants 2), shown connected from the room's memory.
func upgradeReservations(t *testing.T, e *env, m upgradeManifest) {
	t.Helper()
	for _, id := range m.Reserved {
		p := e.getParticipant(m.ReservedRoom, id)
		if p.Str("status") != "created" || p.Str("connected_at") == "" {
			t.Errorf("participant %s connected by the release before: %s", id, p.Raw)
		}
	}
	var newcomers []string
	for i := 0; i < 3; i++ {
		id, tok := e.createParticipant(m.ReservedRoom, nil)
		r := e.connect(tok)
		if i < 2 {
			r.must(t, 200)
			newcomers = append(newcomers, id)
		} else {
			mustQuota(t, r, "max_participants", 2)
		}
	}
	for _, id := range newcomers {
		if s := e.participantStatus(m.ReservedRoom, id); s != "connected" {
			t.Errorf("newcomer %s is %s", id, s)
		}
	}
}
