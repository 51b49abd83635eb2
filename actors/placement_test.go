package actors

import (
	"testing"

	"rtcd/persistence"
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
}

// A store written before the entries named the workspace (here: the
// bootstrap project's entry emptied, its mark deleted) gets them at Start, in
// batches the store takes, and is marked.
func TestProjectEntriesNamedForAnOlderStore(t *testing.T) {
	var accountID string
	e, store, _, caller := startLimited(t, 3, func(s *persistence.Store, boot BootstrapResult) {
		accountID = boot.AccountID
		b := s.NewBatch()
		b.Set(persistence.Key(persistence.PrefixProject, boot.ProjectID), nil)
		b.Delete(projectAccountIndexBuilt)
		if err := s.CommitAndWait(b); err != nil {
			t.Fatal(err)
		}
	})
	if got, ok, err := e.AccountOfProject(caller.ProjectID); err != nil || !ok || got != accountID {
		t.Fatalf("workspace after Start: %q %v %v, want %s", got, ok, err, accountID)
	}
	if _, err := store.Get(projectAccountIndexBuilt); err != nil {
		t.Fatalf("the index is not marked built: %v", err)
	}
}
