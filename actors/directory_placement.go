package actors

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"rtcd/actors/core"
	"rtcd/actors/directory"
	"rtcd/actors/project"
	"rtcd/apierr"
	"rtcd/ids"
	"rtcd/persistence"
)

// The dashboard on a cluster (docs/cluster.md). The directory runs on one
// node, the owner of DirectoryKey, which serves every dashboard route and
// alone decides sessions: a logout there is refused through every node at
// once. Projects stay with their workspace's node. The directory reads
// them from their pr/ records in the store (projectRecord) and reaches
// them with engine calls (Peers): it renames and archives a project on
// its workspace's node; that node asks the directory's node for a
// session used with X-Project-Id. A project or workspace the directory
// creates starts on its workspace's node at its first request there,
// from the store, where its genesis is durable before the directory
// answers.

// DirectoryKey is the directory's placement key in a cluster; account
// ids, the workspaces' keys, never take this form.
const DirectoryKey = "directory"

// Peers carries the engine's calls to the node where a placement key is
// placed (the server's cluster node).
type Peers interface {
	// Call runs the engine call name with body where key is placed, in
	// this process (ServeCall) or on its owner in one hop, and returns the
	// answer ServeCall gave there.
	Call(key, name string, body []byte) ([]byte, error)
	// Fingerprint names the member list this node sees (cluster.Node.View).
	Fingerprint() uint64
	// Owns tells whether this node owns key now.
	Owns(key string) bool
}

// SetPeers makes the engine a cluster node's, reaching the others through
// p. Call before serving.
func (e *Engine) SetPeers(p Peers) { e.peers = p }

// Place makes key's actors run here (the cluster's OnPlaced): the
// directory for DirectoryKey, a workspace for an account id.
func (e *Engine) Place(key string) error {
	if key == DirectoryKey {
		return e.PlaceDirectory()
	}
	return e.PlaceWorkspace(key)
}

// Release stops key's actors here (the cluster's OnMoved).
func (e *Engine) Release(key string) {
	if key == DirectoryKey {
		e.ReleaseDirectory()
		return
	}
	e.ReleaseWorkspace(key)
}

// PlaceDirectory recovers the directory here and returns once it serves
// (at once if it runs here). Its recovery claims its journal, fencing a
// node that ran it before; it publishes the sessions this node then
// authenticates.
func (e *Engine) PlaceDirectory() error {
	e.placingDirectory.Lock()
	defer e.placingDirectory.Unlock()
	if e.directory.Load() != nil {
		return nil
	}
	rec := &core.Recovery{}
	e.spawnDirectory(rec)
	if err := rec.Wait(); err != nil {
		e.releaseDirectoryLocked()
		return fmt.Errorf("actors: place the directory: %w", err)
	}
	return nil
}

// ReleaseDirectory stops the directory here and withdraws its sessions,
// so that this node authenticates none, and returns once what it
// committed is durable, before another node recovers it.
func (e *Engine) ReleaseDirectory() {
	e.placingDirectory.Lock()
	defer e.placingDirectory.Unlock()
	e.releaseDirectoryLocked()
}

func (e *Engine) releaseDirectoryLocked() {
	pid := e.directory.Swap(nil)
	if pid == nil {
		return
	}
	_ = e.system.Root.StopFuture(pid).Wait()
	e.sessions.WithdrawAll()
	e.sessions.SetRoles(nil)
	durable := make(chan struct{})
	e.env.Store.AfterDurable(func() { close(durable) })
	<-durable
}

// projectRecord is a project as the dashboard shows it (the directory's
// ProjectRecords): from its gate where its actor runs here, else, on a
// cluster node, from its pr/ record.
func (e *Engine) projectRecord(projectID string) (project.ProjectView, bool) {
	if h, ok := e.project(projectID); ok {
		if p := h.gate.Record.Load(); p != nil {
			return project.ViewOf(p), true
		}
	}
	if !e.env.Clustered || !ids.Valid(projectID, ids.Project) {
		return project.ProjectView{}, false
	}
	raw, err := e.env.Store.Get(project.RecordKey(projectID))
	if err != nil {
		if !errors.Is(err, persistence.ErrNotFound) {
			slog.Warn("cluster: a project's record could not be read", "project_id", projectID, "error", err)
		}
		return project.ProjectView{}, false
	}
	var v project.ProjectView
	if err := json.Unmarshal(raw, &v); err != nil {
		slog.Error("cluster: a project's record does not decode", "project_id", projectID, "error", err)
		return project.ProjectView{}, false
	}
	return v, true
}

