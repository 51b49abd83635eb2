package actors

import (
	"errors"
	"time"

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
	return e.withReservation(c.ProjectID, roomID, participantID, body), nil
}

// withReservation is a participant's record as the API shows it: the
// durable record, or connected when its room holds a live reservation
// for it in memory (a connect is not recorded; its join is).
func (e *Engine) withReservation(projectID, roomID, participantID string, record []byte) []byte {
	h, ok := e.room(roomID)
	if !ok || h.projectID != projectID {
		return record
	}
	connectedAt, reserved := h.gate.Reservation(participantID, e.env.Clock.Now())
	return room.ShowReservation(record, connectedAt, reserved)
}

// ListParticipants lists a room's participants, newest first.
func (e *Engine) ListParticipants(c *core.Caller, roomID string, limit int) ([]byte, *apierr.Error) {
	if _, err := e.GetRoom(c, roomID); err != nil {
		return nil, err
	}
	return e.listPage(persistence.IndexPrefix(persistence.PrefixPartIdx, c.ProjectID+"/"+roomID), limit, false,
		func(id []byte) ([]byte, error) {
			body, err := e.env.Store.Get(room.ParticipantRecordKey(c.ProjectID, roomID, string(id)))
			if err != nil {
				return nil, err
			}
			return e.withReservation(c.ProjectID, roomID, string(id), body), nil
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
	body, err := e.AppendConnect(make([]byte, 0, connectBodyBytes), p, sourceIP)
	if err != nil {
		return Result{}, err
	}
	return Result{Status: 200, Body: body}, nil
}

// checkConnect runs the checks of a connect that change nothing: the body,
// the token, and that its project exists.
func (e *Engine) checkConnect(p *ConnectParams, now time.Time) (auth.ParticipantClaims, *projectHandle, *apierr.Error) {
	if p.Token == nil {
		return auth.ParticipantClaims{}, nil, apierr.Invalid("token", "token is required")
	}
	if p.SDK != nil {
		if err := checkText("sdk.name", &p.SDK.Name, MaxSDKFieldBytes); err != nil {
			return auth.ParticipantClaims{}, nil, err
		}
		if err := checkText("sdk.version", &p.SDK.Version, MaxSDKFieldBytes); err != nil {
			return auth.ParticipantClaims{}, nil, err
		}
		if err := checkText("sdk.platform", &p.SDK.Platform, MaxSDKFieldBytes); err != nil {
			return auth.ParticipantClaims{}, nil, err
		}
	}
	claims, err := e.env.Keys.VerifyParticipantToken(*p.Token, now)
	switch {
	case errors.Is(err, auth.ErrTokenExpired):
		return claims, nil, apierr.New(apierr.ParticipantTokenExpired, "the participant token has expired; ask your backend for a new one")
	case err != nil:
		return claims, nil, apierr.New(apierr.ParticipantTokenInvalid, "the participant token is malformed or its signature does not verify")
	}
	h, ok := e.project(claims.ProjectID)
	if !ok {
		return claims, nil, apierr.New(apierr.PermissionDenied, "the project of this token does not exist")
	}
	return claims, h, nil
}

// connectBodyBytes is room enough for a connect session's body (about 540
// bytes with the longest ids a token carries).
const connectBodyBytes = 1024

// AppendConnect is Connect appending the connect session's body to dst
// (the caller's pooled buffer). The request reads the engine's clock once:
// its rates, the token's expiry, the reservation and the media token's
// times are all of that one instant.
func (e *Engine) AppendConnect(dst []byte, p *ConnectParams, sourceIP string) ([]byte, *apierr.Error) {
	now := e.env.Clock.Now()
	ipRate := core.RateCheck{Key: "connect_ip:" + sourceIP, What: "connect_per_ip_per_minute", LimitPerMinute: e.env.Settings.ConnectPerIPPerMinute}
	// The checks that change nothing come first; the rates are then
	// decided in the spec's order, the source address's before anything
	// else is answered, and the project's after it, together (one round
	// trip to a shared counter store): a request the address's limit
	// refuses spends nothing of the project's. The price: a flood from one
	// address over its limit pays the token's check (about 0.6 µs) before
	// its refusal.
	claims, h, invalid := e.checkConnect(p, now)
	if invalid != nil {
		if err := e.env.AllowRateAt(ipRate.Key, ipRate.What, ipRate.LimitPerMinute, now); err != nil {
			return nil, err
		}
		return nil, invalid
	}
	limits := e.env.LimitsOf(h.gate.Record.Load())
	projectRate := core.RateCheck{Key: "connect:" + claims.ProjectID, What: "connect_requests_per_minute", LimitPerMinute: limits.ConnectRequestsPerMinute}
	if err := e.env.AllowRatesAt(ipRate, projectRate, now); err != nil {
		return nil, err
	}
	rh, ok := e.room(claims.RoomID)
	if !ok || rh.projectID != claims.ProjectID {
		_, err := e.connectToStoppedRoom(claims.ProjectID, claims.RoomID)
		return nil, err
	}
	// Decided here, on the request's goroutine, against what the room
	// publishes: no message, no journal write (the join is the point of
	// record). The token is signed after, outside anything shared.
	s, aerr := rh.gate.Connect(e.env, claims.ParticipantID, now)
	if aerr != nil {
		return nil, aerr
	}
	mediaToken := e.env.Keys.SignMediaToken(auth.MediaClaims{
		SessionID: s.SessionID, ProjectID: s.ProjectID, RoomID: s.RoomID, ParticipantID: s.ParticipantID,
		Role: s.Role, IssuedAt: s.IssuedAt, ExpiresAt: s.ExpiresAt,
	})
	return room.AppendConnectBody(dst, s, e.endpointJSON(claims.RoomID), mediaToken), nil
}

// endpointJSON is the connect session's endpoint (the media URL), encoded
// once: the room's registered media node's, else the configured one.
func (e *Engine) endpointJSON(roomID string) []byte {
	if n := e.env.Media.NodeOf(roomID); n != nil {
		return n.EndpointJSON
	}
	url := e.env.Settings.MediaURL
	if enc := e.connectEndpoint.Load(); enc != nil && enc.url == url {
		return enc.json
	}
	enc := &encodedEndpoint{url: url, json: room.EncodeEndpoint(url)}
	e.connectEndpoint.Store(enc)
	return enc.json
}

// encodedEndpoint is a media URL and its JSON.
type encodedEndpoint struct {
	url  string
	json []byte
}

// connectToStoppedRoom answers a connect to a room with no live actor:
// unknown, ended (and passivated), or being replaced.
func (e *Engine) connectToStoppedRoom(projectID, roomID string) (Result, *apierr.Error) {
	record, err := e.env.Store.Get(room.RecordKey(projectID, roomID))
	if err != nil {
		return Result{}, notFoundOrInternal(err, apierr.New(apierr.RoomNotFound, "no room %q in this project", roomID))
	}
	var v room.RoomView
	if json.Unmarshal(record, &v) != nil || v.Status != room.RoomEnded {
		return Result{}, core.ErrUnavailable // a live room whose actor was just replaced; the caller may retry
	}
	return endedRoomError(record)
}

// --- media reports ---------------------------------------------------------

// SetMedia connects the media engine; nil means none (rooms then close
// without asking a media engine).
func (e *Engine) SetMedia(m core.MediaEngine) { e.env.Media.SetEngine(m) }

// MediaNode is a media node registered with a cluster, as SetMediaNodes
// takes it.
type MediaNode struct {
	ID, URL string
	Engine  core.MediaEngine
}

// SetMediaNodes replaces the media nodes registered with the cluster: each
// room is then served by one of them (core.MediaLink.NodeOf), its connects
// answered with that node's URL and its commands sent to it; none: the
// engine of SetMedia serves every room.
func (e *Engine) SetMediaNodes(nodes []MediaNode) {
	set := make([]*core.MediaNode, 0, len(nodes))
	for _, n := range nodes {
		set = append(set, &core.MediaNode{ID: n.ID, URL: n.URL, EndpointJSON: room.EncodeEndpoint(n.URL), Engine: n.Engine})
	}
	e.env.Media.SetNodes(set, e.env.Clock.Now(), e.env.Clock.Monotonic())
}

// MediaJoined routes a join report to its room (on a cluster, through its
// workspace's node). A room with no live actor (ended and passivated, or
// unknown) admits nobody: the session is closed.
func (e *Engine) MediaJoined(r room.MediaJoin) {
	if !e.forwardMediaReport(r.ProjectID, r.RoomID, callMediaJoined, r) {
		e.mediaJoinedHere(r)
	}
}

func (e *Engine) mediaJoinedHere(r room.MediaJoin) {
	e.env.Media.NoteRoom(r.RoomID, r.NodeID) // a registered node's: the room's call is there
	if h, ok := e.room(r.RoomID); ok && h.projectID == r.ProjectID {
		e.system.Root.Send(h.pid, room.MediaJoined{Report: r})
		return
	}
	if m := e.env.Media.Engine(); m != nil {
		m.CloseSession(r.RoomID, r.ParticipantID, r.SessionID, room.RefuseRoomClosed)
	}
}

// MediaLeft routes a leave report to its room.
func (e *Engine) MediaLeft(r room.MediaLeave) {
	if !e.forwardMediaReport(r.ProjectID, r.RoomID, callMediaLeft, r) {
		e.mediaLeftHere(r)
	}
}

func (e *Engine) mediaLeftHere(r room.MediaLeave) {
	if h, ok := e.room(r.RoomID); ok && h.projectID == r.ProjectID {
		e.system.Root.Send(h.pid, room.MediaLeft{Report: r})
	}
}

// MediaPresence hands a node's snapshot to every live room the node
// serves (a room absent from it has nobody on the node): every room, when
// one node serves them all; a registered node's rooms, when a cluster's
// media nodes registered.
func (e *Engine) MediaPresence(p room.MediaPresence) {
	byRoom := make(map[string]map[string]room.MediaJoin)
	for _, s := range p.Sessions {
		if byRoom[s.RoomID] == nil {
			byRoom[s.RoomID] = make(map[string]room.MediaJoin)
		}
		byRoom[s.RoomID][s.ParticipantID] = s
	}
	pending := make(map[string][]room.MediaJoin)
	for _, s := range p.Pending {
		pending[s.RoomID] = append(pending[s.RoomID], s)
	}
	held := make(map[string]bool, len(byRoom)+len(pending))
	for id := range byRoom {
		held[id] = true
	}
	for id := range pending {
		held[id] = true
	}
	dropped, registered := e.env.Media.PresenceOf(p.NodeID, p.At, e.env.Clock.Monotonic(), held)
	if !registered {
		e.env.Media.Presence(p.At, e.env.Clock.Monotonic())
		if !e.env.Media.Registered() { // this one node serves every room
			e.rooms.Range(func(id, v any) bool {
				e.system.Root.Send(v.(*roomHandle).pid, room.Presence{At: p.At, Sessions: byRoom[id.(string)], Pending: pending[id.(string)]})
				return true
			})
		}
		return
	}
	// A registered node speaks for the rooms it holds, and for those it
	// held and holds no more (their sessions are gone), never for a room
	// whose call may be on another node; and only for rooms of workspaces
	// this node owns (a workspace moving away still has its rooms here
	// while they drain, and another node's part has their sessions).
	tell := func(id string, sessions map[string]room.MediaJoin, waiting []room.MediaJoin) {
		if h, ok := e.room(id); ok && e.ownsRoom(h) {
			e.system.Root.Send(h.pid, room.Presence{At: p.At, Sessions: sessions, Pending: waiting})
		}
	}
	for id := range held {
		tell(id, byRoom[id], pending[id])
	}
	for _, id := range dropped {
		tell(id, nil, nil)
	}
}

// ownsRoom tells whether this node owns the room's workspace now (always,
// on a single node).
func (e *Engine) ownsRoom(h *roomHandle) bool {
	if e.peers == nil {
		return true
	}
	p, ok := e.project(h.projectID)
	if !ok {
		return false
	}
	rec := p.gate.Record.Load()
	return rec != nil && e.peers.Owns(rec.AccountID)
}
