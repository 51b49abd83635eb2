package actors

import (
	"errors"

	"github.com/goccy/go-json"
	"rtcd/actors/core"
	"rtcd/actors/project"
	"rtcd/actors/room"
	"rtcd/apierr"
	"rtcd/auth"
	"rtcd/ids"
	"rtcd/persistence"
)

// CreateRoom creates a room (POST /v1/rooms).
func (e *Engine) CreateRoom(c *core.Caller, p *RoomParams, idem *IdempotencyRequest) (Result, *apierr.Error) {
	v, err := validateRoom(p, e.env.Settings.Region)
	if err != nil {
		return Result{}, err
	}
	return e.createInProject(c, idem, func(ip *core.IdemPending) any { return project.CreateRoom{Caller: *c, Params: v, Idem: ip} })
}

// GetRoom reads a room's record (GET /v1/rooms/{id}).
func (e *Engine) GetRoom(c *core.Caller, roomID string) ([]byte, *apierr.Error) {
	if !ids.Valid(roomID, ids.Room) {
		return nil, apierr.New(apierr.RoomNotFound, "no room %q in this project", roomID)
	}
	body, err := e.env.Store.Get(room.RecordKey(c.ProjectID, roomID))
	if err != nil {
		return nil, notFoundOrInternal(err, apierr.New(apierr.RoomNotFound, "no room %s in this project", roomID))
	}
	return body, nil
}

// ListRooms lists the project's rooms, newest first (GET /v1/rooms).
func (e *Engine) ListRooms(c *core.Caller, limit int) ([]byte, *apierr.Error) {
	return e.listPage(persistence.IndexPrefix(persistence.PrefixRoomIdx, c.ProjectID), limit, true,
		func(roomID []byte) ([]byte, error) {
			return e.env.Store.Get(room.RecordKey(c.ProjectID, string(roomID)))
		})
}

// DeleteRoom ends a room (DELETE /v1/rooms/{id}); idempotent.
func (e *Engine) DeleteRoom(c *core.Caller, roomID string) (Result, *apierr.Error) {
	return e.askRoom(c.ProjectID, roomID, func() any { return room.Delete{Caller: *c} },
		func(record []byte) (Result, *apierr.Error) { return Result{Status: 200, Body: record}, nil })
}

// askRoom sends a command to a live room of the project. When the room has
// no live actor (it ended and was passivated), ifStopped answers from the
// room's record.
func (e *Engine) askRoom(projectID, roomID string, cmd func() any, ifStopped func(record []byte) (Result, *apierr.Error)) (Result, *apierr.Error) {
	notFound := apierr.New(apierr.RoomNotFound, "no room %q in this project", roomID)
	if !ids.Valid(roomID, ids.Room) {
		return Result{}, notFound
	}
	if h, ok := e.room(roomID); ok && h.projectID == projectID {
		if h.depth.Load() >= roomMailboxCapacity {
			return Result{}, errRoomBusy
		}
		r := e.ask(h.pid, cmd())
		if !r.Gone {
			return result(r)
		}
	}
	record, err := e.env.Store.Get(room.RecordKey(projectID, roomID))
	if err != nil {
		return Result{}, notFoundOrInternal(err, notFound)
	}
	var v room.RoomView
	if json.Unmarshal(record, &v) != nil || v.Status != room.RoomEnded {
		// A live room whose actor was just replaced; the caller may retry.
		return Result{}, core.ErrUnavailable
	}
	return ifStopped(record)
}

// errRoomBusy sheds a request for a room with roomMailboxCapacity
// commands already queued.
var errRoomBusy = func() *apierr.Error {
	err := apierr.New(apierr.ServiceUnavailable, "the room has too many requests queued; retry shortly").
		WithDetails("limit", roomMailboxCapacity)
	err.RetryAfterSeconds = 1
	return err
}()

// endedRoomError is the error for a command that needs a room that ended.
func endedRoomError(record []byte) (Result, *apierr.Error) {
	var v room.RoomView
	_ = json.Unmarshal(record, &v)
	if v.EndReason != nil && *v.EndReason == room.EndReasonExpired {
		return Result{}, apierr.New(apierr.RoomExpired, "room %s expired at %s", v.ID, v.ExpiresAt)
	}
	return Result{}, apierr.New(apierr.RoomEnded, "room %s has ended", v.ID)
}

// CreateParticipant creates a participant session and its token.
func (e *Engine) CreateParticipant(c *core.Caller, roomID string, p *ParticipantParams, idem *IdempotencyRequest) (Result, *apierr.Error) {
	v, err := validateParticipant(p)
	if err != nil {
		return Result{}, err
	}
	var res Result
	r := e.idempotent(c, idem, func(ip *core.IdemPending) core.Reply {
		var aerr *apierr.Error
		res, aerr = e.askRoom(c.ProjectID, roomID, func() any { return room.CreateParticipant{Caller: *c, Params: v, Idem: ip} }, endedRoomError)
		return core.Reply{Status: res.Status, Body: res.Body, Err: aerr}
	})
	return result(r)
}

