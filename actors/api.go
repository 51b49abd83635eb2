package actors

import (
	"bytes"
	"crypto/hmac"
	"errors"
	"fmt"

	"github.com/goccy/go-json"
	"rtcd/actors/core"
	"rtcd/actors/directory"
	"rtcd/actors/project"
	"rtcd/actors/room"
	"rtcd/actors/wallet"
	"rtcd/apierr"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/ids"
	"rtcd/persistence"
	"rtcd/scopes"
)

// Pagination bounds (spec section 4, pagination rules).
const (
	PageLimitMin     = 1
	PageLimitMax     = 100
	PageLimitDefault = 50
)

func result(r core.Reply) (Result, *apierr.Error) {
	if r.Err != nil {
		return Result{}, r.Err
	}
	return Result{Status: r.Status, Body: r.Body, Replayed: r.Replayed}, nil
}

// Authenticate resolves a bearer secret to its caller. Malformed secrets
// (wrong prefix, length, alphabet or checksum) are refused without a lookup.
func (e *Engine) Authenticate(secret string) (*core.Caller, *apierr.Error) {
	if !auth.CheckAPIKeyFormat(secret) {
		return nil, core.ErrBadCredential
	}
	rec := e.env.APIKeys.Lookup(e.env.Keys.HashAPIKey(secret))
	if rec == nil {
		return nil, core.ErrBadCredential
	}
	h, ok := e.project(rec.ProjectID)
	if !ok || h.gate.Record.Load().Status != core.ProjectActive {
		return nil, core.ErrBadCredential
	}
	if now := e.env.Clock.Now(); rec.NoteUse(now) {
		// Without waiting: the project journals it (touchKey) when it gets
		// to it, and only one such message per key is ever on its way.
		e.system.Root.Send(h.pid, project.TouchKey{KeyID: rec.KeyID, UsedAt: now})
	}
	return &core.Caller{ProjectID: rec.ProjectID, ActorType: "api_key", ActorID: rec.KeyID, Scopes: rec.Scopes}, nil
}

func (e *Engine) projectOf(c *core.Caller) (*projectHandle, *apierr.Error) {
	h, ok := e.project(c.ProjectID)
	if !ok {
		return nil, core.ErrBadCredential
	}
	return h, nil
}

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

// CreateAPIKey creates a key (POST /v1/api-keys).
func (e *Engine) CreateAPIKey(c *core.Caller, p *APIKeyParams, idem *IdempotencyRequest) (Result, *apierr.Error) {
	var name string
	if p.Name != nil {
		if err := checkOptionalText("name", p.Name, MaxAPIKeyNameBytes); err != nil {
			return Result{}, err
		}
		name = *p.Name
	}
	requested, err := parseScopes(p.Scopes)
	if err != nil {
		return Result{}, err
	}
	return e.createInProject(c, idem, func(ip *core.IdemPending) any {
		return project.CreateKey{Caller: *c, Name: name, Scopes: requested, Idem: ip}
	})
}

func parseScopes(names []string) (scopes.Set, *apierr.Error) {
	if len(names) == 0 {
		return 0, apierr.Invalid("scopes", "scopes must list at least one scope").WithDetails("allowed", scopes.All.Names())
	}
	if len(names) > scopes.MaxScopesPerKey {
		return 0, apierr.Invalid("scopes", "scopes may list at most %d scopes", scopes.MaxScopesPerKey)
	}
	var set scopes.Set
	for _, n := range names {
		s, ok := scopes.Parse(n)
		if !ok {
			return 0, apierr.Invalid("scopes", "unknown scope %q", n).WithDetails("allowed", scopes.All.Names())
		}
		if set.Has(s) {
			return 0, apierr.Invalid("scopes", "scope %q is listed twice", n)
		}
		set |= scopes.Set(s)
	}
	return set, nil
}

// ListAPIKeys lists the project's keys, active and revoked, newest first.
func (e *Engine) ListAPIKeys(c *core.Caller, limit int) ([]byte, *apierr.Error) {
	return e.listPage(persistence.IndexPrefix(persistence.PrefixKeyIdx, c.ProjectID), limit, false, upgradeKeyRecord)
}

