package dispatch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goccy/go-json"
	"rtcd/actors/core"
	"rtcd/apierr"
	"rtcd/ids"
	"rtcd/metrics"
	"rtcd/persistence"
	"rtcd/webhookdelivery"
)

// Webhook delivery. The outbox (written in the same batch as the state
// change that caused each event) is drained by one fan-out loop: for every
// event it writes one delivery per subscribed, enabled endpoint of the
// event's project, due from its creation, and deletes the outbox entry, in
// one durable batch. Each endpoint has one worker goroutine that owns that
// endpoint's deliveries: it starts those due (by the injected clock) in
// due order, so an endpoint's first attempts start in outbox order, with a
// sliding window of attempts in flight (webhookdelivery.NextWindow: it
// grows on success and shrinks to one on failures), and records the
// answered attempts in groups, one durable batch each. A slow or dead
// endpoint therefore only ever delays itself; the number of attempts in
// flight over all endpoints is bounded by webhookConcurrency.
//
//	pending --2xx--> succeeded
//	pending/retrying --failure--> retrying (next attempt per the schedule) | dead (schedule exhausted)
//	dead/retrying --POST …/retry--> retrying, due now
//
// Every pending or retrying delivery also has an entry in the undelivered
// index (wu/<endpoint>/<created><delivery>, value its status), written in
// the batch that changes its status, so the metrics read the backlog and
// the oldest undelivered delivery of each endpoint without reading
// delivery records: each worker keeps its endpoint's counts by status,
// counted from the index at Start, and the oldest is the first entry of
// the endpoint's range.

// Delivery statuses.
const (
	DeliveryPending   = "pending"
	DeliveryRetrying  = "retrying"
	DeliverySucceeded = "succeeded"
	DeliveryDead      = "dead"
)

// Named bounds of the Dispatcher. The attempts in flight to one endpoint
// are bounded by its window (Settings.WindowAttempts, at most
// webhookdelivery.MaxWindowAttempts), and so are the answered attempts
// waiting for their group commit: they count in the window until recorded.
const (
	webhookConcurrency      = 4 * webhookdelivery.MaxWindowAttempts // attempts in flight over all endpoints: 256, four of the largest windows
	fanoutBatchEvents       = 256                                   // outbox events moved per fan-out step
	maxAttemptsKept         = 32                                    // attempts a delivery record keeps (the newest)
	workerRetryQueue        = 64                                    // manual retry requests waiting per endpoint
	fanoutIntervalMillis    = 200                                   // how often the outbox is polled (also nudged)
	workerTickMillis        = 1000
	maxStoredResponseBodies = 4096 // bytes of a receiver's response kept per attempt (the client's capture bound)
	undeliveredIndexBatch   = 1024 // deliveries indexed per batch when building the undelivered index
	// clusterOutboxScanEvents bounds the outbox entries one fan-out step
	// reads on a cluster node, where the shared outbox holds other nodes'
	// events, passed over, besides its own (at most fanoutBatchEvents).
	// Events of a lost node wait for its projects' next owner; more than
	// this ahead of a node's own delay them until that owner takes them.
	clusterOutboxScanEvents = 4 * fanoutBatchEvents
)

// undeliveredIndexBuilt marks a store whose undelivered index (wu/) holds
// every pending and retrying delivery; a store written before the index
// existed gets it built once, at Start.
var undeliveredIndexBuilt = persistence.Key(persistence.PrefixMeta, "webhook-undelivered-index")

// WebhookSender delivers one signed request (webhookdelivery.Client in
// production).
type WebhookSender interface {
	Deliver(ctx context.Context, url string, headers map[string]string, body []byte) webhookdelivery.Attempt
}

// DeliveryAttempt is one recorded attempt.
type DeliveryAttempt struct {
	Attempt        int     `json:"attempt"`
	RequestedAt    string  `json:"requested_at"`
	ResponseStatus int     `json:"response_status"`
	LatencyMillis  int64   `json:"latency_ms"`
	ResponseBody   string  `json:"response_body"`
	Error          *string `json:"error"`
	NextAttemptAt  *string `json:"next_attempt_at"`
}

// Delivery is one event to one endpoint.
type Delivery struct {
	ID            string            `json:"id"`
	EndpointID    string            `json:"endpoint_id"`
	EventID       string            `json:"event_id"`
	EventType     string            `json:"event_type"`
	Status        string            `json:"status"`
	AttemptCount  int               `json:"attempt_count"`
	ScheduleStep  int               `json:"schedule_step"` // automatic attempts made, for the retry schedule
	NextAttemptAt time.Time         `json:"next_attempt_at"`
	CreatedAt     time.Time         `json:"created_at"`
	Attempts      []DeliveryAttempt `json:"attempts"`
	Event         json.RawMessage   `json:"event"` // the exact bytes sent (the outbox envelope)
}

// DeliveryView is the public delivery object (without the event body).
type DeliveryView struct {
	Object        string            `json:"object"`
	ID            string            `json:"id"`
	EndpointID    string            `json:"endpoint_id"`
	EventID       string            `json:"event_id"`
	EventType     string            `json:"event_type"`
	Status        string            `json:"status"`
	AttemptCount  int               `json:"attempt_count"`
	NextAttemptAt *string           `json:"next_attempt_at"`
	CreatedAt     string            `json:"created_at"`
	Attempts      []DeliveryAttempt `json:"attempts"`
}

