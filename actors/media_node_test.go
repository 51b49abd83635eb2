package actors

import (
	"errors"
	"testing"
	"time"

	"github.com/goccy/go-json"
	"rtcd/actors/core"
	"rtcd/actors/room"
	"rtcd/clock"
	"rtcd/ids"
	"rtcd/persistence"
)

// perSecondMicros is the test price: 0.001 a second.
const perSecondMicros = 1000

// joinedRoom is an engine with billing at perSecondMicros and one room
// with one participant joined, at the start of the clock, on a media node
// run on its own or embedded.
type joinedRoom struct {
	t      *testing.T
	e      *Engine
	clk    *clock.Fake
	caller *core.Caller
	roomID string
	joined room.MediaJoin
}

func newJoinedRoom(t *testing.T, nodeOnItsOwn bool) *joinedRoom {
	t.Helper()
	e, clk, caller := newTestEngineWith(t, persistence.Options{}, func(s *core.Settings) {
		s.MediaNodeRunsOnItsOwn = nodeOnItsOwn
		s.Billing = core.Billing{Enabled: true, Currency: "USD", ParticipantMinutePrice: 60 * perSecondMicros, SettleInterval: time.Minute}
	})
	res, aerr := e.CreateRoom(caller, &RoomParams{}, nil)
	if aerr != nil {
		t.Fatal(aerr)
	}
	roomID := decodeID(t, res.Body)
	res, aerr = e.CreateParticipant(caller, roomID, &ParticipantParams{}, nil)
	if aerr != nil {
		t.Fatal(aerr)
	}
	tok := decodeToken(t, res.Body)
	res, aerr = e.Connect(&ConnectParams{Token: &tok}, "127.0.0.1")
	if aerr != nil {
		t.Fatal(aerr)
	}
	var cs struct {
		SessionID   string `json:"session_id"`
		Participant struct {
			ID string `json:"id"`
		} `json:"participant"`
	}
	if err := json.Unmarshal(res.Body, &cs); err != nil {
		t.Fatal(err)
	}
	n := &joinedRoom{t: t, e: e, clk: clk, caller: caller, roomID: roomID,
		joined: room.MediaJoin{SessionID: cs.SessionID, ProjectID: caller.ProjectID, RoomID: roomID, ParticipantID: cs.Participant.ID, At: clk.Now()}}
	e.MediaJoined(n.joined)
	waitUntil(t, "the participant joined", func() bool { return n.status() == room.ParticipantJoined })
	n.sweep() // the first settlement, at the join: lastSettle on the minute's grid
	return n
}

func (n *joinedRoom) status() string {
	return statusReader(n.t)(n.e.GetParticipant(n.caller, n.roomID, n.joined.ParticipantID))
}

// presence is the node's snapshot now, showing the participant.
func (n *joinedRoom) presence() {
	n.e.MediaPresence(room.MediaPresence{NodeID: "solo", At: n.clk.Now(), Sessions: []room.MediaJoin{n.joined}})
}

// sweep runs one sweep of the room and returns once it is done (a command
// sent after it is answered only after it).
func (n *joinedRoom) sweep() {
	n.t.Helper()
	rh, _ := n.e.room(n.roomID)
	n.e.system.Root.Send(rh.pid, core.Sweep{})
	if _, aerr := n.e.RemoveParticipant(n.caller, n.roomID, ids.New(ids.Participant)); aerr == nil || aerr.Code != "participant_not_found" {
		n.t.Fatalf("barrier command behind the sweep: %v", aerr)
	}
}

// charged waits for the wallet to apply what the room charged and returns it.
func (n *joinedRoom) charged() int64 {
	n.t.Helper()
	waitDurable(n.t, n.e)
	var balance int64
	waitUntil(n.t, "the wallet applies the pending charges", func() bool {
		if countKeys(n.t, n.e.env.Store, []byte(persistence.PrefixCharge)) != 0 {
			return false
		}
		w, aerr := n.e.readWallet(n.caller)
		if aerr != nil {
			n.t.Fatal(aerr)
		}
		balance = w.Balance
		return true
	})
	return -balance
}

// TestSettlementStopsAtTheNodesLastSnapshot: running sessions on a node
// run on its own are charged up to its last presence snapshot, not up to
// now. If the node has died since, the session ends at that snapshot, and
// a settlement past it would have charged seconds the session never had.
func TestSettlementStopsAtTheNodesLastSnapshot(t *testing.T) {
	n := newJoinedRoom(t, true)
	n.clk.Advance(55 * time.Second)
	n.presence()                    // last seen at 55 s
	n.clk.Advance(10 * time.Second) // 65 s: silent for 10 s, not yet gone
	n.sweep()                       // a minute since the last settlement: settles
	if got := n.charged(); got != 55*perSecondMicros {
		t.Fatalf("settled %d micro-units, want %d: 55 s, up to the node's last snapshot", got, 55*perSecondMicros)
	}
	if st := n.status(); st != room.ParticipantJoined {
		t.Fatalf("participant %s after 10 s of silence, want still joined", st)
	}
}

// usageSeconds is the participant-seconds finalized for the session.
func (n *joinedRoom) usageSeconds() int64 {
	n.t.Helper()
	v, err := n.e.env.Store.Get(persistence.Key(persistence.PrefixUsage, n.caller.ProjectID+"/2026-11-22/"+n.joined.SessionID))
	if err != nil {
		n.t.Fatalf("usage record of the session: %v", err)
	}
	var rec room.UsageRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		n.t.Fatal(err)
	}
	return rec.Seconds
}

