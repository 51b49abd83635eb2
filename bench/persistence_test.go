package bench

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"rtcd/persistence"

	"github.com/goccy/go-json"
)

// benchEvent is a room journal event as the engine writes it for a connect
// (the bytes are representative; the persistence layer never parses them).
var benchEvent = []byte(`{"participant_connected":{"participant_id":"part_abcdefghijklmnopqrstuvwxyz","session_id":"cs_abcdefghijklmnopqrstuvwxyz","at":"2026-11-22T12:00:00Z","expires_at":"2026-11-22T12:01:00Z"}}`)

// noSnapshot is a snapshot cadence no benchmark reaches.
const noSnapshot = 1 << 62

// BenchmarkJournalAppend appends one event per batch, as an actor records
// one state change.
//
//   - batch_only: build the batch and discard it; the floor of the others.
//   - commit: Store.Commit, what an actor does: the write is applied and
//     visible, the fsync runs behind on the syncer. x_batch_only is the
//     cost of the apply over building the batch.
//   - commit_durable: Store.Commit, then wait for the done callback (the
//     fsync): what a request that changed state waits for. One committer.
//   - commit_and_wait: Store.CommitAndWait (bootstrap and sweepers).
//   - commit_durable_parallel: 64 committers (32 per CPU), each on its own
//     journal, waiting for durability: group commit shares the fsyncs.
//
// The durable ones report x_commit, their time as a multiple of the
// unsynced commit's, measured in the same run.
func BenchmarkJournalAppend(b *testing.B) {
	b.Run("batch_only", func(b *testing.B) {
		s := openStore(b, b.TempDir())
		defer s.Close()
		j := persistence.NewJournal(s, "room/bench", noSnapshot)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			batch := s.NewBatch()
			j.Append(batch, benchEvent)
			batch.Discard()
		}
	})
	b.Run("commit", func(b *testing.B) {
		s := openStore(b, b.TempDir())
		defer s.Close()
		j := persistence.NewJournal(s, "room/bench", noSnapshot)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			batch := s.NewBatch()
			j.Append(batch, benchEvent)
			s.Commit(batch, nil)
		}
		base := persistence.NewJournal(s, "room/baseline", noSnapshot)
		reportVsBaseline(b, "batch_only", func() error {
			batch := s.NewBatch()
			base.Append(batch, benchEvent)
			batch.Discard()
			return nil
		})
	})
	b.Run("commit_durable", func(b *testing.B) {
		s := openStore(b, b.TempDir())
		defer s.Close()
		j := persistence.NewJournal(s, "room/bench", noSnapshot)
		acked := make(chan struct{}, 1)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			batch := s.NewBatch()
			j.Append(batch, benchEvent)
			s.Commit(batch, func() { acked <- struct{}{} })
			<-acked
		}
		reportVsBaseline(b, "commit", unsyncedCommit(s))
	})
	b.Run("commit_and_wait", func(b *testing.B) {
		s := openStore(b, b.TempDir())
		defer s.Close()
		j := persistence.NewJournal(s, "room/bench", noSnapshot)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			batch := s.NewBatch()
			j.Append(batch, benchEvent)
			if err := s.CommitAndWait(batch); err != nil {
				b.Fatal(err)
			}
		}
		reportVsBaseline(b, "commit", unsyncedCommit(s))
	})
	b.Run("commit_durable_parallel", func(b *testing.B) {
		s := openStore(b, b.TempDir())
		defer s.Close()
		var actor atomic.Int64
		b.SetParallelism(32)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			j := persistence.NewJournal(s, fmt.Sprintf("room/bench%d", actor.Add(1)), noSnapshot)
			acked := make(chan struct{}, 1)
			for pb.Next() {
				batch := s.NewBatch()
				j.Append(batch, benchEvent)
				s.Commit(batch, func() { acked <- struct{}{} })
				<-acked
			}
		})
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		reportVsBaseline(b, "commit", unsyncedCommit(s))
	})
}

// unsyncedCommit is the baseline of the durable appends: the same append
// committed without waiting for its fsync.
func unsyncedCommit(s *persistence.Store) func() error {
	j := persistence.NewJournal(s, "room/baseline", noSnapshot)
	return func() error {
		batch := s.NewBatch()
		j.Append(batch, benchEvent)
		s.Commit(batch, nil)
		return nil
	}
}