func (d *Delivery) View() DeliveryView {
	var next *string
	if d.Status == DeliveryPending || d.Status == DeliveryRetrying {
		next = core.OptionalTimestamp(d.NextAttemptAt)
	}
	attempts := d.Attempts
	if attempts == nil {
		attempts = []DeliveryAttempt{}
	}
	return DeliveryView{Object: "webhook_delivery", ID: d.ID, EndpointID: d.EndpointID, EventID: d.EventID, EventType: d.EventType,
		Status: d.Status, AttemptCount: d.AttemptCount, NextAttemptAt: next, CreatedAt: core.Timestamp(d.CreatedAt), Attempts: attempts}
}

// DeliveryKey is wd/<endpoint_id>/<delivery_id>: a delivery record.
func DeliveryKey(endpointID, deliveryID string) []byte {
	return persistence.Key(persistence.PrefixDelivery, endpointID+"/"+deliveryID)
}

// undeliveredKey is the undelivered index entry of a delivery created at
// created (its value is the delivery's status).
func undeliveredKey(endpointID string, created time.Time, deliveryID string) []byte {
	k := persistence.IndexPrefix(persistence.PrefixUndelivered, endpointID)
	k = binary.BigEndian.AppendUint64(k, uint64(max(created.UnixNano(), 0)))
	return append(k, deliveryID...)
}

func dueKey(endpointID string, due time.Time, deliveryID string) []byte {
	k := persistence.IndexPrefix(persistence.PrefixDelDue, endpointID)
	k = binary.BigEndian.AppendUint64(k, uint64(max(due.UnixNano(), 0)))
	return append(k, deliveryID...)
}

// Settings are how a dispatcher delivers.
type Settings struct {
	// ScheduleSeconds are the delays of the retries after failed attempts
	// (--webhook-retry-schedule); nil: webhookdelivery.DefaultScheduleSeconds.
	ScheduleSeconds []int
	// WindowAttempts bounds the attempts in flight to one endpoint
	// (--webhook-window); 0: webhookdelivery.DefaultWindowAttempts, at most
	// webhookdelivery.MaxWindowAttempts.
	WindowAttempts int
}

// Dispatcher is the fan-out loop and the endpoint workers of one engine.
type Dispatcher struct {
	env         *core.Env
	sender      WebhookSender
	schedule    []int
	windowLimit int           // the largest window of an endpoint
	sem         chan struct{} // a slot per attempt in flight, webhookConcurrency in all
	nudge       chan struct{}
	workers     sync.Map // endpoint id -> *endpointWorker
	stop        chan struct{}
	wg          sync.WaitGroup
	started     atomic.Bool
	// createdUpTo is the creation instant (Unix nanoseconds) of the newest
	// delivery the fan-out wrote. A delivery is due from its creation, and
	// a creation instant can run a few nanoseconds ahead of the clock (two
	// creations in one reading of it get distinct instants), so the workers
	// take every delivery created up to here as due, whatever the clock.
	createdUpTo atomic.Int64
}

// endpointWorker owns one endpoint's deliveries.
type endpointWorker struct {
	d        *Dispatcher
	id       string
	endpoint atomic.Pointer[core.WebhookEndpoint]
	wake     chan struct{}
	retry    chan retryRequest
	results  chan *attempt // the answers of the attempts in flight (at most a window of them)
	// addedBelow is the lowest due time (Unix nanoseconds) of the entries
	// the fan-out added to the endpoint's due index since the worker last
	// looked (math.MaxInt64: none); see scanFrom.
	addedBelow atomic.Int64
	// pending and retrying count the endpoint's undelivered deliveries by
	// status, for the metrics: set from the undelivered index at Start,
	// then moved after each batch that changes a status is durable.
	pending, retrying atomic.Int64

	// The rest is the worker's own: only its goroutine (or Step's caller)
	// touches it.

	// window is how many attempts may be in flight now, 1 to the
	// dispatcher's windowLimit; it starts at one.
	window int
	// inFlight holds each delivery from the start of its attempt until
	// the attempt's record is durable, by delivery id: none is started
	// twice, and the group waiting for its commit counts in the window.
	inFlight map[string]*attempt
	// running counts the attempts of inFlight whose answer has not come.
	running int
	// answered are the attempts answered and not recorded yet.
	answered []*attempt
	// scanFrom is a due time (Unix nanoseconds) below which the endpoint's
	// due index holds no entry, where its scans start. After a burst the
	// start of the index is thousands of deleted entries, which a scan
	// from the start would step over one by one, every time, until a
	// compaction drops them. A scan moves scanFrom up to the first entry
	// it finds; whoever adds an entry below it lowers it: the worker for
	// retries and manual retries, the fan-out (through addedBelow) for new
	// deliveries.
	scanFrom int64
	// opened is the endpoint's signing secret, opened once rather than
	// decrypted for every attempt.
	opened openedSecret
}

