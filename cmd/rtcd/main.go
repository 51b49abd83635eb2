// Command rtcd is the rtcd control plane. Subcommands:
//
//	rtcd init  --data-dir DIR   create a workspace, a project and an API key; print them as JSON
//	rtcd serve [flags]          serve the API (see docs/configuration.md)
//	rtcd version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
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
	case "billing":
		err = runBilling(os.Args[2:])
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
  rtcd billing adjust --account ID --amount -5.00 --reason TEXT [--data-dir DIR] [--metrics-listen ADDR]
                              credit (positive) or debit (negative) a workspace's wallet on a running server
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

// runBilling runs operator billing commands against a running server,
// through its private listener and the data directory's admin token.
func runBilling(args []string) error {
	if len(args) == 0 || args[0] != "adjust" {
		return fmt.Errorf("usage: rtcd billing adjust --account ID --amount DECIMAL --reason TEXT")
	}
	fs := flag.NewFlagSet("rtcd billing adjust", flag.ContinueOnError)
	dataDir := fs.String("data-dir", envOr("RTCD_DATA_DIR", "./data"), "data directory of the running server (for its admin token)")
	private := fs.String("metrics-listen", envOr("RTCD_METRICS_LISTEN", "127.0.0.1:9100"), "the server's private listener")
	account := fs.String("account", "", "workspace (account) id, acct_…")
	amount := fs.String("amount", "", "signed decimal: positive credits, negative debits")
	reason := fs.String("reason", "", "why (recorded in the ledger and the audit log)")
	operator := fs.String("operator", envOr("USER", "operator"), "who runs the command (audit log)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *account == "" || *amount == "" || *reason == "" {
		return fmt.Errorf("--account, --amount and --reason are required")
	}
	token, err := os.ReadFile(filepath.Join(*dataDir, "admin.token"))
	if err != nil {
		return fmt.Errorf("reading the admin token: %w", err)
	}
	out, err := server.AdjustBalance(*private, strings.TrimSpace(string(token)), server.AdjustRequest{
		AccountID: *account, Amount: *amount, Reason: *reason, Operator: *operator,
	})
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
