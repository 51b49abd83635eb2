package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"rtcd/actors"
	"rtcd/config"
	"rtcd/persistence"
	"rtcd/server"
)

// Restart tests: a clean in-process restart (Shutdown, then startIn on the
// same data directory and the same fake clock) keeps every piece of state.
// They run with --snapshot-every-events=3 and check on disk that recovery
// had both a snapshot and a journal tail to replay.

const restartSnapshotEvery = "--snapshot-every-events=3"

// rsRestart stops e cleanly and starts a new server on its data directory and
// clock with flags. The bootstrap credentials carry over.
func (e *env) rsRestart(t *testing.T, flags ...string) *env {
	t.Helper()
	e.Stop()
	e2 := startIn(t, e.dataDir, e.clock, flags...)
	e2.Boot = e.Boot
	return e2
}

// rsGauge reads an unlabelled metric from the metrics listener.
func (e *env) rsGauge(name string) float64 {
	e.t.Helper()
	res, err := e.client.Get(e.Metrics + "/metrics")
	if err != nil {
		e.t.Fatalf("scrape: %v", err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				e.t.Fatalf("metric %s: %q", name, v)
			}
			return f
		}
	}
	e.t.Fatalf("metric %s not exposed", name)
	return 0
}

func (e *env) rsWaitGauge(name string, want float64) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("%s = %v", name, want), func() bool { return e.rsGauge(name) == want })
}

// rsOpenStore opens the store of a stopped server: its Pebble directory,
// or on JetStream its stream in the suite's cluster.
func rsOpenStore(t *testing.T, dataDir string) persistence.Storage {
	t.Helper()
	if onJetStream() {
		return openSuiteStore(t, dataDir)
	}
	s, err := persistence.Open(filepath.Join(dataDir, "pebble"), persistence.Metrics{}, func(err error) {
		t.Errorf("fatal storage error: %v", err)
	})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	return s
}