// attempt is one attempt of a delivery, from its start to its record.
type attempt struct {
	due         []byte   // the due entry (wq/) it was started from
	dl          Delivery // the delivery as read at the start
	requestedAt time.Time
	res         webhookdelivery.Attempt // set by the attempt's goroutine before it sends the attempt back
}

func newWorker(d *Dispatcher, id string) *endpointWorker {
	w := &endpointWorker{d: d, id: id, wake: make(chan struct{}, 1), retry: make(chan retryRequest, workerRetryQueue),
		results: make(chan *attempt, webhookdelivery.MaxWindowAttempts), window: 1, inFlight: map[string]*attempt{}}
	w.addedBelow.Store(math.MaxInt64)
	return w
}

// added lowers the worker's scanFrom to at, the due time of an entry
// added to its due index: the worker calls it for its own entries, the
// fan-out through addedBelow.
func (w *endpointWorker) added(at int64) {
	w.scanFrom = min(w.scanFrom, at)
}

// fannedOut tells the worker, from the fan-out's goroutine, of an entry
// due at at that the fan-out added (durably) to its due index.
func (w *endpointWorker) fannedOut(at int64) {
	for {
		cur := w.addedBelow.Load()
		if at >= cur || w.addedBelow.CompareAndSwap(cur, at) {
			return
		}
	}
}

// openedSecret is a signing secret and the sealed bytes it was opened from.
type openedSecret struct {
	sealed []byte
	secret string
}

// signingSecret is ep's signing secret: the one opened before when ep
// carries the same sealed bytes, else opened now. An endpoint published
// with another sealed secret (a rotation, an update of the endpoint) is
// opened again; the cache holds one secret, the endpoint's current one.
func (w *endpointWorker) signingSecret(ep *core.WebhookEndpoint) (string, bool) {
	if w.opened.sealed != nil && bytes.Equal(w.opened.sealed, ep.SecretSealed) {
		return w.opened.secret, true
	}
	secret, ok := w.d.env.Secrets.OpenWebhookSecret(ep)
	if !ok {
		return "", false
	}
	w.opened = openedSecret{sealed: bytes.Clone(ep.SecretSealed), secret: secret}
	return secret, true
}

// moved moves one delivery's count from status from to status to (a
// status outside pending and retrying counts nowhere).
func (w *endpointWorker) moved(from, to string) {
	if from == to {
		return
	}
	if c := w.count(from); c != nil {
		c.Add(-1)
	}
	if c := w.count(to); c != nil {
		c.Add(1)
	}
}

func (w *endpointWorker) count(status string) *atomic.Int64 {
	switch status {
	case DeliveryPending:
		return &w.pending
	case DeliveryRetrying:
		return &w.retrying
	}
	return nil
}

type retryRequest struct {
	deliveryID string
	answer     chan core.Reply
}

// New is the dispatcher of env's outbox; it delivers nothing before Start.
func New(env *core.Env) *Dispatcher {
	return &Dispatcher{env: env, sem: make(chan struct{}, webhookConcurrency), nudge: make(chan struct{}, 1), stop: make(chan struct{})}
}

// Close stops the fan-out loop and every worker, and waits for them.
func (d *Dispatcher) Close() {
	select {
	case <-d.stop:
	default:
		close(d.stop)
	}
	d.wg.Wait()
}

// EnsureWorkers gives every enabled endpoint a worker and updates the
// endpoint each worker sees (a disabled endpoint's worker idles).
func (d *Dispatcher) EnsureWorkers(eps []*core.WebhookEndpoint) {
	for _, ep := range eps {
		v, loaded := d.workers.Load(ep.ID)
		if !loaded {
			v, loaded = d.workers.LoadOrStore(ep.ID, newWorker(d, ep.ID))
		}
		w := v.(*endpointWorker)
		w.endpoint.Store(ep)
		if !loaded && d.started.Load() {
			d.startWorker(w)
		}
	}
}

func (d *Dispatcher) startWorker(w *endpointWorker) {
	d.wg.Add(1)
	go w.run()
}

// IdleWorkers tells the workers of disabled endpoints: each idles from
// then on.
func (d *Dispatcher) IdleWorkers(eps []*core.WebhookEndpoint) {
	for _, ep := range eps {
		if v, ok := d.workers.Load(ep.ID); ok {
			v.(*endpointWorker).endpoint.Store(ep)
		}
	}
}

// nudgeFanout wakes the fan-out loop (events were written to the outbox).
func (d *Dispatcher) nudgeFanout() {
	select {
	case d.nudge <- struct{}{}:
	default:
	}
}

func (d *Dispatcher) fanoutLoop() {
	defer d.wg.Done()
	t := time.NewTicker(fanoutIntervalMillis * time.Millisecond)
	defer t.Stop()
	for {
		// At once at start (what the outbox held when the process
		// stopped), then every interval.
		for _, more := d.fanout(); more; _, more = d.fanout() {
		}
		select {
		case <-d.stop:
			return
		case <-t.C:
		case <-d.nudge:
		}
	}
}

// writesPerDelivery are the records a new delivery writes: wd/, wi/, wq/
// and wu/.
const writesPerDelivery = 4