// placedProject is the handle of a project whose workspace runs here. On
// a cluster node, a project the directory created after its workspace
// was placed here starts at its first request (recovered from the store);
// ok is false for a project that is not placed here.
func (e *Engine) placedProject(projectID string) (*projectHandle, bool, error) {
	if h, ok := e.project(projectID); ok {
		return h, true, nil
	}
	if !e.env.Clustered || !ids.Valid(projectID, ids.Project) {
		return nil, false, nil
	}
	accountID, ok, err := e.WorkspaceOfProject(projectID)
	if !ok || err != nil {
		return nil, false, err
	}
	e.placing.Lock()
	defer e.placing.Unlock()
	if h, ok := e.project(projectID); ok {
		return h, true, nil
	}
	if _, ok := e.wallet(accountID); !ok {
		return nil, false, nil // its workspace is not placed here
	}
	rec := &core.Recovery{}
	h := e.spawnProject(projectID, nil, rec)
	if err := rec.Wait(); err != nil {
		e.releaseWorkspaceLocked("", []string{projectID})
		return nil, false, fmt.Errorf("actors: start project %s: %w", projectID, err)
	}
	return h, true, nil
}

// Engine calls between the nodes of a cluster.
const (
	callSession = "session" // to the directory's node: a session and its role in a workspace
	callProject = "project" // to a workspace's node: rename or archive a project
)

// sessionCall asks the directory's node for a session used on a project
// route, and the user's role in the project's workspace.
type sessionCall struct {
	Token     string `json:"token"`
	AccountID string `json:"account_id"` // "" when the project does not exist
}

type sessionAnswer struct {
	UserID string        `json:"user_id"`
	Role   string        `json:"role"` // "" when not a member
	Err    *apierr.Error `json:"error,omitempty"`
}

// projectCall asks a workspace's node to rename or archive a project.
type projectCall struct {
	ProjectID string             `json:"project_id"`
	Archive   bool               `json:"archive"`
	Name      string             `json:"name"` // the new name, when not archiving
	User      core.DashboardUser `json:"user"`
}

// replyAnswer is a core.Reply as a call carries it.
type replyAnswer struct {
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body,omitempty"`
	Err    *apierr.Error   `json:"error,omitempty"`
	Gone   bool            `json:"gone,omitempty"`
}

// ServeCall answers an engine call another node (or this one) made:
// Peers.Call runs it where the call's key is placed.
func (e *Engine) ServeCall(name string, body []byte) []byte {
	var answer any
	switch name {
	case callSession:
		var c sessionCall
		if err := json.Unmarshal(body, &c); err != nil {
			answer = sessionAnswer{Err: badCall(name, err)}
			break
		}
		answer = e.serveSessionCall(c)
	case callProject:
		var c projectCall
		if err := json.Unmarshal(body, &c); err != nil {
			answer = replyAnswer{Err: badCall(name, err)}
			break
		}
		r := e.serveProjectCall(c)
		answer = replyAnswer{Status: r.Status, Body: r.Body, Err: r.Err, Gone: r.Gone}
	default:
		handled, err := e.serveMediaCall(name, body)
		switch {
		case !handled:
			answer = replyAnswer{Err: badCall(name, errors.New("no such call"))}
		case err != nil:
			answer = replyAnswer{Err: badCall(name, err)}
		default:
			answer = struct{}{}
		}
	}
	return core.MustJSON(answer)
}

