// Package rtc is the audio and video of an rtcd client session, on pion
// WebRTC: it implements client.Media. Give an Engine to client.Connect
// with client.WithMedia; publish tracks with Publish; receive the others'
// through the session's track.subscribed events, whose Track.Remote is a
// *webrtc.TrackRemote to read RTP from.
//
//	engine, _ := rtc.New()
//	cam, _ := webrtc.NewTrackLocalStaticSample(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8}, "cam", "me")
//	_ = engine.Publish(rtc.SourceCamera, cam)
//	s, err := client.Connect(ctx, origin, token, client.WithMedia(engine),
//		client.WithHandler(client.EventTrackSubscribed, func(e client.Event) {
//			remote := e.Track.Remote.(*webrtc.TrackRemote) // read it
//		}))
//
// The engine speaks the media node's protocol 2 (docs/media-protocol.md):
// a publish connection (the engine offers) and a subscribe connection (the
// node offers), signalled over the session's WebSocket with trickle ICE.
// Published tracks are kept across reconnects: after a drop the session
// reconnects and the engine publishes them again on the new connection,
// so the application keeps writing to the same tracks. Pion is linked only
// into applications that import this package.
package rtc

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/pion/ice/v4"
	"github.com/pion/interceptor"
	"github.com/pion/sdp/v3"
	"github.com/pion/webrtc/v4"
	"rtcd.dev/sdk/client"
)

// Track sources (docs/media-protocol.md); each needs its connect feature.
const (
	SourceMicrophone  = "microphone"
	SourceCamera      = "camera"
	SourceScreenShare = "screen_share"
)

// Option configures New.
type Option func(*options)

type options struct {
	settings     func(*webrtc.SettingEngine)
	interceptors []webrtc.InterceptorOption
}

// WithSettingEngine adjusts pion's SettingEngine (network types, IP
// filters, a vnet for tests). By default mDNS candidates are off.
func WithSettingEngine(f func(*webrtc.SettingEngine)) Option {
	return func(o *options) { o.settings = f }
}

// WithInterceptorOptions passes options to pion's default interceptors
// (NACK, RTCP reports, TWCC), for example a shorter report interval.
func WithInterceptorOptions(opts ...webrtc.InterceptorOption) Option {
	return func(o *options) { o.interceptors = append(o.interceptors, opts...) }
}

// Engine is a client.Media on pion. It is safe for concurrent use.
type Engine struct {
	api *webrtc.API

	mu       sync.Mutex
	local    []*localTrack // what the application publishes, kept across reconnects
	link     client.MediaLink
	pub, sub *webrtc.PeerConnection
	early    map[string][]webrtc.ICECandidateInit // candidates that came before their SDP
	received map[string]client.Track              // by track ID
}

type localTrack struct {
	source string
	track  webrtc.TrackLocal
	sender *webrtc.RTPSender // on the current publish connection
}

// New makes an engine: pion's default codecs and interceptors, the audio
// level header extension (the node picks the active speaker from it), no
// mDNS.
func New(opts ...Option) (*Engine, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	me := &webrtc.MediaEngine{}
	if err := me.RegisterDefaultCodecs(); err != nil {
		return nil, err
	}
	if err := me.RegisterHeaderExtension(webrtc.RTPHeaderExtensionCapability{URI: sdp.AudioLevelURI}, webrtc.RTPCodecTypeAudio); err != nil {
		return nil, err
	}
	ir := &interceptor.Registry{}
	if err := webrtc.RegisterDefaultInterceptorsWithOptions(me, ir, o.interceptors...); err != nil {
		return nil, err
	}
	se := webrtc.SettingEngine{}
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	if o.settings != nil {
		o.settings(&se)
	}
	return &Engine{
		api:      webrtc.NewAPI(webrtc.WithMediaEngine(me), webrtc.WithInterceptorRegistry(ir), webrtc.WithSettingEngine(se)),
		early:    map[string][]webrtc.ICECandidateInit{},
		received: map[string]client.Track{},
	}, nil
}

// ErrNotAllowed is returned by Publish for a source this participant's
// role may not publish (connect's features).
var ErrNotAllowed = errors.New("rtc: this participant may not publish that source")

