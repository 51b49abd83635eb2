package e2e

import (
	"fmt"
	"testing"
)

// TestWebhookRoomEventsInOrder: the rooms' events to one endpoint over the
// real server, with the rooms' events interleaved in the outbox (the
// joins, leaves and ends of a dozen rooms in turn, many of them in one
// fan-out step). With one attempt in flight per endpoint
// (--webhook-window=1), every room's events arrive in sequence order; with
// the default window requests may arrive in another order, and every
// room's sequence numbers still arrive, 1 to its last, without a gap.
func TestWebhookRoomEventsInOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flags   []string
		ordered bool
	}{
		{"window of one", []string{"--webhook-window=1"}, true},
		{"default window", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newWHReceiver(t)
			e := start(t, rcv.flags(tc.flags...)...)
			rcv.setNow(e.clock.Now)
			epID, secret := e.whCreate(rcv.url("/rooms"), nil)

			// Each room: room.started, two participant.joined, two
			// participant.left and usage.finalized, room.ended.
			const rooms, perRoom = 12, 8
			ids := make([]string, rooms)
			pids := make([][2]string, rooms)
			tokens := make([][2]string, rooms)
			for i := range ids {
				ids[i] = e.createRoom(map[string]any{"name": fmt.Sprintf("order-%d", i)})
				for j := range 2 {
					pids[i][j], tokens[i][j] = e.createParticipant(ids[i], nil)
				}
			}
			clients := make([][2]*mediaClient, rooms)
			for j := range 2 {
				for i := range ids {
					clients[i][j] = e.joinMedia(tokens[i][j])
				}
			}
			for i := range ids {
				clients[i][0].send(map[string]any{"type": "leave"})
			}
			e.eventually("every room's first participant left", func() bool {
				for i := range ids {
					if e.participantStatus(ids[i], pids[i][0]) != "left" {
						return false
					}
				}
				return true
			})
			for i := range ids {
				e.do("DELETE", "/v1/rooms/"+ids[i], e.Boot.APIKey, nil).must(t, 200)
			}

			rcv.waitEvents(e, "/rooms", rooms*perRoom)
			arrived := map[string][]int{} // room -> sequence numbers, in arrival order
			for _, ev := range whCheckAll(t, rcv.requests("/rooms"), secret, e.Boot.ProjectID) {
				room, _ := ev.Data["room_id"].(string)
				arrived[room] = append(arrived[room], ev.seq(t))
			}
			outOfOrder := 0
			for _, room := range ids {
				seqs := arrived[room]
				seen := map[int]bool{}
				inOrder := true
				for i, s := range seqs {
					seen[s] = true
					inOrder = inOrder && s == i+1
				}
				if len(seqs) != perRoom || len(seen) != perRoom {
					t.Fatalf("room %s: sequences %v, want %d distinct", room, seqs, perRoom)
				}
				for s := 1; s <= perRoom; s++ {
					if !seen[s] {
						t.Fatalf("room %s: sequences %v, %d missing", room, seqs, s)
					}
				}
				if !inOrder {
					outOfOrder++
					if tc.ordered {
						t.Fatalf("room %s: events arrived in the order %v with one attempt in flight", room, seqs)
					}
				}
			}
			e.eventually("every delivery recorded as succeeded", func() bool {
				dls := e.whDeliveries(epID)
				for _, dl := range dls {
					if dl["status"] != "succeeded" {
						return false
					}
				}
				return len(dls) == rooms*perRoom
			})
			t.Logf("%d of %d rooms' events arrived out of sequence order", outOfOrder, rooms)
		})
	}
}