// GetParticipant reads a participant's record.
func (e *Engine) GetParticipant(c *core.Caller, roomID, participantID string) ([]byte, *apierr.Error) {
	if _, err := e.GetRoom(c, roomID); err != nil {
		return nil, err
	}
	notFound := apierr.New(apierr.ParticipantNotFound, "no participant %q in room %s", participantID, roomID)
	if !ids.Valid(participantID, ids.Participant) {
		return nil, notFound
	}
	body, err := e.env.Store.Get(room.ParticipantRecordKey(c.ProjectID, roomID, participantID))
	if err != nil {
		return nil, notFoundOrInternal(err, notFound)
	}
	return body, nil
}

// ListParticipants lists a room's participants, newest first.
func (e *Engine) ListParticipants(c *core.Caller, roomID string, limit int) ([]byte, *apierr.Error) {
	if _, err := e.GetRoom(c, roomID); err != nil {
		return nil, err
	}
	return e.listPage(persistence.IndexPrefix(persistence.PrefixPartIdx, c.ProjectID+"/"+roomID), limit, false,
		func(id []byte) ([]byte, error) {
			return e.env.Store.Get(room.ParticipantRecordKey(c.ProjectID, roomID, string(id)))
		})
}

// RemoveParticipant removes a participant (DELETE); idempotent.
func (e *Engine) RemoveParticipant(c *core.Caller, roomID, participantID string) (Result, *apierr.Error) {
	if !ids.Valid(participantID, ids.Participant) {
		return Result{}, apierr.New(apierr.ParticipantNotFound, "no participant %q in room %s", participantID, roomID)
	}
	return e.askRoom(c.ProjectID, roomID, func() any { return room.RemoveParticipant{Caller: *c, ParticipantID: participantID} },
		func([]byte) (Result, *apierr.Error) {
			// The room ended, so every participant's session ended with it.
			body, err := e.GetParticipant(c, roomID, participantID)
			if err != nil {
				return Result{}, err
			}
			return Result{Status: 200, Body: body}, nil
		})
}

// Connect exchanges a participant token for a connect session (POST /v1/connect).
func (e *Engine) Connect(p *ConnectParams, sourceIP string) (Result, *apierr.Error) {
	if err := e.env.AllowRate("connect_ip:"+sourceIP, "connect_per_ip_per_minute", e.env.Settings.ConnectPerIPPerMinute); err != nil {
		return Result{}, err
	}
	if p.Token == nil {
		return Result{}, apierr.Invalid("token", "token is required")
	}
	if p.SDK != nil {
		if err := checkText("sdk.name", &p.SDK.Name, MaxSDKFieldBytes); err != nil {
			return Result{}, err
		}
		if err := checkText("sdk.version", &p.SDK.Version, MaxSDKFieldBytes); err != nil {
			return Result{}, err
		}
		if err := checkText("sdk.platform", &p.SDK.Platform, MaxSDKFieldBytes); err != nil {
			return Result{}, err
		}
	}
	claims, err := e.env.Keys.VerifyParticipantToken(*p.Token, e.env.Clock.Now())
	switch {
	case errors.Is(err, auth.ErrTokenExpired):
		return Result{}, apierr.New(apierr.ParticipantTokenExpired, "the participant token has expired; ask your backend for a new one")
	case err != nil:
		return Result{}, apierr.New(apierr.ParticipantTokenInvalid, "the participant token is malformed or its signature does not verify")
	}
	h, ok := e.project(claims.ProjectID)
	if !ok {
		return Result{}, apierr.New(apierr.PermissionDenied, "the project of this token does not exist")
	}
	limits := e.env.LimitsOf(h.gate.Record.Load())
	if err := e.env.AllowRate("connect:"+claims.ProjectID, "connect_requests_per_minute", limits.ConnectRequestsPerMinute); err != nil {
		return Result{}, err
	}
	return e.askRoom(claims.ProjectID, claims.RoomID, func() any { return room.Connect{Claims: claims} }, endedRoomError)
}

// --- media reports ---------------------------------------------------------

// SetMedia connects the media engine; nil means none (rooms then close
// without asking a media engine).
func (e *Engine) SetMedia(m core.MediaEngine) { e.env.Media.SetEngine(m) }

// MediaJoined routes a join report to its room.
func (e *Engine) MediaJoined(r room.MediaJoin) {
	if h, ok := e.room(r.RoomID); ok && h.projectID == r.ProjectID {
		e.system.Root.Send(h.pid, room.MediaJoined{Report: r})
	}
}

// MediaLeft routes a leave report to its room.
func (e *Engine) MediaLeft(r room.MediaLeave) {
	if h, ok := e.room(r.RoomID); ok && h.projectID == r.ProjectID {
		e.system.Root.Send(h.pid, room.MediaLeft{Report: r})
	}
}

// MediaPresence hands a node's snapshot to every live room (a room absent
// from it has nobody on the node). One reference node serves all rooms.
func (e *Engine) MediaPresence(p room.MediaPresence) {
	byRoom := make(map[string]map[string]room.MediaJoin)
	for _, s := range p.Sessions {
		if byRoom[s.RoomID] == nil {
			byRoom[s.RoomID] = make(map[string]room.MediaJoin)
		}
		byRoom[s.RoomID][s.ParticipantID] = s
	}
	e.env.Media.Presence(p.At, e.env.Clock.Monotonic())
	e.rooms.Range(func(id, v any) bool {
		e.system.Root.Send(v.(*roomHandle).pid, room.Presence{At: p.At, Sessions: byRoom[id.(string)]})
		return true
	})
}