// snapshotSizes are the state sizes snapshot benchmarks use: a small room,
// and a room of a few hundred participants.
var snapshotSizes = []int{1 << 10, 64 << 10}

// BenchmarkSnapshotWrite appends one event and writes a snapshot of state in
// the same batch (with the delete of the journal entries it covers), then
// commits without waiting: what an actor does when a snapshot is due.
// x_append is the multiple of the same append without the snapshot.
func BenchmarkSnapshotWrite(b *testing.B) {
	for _, size := range snapshotSizes {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			s := openStore(b, b.TempDir())
			defer s.Close()
			state := bytes.Repeat([]byte("x"), size)
			j := persistence.NewJournal(s, "room/bench", 1)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				batch := s.NewBatch()
				j.Append(batch, benchEvent)
				if !j.SnapshotDue() {
					b.Fatal("snapshot not due")
				}
				j.WriteSnapshot(batch, state)
				s.Commit(batch, nil)
			}
			reportVsBaseline(b, "append", unsyncedCommit(s))
		})
	}
}

// BenchmarkSnapshotRecover recovers an actor from a snapshot and a tail of
// journal entries after it (an actor recovers from the newest snapshot and
// the at most SnapshotEveryEvents-1 events after it). x_get is the multiple
// of a bare Store.Get of the snapshot.
func BenchmarkSnapshotRecover(b *testing.B) {
	for _, size := range snapshotSizes {
		for _, tail := range []int{0, 999} {
			b.Run(fmt.Sprintf("%dKiB/tail%d", size>>10, tail), func(b *testing.B) {
				s := openStore(b, b.TempDir())
				defer s.Close()
				const actorID = "room/bench"
				j := persistence.NewJournal(s, actorID, noSnapshot)
				batch := s.NewBatch()
				j.Append(batch, benchEvent)
				j.WriteSnapshot(batch, bytes.Repeat([]byte("x"), size))
				for i := 0; i < tail; i++ {
					j.Append(batch, benchEvent)
				}
				if err := s.CommitAndWait(batch); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					r := persistence.NewJournal(s, actorID, 1000)
					loaded := 0
					n, err := r.Recover(func(state []byte) error { loaded = len(state); return nil },
						func([]byte) error { return nil })
					if err != nil || n != tail || loaded != size {
						b.Fatalf("recovered %d events and %d bytes of snapshot: %v", n, loaded, err)
					}
				}
				key := persistence.SnapshotKey(actorID)
				reportVsBaseline(b, "get", func() error {
					_, err := s.Get(key)
					return err
				})
			})
		}
	}
}

// maxRecoveryEntries bounds the journal a recovery benchmark writes (about
// 200 MB of Pebble data at most). When b.N is larger, recovery runs in
// passes over the same journal until b.N entries were replayed in all, so a
// run at the default -benchtime stays bounded in disk and set-up time.
const maxRecoveryEntries = 1 << 20

// errEnough stops the last, partial replay pass of BenchmarkRecovery/journal.
var errEnough = errors.New("replayed enough")

