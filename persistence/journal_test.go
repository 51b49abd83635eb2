package persistence

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// counter is a toy actor state: the sum of the integers in its events.
type counter struct {
	sum    int
	events []string // every event applied, in order (replayed ones only on recovery)
}

func (c *counter) apply(ev []byte) error {
	n, err := strconv.Atoi(string(ev))
	if err != nil {
		return err
	}
	c.sum += n
	c.events = append(c.events, string(ev))
	return nil
}

func (c *counter) snapshot() []byte { return []byte(strconv.Itoa(c.sum)) }

// appendEvents appends events 1..n (value i) to j, one batch per event, writing
// a snapshot whenever one is due, exactly as the actors do.
func appendEvents(t *testing.T, s *Store, j *Journal, c *counter, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		b := s.NewBatch()
		ev := []byte(strconv.Itoa(i))
		j.Append(b, ev)
		if err := c.apply(ev); err != nil {
			t.Fatal(err)
		}
		if j.SnapshotDue() {
			j.WriteSnapshot(b, c.snapshot())
		}
		if err := s.CommitAndWait(b); err != nil {
			t.Fatal(err)
		}
	}
}

// recoverCounter recovers actorID's journal into a fresh counter.
func recoverCounter(t *testing.T, s *Store, actorID string, every int) (*Journal, *counter, int, bool, error) {
	t.Helper()
	j := NewJournal(s, actorID, every)
	c := &counter{}
	loaded := false
	n, err := j.Recover(func(state []byte) error {
		loaded = true
		v, err := strconv.Atoi(string(state))
		c.sum = v
		return err
	}, c.apply)
	return j, c, n, loaded, err
}