// fanout moves up to fanoutBatchEvents outbox events into deliveries, in
// one durable batch, and returns how many it moved and whether more may be
// waiting (it stopped at fanoutBatchEvents, or at the store's limit on a
// batch's writes, Storage.MaxBatchWrites: an event's deliveries are never
// split over two batches).
func (d *Dispatcher) fanout() (moved int, more bool) {
	env := d.env
	b := env.Store.NewBatch()
	n := 0
	writes, maxWrites := 0, env.Store.MaxBatchWrites()
	full := false
	created := map[string]int{}      // deliveries created, by endpoint
	lowest := map[string]time.Time{} // the first (lowest) due time added to each endpoint's due index
	var newest time.Time
	scanned := fanoutBatchEvents
	if env.Clustered {
		// The outbox is shared: other nodes' events are passed over.
		scanned = clusterOutboxScanEvents
	}
	_ = env.Store.Scan([]byte(persistence.PrefixOutbox), scanned, func(key, value []byte) bool {
		if n == fanoutBatchEvents {
			return false
		}
		var ev core.OutboxEvent
		var subscribed []*core.WebhookEndpoint
		if json.Unmarshal(value, &ev) == nil { // unreadable: nothing can deliver it
			gate, ok := env.Registry.ProjectGate(ev.ProjectID)
			if env.Clustered && (!ok || gate.Endpoints.Load() == nil) {
				// Another node's project (or one this node places later),
				// or one being placed here whose recovery has not
				// published its endpoints yet: its owner fans the event
				// out once it knows them. Read as none, the event would be
				// dropped.
				return true
			}
			if ok {
				if eps := gate.Endpoints.Load(); eps != nil {
					for _, ep := range *eps {
						if ep.Subscribed(ev.Type) {
							subscribed = append(subscribed, ep)
						}
					}
				}
			}
		}
		needed := 1 + writesPerDelivery*len(subscribed)
		if maxWrites > 0 && n > 0 && writes+needed > maxWrites {
			full = true
			return false // the next batch takes it
		}
		writes += needed
		n++
		b.Delete(append([]byte(nil), key...))
		for _, ep := range subscribed {
			// Due from its creation: creation instants are distinct and
			// rise in the order of this scan (the outbox's), so an
			// endpoint's first attempts are due in outbox order, never
			// tied (a tie would fall back to the random delivery id).
			at := env.CreatedAt()
			newest = at
			dl := Delivery{ID: ids.New(ids.Delivery), EndpointID: ep.ID, EventID: ev.ID, EventType: ev.Type,
				Status: DeliveryPending, NextAttemptAt: at, CreatedAt: at, Event: append(json.RawMessage(nil), value...)}
			b.Set(DeliveryKey(ep.ID, dl.ID), core.MustJSON(dl))
			b.Set(persistence.IndexKey(persistence.PrefixDelIdx, ep.ID, dl.CreatedAt.UnixNano(), dl.ID), []byte(dl.ID))
			b.Set(dueKey(ep.ID, at, dl.ID), []byte(dl.ID))
			b.Set(undeliveredKey(ep.ID, dl.CreatedAt, dl.ID), []byte(DeliveryPending))
			if created[ep.ID] == 0 {
				lowest[ep.ID] = at
			}
			created[ep.ID]++
		}
		return true
	})
	if n == 0 {
		b.Discard()
		return 0, false
	}
	if err := env.Store.CommitAndWait(b); err != nil {
		// Retried next tick: the outbox entries are still there.
		slog.Error("webhook fan-out: writing deliveries failed", "events", n, "error", err)
		return 0, false
	}
	if !newest.IsZero() {
		d.createdUpTo.Store(max(d.createdUpTo.Load(), newest.UnixNano()))
	}
	for id, count := range created {
		env.Metrics.Webhooks.Created(count)
		if v, ok := d.workers.Load(id); ok {
			w := v.(*endpointWorker)
			w.pending.Add(int64(count))
			w.fannedOut(lowest[id].UnixNano()) // before the poke: the scan it causes starts low enough
			w.poke()
		}
	}
	return n, full || n == fanoutBatchEvents
}

// dueBy is the due time (Unix nanoseconds) up to which deliveries are
// due: now by the injected clock, or the newest delivery's creation when
// that is later.
func (d *Dispatcher) dueBy() int64 {
	return max(d.env.Clock.Now().UnixNano(), d.createdUpTo.Load())
}

func (w *endpointWorker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *endpointWorker) run() {
	defer w.d.wg.Done()
	t := time.NewTicker(workerTickMillis * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-w.d.stop:
			w.finish()
			return
		case <-t.C:
		case <-w.wake:
		case r := <-w.retry:
			r.answer <- w.answerRetry(r.deliveryID)
		case a := <-w.results:
			w.received(a)
		}
		w.step()
	}
}

// step records every attempt answered so far, in one batch, then starts
// due deliveries while the window has room. After a failed record it
// starts nothing until the next wake-up: the store is failing.
func (w *endpointWorker) step() {
	w.collect()
	if w.record() == nil {
		w.fill()
	}
}

// drive is step run to completion on the caller's goroutine (Step): it
// attempts everything due, the window's worth at a time, records each
// group, and returns once no attempt is in flight.
func (w *endpointWorker) drive() {
	for {
		if w.record() == nil {
			w.fill()
		}
		if w.running == 0 {
			return
		}
		w.received(<-w.results)
		w.collect()
	}
}

