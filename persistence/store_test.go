package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// openTestStore opens a Store on a fresh directory; a fatal error fails the test.
func openTestStore(t testing.TB) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, Metrics{}, func(err error) { t.Errorf("fatal storage error: %v", err) })
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, dir
}

// openStoreWith opens a Store through OpenWith, the function Open uses,
// over the given options (an in-memory crashable file system, a read-only
// database), so these tests see every setting production opens with.
func openStoreWith(t testing.TB, dir string, o Options, fatal func(error)) *Store {
	t.Helper()
	s, err := OpenWith(dir, o, Metrics{}, fatal)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

// keysOn recovers the database that survived a simulated crash (fs is a
// crash clone) as a restart would, through OpenWith, and returns which of
// keys it holds.
func keysOn(t *testing.T, fs vfs.FS, dir string, keys [][]byte) map[string]bool {
	t.Helper()
	s := openStoreWith(t, dir, Options{FS: fs}, func(err error) { t.Errorf("fatal on crash clone: %v", err) })
	defer s.Close()
	found := make(map[string]bool)
	for _, k := range keys {
		_, err := s.Get(k)
		if err == nil {
			found[string(k)] = true
		} else if !errors.Is(err, ErrNotFound) {
			t.Fatalf("get %q on crash clone: %v", k, err)
		}
	}
	return found
}

// waitGroupTimeout bounds waiting for done callbacks that an unsynced WAL
// would never run (a database opened without one, say).
const waitGroupTimeout = 10 * time.Second

// waitGroup waits for wg, failing the test after waitGroupTimeout.
func waitGroup(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitGroupTimeout):
		t.Fatalf("%s did not run within %s", what, waitGroupTimeout)
	}
}

func seqKey(i int) []byte { return []byte(fmt.Sprintf("k/%06d", i)) }

// TestCrashCloneDropsUnsyncedWrites is the control for the durability tests
// below: a write applied without a WAL sync is absent after a simulated
// power loss, so those tests do detect a done callback that runs early.
func TestCrashCloneDropsUnsyncedWrites(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s := openStoreWith(t, "db", Options{FS: fs}, func(err error) { t.Errorf("fatal: %v", err) })
	defer s.Close()
	if err := s.db.Set([]byte("unsynced"), []byte("v"), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get([]byte("unsynced")); err != nil {
		t.Fatalf("unsynced write is not visible to readers: %v", err)
	}
	if keysOn(t, fs.CrashClone(vfs.CrashCloneCfg{}), "db", [][]byte{[]byte("unsynced")})["unsynced"] {
		t.Fatal("a write that was never synced survived the simulated crash; the durability tests would prove nothing")
	}
}

// TestCommitDoneOnlyAfterDurable takes a simulated power-loss image of the
// disk inside every done callback: the batch being acknowledged, and every
// batch committed before it, must be in that image.
func TestCommitDoneOnlyAfterDurable(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s := openStoreWith(t, "db", Options{FS: fs}, func(err error) { t.Errorf("fatal: %v", err) })
	const n = 40
	clones := make([]*vfs.MemFS, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		b := s.NewBatch()
		b.Set(seqKey(i), []byte("v"))
		s.Commit(b, func() {
			clones[i] = fs.CrashClone(vfs.CrashCloneCfg{})
			wg.Done()
		})
	}
	waitGroup(t, &wg, "the done callbacks of every committed batch")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	all := make([][]byte, n)
	for i := range all {
		all[i] = seqKey(i)
	}
	for i, clone := range clones {
		found := keysOn(t, clone, "db", all)
		for j := 0; j <= i; j++ {
			if !found[string(seqKey(j))] {
				t.Fatalf("batch %d was acknowledged, but after a crash at that moment batch %d is lost", i, j)
			}
		}
	}
}

func TestCommitAndWaitIsDurableOnReturn(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s := openStoreWith(t, "db", Options{FS: fs}, func(err error) { t.Errorf("fatal: %v", err) })
	defer s.Close()
	b := s.NewBatch()
	b.Set([]byte("boot"), []byte("strapped"))
	if err := s.CommitAndWait(b); err != nil {
		t.Fatalf("CommitAndWait: %v", err)
	}
	if !keysOn(t, fs.CrashClone(vfs.CrashCloneCfg{}), "db", [][]byte{[]byte("boot")})["boot"] {
		t.Fatal("CommitAndWait returned before its batch was durable")
	}
	if v, err := s.Get([]byte("boot")); err != nil || string(v) != "strapped" {
		t.Fatalf("Get after CommitAndWait = %q, %v", v, err)
	}
}

// TestCommitAndWaitReportsApplyFailure: a batch the database refuses is an
// error for the non-actor caller, not a hang.
func TestCommitAndWaitReportsApplyFailure(t *testing.T) {
	dir := t.TempDir()
	rw, err := Open(dir, Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	var fatals atomic.Int32
	ro := openStoreWith(t, dir, Options{ReadOnly: true}, func(error) { fatals.Add(1) })
	defer ro.Close()
	b := ro.NewBatch()
	b.Set([]byte("k"), []byte("v"))
	errc := make(chan error, 1)
	go func() { errc <- ro.CommitAndWait(b) }()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("CommitAndWait on a read-only database returned nil")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CommitAndWait on a read-only database never returned")
	}
}

// TestCommitApplyFailureIsFatal: an actor's batch the database refuses goes
// to the fatal handler, and the caller is never acknowledged.
func TestCommitApplyFailureIsFatal(t *testing.T) {
	dir := t.TempDir()
	rw, err := Open(dir, Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	var fatalErr error
	ro := openStoreWith(t, dir, Options{ReadOnly: true}, func(err error) { fatalErr = err })
	var acked atomic.Bool
	b := ro.NewBatch()
	b.Set([]byte("k"), []byte("v"))
	ro.Commit(b, func() { acked.Store(true) })
	if err := ro.Close(); err != nil { // waits for every queued sync and its done
		t.Fatal(err)
	}
	if fatalErr == nil || !errors.Is(fatalErr, pebble.ErrReadOnly) {
		t.Fatalf("fatal handler got %v, want an error wrapping %v", fatalErr, pebble.ErrReadOnly)
	}
	if acked.Load() {
		t.Fatal("a batch that was never applied was acknowledged")
	}
}

func TestCommitDoneRunsInCommitOrder(t *testing.T) {
	s, _ := openTestStore(t)
	const n = 2000
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		b := s.NewBatch()
		b.Set(seqKey(i), []byte("v"))
		s.Commit(b, func() {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			wg.Done()
		})
	}
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("done #%d was for commit %d; done callbacks must run in commit order", i, got)
		}
	}
}

