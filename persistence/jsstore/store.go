// Package jsstore is the replicated implementation of persistence.Storage:
// rtcd's records as messages of one NATS JetStream stream, replicated over
// a cluster (three servers, R3), each state change written as one atomic
// batch, every journal append fenced by the journal's head. The design,
// and where each kind of record lives, is in docs/cluster.md.
//
// The stream keeps one message per subject: a record is the last message
// on its key's subject (subjects.go), a deletion a tombstone that expires.
// Commit hands the batch to one committer goroutine, which publishes the
// batches in commit order and runs each done callback once the cluster
// acknowledged the batch (a quorum stored it). Until then the batch's
// writes are readable from an in-memory overlay, so a reader sees them as
// soon as Commit returns, as with Pebble.
package jsstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"rtcd/persistence"
)

const (
	// MaxBatchMessages is the most messages one state change may write:
	// JetStream's limit for an atomic batch (the server's max_batch_size,
	// 1000 by default). A batch's messages are its distinct keys plus one
	// head per journal it appends to. A bigger batch is refused whole
	// (ErrBatchTooLarge), never split: split, it would not be atomic.
	MaxBatchMessages = 1000
	// maxGroupBatches bounds the batches one group commit publishes
	// together (MaxBatchMessages bounds their messages).
	maxGroupBatches = 256
	// commitQueueCapacity bounds the batches committed and not yet
	// published (Pebble's syncQueueCapacity); when full, Commit blocks.
	commitQueueCapacity = 16384
	// requestTimeoutSeconds bounds each request to the cluster (a batch
	// publish, a read, a claim).
	requestTimeoutSeconds = 10
	// openTimeoutSeconds bounds Open's setup of the stream, tried again
	// while a restarted cluster elects its leaders.
	openTimeoutSeconds = 60
	// tombstoneTTLSeconds is how long a deletion's tombstone stays: the
	// stream keeps one message per subject, so the tombstone replaced the
	// value at once; it expires so that deleted keys (one per webhook
	// event in the outbox) do not accumulate.
	tombstoneTTLSeconds = 60
	// noLeaderRetryFirstMillis and noLeaderRetryMaxMillis bound the
	// pause between two tries of a request that found no stream leader
	// (doubling from the first to the max), within requestTimeoutSeconds.
	noLeaderRetryFirstMillis = 20
	noLeaderRetryMaxMillis   = 500
	// scanAttempts bounds the tries of one scan whose reads keep finding
	// batches newer than its cut (see Scan).
	scanAttempts = 8
	// claimAttempts bounds the tries of a claim whose head keeps moving
	// (its previous writer still appending).
	claimAttempts = 8
	// scanReadsInParallel bounds the value reads one scan has in flight.
	scanReadsInParallel = 64
	// deletedHeader marks a tombstone.
	deletedHeader = "Rtcd-Deleted"
	// publishAttemptSeconds bounds one try of a batch publish, within
	// requestTimeoutSeconds. A try sent to a server that then went away
	// gets no answer at all (the cluster may or may not have stored the
	// batch); it is resolved (batchLanded) and sent again, so the loss of
	// one server costs a few seconds of writes, not the process.
	publishAttemptSeconds = 2
	// batchHeader carries, on a batch's first head message, a token unique
	// to the batch (this store's and the batch's ids): a publish whose
	// answer was lost is found in the stream by it.
	batchHeader = "Rtcd-Batch"
	// DefaultStream is the stream's name, and its subjects' root, unless
	// configured.
	DefaultStream = "RTCD"
	// DefaultReplicas is the stream's replication: three servers, so one
	// may be lost.
	DefaultReplicas = 3
)

// ErrBatchTooLarge refuses a batch of more than MaxBatchMessages messages.
var ErrBatchTooLarge = errors.New("jsstore: batch larger than JetStream's atomic batch limit")

// Config is where the store lives.
type Config struct {
	// URL is the NATS servers' URLs, comma-separated.
	URL string
	// Stream names the stream (and its subjects' root); "" is
	// DefaultStream. It must be a plain name ([A-Za-z0-9_-]).
	Stream string
	// Replicas is the stream's replication; 0 is DefaultReplicas.
	Replicas int
	// Metrics: ApplySeconds observes the hand-over of a batch to the
	// committer, SyncSeconds the time from Commit until the cluster
	// acknowledged it, SnapshotSeconds the journals' snapshot writes.
	Metrics persistence.Metrics

	// publishOneByOne publishes a batch's messages one at a time, not as
	// an atomic batch: only for the control test that shows the kill test
	// detects a torn batch.
	publishOneByOne bool
}

