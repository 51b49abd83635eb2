// Package storetest is the contract of persistence.Storage written as
// tests: one suite, run against every implementation (Pebble in package
// persistence, JetStream in persistence/jsstore), so the actors may rely on
// what it checks whichever store they run on.
//
// It checks that a batch is all or nothing (before and after its commit,
// and in a helper process killed with SIGKILL while it writes), that scans
// are in bytewise key order under a prefix whatever bytes the keys hold,
// that done callbacks and durability barriers run in commit order and
// only once their writes are readable, that a journal recovers its
// snapshot and tail, and that a store opened again holds what was
// acknowledged before. A store with more than one possible writer
// (Target.Fences) must also refuse the appends of a writer whose journal
// another writer claimed since (persistence.ErrFenced).
package storetest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"rtcd/persistence"
)

// Target is one implementation under test.
type Target struct {
	// New makes a fresh, empty store and returns its spec: a string that
	// Open accepts, in this process or in a helper process (a directory;
	// server URLs and a stream name).
	New func(t testing.TB) string
	// Open opens the store spec names. fatal is its fatal handler. Opening
	// a spec again after Close gives the same store.
	Open func(spec string, fatal func(error)) (persistence.Storage, error)
	// Fences: two writers can open one store at once, and the store
	// refuses a writer that lost its journal (Storage.ClaimJournal).
	Fences bool
	// ScansMayTear: a scan that batches keep landing under while it reads
	// may show part of one (JetStream, past its retries). Without it, the
	// suite checks that a scan during a stream of batches sees each whole.
	ScansMayTear bool
}

// waitSeconds bounds every wait for a callback or a helper process.
const waitSeconds = 30

// helperEnv names the environment variable that makes a re-executed test
// binary the killed writer (its value is the store's spec).
const helperEnv = "RTCD_STORETEST_KILL_HELPER"

// Run runs the suite. A test that calls it is also re-executed, by the
// kill -9 test, as the writer process that is killed: there Run writes
// until it is killed and never returns.
func Run(t *testing.T, target Target) {
	HelperIfAsked(target)
	t.Run("batch is all or nothing", func(t *testing.T) { testAllOrNothing(t, target) })
	t.Run("scan in key order", func(t *testing.T) { testScanOrder(t, target) })
	if !target.ScansMayTear {
		t.Run("scan sees a batch whole or not at all", func(t *testing.T) { testScanIsolation(t, target) })
	}
	t.Run("done and barriers in commit order", func(t *testing.T) { testCallbackOrder(t, target) })
	t.Run("commit and wait", func(t *testing.T) { testCommitAndWait(t, target) })
	t.Run("journal recovers snapshot and tail", func(t *testing.T) { testJournal(t, target) })
	t.Run("reopen gives the same state", func(t *testing.T) { testReopen(t, target) })
	t.Run("kill -9 mid-batch", func(t *testing.T) { testKill9(t, target) })
	if target.Fences {
		t.Run("fenced writer is refused", func(t *testing.T) { testFencing(t, target) })
	}
}

