package rtc

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
	"rtcd.dev/sdk/client"
)

// These tests run the real rtcd (built from this repository) with its
// built-in media node on loopback, and hold calls through the SDK.

var rtcdBin string

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "rtcd-client-rtc-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := filepath.Abs("../../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	rtcdBin = filepath.Join(dir, "rtcd")
	cmd := exec.Command(goTool, "build", "-o", rtcdBin, "./cmd/rtcd")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/rtcd in %s: %v\n%s", root, err, out)
		return 1
	}
	return m.Run()
}

// waitSeconds bounds every wait for something a real process or network
// does; it is a failure timeout, never how a test paces itself.
const waitSeconds = 20

// server is one rtcd serve on fixed loopback addresses, so it can be
// stopped and started again where clients expect it.
type server struct {
	t                   *testing.T
	dataDir, apiKey     string
	api, metrics, media string
	cmd                 *exec.Cmd
	exited              chan struct{}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startServer(t *testing.T) *server {
	t.Helper()
	s := &server{t: t, dataDir: t.TempDir()}
	var out bytes.Buffer
	init := exec.Command(rtcdBin, "init", "--data-dir", s.dataDir, "--log-level", "error")
	init.Stdout = &out
	if err := init.Run(); err != nil {
		t.Fatalf("rtcd init: %v", err)
	}
	var boot struct {
		APIKey string `json:"api_key"`
	}
	if err := json.Unmarshal(out.Bytes(), &boot); err != nil {
		t.Fatal(err)
	}
	s.apiKey = boot.APIKey
	// A free port picked here can be taken by another process before rtcd
	// binds it (other suites run beside this one): the server then exits
	// at once, and it is started again on other ports.
	for attempt := 1; ; attempt++ {
		s.api, s.metrics, s.media = freeAddr(t), freeAddr(t), freeAddr(t)
		err := s.start()
		if err == nil {
			break
		}
		if !errors.Is(err, errExitedAtStart) || attempt == startAttempts {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { s.stop(syscall.SIGKILL) })
	return s
}

// startAttempts bounds startServer's tries on fresh ports.
const startAttempts = 3

var errExitedAtStart = errors.New("rtcd serve exited while starting (a port taken meanwhile?)")

// launch starts rtcd again on its ports (a restart).
func (s *server) launch() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatal(err)
	}
}

