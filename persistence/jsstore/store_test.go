package jsstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"rtcd/internal/natstest"
	"rtcd/persistence"
	"rtcd/persistence/storetest"
)

// TestJetStreamStorage holds the JetStream store to the storage contract
// every store passes (package storetest), on three clustered servers and
// R3 streams, fencing included. The kill -9 case re-runs this test as the
// writer it kills; that process connects to this one's cluster.
func TestJetStreamStorage(t *testing.T) {
	storetest.Run(t, storetest.Target{
		New: newSpec,
		Open: func(spec string, fatal func(error)) (persistence.Storage, error) {
			return openSpec(spec, fatal)
		},
		Fences: true,
		// A scan retries while batches land under its prefix, and past
		// scanAttempts uses what it read (docs/cluster.md).
		ScansMayTear: true,
	})
}

// TestKillControlTornBatches is the control of the suite's kill -9 case:
// the same writer, publishing each batch one message at a time instead of
// as one atomic batch, is found torn after the kill. So the case passing
// on the real store means the atomic batch held, not that the kill missed.
func TestKillControlTornBatches(t *testing.T) {
	target := storetest.Target{
		New: newSpec,
		Open: func(spec string, fatal func(error)) (persistence.Storage, error) {
			return openTorn(spec, fatal)
		},
	}
	storetest.HelperIfAsked(target)
	// Where the kill lands is up to the scheduler: on a loaded machine a
	// run can find every batch whole even message by message. The control
	// holds if any of a few runs finds a torn batch.
	var runs []storetest.KillReport
	for range killControlRuns {
		r := storetest.KillMidBatch(t, target)
		if r.Torn > 0 {
			t.Logf("control: %+v (after %d runs without a tear)", r, len(runs))
			return
		}
		runs = append(runs, r)
	}
	t.Fatalf("a writer publishing message by message was killed mid-batch %d times and left no torn batch (%+v): the kill test would not see one", killControlRuns, runs)
}

// killControlRuns bounds the control's kill runs.
const killControlRuns = 4

// TestBatchLimit: a batch of MaxBatchMessages messages is taken whole; one
// more is refused with ErrBatchTooLarge, and nothing of it is written.
func TestBatchLimit(t *testing.T) {
	s, err := openSpec(newSpec(t), func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	write := func(prefix string, n int) error {
		b := s.NewBatch()
		for i := range n {
			b.Set([]byte(fmt.Sprintf("%s/%05d", prefix, i)), []byte("v"))
		}
		return s.CommitAndWait(b)
	}
	if err := write("full", MaxBatchMessages); err != nil {
		t.Fatalf("a batch of exactly %d messages: %v", MaxBatchMessages, err)
	}
	err = write("over", MaxBatchMessages+1)
	if !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("a batch of %d messages: %v, want ErrBatchTooLarge", MaxBatchMessages+1, err)
	}
	n := 0
	_ = s.Scan([]byte("over/"), 0, func(_, _ []byte) bool { n++; return true })
	if n != 0 {
		t.Fatalf("%d keys of a refused batch were written", n)
	}
	n = 0
	_ = s.Scan([]byte("full/"), 0, func(_, _ []byte) bool { n++; return true })
	if n != MaxBatchMessages {
		t.Fatalf("%d of %d keys of the full batch read back", n, MaxBatchMessages)
	}

	// A journal's head counts: records plus one head per journal.
	if err := s.ClaimJournal("room/r1"); err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	b.Set(persistence.JournalKey("room/r1", 1), []byte("e"))
	for i := range MaxBatchMessages - 1 {
		b.Set([]byte(fmt.Sprintf("head/%05d", i)), []byte("v"))
	}
	if err := s.CommitAndWait(b); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("%d records and a journal head: %v, want ErrBatchTooLarge", MaxBatchMessages, err)
	}
}

// TestSubjectEncoding: every key maps to a valid subject and back, and a
// prefix's filter matches the subjects of its keys.
func TestSubjectEncoding(t *testing.T) {
	keys := [][]byte{[]byte("ri/prj_1/\xff\x00/\x2e*> \x7f"), []byte("a/"), []byte("/"), []byte(""), []byte("j/room/r1/\x00\x00\x00\x00\x00\x00\x00\x2f"), []byte("m/initialized")}
	for _, k := range keys {
		subj := keySubject("R", k)
		for _, tok := range bytes.Split([]byte(subj), []byte(".")) {
			if len(tok) == 0 || bytes.ContainsAny(tok, "*> \t\r\n") {
				t.Fatalf("key %q: subject %q has an invalid token %q", k, subj, tok)
			}
		}
		back, err := subjectKey("R", subj)
		if err != nil || !bytes.Equal(back, k) {
			t.Fatalf("key %q -> %q -> %q, %v", k, subj, back, err)
		}
	}
	if got, want := keySubject("R", []byte("ri/prj_1/x.y")), "R.k.ri.prj_1.~782e79"; got != want {
		t.Fatalf("subject %q, want %q (plain segments stay readable)", got, want)
	}
	if got, want := scanFilter("R", []byte("ri/prj_1/")), "R.k.ri.prj_1.>"; got != want {
		t.Fatalf("filter %q, want %q", got, want)
	}
}