// open opens spec, failing the test on a fatal error, and closes it at the
// end of the test.
func open(t *testing.T, target Target, spec string) persistence.Storage {
	t.Helper()
	s, err := target.Open(spec, func(err error) { t.Errorf("fatal storage error: %v", err) })
	if err != nil {
		t.Fatalf("open %s: %v", spec, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// commitWait commits b and waits until its done callback ran.
func commitWait(t *testing.T, s persistence.Storage, b *persistence.Batch) {
	t.Helper()
	done := make(chan struct{})
	s.Commit(b, func() { close(done) })
	select {
	case <-done:
	case <-time.After(waitSeconds * time.Second):
		t.Fatalf("a committed batch was not acknowledged within %d s", waitSeconds)
	}
}

func mustGet(t *testing.T, s persistence.Storage, key string) (string, bool) {
	t.Helper()
	v, err := s.Get([]byte(key))
	if errors.Is(err, persistence.ErrNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	return string(v), true
}

// scanAll is every key = value under prefix, in the order Scan gives.
func scanAll(t *testing.T, s persistence.Storage, prefix string, limit int) []string {
	t.Helper()
	var out []string
	err := s.Scan([]byte(prefix), limit, func(k, v []byte) bool {
		out = append(out, string(k)+"="+string(v))
		return true
	})
	if err != nil {
		t.Fatalf("scan %q: %v", prefix, err)
	}
	return out
}

// testAllOrNothing: nothing of a batch is readable before its commit, all
// of it after; a discarded batch leaves nothing; deletes are part of the
// batch too.
func testAllOrNothing(t *testing.T, target Target) {
	s := open(t, target, target.New(t))
	b := s.NewBatch()
	if !b.Empty() {
		t.Fatal("a new batch is not empty")
	}
	for i := range 20 {
		b.Set([]byte(fmt.Sprintf("t/%02d", i)), []byte(strconv.Itoa(i)))
	}
	if b.Empty() {
		t.Fatal("a batch with writes reports empty")
	}
	if got := scanAll(t, s, "t/", 0); len(got) != 0 {
		t.Fatalf("writes of an uncommitted batch are readable: %v", got)
	}
	commitWait(t, s, b)
	if got := scanAll(t, s, "t/", 0); len(got) != 20 {
		t.Fatalf("after commit %d of 20 writes are readable: %v", len(got), got)
	}

	// One batch deletes half and overwrites the rest.
	b = s.NewBatch()
	for i := range 20 {
		k := []byte(fmt.Sprintf("t/%02d", i))
		if i%2 == 0 {
			b.Delete(k)
		} else {
			b.Set(k, []byte("x"))
		}
	}
	if v, _ := mustGet(t, s, "t/01"); v != "1" {
		t.Fatalf("an uncommitted overwrite is readable: t/01 = %q", v)
	}
	commitWait(t, s, b)
	got := scanAll(t, s, "t/", 0)
	if len(got) != 10 {
		t.Fatalf("after deleting 10 of 20 keys, %d remain: %v", len(got), got)
	}
	for _, kv := range got {
		if !strings.HasSuffix(kv, "=x") {
			t.Fatalf("a key not overwritten by the committed batch: %s", kv)
		}
	}
	if _, ok := mustGet(t, s, "t/00"); ok {
		t.Fatal("a deleted key is still readable")
	}

	b = s.NewBatch()
	b.Set([]byte("t/discarded"), []byte("v"))
	b.Discard()
	commitWait(t, s, s.NewBatch()) // an empty batch is acknowledged too
	if _, ok := mustGet(t, s, "t/discarded"); ok {
		t.Fatal("a discarded batch was written")
	}
}

// orderKeys are keys whose bytes a subject cannot hold as they are (dots,
// wildcards, spaces, '/', 0x00 and 0xff inside binary parts, empty
// segments), under one prefix and just beside it.
func orderKeys() []string {
	keys := []string{"o/", "o/a", "o/a/", "o/a//b", "o/a/b", "o/a0", "o/a.b", "o/a*", "o/a>", "o/a b",
		"o/\x00", "o/\x00\x00", "o/\x2f\x05", "o/\x05\x2f", "o/\xff", "o/\xff\xff/x", "o/A", "o/~"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 60 {
		k := make([]byte, 3+r.IntN(10))
		for i := range k {
			k[i] = byte(r.IntN(256))
		}
		keys = append(keys, "o/"+string(k))
	}
	return keys
}

// testScanOrder: a scan yields exactly the keys under its prefix, in
// bytewise order, whatever bytes they hold; limit and early stop hold.
func testScanOrder(t *testing.T, target Target) {
	s := open(t, target, target.New(t))
	keys := orderKeys()
	outside := []string{"o", "n/z", "o0", "p/", "oo/a"}
	shuffled := slices.Clone(append(keys, outside...))
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	// Several batches, so the stores' own order (of writes) is not the
	// key order.
	for chunk := range slices.Chunk(shuffled, 7) {
		b := s.NewBatch()
		for _, k := range chunk {
			b.Set([]byte(k), []byte("v"+k))
		}
		commitWait(t, s, b)
	}
	want := slices.Clone(keys)
	slices.Sort(want) // Go compares strings bytewise
	want = slices.Compact(want)
	var got []string
	if err := s.Scan([]byte("o/"), 0, func(k, v []byte) bool {
		if string(v) != "v"+string(k) {
			t.Errorf("scan gave %q = %q", k, v)
		}
		got = append(got, string(k))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("scan of o/ gave %d keys:\n%q\nwant %d in bytewise order:\n%q", len(got), got, len(want), want)
	}
	for _, k := range want {
		if v, ok := mustGet(t, s, k); !ok || v != "v"+k {
			t.Fatalf("get %q = %q, %v", k, v, ok)
		}
	}
	// A limit is the first keys in order; a callback that stops is not
	// called again.
	var first []string
	_ = s.Scan([]byte("o/"), 5, func(k, _ []byte) bool { first = append(first, string(k)); return true })
	if !slices.Equal(first, want[:5]) {
		t.Fatalf("scan with limit 5 gave %q, want %q", first, want[:5])
	}
	n := 0
	_ = s.Scan([]byte("o/"), 0, func(_, _ []byte) bool { n++; return n < 3 })
	if n != 3 {
		t.Fatalf("a scan whose callback returned false went on: %d calls", n)
	}
	// ScanFrom starts at the first key not before from (a from that is
	// not a key, a key, one before the prefix), with the same limit.
	for _, from := range []string{want[3], want[3] + "\x00", "n/", want[len(want)-1] + "\xff"} {
		var got []string
		_ = s.ScanFrom([]byte("o/"), []byte(from), 4, func(k, _ []byte) bool { got = append(got, string(k)); return true })
		i, _ := slices.BinarySearch(want, from)
		if exp := want[i:min(i+4, len(want))]; !slices.Equal(got, exp) {
			t.Fatalf("scan of o/ from %q gave %q, want %q", from, got, exp)
		}
	}
	// A deeper prefix, and one that holds nothing.
	var deep []string
	_ = s.Scan([]byte("o/a/"), 0, func(k, _ []byte) bool { deep = append(deep, string(k)); return true })
	if wantDeep := []string{"o/a/", "o/a//b", "o/a/b"}; !slices.Equal(deep, wantDeep) {
		t.Fatalf("scan of o/a/ gave %q, want %q", deep, wantDeep)
	}
	if got := scanAll(t, s, "q/", 0); len(got) != 0 {
		t.Fatalf("scan of an empty prefix gave %q", got)
	}
}

// testScanIsolation: while another writer (a second opening of the store
// where the store allows one, else the same) overwrites a set of keys
// batch after batch, each batch giving them all one new value, every scan
// sees them all with one value: no scan shows part of a batch.
func testScanIsolation(t *testing.T, target Target) {
	spec := target.New(t)
	reader := open(t, target, spec)
	writer := reader
	if target.Fences {
		writer = open(t, target, spec)
	}
	const keys, generations = 40, 60
	write := func(g int) {
		b := writer.NewBatch()
		for k := range keys {
			b.Set([]byte(fmt.Sprintf("iso/%03d", k)), []byte(strconv.Itoa(g)))
		}
		if err := writer.CommitAndWait(b); err != nil {
			t.Errorf("generation %d: %v", g, err)
		}
	}
	write(0)
	stop := make(chan struct{})
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for g := 1; g <= generations; g++ {
			select {
			case <-stop:
				return
			default:
			}
			write(g)
		}
	}()
	scans := 0
	for done := false; !done; {
		select {
		case <-wrote:
			done = true
		default:
		}
		values := map[string]int{}
		n := 0
		if err := reader.Scan([]byte("iso/"), 0, func(_, v []byte) bool { values[string(v)]++; n++; return true }); err != nil {
			close(stop)
			<-wrote
			t.Fatalf("scan during writes: %v", err)
		}
		if n != keys || len(values) != 1 {
			close(stop)
			<-wrote
			t.Fatalf("a scan saw %d keys with values %v: part of a batch", n, values)
		}
		scans++
	}
	t.Logf("%d scans during %d batches, each saw one batch whole", scans, generations)
}

// testCallbackOrder: done callbacks run in commit order, each only once
// its batch is readable; a barrier runs after the callbacks of every
// batch committed before it.
func testCallbackOrder(t *testing.T, target Target) {
	s := open(t, target, target.New(t))
	const n = 300
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	note := func(what string) {
		mu.Lock()
		order = append(order, what)
		mu.Unlock()
		wg.Done()
	}
	for i := range n {
		key := fmt.Sprintf("c/%04d", i)
		b := s.NewBatch()
		b.Set([]byte(key), []byte("v"))
		wg.Add(1)
		s.Commit(b, func() {
			if _, err := s.Get([]byte(key)); err != nil {
				t.Errorf("batch %d acknowledged but not readable: %v", i, err)
			}
			note(fmt.Sprintf("batch %d", i))
		})
		if i%10 == 9 {
			wg.Add(1)
			s.AfterDurable(func() { note(fmt.Sprintf("barrier %d", i)) })
		}
	}
	waitAll(t, &wg, "every done callback and barrier")
	next := 0
	for _, what := range order {
		var i int
		if _, err := fmt.Sscanf(what, "batch %d", &i); err == nil {
			if i != next {
				t.Fatalf("%s acknowledged when batch %d was next: callbacks out of commit order (%v)", what, next, order)
			}
			next++
			continue
		}
		if _, err := fmt.Sscanf(what, "barrier %d", &i); err != nil || i >= next {
			t.Fatalf("%s ran before the callback of batch %d committed before it", what, i)
		}
	}
	if next != n {
		t.Fatalf("%d of %d batches acknowledged", next, n)
	}
}

func waitAll(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitSeconds * time.Second):
		t.Fatalf("%s did not run within %d s", what, waitSeconds)
	}
}

// testCommitAndWait: the batch is readable when CommitAndWait returns.
func testCommitAndWait(t *testing.T, target Target) {
	s := open(t, target, target.New(t))
	b := s.NewBatch()
	b.Set([]byte("w/boot"), []byte("strapped"))
	b.Set([]byte("w/other"), []byte("too"))
	if err := s.CommitAndWait(b); err != nil {
		t.Fatalf("CommitAndWait: %v", err)
	}
	if v, ok := mustGet(t, s, "w/boot"); !ok || v != "strapped" {
		t.Fatalf("get after CommitAndWait = %q, %v", v, ok)
	}
}

// counterLog is a toy journaled state: the sum of its events.
type counterLog struct {
	sum    int
	events int
}

func (c *counterLog) recover(t *testing.T, s persistence.Storage, actor string, every int) *persistence.Journal {
	t.Helper()
	j := persistence.NewJournal(s, actor, every)
	if _, err := j.Recover(func(state []byte) error {
		var err error
		c.sum, err = strconv.Atoi(string(state))
		return err
	}, func(ev []byte) error {
		n, err := strconv.Atoi(string(ev))
		c.sum += n
		c.events++
		return err
	}); err != nil {
		t.Fatalf("recover %s: %v", actor, err)
	}
	return j
}

// appendN appends events from..to to j, one batch each, with a record
// beside every event as the actors write them, and a snapshot when due.
func (c *counterLog) appendN(t *testing.T, s persistence.Storage, j *persistence.Journal, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		b := s.NewBatch()
		j.Append(b, []byte(strconv.Itoa(i)))
		c.sum += i
		b.Set([]byte(fmt.Sprintf("r/%s/%06d", j.Name(), i)), []byte("record"))
		if j.SnapshotDue() {
			j.WriteSnapshot(b, []byte(strconv.Itoa(c.sum)))
		}
		if i == to {
			commitWait(t, s, b)
		} else {
			s.Commit(b, nil)
		}
	}
}

// testJournal: recovery from a snapshot plus the tail gives the live
// state, for journals with and without snapshots, side by side.
func testJournal(t *testing.T, target Target) {
	spec := target.New(t)
	s := open(t, target, spec)
	live := map[string]*counterLog{}
	for _, a := range []struct {
		name  string
		every int
		n     int
	}{{"room/r1", 7, 30}, {"project/p1", 1000, 25}, {"directory", 5, 5}} {
		c := &counterLog{}
		j := c.recover(t, s, a.name, a.every)
		if j.Seq() != 0 || c.sum != 0 {
			t.Fatalf("a new journal %s recovered seq %d sum %d", a.name, j.Seq(), c.sum)
		}
		c.appendN(t, s, j, 1, a.n)
		if j.Seq() != uint64(a.n) {
			t.Fatalf("%s: seq %d after %d appends", a.name, j.Seq(), a.n)
		}
		live[a.name] = c
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, target, spec)
	for name, c := range live {
		r := &counterLog{}
		j := r.recover(t, s2, name, 1000)
		if r.sum != c.sum {
			t.Fatalf("%s recovered sum %d, the live run had %d", name, r.sum, c.sum)
		}
		if name == "room/r1" && r.events >= 7 {
			t.Fatalf("%s replayed %d events: its snapshot every 7 does not cover the head", name, r.events)
		}
		// Appending after recovery goes on from the recovered sequence.
		r.appendN(t, s2, j, int(j.Seq())+1, int(j.Seq())+3)
		again := &counterLog{}
		again.recover(t, s2, name, 1000)
		if again.sum != r.sum {
			t.Fatalf("%s: appends after recovery recovered to %d, want %d", name, again.sum, r.sum)
		}
	}
}

// testReopen: a store opened again holds every acknowledged write, and the
// same scan gives the same result.
func testReopen(t *testing.T, target Target) {
	spec := target.New(t)
	s := open(t, target, spec)
	for i := range 50 {
		b := s.NewBatch()
		b.Set([]byte(fmt.Sprintf("re/%03d", i)), []byte(strconv.Itoa(i)))
		if i > 0 && i%5 == 0 {
			b.Delete([]byte(fmt.Sprintf("re/%03d", i-1)))
		}
		s.Commit(b, nil)
	}
	barrier := make(chan struct{})
	s.AfterDurable(func() { close(barrier) })
	<-barrier
	before := scanAll(t, s, "re/", 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, target, spec)
	after := scanAll(t, s2, "re/", 0)
	if !slices.Equal(before, after) || len(after) != 41 {
		t.Fatalf("reopened store holds %d keys %v,\nbefore close %d %v", len(after), after, len(before), before)
	}
}

// Kill test shape: the helper commits batches of killBatchKeys keys, all
// holding the batch's number, and prints "begin N" before and "ack N" after
// each is acknowledged. The parent kills it with SIGKILL just after a
// "begin" past killAfterAcks, then checks every batch is whole or absent
// and every acknowledged one is there.
const (
	killBatchKeys   = 400
	killValueBytes  = 256
	killAfterAcks   = 5
	killInFlightMax = 4
	// The kill lands killDelayMinMillis plus up to killDelaySpreadMillis
	// after a "begin": past the store's turn from one batch to the next.
	killDelayMinMillis    = 5
	killDelaySpreadMillis = 15
	killBatchesMax        = 100000 // the helper stops by itself long before
	killWaitSeconds       = waitSeconds
)

// HelperIfAsked turns this process into the killed writer when it is the
// helper a kill test re-executed (and never returns then). A test that
// calls KillMidBatch itself, rather than through Run, calls it first.
func HelperIfAsked(target Target) {
	if spec, ok := os.LookupEnv(helperEnv); ok {
		killHelper(target, spec)
	}
}

func killHelper(target Target, spec string) {
	s, err := target.Open(spec, func(err error) {
		fmt.Printf("fatal %v\n", err)
		os.Exit(3)
	})
	if err != nil {
		fmt.Printf("open: %v\n", err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
		mu.Unlock()
	}
	pad := strings.Repeat("p", killValueBytes)
	// At most killInFlightMax batches wait for their acknowledgement, as
	// an actor's do (bounded queues): the store is always busy writing
	// one, and the helper's memory stays small.
	inFlight := make(chan struct{}, killInFlightMax)
	for n := range killBatchesMax {
		b := s.NewBatch()
		value := []byte(strconv.Itoa(n) + "/" + pad)
		for k := range killBatchKeys {
			b.Set([]byte(fmt.Sprintf("kill/%06d/%04d", n, k)), value)
		}
		inFlight <- struct{}{}
		say("begin %d", n)
		s.Commit(b, func() { say("ack %d", n); <-inFlight })
	}
	os.Exit(4) // never killed: the parent reports it
}

// KillReport is what a store held after its writer was killed mid-batch.
type KillReport struct {
	Acked int // batches acknowledged before the kill
	Whole int // batches found with every key
	Torn  int // batches found with some of their keys: all-or-nothing broken
	Lost  int // acknowledged batches not found at all
}

// KillMidBatch runs the writer in a helper process (this test binary,
// re-executed), kills it with SIGKILL just after it starts a batch, opens
// the store and counts what it holds. It fails the test only when the
// helper cannot be run; judging the report is the caller's.
func KillMidBatch(t *testing.T, target Target) KillReport {
	spec := target.New(t)
	cmd := exec.Command(os.Args[0], "-test.run=^"+strings.Split(t.Name(), "/")[0]+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+spec)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[int]bool{}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(killWaitSeconds * time.Second)
	killed := false
	for !killed {
		select {
		case line, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				t.Fatalf("the writer exited before it was killed:\n%s", stderr.String())
			}
			var n int
			if _, err := fmt.Sscanf(line, "ack %d", &n); err == nil {
				acked[n] = true
			} else if _, err := fmt.Sscanf(line, "begin %d", &n); err == nil && len(acked) >= killAfterAcks {
				// The store is writing an earlier batch (the helper keeps
				// some waiting); a few milliseconds on, it is inside one,
				// not between two: kill it there. Only the moment of the
				// kill depends on this pause, never what is checked.
				time.Sleep(time.Duration(killDelayMinMillis+rand.IntN(killDelaySpreadMillis)) * time.Millisecond)
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = true
			} else if err != nil && !strings.HasPrefix(line, "begin") {
				t.Logf("writer: %s", line)
			}
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("the writer acknowledged %d batches in %d s, fewer than %d:\n%s", len(acked), killWaitSeconds, killAfterAcks, stderr.String())
		}
	}
	// Acks printed before the kill landed still count.
	for line := range lines {
		var n int
		if _, err := fmt.Sscanf(line, "ack %d", &n); err == nil {
			acked[n] = true
		}
	}
	_ = cmd.Wait()

	s := open(t, target, spec)
	perBatch := map[int]int{}
	err = s.Scan([]byte("kill/"), 0, func(k, v []byte) bool {
		n, _ := strconv.Atoi(string(k[len("kill/") : len("kill/")+6]))
		if !bytes.HasPrefix(v, []byte(strconv.Itoa(n)+"/")) {
			t.Errorf("%s holds %q", k, v[:min(len(v), 12)])
		}
		perBatch[n]++
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	r := KillReport{Acked: len(acked)}
	for _, count := range perBatch {
		if count == killBatchKeys {
			r.Whole++
		} else {
			r.Torn++
		}
	}
	for n := range acked {
		if perBatch[n] == 0 {
			r.Lost++
		}
	}
	return r
}

func testKill9(t *testing.T, target Target) {
	r := KillMidBatch(t, target)
	if r.Torn > 0 {
		t.Fatalf("%d batches survived the kill in part (%+v): a batch must be all or nothing", r.Torn, r)
	}
	if r.Lost > 0 {
		t.Fatalf("%d acknowledged batches are lost after the kill (%+v)", r.Lost, r)
	}
	t.Logf("killed after %d acknowledged batches; %d batches whole on reopen", r.Acked, r.Whole)
}

// testFencing: writer A claims a journal and appends; writer B, on the
// same store, claims it; A's next appends are refused with ErrFenced (from
// CommitAndWait, and through the fatal handler from Commit), before and
// after B appends, and nothing of A's refused batches is written. B goes
// on.
func testFencing(t *testing.T, target Target) {
	spec := target.New(t)
	a := open(t, target, spec)
	ca := &counterLog{}
	ja := ca.recover(t, a, "project/p1", 1000)
	ca.appendN(t, a, ja, 1, 3)

	b := open(t, target, spec)
	cb := &counterLog{}
	jb := cb.recover(t, b, "project/p1", 1000)
	if cb.sum != ca.sum {
		t.Fatalf("the second writer recovered %d, the first wrote %d", cb.sum, ca.sum)
	}
	// The claim alone takes the journal: the old writer's next append is
	// refused even before the new writer appends anything.
	stale := a.NewBatch()
	ja.Append(stale, []byte("100"))
	stale.Set([]byte("stale/record"), []byte("x"))
	err := a.CommitAndWait(stale)
	if !errors.Is(err, persistence.ErrFenced) {
		t.Fatalf("the stale writer's append: %v, want ErrFenced", err)
	}
	cb.appendN(t, b, jb, 4, 5)
	again := a.NewBatch()
	ja.Append(again, []byte("200"))
	if err := a.CommitAndWait(again); !errors.Is(err, persistence.ErrFenced) {
		t.Fatalf("the stale writer's second append: %v, want ErrFenced", err)
	}

	// Through Commit: the fatal handler gets ErrFenced, done never runs.
	fatal := make(chan error, 4)
	a2, err := target.Open(spec, func(err error) { fatal <- err })
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	c2 := &counterLog{}
	j2 := c2.recover(t, a2, "room/r9", 1000)
	c2.appendN(t, a2, j2, 1, 1)
	cb9 := &counterLog{}
	jb9 := cb9.recover(t, b, "room/r9", 1000)
	cb9.appendN(t, b, jb9, 2, 2)
	refused := a2.NewBatch()
	j2.Append(refused, []byte("7"))
	refused.Set([]byte("stale/record2"), []byte("x"))
	acked := make(chan struct{})
	a2.Commit(refused, func() { close(acked) })
	select {
	case err := <-fatal:
		if !errors.Is(err, persistence.ErrFenced) {
			t.Fatalf("fatal handler got %v, want ErrFenced", err)
		}
	case <-acked:
		t.Fatal("a fenced writer's batch was acknowledged")
	case <-time.After(waitSeconds * time.Second):
		t.Fatal("a fenced writer's batch was neither refused nor acknowledged")
	}

	for _, k := range []string{"stale/record", "stale/record2"} {
		if _, ok := mustGet(t, b, k); ok {
			t.Fatalf("%s of a refused batch was written", k)
		}
	}
	for name, want := range map[string]int{"project/p1": cb.sum, "room/r9": cb9.sum} {
		r := &counterLog{}
		r.recover(t, b, name, 1000)
		if r.sum != want {
			t.Fatalf("%s recovered %d after the refused append, want %d (the current writer's)", name, r.sum, want)
		}
	}
	cb.appendN(t, b, jb, 6, 6) // the current writer goes on

	// A reader that only replays the journal (Journal.Replay, no claim)
	// takes nothing over: the writer's next append is accepted.
	reader := open(t, target, spec)
	rj := persistence.NewJournal(reader, "project/p1", 1000)
	sum := 0
	if _, err := rj.Replay(func(state []byte) error {
		var err error
		sum, err = strconv.Atoi(string(state))
		return err
	}, func(ev []byte) error {
		n, err := strconv.Atoi(string(ev))
		sum += n
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if sum != cb.sum {
		t.Fatalf("a replay read %d, the writer has %d", sum, cb.sum)
	}
	cb.appendN(t, b, jb, 7, 7)
}