// badCall is the answer to a call this node cannot read: a bug of the
// node that sent it, or nodes of two versions.
func badCall(name string, err error) *apierr.Error {
	slog.Error("cluster: an engine call does not decode", "call", name, "error", err)
	return apierr.New(apierr.Internal, "a node of the cluster sent a call this node cannot read")
}

func (e *Engine) serveSessionCall(c sessionCall) sessionAnswer {
	ls, err := e.lookupSession(c.Token)
	if err != nil {
		return sessionAnswer{Err: err}
	}
	role, _ := e.sessions.RoleOf(ls.UserID(), c.AccountID)
	return sessionAnswer{UserID: ls.UserID(), Role: role}
}

func (e *Engine) serveProjectCall(c projectCall) core.Reply {
	h, ok, err := e.placedProject(c.ProjectID)
	if err != nil || !ok {
		// The directory found it in the store: it is not placed here any
		// more, or its recovery failed.
		return core.Reply{Err: core.ErrUnavailable}
	}
	var msg any = project.Rename{User: c.User, Name: c.Name}
	if c.Archive {
		msg = core.ArchiveProject{User: c.User}
	}
	return e.ask(h.pid, msg)
}

// call runs an engine call on key's node and decodes its answer into out.
func (e *Engine) call(key, name string, in, out any) *apierr.Error {
	raw, err := e.peers.Call(key, name, core.MustJSON(in))
	if err == nil {
		err = json.Unmarshal(raw, out)
	}
	if err != nil {
		slog.Warn("cluster: an engine call failed", "call", name, "key", key, "error", err)
		ae := apierr.New(apierr.ServiceUnavailable, "the node serving this workspace is changing; retry shortly")
		ae.RetryAfterSeconds = 1
		return ae
	}
	return nil
}

// askProject asks a project's actor, here or, on a cluster node, on its
// workspace's node (a rename or an archive from the dashboard, whose
// directory may run elsewhere). A project with no actor anywhere is Gone.
func (e *Engine) askProject(projectID string, msg any) core.Reply {
	if h, ok := e.project(projectID); ok {
		return e.ask(h.pid, msg)
	}
	if e.peers == nil {
		return core.Reply{Gone: true}
	}
	c := projectCall{ProjectID: projectID}
	switch m := msg.(type) {
	case project.Rename:
		c.Name, c.User = m.Name, m.User
	case core.ArchiveProject:
		c.Archive, c.User = true, m.User
	default:
		panic(fmt.Sprintf("actors: assertion failed: %T is not a call to a project", msg))
	}
	accountID, ok, err := e.WorkspaceOfProject(projectID)
	if err != nil {
		return core.Reply{Err: core.ErrUnavailable}
	}
	if !ok {
		return core.Reply{Gone: true}
	}
	var a replyAnswer
	if aerr := e.call(accountID, callProject, c, &a); aerr != nil {
		return core.Reply{Err: aerr}
	}
	return core.Reply{Status: a.Status, Body: a.Body, Err: a.Err, Gone: a.Gone}
}

// sessionForProject is AuthenticateSessionForProject on a cluster node,
// which runs the project's workspace: the directory's node decides the
// session and the user's role.
func (e *Engine) sessionForProject(token, projectID string) (*core.Caller, *apierr.Error) {
	notFound := directory.ErrNoProject(projectID).WithDetails("header", "X-Project-Id")
	h, ok, err := e.placedProject(projectID)
	if err != nil {
		return nil, core.ErrUnavailable
	}
	var p *core.Project
	if ok {
		p = h.gate.Record.Load()
	}
	c := sessionCall{Token: token}
	if p != nil && p.Status == core.ProjectActive {
		c.AccountID = p.AccountID
	}
	var a sessionAnswer
	if aerr := e.call(DirectoryKey, callSession, c, &a); aerr != nil {
		return nil, aerr
	}
	if a.Err != nil {
		return nil, a.Err
	}
	if c.AccountID == "" || a.Role == "" {
		return nil, notFound
	}
	return &core.Caller{ProjectID: projectID, ActorType: "user", ActorID: a.UserID, Scopes: directory.RoleScopes(a.Role), Role: a.Role}, nil
}
