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
// event's project and deletes the outbox entry, in one durable batch. Each
// endpoint has one worker goroutine that owns that endpoint's deliveries:
// it attempts those due (by the injected clock) one at a time, in due
// order, and records each attempt durably. A slow or dead endpoint therefore
// only ever delays itself; the number of attempts in flight over all
// endpoints is bounded by webhookConcurrency.
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

// Named bounds of the Dispatcher.
const (
	webhookConcurrency      = 32  // attempts in flight over all endpoints
	fanoutBatchEvents       = 256 // outbox events moved per fan-out step
	dueBatchDeliveries      = 16  // deliveries one worker step looks at
	maxAttemptsKept         = 32  // attempts a delivery record keeps (the newest)
	workerRetryQueue        = 64  // manual retry requests waiting per endpoint
	fanoutIntervalMillis    = 200 // how often the outbox is polled (also nudged)
	workerTickMillis        = 1000
	maxStoredResponseBodies = 4096 // bytes of a receiver's response kept per attempt (the client's capture bound)
	undeliveredIndexBatch   = 1024 // deliveries indexed per batch when building the undelivered index
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

// Dispatcher is the fan-out loop and the endpoint workers of one engine.
type Dispatcher struct {
	env      *core.Env
	sender   WebhookSender
	schedule []int
	sem      chan struct{}
	nudge    chan struct{}
	workers  sync.Map // endpoint id -> *endpointWorker
	stop     chan struct{}
	wg       sync.WaitGroup
	started  atomic.Bool
}

// endpointWorker owns one endpoint's deliveries.
type endpointWorker struct {
	d        *Dispatcher
	id       string
	endpoint atomic.Pointer[core.WebhookEndpoint]
	wake     chan struct{}
	retry    chan retryRequest
	// pending and retrying count the endpoint's undelivered deliveries by
	// status, for the metrics: set from the undelivered index at Start,
	// then moved after each batch that changes a status is durable.
	pending, retrying atomic.Int64
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
		v, loaded := d.workers.LoadOrStore(ep.ID, &endpointWorker{d: d, id: ep.ID, wake: make(chan struct{}, 1), retry: make(chan retryRequest, workerRetryQueue)})
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
		select {
		case <-d.stop:
			return
		case <-t.C:
		case <-d.nudge:
		}
		for _, more := d.fanout(); more; _, more = d.fanout() {
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
	created := map[string]int{} // deliveries created, by endpoint
	now := env.Clock.Now()
	_ = env.Store.Scan([]byte(persistence.PrefixOutbox), fanoutBatchEvents, func(key, value []byte) bool {
		var ev core.OutboxEvent
		var subscribed []*core.WebhookEndpoint
		if json.Unmarshal(value, &ev) == nil { // unreadable: nothing can deliver it
			if gate, ok := env.Registry.ProjectGate(ev.ProjectID); ok {
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
			dl := Delivery{ID: ids.New(ids.Delivery), EndpointID: ep.ID, EventID: ev.ID, EventType: ev.Type,
				Status: DeliveryPending, NextAttemptAt: now, CreatedAt: env.CreatedAt(), Event: append(json.RawMessage(nil), value...)}
			b.Set(DeliveryKey(ep.ID, dl.ID), core.MustJSON(dl))
			b.Set(persistence.IndexKey(persistence.PrefixDelIdx, ep.ID, dl.CreatedAt.UnixNano(), dl.ID), []byte(dl.ID))
			b.Set(dueKey(ep.ID, now, dl.ID), []byte(dl.ID))
			b.Set(undeliveredKey(ep.ID, dl.CreatedAt, dl.ID), []byte(DeliveryPending))
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
	for id, count := range created {
		env.Metrics.Webhooks.Created(count)
		if v, ok := d.workers.Load(id); ok {
			w := v.(*endpointWorker)
			w.pending.Add(int64(count))
			w.poke()
		}
	}
	return n, full || n == fanoutBatchEvents
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
			return
		case <-t.C:
		case <-w.wake:
		case r := <-w.retry:
			r.answer <- w.requeue(r.deliveryID)
		}
		w.deliverDue()
	}
}

// deliverDue attempts, oldest due first, the deliveries due by now.
func (w *endpointWorker) deliverDue() {
	ep := w.endpoint.Load()
	if ep == nil || ep.Status != core.EndpointEnabled {
		return
	}
	env := w.d.env
	now := env.Clock.Now()
	prefix := persistence.IndexPrefix(persistence.PrefixDelDue, w.id)
	type due struct{ key, id []byte }
	var batch []due
	_ = env.Store.Scan(prefix, dueBatchDeliveries, func(key, value []byte) bool {
		at := int64(binary.BigEndian.Uint64(key[len(prefix):]))
		if at > now.UnixNano() {
			return false
		}
		batch = append(batch, due{append([]byte(nil), key...), append([]byte(nil), value...)})
		return true
	})
	for _, d := range batch {
		select {
		case <-w.d.stop:
			return
		default:
		}
		w.attempt(ep, d.key, string(d.id))
	}
}

// attempt makes one delivery attempt and records it durably.
func (w *endpointWorker) attempt(ep *core.WebhookEndpoint, due []byte, deliveryID string) {
	env := w.d.env
	raw, err := env.Store.Get(DeliveryKey(w.id, deliveryID))
	if err != nil {
		return
	}
	var dl Delivery
	if json.Unmarshal(raw, &dl) != nil {
		return
	}
	if (dl.Status != DeliveryPending && dl.Status != DeliveryRetrying) || !bytes.Equal(due, dueKey(w.id, dl.NextAttemptAt, dl.ID)) {
		// A manual retry moved the delivery after this batch was read: its
		// own due key (if any) is the one to follow.
		b := env.Store.NewBatch()
		b.Delete(due)
		if err := env.Store.CommitAndWait(b); err != nil {
			// The stale entry stays and is looked at again next step.
			slog.Error("webhook worker: dropping a stale due entry failed", "endpoint_id", w.id, "delivery_id", deliveryID, "error", err)
		}
		return
	}
	secret, ok := env.Secrets.OpenWebhookSecret(ep)
	if !ok {
		return
	}
	requestedAt := env.Clock.Now()
	headers := webhookdelivery.Headers(dl.EventID, requestedAt.Unix(), dl.Event, secret)
	done := make(chan webhookdelivery.Attempt, 1)
	go func() {
		w.d.sem <- struct{}{}
		defer func() { <-w.d.sem }()
		done <- w.d.sender.Deliver(context.Background(), ep.URL, headers, dl.Event)
	}()
	res := w.await(done, deliveryID)

	env.Metrics.Webhooks.Attempt(res.Result(), float64(res.LatencyMillis)/1000)

	before := dl.Status
	dl.AttemptCount++
	dl.ScheduleStep++
	att := DeliveryAttempt{Attempt: dl.AttemptCount, RequestedAt: core.Timestamp(requestedAt), ResponseStatus: res.StatusCode,
		LatencyMillis: res.LatencyMillis, ResponseBody: res.ResponseBody}
	b := env.Store.NewBatch()
	b.Delete(due)
	undelivered := undeliveredKey(w.id, dl.CreatedAt, dl.ID)
	if res.Success {
		dl.Status = DeliverySucceeded
		b.Delete(undelivered)
	} else {
		msg := res.Err
		att.Error = &msg
		if next, more := webhookdelivery.NextAttemptAt(dl.ScheduleStep, requestedAt, w.d.schedule); more {
			dl.Status = DeliveryRetrying
			dl.NextAttemptAt = next
			att.NextAttemptAt = core.OptionalTimestamp(next)
			b.Set(dueKey(w.id, next, dl.ID), []byte(dl.ID))
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
	if err := env.Store.CommitAndWait(b); err != nil {
		// Not recorded: the delivery is still due as before and is
		// attempted again (delivery is at least once).
		slog.Error("webhook worker: recording an attempt failed", "endpoint_id", w.id, "delivery_id", dl.ID, "error", err)
		return
	}
	w.moved(before, dl.Status)
	if dl.Status == DeliveryDead {
		env.Metrics.Webhooks.Dead()
	}
}

// await waits for the attempt in flight and meanwhile answers manual retry
// requests, so that POST …/retry never waits for a slow receiver. The
// delivery in flight is answered with its state as is: it is being
// attempted now.
func (w *endpointWorker) await(done <-chan webhookdelivery.Attempt, inFlight string) webhookdelivery.Attempt {
	for {
		select {
		case res := <-done:
			return res
		case r := <-w.retry:
			if r.deliveryID == inFlight {
				r.answer <- w.inFlight(inFlight)
			} else {
				r.answer <- w.requeue(r.deliveryID)
			}
		}
	}
}

// inFlight answers a manual retry of the delivery being attempted.
func (w *endpointWorker) inFlight(deliveryID string) core.Reply {
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

// Start starts delivery with sender and the retry schedule (seconds;
// webhookdelivery.DefaultScheduleSeconds when nil): the fan-out loop and a
// worker for every endpoint registered so far. Without it events stay in
// the outbox.
func (d *Dispatcher) Start(sender WebhookSender, schedule []int) {
	d.Drive(sender, schedule)
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

// Drive gives the dispatcher its sender and retry schedule (as Start)
// but starts nothing: its caller runs delivery with Step. It is for the
// crash simulation (package sim), which delivers on its one goroutine,
// between commands, in an order a seed replays; production calls Start.
func (d *Dispatcher) Drive(sender WebhookSender, schedule []int) {
	d.sender = sender
	d.schedule = schedule
	if d.schedule == nil {
		d.schedule = append([]int(nil), webhookdelivery.DefaultScheduleSeconds...)
	}
}

// Step runs on the caller's goroutine what the loops of Start run on
// theirs: one fan-out step, then one step of each endpoint's worker
// (the deliveries due by now), in endpoint id order. It returns how many
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
		w.deliverDue()
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
