package bench

import (
	"fmt"
	"sync/atomic"
	"testing"

	"rtcd/actors"
	"rtcd/internal/testtools"
	"rtcd/persistence"
	"rtcd/ratelimit"
)

// participantsPerRoom is how many participants the benchmarks that need
// many put in one room (well under MaxParticipantSessionsPerRoom).
const participantsPerRoom = 1000

// durableCommit is a durable commit of one journal event: the floor of
// a connect, which is one such commit plus the decision around it.
func durableCommit(s *persistence.Store) func() error {
	j := persistence.NewJournal(s, "room/baseline", noSnapshot)
	acked := make(chan struct{}, 1)
	return func() error {
		batch := s.NewBatch()
		j.Append(batch, benchEvent)
		s.Commit(batch, func() { acked <- struct{}{} })
		<-acked
		return nil
	}
}

// BenchmarkConnect is Engine.Connect, the decision behind POST /v1/connect:
// the per-IP and per-project rate limits, the participant token's
// verification, then the room's checks against what it publishes (project,
// room and participant status, room and project caps taken by
// compare-and-swap, credit gate), a media token and the response body, all
// on the caller's goroutine: since issue 15 a connect is a reservation in
// memory, with no message to the room and no journal write. Real engine,
// real Pebble store in a temporary directory.
//
//   - reconnect: the same participant connects again and again (a new
//     connect session each time; no new slot, no participant record).
//   - first: each op is the first connect of a new participant (takes a
//     slot and rewrites the participant's record too).
//   - parallel: 64 clients (32 per CPU) reconnecting participants spread
//     over 64 rooms: connects of different rooms run in parallel and share
//     fsyncs. Reports connects/s.
//
// x_durable_commit is the multiple of one durable journal commit of a
// journal event on the same store: what a connect waited for before issue
// 15, which it no longer does.
func BenchmarkConnect(b *testing.B) {
	b.Run("reconnect", func(b *testing.B) {
		f := newFixture(b)
		_, token := f.connectedParticipant(b)
		p := &actors.ConnectParams{Token: &token}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, aerr := f.e.Connect(p, "192.0.2.1"); aerr != nil {
				b.Fatal(aerr)
			}
		}
		reportVsBaseline(b, "durable_commit", durableCommit(f.store))
	})
	b.Run("first", func(b *testing.B) {
		f := newFixture(b)
		tokens := f.participants(b, b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, aerr := f.e.Connect(&actors.ConnectParams{Token: &tokens[i]}, "192.0.2.1"); aerr != nil {
				b.Fatal(aerr)
			}
		}
		reportVsBaseline(b, "durable_commit", durableCommit(f.store))
	})
	b.Run("reconnect_redis_limits", func(b *testing.B) {
		// The same reconnect with the rate counters in Redis, as in a
		// cluster (two decisions per connect: per source IP and per
		// project, one round trip each); x_memory_limits is the multiple
		// of the same reconnect counted in process.
		redis := testtools.StartRedis(b)
		limiter, err := ratelimit.NewRedis(ratelimit.RedisConfig{URL: redis.URL})
		if err != nil {
			b.Fatal(err)
		}
		defer limiter.Close()
		f := newFixtureLimited(b, benchSettings(), nil, limiter)
		_, token := f.connectedParticipant(b)
		p := &actors.ConnectParams{Token: &token}
		local := newFixture(b)
		_, localToken := local.connectedParticipant(b)
		localParams := &actors.ConnectParams{Token: &localToken}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, aerr := f.e.Connect(p, "192.0.2.1"); aerr != nil {
				b.Fatal(aerr)
			}
		}
		reportVsBaseline(b, "memory_limits", func() error {
			if _, aerr := local.e.Connect(localParams, "192.0.2.1"); aerr != nil {
				return fmt.Errorf("%v", aerr)
			}
			return nil
		})
	})
	b.Run("parallel", func(b *testing.B) {
		f := newFixture(b)
		const rooms = 64
		tokens := make([]string, rooms)
		if err := parallel(rooms, func(i int) error {
			roomID, err := f.createRoom()
			if err == nil {
				tokens[i], err = f.createParticipant(roomID)
			}
			return err
		}); err != nil {
			b.Fatal(err)
		}
		var client atomic.Int64
		b.SetParallelism(32)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			token := tokens[int(client.Add(1)-1)%rooms]
			p := &actors.ConnectParams{Token: &token}
			for pb.Next() {
				if _, aerr := f.e.Connect(p, "192.0.2.1"); aerr != nil {
					b.Error(aerr)
					return
				}
			}
		})
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "connects/s")
	})
}

