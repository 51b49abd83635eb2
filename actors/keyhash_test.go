package actors

import (
	"testing"

	"rtcd/actors/core"
	"rtcd/auth"
	"rtcd/persistence"
)

// A key's project is found from its secret in the store's kh/ index, from
// the batch that created the key on, and still after the key is revoked
// (the owner refuses it; routing needs only the project).
func TestKeyHashIndexNamesTheProject(t *testing.T) {
	e, _, caller := newTestEngine(t)
	res, aerr := e.CreateAPIKey(caller, &APIKeyParams{Scopes: []string{"rooms:read"}}, nil)
	if aerr != nil {
		t.Fatal(aerr)
	}
	var created struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	if err := jsonUnmarshal(res.Body, &created); err != nil || created.Secret == "" {
		t.Fatalf("created key: %s", res.Body)
	}
	lookup := func(secret string) (string, bool) {
		t.Helper()
		p, ok, err := e.ProjectOfAPIKey(secret)
		if err != nil {
			t.Fatal(err)
		}
		return p, ok
	}
	if p, ok := lookup(created.Secret); !ok || p != caller.ProjectID {
		t.Fatalf("new key: %q %v, want %s", p, ok, caller.ProjectID)
	}
	if _, aerr := e.RevokeAPIKey(caller, created.ID); aerr != nil {
		t.Fatal(aerr)
	}
	if p, ok := lookup(created.Secret); !ok || p != caller.ProjectID {
		t.Fatalf("revoked key: %q %v, want still %s", p, ok, caller.ProjectID)
	}
	other, err := auth.NewAPIKeySecret()
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{other, "sk_live_short", ""} {
		if p, ok := lookup(secret); ok {
			t.Fatalf("%q names project %s", secret, p)
		}
	}
	if _, err := e.env.Store.Get(keyHashIndexBuilt); err != nil {
		t.Fatalf("the index is not marked built: %v", err)
	}
}

// A store written before the index existed (here: the bootstrap key's kh/
// record and its mark removed) gets the records of its active keys at Start,
// in batches the store takes.
func TestKeyHashIndexBuiltForAnOlderStore(t *testing.T) {
	var bootKey string
	e, store, _, caller := startLimited(t, 3, func(s *persistence.Store, boot BootstrapResult) {
		bootKey = boot.APIKey
		keys, err := auth.DeriveKeys(make([]byte, 32))
		if err != nil {
			t.Fatal(err)
		}
		b := s.NewBatch()
		b.Delete(core.KeyHashKey(keys.HashAPIKey(boot.APIKey)))
		b.Delete(keyHashIndexBuilt)
		if err := s.CommitAndWait(b); err != nil {
			t.Fatal(err)
		}
	})
	if p, ok, err := e.ProjectOfAPIKey(bootKey); err != nil || !ok || p != caller.ProjectID {
		t.Fatalf("bootstrap key after Start: %q %v %v, want %s", p, ok, err, caller.ProjectID)
	}
	if _, err := store.Get(keyHashIndexBuilt); err != nil {
		t.Fatalf("the index is not marked built: %v", err)
	}
}