// start runs rtcd serve and waits until it serves.
func (s *server) start() error {
	s.cmd = exec.Command(rtcdBin, "serve", "--data-dir", s.dataDir, "--listen", s.api, "--metrics-listen", s.metrics,
		"--media-listen", s.media, "--log-level", "error", "--webhook-allow-private")
	s.cmd.Stderr = os.Stderr
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.exited = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(waitSeconds * time.Second)
	for {
		select {
		case <-s.exited:
			return errExitedAtStart
		default:
		}
		if res, err := http.Get("http://" + s.metrics + "/healthz"); err == nil {
			res.Body.Close()
			if c, err := net.Dial("tcp", s.media); err == nil {
				c.Close()
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errors.New("rtcd serve did not start")
		}
		time.Sleep(20 * time.Millisecond) // polling a starting process
	}
}

func (s *server) stop(sig syscall.Signal) {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.exited:
	case <-time.After(waitSeconds * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

func (s *server) call(method, path string, body any, want int) map[string]any {
	s.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, "http://"+s.api+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+s.apiKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	if res.StatusCode != want {
		s.t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, raw)
	}
	return out
}

// participant creates a participant of role in room and returns its token.
func (s *server) participant(room, role string) string {
	return s.call("POST", "/v1/rooms/"+room+"/participants", map[string]any{"role": role}, 201)["token"].(string)
}

// loopbackEngine is an engine whose ICE uses loopback only (the node here
// is on 127.0.0.1).
func loopbackEngine(t *testing.T) *Engine {
	t.Helper()
	e, err := New(WithSettingEngine(func(se *webrtc.SettingEngine) {
		se.SetIncludeLoopbackCandidate(true)
		se.SetIPFilter(func(ip net.IP) bool { return ip.IsLoopback() })
		se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	}))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// events collects a session's events for the test to wait on.
type events struct {
	mu   sync.Mutex
	all  []client.Event
	note chan struct{}
}

func newEvents() *events { return &events{note: make(chan struct{}, 1)} }

func (ev *events) options() []client.Option {
	var opts []client.Option
	for _, name := range client.EventNames() {
		opts = append(opts, client.WithHandler(name, ev.add))
	}
	return opts
}

func (ev *events) add(e client.Event) {
	ev.mu.Lock()
	ev.all = append(ev.all, e)
	ev.mu.Unlock()
	select {
	case ev.note <- struct{}{}:
	default:
	}
}

func (ev *events) count() int {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return len(ev.all)
}

// wait returns the first event from index from on that matches, and the
// index after it.
func (ev *events) wait(t *testing.T, what string, from int, match func(client.Event) bool) (client.Event, int) {
	t.Helper()
	deadline := time.After(waitSeconds * time.Second)
	for {
		ev.mu.Lock()
		for i := from; i < len(ev.all); i++ {
			if match(ev.all[i]) {
				e := ev.all[i]
				ev.mu.Unlock()
				return e, i + 1
			}
		}
		ev.mu.Unlock()
		select {
		case <-ev.note:
		case <-deadline:
			t.Fatalf("no %s within %d s", what, waitSeconds)
		}
	}
}

// payload is packet counter's payload: the counter, then bytes derived
// from it, so a receiver checks every byte.
func payload(counter uint32) []byte {
	b := make([]byte, 300+counter%7*100)
	binary.BigEndian.PutUint32(b, counter)
	for i := 4; i < len(b); i++ {
		b[i] = byte(uint32(i)*13 + counter*7)
	}
	return b
}

// receiver reads a subscribed track and records the counters that
// arrived intact.
type receiver struct {
	mu      sync.Mutex
	highest uint32
	intact  int
	bad     int
}

func (r *receiver) read(remote *webrtc.TrackRemote) {
	for {
		pkt, _, err := remote.ReadRTP()
		if err != nil {
			return
		}
		r.mu.Lock()
		if len(pkt.Payload) >= 4 {
			c := binary.BigEndian.Uint32(pkt.Payload)
			if bytes.Equal(pkt.Payload, payload(c)) {
				r.intact++
				r.highest = max(r.highest, c)
			} else {
				r.bad++
			}
		}
		r.mu.Unlock()
	}
}

func (r *receiver) top() uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.highest
}

// TestSDKCallSurvivesANodeRestart: a publisher and a subscriber hold a
// call through the SDK against the real server: the subscriber gets
// track.subscribed and reads the publisher's packets intact, sees the
// publisher's tracks in participant.updated, and gets a real
// connection.quality_changed from the node. Then the server is stopped
// with SIGTERM under the call: the node reports both leaves before the
// process exits, so both usage sessions end with reason node_shutdown
// (participant.left and usage.finalized reach a webhook receiver). It is
// started again: both sessions reconnect on their own, the publisher
// publishes again, and the subscriber gets the track back and packets
// flow.
func TestSDKCallSurvivesANodeRestart(t *testing.T) {
	srv := startServer(t)
	hooks := newHookReceiver(t, srv)
	room := srv.call("POST", "/v1/rooms", map[string]any{"name": "sdk media"}, 201)["id"].(string)
	pubToken, subToken := srv.participant(room, "publisher"), srv.participant(room, "subscriber")

	ctx, cancel := context.WithTimeout(context.Background(), 2*waitSeconds*time.Second)
	defer cancel()
	fastReconnect := client.WithReconnectPolicy(client.ReconnectPolicy{MaxAttempts: 60, MaxElapsed: 60 * time.Second,
		InitialDelay: 100 * time.Millisecond, MaxDelay: 500 * time.Millisecond})

	subEvents := newEvents()
	rcv := &receiver{}
	subEngine := loopbackEngine(t)
	sub, err := client.Connect(ctx, "http://"+srv.api, subToken, append(subEvents.options(), client.WithMedia(subEngine), fastReconnect,
		client.WithHandler(client.EventTrackSubscribed, func(e client.Event) { go rcv.read(e.Track.Remote.(*webrtc.TrackRemote)) }))...)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	pubEngine := loopbackEngine(t)
	cam, err := webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8}, "cam", "me")
	if err != nil {
		t.Fatal(err)
	}
	if err := pubEngine.Publish(SourceCamera, cam); err != nil {
		t.Fatal(err)
	}
	pubEvents := newEvents()
	pub, err := client.Connect(ctx, "http://"+srv.api, pubToken, append(pubEvents.options(), client.WithMedia(pubEngine), fastReconnect)...)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if err := subEngine.Publish(SourceCamera, cam); err != ErrNotAllowed {
		t.Fatalf("a subscriber publishing a camera: %v, want ErrNotAllowed", err)
	}

	stop := make(chan struct{})
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		var seq uint16
		for counter := uint32(1); ; counter++ {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			seq++
			_ = cam.WriteRTP(&rtp.Packet{Header: rtp.Header{Version: 2, SequenceNumber: seq, Timestamp: counter * 3000}, Payload: payload(counter)})
		}
	}()
	defer func() { close(stop); <-sent }()

	subscribed, _ := subEvents.wait(t, "track.subscribed", 0, func(e client.Event) bool { return e.Name == client.EventTrackSubscribed })
	if subscribed.Track.ParticipantID != pub.ParticipantID() || subscribed.Track.Kind != "video" {
		t.Fatalf("track.subscribed %+v", subscribed.Track)
	}
	eventually(t, "packets to arrive intact", func() bool { return rcv.top() > 0 })
	updated, _ := subEvents.wait(t, "participant.updated with the camera", 0, func(e client.Event) bool {
		return e.Name == client.EventParticipantUpdated && e.Participant.ID == pub.ParticipantID() && len(e.Participant.Tracks) == 1
	})
	if tr := updated.Participant.Tracks[0]; tr.Source != SourceCamera || tr.TrackID != subscribed.Track.ID {
		t.Fatalf("participant.updated tracks %+v, subscribed %s", updated.Participant.Tracks, subscribed.Track.ID)
	}
	q, _ := subEvents.wait(t, "a measured connection quality", 0, func(e client.Event) bool {
		return e.Name == client.EventQualityChanged && (e.Quality == client.QualityExcellent || e.Quality == client.QualityGood)
	})
	t.Logf("subscriber quality: %s", q.Quality)

	// SIGTERM under the call, then the server comes back where it was.
	mark := subEvents.count()
	firstSessions := map[string]string{pub.ParticipantID(): pub.SessionID(), sub.ParticipantID(): sub.SessionID()}
	srv.stop(syscall.SIGTERM)
	subEvents.wait(t, "the subscriber's track to go", mark, func(e client.Event) bool {
		return e.Name == client.EventTrackUnsubscribed && e.Track.ID == subscribed.Track.ID && e.Track.Reason == "reconnecting"
	})
	subEvents.wait(t, "the subscriber to start reconnecting", mark, func(e client.Event) bool { return e.Name == client.EventReconnecting })
	srv.launch()
	subEvents.wait(t, "the subscriber to reconnect", mark, func(e client.Event) bool { return e.Name == client.EventReconnected })
	pubEvents.wait(t, "the publisher to reconnect", 0, func(e client.Event) bool { return e.Name == client.EventReconnected })
	again, _ := subEvents.wait(t, "the camera again", mark, func(e client.Event) bool { return e.Name == client.EventTrackSubscribed })
	if again.Track.ParticipantID != pub.ParticipantID() {
		t.Fatalf("after the restart: %+v", again.Track)
	}
	before := rcv.top()
	eventually(t, "packets after the restart", func() bool { return rcv.top() > before+50 })
	rcv.mu.Lock()
	if rcv.bad != 0 {
		t.Fatalf("%d payloads differ from what was sent (%d intact)", rcv.bad, rcv.intact)
	}
	rcv.mu.Unlock()

	// The sessions the shutdown ended were finalized by the node's leave
	// reports (node_shutdown), not by a reconciliation after the restart.
	for part, session := range firstSessions {
		left := hooks.wait(t, "participant.left of "+session, func(e hookEvent) bool {
			return e.Type == "participant.left" && e.Data["session_id"] == session
		})
		if left.Data["participant_id"] != part || left.Data["reason"] != "node_shutdown" {
			t.Fatalf("participant.left %+v, want %s with reason node_shutdown", left.Data, part)
		}
		used := hooks.wait(t, "usage.finalized of "+session, func(e hookEvent) bool {
			return e.Type == "usage.finalized" && e.Data["session_id"] == session && e.Data["participant_id"] == part
		})
		if _, ok := used.Data["participant_seconds"].(float64); !ok || used.Data["ended_at"] == nil {
			t.Fatalf("usage.finalized %+v", used.Data)
		}
	}
}