// finish waits for the attempts in flight and records them (Close).
func (w *endpointWorker) finish() {
	for w.running > 0 {
		w.received(<-w.results)
	}
	_ = w.record()
}

// received takes an attempt's answer: the window grows by one after a
// success and halves after a failure (webhookdelivery.NextWindow), and the
// attempt waits for the next group commit.
func (w *endpointWorker) received(a *attempt) {
	w.running--
	w.answered = append(w.answered, a)
	w.window = webhookdelivery.NextWindow(w.window, w.d.windowLimit, a.res.Success)
	w.d.env.Metrics.Webhooks.Attempt(a.res.Result(), float64(a.res.LatencyMillis)/1000)
}

// collect takes every answer that is already back, without waiting.
func (w *endpointWorker) collect() {
	for {
		select {
		case a := <-w.results:
			w.received(a)
		default:
			return
		}
	}
}

// dueEntry is an entry of the due index (wq/) and the delivery it names.
type dueEntry struct {
	key []byte
	id  string
}

// fill starts due deliveries, oldest due first, while the window has
// room: the next steps of a full one follow at once, not at the next
// wake-up. A delivery in flight (started, or answered and waiting for
// its record) is never started twice. A disabled endpoint starts nothing;
// its attempts in flight finish and are recorded.
func (w *endpointWorker) fill() {
	ep := w.endpoint.Load()
	if ep == nil || ep.Status != core.EndpointEnabled {
		return
	}
	for {
		room := w.window - len(w.inFlight)
		if room <= 0 {
			return
		}
		due := w.dueEntries(room)
		for _, e := range due {
			if len(w.inFlight) >= w.window {
				return // answers taken while waiting for a slot shrank it
			}
			if !w.start(ep, e) {
				return
			}
		}
		if len(due) < room {
			return // nothing more is due
		}
		// Some entries were stale and dropped: look again.
	}
}

// dueEntries are up to n entries of the endpoint's due index, in due
// order, due by now and not in flight.
func (w *endpointWorker) dueEntries(n int) []dueEntry {
	prefix := persistence.IndexPrefix(persistence.PrefixDelDue, w.id)
	w.added(w.addedBelow.Swap(math.MaxInt64))
	from := binary.BigEndian.AppendUint64(bytes.Clone(prefix), uint64(max(w.scanFrom, 0)))
	dueBy := w.d.dueBy()
	var out []dueEntry
	firstAt := int64(math.MaxInt64) // no entry found: there is none
	err := w.d.env.Store.ScanFrom(prefix, from, 0, func(key, value []byte) bool {
		at := int64(binary.BigEndian.Uint64(key[len(prefix):]))
		firstAt = min(firstAt, at)
		if at > dueBy {
			return false
		}
		if _, busy := w.inFlight[string(value)]; busy {
			return true
		}
		out = append(out, dueEntry{key: bytes.Clone(key), id: string(value)})
		return len(out) < n
	})
	if err != nil {
		slog.Error("webhook worker: reading the due deliveries failed", "endpoint_id", w.id, "error", err)
		return out
	}
	w.scanFrom = firstAt
	return out
}

// start begins one attempt of the delivery of e: it takes a global slot,
// reads the delivery (after the slot: a manual retry answered while
// waiting may have moved it), signs the request and sends it on a
// goroutine of its own, whose answer comes back on results. It returns
// false when the worker should start nothing more now: the dispatcher is
// stopping, or the store or the secret cannot be read.
func (w *endpointWorker) start(ep *core.WebhookEndpoint, e dueEntry) bool {
	if !w.acquire() {
		return false
	}
	started := false
	defer func() {
		if !started {
			<-w.d.sem
		}
	}()
	env := w.d.env
	raw, err := env.Store.Get(DeliveryKey(w.id, e.id))
	if err != nil && !errors.Is(err, persistence.ErrNotFound) {
		slog.Error("webhook worker: reading a delivery failed", "endpoint_id", w.id, "delivery_id", e.id, "error", err)
		return false
	}
	var dl Delivery
	if err == nil && json.Unmarshal(raw, &dl) != nil {
		slog.Error("webhook worker: a delivery record does not decode; it is not attempted", "endpoint_id", w.id, "delivery_id", e.id)
		dl = Delivery{}
	}
	if (dl.Status != DeliveryPending && dl.Status != DeliveryRetrying) || !bytes.Equal(e.key, dueKey(w.id, dl.NextAttemptAt, dl.ID)) {
		// A stale entry: a manual retry moved the delivery after the scan
		// (its own due entry is the one to follow), or no delivery can be
		// attempted from it.
		b := env.Store.NewBatch()
		b.Delete(e.key)
		if err := env.Store.CommitAndWait(b); err != nil {
			slog.Error("webhook worker: dropping a stale due entry failed", "endpoint_id", w.id, "delivery_id", e.id, "error", err)
			return false
		}
		return true
	}
	secret, ok := w.signingSecret(ep)
	if !ok {
		slog.Error("webhook worker: the endpoint's signing secret cannot be opened", "endpoint_id", w.id)
		return false
	}
	a := &attempt{due: e.key, dl: dl, requestedAt: env.Clock.Now()}
	headers := webhookdelivery.Headers(dl.EventID, a.requestedAt.Unix(), dl.Event, secret)
	w.inFlight[dl.ID] = a
	w.running++
	started = true
	go func() {
		a.res = w.d.sender.Deliver(context.Background(), ep.URL, headers, dl.Event)
		<-w.d.sem
		w.results <- a
	}()
	return true
}

