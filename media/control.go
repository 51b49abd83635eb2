package media

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"rtcd/auth"
	"rtcd/clock"
)

// Commands the control plane sends a node over HTTP, the "command" of a
// Command.
const (
	CommandCloseRoom         = "close_room"
	CommandRemoveParticipant = "remove_participant"
	CommandAdmitSession      = "admit_session"
	CommandCloseSession      = "close_session"
)

// maxCommandBodyBytes bounds a command body: two ids of at most
// auth.MaxIDLength bytes, a reason of at most maxReasonBytes, escaping and
// keys fit well inside it.
const maxCommandBodyBytes = 2048

// Command is the signed body of a control request to a node:
//
//	POST /internal/rooms/{room_id}/close                                 {"command":"close_room","room_id":…,"reason":…}
//	POST /internal/rooms/{room_id}/participants/{participant_id}/remove  {"command":"remove_participant","room_id":…,"participant_id":…}
//	POST /internal/rooms/{room_id}/participants/{participant_id}/sessions/{session_id}/admit
//	     {"command":"admit_session","room_id":…,"participant_id":…,"session_id":…}
//	POST /internal/rooms/{room_id}/participants/{participant_id}/sessions/{session_id}/close
//	     {"command":"close_session","room_id":…,"participant_id":…,"session_id":…,"code":…}
//
// The ids are repeated in the body because only the body is signed.
type Command struct {
	Command       string `json:"command"`
	RoomID        string `json:"room_id"`
	ParticipantID string `json:"participant_id,omitempty"`
	SessionID     string `json:"session_id,omitempty"`
	Code          string `json:"code,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// path returns the endpoint of c, or "" for an unknown command.
func (c Command) path() string {
	switch c.Command {
	case CommandCloseRoom:
		return "/internal/rooms/" + url.PathEscape(c.RoomID) + "/close"
	case CommandRemoveParticipant:
		return "/internal/rooms/" + url.PathEscape(c.RoomID) + "/participants/" + url.PathEscape(c.ParticipantID) + "/remove"
	case CommandAdmitSession:
		return c.sessionPath() + "/admit"
	case CommandCloseSession:
		return c.sessionPath() + "/close"
	}
	return ""
}

func (c Command) sessionPath() string {
	return "/internal/rooms/" + url.PathEscape(c.RoomID) + "/participants/" + url.PathEscape(c.ParticipantID) +
		"/sessions/" + url.PathEscape(c.SessionID)
}

// NewControlHandler returns the node's control endpoints, which pass
// verified commands to engine (normally the *Node):
//
//	POST /internal/rooms/{room_id}/close
//	POST /internal/rooms/{room_id}/participants/{participant_id}/remove
//	POST /internal/rooms/{room_id}/participants/{participant_id}/sessions/{session_id}/admit
//	POST /internal/rooms/{room_id}/participants/{participant_id}/sessions/{session_id}/close
//
// Each request must be signed with key (SignRequest) within
// DefaultSignatureToleranceSeconds of clk, and its body must be the Command
// for exactly that path. Answers: 204 done, 401 signature refused, 400 body
// refused, 413 body too large. A replayed command within the tolerance is
// harmless: commands are idempotent.
func NewControlHandler(engine Engine, key [32]byte, clk clock.Clock) http.Handler {
	if clk == nil {
		clk = clock.Real{}
	}
	h := &controlHandler{engine: engine, key: key, clock: clk}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /internal/rooms/{room_id}/close", func(w http.ResponseWriter, r *http.Request) {
		h.serve(w, r, Command{Command: CommandCloseRoom, RoomID: r.PathValue("room_id")})
	})
	mux.HandleFunc("POST /internal/rooms/{room_id}/participants/{participant_id}/remove", func(w http.ResponseWriter, r *http.Request) {
		h.serve(w, r, Command{Command: CommandRemoveParticipant, RoomID: r.PathValue("room_id"), ParticipantID: r.PathValue("participant_id")})
	})
	mux.HandleFunc("POST /internal/rooms/{room_id}/participants/{participant_id}/sessions/{session_id}/admit", func(w http.ResponseWriter, r *http.Request) {
		h.serve(w, r, Command{Command: CommandAdmitSession, RoomID: r.PathValue("room_id"), ParticipantID: r.PathValue("participant_id"),
			SessionID: r.PathValue("session_id")})
	})
	mux.HandleFunc("POST /internal/rooms/{room_id}/participants/{participant_id}/sessions/{session_id}/close", func(w http.ResponseWriter, r *http.Request) {
		h.serve(w, r, Command{Command: CommandCloseSession, RoomID: r.PathValue("room_id"), ParticipantID: r.PathValue("participant_id"),
			SessionID: r.PathValue("session_id")})
	})
	return mux
}

type controlHandler struct {
	engine Engine
	key    [32]byte
	clock  clock.Clock
}

// serve verifies the request and runs the command if the body is want (its
// reason and code aside).
func (h *controlHandler) serve(w http.ResponseWriter, r *http.Request, want Command) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCommandBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "could not read body", http.StatusBadRequest)
		return
	}
	err = VerifyReport(h.key, r.Header.Get(HeaderTimestamp), r.Header.Get(HeaderSignature), body, h.clock.Now(),
		DefaultSignatureToleranceSeconds*time.Second)
	if err != nil {
		// One answer for every signature failure: details would only help
		// a forger.
		http.Error(w, "signature refused", http.StatusUnauthorized)
		return
	}
	var got Command
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if dec.Decode(&got) != nil {
		http.Error(w, "body is not a command", http.StatusBadRequest)
		return
	}
	reason, code := got.Reason, got.Code
	got.Reason, got.Code = "", ""
	perSession := got.Command == CommandAdmitSession || got.Command == CommandCloseSession
	if got != want || !validID(got.RoomID) || (got.Command != CommandCloseRoom && !validID(got.ParticipantID)) ||
		(perSession && !validID(got.SessionID)) || len(reason) > maxReasonBytes ||
		(got.Command == CommandCloseSession) != (code != "") || (code != "" && !ValidSessionCloseCode(code)) {
		http.Error(w, "body is not the command for this path", http.StatusBadRequest)
		return
	}
	switch got.Command {
	case CommandCloseRoom:
		h.engine.CloseRoom(got.RoomID, reason)
	case CommandRemoveParticipant:
		h.engine.RemoveParticipant(got.RoomID, got.ParticipantID)
	case CommandAdmitSession:
		h.engine.AdmitSession(got.RoomID, got.ParticipantID, got.SessionID)
	case CommandCloseSession:
		h.engine.CloseSession(got.RoomID, got.ParticipantID, got.SessionID, code)
	}
	w.WriteHeader(http.StatusNoContent)
}

func validID(id string) bool { return id != "" && len(id) <= auth.MaxIDLength }

// HTTPEngine is the Engine of a node running on its own: each command is a
// signed POST to the node's control endpoints (NewControlHandler).
// CloseRoom and RemoveParticipant never block: they queue the command
// (bounded), and one goroutine sends the queue in order, retrying network
// errors, 429 and 5xx with backoff; a command dropped (full queue,
// retries exhausted) is counted in Dropped. Send makes one synchronous
// attempt for callers that want the outcome.
type HTTPEngine struct {
	s *signedSender
}

// NewHTTPEngine starts an HTTPEngine; cfg.BaseURL is the node's control
// origin. Call Close to flush and stop it.
func NewHTTPEngine(cfg HTTPConfig) (*HTTPEngine, error) {
	s, err := newSignedSender(cfg)
	if err != nil {
		return nil, err
	}
	return &HTTPEngine{s: s}, nil
}

// CloseRoom implements Engine by queuing a close_room command.
func (e *HTTPEngine) CloseRoom(roomID, reason string) {
	c := Command{Command: CommandCloseRoom, RoomID: roomID, Reason: truncate(reason, maxReasonBytes)}
	e.s.enqueue(c.path(), "", c)
}

// RemoveParticipant implements Engine by queuing a remove_participant
// command.
func (e *HTTPEngine) RemoveParticipant(roomID, participantID string) {
	c := Command{Command: CommandRemoveParticipant, RoomID: roomID, ParticipantID: participantID}
	e.s.enqueue(c.path(), "", c)
}

// AdmitSession implements Engine by queuing an admit_session command.
func (e *HTTPEngine) AdmitSession(roomID, participantID, sessionID string) {
	c := Command{Command: CommandAdmitSession, RoomID: roomID, ParticipantID: participantID, SessionID: sessionID}
	e.s.enqueue(c.path(), "", c)
}

// CloseSession implements Engine by queuing a close_session command.
func (e *HTTPEngine) CloseSession(roomID, participantID, sessionID, code string) {
	c := Command{Command: CommandCloseSession, RoomID: roomID, ParticipantID: participantID, SessionID: sessionID, Code: code}
	e.s.enqueue(c.path(), "", c)
}

// Send sends c once and returns when the node has answered: nil for 2xx.
// It is not queued, so it is not ordered with the queued commands.
func (e *HTTPEngine) Send(ctx context.Context, c Command) error {
	path := c.path()
	if path == "" {
		return fmt.Errorf("media: unknown command %q", c.Command)
	}
	body, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("media: encoding command: %w", err)
	}
	return e.s.post(ctx, path, body)
}

// Dropped returns how many queued commands were given up on.
func (e *HTTPEngine) Dropped() int64 { return e.s.dropped.Load() }

// Close stops taking commands and sends the queued ones, giving up on the
// rest when ctx is done (then it returns ctx's error).
func (e *HTTPEngine) Close(ctx context.Context) error { return e.s.close(ctx) }
