package e2e

import "testing"

func TestSmokeRoomParticipantConnect(t *testing.T) {
	e := start(t)
	room := e.createRoom(map[string]any{"name": "standup"})
	_, token := e.createParticipant(room, map[string]any{"name": "ann"})
	r := e.connect(token).must(t, 200)
	if r.Str("endpoint") == "" || r.Str("media_token") == "" {
		t.Fatalf("connect session incomplete: %s", r.Raw)
	}
}
