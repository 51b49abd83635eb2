package actors

import (
	"strings"
	"sync"
	"testing"
	"time"

	"rtcd/actors/core"
	"rtcd/actors/project"
	"rtcd/apierr"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/persistence"
	"rtcd/ratelimit"
)

// A project's p/ entry names its workspace from the batch that created it,
// so any node can tell where it is placed.
func TestProjectEntryNamesItsWorkspace(t *testing.T) {
	var accountID string
	e, _, _, caller := startLimited(t, 1000, func(_ *persistence.Store, boot BootstrapResult) { accountID = boot.AccountID })
	got, ok, err := e.AccountOfProject(caller.ProjectID)
	if err != nil || !ok || got != accountID {
		t.Fatalf("workspace of %s: %q %v %v, want %s", caller.ProjectID, got, ok, err, accountID)
	}
	for _, id := range []string{"", "prj_missing"} {
		if got, ok, err := e.AccountOfProject(id); err != nil || ok {
			t.Fatalf("workspace of %q: %q %v %v, want none", id, got, ok, err)
		}
	}
	if _, err := e.env.Store.Get(project.WorkspaceKey(accountID, caller.ProjectID)); err != nil {
		t.Fatalf("the workspace does not list its project: %v", err)
	}
}

// A store written before the entries named the workspace (here: the
// bootstrap project's p/ entry emptied, its wp/ entry and the mark
// deleted) gets them at Start, in batches the store takes, and is marked.
func TestProjectEntriesNamedForAnOlderStore(t *testing.T) {
	var accountID string
	e, store, _, caller := startLimited(t, 3, func(s *persistence.Store, boot BootstrapResult) {
		accountID = boot.AccountID
		b := s.NewBatch()
		b.Set(persistence.Key(persistence.PrefixProject, boot.ProjectID), nil)
		b.Delete(project.WorkspaceKey(boot.AccountID, boot.ProjectID))
		b.Delete(projectAccountIndexBuilt)
		b.Delete(project.RecordKey(boot.ProjectID))
		b.Delete(projectRecordIndexBuilt)
		if err := s.CommitAndWait(b); err != nil {
			t.Fatal(err)
		}
	})
	if got, ok, err := e.AccountOfProject(caller.ProjectID); err != nil || !ok || got != accountID {
		t.Fatalf("workspace after Start: %q %v %v, want %s", got, ok, err, accountID)
	}
	if _, err := store.Get(project.WorkspaceKey(accountID, caller.ProjectID)); err != nil {
		t.Fatalf("the workspace does not list its project after Start: %v", err)
	}
	if _, err := store.Get(project.RecordKey(caller.ProjectID)); err != nil {
		t.Fatalf("the project has no record after Start: %v", err)
	}
	for _, mark := range [][]byte{projectAccountIndexBuilt, projectRecordIndexBuilt} {
		if _, err := store.Get(mark); err != nil {
			t.Fatalf("the index %s is not marked built: %v", mark, err)
		}
	}
}