// Store is a persistence.Storage on a JetStream stream.
type Store struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	stream  jetstream.Stream
	root    string
	metrics persistence.Metrics
	// published counts the atomic batches sent (one per group commit);
	// the tests read it.
	published atomic.Int64
	fatal     func(error)
	// oneByOne: see Config.publishOneByOne.
	oneByOne bool

	queue     chan commitItem
	stopped   chan struct{}
	closeOnce sync.Once

	mu        sync.Mutex
	overlay   map[string]pendingWrite // writes committed and not yet published
	nextBatch uint64

	// Owned by the committer goroutine: the stream sequence of each
	// claimed journal's head message as this writer last saw it, and the
	// journals whose append was refused.
	heads  map[string]uint64
	fenced map[string]bool
	// created holds the journals this writer created (it published their
	// genesis head, which expects no head at all) and has not claimed
	// since: claiming one needs no round trip (see claim).
	created map[string]bool

	// instance tells this store's batch tokens from any other writer's.
	instance string
}

type pendingWrite struct {
	value   []byte
	deleted bool
	batch   uint64
}

// commitItem is one entry of the committer's queue: a batch, a barrier
// (no batch, no claim) or a claim.
type commitItem struct {
	batch       *batchWriter
	id          uint64
	heads       []journalHead
	done        func()
	result      chan error // CommitAndWait and ClaimJournal wait on it
	claim       string
	committedAt time.Time
	// merged: the batches of a group as one (mergeGroup); a refusal of
	// its heads does not say whose journal moved.
	merged bool
}

var _ persistence.Storage = (*Store)(nil)