// hookEvent is a webhook delivery's envelope.
type hookEvent struct {
	ID   string         `json:"id"`
	Type string         `json:"type"`
	Data map[string]any `json:"data"`
}

// hookReceiver is a webhook endpoint of the server's project on loopback
// that records every event delivered.
type hookReceiver struct {
	mu     sync.Mutex
	events []hookEvent
}

func newHookReceiver(t *testing.T, srv *server) *hookReceiver {
	t.Helper()
	h := &hookReceiver{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e hookEvent
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&e); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.events = append(h.events, e)
		h.mu.Unlock()
	}))
	t.Cleanup(ts.Close)
	srv.call("POST", "/v1/webhook-endpoints", map[string]any{"url": ts.URL + "/hook"}, 201)
	return h
}

// wait returns the first delivered event that matches.
func (h *hookReceiver) wait(t *testing.T, what string, match func(hookEvent) bool) hookEvent {
	t.Helper()
	var found hookEvent
	eventually(t, what, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, e := range h.events {
			if match(e) {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

// killer records the media sockets a session dials (through
// client.WithDialer), so a test can kill the current one.
type killer struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (k *killer) dialer() *websocket.Dialer {
	return &websocket.Dialer{HandshakeTimeout: waitSeconds * time.Second,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err == nil {
				k.mu.Lock()
				k.conns = append(k.conns, c)
				k.mu.Unlock()
			}
			return c, err
		}}
}

// kill closes every socket dialed so far and returns how many.
func (k *killer) kill() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.conns {
		_ = c.Close()
	}
	n := len(k.conns)
	k.conns = nil
	return n
}

// TestSDKPublisherComesBackWithItsTracks: in a call of one publisher and
// two subscribers, the publisher's connection to the node is killed. The
// node ends that session at once and both subscribers lose its camera
// (track.unsubscribed); the publisher's SDK reconnects on its own and
// publishes again; both subscribers get the camera back from the same
// participant and packets flow again, intact; the subscribers' own
// sessions never dropped.
func TestSDKPublisherComesBackWithItsTracks(t *testing.T) {
	srv := startServer(t)
	room := srv.call("POST", "/v1/rooms", map[string]any{"name": "sdk reconnect"}, 201)["id"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitSeconds*time.Second)
	defer cancel()
	fastReconnect := client.WithReconnectPolicy(client.ReconnectPolicy{MaxAttempts: 60, MaxElapsed: 60 * time.Second,
		InitialDelay: 100 * time.Millisecond, MaxDelay: 500 * time.Millisecond})

	type subscriber struct {
		s   *client.Session
		ev  *events
		rcv *receiver
	}
	var subs []subscriber
	for range 2 {
		ev, rcv := newEvents(), &receiver{}
		s, err := client.Connect(ctx, "http://"+srv.api, srv.participant(room, "subscriber"), append(ev.options(), client.WithMedia(loopbackEngine(t)), fastReconnect,
			client.WithHandler(client.EventTrackSubscribed, func(e client.Event) { go rcv.read(e.Track.Remote.(*webrtc.TrackRemote)) }))...)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		subs = append(subs, subscriber{s, ev, rcv})
	}

	pubEngine := loopbackEngine(t)
	cam, err := webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8}, "cam", "me")
	if err != nil {
		t.Fatal(err)
	}
	if err := pubEngine.Publish(SourceCamera, cam); err != nil {
		t.Fatal(err)
	}
	k := &killer{}
	pubEvents := newEvents()
	pub, err := client.Connect(ctx, "http://"+srv.api, srv.participant(room, "publisher"),
		append(pubEvents.options(), client.WithMedia(pubEngine), fastReconnect, client.WithDialer(k.dialer()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	stop, sent := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sent)
		var seq uint16
		for counter := uint32(1); ; counter++ {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			seq++
			_ = cam.WriteRTP(&rtp.Packet{Header: rtp.Header{Version: 2, SequenceNumber: seq, Timestamp: counter * 3000}, Payload: payload(counter)})
		}
	}()
	defer func() { close(stop); <-sent }()

	var firstTracks []string
	for _, sb := range subs {
		e, _ := sb.ev.wait(t, "the camera", 0, func(e client.Event) bool { return e.Name == client.EventTrackSubscribed })
		if e.Track.ParticipantID != pub.ParticipantID() {
			t.Fatalf("track.subscribed %+v", e.Track)
		}
		firstTracks = append(firstTracks, e.Track.ID)
		eventually(t, "packets to arrive", func() bool { return sb.rcv.top() > 0 })
	}
	subSessions := []string{subs[0].s.SessionID(), subs[1].s.SessionID()}
	pubSession := pub.SessionID()

	marks := []int{subs[0].ev.count(), subs[1].ev.count()}
	if n := k.kill(); n != 1 {
		t.Fatalf("killed %d media sockets of the publisher, want 1", n)
	}
	pubEvents.wait(t, "the publisher to reconnect", 0, func(e client.Event) bool { return e.Name == client.EventReconnected })
	if pub.SessionID() == pubSession {
		t.Fatal("the publisher reconnected with its old connect session")
	}
	for i, sb := range subs {
		gone, at := sb.ev.wait(t, "the camera to go", marks[i], func(e client.Event) bool {
			return e.Name == client.EventTrackUnsubscribed && e.Track.ID == firstTracks[i]
		})
		if gone.Track.Reason != "unpublished" {
			t.Errorf("subscriber %d: track.unsubscribed reason %q, want unpublished", i, gone.Track.Reason)
		}
		again, _ := sb.ev.wait(t, "the camera again", at, func(e client.Event) bool { return e.Name == client.EventTrackSubscribed })
		if again.Track.ParticipantID != pub.ParticipantID() || again.Track.Kind != "video" {
			t.Fatalf("subscriber %d after the reconnect: %+v", i, again.Track)
		}
		before := sb.rcv.top()
		eventually(t, "packets after the reconnect", func() bool { return sb.rcv.top() > before+50 })
		sb.rcv.mu.Lock()
		bad, intact := sb.rcv.bad, sb.rcv.intact
		sb.rcv.mu.Unlock()
		if bad != 0 {
			t.Fatalf("subscriber %d: %d payloads differ from what was sent (%d intact)", i, bad, intact)
		}
		if sb.s.SessionID() != subSessions[i] {
			t.Fatalf("subscriber %d reconnected too", i)
		}
		sb.ev.mu.Lock()
		for _, e := range sb.ev.all[marks[i]:] {
			if e.Name == client.EventReconnecting {
				t.Errorf("subscriber %d went reconnecting", i)
			}
		}
		sb.ev.mu.Unlock()
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitSeconds * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling what a network delivers
	}
}
