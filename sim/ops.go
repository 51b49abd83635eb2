package sim

import (
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/goccy/go-json"
	"rtcd/actors/core"
	"rtcd/actors/directory"
	"rtcd/actors/project"
	"rtcd/actors/room"
	"rtcd/actors/wallet"
	"rtcd/ids"
	"rtcd/money"
	"rtcd/scopes"
)

// model is what the simulated clients know: the ids they were given
// (only by an answer, so only of what was acknowledged) and what they
// need to send the next command.
type model struct {
	owner     string // the dashboard user who owns every workspace
	accounts  []string
	projects  []*simProject
	rooms     []*simRoom
	parts     []*simPart
	keys      []*simKey
	endpoints []*simEndpoint
	topups    []*simTopup
	idem      []*simIdem
	serial    int // numbers names, URLs and idempotency keys
	// names are the last acknowledged names of workspaces and projects.
	names map[string]string
	// witnessed are the rooms acknowledged after their project's witness
	// endpoint: every event of theirs is fanned out while it is published.
	witnessed map[string]bool
}

type simProject struct {
	id, account string
	witness     *simEndpoint // an endpoint of every event type, never disabled by the run
}

type simRoom struct {
	id, project     string
	maxParticipants int64
}

type simPart struct {
	id, room, project string
	// sessions are the connect sessions the participant was given, in
	// the order they were issued: every connect is answered at once.
	sessions []*simSession
}

// simSession is a connect session as its media token carries it.
type simSession struct {
	id                  string
	issuedAt, expiresAt time.Time
	generation          int // the crashes before its connect: a crash loses its reservation
}

// session is the participant's session id, nil if it has none such (or p
// is nil).
func (p *simPart) session(id string) *simSession {
	if p == nil {
		return nil
	}
	for _, s := range p.sessions {
		if s.id == id {
			return s
		}
	}
	return nil
}

// latest is the participant's last session, nil before its first connect.
func (p *simPart) latest() *simSession {
	if len(p.sessions) == 0 {
		return nil
	}
	return p.sessions[len(p.sessions)-1]
}

type simKey struct{ id, project string }

type simEndpoint struct{ id, project, url string }

type simTopup struct{ id, account, project string }

// simIdem is a room creation made with an Idempotency-Key.
type simIdem struct {
	project, key string
	hash         [32]byte
	params       project.NewRoom
	body         []byte // the acknowledged answer; nil while none
	waiting      bool   // its create is waiting for its answer
}

// op is one kind of operation and how often the generator picks it.
type op struct {
	name   string
	weight int
	run    func(w *world)
}

// ops are the operations the generator draws from, with their weights.
var ops = []op{
	{"create_account", 1, (*world).createAccount},
	{"create_project", 1, (*world).createProject},
	{"archive_project", 1, (*world).archiveProject},
	{"rename_account", 1, (*world).renameAccount},
	{"rename_project", 1, (*world).renameProject},
	{"create_room", 10, (*world).createRoom},
	{"retry_idempotent", 3, (*world).retryIdempotent},
	{"delete_room", 2, (*world).deleteRoom},
	{"create_participant", 14, (*world).createParticipant},
	{"connect", 22, (*world).connect},
	{"media_join", 10, (*world).mediaJoin},
	{"media_leave", 4, (*world).mediaLeave},
	{"remove_participant", 3, (*world).removeParticipant},
	{"create_key", 2, (*world).createKey},
	{"revoke_key", 1, (*world).revokeKey},
	{"create_endpoint", 3, (*world).createEndpoint},
	{"disable_endpoint", 1, (*world).disableEndpoint},
	{"create_topup", 3, (*world).createTopup},
	{"pay_topup", 4, (*world).payTopup},
	{"adjust", 2, (*world).adjust},
	{"tick", 14, (*world).tick},
	{"deliver", 5, (*world).deliver},
	{"durable", 12, (*world).durableOp},
	{"crash", 2, (*world).crashOp},
}

var totalWeight = func() int {
	n := 0
	for _, o := range ops {
		n += o.weight
	}
	return n
}()

func (w *world) pick() op {
	n := w.rng.Intn(totalWeight)
	for _, o := range ops {
		if n < o.weight {
			return o
		}
		n -= o.weight
	}
	panic("unreachable")
}

// choose picks one of n things, or -1 for none.
func (w *world) choose(n int) int {
	if n == 0 {
		return -1
	}
	return w.rng.Intn(n)
}

