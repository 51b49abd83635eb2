package project

import (
	"fmt"
	"time"

	"rtcd/actors/core"
	"rtcd/persistence"
)

// projectEvent is one entry of a project's journal. Exactly one field is set.
type projectEvent struct {
	RoomCreated   *roomRef      `json:"room_created,omitempty"`
	RoomClosed    *roomRef      `json:"room_closed,omitempty"`
	APIKeyCreated *APIKey       `json:"api_key_created,omitempty"`
	APIKeyRevoked *apiKeyRevoke `json:"api_key_revoked,omitempty"`
	APIKeyUsed    *apiKeyUsed   `json:"api_key_used,omitempty"`

	EndpointCreated  *core.WebhookEndpoint `json:"endpoint_created,omitempty"`
	EndpointDisabled *endpointDisabled     `json:"endpoint_disabled,omitempty"`

	ProjectRenamed  *projectRenamed  `json:"project_renamed,omitempty"`
	ProjectArchived *projectArchived `json:"project_archived,omitempty"`
}

type endpointDisabled struct {
	EndpointID string    `json:"endpoint_id"`
	At         time.Time `json:"at"`
}

type roomRef struct {
	RoomID string `json:"room_id"`
}

type apiKeyRevoke struct {
	KeyID string    `json:"key_id"`
	At    time.Time `json:"at"`
}

// apiKeyUsed records a key's last use (at most once per
// apiKeyTouchInterval per key).
type apiKeyUsed struct {
	KeyID string    `json:"key_id"`
	At    time.Time `json:"at"`
}

// projectState is everything a project actor owns. It is also its snapshot.
type projectState struct {
	Project     core.Project        `json:"project"`
	ActiveRooms map[string]struct{} `json:"active_rooms"` // rooms not yet ended
	Keys        map[string]*APIKey  `json:"keys"`
	ActiveKeys  int                 `json:"active_keys"`

	Endpoints       map[string]*core.WebhookEndpoint `json:"endpoints"`
	ActiveEndpoints int                              `json:"active_endpoints"`
}

func newProjectState(p core.Project) *projectState {
	return &projectState{Project: p, ActiveRooms: make(map[string]struct{}), Keys: make(map[string]*APIKey)}
}

// Genesis writes a new project into b: its p/ entry (the directory
// of projects recovery reads, naming its workspace), its wp/ entry (its
// workspace's list of projects, which a cluster places together), its
// pr/ record (RecordKey) and its first snapshot (sequence 0), holding
// firstKey when there is one (bootstrap's key, with its ki/ and kh/
// records). Every
// project starts here: bootstrap's, each new workspace's and each created
// in the dashboard.
func Genesis(b *persistence.Batch, p core.Project, firstKey *APIKey) *projectState {
	s := newProjectState(p)
	if firstKey != nil {
		core.ApplyAll(s, projectEvent{APIKeyCreated: firstKey})
		b.Set(persistence.IndexKey(persistence.PrefixKeyIdx, p.ID, firstKey.CreatedAt.UnixNano(), firstKey.ID), core.MustJSON(firstKey.View()))
		b.Set(core.KeyHashKey(firstKey.Hash), []byte(p.ID))
	}
	// The value names the project's workspace, so that any node can tell
	// where the project is placed without reading its journal.
	b.Set(persistence.Key(persistence.PrefixProject, p.ID), []byte(p.AccountID))
	b.Set(WorkspaceKey(p.AccountID, p.ID), nil)
	WriteRecord(b, &p)
	persistence.WriteSnapshotAt(b, Journal(p.ID), 0, core.Encode(s))
	return s
}

// Loaded completes a snapshot (maps JSON left nil).
func (s *projectState) Loaded() {
	if s.ActiveRooms == nil {
		s.ActiveRooms = make(map[string]struct{})
	}
	if s.Keys == nil {
		s.Keys = make(map[string]*APIKey)
	}
}

