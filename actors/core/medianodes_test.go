package core

import (
	"fmt"
	"testing"
	"time"
)

type recordedCommands struct{ got []string }

func (r *recordedCommands) CloseRoom(roomID, _ string) { r.got = append(r.got, "close "+roomID) }
func (r *recordedCommands) RemoveParticipant(roomID, p string) {
	r.got = append(r.got, "remove "+roomID)
}
func (r *recordedCommands) AdmitSession(roomID, _, _ string)    { r.got = append(r.got, "admit "+roomID) }
func (r *recordedCommands) CloseSession(roomID, _, _, _ string) { r.got = append(r.got, "end "+roomID) }
func newMediaNode(id string, e MediaEngine) *MediaNode {
	return &MediaNode{ID: id, URL: "ws://" + id + "/rtc", Engine: e}
}
func (m *MediaLink) setNodesAt(seen time.Duration, nodes ...*MediaNode) {
	m.SetNodes(nodes, time.Unix(0, 0), seen)
}

// Registered media nodes: rooms spread over them by rendezvous, a room
// stays on the node holding its call while it lasts (a node joining takes
// none of them), commands go to the room's node, and each node's silence
// is its own.
func TestMediaNodesServeRooms(t *testing.T) {
	var m MediaLink
	single := &recordedCommands{}
	m.SetEngine(single)
	if m.NodeOf("room_1") != nil || m.Engine() != MediaEngine(single) {
		t.Fatal("with no node registered the one engine serves every room")
	}
	a, b, c := &recordedCommands{}, &recordedCommands{}, &recordedCommands{}
	m.setNodesAt(0, newMediaNode("a", a), newMediaNode("b", b))
	spread := map[string]int{}
	for i := range 200 {
		spread[m.NodeOf(fmt.Sprintf("room_%d", i)).ID]++
	}
	if spread["a"] < 60 || spread["b"] < 60 {
		t.Fatalf("200 rooms over two nodes: %v", spread)
	}

	// A room whose call is on b stays there when c joins, even if c is
	// its rendezvous choice then; commands follow it.
	var moved string
	m.setNodesAt(0, newMediaNode("a", a), newMediaNode("b", b), newMediaNode("c", c))
	for i := range 200 {
		if id := fmt.Sprintf("room_%d", i); m.NodeOf(id).ID == "c" {
			moved = id
			break
		}
	}
	if moved == "" {
		t.Fatal("no room's choice is the new node")
	}
	m.NoteRoom(moved, "b")
	if got := m.NodeOf(moved).ID; got != "b" {
		t.Fatalf("a room with its call on b is served by %s", got)
	}
	m.Engine().CloseRoom(moved, "ended")
	if len(b.got) != 1 || len(c.got) != 0 || len(single.got) != 0 {
		t.Fatalf("commands: b %v, c %v, the one engine %v", b.got, c.got, single.got)
	}
	// b's presence without the room: its call ended (b spoke for it: it is
	// dropped), the room follows its rendezvous choice again.
	if dropped, ok := m.PresenceOf("b", time.Unix(10, 0), 10*time.Second, map[string]bool{}); !ok || len(dropped) != 1 || dropped[0] != moved {
		t.Fatalf("b's presence: dropped %v, %v", dropped, ok)
	}
	if got := m.NodeOf(moved).ID; got != "c" {
		t.Fatalf("an empty room stays on %s", got)
	}
	if m.HeldBy(moved) != nil {
		t.Fatal("a room no node holds is held")
	}
	if _, ok := m.PresenceOf("stranger", time.Unix(10, 0), 10*time.Second, nil); ok {
		t.Fatal("an unregistered node's presence taken as a registered one's")
	}
	m.NoteRoom(moved, "stranger")
	if got := m.NodeOf(moved).ID; got != "c" {
		t.Fatalf("a report of an unregistered node moved the room to %s", got)
	}

	// A room no node holds counts its silence from when it was first found
	// so, not from any node's presence.
	if at, seen, registered := m.LastPresenceOf(moved, time.Unix(12, 0), 12*time.Second); !registered || seen != 12*time.Second || !at.Equal(time.Unix(12, 0)) {
		t.Fatalf("an unheld room's presence: %v %v %v", at, seen, registered)
	}
	if _, seen, _ := m.LastPresenceOf(moved, time.Unix(14, 0), 14*time.Second); seen != 12*time.Second {
		t.Fatalf("an unheld room's silence restarted: %v", seen)
	}

	// Each node's silence is its own; a node already known keeps its
	// clock when the list changes.
	m.PresenceOf("c", time.Unix(20, 0), 20*time.Second, map[string]bool{moved: true})
	at, seen, registered := m.LastPresenceOf(moved, time.Unix(21, 0), 21*time.Second)
	if !registered || seen != 20*time.Second || !at.Equal(time.Unix(20, 0).UTC()) {
		t.Fatalf("presence of the room's node: %v %v %v", at, seen, registered)
	}
	m.setNodesAt(30*time.Second, newMediaNode("c", c), newMediaNode("d", nil))
	if _, seen, _ := m.LastPresenceOf(moved, time.Unix(31, 0), 31*time.Second); seen != 20*time.Second {
		t.Fatalf("c's clock after the list changed: %v", seen)
	}

	// The node holding a call left the cluster: its rooms go to a node
	// registered now.
	m.setNodesAt(40*time.Second, newMediaNode("d", nil))
	if got := m.NodeOf(moved).ID; got != "d" {
		t.Fatalf("a room of a node that left is served by %s", got)
	}
	if m.HeldBy(moved) != nil {
		t.Fatal("a node that left still holds a room")
	}
	m.setNodesAt(40 * time.Second)
	if m.NodeOf(moved) != nil || m.Engine() != MediaEngine(single) || m.Registered() {
		t.Fatal("with every node gone the one engine serves every room again")
	}
	if _, _, registered := m.LastPresenceOf(moved, time.Unix(41, 0), 41*time.Second); registered {
		t.Fatal("with every node gone a room's presence is still a registered node's")
	}
}