// rsJournalShape returns the sequence number of actorID's snapshot and the
// sequence numbers of its journal entries after it.
func rsJournalShape(t *testing.T, s persistence.Storage, actorID string) (snapSeq uint64, tail []uint64) {
	t.Helper()
	snap, err := s.Get(persistence.SnapshotKey(actorID))
	if err != nil {
		t.Fatalf("snapshot of %s: %v", actorID, err)
	}
	snapSeq = binary.BigEndian.Uint64(snap[:8])
	first := persistence.JournalKey(actorID, 0)
	prefix := first[:len(first)-8]
	if err := s.Scan(prefix, 0, func(k, _ []byte) bool {
		if seq := binary.BigEndian.Uint64(k[len(prefix):]); seq > snapSeq {
			tail = append(tail, seq)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return snapSeq, tail
}

// rsRequireSnapshotAndTail asserts that recovering actorID reads a snapshot
// written after at least one event and replays a journal tail.
func rsRequireSnapshotAndTail(t *testing.T, s persistence.Storage, actorID string) {
	t.Helper()
	snapSeq, tail := rsJournalShape(t, s, actorID)
	if snapSeq == 0 || len(tail) == 0 {
		t.Fatalf("%s: snapshot at %d, tail %v; the test must exercise both a snapshot and a tail replay", actorID, snapSeq, tail)
	}
}

func (e *env) rsAuditLog() []byte {
	e.t.Helper()
	return e.do("GET", "/v1/audit-logs?limit=100", e.Boot.APIKey, nil).must(e.t, 200).Raw
}

func (e *env) rsKeyStatus(keyID string) string {
	e.t.Helper()
	for _, k := range e.do("GET", "/v1/api-keys?limit=100", e.Boot.APIKey, nil).must(e.t, 200).Data() {
		if k["id"] == keyID {
			s, _ := k["status"].(string)
			return s
		}
	}
	e.t.Fatalf("key %s not listed", keyID)
	return ""
}

func (e *env) rsParticipantStatus(roomID, id string) string {
	e.t.Helper()
	return e.do("GET", "/v1/rooms/"+roomID+"/participants/"+id, e.Boot.APIKey, nil).must(e.t, 200).Str("status")
}

func rsRequireErr(t *testing.T, r *resp, status int, code string) {
	t.Helper()
	if r.Status != status || r.ErrCode() != code {
		t.Fatalf("got %d %q, want %d %s: %s", r.Status, r.ErrCode(), status, code, r.Raw)
	}
}

func rsRequireQuota(t *testing.T, r *resp, limitName string) {
	t.Helper()
	if r.Status != 409 || r.ErrCode() != "quota_exceeded" {
		t.Fatalf("got %d %q, want 409 quota_exceeded (%s): %s", r.Status, r.ErrCode(), limitName, r.Raw)
	}
	d, _ := r.JSON["error"].(map[string]any)["details"].(map[string]any)
	if d["limit_name"] != limitName {
		t.Fatalf("quota error for %v, want %s: %s", d["limit_name"], limitName, r.Raw)
	}
}

func TestRestartKeepsState(t *testing.T) {
	flags := []string{restartSnapshotEvery, "--default-max-active-rooms=5", "--default-max-participants-per-room=2"}
	e := startIn(t, t.TempDir(), nil, flags...)
	key := e.Boot.APIKey

	// A full room: p1 joined on the embedded media node (recorded), p2
	// connected (a reservation, in memory only), p3 refused; p4 waits.
	full := e.createRoom(map[string]any{"name": "full", "max_participants": 2})
	p1, tok1 := e.createParticipant(full, map[string]any{"name": "p1"})
	p2, tok2 := e.createParticipant(full, map[string]any{"name": "p2"})
	p3, tok3 := e.createParticipant(full, map[string]any{"name": "p3"})
	_, tok4 := e.createParticipant(full, map[string]any{"name": "p4"})
	e.joinMedia(tok1)
	e.eventually("p1 joined", func() bool { return e.rsParticipantStatus(full, p1) == "joined" })
	e.connect(tok2).must(t, 200)
	rsRequireQuota(t, e.connect(tok3), "max_participants")
	e.createParticipant(full, map[string]any{"name": "p5"}) // the room's journal then has a tail after its snapshot

	// Five active rooms, the limit; one of them created idempotently.
	idemBody := map[string]any{"name": "idempotent"}
	idemRoom := e.do("POST", "/v1/rooms", key, idemBody, "Idempotency-Key: restart-room").must(t, 201).Str("id")
	e.createRoom(map[string]any{"name": "c"})
	e.createRoom(map[string]any{"name": "d"})
	doomed := e.createRoom(map[string]any{"name": "deleted before restart"})
	rsRequireQuota(t, e.do("POST", "/v1/rooms", key, map[string]any{}), "max_active_rooms")
	// An ended room frees its slot, before and (below) after the restart.
	e.do("DELETE", "/v1/rooms/"+doomed, key, nil).must(t, 200)
	e.rsWaitGauge("rtcd_active_rooms", 4)
	last := e.createRoom(map[string]any{"name": "f"})
	rsRequireQuota(t, e.do("POST", "/v1/rooms", key, map[string]any{}), "max_active_rooms")

	// Keys: one revoked, one active and used, one never used. kept's use is
	// journaled (api_key_used) by a message its authentication sends the
	// project, so the revoke, sent after it, is journaled after it.
	revoked := e.createKey(key, "rooms:read").must(t, 201)
	kept := e.createKey(key, "rooms:read").must(t, 201)
	unused := e.createKey(key, "rooms:read").must(t, 201)
	keptUsed := e.clock.Now()
	e.do("GET", "/v1/rooms", kept.Str("secret"), nil).must(t, 200)
	e.do("DELETE", "/v1/api-keys/"+revoked.Str("id"), key, nil).must(t, 200)
	e.do("GET", "/v1/rooms", revoked.Str("secret"), nil).must(t, 401)

	audit := e.rsAuditLog()
	if n := bytes.Count(audit, []byte(`"object":"audit_log_entry"`)); n < 5 {
		t.Fatalf("expected at least 5 audit entries before the restart, got %d: %s", n, audit)
	}
	fullBefore := e.do("GET", "/v1/rooms/"+full, key, nil).must(t, 200).Raw
	e.rsWaitGauge("rtcd_active_participants", 2)

	e.Stop()
	s := rsOpenStore(t, e.dataDir)
	rsRequireSnapshotAndTail(t, s, "project/"+e.Boot.ProjectID)
	rsRequireSnapshotAndTail(t, s, "room/"+full)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	e = e.rsRestart(t, flags...)

	// The room, exactly; its participants as recorded. The embedded node
	// restarted with the process, so p1's session ended at its last
	// settled instant (control_plane_restart); p2's reservation lived in
	// memory only and is gone (the crash contract, docs/storage.md).
	if got := e.do("GET", "/v1/rooms/"+full, key, nil).must(t, 200).Raw; !bytes.Equal(got, fullBefore) {
		t.Fatalf("room record changed across the restart:\n%s\nwas\n%s", got, fullBefore)
	}
	for id, want := range map[string]string{p1: "left", p2: "created", p3: "created"} {
		if got := e.rsParticipantStatus(full, id); got != want {
			t.Fatalf("participant %s is %s after the restart, want %s", id, got, want)
		}
	}
	// The slots are exactly the recorded joins (none now): every
	// acknowledged connect can connect again while capacity remains.
	e.rsWaitGauge("rtcd_active_participants", 0)
	e.connect(tok2).must(t, 200)
	e.connect(tok1).must(t, 200)
	rsRequireQuota(t, e.connect(tok3), "max_participants")
	rsRequireQuota(t, e.connect(tok4), "max_participants")
	e.do("DELETE", "/v1/rooms/"+full+"/participants/"+p1, key, nil).must(t, 200)
	e.connect(tok3).must(t, 200)
	rsRequireErr(t, e.connect(tok1), 404, "participant_not_found")

	// Active rooms: still five (the deleted one not counted again).
	e.rsWaitGauge("rtcd_active_rooms", 5)
	rsRequireQuota(t, e.do("POST", "/v1/rooms", key, map[string]any{}), "max_active_rooms")
	// The idempotent create replays the same room and takes no slot.
	r := e.do("POST", "/v1/rooms", key, idemBody, "Idempotency-Key: restart-room").must(t, 201)
	if r.Str("id") != idemRoom || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("idempotent replay after restart: id %s (want %s), replayed %q", r.Str("id"), idemRoom, r.Header.Get("Idempotent-Replayed"))
	}
	e.do("GET", "/v1/rooms/"+doomed, key, nil).must(t, 200)
	if st := e.do("GET", "/v1/rooms/"+doomed, key, nil).Str("status"); st != "ended" {
		t.Fatalf("the room deleted before the restart is %s", st)
	}
	// Ending a room after the restart frees a slot: the count is exact.
	e.clock.Advance(time.Second) // its audit entry is then the newest
	e.do("DELETE", "/v1/rooms/"+last, key, nil).must(t, 200)
	e.rsWaitGauge("rtcd_active_rooms", 4)
	e.createRoom(map[string]any{"name": "g"})
	rsRequireQuota(t, e.do("POST", "/v1/rooms", key, map[string]any{}), "max_active_rooms")

	// Keys.
	e.do("GET", "/v1/rooms", revoked.Str("secret"), nil).must(t, 401)
	e.do("GET", "/v1/rooms", kept.Str("secret"), nil).must(t, 200)
	if st := e.rsKeyStatus(revoked.Str("id")); st != "revoked" {
		t.Fatalf("revoked key listed as %s after the restart", st)
	}
	if st := e.rsKeyStatus(kept.Str("id")); st != "active" {
		t.Fatalf("active key listed as %s after the restart", st)
	}
	if got := luLastUsed(t, e.luListed(kept.Str("id"))); got != actors.Timestamp(keptUsed) {
		t.Fatalf("used key's last_used_at %q after the restart, want %s", got, actors.Timestamp(keptUsed))
	}
	if got := luLastUsed(t, e.luListed(unused.Str("id"))); got != "" {
		t.Fatalf("never used key's last_used_at %q after the restart, want null", got)
	}
	// Revoking it again is idempotent and does not resurrect it.
	e.do("DELETE", "/v1/api-keys/"+revoked.Str("id"), key, nil).must(t, 200)
	e.do("GET", "/v1/rooms", revoked.Str("secret"), nil).must(t, 401)

	// The audit log as it was, then the new entries on top.
	auditAfter := e.rsAuditLog()
	var before, after struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(audit, &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(auditAfter, &after); err != nil {
		t.Fatal(err)
	}
	// Since the restart: one room.deleted (revoking again is idempotent
	// and writes no entry). Entries of one instant have no defined order,
	// so the old ones are compared by id.
	if len(after.Data) != len(before.Data)+1 {
		t.Fatalf("audit log has %d entries after the restart, want %d+1:\n%s", len(after.Data), len(before.Data), auditAfter)
	}
	var newest struct {
		Action string `json:"action"`
		Target struct {
			ID string `json:"id"`
		} `json:"target"`
	}
	_ = json.Unmarshal(after.Data[0], &newest)
	if newest.Action != "room.deleted" || newest.Target.ID != last {
		t.Fatalf("newest audit entry %s, want room.deleted of %s", after.Data[0], last)
	}
	byID := func(entries []json.RawMessage) map[string]string {
		m := make(map[string]string)
		for _, raw := range entries {
			var x struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(raw, &x)
			m[x.ID] = string(raw)
		}
		return m
	}
	afterByID := byID(after.Data[1:])
	for id, entry := range byID(before.Data) {
		if afterByID[id] != entry {
			t.Fatalf("audit entry %s changed or vanished across the restart:\n%s\nwas\n%s", id, afterByID[id], entry)
		}
	}

	// A second restart, right after the first, changes nothing more but
	// the reservations of memory (p2 and p3 connected, nobody joined).
	e = e.rsRestart(t, flags...)
	e.rsWaitGauge("rtcd_active_rooms", 5)
	e.rsWaitGauge("rtcd_active_participants", 0)
	rsRequireQuota(t, e.do("POST", "/v1/rooms", key, map[string]any{}), "max_active_rooms")
	if got := e.rsAuditLog(); !bytes.Equal(got, auditAfter) {
		t.Fatalf("audit log changed across the second restart:\n%s\nwas\n%s", got, auditAfter)
	}
}

// TestRestartFinishesEndingRoom: a room whose ending was durable but whose
// sessions were not yet closed when the process stopped (the two are
// separate batches) is ended by recovery, and its slot is freed.
func TestRestartFinishesEndingRoom(t *testing.T) {
	flags := []string{restartSnapshotEvery, "--default-max-active-rooms=1"}
	e := startIn(t, t.TempDir(), nil, flags...)
	key := e.Boot.APIKey
	room := e.createRoom(map[string]any{"name": "ending", "max_participants": 5})
	q1, tok1 := e.createParticipant(room, nil)
	q2, _ := e.createParticipant(room, nil)
	q3, tok3 := e.createParticipant(room, nil)
	e.connect(tok1).must(t, 200)
	e.connect(tok3).must(t, 200)
	e.do("DELETE", "/v1/rooms/"+room+"/participants/"+q3, key, nil).must(t, 200)
	q4, _ := e.createParticipant(room, nil) // 7 events: snapshot at 6, tail of 1
	e.rsWaitGauge("rtcd_active_participants", 1)
	rsRequireQuota(t, e.do("POST", "/v1/rooms", key, map[string]any{}), "max_active_rooms")
	e.Stop()

	// Write what the first of the two batches of DELETE /v1/rooms/{id}
	// writes (the room_ending_started event and the room record saying
	// ending), as if the process had stopped before the second.
	s := rsOpenStore(t, e.dataDir)
	rsRequireSnapshotAndTail(t, s, "room/"+room)
	j := persistence.NewJournal(s, "room/"+room, 3)
	if _, err := j.Recover(func([]byte) error { return nil }, func([]byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	endingAt, _ := json.Marshal(e.clock.Now())
	j.Append(b, []byte(`{"room_ending_started":{"reason":"deleted","at":`+string(endingAt)+`}}`))
	recordKey := []byte(persistence.PrefixRoom + e.Boot.ProjectID + "/" + room)
	raw, err := s.Get(recordKey)
	if err != nil {
		t.Fatalf("room record: %v", err)
	}
	var record map[string]any
	if err := json.Unmarshal(raw, &record); err != nil {
		t.Fatal(err)
	}
	record["status"], record["end_reason"] = "ending", "deleted"
	raw, _ = json.Marshal(record)
	b.Set(recordKey, raw)
	if err := s.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	e = e.rsRestart(t, flags...)
	var r *resp
	e.eventually("the ending room to end", func() bool {
		r = e.do("GET", "/v1/rooms/"+room, key, nil).must(t, 200)
		return r.Str("status") == "ended"
	})
	if r.Str("end_reason") != "deleted" || r.Str("ended_at") == "" {
		t.Fatalf("ended room: %s", r.Raw)
	}
	for id, want := range map[string]string{q1: "ended", q2: "ended", q3: "removed", q4: "ended"} {
		if got := e.rsParticipantStatus(room, id); got != want {
			t.Fatalf("participant %s is %s, want %s", id, got, want)
		}
	}
	rsRequireErr(t, e.connect(tok1), 410, "room_ended")
	e.rsWaitGauge("rtcd_active_participants", 0)
	e.rsWaitGauge("rtcd_active_rooms", 0)
	other := e.createRoom(nil) // the only slot is free again
	rsRequireQuota(t, e.do("POST", "/v1/rooms", key, map[string]any{}), "max_active_rooms")

	// Recovering an ended room again is a no-op.
	e = e.rsRestart(t, flags...)
	e.rsWaitGauge("rtcd_active_rooms", 1)
	if st := e.do("GET", "/v1/rooms/"+room, key, nil).must(t, 200).Str("status"); st != "ended" {
		t.Fatalf("room is %s after a second restart", st)
	}
	if st := e.do("GET", "/v1/rooms/"+other, key, nil).must(t, 200).Str("status"); st != "waiting" {
		t.Fatalf("room created after the first restart is %s", st)
	}
	rsRequireQuota(t, e.do("POST", "/v1/rooms", key, map[string]any{}), "max_active_rooms")
}

// TestRestartReportsCorruptJournals: when several rooms cannot be recovered
// (here: a gap in each journal), start fails with the recovery error; it
// neither hangs nor serves a partial state.
func TestRestartReportsCorruptJournals(t *testing.T) {
	e := startIn(t, t.TempDir(), nil, restartSnapshotEvery)
	const broken = 4
	var rooms []string
	for i := 0; i < broken; i++ {
		room := e.createRoom(nil)
		e.createParticipant(room, nil)
		rooms = append(rooms, room)
	}
	e.Stop()

	s := rsOpenStore(t, e.dataDir)
	b := s.NewBatch()
	for _, room := range rooms {
		j := persistence.NewJournal(s, "room/"+room, 3)
		if _, err := j.Recover(func([]byte) error { return nil }, func([]byte) error { return nil }); err != nil {
			t.Fatal(err)
		}
		b.Set(persistence.JournalKey("room/"+room, j.Seq()+2), []byte(`{}`))
	}
	if err := s.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	args := []string{"--data-dir", e.dataDir, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
		"--log-level", "error", restartSnapshotEvery}
	cfg, err := config.Parse("test", append(args, withStore(t, e.dataDir)...), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	type started struct {
		srv *server.Server
		err error
	}
	done := make(chan started, 1)
	go func() {
		srv, err := server.Start(cfg, server.Options{Clock: e.clock, BootstrapOut: io.Discard,
			Fatal: func(err error) { t.Errorf("fatal storage error: %v", err) }})
		done <- started{srv, err}
	}()
	select {
	case r := <-done:
		if r.err == nil {
			_ = r.srv.Shutdown(context.Background())
			t.Fatal("start succeeded over rooms whose journals have gaps")
		}
		if !strings.Contains(r.err.Error(), "jumps") {
			t.Fatalf("start failed with %v; want the journal gap reported", r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("start with %d unrecoverable rooms did not return in 20s", broken)
	}
}