// TestSilentNodeOnItsOwnEndsSessionsOnce: a media node run on its own that
// stops reporting is gone once the engine's clock has moved more than
// mediaPresenceTimeout past its last snapshot; its joined session ends at
// that snapshot, billed once. A step of the wall clock is no silence.
func TestSilentNodeOnItsOwnEndsSessionsOnce(t *testing.T) {
	n := newJoinedRoom(t, true)
	n.clk.Advance(30 * time.Second)
	n.presence() // last seen at 30 s

	// The wall clock jumps an hour ahead (an NTP correction): no time passed.
	n.clk.Step(time.Hour)
	n.sweep()
	if st := n.status(); st != room.ParticipantJoined {
		t.Fatalf("participant %s after a wall-clock step, want still joined: a step is no silence", st)
	}

	n.clk.Advance(room.MediaPresenceTimeout)
	n.sweep()
	if st := n.status(); st != room.ParticipantJoined {
		t.Fatalf("participant %s after exactly %s of silence, want still joined", st, room.MediaPresenceTimeout)
	}
	n.clk.Advance(time.Second)
	n.sweep()
	if st := n.status(); st != room.ParticipantLeft {
		t.Fatalf("participant %s after %s of silence, want left", st, room.MediaPresenceTimeout+time.Second)
	}
	if got := n.usageSeconds(); got != 30 {
		t.Fatalf("session finalized with %d s, want 30: it ends at the node's last snapshot", got)
	}
	n.clk.Advance(time.Minute) // later sweeps, still silent: nothing more
	n.sweep()
	if got := n.charged(); got != 30*perSecondMicros {
		t.Fatalf("charged %d micro-units, want %d: the 30 s session, once", got, 30*perSecondMicros)
	}
}

// TestEmbeddedNodeSilenceEndsNothing: the embedded node cannot die while
// the process runs, so time passing without its presence reports (its
// ticker is real time, a test's clock is not) ends no session.
func TestEmbeddedNodeSilenceEndsNothing(t *testing.T) {
	n := newJoinedRoom(t, false)
	n.clk.Advance(time.Hour)
	n.sweep()
	if st := n.status(); st != room.ParticipantJoined {
		t.Fatalf("participant %s after an hour without presence from the embedded node, want still joined", st)
	}
}

// TestPresenceWithTheJoinStillPendingKeepsIt: the node's snapshot can be
// taken after it reported a join and before the room's answer reached it,
// so the join is listed as pending; the room has recorded it meanwhile.
// Reconciling that snapshot must not end the recorded session (it would
// then refuse the pending entry as a session that has left, and the
// participant would be closed with token_expired under load).
func TestPresenceWithTheJoinStillPendingKeepsIt(t *testing.T) {
	n := newJoinedRoom(t, false)
	n.clk.Advance(time.Second)
	n.e.MediaPresence(room.MediaPresence{NodeID: "solo", At: n.clk.Now(), Pending: []room.MediaJoin{n.joined}})
	n.sweep() // the presence was handled before the sweep
	if st := n.status(); st != room.ParticipantJoined {
		t.Fatalf("participant %s after a snapshot showing its join pending, want joined", st)
	}
	// A snapshot without it at all still ends it (the reconciler's job).
	n.e.MediaPresence(room.MediaPresence{NodeID: "solo", At: n.clk.Now()})
	n.sweep()
	if st := n.status(); st != room.ParticipantLeft {
		t.Fatalf("participant %s after a snapshot without it, want left", st)
	}
}

// clusterPeers is a cluster's Peers as one node's engine sees it, for the
// tests of what it decides alone: whether it owns a workspace.
type clusterPeers struct{ owns bool }

func (p *clusterPeers) Call(string, string, []byte) ([]byte, error) {
	return nil, errors.New("no calls")
}
func (p *clusterPeers) Fingerprint() uint64 { return 1 }
func (p *clusterPeers) Owns(string) bool    { return p.owns }

// With media nodes registered with a cluster, a node's presence speaks
// only for the rooms it holds or held, and only where this node owns the
// room's workspace: a node that never held the room, or a snapshot
// reaching a node its workspace is moving away from, ends nobody.
func TestRegisteredNodePresenceSpeaksOnlyForItsRooms(t *testing.T) {
	n := newJoinedRoom(t, false)
	peers := &clusterPeers{}
	n.e.SetPeers(peers)
	n.e.SetMediaNodes([]MediaNode{{ID: "m1", URL: "ws://127.0.0.1:1/rtc"}, {ID: "m2", URL: "ws://127.0.0.1:2/rtc"}})
	snapshot := func(node string, with bool) {
		p := room.MediaPresence{NodeID: node, At: n.clk.Now(), Sessions: []room.MediaJoin{}}
		if with {
			p.Sessions = append(p.Sessions, n.joined)
		}
		n.e.MediaPresence(p)
		n.sweep() // the presence was sent before the sweep: applied
	}
	// Neither node holds the room yet: their empty snapshots end nobody.
	peers.owns = true
	snapshot("m1", false)
	snapshot("m2", false)
	if st := n.status(); st != room.ParticipantJoined {
		t.Fatalf("after the snapshots of nodes that never held the room: %s", st)
	}
	// m1 holds it, then no more, while the workspace moves away: ends
	// nobody here (the new owner's snapshot part has its sessions).
	snapshot("m1", true)
	peers.owns = false
	snapshot("m1", false)
	if st := n.status(); st != room.ParticipantJoined {
		t.Fatalf("a snapshot reached a node the workspace is moving away from: %s", st)
	}
	// Owned: m1 holds it, then no more: its session ended on m1.
	peers.owns = true
	snapshot("m1", true)
	snapshot("m2", false)
	if st := n.status(); st != room.ParticipantJoined {
		t.Fatalf("another node's snapshot ended the participant on m1: %s", st)
	}
	snapshot("m1", false)
	waitUntil(t, "the participant whose session m1 no longer holds is left", func() bool { return n.status() == room.ParticipantLeft })
}
