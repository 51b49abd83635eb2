package client

import (
	"bytes"
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

// Quality levels. With Media (WithMedia) they are the media node's measure
// of the media path (loss, round trip and jitter from RTCP; see
// docs/media-protocol.md, Connection quality), and lost while the
// connection is down or the node silent. Without Media the SDK derives
// them from the round trip of its heartbeat pings: excellent below 150 ms,
// good below 400 ms, poor above that or when a pong is late, lost while no
// pong has come for half the media node's heartbeat timeout or while the
// connection is down. unknown before the first measurement.
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
	// Tracks are what the participant publishes (with media), and
	// Speaking says it is the room's active speaker.
	Tracks   []TrackInfo `json:"tracks,omitempty"`
	Speaking bool        `json:"speaking,omitempty"`
}

// TrackInfo is one track a participant publishes.
type TrackInfo struct {
	TrackID string `json:"track_id"`
	Source  string `json:"source"` // microphone, camera or screen_share
	Kind    string `json:"kind"`   // audio or video
	Layers  int    `json:"layers"` // simulcast encodings arrived (1 without simulcast)
}

// clone returns a copy whose State shares nothing with p's, so a handler or
// a caller of Participants cannot change the session's own copy.
func (p Participant) clone() *Participant {
	p.State = bytes.Clone(p.State)
	p.Tracks = append([]TrackInfo(nil), p.Tracks...)
	return &p
}

// Track is a media track another participant publishes, received through
// the session's Media (track.subscribed, track.unsubscribed).
type Track struct {
	ID            string // the media node's track ID (tr_…)
	Kind          string // "audio" or "video"
	ParticipantID string // its publisher
	// Reason says why a track was unsubscribed: "unpublished" (its
	// publisher stopped it or left), "unsubscribed" (Unsubscribe), or
	// "reconnecting" (this session's connection dropped; the track comes
	// back as a new track.subscribed once it is up again).
	Reason string
	// Remote is the Media's handle to read the track: a
	// *webrtc.TrackRemote with package rtc.
	Remote any
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

// Bounds of a session's event queue (events emitted, not yet handled).
// Handlers run one at a time on the session's event goroutine; a handler
// slower than the events arrive makes the queue grow. Once it holds
// coalesceQueuedEvents events, a new participant.updated replaces the one
// still queued for the same participant, and a new quality_changed the one
// still queued (so handlers see the latest values, not every step). Past
// maxQueuedEvents, participant, track, quality and error events are
// dropped, and one error event (code unknown, Debug["dropped_events"]: how
// many, Debug["dropped"]: how many of each name) is queued to say so. Connection
// events (state_changed, reconnecting, reconnected, disconnected) are never
// dropped: a session emits few of them.
const (
	maxQueuedEvents      = 1024
	coalesceQueuedEvents = 64
)

// dispatcher runs handlers on its own goroutine, one event at a time in the
// order they were emitted, so a slow handler never blocks the read loop.
// The queue is bounded (maxQueuedEvents).
type dispatcher struct {
	mu       sync.Mutex
	cond     *sync.Cond
	queue    []Event
	closed   bool
	handlers map[string][]*handlerEntry
	done     chan struct{}
	// dropped is the queued error event reporting dropped events, while it
	// is still queued (its Debug is updated as more are dropped).
	dropped *Error
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

// emit queues ev. After close it is dropped. It never blocks: a long queue
// is coalesced and past maxQueuedEvents some events are dropped (see
// maxQueuedEvents).
func (d *dispatcher) emit(ev Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	defer d.cond.Signal()
	if len(d.queue) >= coalesceQueuedEvents {
		switch ev.Name {
		case EventParticipantUpdated:
			if ev.Participant != nil {
				for i := len(d.queue) - 1; i >= 0; i-- {
					q := d.queue[i]
					if q.Name == EventParticipantUpdated && q.Participant != nil && q.Participant.ID == ev.Participant.ID {
						d.remove(i)
						break
					}
					if q.Participant != nil && q.Participant.ID == ev.Participant.ID {
						break // a join or leave in between: keep the order
					}
				}
			}
		case EventQualityChanged:
			for i := len(d.queue) - 1; i >= 0; i-- {
				if d.queue[i].Name == EventQualityChanged {
					ev.PreviousQuality = d.queue[i].PreviousQuality
					d.remove(i)
					break
				}
			}
			if ev.Quality == ev.PreviousQuality {
				return // back where the handlers last saw it
			}
		}
	}
	if len(d.queue) >= maxQueuedEvents && droppable(ev.Name) {
		if d.dropped == nil {
			d.dropped = newError(CodeUnknown, "events were dropped: the event handlers are too slow", nil,
				map[string]any{"dropped_events": 0, "dropped": map[string]int{}})
			d.queue = append(d.queue, Event{Name: EventError, Time: ev.Time, Err: d.dropped})
		}
		d.dropped.Debug["dropped_events"] = d.dropped.Debug["dropped_events"].(int) + 1
		d.dropped.Debug["dropped"].(map[string]int)[ev.Name]++
		return
	}
	d.queue = append(d.queue, ev)
}

// remove deletes the queued event i.
func (d *dispatcher) remove(i int) {
	copy(d.queue[i:], d.queue[i+1:])
	d.queue[len(d.queue)-1] = Event{}
	d.queue = d.queue[:len(d.queue)-1]
}

// droppable: the events a full queue drops (not the connection's).
func droppable(name string) bool {
	switch name {
	case EventStateChanged, EventReconnecting, EventReconnected, EventDisconnected:
		return false
	}
	return true
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
		if d.dropped != nil && ev.Err == d.dropped {
			d.dropped = nil // delivered: its Debug no longer changes
		}
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