// Open connects to the cluster and creates or updates the stream. fatal
// is called, from the committer goroutine, with a batch the cluster did
// not take (ErrFenced for a journal another writer owns); in production
// it must not return normally.
func Open(cfg Config, fatal func(error)) (*Store, error) {
	name := cfg.Stream
	if name == "" {
		name = DefaultStream
	}
	if !plainSegment([]byte(name)) {
		return nil, fmt.Errorf("jsstore: stream name %q: use only letters, digits, '_' and '-'", name)
	}
	replicas := cfg.Replicas
	if replicas == 0 {
		replicas = DefaultReplicas
	}
	nc, err := nats.Connect(cfg.URL, nats.Name("rtcd"), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("jsstore: connect %s: %w", cfg.URL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jsstore: %w", err)
	}
	streamConfig := jetstream.StreamConfig{
		Name:     name,
		Subjects: []string{name + ".>"},
		Storage:  jetstream.FileStorage,
		Replicas: replicas,
		// One message per subject: a key's value is its last message.
		MaxMsgsPerSubject: 1,
		Discard:           jetstream.DiscardOld,
		// A state change is one atomic batch.
		AllowAtomicPublish: true,
		// Tombstones expire.
		AllowMsgTTL: true,
		// Reads go to the stream leader, which answers only with what
		// it applied: a direct get may be answered by a follower that
		// has not applied an acknowledged batch yet.
		AllowDirect: false,
	}
	// A cluster that was (re)started a moment ago may still elect its
	// leaders, or not yet see every server online: the stream's setup
	// (idempotent) is tried again until openTimeoutSeconds rather than
	// given up after one request.
	ctx, cancel := context.WithTimeout(context.Background(), openTimeoutSeconds*time.Second)
	defer cancel()
	var stream jetstream.Stream
	err = retryNoResponders(ctx, true, func(ctx context.Context) (err error) {
		stream, err = js.CreateOrUpdateStream(ctx, streamConfig)
		return err
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jsstore: stream %s: %w", name, err)
	}
	s := &Store{
		nc: nc, js: js, stream: stream, root: name, metrics: cfg.Metrics, fatal: fatal, oneByOne: cfg.publishOneByOne,
		queue: make(chan commitItem, commitQueueCapacity), stopped: make(chan struct{}),
		overlay: map[string]pendingWrite{}, heads: map[string]uint64{}, fenced: map[string]bool{}, created: map[string]bool{},
		instance: rand.Text(),
	}
	go s.commitLoop()
	return s, nil
}

// NewBatch returns an empty batch.
func (s *Store) NewBatch() *persistence.Batch { return persistence.NewBatchOf(newBatchWriter()) }

// MaxBatchWrites is MaxBatchMessages.
func (s *Store) MaxBatchWrites() int { return MaxBatchMessages }

// SnapshotSeconds is the observer of the journals' snapshot writes.
func (s *Store) SnapshotSeconds() prometheus.Observer { return s.metrics.SnapshotSeconds }

func writerOf(b *persistence.Batch) *batchWriter {
	w, ok := b.Writer().(*batchWriter)
	if !ok {
		panic("jsstore: assertion failed: a batch of another store committed to JetStream")
	}
	return w
}

// enqueue checks the batch's size, makes its writes readable and queues
// it for the committer. It returns the refusal of a batch too large.
func (s *Store) enqueue(b *persistence.Batch, done func(), result chan error) error {
	start := time.Now()
	w := writerOf(b)
	heads := w.journalHeads()
	if n := len(w.ops) + len(heads); n > MaxBatchMessages {
		w.closed = true
		return fmt.Errorf("%w: %d messages (%d records, %d journal heads), at most %d", ErrBatchTooLarge, n, len(w.ops), len(heads), MaxBatchMessages)
	}
	w.closed = true // its writes now belong to the store
	s.mu.Lock()
	s.nextBatch++
	id := s.nextBatch
	for _, o := range w.ops {
		s.overlay[string(o.key)] = pendingWrite{value: o.value, deleted: o.deleted, batch: id}
	}
	s.mu.Unlock()
	s.queue <- commitItem{batch: w, id: id, heads: heads, done: done, result: result, committedAt: start}
	if s.metrics.ApplySeconds != nil {
		s.metrics.ApplySeconds.Observe(time.Since(start).Seconds())
	}
	return nil
}

// Commit queues b for publishing and calls done once the cluster has
// acknowledged it. A batch the store refuses goes to the fatal handler.
func (s *Store) Commit(b *persistence.Batch, done func()) {
	if err := s.enqueue(b, done, nil); err != nil {
		s.fatal(err)
	}
}

// CommitAndWait publishes b and waits for the cluster's acknowledgement.
func (s *Store) CommitAndWait(b *persistence.Batch) error {
	result := make(chan error, 1)
	if err := s.enqueue(b, nil, result); err != nil {
		return err
	}
	return <-result
}

// AfterDurable calls done once every batch committed before it has been
// acknowledged: the committer publishes in order.
func (s *Store) AfterDurable(done func()) { s.queue <- commitItem{done: done} }

// ClaimJournal reads the journal's head, after every batch committed
// before the call: this writer's appends to it are conditional on that
// head from now on.
func (s *Store) ClaimJournal(actorID string) error {
	result := make(chan error, 1)
	s.queue <- commitItem{claim: actorID, result: result}
	return <-result
}

// commitLoop publishes the queue in order. Batches waiting together are
// published as one atomic batch (group commit, as Pebble's syncer covers
// several batches with one fsync): one round trip to the cluster and one
// replication for all of them, where one at a time each waited for its
// own. A claim or a barrier ends a group, so each still sees every batch
// queued before it acknowledged; a claim of a journal this writer created
// needs no round trip and is answered at once (claimCreated).
func (s *Store) commitLoop() {
	defer close(s.stopped)
	var next *commitItem // taken from the queue while gathering a group; handled next
	for {
		var it commitItem
		if next != nil {
			it, next = *next, nil
		} else {
			var ok bool
			if it, ok = <-s.queue; !ok {
				return
			}
		}
		switch {
		case it.claim != "":
			it.result <- s.claim(it.claim)
		case it.batch == nil:
			if it.done != nil {
				it.done()
			}
		default:
			var group []commitItem
			group, next = s.gather(it)
			s.commitGroup(group)
		}
	}
}

// gather takes the batches queued behind first, without waiting, while
// the group stays within MaxBatchMessages (counting every batch's
// messages, a bound above the merged count) and maxGroupBatches. It
// returns the group and the item that ended it, if any.
//
// A claim of a journal this writer created needs no round trip
// (claimCreated): answered at once when the creating batch is published,
// and, when that batch is in the group, taken into the group and answered
// after it; so a new actor recovering does not end the group.
func (s *Store) gather(first commitItem) ([]commitItem, *commitItem) {
	group := []commitItem{first}
	messages := first.messages()
	creates := map[string]bool{} // journals the group's batches create
	noteCreates := func(it commitItem) {
		for _, h := range it.heads {
			if h.genesis {
				creates[h.actor] = true
			}
		}
	}
	noteCreates(first)
	for batches := 1; batches < maxGroupBatches; {
		select {
		case it, ok := <-s.queue:
			if !ok {
				return group, nil
			}
			switch {
			case it.claim != "" && creates[it.claim]:
				group = append(group, it)
				continue
			case it.claim != "" && s.claimCreated(it.claim):
				// Only this actor appends to its journal, and the batch that
				// created it is published: nothing in the group is its.
				it.result <- nil
				continue
			case it.batch == nil || it.claim != "" || messages+it.messages() > MaxBatchMessages:
				return group, &it
			}
			messages += it.messages()
			noteCreates(it)
			group = append(group, it)
			batches++
		default:
			return group, nil
		}
	}
	return group, nil
}

// messages is how many messages the batch publishes on its own.
func (it *commitItem) messages() int { return len(it.batch.ops) + len(it.heads) }

// commitGroup publishes a group as one atomic batch, then answers each of
// its batches in order. All or none of them are stored, so a refusal
// (fencing: the process is stopping) fails every batch of the group.
//
// A claim in the group (of a journal a batch of the group creates) is
// answered in its place: once the group is published, the journal is
// this writer's (claim); if it was not, with the group's error.
func (s *Store) commitGroup(group []commitItem) {
	merged := group[0]
	if len(group) > 1 {
		merged = mergeGroup(group)
	}
	err := s.publish(&merged)
	if len(group) > 1 && errors.Is(err, persistence.ErrFenced) {
		// Another writer took over a journal of one of the batches (its
		// actor moved to another node) and the atomic group was refused
		// whole: the batches are published again one by one, so only
		// those of moved journals are refused.
		for _, it := range group {
			if it.claim != "" {
				it.result <- s.claim(it.claim)
				continue
			}
			s.commitGroup([]commitItem{it})
		}
		return
	}
	fatal := false
	for _, it := range group {
		if it.claim != "" {
			if err != nil {
				it.result <- err
			} else {
				it.result <- s.claim(it.claim)
			}
			continue
		}
		s.settle(it)
		if s.metrics.SyncSeconds != nil && err == nil {
			s.metrics.SyncSeconds.Observe(time.Since(it.committedAt).Seconds())
		}
		switch {
		case it.result != nil:
			it.result <- err
		case err != nil:
			if !fatal { // once: the handler stops the process
				fatal = true
				s.fatal(err)
			}
		case it.done != nil:
			it.done()
		}
	}
}

// mergeGroup is the group as one batch: every write in queue order (a key
// written again keeps its last write), one head per journal with its last
// sequence after the group (conditional on the head as it was before the
// group: a journal the group creates expects none), and every truncation.
// It carries the first batch's id, so its Rtcd-Batch token is unique.
func mergeGroup(group []commitItem) commitItem {
	w := newBatchWriter()
	heads := map[string]journalHead{}
	for _, it := range group {
		if it.batch == nil { // a claim taken into the group
			continue
		}
		for _, o := range it.batch.ops {
			_ = w.put(o)
		}
		w.truncations = append(w.truncations, it.batch.truncations...)
		for _, h := range it.heads {
			if had, ok := heads[h.actor]; ok {
				h.genesis = had.genesis
				h.seq = max(h.seq, had.seq)
			}
			heads[h.actor] = h
		}
	}
	w.closed = true
	out := commitItem{batch: w, id: group[0].id, committedAt: group[0].committedAt, merged: true}
	for _, h := range heads {
		out.heads = append(out.heads, h)
	}
	sort.Slice(out.heads, func(i, j int) bool { return out.heads[i].actor < out.heads[j].actor })
	return out
}

// settle drops the batch's writes from the overlay: published, the
// stream holds them; refused, they never happened. A later batch's write
// of the same key stays.
func (s *Store) settle(it commitItem) {
	s.mu.Lock()
	for _, o := range it.batch.ops {
		if p, ok := s.overlay[string(o.key)]; ok && p.batch == it.id {
			delete(s.overlay, string(o.key))
		}
	}
	s.mu.Unlock()
}

// claim takes the journal over: it reads the head and publishes it again,
// conditional on the sequence it read. From then on the previous writer's
// appends, which expect the older head, are refused, so no one else
// appends to the journal while this writer recovers and serves it. A
// head that moved between the read and the write (the previous writer
// appended) is read again, at most claimAttempts times.
//
// A journal this writer created and has not claimed since is its own
// already: its genesis head expected no head at all, so no writer had the
// journal before, and one that claimed it since moved the head this
// writer's next append expects, which is then refused as if this claim
// had come first. Its first claim therefore takes no round trip (a new
// actor recovering from the batch that created it, as every room does);
// any later claim (the actor restarted) takes the journal as above.
func (s *Store) claim(actor string) error {
	if s.claimCreated(actor) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeoutSeconds*time.Second)
	defer cancel()
	subject := headSubject(s.root, actor)
	for range claimAttempts {
		var expected uint64
		value := make([]byte, seqBytes) // no head yet: sequence 0
		var m *jetstream.RawStreamMsg
		err := retryNoResponders(ctx, true, func(ctx context.Context) (err error) {
			m, err = s.stream.GetLastMsgForSubject(ctx, subject)
			return err
		})
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return fmt.Errorf("jsstore: claim journal %s: %w", actor, err)
		default:
			expected, value = m.Sequence, m.Data
		}
		msg := nats.NewMsg(subject)
		msg.Data = value
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(expected, 10))
		var ack *jetstream.PubAck
		err = retryNoResponders(ctx, true, func(ctx context.Context) (err error) {
			ack, err = s.js.PublishMsg(ctx, msg)
			return err
		})
		if isWrongLastSequence(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("jsstore: claim journal %s: %w", actor, err)
		}
		s.heads[actor] = ack.Sequence
		delete(s.fenced, actor)
		return nil
	}
	return fmt.Errorf("jsstore: claim journal %s: its head kept moving during %d attempts", actor, claimAttempts)
}

