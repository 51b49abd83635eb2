package client

import (
	"encoding/json"
	"sync"
	"time"
)

// Event names (spec 6, "Client SDK events").
const (
	EventStateChanged       = "connection.state_changed"
	EventQualityChanged     = "connection.quality_changed"
	EventReconnecting       = "connection.reconnecting"
	EventReconnected        = "connection.reconnected"
	EventDisconnected       = "connection.disconnected"
	EventParticipantJoined  = "participant.joined"
	EventParticipantUpdated = "participant.updated"
	EventParticipantLeft    = "participant.left"
	EventTrackSubscribed    = "track.subscribed"
	EventTrackUnsubscribed  = "track.unsubscribed"
	EventError              = "error"
)

// EventNames returns the eleven event names, in the spec's order.
func EventNames() []string {
	return []string{
		EventStateChanged, EventQualityChanged, EventReconnecting, EventReconnected, EventDisconnected,
		EventParticipantJoined, EventParticipantUpdated, EventParticipantLeft,
		EventTrackSubscribed, EventTrackUnsubscribed, EventError,
	}
}

func knownEvent(name string) bool {
	for _, n := range EventNames() {
		if n == name {
			return true
		}
	}
	return false
}

// Quality is the connection quality, kept generic whatever the media engine
// (spec 6).
type Quality string

// Quality levels. The SDK derives them from the round trip of its
// heartbeat pings: excellent below 150 ms, good below 400 ms, poor above
// that or when a pong is late, lost while no pong has come for half the
// media node's heartbeat timeout or while the connection is down; unknown
// before the first measurement.
const (
	QualityUnknown   Quality = "unknown"
	QualityExcellent Quality = "excellent"
	QualityGood      Quality = "good"
	QualityPoor      Quality = "poor"
	QualityLost      Quality = "lost"
)

// Participant is another participant in the room, as the media node shows
// it. State is the participant's application state, a JSON object ({} until
// it sends one).
type Participant struct {
	ID    string          `json:"participant_id"`
	Role  string          `json:"role"`
	State json.RawMessage `json:"state"`
}

// Track is a media track. The reference media node carries no media, so
// this version never emits track events with it; the type and the event
// names exist so applications can be written against the contract.
type Track struct {
	ID            string
	Kind          string // "audio", "video" or "screen_share"
	ParticipantID string
}

// Event is one event. Name says which; the other fields are set as listed
// for each name:
//
//	connection.state_changed    State, PreviousState (and Err when the new state is failed)
//	connection.quality_changed  Quality, PreviousQuality, RTT (0 when not measured)
//	connection.reconnecting     Attempt, Delay (the wait before this attempt), Err (why: the drop, then each failed attempt)
//	connection.reconnected      Attempt
//	connection.disconnected     Reason ("left", "room_ended", "removed", "replaced", "failed"), Err (nil after Leave/Close)
//	participant.joined          Participant
//	participant.updated         Participant
//	participant.left            Participant (ID only), Reason (the media node's leave reason)
//	track.subscribed            Track
//	track.unsubscribed          Track
//	error                       Err
type Event struct {
	Name string
	Time time.Time

	State, PreviousState     State
	Quality, PreviousQuality Quality
	RTT                      time.Duration

	Attempt int
	Delay   time.Duration

	Participant *Participant
	Track       *Track
	Reason      string
	Err         *Error
}

// Disconnect reasons of connection.disconnected.
const (
	ReasonLeft      = "left"       // Leave or Close
	ReasonRoomEnded = "room_ended" // the room ended
	ReasonRemoved   = "removed"    // the participant was removed
	ReasonReplaced  = "replaced"   // a newer connection of the participant took over
	ReasonFailed    = "failed"     // the session failed (Err says why)
)

// dispatcher runs handlers on its own goroutine, one event at a time in the
// order they were emitted, so a slow handler never blocks the read loop.
// The queue is unbounded; events are small and a session emits few.
type dispatcher struct {
	mu       sync.Mutex
	cond     *sync.Cond
	queue    []Event
	closed   bool
	handlers map[string][]*handlerEntry
	done     chan struct{}
}

type handlerEntry struct {
	fn     func(Event)
	active bool // guarded by dispatcher.mu
}

func newDispatcher() *dispatcher {
	d := &dispatcher{handlers: map[string][]*handlerEntry{}, done: make(chan struct{})}
	d.cond = sync.NewCond(&d.mu)
	go d.run()
	return d
}

func (d *dispatcher) on(name string, fn func(Event)) func() {
	h := &handlerEntry{fn: fn, active: true}
	d.mu.Lock()
	d.handlers[name] = append(d.handlers[name], h)
	d.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			defer d.mu.Unlock()
			h.active = false
			list := d.handlers[name]
			for i, x := range list {
				if x == h {
					d.handlers[name] = append(list[:i:i], list[i+1:]...)
					break
				}
			}
		})
	}
}

// emit queues ev. After close it is dropped.
func (d *dispatcher) emit(ev Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.queue = append(d.queue, ev)
	d.cond.Signal()
}

// close lets the dispatcher deliver what is queued and stop.
func (d *dispatcher) close() {
	d.mu.Lock()
	d.closed = true
	d.cond.Signal()
	d.mu.Unlock()
}

func (d *dispatcher) run() {
	defer close(d.done)
	for {
		d.mu.Lock()
		for len(d.queue) == 0 && !d.closed {
			d.cond.Wait()
		}
		if len(d.queue) == 0 {
			d.mu.Unlock()
			return
		}
		ev := d.queue[0]
		d.queue[0] = Event{}
		d.queue = d.queue[1:]
		list := append([]*handlerEntry(nil), d.handlers[ev.Name]...)
		d.mu.Unlock()
		for _, h := range list {
			d.mu.Lock()
			active := h.active
			d.mu.Unlock()
			if active {
				h.fn(ev)
			}
		}
	}
}