func journalSeqs(t *testing.T, s *Store, actorID string) []uint64 {
	t.Helper()
	var seqs []uint64
	prefix := journalPrefix(actorID)
	if err := s.Scan(prefix, 0, func(k, _ []byte) bool {
		seqs = append(seqs, beUint64(k[len(prefix):]))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return seqs
}

func beUint64(b []byte) uint64 {
	var v uint64
	for _, x := range b {
		v = v<<8 | uint64(x)
	}
	return v
}

func sumTo(n int) int { return n * (n + 1) / 2 }

func TestJournalRecoverWithoutSnapshot(t *testing.T) {
	s, _ := openTestStore(t)
	const n = 25
	j := NewJournal(s, "room/r1", 1000)
	c := &counter{}
	appendEvents(t, s, j, c, 1, n)
	if j.Seq() != n {
		t.Fatalf("Seq after %d appends = %d", n, j.Seq())
	}

	j2, c2, replayed, loaded, err := recoverCounter(t, s, "room/r1", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if loaded {
		t.Fatal("a snapshot was loaded, but none was written")
	}
	if replayed != n || j2.Seq() != n || c2.sum != sumTo(n) {
		t.Fatalf("recovered replayed=%d seq=%d sum=%d, want %d, %d, %d", replayed, j2.Seq(), c2.sum, n, n, sumTo(n))
	}
	for i, ev := range c2.events {
		if ev != strconv.Itoa(i+1) {
			t.Fatalf("replayed event #%d is %q: events must replay in order", i, ev)
		}
	}
}

func TestJournalRecoverWithSnapshotAndTail(t *testing.T) {
	s, _ := openTestStore(t)
	const every, n = 4, 10
	j := NewJournal(s, "room/r1", every)
	c := &counter{}
	appendEvents(t, s, j, c, 1, n)

	// The snapshot at 8 deleted journal entries 1..8; 9 and 10 are the tail.
	if got := journalSeqs(t, s, "room/r1"); fmt.Sprint(got) != "[9 10]" {
		t.Fatalf("journal entries after snapshots = %v, want [9 10]", got)
	}
	j2, c2, replayed, loaded, err := recoverCounter(t, s, "room/r1", every)
	if err != nil {
		t.Fatal(err)
	}
	if !loaded || replayed != 2 || j2.Seq() != n || c2.sum != sumTo(n) {
		t.Fatalf("recovered loaded=%v replayed=%d seq=%d sum=%d, want true, 2, %d, %d", loaded, replayed, j2.Seq(), c2.sum, n, sumTo(n))
	}
	if fmt.Sprint(c2.events) != "[9 10]" {
		t.Fatalf("replayed %v, want only the tail [9 10]", c2.events)
	}

	// The snapshot schedule continues across recovery: 2 events since the
	// last snapshot, so the next is due after 2 more.
	appendEvents(t, s, j2, c2, n+1, n+1)
	if got := journalSeqs(t, s, "room/r1"); fmt.Sprint(got) != "[9 10 11]" {
		t.Fatalf("after one more event the journal is %v, want [9 10 11]", got)
	}
	appendEvents(t, s, j2, c2, n+2, n+2)
	if got := journalSeqs(t, s, "room/r1"); len(got) != 0 {
		t.Fatalf("the 4th event since the snapshot did not snapshot: journal %v", got)
	}
	j3, c3, replayed, _, err := recoverCounter(t, s, "room/r1", every)
	if err != nil || replayed != 0 || j3.Seq() != n+2 || c3.sum != sumTo(n+2) {
		t.Fatalf("second recovery replayed=%d seq=%d sum=%d err=%v", replayed, j3.Seq(), c3.sum, err)
	}
}

// TestJournalSnapshotInSameBatch: a snapshot written in the batch of the
// event that made it due deletes that event too; the snapshot covers it.
func TestJournalSnapshotInSameBatch(t *testing.T) {
	s, _ := openTestStore(t)
	j := NewJournal(s, "project/p", 3)
	c := &counter{}
	b := s.NewBatch()
	for i := 1; i <= 3; i++ {
		ev := []byte(strconv.Itoa(i))
		j.Append(b, ev)
		_ = c.apply(ev)
	}
	if !j.SnapshotDue() {
		t.Fatal("snapshot not due after 3 events with snapshotEveryEvents=3")
	}
	j.WriteSnapshot(b, c.snapshot())
	if j.SnapshotDue() {
		t.Fatal("snapshot still due right after writing one")
	}
	if err := s.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	if got := journalSeqs(t, s, "project/p"); len(got) != 0 {
		t.Fatalf("journal entries %v survived the snapshot that covers them", got)
	}
	snap, err := s.Get(SnapshotKey("project/p"))
	if err != nil || beUint64(snap[:snapshotHeaderBytes]) != 3 || string(snap[snapshotHeaderBytes:]) != "6" {
		t.Fatalf("snapshot = %q, %v; want seq 3, state 6", snap, err)
	}
}

func TestJournalEntriesCoveredBySnapshotAreSkipped(t *testing.T) {
	s, _ := openTestStore(t)
	b := s.NewBatch()
	for i := uint64(1); i <= 5; i++ {
		b.Set(JournalKey("room/r", i), []byte(strconv.FormatUint(i, 10)))
	}
	WriteSnapshotAt(b, "room/r", 3, []byte("6")) // a snapshot whose covered entries were not deleted
	if err := s.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
	j, c, replayed, _, err := recoverCounter(t, s, "room/r", 100)
	if err != nil {
		t.Fatal(err)
	}
	if replayed != 2 || j.Seq() != 5 || c.sum != 15 || fmt.Sprint(c.events) != "[4 5]" {
		t.Fatalf("replayed=%d seq=%d sum=%d events=%v; want 2, 5, 15, [4 5]", replayed, j.Seq(), c.sum, c.events)
	}
}

func TestJournalGapIsAnError(t *testing.T) {
	cases := []struct {
		name     string
		snapAt   int // -1: no snapshot
		entries  []uint64
		wantJump string
	}{
		{"gap in the middle", -1, []uint64{1, 2, 4, 5}, "jumps from 2 to 4"},
		{"first entry missing", -1, []uint64{2, 3}, "jumps from 0 to 2"},
		{"gap after the snapshot", 5, []uint64{7, 8}, "jumps from 5 to 7"},
		{"initial snapshot at 0, gap", 0, []uint64{1, 3}, "jumps from 1 to 3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := openTestStore(t)
			b := s.NewBatch()
			for _, seq := range tc.entries {
				b.Set(JournalKey("room/r", seq), []byte("1"))
			}
			if tc.snapAt >= 0 {
				WriteSnapshotAt(b, "room/r", uint64(tc.snapAt), []byte("0"))
			}
			if err := s.CommitAndWait(b); err != nil {
				t.Fatal(err)
			}
			_, _, _, _, err := recoverCounter(t, s, "room/r", 100)
			if err == nil || !strings.Contains(err.Error(), tc.wantJump) {
				t.Fatalf("Recover error = %v, want one saying the journal %s", err, tc.wantJump)
			}
		})
	}
}

func TestJournalsOfActorsAreIsolated(t *testing.T) {
	s, _ := openTestStore(t)
	ja, jab := NewJournal(s, "room/a", 100), NewJournal(s, "room/ab", 100)
	ca, cab := &counter{}, &counter{}
	appendEvents(t, s, ja, ca, 1, 3)
	appendEvents(t, s, jab, cab, 1, 5)
	if _, c, n, _, err := recoverCounter(t, s, "room/a", 100); err != nil || n != 3 || c.sum != 6 {
		t.Fatalf("room/a recovered n=%d sum=%d err=%v", n, c.sum, err)
	}
	if _, c, n, _, err := recoverCounter(t, s, "room/ab", 100); err != nil || n != 5 || c.sum != 15 {
		t.Fatalf("room/ab recovered n=%d sum=%d err=%v", n, c.sum, err)
	}
}

func TestJournalAppendAfterRecoverContinues(t *testing.T) {
	s, _ := openTestStore(t)
	j := NewJournal(s, "room/r", 100)
	appendEvents(t, s, j, &counter{}, 1, 3)
	j2, c2, _, _, err := recoverCounter(t, s, "room/r", 100)
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, j2, c2, 4, 6)
	_, c3, n, _, err := recoverCounter(t, s, "room/r", 100)
	if err != nil || n != 6 || c3.sum != sumTo(6) {
		t.Fatalf("after append-recover-append: n=%d sum=%d err=%v", n, c3.sum, err)
	}
}

func TestJournalRecoverErrors(t *testing.T) {
	t.Run("empty journal", func(t *testing.T) {
		s, _ := openTestStore(t)
		j, _, n, loaded, err := recoverCounter(t, s, "room/none", 10)
		if err != nil || n != 0 || loaded || j.Seq() != 0 {
			t.Fatalf("n=%d loaded=%v seq=%d err=%v", n, loaded, j.Seq(), err)
		}
	})
	t.Run("short snapshot", func(t *testing.T) {
		s, _ := openTestStore(t)
		putRaw(t, s, SnapshotKey("room/r"), []byte{1, 2, 3})
		if _, _, _, _, err := recoverCounter(t, s, "room/r", 10); err == nil {
			t.Fatal("a snapshot shorter than its header was accepted")
		}
	})
	t.Run("snapshot that does not decode", func(t *testing.T) {
		s, _ := openTestStore(t)
		b := s.NewBatch()
		WriteSnapshotAt(b, "room/r", 1, []byte("not a number"))
		if err := s.CommitAndWait(b); err != nil {
			t.Fatal(err)
		}
		_, _, _, _, err := recoverCounter(t, s, "room/r", 10)
		var numErr *strconv.NumError
		if !errors.As(err, &numErr) || !strings.Contains(err.Error(), "room/r") {
			t.Fatalf("error = %v, want the decode error wrapped with the actor id", err)
		}
	})
	t.Run("event that does not replay stops recovery", func(t *testing.T) {
		s, _ := openTestStore(t)
		b := s.NewBatch()
		b.Set(JournalKey("room/r", 1), []byte("1"))
		b.Set(JournalKey("room/r", 2), []byte("bad"))
		b.Set(JournalKey("room/r", 3), []byte("3"))
		if err := s.CommitAndWait(b); err != nil {
			t.Fatal(err)
		}
		_, c, n, _, err := recoverCounter(t, s, "room/r", 10)
		if err == nil || !strings.Contains(err.Error(), "#2") {
			t.Fatalf("error = %v, want one naming event #2", err)
		}
		if n != 1 || c.sum != 1 {
			t.Fatalf("replayed %d events (sum %d) before the bad one; want 1 (sum 1), none after it", n, c.sum)
		}
	})
}

func TestNewJournalSnapshotEveryAtLeastOne(t *testing.T) {
	s, _ := openTestStore(t)
	for _, every := range []int{0, -5} {
		j := NewJournal(s, "room/r", every)
		if j.SnapshotDue() {
			t.Fatalf("every=%d: snapshot due before any event", every)
		}
		j.Append(s.NewBatch(), []byte("1"))
		if !j.SnapshotDue() {
			t.Fatalf("every=%d: snapshot not due after one event; want at least every event", every)
		}
	}
}

func putRaw(t *testing.T, s *Store, k, v []byte) {
	t.Helper()
	b := s.NewBatch()
	b.Set(k, v)
	if err := s.CommitAndWait(b); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkCommit measures group commit: many goroutines each commit a
// batch the size of a typical state change and wait for its durable
// acknowledgement, as an actor's callers do.
func BenchmarkCommit(b *testing.B) {
	s, _ := openTestStore(b)
	value := make([]byte, 300) // a participant record plus its journal event
	var next atomic.Int64
	b.SetParallelism(32) // 32 committers per CPU: fsyncs are shared
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		acked := make(chan struct{}, 1)
		for pb.Next() {
			i := next.Add(1)
			batch := s.NewBatch()
			batch.Set(JournalKey("room/bench", uint64(i)), value)
			batch.Set([]byte(fmt.Sprintf("r/bench/%d", i)), value)
			s.Commit(batch, func() { acked <- struct{}{} })
			<-acked
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

// BenchmarkRecover measures replaying a journal (no snapshot): the time
// recovery takes per journal entry, reported as events/s.
func BenchmarkRecover(b *testing.B) {
	for _, events := range []int{10_000, 100_000} {
		b.Run(strconv.Itoa(events), func(b *testing.B) {
			s, _ := openTestStore(b)
			event := []byte(`{"participant_connected":{"participant_id":"part_abcdefghijklmnopqrstuvwx","session_id":"cs_abcdefghijklmnopqrstuvwx","at":"2026-11-22T12:00:00Z"}}`)
			j := NewJournal(s, "room/bench", events+1)
			const perBatch = 1000
			for i := 0; i < events; i += perBatch {
				batch := s.NewBatch()
				for k := 0; k < perBatch && i+k < events; k++ {
					j.Append(batch, event)
				}
				if err := s.CommitAndWait(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := NewJournal(s, "room/bench", events+1)
				bytes := 0
				n, err := r.Recover(func([]byte) error { return nil }, func(ev []byte) error { bytes += len(ev); return nil })
				if err != nil || n != events {
					b.Fatalf("recovered %d events, err %v", n, err)
				}
			}
			b.StopTimer()
			perSec := float64(events) * float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(perSec, "events/s")
			b.ReportMetric(1e6/perSec, "s/1M-events")
		})
	}
}