// chooseRecent picks one of n things, three times in four among the last
// few: rooms and participants are made often and end, and commands to the
// live ones fill rooms and projects up to their caps.
func (w *world) chooseRecent(n, few int) int {
	if n == 0 {
		return -1
	}
	if n > few && w.rng.Intn(4) > 0 {
		return n - few + w.rng.Intn(few)
	}
	return w.rng.Intn(n)
}

func (w *world) serial() int { w.m.serial++; return w.m.serial }

func (w *world) user() core.DashboardUser {
	return core.DashboardUser{UserID: w.m.owner, RequestID: "req_sim", SourceIP: "127.0.0.1"}
}

// caller is an API key of the project holding every scope (authentication
// ran before a command is sent; the owners trust the caller they are given).
func caller(projectID string) core.Caller {
	return core.Caller{ProjectID: projectID, ActorType: "api_key", ActorID: "key_sim", Scopes: scopes.All, RequestID: "req_sim", SourceIP: "127.0.0.1"}
}

// idOf is the "id" of an answer's body.
func idOf(body []byte) string {
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(body, &v)
	return v.ID
}

func (w *world) note(what string, holds func(v *view) error) {
	w.facts = append(w.facts, fact{what: what, holds: holds})
}

// project picks a project, half the time the first: rooms crowd into
// one project, up to its caps.
func (w *world) project() *simProject {
	if len(w.m.projects) > 0 && w.rng.Intn(2) == 0 {
		return w.m.projects[0]
	}
	if i := w.choose(len(w.m.projects)); i >= 0 {
		return w.m.projects[i]
	}
	return nil
}

// forgetRoom drops a room the client was told has no actor left (it
// ended and was passivated), and its participants: commands go to live
// rooms instead.
func (w *world) forgetRoom(roomID string) {
	rooms := w.m.rooms[:0]
	for _, r := range w.m.rooms {
		if r.id != roomID {
			rooms = append(rooms, r)
		}
	}
	w.m.rooms = rooms
	parts := w.m.parts[:0]
	for _, p := range w.m.parts {
		if p.room != roomID {
			parts = append(parts, p)
		}
	}
	w.m.parts = parts
}

func (w *world) accountOf(projectID string) string {
	for _, p := range w.m.projects {
		if p.id == projectID {
			return p.account
		}
	}
	return ""
}

// --- the directory -----------------------------------------------------------

func (w *world) createAccount() {
	name := fmt.Sprintf("workspace %d", w.serial())
	w.ask("create_account", name, core.DirectoryAddress(), directory.CreateAccount{User: w.user(), Name: name}, func(body []byte) {
		var v directory.AccountView
		_ = json.Unmarshal(body, &v)
		if len(v.Projects) != 1 {
			w.fail("a new workspace answered with %d projects", len(v.Projects))
		}
		w.m.accounts = append(w.m.accounts, v.ID)
		w.m.projects = append(w.m.projects, &simProject{id: v.Projects[0].ID, account: v.ID})
		acct, proj := v.ID, v.Projects[0].ID
		w.note("workspace "+acct+" with its wallet and project "+proj, func(v *view) error {
			if v.wallets[acct] == nil {
				return fmt.Errorf("no wallet")
			}
			if p := v.projects[proj]; p == nil || p.Project.AccountID != acct {
				return fmt.Errorf("no project %s in it", proj)
			}
			if ws := v.dir.Workspaces[acct]; ws == nil || ws.Members[w.m.owner] == nil {
				return fmt.Errorf("the directory does not have it, owned by its creator")
			}
			return nil
		})
	})
}

func (w *world) createProject() {
	i := w.choose(len(w.m.accounts))
	if i < 0 {
		return
	}
	acct, name := w.m.accounts[i], fmt.Sprintf("project %d", w.serial())
	w.ask("create_project", acct, core.DirectoryAddress(), directory.CreateProject{User: w.user(), AccountID: acct, Name: name}, func(body []byte) {
		id := idOf(body)
		w.m.projects = append(w.m.projects, &simProject{id: id, account: acct})
		w.note("project "+id+" of "+acct, func(v *view) error {
			if p := v.projects[id]; p == nil || p.Project.AccountID != acct {
				return fmt.Errorf("no such project")
			}
			if ws := v.dir.Workspaces[acct]; ws == nil || !contains(ws.ProjectIDs, id) {
				return fmt.Errorf("its workspace does not list it")
			}
			return nil
		})
	})
}

func (w *world) archiveProject() {
	p := w.project()
	if p == nil {
		return
	}
	id := p.id
	w.ask("archive_project", id, core.DirectoryAddress(), directory.ArchiveProject{User: w.user(), AccountID: p.account, ProjectID: id}, func([]byte) {
		w.note("project "+id+" archived", func(v *view) error {
			if p := v.projects[id]; p == nil || p.Project.Status != core.ProjectArchived {
				return fmt.Errorf("not archived")
			}
			return nil
		})
	})
}

