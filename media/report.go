package media

import (
	"sync"
	"sync/atomic"
	"time"

	"rtcd/metrics"
)

// JoinReport says a participant's media session asks to join a room on a
// node (a node that awaits admission holds the socket until the control
// plane answers AdmitSession or CloseSession), or joined it (a node that
// does not). IssuedAt is the session's media token's issue time: the
// control plane admits only a participant's latest session.
//
// A participant already joined on this node that reconnects with a new
// media session (a new connect, so a new SessionID) is reported again with
// the new SessionID and no LeaveReport for the old one: the participant
// never left. A reconnect with the same SessionID is not reported at all.
type JoinReport struct {
	NodeID        string    `json:"node_id"`
	SessionID     string    `json:"session_id"`
	ProjectID     string    `json:"project_id"`
	RoomID        string    `json:"room_id"`
	ParticipantID string    `json:"participant_id"`
	IssuedAt      time.Time `json:"issued_at"`
	At            time.Time `json:"at"`
}

// LeaveReport says a participant's media session ended on a node. Reason is
// one of the Reason constants. At is when the node noticed, so for
// heartbeat_timeout it is up to HeartbeatTimeoutSeconds plus one heartbeat
// check after the client's last frame.
type LeaveReport struct {
	NodeID        string    `json:"node_id"`
	SessionID     string    `json:"session_id"`
	ProjectID     string    `json:"project_id"`
	RoomID        string    `json:"room_id"`
	ParticipantID string    `json:"participant_id"`
	At            time.Time `json:"at"`
	Reason        string    `json:"reason"`
}

// SessionInfo is one media session in a PresenceReport: joined (JoinedAt
// is when it asked to join), or waiting for admission.
type SessionInfo struct {
	SessionID     string    `json:"session_id"`
	ProjectID     string    `json:"project_id"`
	RoomID        string    `json:"room_id"`
	ParticipantID string    `json:"participant_id"`
	IssuedAt      time.Time `json:"issued_at"`
	JoinedAt      time.Time `json:"joined_at"`
}

// PresenceReport is a snapshot of every joined session on a node at At,
// sorted by room then participant, and of the joins it holds waiting for
// the control plane's answer (Pending, sorted by session). The control
// plane's reconciler compares it with its own view to recover joins,
// leaves and answers it missed.
type PresenceReport struct {
	NodeID   string        `json:"node_id"`
	At       time.Time     `json:"at"`
	Sessions []SessionInfo `json:"sessions"`
	Pending  []SessionInfo `json:"pending,omitempty"`
}

// Reporter receives a node's joins and leaves.
//
// The node calls it from its hub goroutine, the one that owns every room, so
// an implementation must not block: no network or disk I/O, no waiting on
// a full channel. Queue the report and return (AsyncReporter and
// HTTPReporter do). Reports of one node arrive in the order they happened;
// a report may still be lost (a full queue, a crash), which is what
// presence snapshots and the reconciler are for.
type Reporter interface {
	Joined(JoinReport)
	Left(LeaveReport)
}

// PresenceReporter is implemented by a Reporter that also takes presence
// snapshots. Node.Run sends one every PresenceIntervalSeconds to a Reporter
// that implements it, through the same ordered path as joins and leaves.
type PresenceReporter interface {
	Presence(PresenceReport)
}

// asyncReporterQueueReports bounds the reports an AsyncReporter holds for
// its receiver. At a few hundred bytes each this is well under a megabyte.
const asyncReporterQueueReports = 4096

// AsyncReporter hands reports to a receiver that may block (an actor
// mailbox, a channel) on its own goroutine, in order, through a bounded
// queue. When the queue is full the report is dropped and counted: the node
// must never wait, and presence snapshots recover what was dropped.
type AsyncReporter struct {
	next      Reporter
	metrics   *metrics.Media // nil counts nothing
	queue     chan func()
	dropped   atomic.Int64
	closing   chan struct{}
	closeOnce sync.Once
	done      chan struct{}
}

// NewAsyncReporter starts an AsyncReporter delivering to next, counting
// the reports it hands on (sent) and drops (failed) into m (nil: none).
// Presence snapshots are passed on when next implements PresenceReporter.
// Call Close to stop it.
func NewAsyncReporter(next Reporter, m *metrics.Media) *AsyncReporter {
	r := &AsyncReporter{
		next:    next,
		metrics: m,
		queue:   make(chan func(), asyncReporterQueueReports),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	go r.loop()
	return r
}

// Joined queues j for the receiver.
func (r *AsyncReporter) Joined(j JoinReport) { r.enqueue(ReportJoined, func() { r.next.Joined(j) }) }

// Left queues l for the receiver.
func (r *AsyncReporter) Left(l LeaveReport) { r.enqueue(ReportLeft, func() { r.next.Left(l) }) }

// Presence queues p for the receiver if it takes presence snapshots.
func (r *AsyncReporter) Presence(p PresenceReport) {
	if pr, ok := r.next.(PresenceReporter); ok {
		r.enqueue(ReportPresence, func() { pr.Presence(p) })
	}
}

// Dropped returns how many reports were dropped because the queue was full
// or the reporter was closed.
func (r *AsyncReporter) Dropped() int64 { return r.dropped.Load() }

// Close stops taking reports, delivers the ones already queued, and waits
// for that to finish.
func (r *AsyncReporter) Close() {
	r.closeOnce.Do(func() { close(r.closing) })
	<-r.done
}

// enqueue queues f, the hand-over of a report of type typ.
func (r *AsyncReporter) enqueue(typ string, f func()) {
	select {
	case <-r.closing:
		r.drop(typ)
		return
	default:
	}
	select {
	case r.queue <- func() { f(); r.metrics.Report(typ, "sent") }:
	default:
		r.drop(typ)
	}
}

func (r *AsyncReporter) drop(typ string) {
	r.dropped.Add(1)
	r.metrics.Report(typ, "failed")
}

func (r *AsyncReporter) loop() {
	defer close(r.done)
	for {
		select {
		case f := <-r.queue:
			f()
		case <-r.closing:
			for {
				select {
				case f := <-r.queue:
					f()
				default:
					return
				}
			}
		}
	}
}