// acquire takes one of the global slots (webhookConcurrency), answering
// manual retries and taking answers while it waits; false when the
// dispatcher stops first.
func (w *endpointWorker) acquire() bool {
	for {
		select {
		case w.d.sem <- struct{}{}:
			return true
		case <-w.d.stop:
			return false
		case r := <-w.retry:
			r.answer <- w.answerRetry(r.deliveryID)
		case a := <-w.results:
			w.received(a)
		}
	}
}

// record writes the records of the answered attempts in one batch and
// waits for it to be durable: one fsync for the group, not one per
// attempt. A crash before then loses the records, and those attempts are
// made again after the restart (delivery is at least once); at most a
// window of them, as nothing more is started while they wait. When the
// batch fails, the deliveries stay due as they were and are attempted
// again.
func (w *endpointWorker) record() error {
	if len(w.answered) == 0 {
		return nil
	}
	env := w.d.env
	b := env.Store.NewBatch()
	before := make([]string, len(w.answered))
	for i, a := range w.answered {
		before[i] = a.dl.Status
		w.apply(b, a)
	}
	err := env.Store.CommitAndWait(b)
	if err != nil {
		slog.Error("webhook worker: recording attempts failed", "endpoint_id", w.id, "attempts", len(w.answered), "error", err)
	}
	for i, a := range w.answered {
		delete(w.inFlight, a.dl.ID)
		if err != nil {
			continue
		}
		w.moved(before[i], a.dl.Status)
		if a.dl.Status == DeliveryDead {
			env.Metrics.Webhooks.Dead()
		}
	}
	clear(w.answered)
	w.answered = w.answered[:0]
	return err
}

// apply adds to b the delivery's record after a's outcome: the attempt
// appended, the due entry it was started from deleted, and the next one
// (a retry) or none.
func (w *endpointWorker) apply(b *persistence.Batch, a *attempt) {
	dl, res := &a.dl, a.res
	dl.AttemptCount++
	dl.ScheduleStep++
	att := DeliveryAttempt{Attempt: dl.AttemptCount, RequestedAt: core.Timestamp(a.requestedAt), ResponseStatus: res.StatusCode,
		LatencyMillis: res.LatencyMillis, ResponseBody: res.ResponseBody}
	b.Delete(a.due)
	undelivered := undeliveredKey(w.id, dl.CreatedAt, dl.ID)
	if res.Success {
		dl.Status = DeliverySucceeded
		b.Delete(undelivered)
	} else {
		msg := res.Err
		att.Error = &msg
		if next, more := webhookdelivery.NextAttemptAt(dl.ScheduleStep, a.requestedAt, w.d.schedule); more {
			dl.Status = DeliveryRetrying
			dl.NextAttemptAt = next
			att.NextAttemptAt = core.OptionalTimestamp(next)
			b.Set(dueKey(w.id, next, dl.ID), []byte(dl.ID))
			w.added(next.UnixNano())
			b.Set(undelivered, []byte(DeliveryRetrying))
		} else {
			dl.Status = DeliveryDead
			dl.ScheduleStep = math.MaxInt32 / 2 // a manual retry after death gets one attempt, then dead again
			b.Delete(undelivered)
		}
	}
	dl.Attempts = append(dl.Attempts, att)
	if len(dl.Attempts) > maxAttemptsKept {
		dl.Attempts = dl.Attempts[len(dl.Attempts)-maxAttemptsKept:]
	}
	b.Set(DeliveryKey(w.id, dl.ID), core.MustJSON(dl))
}

// answerRetry applies a manual retry. A delivery in flight is answered
// with its state as it is: it is being attempted now (so POST …/retry
// never waits for a slow receiver).
func (w *endpointWorker) answerRetry(deliveryID string) core.Reply {
	if _, busy := w.inFlight[deliveryID]; busy {
		return w.beingAttempted(deliveryID)
	}
	return w.requeue(deliveryID)
}

// beingAttempted answers a manual retry of a delivery in flight.
func (w *endpointWorker) beingAttempted(deliveryID string) core.Reply {
	raw, err := w.d.env.Store.Get(DeliveryKey(w.id, deliveryID))
	if err != nil {
		return core.Reply{Err: ErrDeliveryNotFound(deliveryID)}
	}
	var dl Delivery
	if json.Unmarshal(raw, &dl) != nil {
		return core.Reply{Err: apierr.New(apierr.Internal, "unreadable delivery")}
	}
	return core.Reply{Status: 200, Body: core.MustJSON(dl.View())}
}