// claimCreated reports whether actor's journal is one this writer
// created and has not claimed since, and takes it as claimed.
func (s *Store) claimCreated(actor string) bool {
	if !s.created[actor] || s.fenced[actor] {
		return false
	}
	delete(s.created, actor)
	return true
}

// batchLanded reads the last message of a batch's first head (from the
// stream leader, which answers with what it applied) and reports whether
// it is that batch's, found by its token, and its stream sequence: the
// batch's first.
func (s *Store) batchLanded(ctx context.Context, headSubject, token string) (uint64, bool, error) {
	var m *jetstream.RawStreamMsg
	err := retryNoResponders(ctx, true, func(ctx context.Context) (err error) {
		m, err = s.stream.GetLastMsgForSubject(ctx, headSubject)
		return err
	})
	if err != nil {
		return 0, false, err
	}
	return m.Sequence, m.Header.Get(batchHeader) == token, nil
}

// isIncompleteBatch reports the stream leader's refusal of an atomic
// batch it did not receive whole: some of its messages reached a server
// that was not (or no longer) the leader, as happens while a new stream
// elects its first leader or a leader changes. The leader abandons such a
// batch and stores none of it, so it is sent again whole, under a new
// batch id, like a batch that found no leader.
func isIncompleteBatch(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstreamext.JSErrCodeBatchPublishIncomplete
}