func (w *world) renameAccount() {
	i := w.choose(len(w.m.accounts))
	if i < 0 {
		return
	}
	acct, name := w.m.accounts[i], fmt.Sprintf("renamed %d", w.serial())
	w.ask("rename_account", acct, core.DirectoryAddress(), directory.RenameAccount{User: w.user(), AccountID: acct, Name: name}, func([]byte) {
		w.namedLast("workspace", acct, name, func(v *view) string {
			if ws := v.dir.Workspaces[acct]; ws != nil {
				return ws.Name
			}
			return ""
		})
	})
}

func (w *world) renameProject() {
	p := w.project()
	if p == nil {
		return
	}
	id, name := p.id, fmt.Sprintf("renamed %d", w.serial())
	w.ask("rename_project", id, core.ProjectAddress(id), project.Rename{User: w.user(), Name: name}, func([]byte) {
		w.namedLast("project", id, name, func(v *view) string {
			if p := v.projects[id]; p != nil {
				return p.Project.Name
			}
			return ""
		})
	})
}

// namedLast notes, once per thing renamed, that its name is the last one
// acknowledged.
func (w *world) namedLast(kind, id, name string, current func(v *view) string) {
	if w.m.names == nil {
		w.m.names = map[string]string{}
	}
	_, noted := w.m.names[id]
	w.m.names[id] = name
	if noted {
		return
	}
	w.note(kind+" "+id+" has the name last acknowledged", func(v *view) error {
		if got, want := current(v), w.m.names[id]; got != want {
			return fmt.Errorf("named %q, want %q", got, want)
		}
		return nil
	})
}

// --- the project ------------------------------------------------------------------

func (w *world) roomParams() project.NewRoom {
	return project.NewRoom{
		Name: fmt.Sprintf("room %d", w.serial()), Region: "global",
		// 0: the project's; one past it (one time in eight) is refused.
		MaxParticipants:  []int{0, 1, 2, 2, 3, 3, 3, simLimits.MaxParticipantsPerRoom + 1}[w.rng.Intn(8)],
		ExpiresInSeconds: []int{300, 1800, 7200}[w.rng.Intn(3)],
	}
}

func (w *world) createRoom() {
	p := w.project()
	if p == nil {
		return
	}
	params := w.roomParams()
	if w.rng.Intn(3) > 0 {
		w.sendCreateRoom(p.id, params, nil)
		return
	}
	key := fmt.Sprintf("idem-%d", w.serial())
	body, _ := json.Marshal(params)
	ik := &simIdem{project: p.id, key: key, hash: sha256.Sum256(append([]byte("POST /v1/rooms\x00"), body...)), params: params}
	w.m.idem = append(w.m.idem, ik)
	w.beginIdempotent(ik)
}

// beginIdempotent admits ik's key at its project (IdemBegin, answered at
// once), then creates the room with it; the key is released (IdemEnd)
// when the create is answered, as actors.Engine does.
func (w *world) beginIdempotent(ik *simIdem) {
	pending := core.IdemPending{ProjectID: ik.project, Scope: core.IdemScope(ik.project, "key_sim", ik.key), RequestHash: ik.hash}
	r, answered := w.askNow(core.ProjectAddress(ik.project), project.IdemBegin{Pending: pending})
	switch {
	case !answered:
		w.fail("IdemBegin was not answered at once")
	case r.Gone:
		w.tracef("idempotent %s %s -> gone", ik.project, ik.key)
		return
	case r.Err != nil:
		w.tracef("idempotent %s %s -> %s", ik.project, ik.key, r.Err.Code)
		return
	case r.Replayed:
		if ik.body == nil {
			w.fail("key %s replays a create nobody was told of: %s", ik.key, r.Body)
		}
		if string(r.Body) != string(ik.body) {
			w.fail("key %s replays another answer:\nacknowledged %s\nreplayed     %s", ik.key, ik.body, r.Body)
		}
		w.tracef("idempotent %s %s -> replayed", ik.project, ik.key)
		return
	case ik.body != nil:
		w.fail("key %s, acknowledged, does not replay", ik.key)
	}
	ik.waiting = true
	w.sendCreateRoom(ik.project, ik.params, &pending)
	last := w.outstanding[len(w.outstanding)-1]
	ok := last.ok
	last.ok = func(body []byte) {
		ik.body = append([]byte(nil), body...)
		ok(body)
	}
	// IdemEnd once answered, whatever the answer. A crash loses the
	// answer and the key's in-flight mark together (crash clears waiting).
	last.then = func(core.Reply) {
		ik.waiting = false
		w.rt.Post(core.ProjectAddress(ik.project), project.IdemEnd{Scope: pending.Scope})
	}
}

