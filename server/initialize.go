package server

import (
	"errors"
	"fmt"
	"os"

	"rtcd/actors"
	"rtcd/clock"
	"rtcd/config"
	"rtcd/persistence"
)

// ErrClusterNeedsInit refuses a cluster node's start on a store no one
// bootstrapped: nodes starting together would each bootstrap it.
var ErrClusterNeedsInit = errors.New("a cluster node does not bootstrap the store: run `rtcd init` once, with the same store flags and master key, before starting the nodes")

// Initialize bootstraps the store cfg names, as `rtcd init` does: a
// workspace, its project and an API key holding every scope. It refuses a
// store that is initialised already, before touching the master key (an
// initialised store keeps the key it was initialised with). The caller
// holds the data directory's lock.
func Initialize(cfg *config.Config, clk clock.Clock) (actors.BootstrapResult, error) {
	store, _, err := OpenStorage(cfg, persistence.Metrics{}, func(err error) {
		fmt.Fprintln(os.Stderr, "rtcd:", err)
		os.Exit(1)
	})
	if err != nil {
		return actors.BootstrapResult{}, err
	}
	defer store.Close()
	already := fmt.Errorf("%s is already initialised; refusing to create a second workspace (use another --data-dir)", cfg.DataDir)
	if ok, err := actors.Initialized(store); err != nil {
		return actors.BootstrapResult{}, err
	} else if ok {
		return actors.BootstrapResult{}, already
	}
	keys, _, err := OpenKeys(cfg, store)
	if err != nil {
		return actors.BootstrapResult{}, err
	}
	res, err := actors.Bootstrap(store, keys, clk, BillingFromConfig(cfg), cfg.OwnerEmail)
	if errors.Is(err, actors.ErrAlreadyInitialized) {
		return actors.BootstrapResult{}, already
	}
	return res, err
}