// participants creates n participants, participantsPerRoom to a room, and
// returns their tokens (set-up, in parallel).
func (f *fixture) participants(b *testing.B, n int) []string {
	b.Helper()
	rooms := f.rooms(b, n)
	tokens := make([]string, n)
	err := parallel(n, func(i int) error {
		var err error
		tokens[i], err = f.createParticipant(rooms[i/participantsPerRoom])
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return tokens
}

// rooms creates enough rooms for n participants, participantsPerRoom each.
func (f *fixture) rooms(b *testing.B, n int) []string {
	b.Helper()
	rooms := make([]string, (n+participantsPerRoom-1)/participantsPerRoom)
	err := parallel(len(rooms), func(i int) error {
		var err error
		rooms[i], err = f.createRoom()
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return rooms
}

// BenchmarkCreateRoom is Engine.CreateRoom (POST /v1/rooms): the project
// actor's checks, the room's snapshot, record and index written in one
// batch, the room actor spawned, and the reply once the batch is durable.
//
//   - serial: one caller; every create waits for its own fsync.
//   - parallel: 64 callers (32 per CPU), sharing fsyncs. Reports rooms/s;
//     the target is at least 10,000 durable room creations per second.
func BenchmarkCreateRoom(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		f := newFixture(b)
		p := &actors.RoomParams{}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, aerr := f.e.CreateRoom(f.caller, p, nil); aerr != nil {
				b.Fatal(aerr)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rooms/s")
		reportVsBaseline(b, "durable_commit", durableCommit(f.store))
	})
	b.Run("parallel", func(b *testing.B) {
		f := newFixture(b)
		b.SetParallelism(32)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			p := &actors.RoomParams{}
			for pb.Next() {
				if _, aerr := f.e.CreateRoom(f.caller, p, nil); aerr != nil {
					b.Error(aerr)
					return
				}
			}
		})
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rooms/s")
	})
}

// BenchmarkMemory is the engine's live heap per idle room and per connected
// participant: a real engine, the live heap read after two full collections
// before and after creating b.N of them, divided by b.N. ns/op is the wall
// time per create with 32 concurrent creators (set-up speed, not a target).
// Pebble's memtables and block cache live outside the Go heap and are not
// counted; everything the actors, their mailboxes and their state hold is.
// Targets: at most 2 KiB per idle room, 4 KiB per connected participant.
func BenchmarkMemory(b *testing.B) {
	b.Run("idle_room", func(b *testing.B) {
		f := newFixture(b)
		p := &actors.RoomParams{}
		b.ReportAllocs()
		before := liveHeap()
		b.ResetTimer()
		err := parallel(b.N, func(int) error {
			if _, aerr := f.e.CreateRoom(f.caller, p, nil); aerr != nil {
				return fmt.Errorf("create room: %v", aerr)
			}
			return nil
		})
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		after := liveHeap()
		if st := f.e.Stats(); st.ActiveRooms != int64(b.N) {
			b.Fatalf("%d active rooms, want %d", st.ActiveRooms, b.N)
		}
		b.ReportMetric(perItem(after, before, b.N), "B/room")
	})
	b.Run("connected_participant", func(b *testing.B) {
		f := newFixture(b)
		// The rooms exist before the first reading: their cost is the
		// other figure.
		rooms := f.rooms(b, b.N)
		b.ReportAllocs()
		before := liveHeap()
		b.ResetTimer()
		err := parallel(b.N, func(i int) error {
			token, err := f.createParticipant(rooms[i/participantsPerRoom])
			if err != nil {
				return err
			}
			return f.connect(token)
		})
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		after := liveHeap()
		if st := f.e.Stats(); st.ActiveParticipants != int64(b.N) {
			b.Fatalf("%d active participants, want %d", st.ActiveParticipants, b.N)
		}
		b.ReportMetric(perItem(after, before, b.N), "B/participant")
	})
}

// perItem is the live heap growth per item (never negative: a collection can
// free more than n items add when n is tiny).
func perItem(after, before uint64, n int) float64 {
	if after <= before || n <= 0 {
		return 0
	}
	return float64(after-before) / float64(n)
}
