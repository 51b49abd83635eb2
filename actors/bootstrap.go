package actors

import (
	"crypto/hmac"
	"errors"
	"fmt"

	"rtcd/actors/core"
	"rtcd/actors/directory"
	"rtcd/actors/project"
	"rtcd/actors/wallet"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/ids"
	"rtcd/persistence"
	"rtcd/scopes"
)

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
func CheckMasterKey(s persistence.Storage, keys auth.Keys) error {
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
func Initialized(s persistence.Storage) (bool, error) {
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
func Bootstrap(s persistence.Storage, keys auth.Keys, clk clock.Clock, billing core.Billing, ownerEmail string) (BootstrapResult, error) {
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
	// A new store's indexes are complete from its first batch: nothing to
	// build at Start, and a cluster node may serve it at once.
	b.Set(keyHashIndexBuilt, nil)
	b.Set(projectAccountIndexBuilt, nil)
	b.Set(projectRecordIndexBuilt, nil)
	b.Set(initializedKey, []byte(core.Timestamp(now)))
	if err := s.CommitAndWait(b); err != nil {
		return BootstrapResult{}, err
	}
	return BootstrapResult{AccountID: accountID, ProjectID: proj.ID, APIKeyID: key.ID, APIKey: secret, OwnerEmail: owner.Email}, nil
}