// requeue makes a dead or retrying delivery due now (manual retry).
func (w *endpointWorker) requeue(deliveryID string) core.Reply {
	env := w.d.env
	raw, err := env.Store.Get(DeliveryKey(w.id, deliveryID))
	if err != nil {
		return core.Reply{Err: ErrDeliveryNotFound(deliveryID)}
	}
	var dl Delivery
	if json.Unmarshal(raw, &dl) != nil {
		return core.Reply{Err: apierr.New(apierr.Internal, "unreadable delivery")}
	}
	switch dl.Status {
	case DeliverySucceeded:
		return core.Reply{Err: apierr.New(apierr.Conflict, "delivery %s already succeeded; there is nothing to redeliver", deliveryID)}
	case DeliveryPending:
		return core.Reply{Status: 200, Body: core.MustJSON(dl.View())} // already due
	}
	now := env.Clock.Now()
	b := env.Store.NewBatch()
	if dl.Status == DeliveryRetrying {
		b.Delete(dueKey(w.id, dl.NextAttemptAt, dl.ID))
	}
	before := dl.Status
	dl.Status = DeliveryRetrying
	dl.NextAttemptAt = now
	b.Set(dueKey(w.id, now, dl.ID), []byte(dl.ID))
	w.added(now.UnixNano())
	b.Set(undeliveredKey(w.id, dl.CreatedAt, dl.ID), []byte(DeliveryRetrying))
	b.Set(DeliveryKey(w.id, dl.ID), core.MustJSON(dl))
	if err := env.Store.CommitAndWait(b); err != nil {
		return core.Reply{Err: apierr.New(apierr.Internal, "could not requeue the delivery")}
	}
	w.moved(before, dl.Status)
	return core.Reply{Status: 200, Body: core.MustJSON(dl.View())}
}

// ErrDeliveryNotFound is the 404 of a delivery the endpoint does not have.
func ErrDeliveryNotFound(id string) *apierr.Error {
	return apierr.New(apierr.InvalidRequest, "no delivery %q for this endpoint", id).WithStatus(404).WithDetails("field", "delivery_id")
}

// Start starts delivery with sender and settings: the fan-out loop and a
// worker for every endpoint registered so far. Without it events stay in
// the outbox.
func (d *Dispatcher) Start(sender WebhookSender, settings Settings) {
	d.Drive(sender, settings)
	// The backlog gauges' count (and, on a store written before their
	// index, the index itself: a durable write) belong to a serving
	// dispatcher only; the crash simulation drives one without them.
	d.countBacklog()
	d.env.Metrics.Webhooks.SetSources(d.backlog, d.oldestUndeliveredAgeSeconds)
	d.started.Store(true)
	d.wg.Add(1)
	go d.fanoutLoop()
	d.workers.Range(func(_, v any) bool {
		d.startWorker(v.(*endpointWorker))
		return true
	})
}

// Drive gives the dispatcher its sender and settings (as Start) but
// starts nothing: its caller runs delivery with Step. It is for the crash
// simulation (package sim), which delivers between commands, in an order
// a seed replays; production calls Start.
func (d *Dispatcher) Drive(sender WebhookSender, settings Settings) {
	d.sender = sender
	d.schedule = settings.ScheduleSeconds
	if d.schedule == nil {
		d.schedule = append([]int(nil), webhookdelivery.DefaultScheduleSeconds...)
	}
	d.windowLimit = webhookdelivery.WindowLimit(settings.WindowAttempts)
}

// Step runs on the caller's goroutine what the loops of Start run on
// theirs: one fan-out step, then each endpoint's worker, in endpoint id
// order, until it has attempted and recorded everything due by now (its
// window of attempts in flight at a time, on goroutines of their own that
// Step waits for; each group recorded in one batch). It returns how many
// outbox events the fan-out moved. Only for a dispatcher given Drive.
func (d *Dispatcher) Step() int {
	n, _ := d.fanout()
	var workers []*endpointWorker
	d.workers.Range(func(_, v any) bool {
		workers = append(workers, v.(*endpointWorker))
		return true
	})
	slices.SortFunc(workers, func(a, b *endpointWorker) int { return strings.Compare(a.id, b.id) })
	for _, w := range workers {
		w.drive()
	}
	return n
}

// Retry makes a dead or retrying delivery of an enabled endpoint due now
// (POST .../deliveries/{delivery_id}/retry). The endpoint's worker applies
// it, so no two attempts of one delivery race; the answer is the delivery
// as it then is.
func (d *Dispatcher) Retry(endpointID, deliveryID string) core.Reply {
	v, ok := d.workers.Load(endpointID)
	if !ok || !d.started.Load() {
		return core.Reply{Err: apierr.New(apierr.Conflict, "webhook endpoint %s is disabled; its deliveries cannot be retried", endpointID)}
	}
	w := v.(*endpointWorker)
	if ep := w.endpoint.Load(); ep == nil || ep.Status != core.EndpointEnabled {
		return core.Reply{Err: apierr.New(apierr.Conflict, "webhook endpoint %s is disabled; its deliveries cannot be retried", endpointID)}
	}
	ch := make(chan core.Reply, 1)
	select {
	case w.retry <- retryRequest{deliveryID: deliveryID, answer: ch}:
	default:
		return core.Reply{Err: apierr.New(apierr.RateLimited, "too many retries queued for this endpoint; try again shortly")}
	}
	r := <-ch
	if r.Err == nil {
		w.poke()
	}
	return r
}