// Publish publishes track as source (one track per source). The
// application writes RTP or samples to track as pion's TrackLocal types
// allow; the engine keeps publishing it across reconnects until Unpublish.
// Before the session connects it is queued.
func (e *Engine) Publish(source string, track webrtc.TrackLocal) error {
	switch source {
	case SourceMicrophone, SourceCamera, SourceScreenShare:
	default:
		return fmt.Errorf("rtc: unknown source %q", source)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.link != nil && !allowed(e.link.Features(), source) {
		return ErrNotAllowed
	}
	for _, l := range e.local {
		if l.source == source {
			return fmt.Errorf("rtc: %s is already published", source)
		}
	}
	l := &localTrack{source: source, track: track}
	e.local = append(e.local, l)
	if e.link == nil {
		return nil
	}
	if err := e.addLocked(l); err != nil {
		return err
	}
	return e.offerLocked()
}

// Unpublish stops publishing source.
func (e *Engine) Unpublish(source string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, l := range e.local {
		if l.source != source {
			continue
		}
		e.local = append(e.local[:i:i], e.local[i+1:]...)
		if e.pub != nil && l.sender != nil {
			_ = e.pub.RemoveTrack(l.sender)
			return e.offerLocked()
		}
		return nil
	}
	return fmt.Errorf("rtc: %s is not published", source)
}

// Unsubscribe stops receiving a track (the node's track ID); Subscribe
// receives it again.
func (e *Engine) Unsubscribe(trackID string) error { return e.send("track.unsubscribe", trackID) }

// Subscribe receives a track again after Unsubscribe.
func (e *Engine) Subscribe(trackID string) error { return e.send("track.subscribe", trackID) }

func (e *Engine) send(typ, trackID string) error {
	e.mu.Lock()
	link := e.link
	e.mu.Unlock()
	if link == nil {
		return errors.New("rtc: not connected")
	}
	return link.Send(map[string]any{"type": typ, "track_id": trackID})
}

func allowed(f client.Features, source string) bool {
	switch source {
	case SourceMicrophone:
		return f.Audio
	case SourceCamera:
		return f.Video
	case SourceScreenShare:
		return f.ScreenShare
	}
	return false
}

// Attach implements client.Media: a media connection joined. The engine
// opens its subscribe connection and publishes what it has.
func (e *Engine) Attach(link client.MediaLink) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.link = link
	e.early = map[string][]webrtc.ICECandidateInit{}
	sub, err := e.api.NewPeerConnection(e.configLocked())
	if err != nil {
		link.Emit(client.Event{Name: client.EventError, Err: mediaError("the subscribe connection could not be made", err)})
		return
	}
	e.sub = sub
	sub.OnICECandidate(func(c *webrtc.ICECandidate) { e.sendCandidate(link, "subscribe", c) })
	sub.OnTrack(func(remote *webrtc.TrackRemote, _ *webrtc.RTPReceiver) { e.onTrack(link, remote) })
	if len(e.local) == 0 {
		return
	}
	for _, l := range e.local {
		if err := e.addLocked(l); err != nil {
			link.Emit(client.Event{Name: client.EventError, Err: mediaError("a track could not be published", err)})
		}
	}
	if err := e.offerLocked(); err != nil {
		link.Emit(client.Event{Name: client.EventError, Err: mediaError("the publish offer failed", err)})
	}
}

func (e *Engine) configLocked() webrtc.Configuration {
	var cfg webrtc.Configuration
	for _, s := range e.link.ICEServers() {
		cfg.ICEServers = append(cfg.ICEServers, webrtc.ICEServer{URLs: s.URLs, Username: s.Username, Credential: s.Credential})
	}
	return cfg
}

// addLocked adds a local track to the publish connection, creating it.
func (e *Engine) addLocked(l *localTrack) error {
	if e.pub == nil {
		pc, err := e.api.NewPeerConnection(e.configLocked())
		if err != nil {
			return err
		}
		link := e.link
		pc.OnICECandidate(func(c *webrtc.ICECandidate) { e.sendCandidate(link, "publish", c) })
		e.pub = pc
	}
	sender, err := e.pub.AddTrack(l.track)
	if err != nil {
		return err
	}
	l.sender = sender
	go func() { // pion's interceptors need the RTCP read
		for {
			if _, _, err := sender.ReadRTCP(); err != nil {
				return
			}
		}
	}()
	return nil
}

// offerLocked sends a publish offer declaring every local track.
func (e *Engine) offerLocked() error {
	if e.pub == nil || e.link == nil {
		return nil
	}
	offer, err := e.pub.CreateOffer(nil)
	if err != nil {
		return err
	}
	if err := e.pub.SetLocalDescription(offer); err != nil {
		return err
	}
	decls := []map[string]string{}
	for _, l := range e.local {
		decls = append(decls, map[string]string{"track_id": l.track.ID(), "source": l.source})
	}
	return e.link.Send(map[string]any{"type": "publish.offer", "sdp": offer.SDP, "tracks": decls})
}