// startClusteredEngine bootstraps a Pebble store and starts an engine on
// it as a cluster node: nothing runs until a workspace is placed.
func startClusteredEngine(t *testing.T) (*Engine, BootstrapResult) {
	t.Helper()
	e, _, boot := bootTestEngine(t, persistence.Options{}, nil)
	if err := e.StartClustered(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e, boot
}

// A cluster node serves a workspace from its placement to its release:
// its API keys are refused before and after, its counts leave the
// process's gauges, and placed again it comes back from the store with its
// rooms.
func TestWorkspacePlacedReleasedAndPlacedAgain(t *testing.T) {
	e, boot := startClusteredEngine(t)
	if _, aerr := e.Authenticate(boot.APIKey); aerr == nil {
		t.Fatal("a key of a workspace not placed here was accepted")
	}
	if err := e.PlaceWorkspace(boot.AccountID); err != nil {
		t.Fatal(err)
	}
	caller, aerr := e.Authenticate(boot.APIKey)
	if aerr != nil {
		t.Fatalf("placed: %v", aerr)
	}
	res, aerr := e.CreateRoom(caller, &RoomParams{}, nil)
	if aerr != nil {
		t.Fatal(aerr)
	}
	roomID := decodeID(t, res.Body)
	var tokens []string
	for range 3 {
		res, aerr := e.CreateParticipant(caller, roomID, &ParticipantParams{}, nil)
		if aerr != nil {
			t.Fatal(aerr)
		}
		tokens = append(tokens, decodeToken(t, res.Body))
	}
	for _, tok := range tokens[:2] {
		if _, aerr := e.Connect(&ConnectParams{Token: &tok}, "127.0.0.1"); aerr != nil {
			t.Fatal(aerr)
		}
	}

	media := &releasingMedia{}
	e.SetMedia(media)
	e.ReleaseWorkspace(boot.AccountID)
	if got := media.releasedRooms(); len(got) != 1 || got[0] != roomID {
		t.Fatalf("the media node was told to release %v, want the workspace's room %s", got, roomID)
	}
	if _, aerr := e.Authenticate(boot.APIKey); aerr == nil {
		t.Fatal("a key of a released workspace was accepted")
	}
	if got := e.Stats(); got.ActiveRooms != 0 || got.ActiveParticipants != 0 {
		t.Fatalf("released, the node still counts %+v", got)
	}
	if _, aerr := e.Connect(&ConnectParams{Token: &tokens[2]}, "127.0.0.1"); aerr == nil {
		t.Fatal("a released workspace's room admitted a connect")
	}

	if err := e.PlaceWorkspace(boot.AccountID); err != nil {
		t.Fatal(err)
	}
	if err := e.PlaceWorkspace(boot.AccountID); err != nil { // placed already: nothing to do
		t.Fatal(err)
	}
	if caller, aerr = e.Authenticate(boot.APIKey); aerr != nil {
		t.Fatalf("placed again: %v", aerr)
	}
	if _, aerr := e.GetRoom(caller, roomID); aerr != nil {
		t.Fatalf("the room after placing again: %v", aerr)
	}
	// Connects are reservations, not writes (ARCHITECTURE.md): like a
	// restart, a move keeps the room and lets its reservations go, and the
	// room admits up to its cap again.
	if got := e.Stats(); got.ActiveRooms != 1 || got.ActiveParticipants != 0 {
		t.Fatalf("placed again: %+v, want 1 room and no reservation", got)
	}
	for i, tok := range tokens {
		_, aerr := e.Connect(&ConnectParams{Token: &tok}, "127.0.0.1")
		if (i < 2) != (aerr == nil) {
			t.Fatalf("connect %d into a room of cap 2 placed again: %v", i, aerr)
		}
	}
	// A workspace the store does not hold places nothing.
	if err := e.PlaceWorkspace("acct_missing"); err != nil {
		t.Fatal(err)
	}
}

// A cluster node does not start on a store whose indexes are not built:
// it could not place the requests of its older projects and keys.
func TestClusteredStartNeedsTheIndexes(t *testing.T) {
	store, err := persistence.Open(t.TempDir(), persistence.Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	keys, err := auth.DeriveKeys(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	if _, err := Bootstrap(store, keys, clk, core.Billing{Currency: "USD"}, "owner@example.com"); err != nil {
		t.Fatal(err)
	}
	b := store.NewBatch()
	b.Delete(projectAccountIndexBuilt)
	if err := store.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	e, err := New(core.Settings{Region: "global", MediaURL: "ws://127.0.0.1:1/rtc", SnapshotEveryEvents: 1000}, store, clk, ratelimit.NewMemory(), keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.StartClustered(); err == nil || !strings.Contains(err.Error(), "project-workspace-index") {
		t.Fatalf("StartClustered on an older store: %v", err)
	}
}

// releasingMedia is a media engine that records the rooms it is told to
// release (core.RoomReleaser) and does nothing else.
type releasingMedia struct {
	mu       sync.Mutex
	released []string
}

func (m *releasingMedia) CloseRoom(string, string)                    {}
func (m *releasingMedia) RemoveParticipant(string, string)            {}
func (m *releasingMedia) AdmitSession(string, string, string)         {}
func (m *releasingMedia) CloseSession(string, string, string, string) {}
func (m *releasingMedia) ReleaseRoom(roomID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.released = append(m.released, roomID)
}

func (m *releasingMedia) releasedRooms() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.released...)
}

// On a cluster node the directory runs from PlaceDirectory to
// ReleaseDirectory: its sessions authenticate only meanwhile (a node it
// left answers 503, to be retried on its new node), and placed again it
// recovers them from the store. It reads projects whose workspace is not
// placed here from their pr/ records.
func TestDirectoryPlacedReleasedAndPlacedAgain(t *testing.T) {
	env := &dirEnv{t: t, dir: t.TempDir(), mail: newCaptureSender(), clustered: true,
		clk: clock.NewFake(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))}
	var err error
	if env.keys, err = auth.DeriveKeys(make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
	// A store of the first node: bootstrapped and started once alone.
	env.clustered = false
	env.open()
	env.close()
	env.clustered = true
	env.open()
	t.Cleanup(env.close)
	e := env.e

	owner := env.signIn(env.boot.OwnerEmail)
	u := env.mustAuth(owner.Token)
	if _, ok := e.project(env.boot.ProjectID); ok {
		t.Fatal("the workspace's project runs on a node that placed only the directory")
	}
	me := env.me(u)
	if len(me.Accounts) != 1 || len(me.Accounts[0].Projects) != 1 || me.Accounts[0].Projects[0].ID != env.boot.ProjectID ||
		me.Accounts[0].Projects[0].Status != core.ProjectActive {
		t.Fatalf("GET /v1/me without the workspace placed here: %+v", me.Accounts)
	}

	e.ReleaseDirectory()
	if _, aerr := e.AuthenticateSession(owner.Token); aerr == nil || aerr.Code != apierr.ServiceUnavailable || aerr.RetryAfterSeconds != 1 {
		t.Fatalf("a session on a node the directory left: %v, want 503 with Retry-After", aerr)
	}
	if _, aerr := e.Me(u); aerr == nil || aerr.Code != apierr.ServiceUnavailable {
		t.Fatalf("GET /v1/me on a node the directory left: %v, want 503", aerr)
	}
	if err := e.PlaceDirectory(); err != nil {
		t.Fatal(err)
	}
	env.mustAuth(owner.Token)
	if err := e.PlaceDirectory(); err != nil { // placed already: nothing to do
		t.Fatal(err)
	}
	env.mustAuth(owner.Token)
}
