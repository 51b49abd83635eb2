// Package walgate is a Pebble file system for tests that holds back the
// write-ahead log's fsync on request. While the gate is held, every sync of
// a WAL file waits, so a test can look at the moment after a batch was
// applied (visible to readers) and before it is durable (acknowledged), or
// let batches pile up behind a slow disk. It is for tests only.
package walgate

import (
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// Gate wraps a file system; open the store on its FS.
type Gate struct {
	FS vfs.FS

	mu      sync.Mutex
	held    chan struct{} // nil: syncs pass; closed by Release
	waiting chan struct{}
}

// Wrap returns a gate over fs, open (syncs pass).
func Wrap(fs vfs.FS) *Gate {
	g := &Gate{waiting: make(chan struct{}, 1)}
	g.FS = recycledFS{FS: errorfs.Wrap(fs, errorfs.InjectorFunc(g.maybeWait)), g: g}
	return g
}

// recycledFS gates the WAL files Pebble recycles too: errorfs injects
// into the files it creates and opens, but hands a reused file back
// bare, and Pebble reuses an obsolete WAL file for each new WAL once it
// has one (after the first memtable flush). Without this, the syncs of
// every WAL after the first would pass a held gate.
type recycledFS struct {
	vfs.FS
	g *Gate
}

func (fs recycledFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil {
		return nil, err
	}
	return recycledFile{File: f, path: newname, g: fs.g}, nil
}

// recycledFile is a reused file whose syncs pass the gate.
type recycledFile struct {
	vfs.File
	path string
	g    *Gate
}

func (f recycledFile) Sync() error {
	_ = f.g.maybeWait(errorfs.Op{Kind: errorfs.OpFileSync, Path: f.path})
	return f.File.Sync()
}

func (f recycledFile) SyncData() error {
	_ = f.g.maybeWait(errorfs.Op{Kind: errorfs.OpFileSyncData, Path: f.path})
	return f.File.SyncData()
}

func (f recycledFile) SyncTo(length int64) (bool, error) {
	_ = f.g.maybeWait(errorfs.Op{Kind: errorfs.OpFileSyncTo, Path: f.path})
	return f.File.SyncTo(length)
}

// Hold makes every WAL sync that starts from now on wait until Release.
func (g *Gate) Hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held == nil {
		g.held = make(chan struct{})
	}
}

// Release lets the waiting syncs, and every later one, complete.
// Releasing an open gate does nothing.
func (g *Gate) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held != nil {
		close(g.held)
		g.held = nil
	}
}

// Waiting receives a value when a WAL sync starts waiting at the gate
// (at most one value is buffered).
func (g *Gate) Waiting() <-chan struct{} { return g.waiting }

func (g *Gate) maybeWait(op errorfs.Op) error {
	switch op.Kind {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
	default:
		return nil
	}
	if !strings.HasSuffix(op.Path, ".log") { // Pebble's WAL files are NNNNNN.log
		return nil
	}
	g.mu.Lock()
	held := g.held
	g.mu.Unlock()
	if held == nil {
		return nil
	}
	select {
	case g.waiting <- struct{}{}:
	default:
	}
	<-held
	return nil
}