// askNow sends a command that is answered at once (a query, a refusal)
// and returns its answer.
func (w *world) askNow(to core.Address, msg any) (core.Reply, bool) {
	answer := w.rt.ask(to, msg)
	select {
	case r := <-answer:
		return r, true
	default:
		return core.Reply{}, false
	}
}

func (w *world) sendCreateRoom(projectID string, params project.NewRoom, idem *core.IdemPending) {
	w.ask("create_room", projectID, core.ProjectAddress(projectID), project.CreateRoom{Caller: caller(projectID), Params: params, Idem: idem}, func(body []byte) {
		var v room.RoomView
		_ = json.Unmarshal(body, &v)
		id := v.ID
		w.m.rooms = append(w.m.rooms, &simRoom{id: id, project: projectID, maxParticipants: int64(v.MaxParticipants)})
		for _, p := range w.m.projects {
			if p.id == projectID && p.witness != nil {
				if w.m.witnessed == nil {
					w.m.witnessed = map[string]bool{}
				}
				w.m.witnessed[id] = true
			}
		}
		w.note("room "+id, func(v *view) error {
			r := v.rooms[id]
			if r == nil {
				return fmt.Errorf("no such room")
			}
			if _, listed := v.projects[projectID].ActiveRooms[id]; !listed && r.Room.Status != room.RoomEnded {
				return fmt.Errorf("its project does not count it, and it has not ended")
			}
			if _, err := v.store.Get(room.RecordKey(projectID, id)); err != nil {
				return fmt.Errorf("its record: %v", err)
			}
			return nil
		})
	})
}

// retryIdempotent repeats an idempotent create: an acknowledged one must
// answer the same, byte for byte, whatever crashed since; one never
// acknowledged (refused, or lost in a crash) must create anew.
func (w *world) retryIdempotent() {
	i := w.choose(len(w.m.idem))
	if i < 0 || w.m.idem[i].waiting {
		return
	}
	w.beginIdempotent(w.m.idem[i])
}

func (w *world) createKey() {
	p := w.project()
	if p == nil {
		return
	}
	projectID := p.id
	w.ask("create_key", projectID, core.ProjectAddress(projectID), project.CreateKey{Caller: caller(projectID), Name: "sim", Scopes: scopes.Set(scopes.RoomsWrite)}, func(body []byte) {
		id := idOf(body)
		w.m.keys = append(w.m.keys, &simKey{id: id, project: projectID})
		w.note("key "+id, func(v *view) error {
			if v.projects[projectID].Keys[id] == nil {
				return fmt.Errorf("no such key")
			}
			return nil
		})
	})
}

func (w *world) revokeKey() {
	i := w.choose(len(w.m.keys))
	if i < 0 {
		return
	}
	k := w.m.keys[i]
	w.ask("revoke_key", k.id, core.ProjectAddress(k.project), project.RevokeKey{Caller: caller(k.project), KeyID: k.id}, func([]byte) {
		w.note("key "+k.id+" revoked", func(v *view) error {
			if key := v.projects[k.project].Keys[k.id]; key == nil || key.RevokedAt.IsZero() {
				return fmt.Errorf("not revoked")
			}
			return nil
		})
	})
}

func (w *world) createEndpoint() {
	p := w.project()
	if p == nil {
		return
	}
	url := fmt.Sprintf("https://receiver.sim.test/hook/%d", w.serial())
	var events []string
	if w.rng.Intn(3) == 0 {
		events = []string{core.EventParticipantJoined, core.EventRoomEnded, core.EventCreditLow}
	}
	w.ask("create_endpoint", p.id, core.ProjectAddress(p.id), project.CreateEndpoint{Caller: caller(p.id), URL: url, Events: events}, func(body []byte) {
		ep := &simEndpoint{id: idOf(body), project: p.id, url: url}
		w.m.endpoints = append(w.m.endpoints, ep)
		if p.witness == nil && events == nil {
			p.witness = ep
		}
		w.note("endpoint "+ep.id, func(v *view) error {
			if v.projects[ep.project].Endpoints[ep.id] == nil {
				return fmt.Errorf("no such endpoint")
			}
			return nil
		})
	})
}

