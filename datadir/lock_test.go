package datadir

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestAcquireRefusesASecondHolderAndNamesThePid(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("data dir not created 0700: %v %v", st, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, PidFile))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("pid file holds %q (%v), want %d", b, err, os.Getpid())
	}

	// A second open file description conflicts even within one process,
	// as a second process would.
	_, err = Acquire(dir)
	var held *HeldError
	if !errors.As(err, &held) || !errors.Is(err, ErrHeld) {
		t.Fatalf("second Acquire: %v, want a HeldError", err)
	}
	if held.PID != os.Getpid() || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) ||
		!strings.Contains(err.Error(), "another rtcd") {
		t.Fatalf("error %q does not name the holder", err)
	}

	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	if err := first.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	again, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	defer again.Release()
}

func TestAcquireReplacesAStalePid(t *testing.T) {
	dir := t.TempDir()
	// A process that crashed left its pid; nobody holds the lock.
	if err := os.WriteFile(filepath.Join(dir, PidFile), []byte("999999999999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	b, _ := os.ReadFile(filepath.Join(dir, PidFile))
	if strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("pid file holds %q after Acquire", b)
	}
}

func TestHeldErrorWithoutPid(t *testing.T) {
	err := &HeldError{Dir: "/d"}
	if strings.Contains(err.Error(), "pid") || !strings.Contains(err.Error(), "another rtcd holds the data directory /d") {
		t.Fatalf("message %q", err)
	}
}