// TestCommitConcurrentCommitters: many goroutines committing at once (group
// commit) each see their own acknowledgements in their commit order, the
// writes are visible as soon as Commit returns, and all are on disk after a
// reopen.
func TestCommitConcurrentCommitters(t *testing.T) {
	s, dir := openTestStore(t)
	const writers, perWriter = 16, 200
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last atomic.Int64
			last.Store(-1)
			acks := make(chan struct{}, perWriter)
			for i := 0; i < perWriter; i++ {
				key := []byte(fmt.Sprintf("w/%02d/%04d", w, i))
				b := s.NewBatch()
				b.Set(key, key)
				s.Commit(b, func() {
					if prev := last.Swap(int64(i)); prev != int64(i-1) {
						t.Errorf("writer %d: commit %d acknowledged after %d", w, i, prev)
					}
					acks <- struct{}{}
				})
				if v, err := s.Get(key); err != nil || !bytes.Equal(v, key) {
					t.Errorf("writer %d: write %d not visible after Commit returned: %q, %v", w, i, v, err)
				}
			}
			for i := 0; i < perWriter; i++ {
				<-acks
			}
		}()
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	n := 0
	if err := s2.Scan([]byte("w/"), 0, func(_, _ []byte) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	if n != writers*perWriter {
		t.Fatalf("after reopen %d keys, want %d", n, writers*perWriter)
	}
}