// disableEndpoint disables an endpoint that is not its project's witness.
func (w *world) disableEndpoint() {
	i := w.choose(len(w.m.endpoints))
	if i < 0 {
		return
	}
	ep := w.m.endpoints[i]
	for _, p := range w.m.projects {
		if p.witness == ep {
			return
		}
	}
	w.ask("disable_endpoint", ep.id, core.ProjectAddress(ep.project), project.DisableEndpoint{Caller: caller(ep.project), EndpointID: ep.id}, func([]byte) {
		w.note("endpoint "+ep.id+" disabled", func(v *view) error {
			if e := v.projects[ep.project].Endpoints[ep.id]; e == nil || e.Status != core.EndpointDisabled {
				return fmt.Errorf("not disabled")
			}
			return nil
		})
	})
}

// --- the room -------------------------------------------------------------------

func (w *world) room() *simRoom {
	if i := w.chooseRecent(len(w.m.rooms), 3); i >= 0 {
		return w.m.rooms[i]
	}
	return nil
}

func (w *world) part() *simPart {
	if i := w.chooseRecent(len(w.m.parts), 5); i >= 0 {
		return w.m.parts[i]
	}
	return nil
}

func (w *world) deleteRoom() {
	r := w.room()
	if r == nil {
		return
	}
	w.ask("delete_room", r.id, core.RoomAddress(r.id), room.Delete{Caller: caller(r.project)}, func([]byte) {
		w.note("room "+r.id+" deleted", func(v *view) error {
			if s := v.rooms[r.id]; s == nil || (s.Room.Status != room.RoomEnding && s.Room.Status != room.RoomEnded) {
				return fmt.Errorf("still open")
			}
			return nil
		})
	})
}

func (w *world) createParticipant() {
	r := w.room()
	if r == nil {
		return
	}
	role := []string{room.RolePublisher, room.RoleSubscriber}[w.rng.Intn(2)]
	params := room.NewParticipant{Name: fmt.Sprintf("participant %d", w.serial()), Role: role, ExpiresInSeconds: 3600}
	w.ask("create_participant", r.id, core.RoomAddress(r.id), room.CreateParticipant{Caller: caller(r.project), Params: params}, func(body []byte) {
		id := idOf(body)
		w.m.parts = append(w.m.parts, &simPart{id: id, room: r.id, project: r.project})
		w.note("participant "+id, func(v *view) error {
			if s := v.rooms[r.id]; s == nil || s.Participants[id] == nil {
				return fmt.Errorf("not in its room")
			}
			return nil
		})
	})
}

// connect is POST /v1/connect as actors.Engine.AppendConnect decides it:
// on the caller's goroutine, against the Gate the room publishes, with no
// message and no write, answered at once. Its reservation lives in the
// room's memory only and a crash loses it, so it notes no fact: a connect
// is not a durable write. The join that would have matched a lost
// reservation is re-checked (mediaJoin).
func (w *world) connect() {
	p := w.part()
	if p == nil {
		return
	}
	w.tracef("connect %s", p.id)
	op := &pendingOp{name: "connect", target: p.id, room: p.room}
	r := w.rt.rooms[p.room]
	if r == nil || r.stopped {
		// No live actor: the engine answers from the record (the room
		// ended), and the client forgets the room.
		w.answered(op, core.Reply{Gone: true})
		return
	}
	s, err := r.gate.Connect(w.rt.env, p.id, w.clk.Now())
	if err != nil {
		w.answered(op, core.Reply{Err: err})
		return
	}
	p.sessions = append(p.sessions, &simSession{id: s.SessionID, issuedAt: s.IssuedAt, expiresAt: s.ExpiresAt, generation: w.res.Crashes})
	w.answered(op, core.Reply{Status: 200})
}

