package client

import (
	"context"
	"encoding/json"
	"sync"
)

// Media is the audio and video side of a Session: it publishes the local
// tracks and receives the other participants' over WebRTC. Package
// rtcd.dev/sdk/client/rtc implements it with pion (so pion is linked only
// into applications that import that package); WithMedia gives one to
// Connect. A Session without Media speaks the media node's presence
// protocol (version 1) and carries no media.
//
// The Session calls these methods from its connection's reader, one at a
// time, in order:
//
//   - Attach when a media connection has joined (the first connect and
//     every reconnect), before any of its messages;
//   - Handle for each media message of that connection (publish.answer,
//     subscribe.offer, candidate, track.unsubscribed, track.refused; see
//     docs/media-protocol.md, version 2), raw being the whole JSON message;
//   - Detach when that connection has ended (a reconnect Attaches anew).
//
// None may block for long: they run on the reader.
type Media interface {
	Attach(link MediaLink)
	Handle(msgType string, raw []byte)
	Detach()
}

// MediaLink is what a Session gives its Media for one media connection.
type MediaLink interface {
	// Send writes one protocol message (a JSON object) to the media node.
	Send(msg any) error
	// ICEServers are the ICE servers the node named in joined (its TURN
	// server, with credentials), followed by those of WithICEServers.
	ICEServers() []ICEServer
	// Features says what this participant may publish.
	Features() Features
	// Emit delivers a track.subscribed, track.unsubscribed or error event
	// to the session's handlers.
	Emit(ev Event)
}

// ICEServer is one STUN or TURN server, in the shape of the browser's
// RTCIceServer.
type ICEServer struct {
	URLs       []string `json:"urls"`
	Username   string   `json:"username,omitempty"`
	Credential string   `json:"credential,omitempty"`
}

// WithMedia gives the session a Media, which turns on publishing and
// subscribing (media protocol 2). See package rtcd.dev/sdk/client/rtc.
func WithMedia(m Media) Option {
	return func(cfg *config) { cfg.media = m }
}

// WithICEServers adds ICE servers (for example an external TURN service)
// to those the media node hands out.
func WithICEServers(servers ...ICEServer) Option {
	return func(cfg *config) { cfg.iceServers = append(cfg.iceServers, servers...) }
}

// mediaMessageTypes are the media node's messages a Media handles.
var mediaMessageTypes = map[string]bool{
	"publish.answer": true, "subscribe.offer": true, "candidate": true,
	"track.unsubscribed": true, "track.refused": true,
}

// mediaLink is the MediaLink of one joined connection.
type mediaLink struct {
	s  *Session
	mc *mediaConn

	mu       sync.Mutex
	detached bool
}

func (l *mediaLink) Send(msg any) error {
	l.mu.Lock()
	detached := l.detached
	l.mu.Unlock()
	if detached {
		return newError(CodeConnectionLost, "the media connection has ended", nil, nil)
	}
	if err := l.mc.write(context.Background(), msg); err != nil {
		return newError(CodeConnectionLost, "the media connection failed", err, nil)
	}
	return nil
}

func (l *mediaLink) ICEServers() []ICEServer {
	out := append([]ICEServer(nil), l.mc.joined.ICEServers...)
	return append(out, l.s.cfg.iceServers...)
}

func (l *mediaLink) Features() Features { return l.s.Features() }

func (l *mediaLink) Emit(ev Event) {
	if ev.Name != EventTrackSubscribed && ev.Name != EventTrackUnsubscribed && ev.Name != EventError {
		return
	}
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.sm.state.Terminal() {
		return
	}
	l.s.emitLocked(ev)
}

func (l *mediaLink) detach() {
	l.mu.Lock()
	l.detached = true
	l.mu.Unlock()
}

// qualityMessage is the node's connection.quality (protocol 2).
type qualityMessage struct {
	Quality string `json:"quality"`
}

func parseQuality(raw []byte) (Quality, bool) {
	var m qualityMessage
	if json.Unmarshal(raw, &m) != nil {
		return "", false
	}
	switch q := Quality(m.Quality); q {
	case QualityExcellent, QualityGood, QualityPoor, QualityLost, QualityUnknown:
		return q, true
	}
	return "", false
}

// NewMediaError is the error a Media reports through an error event: code
// unknown (spec 7 names no media failure), with msg and the cause.
func NewMediaError(msg string, cause error) *Error {
	return newError(CodeUnknown, msg, cause, nil)
}
