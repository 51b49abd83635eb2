package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// PidFile is the name, inside the data directory, of the file that is
// locked while a process uses the directory and holds that process's pid.
const PidFile = "rtcd.pid"

// maxPidFileBytes bounds what is read of a pid file written by someone else.
const maxPidFileBytes = 32

// ErrHeld is matched (errors.Is) by the error of Acquire when another
// process holds the directory.
var ErrHeld = errors.New("datadir: held by another process")

// HeldError says that another process holds the data directory.
type HeldError struct {
	Dir string
	// PID is the holder's process id, or 0 when it could not be read (the
	// holder had locked the file but not yet written its pid).
	PID int
}

func (e *HeldError) Error() string {
	who := "another rtcd"
	if e.PID > 0 {
		who = fmt.Sprintf("another rtcd (pid %d)", e.PID)
	}
	return fmt.Sprintf("%s holds the data directory %s: stop it first, or use another --data-dir (RTCD_DATA_DIR)", who, e.Dir)
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Lock is a held claim on a data directory.
type Lock struct {
	f *os.File
}

// Acquire creates dir (mode 0700) when it is missing and claims it for this
// process, without waiting: when another process holds it, the error is a
// *HeldError naming that process.
func Acquire(dir string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	path := filepath.Join(dir, PidFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir lock: %w", err)
	}
	held, err := tryLock(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("data dir lock %s: %w", path, err)
	}
	if held {
		_ = f.Close()
		abs, aerr := filepath.Abs(dir)
		if aerr != nil {
			abs = dir
		}
		return nil, &HeldError{Dir: abs, PID: readPid(path)}
	}
	// The file may hold the pid of a process that crashed; it is replaced.
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt(pid, 0)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("data dir lock %s: writing the pid: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Release empties the pid file and gives the directory up. It is safe to
// call on a nil Lock and more than once.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0)
	err := l.f.Close() // closing the file drops the lock
	l.f = nil
	return err
}

// readPid returns the pid recorded in path, or 0.
func readPid(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	buf := make([]byte, maxPidFileBytes)
	n, _ := f.Read(buf)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