func (e *Engine) sendCandidate(link client.MediaLink, target string, c *webrtc.ICECandidate) {
	if c == nil {
		return
	}
	_ = link.Send(map[string]any{"type": "candidate", "target": target, "candidate": c.ToJSON()})
}

func (e *Engine) onTrack(link client.MediaLink, remote *webrtc.TrackRemote) {
	t := client.Track{ID: remote.ID(), Kind: remote.Kind().String(), ParticipantID: remote.StreamID(), Remote: remote}
	e.mu.Lock()
	if e.link != link {
		e.mu.Unlock()
		return
	}
	e.received[t.ID] = t
	e.mu.Unlock()
	link.Emit(client.Event{Name: client.EventTrackSubscribed, Track: &t})
}

// message is any media message the engine handles.
type message struct {
	Type          string          `json:"type"`
	SDP           string          `json:"sdp"`
	Target        string          `json:"target"`
	Candidate     json.RawMessage `json:"candidate"`
	TrackID       string          `json:"track_id"`
	ParticipantID string          `json:"participant_id"`
	Reason        string          `json:"reason"`
	Source        string          `json:"source"`
	Code          string          `json:"code"`
	Message       string          `json:"message"`
}

// Handle implements client.Media.
func (e *Engine) Handle(msgType string, raw []byte) {
	var m message
	if json.Unmarshal(raw, &m) != nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	link := e.link
	if link == nil {
		return
	}
	switch msgType {
	case "publish.answer":
		if e.pub == nil {
			return
		}
		if err := e.pub.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: m.SDP}); err != nil {
			link.Emit(client.Event{Name: client.EventError, Err: mediaError("the node's publish answer was refused", err)})
			return
		}
		e.flushLocked("publish", e.pub)
	case "subscribe.offer":
		if err := e.sub.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: m.SDP}); err != nil {
			link.Emit(client.Event{Name: client.EventError, Err: mediaError("the node's subscribe offer was refused", err)})
			return
		}
		e.flushLocked("subscribe", e.sub)
		answer, err := e.sub.CreateAnswer(nil)
		if err == nil {
			err = e.sub.SetLocalDescription(answer)
		}
		if err != nil {
			link.Emit(client.Event{Name: client.EventError, Err: mediaError("the subscribe answer failed", err)})
			return
		}
		_ = link.Send(map[string]any{"type": "subscribe.answer", "sdp": answer.SDP})
	case "candidate":
		var init webrtc.ICECandidateInit
		if json.Unmarshal(m.Candidate, &init) != nil {
			return
		}
		pc := e.sub
		if m.Target == "publish" {
			pc = e.pub
		}
		if pc == nil || pc.RemoteDescription() == nil {
			e.early[m.Target] = append(e.early[m.Target], init)
			return
		}
		_ = pc.AddICECandidate(init)
	case "track.unsubscribed":
		t, ok := e.received[m.TrackID]
		if !ok {
			t = client.Track{ID: m.TrackID, ParticipantID: m.ParticipantID}
		}
		delete(e.received, m.TrackID)
		t.Reason = m.Reason
		link.Emit(client.Event{Name: client.EventTrackUnsubscribed, Track: &t})
	case "track.refused":
		link.Emit(client.Event{Name: client.EventError, Err: mediaError(
			fmt.Sprintf("the node refused to publish %s: %s (%s)", m.Source, m.Message, m.Code), nil)})
	}
}

func (e *Engine) flushLocked(target string, pc *webrtc.PeerConnection) {
	for _, c := range e.early[target] {
		_ = pc.AddICECandidate(c)
	}
	delete(e.early, target)
}

// Detach implements client.Media: the connection ended. Its peer
// connections close, and every received track is unsubscribed (reason
// "reconnecting"); local tracks stay, to publish again on the next
// connection.
func (e *Engine) Detach() {
	e.mu.Lock()
	link := e.link
	e.link = nil
	pub, sub := e.pub, e.sub
	e.pub, e.sub = nil, nil
	for _, l := range e.local {
		l.sender = nil
	}
	gone := make([]client.Track, 0, len(e.received))
	for id, t := range e.received {
		t.Reason = "reconnecting"
		gone = append(gone, t)
		delete(e.received, id)
	}
	e.mu.Unlock()
	for _, t := range gone {
		link.Emit(client.Event{Name: client.EventTrackUnsubscribed, Track: &t})
	}
	if pub != nil {
		_ = pub.Close()
	}
	if sub != nil {
		_ = sub.Close()
	}
}

// mediaError is an error event of the media path. Its code is unknown:
// spec 7's codes name no media failure.
func mediaError(msg string, err error) *client.Error {
	return client.NewMediaError(msg, err)
}