// Apply changes the state by one event; pure, and checking what it looks
// up, as roomState.Apply.
func (s *projectState) Apply(e *projectEvent) error {
	switch {
	case e.RoomCreated != nil:
		s.ActiveRooms[e.RoomCreated.RoomID] = struct{}{}
	case e.RoomClosed != nil:
		delete(s.ActiveRooms, e.RoomClosed.RoomID)
	case e.APIKeyCreated != nil:
		k := *e.APIKeyCreated
		if _, dup := s.Keys[k.ID]; dup {
			return fmt.Errorf("api_key_created: key %s already exists", k.ID)
		}
		s.Keys[k.ID] = &k
		s.ActiveKeys++
	case e.EndpointCreated != nil:
		ep := *e.EndpointCreated
		if s.Endpoints == nil {
			s.Endpoints = make(map[string]*core.WebhookEndpoint)
		}
		if _, dup := s.Endpoints[ep.ID]; dup {
			return fmt.Errorf("endpoint_created: endpoint %s already exists", ep.ID)
		}
		s.Endpoints[ep.ID] = &ep
		s.ActiveEndpoints++
	case e.EndpointDisabled != nil:
		ep, ok := s.Endpoints[e.EndpointDisabled.EndpointID]
		if !ok {
			return fmt.Errorf("endpoint_disabled: project %s has no endpoint %s", s.Project.ID, e.EndpointDisabled.EndpointID)
		}
		if ep.Status == core.EndpointEnabled {
			ep.Status = core.EndpointDisabled
			ep.DisabledAt = e.EndpointDisabled.At
			s.ActiveEndpoints--
		}
	case e.APIKeyRevoked != nil:
		k, ok := s.Keys[e.APIKeyRevoked.KeyID]
		if !ok {
			return fmt.Errorf("api_key_revoked: project %s has no key %s", s.Project.ID, e.APIKeyRevoked.KeyID)
		}
		if k.RevokedAt.IsZero() {
			k.RevokedAt = e.APIKeyRevoked.At
			s.ActiveKeys--
		}
	case e.APIKeyUsed != nil:
		// Only forward: a use journaled late never moves it back. A use is
		// a note, not a change of what the key is: one of a key the state
		// does not hold changes nothing (TestProjectApply).
		if k, ok := s.Keys[e.APIKeyUsed.KeyID]; ok && e.APIKeyUsed.At.After(k.LastUsedAt) {
			k.LastUsedAt = e.APIKeyUsed.At
		}
	case e.ProjectRenamed != nil:
		s.Project.Name = e.ProjectRenamed.Name
	case e.ProjectArchived != nil:
		s.Project.Status = core.ProjectArchived
		s.Project.ArchivedAt = e.ProjectArchived.At
	default:
		return core.ErrUnknownEvent
	}
	return nil
}

// Replay is the state recovery rebuilds for project projectID from store,
// encoded as ReadState answers; it starts no actor and writes nothing
// (core.ReplayLog).
func Replay(store persistence.Storage, projectID string) ([]byte, error) {
	return core.ReplayLog(store, Journal(projectID), func() *projectState { return &projectState{} }, nil)
}

// Journal names a project's journal, snapshot and actor:
// project/<project_id>.
func Journal(projectID string) string { return "project/" + projectID }

// RecordKey is the pr/ entry holding a project's view (ProjectView), as
// the dashboard shows it, written in the batch of every change to it: in
// a cluster the directory reads it there, as the project's actor may run
// on another node.
func RecordKey(projectID string) []byte {
	return []byte(persistence.PrefixProjectRec + projectID)
}

// WriteRecord adds p's pr/ entry to b.
func WriteRecord(b *persistence.Batch, p *core.Project) {
	b.Set(RecordKey(p.ID), core.MustJSON(ViewOf(p)))
}

// WorkspaceKey is the wp/ entry listing projectID among its workspace's
// projects.
func WorkspaceKey(accountID, projectID string) []byte {
	return []byte(persistence.PrefixWorkspaceProj + accountID + "/" + projectID)
}
