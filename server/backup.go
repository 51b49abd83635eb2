package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-json"
	"github.com/valyala/fasthttp"
	"rtcd/apierr"
	"rtcd/config"
	"rtcd/datadir"
	"rtcd/persistence"
)

// Online backups (`rtcd backup`, docs/storage.md#backups): the running
// server writes a Pebble checkpoint of its store, a consistent copy that
// holds every write acknowledged before the backup began, into a new
// directory, with the master key file beside it. Writers are not paused.
// The operator asks for one through the private listener with the admin
// token, as with `rtcd billing adjust`, because only the process that has
// Pebble open can take a checkpoint. A backup directory is laid out as a
// data directory; `rtcd restore` copies it into a new one.

const (
	// BackupPath is the operator route of the private listener.
	BackupPath = "/admin/backup"
	// BackupManifestFile is written last into a backup directory: a
	// directory without it is an unfinished backup and is never restored.
	BackupManifestFile = "backup.json"
	// maxBackupDirBytes bounds the requested path.
	maxBackupDirBytes = 4096
	// backupDirMode is the mode of a backup directory: it holds the master key.
	backupDirMode = 0o700
	// masterKeyFile is the master secret's file in a data directory.
	masterKeyFile = "master.key"
	// pebbleDir is the database's directory inside a data directory.
	pebbleDir = "pebble"
)

// BackupRequest is the body of POST /admin/backup.
type BackupRequest struct {
	// Dir is the absolute path of the backup directory to create; it must
	// not exist, and its parent must.
	Dir string `json:"dir"`
}

// BackupManifest describes a finished backup (backup.json, and the answer
// of POST /admin/backup).
type BackupManifest struct {
	Object    string `json:"object"` // "backup"
	Dir       string `json:"dir"`
	CreatedAt string `json:"created_at"` // when the checkpoint began
	// DurationMillis is how long taking the backup took.
	DurationMillis int64  `json:"duration_ms"`
	RTCDVersion    string `json:"rtcd_version"`
	// MasterKeyIncluded is false when the server reads its master key from
	// RTCD_MASTER_KEY: the restored directory then needs the same value.
	MasterKeyIncluded bool `json:"master_key_included"`
}

// backups takes one backup at a time.
type backups struct {
	cfg     *config.Config
	store   *persistence.Store // nil: the store is not Pebble (JetStream), which has no online backup here
	now     func() time.Time
	running sync.Mutex // held while a backup is taken, and for good once stopped
}

// stop waits for a backup being taken and refuses any later one (409), so
// the store can close. Safe on a nil *backups (a failed start).
func (b *backups) stop() {
	if b != nil {
		b.running.Lock()
	}
}

// handler serves POST /admin/backup.
func (b *backups) handler(adminToken string) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if !adminAuthorized(ctx, adminToken) {
			return
		}
		var req BackupRequest
		if len(ctx.PostBody()) > maxBackupDirBytes || json.Unmarshal(ctx.PostBody(), &req) != nil {
			privateFail(ctx, apierr.New(apierr.InvalidRequest, "body must be {\"dir\": \"/absolute/path/of/a/new/directory\"}"))
			return
		}
		if !b.running.TryLock() {
			privateFail(ctx, apierr.New(apierr.Conflict, "a backup is already being taken; wait for it to finish"))
			return
		}
		defer b.running.Unlock()
		m, aerr := b.take(req.Dir)
		if aerr != nil {
			privateFail(ctx, aerr)
			return
		}
		body, _ := json.Marshal(m)
		ctx.SetContentType("application/json")
		ctx.SetBody(body)
	}
}

// take writes a backup into dir.
func (b *backups) take(dir string) (*BackupManifest, *apierr.Error) {
	if b.store == nil {
		// The JetStream stream is replicated, and backed up by NATS's
		// own tools (docs/cluster.md).
		return nil, apierr.Invalid("dir", "rtcd backup copies a Pebble store; this server runs on --store=jetstream: back the stream up with NATS's own tools (nats stream backup)")
	}
	if err := b.checkTarget(dir); err != nil {
		return nil, apierr.Invalid("dir", "%v", err)
	}
	if err := os.Mkdir(dir, backupDirMode); err != nil {
		return nil, apierr.Invalid("dir", "creating the backup directory: %v", err)
	}
	m, err := b.write(dir)
	if err != nil {
		_ = os.RemoveAll(dir) // created above: never leave a half backup behind
		return nil, apierr.New(apierr.Internal, "backup failed, nothing was kept: %v", err)
	}
	return m, nil
}

// checkTarget refuses a relative path, an existing one, one whose parent is
// missing, and one inside the data directory (a backup belongs elsewhere,
// and would be copied into the next one).
func (b *backups) checkTarget(dir string) error {
	if dir == "" || !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return fmt.Errorf("dir must be an absolute, clean path, got %q", dir)
	}
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("%s exists; a backup goes into a new directory", dir)
	}
	if st, err := os.Stat(filepath.Dir(dir)); err != nil || !st.IsDir() {
		return fmt.Errorf("the parent of %s is not a directory the server can use (%v)", dir, err)
	}
	data, err := filepath.Abs(b.cfg.DataDir)
	if err != nil {
		return err
	}
	if rel, err := filepath.Rel(data, dir); err == nil && !strings.HasPrefix(rel, "..") {
		return fmt.Errorf("%s is inside the data directory %s; put backups elsewhere", dir, data)
	}
	return nil
}

