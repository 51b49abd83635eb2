package e2e

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rtcd/actors"
	"rtcd/auth"
	"rtcd/media"
	"rtcd/server"
)

// masterKeys are the keys derived from the server's master key, as a
// media node run on its own is provisioned with (rtcd media-key).
func (e *env) masterKeys() auth.Keys {
	e.t.Helper()
	raw, err := os.ReadFile(filepath.Join(e.dataDir, "master.key"))
	if err != nil {
		e.t.Fatal(err)
	}
	master, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		e.t.Fatal(err)
	}
	keys, err := auth.DeriveKeys(master)
	if err != nil {
		e.t.Fatal(err)
	}
	return keys
}

// postReport sends one signed report to the private listener as a media
// node run on its own does, and returns once it is answered: a 204 means
// the engine has taken it (a presence report's arrival is recorded).
func (e *env) postReport(key [32]byte, r media.Report) {
	e.t.Helper()
	body, err := json.Marshal(r)
	if err != nil {
		e.t.Fatal(err)
	}
	ts, sig := media.SignRequest(key, e.clock.Now(), body)
	req, err := http.NewRequest("POST", e.Metrics+media.ReportsPath, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(media.HeaderTimestamp, ts)
	req.Header.Set(media.HeaderSignature, sig)
	res, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s report: %v", r.Type, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 204 {
		e.t.Fatalf("%s report answered %d, want 204", r.Type, res.StatusCode)
	}
}

// TestMediaNodeSilenceEndsSessionsOnce: a media node run on its own goes
// silent (it crashed). Once the control plane's clock has moved more than
// 15 s past its last presence snapshot, every joined session ends at that
// snapshot's time, billed and reported (participant.left, usage.finalized)
// exactly once. The test is the node: it reports joins and presence over
// signed HTTP, then stops, and moves the server's injected clock.
func TestMediaNodeSilenceEndsSessionsOnce(t *testing.T) {
	control := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	t.Cleanup(control.Close)
	e := start(t, "--media-listen=", "--media-url=ws://"+control.Listener.Addr().String()+media.RTCPath,
		"--media-control-url="+control.URL, "--webhook-allow-private=true")
	hook := e.blWebhooks()
	key := server.MediaReportKey(e.masterKeys().MediaToken())
	room := e.createRoom(nil)
	join := func(token string) media.SessionInfo {
		cs := e.connect(token).must(t, 200)
		s := media.SessionInfo{SessionID: cs.Str("session_id"), ProjectID: e.Boot.ProjectID, RoomID: room,
			ParticipantID: cs.JSON["participant"].(map[string]any)["id"].(string), JoinedAt: e.clock.Now()}
		e.postReport(key, media.Report{Type: media.ReportJoined, Joined: &media.JoinReport{NodeID: "solo",
			SessionID: s.SessionID, ProjectID: s.ProjectID, RoomID: room, ParticipantID: s.ParticipantID, At: s.JoinedAt}})
		return s
	}
	presence := func(sessions ...media.SessionInfo) {
		e.postReport(key, media.Report{Type: media.ReportPresence,
			Presence: &media.PresenceReport{NodeID: "solo", At: e.clock.Now(), Sessions: sessions}})
	}
	_, aToken := e.createParticipant(room, nil)
	_, bToken := e.createParticipant(room, nil)
	a, b := join(aToken), join(bToken)
	e.eventually("both joined", func() bool {
		return e.participantStatus(room, a.ParticipantID) == "joined" && e.participantStatus(room, b.ParticipantID) == "joined"
	})

	// 30 s with a snapshot every 10 s: never silent for 15 s.
	presence(a, b)
	for i := 0; i < 3; i++ {
		e.clock.Advance(10 * time.Second)
		presence(a, b)
	}
	lastSnapshot := e.clock.Now()
	for _, s := range []media.SessionInfo{a, b} {
		if st := e.participantStatus(room, s.ParticipantID); st != "joined" {
			t.Fatalf("%s is %s while its node reports it", s.ParticipantID, st)
		}
	}

	// The node goes silent; 16 s later on the server's clock it is gone.
	e.clock.Advance(16 * time.Second)
	usage, left, _ := hook.rcFinalized(e, 2, nil)
	for _, s := range []media.SessionInfo{a, b} {
		u, l := usage[s.ParticipantID], left[s.ParticipantID]
		if l["reason"] != actors.LeftReasonReconciled || l["session_id"] != s.SessionID {
			t.Fatalf("participant.left of %s: %v, want reason reconciled", s.ParticipantID, l)
		}
		if u["participant_seconds"] != float64(30) || u["ended_at"] != actors.Timestamp(lastSnapshot) || u["amount"] != "0.002000" {
			t.Fatalf("usage.finalized of %s: %v, want 30 s ending at the last snapshot (%s), 0.002000",
				s.ParticipantID, u, actors.Timestamp(lastSnapshot))
		}
		if st := e.participantStatus(room, s.ParticipantID); st != "left" {
			t.Fatalf("%s is %s after its node went silent", s.ParticipantID, st)
		}
	}
	if s := e.rcSeconds(); s != 60 {
		t.Fatalf("usage %v participant-seconds, want 2 x 30", s)
	}
	e.rcAwaitBalance("9.996000") // 2 x floor(30 x 4000 / 60) = 4000 micro-units
	e.blCheckLedgerSum()

	// Still silent, the room keeps sweeping: a participant joined since is
	// ended by a later sweep (at its join: nothing to bill), and the two
	// sessions already ended are not ended, reported or billed again.
	_, cToken := e.createParticipant(room, nil)
	c := join(cToken)
	usage, left, _ = hook.rcFinalized(e, 3, nil)
	if left[c.ParticipantID]["reason"] != actors.LeftReasonReconciled || usage[c.ParticipantID]["participant_seconds"] != float64(0) {
		t.Fatalf("participant joined during the silence: left %v, usage %v", left[c.ParticipantID], usage[c.ParticipantID])
	}
	if s := e.rcSeconds(); s != 60 {
		t.Fatalf("usage %v participant-seconds after a later sweep, want still 60", s)
	}
	if got := blSumByType(t, e.blCheckLedgerSum())["usage"]; got != -4000 {
		t.Fatalf("usage charged %v micro-units in all, want -4000 (each session once)", got)
	}
}