func TestCloseRunsEveryPendingDone(t *testing.T) {
	s, err := Open(t.TempDir(), Metrics{}, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	var done atomic.Int32
	for i := 0; i < n; i++ {
		b := s.NewBatch()
		b.Set(seqKey(i), nil)
		s.Commit(b, func() { done.Add(1) })
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := done.Load(); got != n {
		t.Fatalf("after Close %d of %d done callbacks ran", got, n)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestGet(t *testing.T) {
	s, _ := openTestStore(t)
	if _, err := s.Get([]byte("missing")); err != ErrNotFound {
		t.Fatalf("Get(missing) error = %v, want ErrNotFound", err)
	}
	b := s.NewBatch()
	b.Set([]byte("k"), []byte("value"))
	if err := s.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	v, err := s.Get([]byte("k"))
	if err != nil || string(v) != "value" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	v[0] = 'X' // the caller owns the copy
	if v2, _ := s.Get([]byte("k")); string(v2) != "value" {
		t.Fatalf("modifying a returned value changed the stored one: %q", v2)
	}
}

func putAll(t *testing.T, s *Store, keys ...string) {
	t.Helper()
	b := s.NewBatch()
	for _, k := range keys {
		b.Set([]byte(k), []byte("v:"+k))
	}
	if err := s.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
}

func scanKeys(t *testing.T, s *Store, prefix string, limit int, stopAfter int) []string {
	t.Helper()
	var got []string
	err := s.Scan([]byte(prefix), limit, func(k, v []byte) bool {
		if string(v) != "v:"+string(k) {
			t.Errorf("value of %q is %q", k, v)
		}
		got = append(got, string(k))
		return stopAfter <= 0 || len(got) < stopAfter
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestScanPrefixAndLimit(t *testing.T) {
	s, _ := openTestStore(t)
	putAll(t, s, "a/3", "a/1", "a/2", "a", "ab/1", "b/1", "a0", "\xff\xff/x", "\xff\xff\xff")
	cases := []struct {
		name      string
		prefix    string
		limit     int
		stopAfter int
		want      []string
	}{
		{"prefix in key order", "a/", 0, 0, []string{"a/1", "a/2", "a/3"}},
		{"limit", "a/", 2, 0, []string{"a/1", "a/2"}},
		{"limit larger than matches", "a/", 10, 0, []string{"a/1", "a/2", "a/3"}},
		{"negative limit is no limit", "a/", -1, 0, []string{"a/1", "a/2", "a/3"}},
		{"fn stops early", "a/", 0, 1, []string{"a/1"}},
		{"prefix without separator", "a", 0, 0, []string{"a", "a/1", "a/2", "a/3", "a0", "ab/1"}},
		{"no match", "c/", 0, 0, nil},
		{"all 0xff prefix has no upper bound", "\xff\xff", 0, 0, []string{"\xff\xff/x", "\xff\xff\xff"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := scanKeys(t, s, c.prefix, c.limit, c.stopAfter)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("Scan(%q, %d) = %q, want %q", c.prefix, c.limit, got, c.want)
			}
		})
	}
}

// ScanFrom starts at from within the prefix, at the prefix when from lies
// before it, and never leaves the prefix.
func TestScanFrom(t *testing.T) {
	s, _ := openTestStore(t)
	putAll(t, s, "a/1", "a/2", "a/3", "a0", "b/1")
	for _, c := range []struct{ from, want string }{
		{"a/2", "[a/2 a/3]"},
		{"a/25", "[a/3]"},
		{"a/", "[a/1 a/2 a/3]"},
		{"", "[a/1 a/2 a/3]"},
		{"a/4", "[]"},
		{"b/", "[]"},
	} {
		var got []string
		if err := s.ScanFrom([]byte("a/"), []byte(c.from), 0, func(k, _ []byte) bool {
			got = append(got, string(k))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != c.want {
			t.Errorf("ScanFrom(a/, %q) = %v, want %s", c.from, got, c.want)
		}
	}
}

func TestPrefixEnd(t *testing.T) {
	cases := []struct{ in, want []byte }{
		{[]byte("a/"), []byte("a0")},
		{[]byte("ab"), []byte("ac")},
		{[]byte("a\xff"), []byte("b")},
		{[]byte("a\xff\xff"), []byte("b")},
		{[]byte("\xff\xff"), nil},
	}
	for _, c := range cases {
		got := prefixEnd(c.in)
		if !bytes.Equal(got, c.want) {
			t.Errorf("prefixEnd(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	p := []byte("ab")
	prefixEnd(p)
	if string(p) != "ab" {
		t.Fatalf("prefixEnd modified its argument: %q", p)
	}
}

func TestIndexKeyOrdersNewestFirst(t *testing.T) {
	s, _ := openTestStore(t)
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	entries := []struct {
		owner string
		at    time.Time
		id    string
	}{
		{"prj_1", base, "room_b"},
		{"prj_1", base.Add(time.Nanosecond), "room_c"},
		{"prj_1", base.Add(-time.Hour), "room_a"},
		{"prj_1", base, "room_a"}, // same instant: id breaks the tie
		{"prj_1", base.Add(48 * time.Hour), "room_z"},
		{"prj_10", base.Add(time.Hour), "room_other"}, // an owner whose id extends prj_1
		{"prj_0", base, "room_other"},
	}
	b := s.NewBatch()
	for _, e := range entries {
		b.Set(IndexKey(PrefixRoomIdx, e.owner, e.at.UnixNano(), e.id), []byte(e.id))
	}
	if err := s.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	var got []string
	prefix := IndexPrefix(PrefixRoomIdx, "prj_1")
	err := s.Scan(prefix, 0, func(k, v []byte) bool {
		if !bytes.HasPrefix(k, prefix) {
			t.Errorf("key %q outside %q", k, prefix)
		}
		got = append(got, string(v))
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"room_z", "room_c", "room_a", "room_b", "room_a"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("index scan = %v, want newest first %v", got, want)
	}
	// The extreme instants still order correctly.
	if bytes.Compare(IndexKey("x/", "o", math.MaxInt64, "a"), IndexKey("x/", "o", 0, "a")) >= 0 {
		t.Fatal("the latest instant does not sort before the epoch")
	}
}

func TestKeysDoNotCollide(t *testing.T) {
	if !bytes.HasPrefix(JournalKey("room/a", 7), journalPrefix("room/a")) {
		t.Fatal("JournalKey does not start with journalPrefix")
	}
	if bytes.HasPrefix(JournalKey("room/ab", 1), journalPrefix("room/a")) {
		t.Fatal("the journal of room/ab is inside the journal prefix of room/a")
	}
	if bytes.Compare(JournalKey("a", 255), JournalKey("a", 256)) >= 0 {
		t.Fatal("journal keys do not sort by sequence number")
	}
	if bytes.Equal(SnapshotKey("room/a"), JournalKey("room/a", 0)) {
		t.Fatal("snapshot and journal keys collide")
	}
	if got := string(Key(PrefixMeta, "initialized")); got != "m/initialized" {
		t.Fatalf("Key = %q", got)
	}
}

// TestCommitSyncFailureIsFatal: when the WAL fsync fails, the batch is
// never acknowledged and the failure goes to the fatal handler.
func TestCommitSyncFailureIsFatal(t *testing.T) {
	errInjected := errors.New("injected fsync failure")
	var armed atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !armed.Load() || !strings.HasSuffix(op.Path, ".log") {
			return nil
		}
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			return errInjected
		}
		return nil
	}))
	fatals := make(chan error, 16)
	s := openStoreWith(t, "db", Options{FS: fs}, func(err error) { fatals <- err })
	putAll(t, s, "before") // syncs fine
	armed.Store(true)
	var acked atomic.Bool
	b := s.NewBatch()
	b.Set([]byte("k"), []byte("v"))
	s.Commit(b, func() { acked.Store(true) })
	select {
	case err := <-fatals:
		if !errors.Is(err, errInjected) {
			t.Fatalf("fatal handler got %v, want the fsync error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a failed fsync never reached the fatal handler")
	}
	if acked.Load() {
		t.Fatal("a batch whose fsync failed was acknowledged")
	}
	armed.Store(false)
	_ = s.Close() // the database may refuse to close cleanly after a failed WAL
	if acked.Load() {
		t.Fatal("a batch whose fsync failed was acknowledged at Close")
	}
}

// FlushIfWALOver flushes only past its bound, and a flush empties the live
// WAL (the memtable is written to an sstable), keeping every write.
func TestFlushIfWALOver(t *testing.T) {
	s := openStoreWith(t, "db", Options{FS: vfs.NewMem()}, func(err error) { t.Errorf("fatal: %v", err) })
	defer s.Close()
	for i := 0; i < 100; i++ {
		b := s.NewBatch()
		b.Set(seqKey(i), bytes.Repeat([]byte("v"), 100))
		if err := s.CommitAndWait(b); err != nil {
			t.Fatal(err)
		}
	}
	if flushed, err := s.FlushIfWALOver(1 << 20); err != nil || flushed {
		t.Fatalf("flushed=%v err=%v under the bound", flushed, err)
	}
	if flushed, err := s.FlushIfWALOver(1 << 10); err != nil || !flushed {
		t.Fatalf("flushed=%v err=%v over the bound", flushed, err)
	}
	if flushed, err := s.FlushIfWALOver(1 << 10); err != nil || flushed {
		t.Fatalf("flushed=%v err=%v right after a flush: the WAL should be empty", flushed, err)
	}
	if _, err := s.Get(seqKey(99)); err != nil {
		t.Fatalf("a write is gone after the flush: %v", err)
	}
}