// BenchmarkRecovery is time to ready per journal entry: one op is one
// journal entry replayed. min(b.N, 2^20) entries are written for one actor
// (a room) first, with the timer stopped, then recovery replays them (in
// passes over them when b.N is larger). So the smoke run (100x) replays 100
// entries, and -benchtime=1000000x a million.
//
//   - journal: persistence.Journal.Recover of the entries on an open store
//     (the replay callback only counts bytes: the storage layer's cost).
//   - engine: a cold start of the whole control plane on the data
//     directory: persistence.Open (Pebble replays its WAL), actors.New and
//     Engine.Start, which recovers every wallet, project and room and
//     returns when all are ready to serve. The room's journal holds
//     participant_connected events written by a real engine (one real
//     connect, copied), which the room decodes and applies. The fixed cost
//     of a start (about 10 ms) dominates at small b.N.
//
// Both report entries/s and s/Mentries (seconds to ready per million
// entries, from the entries actually replayed); the target is at least
// 1,000,000 entries/s.
func BenchmarkRecovery(b *testing.B) {
	b.Run("journal", func(b *testing.B) {
		s := openStore(b, b.TempDir())
		defer s.Close()
		const actorID = "room/bench"
		written := min(b.N, maxRecoveryEntries)
		writeEntries(b, s, actorID, written, benchEvent)
		b.ReportAllocs()
		b.ResetTimer()
		replayed, bytes := 0, 0
		for replayed < b.N {
			r := persistence.NewJournal(s, actorID, 1000)
			_, err := r.Recover(func([]byte) error { return nil },
				func(ev []byte) error {
					if replayed == b.N {
						return errEnough
					}
					replayed++
					bytes += len(ev)
					return nil
				})
			if err != nil && !errors.Is(err, errEnough) {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportEntryRate(b, replayed)
	})
	b.Run("engine", func(b *testing.B) {
		f := newFixture(b)
		roomID, _ := f.connectedParticipant(b)
		f.e.Stop()
		f.e = nil
		// A connect writes nothing since issue 15 (a reservation in
		// memory): the room's journal ends with the participant's
		// creation. The entries to replay are the retired connect event
		// of that participant, as journals written before hold it (it
		// keeps its reader), repeated.
		actorID := "room/" + roomID
		j := persistence.NewJournal(f.store, actorID, noSnapshot)
		var last []byte
		have, err := j.Recover(func([]byte) error { return nil },
			func(ev []byte) error { last = append(last[:0], ev...); return nil })
		var created struct {
			P struct {
				ID string `json:"id"`
			} `json:"participant_created"`
		}
		if err != nil || json.Unmarshal(last, &created) != nil || created.P.ID == "" {
			b.Fatalf("room journal: %d events, last %q: %v", have, last, err)
		}
		last = []byte(`{"participant_connected":{"participant_id":"` + created.P.ID +
			`","session_id":"cs_bench","at":"2026-11-22T12:00:00Z","expires_at":"2126-11-22T12:00:00Z"}}`)
		// Passes of equal size, so the entries replayed are b.N rounded up
		// to a multiple of the passes.
		passes := (b.N + maxRecoveryEntries - 1) / maxRecoveryEntries
		written := max((b.N+passes-1)/passes, have)
		writeEntries(b, f.store, actorID, written-have, last)
		_ = f.store.Close()
		f.store = nil
		b.ReportAllocs()
		b.ResetTimer()
		replayed := 0
		for replayed < b.N {
			f.store = openStore(b, f.dir)
			f.start(b)
			b.StopTimer()
			replayed += written
			// A retired connect event recovers as a connect does now: a
			// reservation, which a restart does not keep, so no
			// participant holds a slot after it.
			if st := f.e.Stats(); st.ActiveRooms != 1 || st.ActiveParticipants != 0 {
				b.Fatalf("after recovery: %+v, want 1 room and no active participant", st)
			}
			if replayed < b.N {
				f.close() // the next pass starts cold again
			}
			b.StartTimer()
		}
		b.StopTimer()
		reportEntryRate(b, replayed)
	})
}

// writeEntries appends n copies of event to actorID's journal, continuing
// after whatever it already holds, in batches of 10,000 with one fsync each.
func writeEntries(b *testing.B, s *persistence.Store, actorID string, n int, event []byte) {
	b.Helper()
	j := persistence.NewJournal(s, actorID, noSnapshot)
	if _, err := j.Recover(func([]byte) error { return nil }, func([]byte) error { return nil }); err != nil {
		b.Fatal(err)
	}
	const perBatch = 10_000
	for n > 0 {
		batch := s.NewBatch()
		for k := 0; k < perBatch && n > 0; k++ {
			j.Append(batch, event)
			n--
		}
		if err := s.CommitAndWait(batch); err != nil {
			b.Fatal(err)
		}
	}
}

// reportEntryRate reports the entries replayed per second of measured time
// and the seconds per million entries.
func reportEntryRate(b *testing.B, replayed int) {
	secs := b.Elapsed().Seconds()
	if secs <= 0 || replayed <= 0 {
		return
	}
	b.ReportMetric(float64(replayed)/secs, "entries/s")
	b.ReportMetric(secs/float64(replayed)*1e6, "s/Mentries")
}