// jsErrCodeClusterNoPeers is the server's JSClusterNoPeersErrF (nats-server
// errors.json), which nats.go does not name: a stream could not be placed
// on enough servers.
const jsErrCodeClusterNoPeers jetstream.ErrorCode = 10005

// peerOfflineReason is the reason the server adds to that refusal when a
// server it could place on has not been heard from yet, as in a cluster
// that has just started ("no suitable peers for placement, peer
// offline"). Only that reason passes: with too few servers for the
// replicas asked (R5 on three) the refusal never ends, and Open reports it
// at once.
const peerOfflineReason = "peer offline"

// isPeerOffline reports a stream's creation refused because a server is
// not seen online yet: nothing was created, and it succeeds once it is.
func isPeerOffline(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrCodeClusterNoPeers &&
		strings.Contains(apiErr.Description, peerOfflineReason)
}

func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// publish writes one batch: first the head of each journal it appends to,
// each conditional on the head this writer last saw, then its records.
func (s *Store) publish(it *commitItem) error {
	s.published.Add(1)
	w := it.batch
	var actors []string
	msgs := make([]*nats.Msg, 0, len(it.heads)+len(w.ops))
	for _, h := range it.heads {
		if s.fenced[h.actor] {
			return fmt.Errorf("%w: journal %s: an earlier append was refused", persistence.ErrFenced, h.actor)
		}
		expected, known := s.heads[h.actor]
		if !known && !h.genesis {
			return fmt.Errorf("jsstore: assertion failed: journal %s appended to without ClaimJournal", h.actor)
		}
		m := nats.NewMsg(headSubject(s.root, h.actor))
		m.Data = binary.BigEndian.AppendUint64(nil, h.seq)
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(expected, 10))
		msgs = append(msgs, m)
		actors = append(actors, h.actor)
	}
	for _, o := range w.ops {
		m := nats.NewMsg(keySubject(s.root, o.key))
		if o.deleted {
			m.Header.Set(deletedHeader, "1")
			m.Header.Set(jetstream.MsgTTLHeader, strconv.Itoa(tombstoneTTLSeconds)+"s")
		} else {
			m.Data = o.value
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeoutSeconds*time.Second)
	defer cancel()
	if s.oneByOne {
		for _, m := range msgs {
			if _, err := s.js.PublishMsg(ctx, m); err != nil {
				return fmt.Errorf("jsstore: publish one by one: %w", err)
			}
		}
		return nil
	}
	var token string
	if len(it.heads) > 0 {
		token = s.instance + "-" + strconv.FormatUint(it.id, 10)
		msgs[0].Header.Set(batchHeader, token)
	}
	var first uint64 // the batch's first stream sequence
	for sent := false; ; sent = true {
		attempt, cancelAttempt := context.WithTimeout(ctx, publishAttemptSeconds*time.Second)
		var ack *jetstreamext.BatchAck
		err := retryNoResponders(attempt, false, func(attempt context.Context) (err error) {
			// A batch that found no stream leader was stored nowhere (its
			// messages had no subscriber, or a server holds a batch with a
			// gap that it never commits), and neither was one the leader
			// got only part of (isIncompleteBatch), so it is sent again
			// whole, under a new batch id.
			ack, err = jetstreamext.PublishMsgBatch(attempt, s.js, msgs, jetstreamext.BatchFlowControl{AckFirst: false})
			return err
		})
		cancelAttempt()
		if err == nil {
			first = ack.Sequence - uint64(len(msgs)) + 1
			break
		}
		unanswered := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
		if (unanswered || (sent && isWrongLastSequence(err))) && token != "" {
			// An earlier try may have been stored with its answer lost;
			// then this writer's own batch moved the head, not a rival.
			seq, landed, lerr := s.batchLanded(ctx, msgs[0].Subject, token)
			if lerr == nil && landed {
				first = seq
				break
			}
		}
		if unanswered && ctx.Err() == nil {
			// Not stored (a batch without heads holds only sets and
			// deletes, which a second write repeats exactly): again.
			slog.Warn("jsstore: a batch publish got no answer; sending it again", "messages", len(msgs), "error", err)
			continue
		}
		if isWrongLastSequence(err) && len(actors) > 0 {
			if it.merged {
				// Whose journal moved is not known: commitGroup publishes
				// the group's batches again one by one.
				return fmt.Errorf("%w: journal %s: %v", persistence.ErrFenced, strings.Join(actors, ", "), err)
			}
			for _, a := range actors {
				s.fenced[a] = true
			}
			return fmt.Errorf("%w: journal %s: %v", persistence.ErrFenced, strings.Join(actors, ", "), err)
		}
		return fmt.Errorf("jsstore: publish a batch of %d messages: %w", len(msgs), err)
	}
	// An atomic batch takes consecutive sequences.
	for i, h := range it.heads {
		s.heads[h.actor] = first + uint64(i)
		if h.genesis {
			s.created[h.actor] = true
		}
	}
	for _, tr := range w.truncations {
		// Every entry the snapshot covers was written before this batch
		// (or in it, and recovery skips those).
		if err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(scanFilter(s.root, journalPrefix(tr.actor))), jetstream.WithPurgeSequence(first)); err != nil {
			slog.Warn("jsstore: journal truncation failed; the covered entries stay until the next snapshot", "journal", tr.actor, "error", err)
		}
	}
	return nil
}