// upgradeKeyRecord renders a stored ki/ record in the current shape of the
// API key object: records written before last_used_at existed lack the
// field, and the API never omits a field (it reads as null, never used).
func upgradeKeyRecord(record []byte) ([]byte, error) {
	var v project.APIKeyView
	if err := json.Unmarshal(record, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// RevokeAPIKey revokes a key (DELETE /v1/api-keys/{id}); idempotent.
func (e *Engine) RevokeAPIKey(c *core.Caller, keyID string) (Result, *apierr.Error) {
	if !ids.Valid(keyID, ids.APIKey) {
		return Result{}, apierr.New(apierr.APIKeyNotFound, "no API key %q in this project", keyID)
	}
	h, err := e.projectOf(c)
	if err != nil {
		return Result{}, err
	}
	return result(e.ask(h.pid, project.RevokeKey{Caller: *c, KeyID: keyID}))
}

// ProjectLimits returns the project's effective limits.
func (e *Engine) ProjectLimits(c *core.Caller) ([]byte, *apierr.Error) {
	h, err := e.projectOf(c)
	if err != nil {
		return nil, err
	}
	l := e.env.LimitsOf(h.gate.Record.Load())
	return core.MustJSON(struct {
		Object    string `json:"object"`
		ProjectID string `json:"project_id"`
		core.Limits
	}{"project_limits", c.ProjectID, l}), nil
}

// ListAuditLogs lists the project's audit log, newest first.
func (e *Engine) ListAuditLogs(c *core.Caller, limit int) ([]byte, *apierr.Error) {
	return e.listPage(persistence.IndexPrefix(persistence.PrefixAudit, c.ProjectID), limit, false, nil)
}

// listPage renders a page envelope of the newest limit entries under
// prefix. fetch maps an index value to its record; nil means the index value
// is the record. has_more is true only when an entry exists beyond the page.
func (e *Engine) listPage(prefix []byte, limit int, withCursor bool, fetch func(value []byte) ([]byte, error)) ([]byte, *apierr.Error) {
	var buf bytes.Buffer
	buf.WriteString(`{"object":"list","data":[`)
	n := 0
	hasMore := false
	var fetchErr error
	err := e.env.Store.Scan(prefix, limit+1, func(_, value []byte) bool {
		if n == limit {
			hasMore = true
			return false
		}
		record := value
		if fetch != nil {
			var err error
			if record, err = fetch(value); err != nil {
				fetchErr = err
				return false
			}
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		buf.Write(record)
		n++
		return true
	})
	if err == nil {
		err = fetchErr
	}
	if err != nil {
		return nil, apierr.New(apierr.Internal, "could not read the list")
	}
	buf.WriteString(`],"page":{"has_more":`)
	fmt.Fprint(&buf, hasMore)
	if withCursor {
		buf.WriteString(`,"next_cursor":null`)
	}
	buf.WriteString(`}}`)
	return buf.Bytes(), nil
}

func notFoundOrInternal(err error, notFound *apierr.Error) *apierr.Error {
	if errors.Is(err, persistence.ErrNotFound) {
		return notFound
	}
	return apierr.New(apierr.Internal, "could not read the record")
}

// --- bootstrap -----------------------------------------------------------

// ErrAlreadyInitialized is returned by Bootstrap on an initialised data dir.
var ErrAlreadyInitialized = errors.New("the data directory is already initialised")

var (
	initializedKey = persistence.Key(persistence.PrefixMeta, "initialized")
	keyCheckKey    = persistence.Key(persistence.PrefixMeta, "key-check")
)

// keyCheck is a keyed hash of a fixed text under the master key's derived
// keys, stored at bootstrap, so a start with another master key is refused.
func keyCheck(keys auth.Keys) []byte {
	h := keys.HashAPIKey("rtcd master key check v1")
	return h[:]
}

// CheckMasterKey verifies keys against the key check stored at bootstrap.
func CheckMasterKey(s *persistence.Store, keys auth.Keys) error {
	stored, err := s.Get(keyCheckKey)
	if errors.Is(err, persistence.ErrNotFound) {
		b := s.NewBatch() // initialised before key checks existed: record it now
		b.Set(keyCheckKey, keyCheck(keys))
		return s.CommitAndWait(b)
	}
	if err != nil {
		return err
	}
	if !hmac.Equal(stored, keyCheck(keys)) {
		return errors.New("the master key does not match the one this data directory was initialised with; refusing to start")
	}
	return nil
}

// Initialized reports whether the store was bootstrapped.
func Initialized(s *persistence.Store) (bool, error) {
	_, err := s.Get(initializedKey)
	if errors.Is(err, persistence.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// BootstrapResult is printed once by `rtcd init`.
type BootstrapResult struct {
	AccountID string `json:"account_id"`
	ProjectID string `json:"project_id"`
	APIKeyID  string `json:"api_key_id"`
	APIKey    string `json:"api_key"`
	// OwnerEmail is the dashboard user who owns the workspace.
	OwnerEmail string `json:"owner_email"`
}

// Bootstrap creates the first workspace, its project and an API key holding
// every scope, in one durable batch. Run before the engine starts.
// billing gives the opening credit (Billing.BootstrapCredit), recorded as
// an adjustment in the ledger so the ledger always sums to the balance.
// ownerEmail becomes the workspace's owner in the dashboard (signing in
// by e-mail link with it reaches the workspace).
func Bootstrap(s *persistence.Store, keys auth.Keys, clk clock.Clock, billing core.Billing, ownerEmail string) (BootstrapResult, error) {
	email, ok := deliverableEmail(ownerEmail)
	if !ok {
		return BootstrapResult{}, fmt.Errorf("actors: owner e-mail %q is not an address", ownerEmail)
	}
	if ok, err := Initialized(s); err != nil || ok {
		if err == nil {
			err = ErrAlreadyInitialized
		}
		return BootstrapResult{}, err
	}
	now := clk.Now()
	accountID := ids.New(ids.Account)
	proj := core.Project{ID: ids.New(ids.Project), AccountID: accountID, Name: directory.DefaultProjectName, Status: core.ProjectActive, CreatedAt: now}
	account := wallet.Account{ID: accountID, Name: "Default workspace", ProjectIDs: []string{proj.ID}, CreatedAt: now}
	secret, err := auth.NewAPIKeySecret()
	if err != nil {
		return BootstrapResult{}, err
	}
	operator := core.Actor{Type: "operator", ID: "rtcd init"}
	key := project.APIKey{ID: ids.New(ids.APIKey), Name: "bootstrap", Scopes: uint32(scopes.All), Last4: auth.Last4(secret),
		Hash: keys.HashAPIKey(secret), CreatedAt: now, CreatedBy: operator}
	owner := directory.User{ID: ids.New(ids.User), Email: email, Name: "", CreatedAt: now}

	// The first workspace: each owner's first state, in one batch.
	b := s.NewBatch()
	wallet.Genesis(b, account, billing, billing.BootstrapCredit, now)
	project.Genesis(b, proj, &key)
	directory.Genesis(b, owner, accountID, account.Name, proj.ID, now)
	audit := core.AuditEntry{Object: "audit_log_entry", ID: ids.New(ids.Audit), Action: "api_key.created", Actor: operator,
		Target: core.AuditTarget{Type: "api_key", ID: key.ID}, CreatedAt: core.Timestamp(now),
		Details: map[string]any{"name": key.Name, "scopes": scopes.All.Names()}}
	b.Set(persistence.IndexKey(persistence.PrefixAudit, proj.ID, now.UnixNano(), audit.ID), core.MustJSON(audit))
	wsAudit := core.AuditEntry{Object: "audit_log_entry", ID: ids.New(ids.Audit), Action: "account.created", Actor: operator,
		Target: core.AuditTarget{Type: "account", ID: accountID}, CreatedAt: core.Timestamp(now),
		Details: map[string]any{"name": account.Name, "owner_email": owner.Email}}
	b.Set(persistence.IndexKey(persistence.PrefixAccountAudit, accountID, now.UnixNano(), wsAudit.ID), core.MustJSON(wsAudit))
	b.Set(keyCheckKey, keyCheck(keys))
	b.Set(initializedKey, []byte(core.Timestamp(now)))
	if err := s.CommitAndWait(b); err != nil {
		return BootstrapResult{}, err
	}
	return BootstrapResult{AccountID: accountID, ProjectID: proj.ID, APIKeyID: key.ID, APIKey: secret, OwnerEmail: owner.Email}, nil
}
