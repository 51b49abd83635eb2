// Command rtcd is the rtcd control plane. Subcommands:
//
//	rtcd init  --data-dir DIR   create a workspace, a project and an API key; print them as JSON
//	rtcd serve [flags]          serve the API (see docs/configuration.md)
//	rtcd version
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/goccy/go-json"
	"rtcd/actors"
	"rtcd/clock"
	"rtcd/config"
	"rtcd/persistence"
	"rtcd/server"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "init":
		err = runInit(os.Args[2:])
	case "serve":
		err = runServe(os.Args[2:])
	case "version":
		fmt.Println(server.Version)
	case "-h", "--help", "help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "rtcd: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rtcd:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage:
  rtcd init  --data-dir DIR   create a workspace, one project and an API key holding every scope
  rtcd serve [flags]          serve the API; rtcd serve -h lists every flag and its RTCD_ variable
  rtcd version`)
}

func setupLogging(level string) {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})))
}

// runInit bootstraps a data directory and prints the credentials once.
func runInit(args []string) error {
	cfg, err := config.FromEnv("rtcd init", args)
	if err != nil {
		return err
	}
	setupLogging(cfg.LogLevel)
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return err
	}
	store, err := persistence.Open(filepath.Join(cfg.DataDir, "pebble"), persistence.Metrics{}, func(err error) {
		fmt.Fprintln(os.Stderr, "rtcd:", err)
		os.Exit(1)
	})
	if err != nil {
		return err
	}
	defer store.Close()
	// Refuse before touching the master key: an initialised directory keeps
	// the key it was initialised with.
	if ok, err := actors.Initialized(store); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("%s is already initialised; refusing to create a second workspace (use another --data-dir)", cfg.DataDir)
	}
	keys, _, err := server.OpenKeys(cfg, store)
	if err != nil {
		return err
	}
	res, err := actors.Bootstrap(store, keys, clock.Real{}, server.BillingFromConfig(cfg))
	if errors.Is(err, actors.ErrAlreadyInitialized) {
		return fmt.Errorf("%s is already initialised; refusing to create a second workspace (use another --data-dir)", cfg.DataDir)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

func runServe(args []string) error {
	cfg, err := config.FromEnv("rtcd serve", args)
	if err != nil {
		return err
	}
	setupLogging(cfg.LogLevel)
	srv, err := server.Start(cfg, server.Options{})
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sig:
		slog.Info("shutting down: draining in-flight requests", "signal", s.String())
	case err := <-srv.Errors():
		slog.Error("listener stopped", "error", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.ShutdownTimeoutSeconds)*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	slog.Info("stopped cleanly")
	return nil
}