// mediaJoin is the media node's report of a join with one of the
// participant's sessions: mostly its latest, one time in four an older
// one (a client holding a stale media token, the defect of issue 15). The
// node holds the socket until the room answers (takeMediaAnswers). It
// refuses an expired token itself and reports nothing, asks nothing for a
// session it serves already, and for a room with no live actor the engine
// closes the session (actors.Engine.MediaJoined).
func (w *world) mediaJoin() {
	p := w.part()
	if p == nil || len(p.sessions) == 0 {
		return
	}
	s := p.latest()
	if n := len(p.sessions); n > 1 && w.rng.Intn(4) == 0 {
		s = p.sessions[n-2-w.rng.Intn(min(n-1, 3))]
	}
	now := w.clk.Now()
	switch {
	case !now.Before(s.expiresAt):
		w.tracef("media_join %s %s -> expired at the node", p.id, s.id)
		w.res.Outcomes["media_join expired_at_node"]++
		return
	case w.rt.media.served(p.room, p.id) == s.id:
		return
	}
	w.tracef("media_join %s %s", p.id, s.id)
	// Stale: the room knows a later session (issued since the last
	// crash), and this one is not the session it records as joined. Such
	// a join must be refused.
	w.staleJoins[s.id] = ""
	if latest := p.latest(); s != latest && latest.generation == w.res.Crashes && !w.recordedJoined(p, s.id) {
		w.staleJoins[s.id] = latest.id
	}
	w.rt.media.ask(p.room, p.id, s.id)
	if r := w.rt.rooms[p.room]; r == nil || r.stopped {
		w.rt.media.CloseSession(p.room, p.id, s.id, room.RefuseRoomClosed)
		return
	}
	w.rt.Post(core.RoomAddress(p.room), room.MediaJoined{Report: room.MediaJoin{
		SessionID: s.id, ProjectID: p.project, RoomID: p.room, ParticipantID: p.id, IssuedAt: s.issuedAt, At: now}})
}

// mediaLeave is the media node's report that a session it serves left.
func (w *world) mediaLeave() {
	var served []*simPart
	for _, p := range w.m.parts {
		if w.rt.media.served(p.room, p.id) != "" {
			served = append(served, p)
		}
	}
	i := w.choose(len(served))
	if i < 0 {
		return
	}
	p := served[i]
	session := w.rt.media.served(p.room, p.id)
	w.tracef("media_leave %s %s", p.id, session)
	w.rt.media.left(p.room, p.id)
	w.rt.Post(core.RoomAddress(p.room), room.MediaLeft{Report: room.MediaLeave{
		SessionID: session, ProjectID: p.project, RoomID: p.room, ParticipantID: p.id, At: w.clk.Now(), Reason: room.LeftReasonLeft}})
}

func (w *world) removeParticipant() {
	p := w.part()
	if p == nil {
		return
	}
	w.ask("remove_participant", p.id, core.RoomAddress(p.room), room.RemoveParticipant{Caller: caller(p.project), ParticipantID: p.id}, func(body []byte) {
		var told struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(body, &told)
		// Removed, or ended with its room before: either is final.
		w.note("participant "+p.id+" "+told.Status, func(v *view) error {
			if s := v.rooms[p.room]; s == nil || s.Participants[p.id] == nil || s.Participants[p.id].Status != told.Status {
				return fmt.Errorf("not %s", told.Status)
			}
			return nil
		})
	})
}

// --- the wallet ------------------------------------------------------------------

func (w *world) createTopup() {
	p := w.project()
	if p == nil {
		return
	}
	now := w.rt.env.CreatedAt()
	amount := (5 + int64(w.rng.Intn(20))) * money.MicrosPerUnit
	t := wallet.Topup{PaymentID: ids.New(ids.Payment), ProjectID: p.id, Amount: amount, Currency: simBilling.Currency,
		Method: "checkout", Provider: "sandbox", ProviderRef: "cs_sim", CreatedAt: now, ExpiresAt: now.Add(simBilling.TopupExpiry)}
	acct := p.account
	w.ask("create_topup", t.PaymentID, core.WalletAddress(acct), wallet.CreateTopup{Topup: t}, func([]byte) {
		w.m.topups = append(w.m.topups, &simTopup{id: t.PaymentID, account: acct, project: p.id})
		w.note("top-up "+t.PaymentID, func(v *view) error {
			if v.wallets[acct].Topups[t.PaymentID] == nil {
				return fmt.Errorf("no such top-up")
			}
			return nil
		})
	})
}

// payTopup is the provider's verified callback for a top-up.
func (w *world) payTopup() {
	i := w.choose(len(w.m.topups))
	if i < 0 {
		return
	}
	t := w.m.topups[i]
	statuses := []string{wallet.PaymentSucceeded, wallet.PaymentSucceeded, wallet.PaymentSucceeded,
		wallet.PaymentFailed, wallet.PaymentCanceled, wallet.PaymentRefunded, wallet.PaymentRefunded}
	u := wallet.PaymentUpdate{Provider: "sandbox", ProviderEventID: fmt.Sprintf("evt_sim_%d", w.serial()), PaymentID: t.id,
		Status: statuses[w.rng.Intn(len(statuses))], At: w.clk.Now()}
	if u.Status == wallet.PaymentRefunded {
		u.Amount = int64(w.rng.Intn(30)) * money.MicrosPerUnit // 0: the whole payment; past it: bounded
	}
	w.ask("pay_topup", t.id+" "+u.Status, core.WalletAddress(t.account), wallet.ApplyPayment{Update: u}, func(body []byte) {
		var v wallet.TopupView
		_ = json.Unmarshal(body, &v)
		told := v.Status
		w.note("top-up "+t.id+" "+told, func(v *view) error {
			tp := v.wallets[t.account].Topups[t.id]
			if tp == nil {
				return fmt.Errorf("no such top-up")
			}
			if !laterPaymentStatus(told, tp.Status) {
				return fmt.Errorf("status %s, but %s was acknowledged", tp.Status, told)
			}
			return nil
		})
	})
}

