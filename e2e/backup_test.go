package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBackupUnderWriteLoad takes an online backup (`rtcd backup`) of the
// real binary while workers create rooms, restores it into a new data
// directory (`rtcd restore`), serves that, and finds every room whose
// creation was acknowledged before the backup began. Rooms created after
// the backup finished are absent: the restored server serves the backup,
// not the live directory.
func TestBackupUnderWriteLoad(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("builds and runs the rtcd binary")
	}
	bin := binBuild(t)
	dataDir := t.TempDir()
	boot := binInit(t, bin, dataDir)
	p := binServe(t, bin, dataDir, boot.APIKey, binGenerousLimits...)
	private := cliHostPort(p.Metrics)
	if onJetStream() {
		// A server on JetStream refuses: its stream is backed up with
		// NATS's own tools.
		stdout, stderr, code := cliRun(t, bin, nil, "backup", "--to", filepath.Join(t.TempDir(), "rtcd-backup"), "--data-dir", dataDir, "--metrics-listen", private)
		if code == 0 || stdout != "" || !strings.Contains(stderr, "--store=jetstream") || !strings.Contains(stderr, "nats stream backup") {
			t.Fatalf("rtcd backup of a server on JetStream: exit %d, stdout %q, stderr %q; want a refusal naming nats stream backup", code, stdout, stderr)
		}
		return
	}

	type ack struct {
		id         string
		sent, done time.Time
	}
	var (
		mu     sync.Mutex
		acks   []ack
		count  atomic.Int64
		stop   = make(chan struct{})
		wg     sync.WaitGroup
		client = binClient(true)
	)
	for w := 0; w < binLoadWorkers/2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				sent := time.Now()
				r, err := binCall(client, "POST", p.Base+"/v1/rooms", boot.APIKey, map[string]any{"name": fmt.Sprintf("w%d-%d", w, i)})
				if err != nil || r.status != 201 {
					t.Errorf("create a room under load: %v %d %s", err, r.status, r.raw)
					return
				}
				mu.Lock()
				acks = append(acks, ack{id: r.str("id"), sent: sent, done: time.Now()})
				mu.Unlock()
				count.Add(1)
			}
		}()
	}
	waitAcks := func(n int64) {
		deadline := time.Now().Add(30 * time.Second)
		for count.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("only %d rooms acknowledged in 30 s", count.Load())
			}
			time.Sleep(10 * time.Millisecond) // load progress, not server logic
		}
	}
	waitAcks(binMinAcked * 4)

	backupDir := filepath.Join(t.TempDir(), "rtcd-backup")
	began := time.Now()
	stdout, stderr, code := cliRun(t, bin, nil, "backup", "--to", backupDir, "--data-dir", dataDir, "--metrics-listen", private)
	finished := time.Now()
	if code != 0 {
		t.Fatalf("rtcd backup: exit %d\n%s%s", code, stdout, stderr)
	}
	waitAcks(count.Load() + binMinAcked) // writes go on after the backup
	close(stop)
	wg.Wait()
	var m struct {
		Object            string `json:"object"`
		Dir               string `json:"dir"`
		MasterKeyIncluded bool   `json:"master_key_included"`
	}
	if err := json.Unmarshal([]byte(stdout), &m); err != nil || m.Object != "backup" || m.Dir != backupDir || !m.MasterKeyIncluded {
		t.Fatalf("rtcd backup printed %q (%v)", stdout, err)
	}
	var before, after []string
	for _, a := range acks {
		if a.done.Before(began) {
			before = append(before, a.id)
		}
		if a.sent.After(finished) {
			after = append(after, a.id)
		}
	}
	if len(before) < binMinAcked || len(after) == 0 {
		t.Fatalf("%d rooms acknowledged before the backup, %d created after it: the load did not straddle it", len(before), len(after))
	}
	t.Logf("%d rooms acknowledged before the backup began, %d in all; the backup took %v",
		len(before), len(acks), finished.Sub(began).Round(time.Millisecond))

	t.Run("refusals", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--to", backupDir, "--data-dir", dataDir}, "exists"},
			{[]string{"--to", filepath.Join(dataDir, "inside"), "--data-dir", dataDir}, "inside the data directory"},
			{[]string{"--to", filepath.Join(t.TempDir(), "missing", "b"), "--data-dir", dataDir}, "parent"},
			{[]string{"--to", filepath.Join(t.TempDir(), "b"), "--data-dir", t.TempDir()}, "admin token"},
		} {
			_, stderr, code := cliRun(t, bin, nil, append([]string{"backup", "--metrics-listen", private}, tc.args...)...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Errorf("rtcd backup %v: exit %d, %q; want an error mentioning %q", tc.args, code, stderr, tc.want)
			}
		}
		other := t.TempDir()
		if err := os.WriteFile(filepath.Join(other, "admin.token"), []byte("not-the-token\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, stderr, code := cliRun(t, bin, nil, "backup", "--metrics-listen", private, "--data-dir", other, "--to", filepath.Join(t.TempDir(), "b"))
		if code == 0 || !strings.Contains(stderr, "authentication_failed") {
			t.Errorf("a wrong admin token: exit %d, %q", code, stderr)
		}
	})

	// The backup must not depend on the server that wrote it.
	p.kill()
	restored := filepath.Join(t.TempDir(), "restored")
	if stdout, stderr, code := cliRun(t, bin, nil, "restore", "--from", backupDir, "--data-dir", restored); code != 0 {
		t.Fatalf("rtcd restore: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, stderr, code := cliRun(t, bin, nil, "restore", "--from", backupDir, "--data-dir", restored); code == 0 || !strings.Contains(stderr, "not empty") {
		t.Errorf("a restore over a restored directory: exit %d, %q", code, stderr)
	}
	if _, stderr, code := cliRun(t, bin, nil, "restore", "--from", t.TempDir(), "--data-dir", filepath.Join(t.TempDir(), "x")); code == 0 || !strings.Contains(stderr, "not a finished backup") {
		t.Errorf("a restore from a directory that is no backup: exit %d, %q", code, stderr)
	}

	q := binServe(t, bin, restored, boot.APIKey)
	c := binClient(true)
	var lost atomic.Int64
	binParallel(len(before), func(i int) {
		r, err := binCall(c, "GET", q.Base+"/v1/rooms/"+before[i], boot.APIKey, nil)
		if err != nil || r.status != 200 {
			lost.Add(1)
			t.Errorf("room %s, acknowledged before the backup began: %v %d %s", before[i], err, r.status, r.raw)
		}
	})
	if n := lost.Load(); n > 0 {
		t.Fatalf("%d of %d rooms acknowledged before the backup are missing from it", n, len(before))
	}
	r, err := binCall(c, "GET", q.Base+"/v1/rooms/"+after[len(after)-1], boot.APIKey, nil)
	if err != nil || r.status != 404 {
		t.Errorf("room %s, created after the backup finished, on the restored server: %v %d %s", after[len(after)-1], err, r.status, r.raw)
	}
	if r, err := binCall(c, "POST", q.Base+"/v1/rooms", boot.APIKey, map[string]any{"name": "after restore"}); err != nil || r.status != 201 {
		t.Errorf("a write on the restored server: %v %d %s", err, r.status, r.raw)
	}
}