// TestReadsWithNoServerAreUnavailable: with every server of its cluster
// down, a read fails with persistence.ErrUnavailable (callers answer 503,
// retryable), and a key not found is still ErrNotFound once the cluster is
// back. A cluster of its own: the shared one keeps serving the others.
func TestReadsWithNoServerAreUnavailable(t *testing.T) {
	c, err := natstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	s, err := Open(Config{URL: c.URLs, Stream: "DOWN", Replicas: 3}, func(err error) { t.Logf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.NewBatch()
	b.Set([]byte("k/1"), []byte("v"))
	if err := s.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	c.StopAll()
	if _, err := s.Get([]byte("k/1")); !errors.Is(err, persistence.ErrUnavailable) {
		t.Fatalf("get with no server: %v, want ErrUnavailable", err)
	}
	if err := s.Scan([]byte("k/"), 0, func(_, _ []byte) bool { return true }); !errors.Is(err, persistence.ErrUnavailable) {
		t.Fatalf("scan with no server: %v, want ErrUnavailable", err)
	}
	if err := c.StartAll(); err != nil {
		t.Fatal(err)
	}
	// Opened at once, while the restarted cluster may still elect the
	// stream's leader: Open waits for it (rtcd started by a supervisor
	// right after the cluster).
	again, err := Open(Config{URL: c.URLs, Stream: "DOWN", Replicas: 3}, func(err error) { t.Logf("fatal: %v", err) })
	if err != nil {
		t.Fatalf("open as the cluster comes back: %v", err)
	}
	defer again.Close()
	if v, err := again.Get([]byte("k/1")); err != nil || string(v) != "v" {
		t.Fatalf("get through the store opened as the cluster came back: %q %v", v, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.Get([]byte("k/none"))
		if errors.Is(err, persistence.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("get of a missing key once the cluster is back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if v, err := s.Get([]byte("k/1")); err != nil || string(v) != "v" {
		t.Fatalf("get once the cluster is back: %q %v", v, err)
	}
}

// TestStreamPlacementRefusals: Open tries a stream's creation again while
// a server is not seen online yet (a cluster just started: the refusal is
// rare and brief, so its test is of the answer the server gives then), and
// reports at once a stream that can never be placed: three replicas more
// than the servers there are. A cluster of its own.
func TestStreamPlacementRefusals(t *testing.T) {
	offline := &jetstream.APIError{Code: 400, ErrorCode: jsErrCodeClusterNoPeers,
		Description: "no suitable peers for placement, peer offline"}
	tries := 0
	err := retryNoResponders(t.Context(), true, func(context.Context) error {
		if tries++; tries == 1 {
			return offline
		}
		return nil
	})
	if err != nil || tries != 2 {
		t.Fatalf("after %v: %v in %d tries; want it tried again and done in 2", offline, err, tries)
	}
	c, err := natstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	start := time.Now()
	s, err := Open(Config{URL: c.URLs, Stream: "TOOMANY", Replicas: 5}, func(err error) { t.Logf("fatal: %v", err) })
	if err == nil {
		s.Close()
		t.Fatal("a stream of five replicas was created on three servers")
	}
	if isPeerOffline(err) || time.Since(start) > requestTimeoutSeconds*time.Second {
		t.Fatalf("five replicas on three servers: %v after %v; want the refusal at once, not tried again", err, time.Since(start))
	}
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != jsErrCodeClusterNoPeers {
		t.Fatalf("five replicas on three servers: %v; want the server's error %d", err, jsErrCodeClusterNoPeers)
	}
}

// TestIncompleteBatchIsSentAgain: the live server's answer to a batch it
// got only part of (its first message lost, as on a leader change) is
// what publish sends again whole; and a store's batch goes through after
// it.
func TestIncompleteBatchIsSentAgain(t *testing.T) {
	s, err := openSpec(newSpec(t), func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A first batch waits for the new stream's leader.
	first := s.NewBatch()
	first.Set([]byte("first"), []byte("v"))
	if err := s.CommitAndWait(first); err != nil {
		t.Fatal(err)
	}
	// The second message of a batch whose first never arrived, committing.
	m := nats.NewMsg(keySubject(s.root, []byte("lost/1")))
	m.Header.Set(jetstreamext.BatchIDHeader, "rtcd-test-incomplete")
	m.Header.Set(jetstreamext.BatchSeqHeader, "2")
	m.Header.Set(jetstreamext.BatchCommitHeader, "1")
	var resp *nats.Msg
	err = retryNoResponders(t.Context(), false, func(context.Context) (err error) {
		resp, err = s.nc.RequestMsg(m, 5*time.Second)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var ack struct {
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &ack); err != nil || ack.Error == nil {
		t.Fatalf("answer %s: %v", resp.Data, err)
	}
	if !isIncompleteBatch(ack.Error) {
		t.Fatalf("the server answered %v; isIncompleteBatch does not recognise it", ack.Error)
	}
	if _, err := s.Get([]byte("lost/1")); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("the incomplete batch's message was stored: %v", err)
	}
	b := s.NewBatch()
	b.Set([]byte("lost/1"), []byte("v"))
	if err := s.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
}

// TestGroupCommit: batches committed together are published as fewer
// atomic batches, each answered in order; several appends to one journal
// in a group leave its head where the next append expects it, and a rival
// claim still fences the writer after a group.
func TestGroupCommit(t *testing.T) {
	spec := newSpec(t)
	s, err := openSpec(spec, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	journals := []string{"room/g1", "room/g2", "room/g3"}
	for _, j := range journals {
		if err := s.ClaimJournal(j); err != nil {
			t.Fatal(err)
		}
	}
	const batches = 300
	before := s.published.Load()
	var order []int
	var mu sync.Mutex
	for i := range batches {
		b := s.NewBatch()
		b.Set([]byte(fmt.Sprintf("group/%04d", i)), []byte("v"))
		b.Set(persistence.JournalKey(journals[i%len(journals)], uint64(i/len(journals)+1)), []byte("e"))
		s.Commit(b, func() { mu.Lock(); order = append(order, i); mu.Unlock() })
	}
	durable := make(chan struct{})
	s.AfterDurable(func() { close(durable) })
	<-durable
	published := s.published.Load() - before
	if len(order) != batches || !slices.IsSorted(order) {
		t.Fatalf("%d of %d batches answered, in order: %v", len(order), batches, slices.IsSorted(order))
	}
	if published >= batches {
		t.Fatalf("%d batches took %d publishes: none was grouped", batches, published)
	}
	t.Logf("%d batches in %d atomic publishes", batches, published)
	n := 0
	if err := s.Scan([]byte("group/"), 0, func(_, _ []byte) bool { n++; return true }); err != nil || n != batches {
		t.Fatalf("%d of %d keys read back: %v", n, batches, err)
	}

	// The heads are where the next append of each journal expects them.
	for _, j := range journals {
		b := s.NewBatch()
		b.Set(persistence.JournalKey(j, uint64(batches/len(journals)+1)), []byte("e"))
		if err := s.CommitAndWait(b); err != nil {
			t.Fatalf("append to %s after the group: %v", j, err)
		}
	}
	// A rival takes one journal: the writer's next group, holding appends
	// to it and to another journal, is refused whole.
	rival, err := openSpec(spec, func(err error) { t.Errorf("rival fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer rival.Close()
	if err := rival.ClaimJournal(journals[0]); err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	b.Set(persistence.JournalKey(journals[0], uint64(batches/len(journals)+2)), []byte("e"))
	b.Set(persistence.JournalKey(journals[1], uint64(batches/len(journals)+2)), []byte("e"))
	if err := s.CommitAndWait(b); !errors.Is(err, persistence.ErrFenced) {
		t.Fatalf("an append to a journal a rival claimed: %v, want ErrFenced", err)
	}
	if _, err := s.Get(persistence.JournalKey(journals[1], uint64(batches/len(journals)+2))); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("the refused batch's other journal was written: %v", err)
	}
}

// TestClaimOfACreatedJournal: the first claim of a journal this writer
// created (its genesis head) takes no round trip: the head does not move,
// and appends go on. A later claim takes the journal as usual. A rival's
// claim since the creation still fences the creator.
func TestClaimOfACreatedJournal(t *testing.T) {
	spec := newSpec(t)
	s, err := openSpec(spec, func(err error) { t.Errorf("fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	create := func(actor string) {
		b := s.NewBatch()
		b.Set(persistence.SnapshotKey(actor), append(make([]byte, 8), "{}"...))
		if err := s.CommitAndWait(b); err != nil {
			t.Fatalf("create %s: %v", actor, err)
		}
	}
	head := func(actor string) uint64 {
		m, err := s.stream.GetLastMsgForSubject(t.Context(), headSubject(s.root, actor))
		if err != nil {
			t.Fatalf("head of %s: %v", actor, err)
		}
		return m.Sequence
	}
	appendEvent := func(actor string, seq uint64) error {
		b := s.NewBatch()
		b.Set(persistence.JournalKey(actor, seq), []byte("e"))
		return s.CommitAndWait(b)
	}

	create("room/c1")
	created := head("room/c1")
	if err := s.ClaimJournal("room/c1"); err != nil {
		t.Fatal(err)
	}
	if h := head("room/c1"); h != created {
		t.Fatalf("the creator's first claim moved the head from %d to %d: it took a round trip", created, h)
	}
	if err := appendEvent("room/c1", 1); err != nil {
		t.Fatalf("append after the first claim: %v", err)
	}
	appended := head("room/c1")
	if err := s.ClaimJournal("room/c1"); err != nil {
		t.Fatal(err)
	}
	if h := head("room/c1"); h == appended {
		t.Fatal("a second claim did not take the journal (its head did not move)")
	}
	if err := appendEvent("room/c1", 2); err != nil {
		t.Fatalf("append after the second claim: %v", err)
	}

	create("room/c2")
	rival, err := openSpec(spec, func(err error) { t.Errorf("rival fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer rival.Close()
	if err := rival.ClaimJournal("room/c2"); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimJournal("room/c2"); err != nil {
		t.Fatal(err)
	}
	if err := appendEvent("room/c2", 1); !errors.Is(err, persistence.ErrFenced) {
		t.Fatalf("the creator's append after a rival's claim: %v, want ErrFenced", err)
	}
}

// TestFencedGroupRefusesOnlyTheMovedJournal: when a rival takes over one
// journal (its actor moved to another node), the groups holding appends
// to it are published again batch by batch, so only that journal's
// batches are refused (through the fatal handler, never acknowledged)
// and every other batch of the groups lands and is acknowledged in order.
func TestFencedGroupRefusesOnlyTheMovedJournal(t *testing.T) {
	spec := newSpec(t)
	var refused atomic.Int64
	s, err := openSpec(spec, func(err error) {
		if !errors.Is(err, persistence.ErrFenced) {
			t.Errorf("fatal: %v", err)
		}
		refused.Add(1)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	journals := []string{"room/m1", "room/m2", "room/m3"}
	for _, j := range journals {
		if err := s.ClaimJournal(j); err != nil {
			t.Fatal(err)
		}
	}
	rival, err := openSpec(spec, func(err error) { t.Errorf("rival fatal: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer rival.Close()
	if err := rival.ClaimJournal(journals[0]); err != nil {
		t.Fatal(err)
	}
	const batches = 300
	before := s.published.Load()
	var mu sync.Mutex
	var acked []int
	for i := range batches {
		b := s.NewBatch()
		b.Set([]byte(fmt.Sprintf("moved/%04d", i)), []byte("v"))
		b.Set(persistence.JournalKey(journals[i%len(journals)], uint64(i/len(journals)+1)), []byte("e"))
		s.Commit(b, func() { mu.Lock(); acked = append(acked, i); mu.Unlock() })
	}
	durable := make(chan struct{})
	s.AfterDurable(func() { close(durable) })
	<-durable
	mu.Lock()
	defer mu.Unlock()
	if want := batches - batches/len(journals); len(acked) != want || !slices.IsSorted(acked) {
		t.Fatalf("%d batches acknowledged (in order: %v), want %d", len(acked), slices.IsSorted(acked), want)
	}
	if got := int(refused.Load()); got != batches/len(journals) {
		t.Fatalf("%d batches refused, want the moved journal's %d", got, batches/len(journals))
	}
	for i := range batches {
		_, err := s.Get([]byte(fmt.Sprintf("moved/%04d", i)))
		if moved := i%len(journals) == 0; moved != errors.Is(err, persistence.ErrNotFound) {
			t.Fatalf("batch %d (moved journal: %v): read %v", i, moved, err)
		}
	}
	// Batch by batch, every batch is one publish; each group refused
	// whole is one more.
	if groups := s.published.Load() - before - batches; groups <= 0 {
		t.Fatal("no group was refused: the test proves nothing")
	}
}