// laterPaymentStatus reports whether a top-up told to be in status told
// may now be in status now: only pending and expired move on (a success
// after the local expiry still credits), and a success only to refunded.
func laterPaymentStatus(told, now string) bool {
	switch told {
	case wallet.PaymentPending:
		return true
	case wallet.PaymentExpired:
		return now == wallet.PaymentExpired || now == wallet.PaymentSucceeded || now == wallet.PaymentRefunded
	case wallet.PaymentSucceeded:
		return now == wallet.PaymentSucceeded || now == wallet.PaymentRefunded
	}
	return now == told
}

func (w *world) adjust() {
	i := w.choose(len(w.m.accounts))
	if i < 0 {
		return
	}
	acct := w.m.accounts[i]
	amount := int64(w.rng.Intn(600)-200) * money.MicrosPerUnit / 100 // -2.00 to 3.99
	if amount == 0 {
		amount = 1
	}
	w.ask("adjust", acct, core.WalletAddress(acct), wallet.Adjust{Amount: amount, Reason: "sim adjustment", Actor: core.Actor{Type: "operator", ID: "sim"}}, func(body []byte) {
		entry := idOf(body)
		w.note("ledger entry "+entry+" of "+acct, func(v *view) error {
			for _, e := range v.ledger[acct] {
				if e.ID == entry {
					return nil
				}
			}
			return fmt.Errorf("not on the ledger")
		})
	})
}

// --- time, delivery, durability, crashes ------------------------------------------------

// tick lets time pass and runs the engine's sweeps: rooms (expiry,
// lapsed connects, settlement, passivation), wallets (charges, top-up
// expiry) and the directory every second, projects every minute.
func (w *world) tick() {
	// Mostly seconds (sessions run, settle, connects lapse), at times
	// minutes (rooms expire, top-ups expire, retries fall due, ended rooms
	// passivate).
	d := []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 12 * time.Second, 31 * time.Second,
		40 * time.Second, 2 * time.Minute, 11 * time.Minute}[w.rng.Intn(8)]
	w.clk.Advance(d)
	w.tracef("tick %s", d)
	for _, n := range w.rt.liveNodes() {
		switch n.addr.Kind {
		case core.KindRoom, core.KindWallet, core.KindDirectory:
			w.rt.Post(n.addr, core.Sweep{})
		}
	}
	if now := w.clk.Now(); now.Sub(w.lastProjectSweep) >= time.Minute {
		w.lastProjectSweep = now
		for _, n := range w.rt.liveNodes() {
			if n.addr.Kind == core.KindProject {
				w.rt.Post(n.addr, core.Sweep{})
			}
		}
	}
}

// deliver runs one step of the webhook dispatcher (fan-out, then each
// endpoint's due deliveries). Its writes wait for their own sync, so the
// WAL gate is open while it runs, after a durable point.
func (w *world) deliver() {
	// Durable, and so are the follow-ups the answers set off (a room's
	// end tells its project only once durable): with the gate open, the
	// dispatcher's syncs would make them durable unrecorded.
	for w.durablePoint(); len(w.rt.touched) > 0; {
		w.durablePoint()
	}
	w.gate.Release()
	moved := w.rt.dispatcher.Step()
	w.gate.Hold()
	w.tracef("deliver moved=%d", moved)
}

func (w *world) durableOp() {
	w.tracef("durable waiting=%d", len(w.outstanding))
	w.durablePoint()
}