// write takes the checkpoint, copies the master key file and writes the
// manifest, last.
func (b *backups) write(dir string) (*BackupManifest, error) {
	began, started := b.now(), time.Now() // the duration is measured on the monotonic clock
	if err := b.store.Checkpoint(filepath.Join(dir, pebbleDir)); err != nil {
		return nil, err
	}
	keyIncluded := b.cfg.MasterKey == ""
	if keyIncluded {
		if err := copyFileSynced(filepath.Join(b.cfg.DataDir, masterKeyFile), filepath.Join(dir, masterKeyFile), 0o600); err != nil {
			return nil, fmt.Errorf("copying the master key: %w", err)
		}
	}
	m := &BackupManifest{Object: "backup", Dir: dir, CreatedAt: began.UTC().Format(time.RFC3339Nano),
		DurationMillis: time.Since(started).Milliseconds(), RTCDVersion: Version, MasterKeyIncluded: keyIncluded}
	body, _ := json.Marshal(m)
	if err := writeFileSynced(filepath.Join(dir, BackupManifestFile), append(body, '\n'), 0o600); err != nil {
		return nil, err
	}
	return m, syncDir(dir)
}

// TakeBackup is the client side of `rtcd backup`: it asks the server on
// privateAddr to write a backup into dir (absolute) and returns its answer.
func TakeBackup(privateAddr, adminToken, dir string) (*BackupManifest, error) {
	body, _ := json.Marshal(BackupRequest{Dir: dir})
	r := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(r)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	r.SetRequestURI("http://" + privateAddr + BackupPath)
	r.Header.SetMethod("POST")
	r.Header.Set("Authorization", "Bearer "+adminToken)
	r.Header.SetContentType("application/json")
	r.SetBody(body)
	if err := fasthttp.Do(r, resp); err != nil {
		return nil, fmt.Errorf("is rtcd serve running with --metrics-listen %s? %w", privateAddr, err)
	}
	if resp.StatusCode() != 200 {
		return nil, fmt.Errorf("the server refused the backup (%d): %s", resp.StatusCode(), resp.Body())
	}
	var m BackupManifest
	if err := json.Unmarshal(resp.Body(), &m); err != nil {
		return nil, fmt.Errorf("the server's answer %q: %w", resp.Body(), err)
	}
	return &m, nil
}

// RestoreBackup copies the backup in from into the new data directory
// dataDir (missing or empty), holding dataDir's lock meanwhile, and
// returns the backup's manifest. Files are fsynced before it returns.
func RestoreBackup(from, dataDir string) (*BackupManifest, error) {
	raw, err := os.ReadFile(filepath.Join(from, BackupManifestFile))
	if err != nil {
		return nil, fmt.Errorf("%s is not a finished backup (no %s): %w", from, BackupManifestFile, err)
	}
	var m BackupManifest
	if err := json.Unmarshal(raw, &m); err != nil || m.Object != "backup" {
		return nil, fmt.Errorf("%s/%s is not a backup manifest", from, BackupManifestFile)
	}
	if entries, err := os.ReadDir(dataDir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("%s is not empty; restore into a new data directory", dataDir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	lock, err := datadir.Acquire(dataDir)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	if err := copyTreeSynced(filepath.Join(from, pebbleDir), filepath.Join(dataDir, pebbleDir)); err != nil {
		return nil, fmt.Errorf("copying the database: %w", err)
	}
	if m.MasterKeyIncluded {
		if err := copyFileSynced(filepath.Join(from, masterKeyFile), filepath.Join(dataDir, masterKeyFile), 0o600); err != nil {
			return nil, fmt.Errorf("copying the master key: %w", err)
		}
	}
	return &m, syncDir(dataDir)
}

// copyTreeSynced copies the regular files and directories under src into
// dst (which must not exist), fsyncing each file and directory.
func copyTreeSynced(src, dst string) error {
	var dirs []string
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			dirs = append(dirs, target)
			return os.Mkdir(target, backupDirMode)
		case d.Type().IsRegular():
			return copyFileSynced(p, target, 0o600)
		}
		return fmt.Errorf("%s is neither a file nor a directory", p)
	})
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// copyFileSynced copies src to the new file dst and fsyncs it.
func copyFileSynced(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeFileSynced writes the new file path and fsyncs it.
func writeFileSynced(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir fsyncs a directory, so the entries created in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// withBackups routes BackupPath to b and everything else to next.
func withBackups(next fasthttp.RequestHandler, b *backups, adminToken string) fasthttp.RequestHandler {
	backup := b.handler(adminToken)
	return func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == BackupPath {
			backup(ctx)
			return
		}
		next(ctx)
	}
}
