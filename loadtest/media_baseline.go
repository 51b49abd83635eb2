package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/goccy/go-json"
	"github.com/pion/webrtc/v4"
)

// The media baseline: pion's plain forwarding of the same calls, with none
// of rtcd's logic (no admission, no per-subscriber queues, no layer
// policy, no quality or speaker, no signalling protocol). A child process
// (-serve-media-baseline) takes each publisher's offer over HTTP, and for
// each subscriber makes a peer connection holding one local track per
// track of the others in its room; one goroutine per received track reads
// each packet and writes it to every subscriber's local track in turn.
// ICE gathering completes before each SDP is returned (no trickle).

// mediaBaselineMaxBody bounds one SDP request body.
const mediaBaselineMaxBody = 256 << 10

type mbRoom struct {
	mu     sync.Mutex
	tracks []*mbTrack // published, in arrival order
}

type mbTrack struct {
	owner  string
	remote *webrtc.TrackRemote
	mu     sync.Mutex
	locals []*webrtc.TrackLocalStaticRTP
}

type mbServer struct {
	api   *webrtc.API
	mu    sync.Mutex
	rooms map[string]*mbRoom
	subs  map[string]*webrtc.PeerConnection // waiting for their answers
	pcs   []*webrtc.PeerConnection          // every connection, closed by close
	next  int
}

// mbMaxConnections bounds the plain forwarder's peer connections: one per
// publisher and one per participant of the largest run.
const mbMaxConnections = 2 * mediaMaxPeers

func (s *mbServer) room(id string) *mbRoom {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rooms[id]
	if r == nil {
		r = &mbRoom{}
		s.rooms[id] = r
	}
	return r
}

// newPC makes a peer connection, at most mbMaxConnections.
func (s *mbServer) newPC() (*webrtc.PeerConnection, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pcs) >= mbMaxConnections {
		return nil, fmt.Errorf("more than %d peer connections", mbMaxConnections)
	}
	pc, err := s.api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		return nil, err
	}
	s.pcs = append(s.pcs, pc)
	return pc, nil
}

func (s *mbServer) close() {
	s.mu.Lock()
	pcs := s.pcs
	s.pcs = nil
	s.mu.Unlock()
	for _, pc := range pcs {
		_ = pc.Close()
	}
}

// startMediaBaseline serves the plain forwarder on an ephemeral loopback
// port: in a child process (its CPU read from /proc), or in this one
// (inProcess: the tests; its CPU is then not told apart).
func startMediaBaseline(inProcess bool) (*baselineServer, error) {
	if !inProcess {
		return startChild("-serve-media-baseline", "127.0.0.1:0")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv, s, err := newMediaBaselineServer()
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	go func() { _ = srv.Serve(ln) }()
	return &baselineServer{Addr: ln.Addr().String(), stop: func() { _ = srv.Close(); s.close() }}, nil
}

func newMediaBaselineServer() (*http.Server, *mbServer, error) {
	api, err := mediaClientAPI()
	if err != nil {
		return nil, nil, err
	}
	s := &mbServer{api: api, rooms: map[string]*mbRoom{}, subs: map[string]*webrtc.PeerConnection{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /publish", s.publish)
	mux.HandleFunc("POST /subscribe", s.subscribe)
	mux.HandleFunc("POST /answer", s.answer)
	return &http.Server{Handler: mux, ReadHeaderTimeout: httpTimeout}, s, nil
}

// serveMediaBaseline serves the plain forwarder until stdin closes.
func serveMediaBaseline(addr string) error {
	srv, s, err := newMediaBaselineServer()
	if err != nil {
		return err
	}
	defer s.close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func readSDP(w http.ResponseWriter, r *http.Request) (string, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mediaBaselineMaxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return "", false
	}
	return string(b), true
}

// localDescription completes ICE gathering and returns the SDP.
func localDescription(pc *webrtc.PeerConnection, d webrtc.SessionDescription) (string, error) {
	done := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(d); err != nil {
		return "", err
	}
	<-done
	return pc.LocalDescription().SDP, nil
}

// publish: ?room=&owner=, body the offer; answers with the answer.
func (s *mbServer) publish(w http.ResponseWriter, r *http.Request) {
	offer, ok := readSDP(w, r)
	if !ok {
		return
	}
	rm, owner := s.room(r.URL.Query().Get("room")), r.URL.Query().Get("owner")
	pc, err := s.newPC()
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	pc.OnTrack(func(remote *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
		t := &mbTrack{owner: owner, remote: remote}
		rm.mu.Lock()
		rm.tracks = append(rm.tracks, t)
		rm.mu.Unlock()
		for {
			pkt, _, err := remote.ReadRTP()
			if err != nil {
				return
			}
			pkt.Extension, pkt.Extensions = false, nil
			t.mu.Lock()
			locals := t.locals
			t.mu.Unlock()
			for _, l := range locals {
				out := *pkt
				_ = l.WriteRTP(&out)
			}
		}
	})
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: offer}); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	answer, err := pc.CreateAnswer(nil)
	if err == nil {
		offer, err = localDescription(pc, answer)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = io.WriteString(w, offer)
}

// subscribe: ?room=&owner=&expect=N; waits until the room has N tracks of
// others, answers {"id","sdp"} with an offer holding them.
func (s *mbServer) subscribe(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rm, owner := s.room(q.Get("room")), q.Get("owner")
	expect, _ := strconv.Atoi(q.Get("expect"))
	deadline := time.Now().Add(mediaSetupTimeout)
	var tracks []*mbTrack
	for {
		tracks = tracks[:0]
		rm.mu.Lock()
		for _, t := range rm.tracks {
			if t.owner != owner {
				tracks = append(tracks, t)
			}
		}
		rm.mu.Unlock()
		if len(tracks) >= expect {
			break
		}
		if time.Now().After(deadline) {
			http.Error(w, "the room's tracks did not all arrive", http.StatusGatewayTimeout)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	pc, err := s.newPC()
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	for i, t := range tracks {
		l, err := webrtc.NewTrackLocalStaticRTP(t.remote.Codec().RTPCodecCapability, fmt.Sprint("t", i), t.owner)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		sender, err := pc.AddTrack(l)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		go drainRTCP(sender)
		t.mu.Lock()
		t.locals = append(t.locals, l)
		t.mu.Unlock()
	}
	offer, err := pc.CreateOffer(nil)
	var sdp string
	if err == nil {
		sdp, err = localDescription(pc, offer)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.mu.Lock()
	s.next++
	id := strconv.Itoa(s.next)
	s.subs[id] = pc
	s.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]string{"id": id, "sdp": sdp})
}

// answer: ?id=, body the subscriber's answer.
func (s *mbServer) answer(w http.ResponseWriter, r *http.Request) {
	sdp, ok := readSDP(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	pc := s.subs[r.URL.Query().Get("id")]
	delete(s.subs, r.URL.Query().Get("id"))
	s.mu.Unlock()
	if pc == nil {
		http.Error(w, "no such subscription", http.StatusNotFound)
		return
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: sdp}); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// --- the generator's side ---

func mbPost(c *http.Client, url string, body string) ([]byte, error) {
	res, err := c.Post(url, "application/sdp", bytes.NewBufferString(body))
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, mediaBaselineMaxBody))
	if err != nil {
		return nil, err
	}
	if res.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s: %d %s", url, res.StatusCode, bytes.TrimSpace(b))
	}
	return b, nil
}

// publishBaseline publishes (a publisher) through the plain forwarder.
func (p *mediaPeer) publishBaseline(api *webrtc.API, c *http.Client, base string) error {
	if err := p.newTracks(api); err != nil {
		return err
	}
	offer, err := p.pub.CreateOffer(nil)
	if err != nil {
		return err
	}
	sdp, err := localDescription(p.pub, offer)
	if err != nil {
		return err
	}
	answer, err := mbPost(c, fmt.Sprintf("%s/publish?room=%d&owner=%d", base, p.room, p.index), sdp)
	if err != nil {
		return err
	}
	return p.pub.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: string(answer)})
}