func (w *world) crashOp() { w.crash() }

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// takeMediaAnswers takes the rooms' answers to the joins the node
// reported, in order, and checks each against what the client was told:
//   - a session admitted was not stale when its join was reported: it was
//     its participant's latest, or the room could not know a later one
//     (issued before the last crash, its reservation lost), or it was the
//     session the room records as joined (a repeated report): a stale
//     media token never gets in;
//   - a session is admitted only once its join is durable: at a durable
//     point, or recorded at an earlier one;
//   - the latest session of a participant is never refused as superseded:
//     an acknowledged connect can always join or reconnect, and is refused
//     only for a reason that holds then: the room or the project full, the
//     credit gate closed, a session that joined and left, the participant
//     removed or its room closed.
//
// An admitted join is recorded, so a fact is noted: the participant joined
// (its join, and its first connect with it, survive every crash).
func (w *world) takeMediaAnswers() {
	for _, a := range w.rt.media.takeAnswers() {
		p := w.partOf(a.room, a.participant)
		outcome := "admitted"
		if a.code != "" {
			outcome = a.code
		} else if s := p.session(a.session); s != nil && s.generation < w.res.Crashes {
			outcome = "admitted_after_crash" // its reservation lost: re-checked
		}
		w.res.Outcomes["media_join "+outcome]++
		w.tracef("media_join %s %s -> %s", a.participant, a.session, outcome)
		if p == nil {
			continue // its room was forgotten since
		}
		latest := p.latest()
		switch a.code {
		case "":
			if a.outsideDurableWait && !w.durablyJoined(p, a.session) {
				w.fail("participant %s: its session %s was admitted before its join was durable", p.id, a.session)
			}
			if later := w.staleJoins[a.session]; later != "" {
				w.fail("participant %s joined with its session %s, though its room knew its later session %s", p.id, a.session, later)
			}
			w.admitted[a.session] = w.res.Crashes
			w.noteJoined(p, a.session)
		case room.RefuseSessionSuperseded:
			if a.session == latest.id {
				w.fail("participant %s: the join of its latest session %s was refused as superseded", p.id, a.session)
			}
		case room.RefuseParticipantLimit:
			if r := w.roomOf(p.room); r != nil && a.at.roomSlots < r.maxParticipants && a.at.projectSlots < a.at.projectLimit {
				w.fail("participant %s: a join refused for the caps with %d of %d room slots and %d of %d project slots held",
					p.id, a.at.roomSlots, r.maxParticipants, a.at.projectSlots, a.at.projectLimit)
			}
		case room.RefuseInsufficientCredit:
			if !a.at.creditClosed {
				w.fail("participant %s: a join refused for credit with the credit gate open", p.id)
			}
		case room.RefuseSessionEnded:
			if _, ok := w.admitted[a.session]; !ok {
				w.fail("participant %s: its session %s was refused as ended, and it never joined", p.id, a.session)
			}
		}
	}
}

// recordedJoined reports whether p's room records p as joined with
// session now (its live state).
func (w *world) recordedJoined(p *simPart, session string) bool {
	n := w.rt.rooms[p.room]
	if n == nil || n.stopped {
		return false
	}
	var s roomSnap
	if err := decodeStrict(w.rt.readState(n.node), &s); err != nil {
		w.fail("the state of room %s does not decode as the simulation reads it (update sim/check.go): %v", p.room, err)
	}
	q := s.Participants[p.id]
	return q != nil && q.Status == room.ParticipantJoined && q.SessionID == session
}

// durablyJoined reports whether p's room recorded p as joined with
// session at the last durable point.
func (w *world) durablyJoined(p *simPart, session string) bool {
	state, ok := w.durable[room.Journal(p.room)]
	if !ok {
		return false
	}
	var s roomSnap
	if err := decodeStrict(state, &s); err != nil {
		w.fail("the state of room %s does not decode as the simulation reads it (update sim/check.go): %v", p.room, err)
	}
	q := s.Participants[p.id]
	return q != nil && q.Status == room.ParticipantJoined && q.SessionID == session
}

// noteJoined notes that participant p's join with session is recorded.
func (w *world) noteJoined(p *simPart, session string) {
	w.note("join of "+p.id+" with "+session, func(v *view) error {
		s := v.rooms[p.room]
		if s == nil || s.Participants[p.id] == nil {
			return fmt.Errorf("no such participant")
		}
		q := s.Participants[p.id]
		if q.JoinedAt.IsZero() || q.ConnectedAt.IsZero() || q.Status == room.ParticipantCreated || q.Status == room.ParticipantConnected {
			return fmt.Errorf("never joined (status %s, joined_at %s, connected_at %s)", q.Status, q.JoinedAt, q.ConnectedAt)
		}
		return nil
	})
}

func (w *world) partOf(roomID, participantID string) *simPart {
	for _, p := range w.m.parts {
		if p.id == participantID && p.room == roomID {
			return p
		}
	}
	return nil
}

func (w *world) roomOf(roomID string) *simRoom {
	for _, r := range w.m.rooms {
		if r.id == roomID {
			return r
		}
	}
	return nil
}
