package room

import (
	"fmt"
	"testing"
	"time"
)

// stubMedia is the media engine of a room alone: it records the room's
// commands, in order, as "admit <participant> <session>" and "close
// <participant> <session> <code>".
type stubMedia struct{ calls chan string }

func newStubMedia() *stubMedia { return &stubMedia{calls: make(chan string, 1024)} }

func (m *stubMedia) CloseRoom(roomID, reason string) { m.calls <- "close_room " + reason }
func (m *stubMedia) RemoveParticipant(roomID, participantID string) {
	m.calls <- "remove " + participantID
}
func (m *stubMedia) AdmitSession(roomID, participantID, sessionID string) {
	m.calls <- fmt.Sprintf("admit %s %s", participantID, sessionID)
}
func (m *stubMedia) CloseSession(roomID, participantID, sessionID, code string) {
	m.calls <- fmt.Sprintf("close %s %s %s", participantID, sessionID, code)
}

// next is the next command the room gave (an admission comes from the
// syncer, once the join is durable).
func (m *stubMedia) next(t *testing.T) string {
	t.Helper()
	select {
	case c := <-m.calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("the room gave the media engine no command")
		return ""
	}
}

// none asserts the room gave no command (after its batches are durable).
func (m *stubMedia) none(t *testing.T) {
	t.Helper()
	select {
	case c := <-m.calls:
		t.Fatalf("unexpected media command %q", c)
	default:
	}
}