// countBacklog sets each worker's counts from the undelivered index (built
// first when the store predates it). Every worker that exists now was made
// at recovery; a worker made later is a new endpoint's, with none.
func (d *Dispatcher) countBacklog() {
	env := d.env
	if _, err := env.Store.Get(undeliveredIndexBuilt); errors.Is(err, persistence.ErrNotFound) {
		if err := d.buildUndeliveredIndex(); err != nil {
			// The metrics then miss the older deliveries; delivery itself
			// does not use the index.
			slog.Error("webhook dispatcher: building the undelivered index failed", "error", err)
		}
	}
	type counts struct{ pending, retrying int64 }
	byEndpoint := map[string]*counts{}
	prefix := []byte(persistence.PrefixUndelivered)
	err := env.Store.Scan(prefix, 0, func(key, value []byte) bool {
		rest := key[len(prefix):]
		slash := bytes.IndexByte(rest, '/')
		if slash < 0 {
			return true
		}
		c := byEndpoint[string(rest[:slash])]
		if c == nil {
			c = &counts{}
			byEndpoint[string(rest[:slash])] = c
		}
		switch string(value) {
		case DeliveryPending:
			c.pending++
		case DeliveryRetrying:
			c.retrying++
		}
		return true
	})
	if err != nil {
		slog.Error("webhook dispatcher: counting the backlog failed", "error", err)
	}
	d.workers.Range(func(id, v any) bool {
		w := v.(*endpointWorker)
		if c := byEndpoint[id.(string)]; c != nil {
			w.pending.Store(c.pending)
			w.retrying.Store(c.retrying)
		}
		return true
	})
}

// buildUndeliveredIndex indexes every pending and retrying delivery (each
// has a due entry, wq/) and marks the index built, in batches of
// undeliveredIndexBatch, or of fewer on a store that takes fewer writes in
// a batch (Storage.MaxBatchWrites; one is kept for the mark).
func (d *Dispatcher) buildUndeliveredIndex() error {
	env := d.env
	perBatch := undeliveredIndexBatch
	if m := env.Store.MaxBatchWrites(); m > 0 {
		perBatch = max(1, min(perBatch, m-1))
	}
	b := env.Store.NewBatch()
	n := 0
	var scanErr error
	prefix := []byte(persistence.PrefixDelDue)
	err := env.Store.Scan(prefix, 0, func(key, value []byte) bool {
		rest := key[len(prefix):]
		slash := bytes.IndexByte(rest, '/')
		if slash < 0 {
			return true
		}
		raw, err := env.Store.Get(DeliveryKey(string(rest[:slash]), string(value)))
		if err != nil {
			return true // a stale due entry
		}
		var dl Delivery
		if json.Unmarshal(raw, &dl) != nil || (dl.Status != DeliveryPending && dl.Status != DeliveryRetrying) {
			return true
		}
		b.Set(undeliveredKey(dl.EndpointID, dl.CreatedAt, dl.ID), []byte(dl.Status))
		if n++; n%perBatch == 0 {
			if scanErr = env.Store.CommitAndWait(b); scanErr != nil {
				return false
			}
			b = env.Store.NewBatch()
		}
		return true
	})
	if scanErr != nil {
		return scanErr
	}
	if err != nil {
		b.Discard()
		return err
	}
	b.Set(undeliveredIndexBuilt, nil)
	return env.Store.CommitAndWait(b)
}

// backlog sums the undelivered deliveries of the enabled endpoints' workers
// (a disabled endpoint's are never attempted again).
func (d *Dispatcher) backlog() metrics.Backlog {
	var b metrics.Backlog
	d.workers.Range(func(_, v any) bool {
		w := v.(*endpointWorker)
		if ep := w.endpoint.Load(); ep != nil && ep.Status == core.EndpointEnabled {
			b.Pending += w.pending.Load()
			b.Retrying += w.retrying.Load()
		}
		return true
	})
	return b
}

// oldestUndeliveredAgeSeconds is the age, by the injected clock, of the
// oldest event not delivered yet: the oldest outbox event (not fanned out
// yet) or the oldest undelivered delivery of an enabled endpoint (the first
// entry of its undelivered index); 0 when there is none. One seek per
// enabled endpoint.
func (d *Dispatcher) oldestUndeliveredAgeSeconds() float64 {
	env := d.env
	oldest := int64(math.MaxInt64)
	first := func(prefix []byte) {
		_ = env.Store.Scan(prefix, 1, func(key, _ []byte) bool {
			if len(key) >= len(prefix)+8 {
				oldest = min(oldest, int64(binary.BigEndian.Uint64(key[len(prefix):])))
			}
			return false
		})
	}
	first([]byte(persistence.PrefixOutbox))
	d.workers.Range(func(id, v any) bool {
		if ep := v.(*endpointWorker).endpoint.Load(); ep != nil && ep.Status == core.EndpointEnabled {
			first(persistence.IndexPrefix(persistence.PrefixUndelivered, id.(string)))
		}
		return true
	})
	if oldest == math.MaxInt64 {
		return 0
	}
	return max(env.Clock.Now().Sub(time.Unix(0, oldest)).Seconds(), 0)
}