// retryNoResponders runs op until it does not fail for want of a stream
// leader (a stream just created, or electing a new leader after a server
// was lost; or a batch the leader got only part of, isIncompleteBatch;
// or a stream's placement while a server is not yet seen online,
// isPeerOffline), or ctx ends. No responders means no server took the request,
// so sending it again writes nothing twice. With unanswered, a try that
// got no answer within publishAttemptSeconds (sent to a leader that went
// away) is sent again too: only for requests that may be repeated (reads,
// purges, a claim's conditional publish, which a repeat finds moved and
// takes again).
func retryNoResponders(ctx context.Context, unanswered bool, op func(context.Context) error) error {
	wait := noLeaderRetryFirstMillis * time.Millisecond
	for {
		try := ctx
		cancel := func() {}
		if unanswered {
			try, cancel = context.WithTimeout(ctx, publishAttemptSeconds*time.Second)
		}
		err := op(try)
		cancel()
		lost := unanswered && ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout))
		if !lost && !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, jetstream.ErrNoStreamResponse) && !isIncompleteBatch(err) &&
			!isPeerOffline(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (no stream leader until the deadline)", err)
		case <-time.After(wait):
		}
		wait = min(2*wait, noLeaderRetryMaxMillis*time.Millisecond)
	}
}

func journalPrefix(actor string) []byte { return []byte("j/" + actor + "/") }