// subscribeBaseline subscribes to the others' tracks through the plain
// forwarder.
func (p *mediaPeer) subscribeBaseline(api *webrtc.API, c *http.Client, base string, expect int32) error {
	raw, err := mbPost(c, fmt.Sprintf("%s/subscribe?room=%d&owner=%d&expect=%d", base, p.room, p.index, expect), "")
	if err != nil {
		return err
	}
	var sub struct{ ID, SDP string }
	if err := json.Unmarshal(raw, &sub); err != nil {
		return err
	}
	if p.sub, err = api.NewPeerConnection(webrtc.Configuration{}); err != nil {
		return err
	}
	p.sub.OnTrack(p.onTrack)
	if err := p.sub.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: sub.SDP}); err != nil {
		return err
	}
	answer, err := p.sub.CreateAnswer(nil)
	if err != nil {
		return err
	}
	sdp, err := localDescription(p.sub, answer)
	if err != nil {
		return err
	}
	_, err = mbPost(c, base+"/answer?id="+sub.ID, sdp)
	return err
}

// runMediaBaseline runs the same shape through the plain forwarder.
func runMediaBaseline(ctx context.Context, cfg *config, api *webrtc.API, progress io.Writer) (*mediaFigures, error) {
	b, err := startMediaBaseline(cfg.BaselineInProcess)
	if err != nil {
		return nil, err
	}
	defer b.Stop()
	base := "http://" + b.Addr
	c := &http.Client{Timeout: mediaSetupTimeout + 10*time.Second}
	shape := cfg.mediaShape()
	run := newMediaRun(shape)
	defer run.close()
	rss := func() float64 { return 0 }
	if b.cmd != nil {
		pid := b.cmd.Process.Pid
		rss = func() float64 { return procRSSBytes(pid) }
	}
	rssBefore := rss()
	setup := time.Now()
	if err := joinAll(run, func(p *mediaPeer) error {
		if !p.publishes {
			return nil
		}
		return p.publishBaseline(api, c, base)
	}); err != nil {
		return nil, err
	}
	run.startSending()
	if err := joinAll(run, func(p *mediaPeer) error {
		expect := shape.expectedTracks(p.index)
		if expect == 0 {
			return nil // a lone publisher receives nothing
		}
		return p.subscribeBaseline(api, c, base, expect)
	}); err != nil {
		return nil, err
	}
	if err := run.waitFlowing(ctx, "baseline"); err != nil {
		return nil, err
	}
	setupSeconds := time.Since(setup).Seconds()
	f := run.measure(ctx, cfg.Duration, b.CPUSeconds, progress, "media baseline")
	f.SetupSeconds = setupSeconds
	if held := rss(); held > 0 && rssBefore > 0 {
		f.RSSBefore, f.RSSHeld = rssBefore, held
		f.RSSPerParticipant = (held - rssBefore) / float64(len(run.peers))
	}
	return f, nil
}
