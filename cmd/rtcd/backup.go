package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/goccy/go-json"
	"rtcd/server"
)

// runBackup asks a running server for an online backup (a Pebble
// checkpoint and the master key file) through its private listener and the
// data directory's admin token, like `rtcd billing adjust`.
func runBackup(args []string) error {
	fs := flag.NewFlagSet("rtcd backup", flag.ContinueOnError)
	to := fs.String("to", "", "the backup directory to create (must not exist; its parent must); the server writes it")
	dataDir := fs.String("data-dir", envOr("RTCD_DATA_DIR", "./data"), "data directory of the running server (for its admin token)")
	private := fs.String("metrics-listen", envOr("RTCD_METRICS_LISTEN", "127.0.0.1:9100"), "the server's private listener")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *to == "" || fs.NArg() > 0 {
		return errors.New("usage: rtcd backup --to DIR [--data-dir DIR] [--metrics-listen ADDR]")
	}
	// The server resolves nothing relative to its own working directory.
	dir, err := filepath.Abs(*to)
	if err != nil {
		return err
	}
	token, err := os.ReadFile(filepath.Join(*dataDir, "admin.token"))
	if err != nil {
		return fmt.Errorf("reading the admin token: %w", err)
	}
	m, err := server.TakeBackup(*private, strings.TrimSpace(string(token)), dir)
	if err != nil {
		return err
	}
	out, _ := json.Marshal(m)
	fmt.Println(string(out))
	return nil
}

// runRestore copies a backup into a new data directory, which `rtcd serve
// --data-dir` then serves.
func runRestore(args []string) error {
	fs := flag.NewFlagSet("rtcd restore", flag.ContinueOnError)
	from := fs.String("from", "", "a backup directory written by rtcd backup")
	dataDir := fs.String("data-dir", os.Getenv("RTCD_DATA_DIR"), "the new data directory (missing or empty)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *from == "" || *dataDir == "" || fs.NArg() > 0 {
		return errors.New("usage: rtcd restore --from BACKUP_DIR --data-dir NEW_DATA_DIR")
	}
	m, err := server.RestoreBackup(*from, *dataDir)
	if err != nil {
		return err
	}
	out, _ := json.Marshal(map[string]any{"restored": *dataDir, "backup": m})
	fmt.Println(string(out))
	if !m.MasterKeyIncluded {
		fmt.Fprintln(os.Stderr, "rtcd: the backup holds no master key (the server used RTCD_MASTER_KEY): serve the restored directory with the same RTCD_MASTER_KEY")
	}
	return nil
}