// Get returns a copy of key's value, or persistence.ErrNotFound.
func (s *Store) Get(key []byte) ([]byte, error) {
	s.mu.Lock()
	p, ok := s.overlay[string(key)]
	s.mu.Unlock()
	if ok {
		if p.deleted {
			return nil, persistence.ErrNotFound
		}
		return slices.Clone(p.value), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeoutSeconds*time.Second)
	defer cancel()
	v, err := s.read(ctx, key)
	return v, unavailable(err)
}

// unavailable marks a read's failure (other than a key not found) as the
// store being unavailable: every such failure is a request to the cluster
// that got no answer in time.
func unavailable(err error) error {
	if err == nil || errors.Is(err, persistence.ErrNotFound) || errors.Is(err, persistence.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", persistence.ErrUnavailable, err)
}

func (s *Store) read(ctx context.Context, key []byte) ([]byte, error) {
	v, _, err := s.readSeq(ctx, key)
	return v, err
}

// readSeq is read, with the stream sequence of the message it read (0
// when there is none): a tombstone's too.
func (s *Store) readSeq(ctx context.Context, key []byte) ([]byte, uint64, error) {
	var m *jetstream.RawStreamMsg
	err := retryNoResponders(ctx, true, func(ctx context.Context) (err error) {
		m, err = s.stream.GetLastMsgForSubject(ctx, keySubject(s.root, key))
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, persistence.ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("jsstore: get: %w", err)
	}
	if m.Header.Get(deletedHeader) != "" {
		return nil, m.Sequence, persistence.ErrNotFound
	}
	if m.Data == nil {
		return []byte{}, m.Sequence, nil
	}
	return m.Data, m.Sequence, nil
}

// Scan calls fn for each key with prefix in bytewise key order, at most
// limit times (limit <= 0: no limit), until fn returns false.
//
// JetStream has no iterator over a snapshot, so a scan makes its own cut:
// it reads the stream's last sequence (a read the leader isolates from
// batch writes, so it falls between two batches), lists the subjects under
// the prefix, sorts their keys and reads each value in turn. A value newer
// than the cut means a batch landed during the scan, which could show part
// of it: the scan starts again, at most scanAttempts times. So a scan sees
// every batch whole or not at all, as a Pebble iterator does. Writes not
// yet published come from the overlay, read first.
//
// Under a constant stream of batches to the prefix, every attempt may find
// one; the last attempt's result is then used as it is, and may show part
// of a batch (docs/cluster.md: a list read during a burst of writes to
// it). Journal recovery is not concerned: once a journal is claimed, no
// one else appends to it.
func (s *Store) Scan(prefix []byte, limit int, fn func(key, value []byte) bool) error {
	return s.ScanFrom(prefix, prefix, limit, fn)
}

// ScanFrom is Scan starting at the first key with prefix not before from
// (from before prefix: at prefix), as persistence.Store.ScanFrom. The keys
// before from are left out before any value is read.
func (s *Store) ScanFrom(prefix, from []byte, limit int, fn func(key, value []byte) bool) error {
	var entries []scanEntry
	for attempt := 1; ; attempt++ {
		var consistent bool
		var err error
		entries, consistent, err = s.scanOnce(prefix, from, limit, attempt == scanAttempts)
		if err != nil {
			return unavailable(err)
		}
		if consistent || attempt == scanAttempts {
			break
		}
	}
	for _, e := range entries {
		if !fn(e.key, e.value) {
			break
		}
	}
	return nil
}

type scanEntry struct{ key, value []byte }

// scanOnce reads the entries of one scan; consistent is false when a
// value newer than the scan's cut was read (and then, unless last, the
// entries are not returned).
func (s *Store) scanOnce(prefix, from []byte, limit int, last bool) (entries []scanEntry, consistent bool, err error) {
	// The overlay first: a write published after this point is in the
	// stream by the time the stream is read.
	pending := map[string]pendingWrite{}
	s.mu.Lock()
	for k, p := range s.overlay {
		if strings.HasPrefix(k, string(prefix)) {
			pending[k] = p
		}
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeoutSeconds*time.Second)
	defer cancel()
	var cut uint64
	var newest *jetstream.RawStreamMsg
	err = retryNoResponders(ctx, true, func(ctx context.Context) (err error) {
		newest, err = s.stream.GetLastMsgForSubject(ctx, s.root+".>")
		return err
	})
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return nil, false, fmt.Errorf("jsstore: scan %q: %w", prefix, err)
	default:
		cut = newest.Sequence
	}
	consistent = true
	var info *jetstream.StreamInfo
	err = retryNoResponders(ctx, true, func(ctx context.Context) (err error) {
		info, err = s.stream.Info(ctx, jetstream.WithSubjectFilter(scanFilter(s.root, prefix)))
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("jsstore: scan %q: %w", prefix, err)
	}
	keys := make([]string, 0, len(info.State.Subjects)+len(pending))
	for subj := range info.State.Subjects {
		k, err := subjectKey(s.root, subj)
		if err != nil {
			return nil, false, err
		}
		if bytes.HasPrefix(k, prefix) {
			if _, ok := pending[string(k)]; !ok {
				keys = append(keys, string(k))
			}
		}
	}
	for k := range pending {
		keys = append(keys, k)
	}
	slices.Sort(keys) // bytewise, as Go compares strings
	if first, _ := slices.BinarySearch(keys, string(from)); first > 0 {
		keys = keys[first:]
	}
	// Read the values a chunk at a time, each chunk's reads in parallel,
	// until the limit is reached: a scan costs a few round trips, not one
	// per key, which also keeps its window for a batch to land small.
	for start := 0; start < len(keys) && (limit <= 0 || len(entries) < limit); start += scanReadsInParallel {
		chunk := keys[start:min(start+scanReadsInParallel, len(keys))]
		values := make([][]byte, len(chunk))
		seqs := make([]uint64, len(chunk))
		errs := make([]error, len(chunk))
		var wg sync.WaitGroup
		for i, k := range chunk {
			if _, ok := pending[k]; ok {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				values[i], seqs[i], errs[i] = s.readSeq(ctx, []byte(k))
			}()
		}
		wg.Wait()
		for i, k := range chunk {
			if limit > 0 && len(entries) >= limit {
				break
			}
			if p, ok := pending[k]; ok {
				if !p.deleted {
					entries = append(entries, scanEntry{[]byte(k), p.value})
				}
				continue
			}
			if seqs[i] > cut {
				if !last {
					return nil, false, nil
				}
				consistent = false
			}
			if errors.Is(errs[i], persistence.ErrNotFound) {
				continue // a tombstone, or gone since the listing
			}
			if errs[i] != nil {
				return nil, false, fmt.Errorf("jsstore: scan %q: %w", prefix, errs[i])
			}
			entries = append(entries, scanEntry{[]byte(k), values[i]})
		}
	}
	return entries, consistent, nil
}

// Close waits for every queued batch to be published, then disconnects.
// No Commit may be running or start after Close is called.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.queue)
		<-s.stopped
		s.nc.Close()
	})
	return nil
}
