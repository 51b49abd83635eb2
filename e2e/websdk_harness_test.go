package e2e

// The web client SDK (sdk/web) in a real Chromium (internal/browsertest),
// against the real rtcd and its media node: the harness. A page of its own
// origin (another port than the API, as a customer's site is) loads the SDK
// bundled from its sources and e2e/testdata/websdk/harness.js, which records
// every event in window.rtcdLog; the tests drive it with Eval.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"rtcd/internal/browsertest"
	"rtcd/internal/testtools"
)

// wsEventWait bounds a wait for an SDK event. Media starts in a few
// seconds on loopback; a reconnect's first attempt is within a second.
const wsEventWait = 20 * time.Second

// wsChromiumFlags give Chromium fake cameras and microphones (a test
// pattern and a beep) that need no prompt, and let media play without a
// gesture.
var wsChromiumFlags = []string{
	// Three fake cameras, for a device switch. Chromium's fake devices
	// cycle through pixel formats: fake_device_1 is Y16 (depth), which
	// plays in a <video> but which WebRTC's encoder drops, so a switch goes
	// from fake_device_0 (I420) to fake_device_2 (MJPEG).
	"use-fake-device-for-media-stream=device-count=3",
	"use-fake-ui-for-media-stream",
	"autoplay-policy=no-user-gesture-required",
}

// wsBundle builds the SDK's bundle (sdk/web/build.mjs) once per test run.
var wsBundle struct {
	once sync.Once
	dir  string
	err  error
}

// wsServePages serves the harness page, the SDK's example page
// (examples/) and the SDK bundle on a loopback port of their own and
// returns the harness page's address.
func wsServePages(t *testing.T) string {
	t.Helper()
	root := browsertest.ModuleRoot(t)
	wsBundle.once.Do(func() {
		dir, err := os.MkdirTemp("", "rtcd-websdk-")
		if err != nil {
			wsBundle.err = err
			return
		}
		cmd := exec.Command("node", filepath.Join(root, "sdk", "web", "build.mjs"), dir)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			wsBundle.err = fmt.Errorf("node sdk/web/build.mjs: %v\n%s", err, out)
			return
		}
		wsBundle.dir = dir
	})
	if wsBundle.err != nil {
		testtools.SkipUnlessCI(t, fmt.Sprintf("the web SDK cannot be bundled (run `make web-deps`): %v", wsBundle.err))
	}
	pages := filepath.Join(root, "e2e", "testdata", "websdk")
	mux := http.NewServeMux()
	mux.HandleFunc("/rtcd-web.js", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, filepath.Join(wsBundle.dir, "rtcd-web.js"))
	})
	mux.HandleFunc("/rtcd-web.js.map", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, filepath.Join(wsBundle.dir, "rtcd-web.js.map"))
	})
	// The SDK's example page (sdk/web/examples), as its serve.mjs serves it.
	mux.Handle("/examples/", http.StripPrefix("/examples/", http.FileServer(http.Dir(filepath.Join(root, "sdk", "web", "examples")))))
	mux.HandleFunc("/dist-bundle/rtcd-web.js", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, filepath.Join(wsBundle.dir, "rtcd-web.js"))
	})
	mux.HandleFunc("/dist-bundle/rtcd-web.js.map", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, filepath.Join(wsBundle.dir, "rtcd-web.js.map"))
	})
	mux.Handle("/", http.FileServer(http.Dir(pages)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/"
}

// wsEvent is one SDK event as harness.js records it.
type wsEvent struct {
	Session          string         `json:"session"`
	Name             string         `json:"name"`
	At               int64          `json:"at"`
	State            string         `json:"state"`
	PreviousState    string         `json:"previousState"`
	Quality          string         `json:"quality"`
	Attempt          int            `json:"attempt"`
	Reason           string         `json:"reason"`
	Code             string         `json:"code"`
	RetryAfter       *float64       `json:"retryAfter"`
	Participant      string         `json:"participant"`
	ParticipantState map[string]any `json:"participantState"`
	Tracks           []string       `json:"tracks"`
	Muted            []string       `json:"muted"`
	Kind             string         `json:"kind"`
	Source           string         `json:"source"`
	TrackID          string         `json:"trackId"`
}

func (ev wsEvent) String() string {
	b, _ := json.Marshal(ev)
	return string(b)
}

// wsResult is what rtcdJoin and rtcdCall resolve with.
type wsResult struct {
	OK            bool           `json:"ok"`
	State         string         `json:"state"`
	ParticipantID string         `json:"participantId"`
	RoomID        string         `json:"roomId"`
	Code          string         `json:"code"`
	RetryAfter    *float64       `json:"retryAfter"`
	Message       string         `json:"message"`
	Debug         map[string]any `json:"debug"`
	Value         any            `json:"value"`
}

// wsPage is one person's tab with the harness page loaded.
type wsPage struct {
	*browsertest.Page
	t    *testing.T
	name string
}

// wsOpen opens a tab for name on the harness page at pageURL.
func wsOpen(t *testing.T, b *browsertest.Browser, pageURL, name string) *wsPage {
	t.Helper()
	p := &wsPage{Page: b.NewPage(t, name), t: t, name: name}
	p.Go(pageURL)
	p.WaitTrue("the harness to load", "typeof window.rtcdJoin === 'function'", wsEventWait)
	return p
}

// join connects session (a name for it in this page) with token, through
// the SDK, and returns how it ended.
func (p *wsPage) join(session, api, token string, options ...string) wsResult {
	p.t.Helper()
	opts := "{}"
	if len(options) > 0 {
		opts = options[0]
	}
	var r wsResult
	p.Eval(fmt.Sprintf("rtcdJoin(%s, %s, %s, %s)", jsQuote(session), jsQuote(api), jsQuote(token), opts), &r)
	return r
}

// mustJoin is join that fails the test unless the session connected.
func (p *wsPage) mustJoin(session, api, token string) wsResult {
	p.t.Helper()
	r := p.join(session, api, token)
	if !r.OK || r.State != "connected" {
		p.t.Fatalf("%s: join %s: %+v", p.name, session, r)
	}
	return r
}

// call runs a method of session with JSON arguments (each a JavaScript
// expression) and returns its result.
func (p *wsPage) call(session, method string, args ...string) wsResult {
	p.t.Helper()
	var r wsResult
	all := append([]string{jsQuote(session), jsQuote(method)}, args...)
	p.Eval("rtcdCall("+strings.Join(all, ", ")+")", &r)
	return r
}

// events returns session's events so far.
func (p *wsPage) events(session string) []wsEvent {
	p.t.Helper()
	var all []wsEvent
	p.Eval("window.rtcdLog", &all)
	var out []wsEvent
	for _, ev := range all {
		if ev.Session == session {
			out = append(out, ev)
		}
	}
	return out
}

// waitEvent waits for an event of session named name for which match (nil:
// any) holds, and returns it.
func (p *wsPage) waitEvent(session, name string, match func(wsEvent) bool) wsEvent {
	p.t.Helper()
	deadline := time.Now().Add(wsEventWait)
	for {
		for _, ev := range p.events(session) {
			if ev.Name == name && (match == nil || match(ev)) {
				return ev
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: waited %v for %s %s; events:\n%s", p.name, wsEventWait, session, name, wsEventList(p.events(session)))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// states lists session's connection states in order, from its
// state_changed events.
func (p *wsPage) states(session string) []string {
	p.t.Helper()
	var out []string
	for _, ev := range p.events(session) {
		if ev.Name == "connection.state_changed" {
			out = append(out, ev.State)
		}
	}
	return out
}

func wsEventList(evs []wsEvent) string {
	var lines []string
	for _, ev := range evs {
		lines = append(lines, "  "+ev.String())
	}
	return strings.Join(lines, "\n")
}

// adminAdjust credits (or, negative, debits) the bootstrap workspace's
// wallet through the operator route of the private listener.
func (e *env) adminAdjust(amount string) {
	e.t.Helper()
	raw, err := os.ReadFile(filepath.Join(e.dataDir, "admin.token"))
	if err != nil {
		e.t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"account_id": e.Boot.AccountID, "amount": amount, "reason": "browser test", "operator": "e2e"})
	req, _ := http.NewRequest("POST", e.Metrics+"/admin/billing/adjust", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(raw)))
	res, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		e.t.Fatalf("adjust %s: status %d", amount, res.StatusCode)
	}
}

// wsLocal describes a published track as rtcdPublish and rtcdLocal return it.
type wsLocal struct {
	OK      bool           `json:"ok"`
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Debug   map[string]any `json:"debug"`
	Value   struct {
		Source   string `json:"source"`
		Kind     string `json:"kind"`
		DeviceID string `json:"deviceId"`
		Muted    bool   `json:"muted"`
	} `json:"value"`
}

// publish publishes source (microphone, camera, screen_share) on session.
func (p *wsPage) publish(session, source string) wsLocal {
	p.t.Helper()
	var r wsLocal
	p.Eval(fmt.Sprintf("rtcdPublish(%s, %s)", jsQuote(session), jsQuote(source)), &r)
	return r
}

// mustPublish is publish that fails the test unless the track is published.
func (p *wsPage) mustPublish(session, source string) wsLocal {
	p.t.Helper()
	r := p.publish(session, source)
	if !r.OK {
		p.t.Fatalf("%s: publish %s: %+v", p.name, source, r)
	}
	return r
}

// local calls a method of session's published track of source (mute,
// unmute, switchDevice, unpublish) with JavaScript arguments.
func (p *wsPage) local(session, source, method string, args ...string) wsLocal {
	p.t.Helper()
	var r wsLocal
	all := append([]string{jsQuote(session), jsQuote(source), jsQuote(method)}, args...)
	p.Eval("rtcdLocal("+strings.Join(all, ", ")+")", &r)
	return r
}

// wsReceived is what a page receives of one remote track: the decoder's
// counters and the video element's size.
type wsReceived struct {
	Kind          string  `json:"kind"`
	Packets       int     `json:"packets"`
	Bytes         int     `json:"bytes"`
	FramesDecoded int     `json:"framesDecoded"`
	AudioEnergy   float64 `json:"audioEnergy"`
	Width         int     `json:"width"`
	Height        int     `json:"height"`
}

// received reads what session receives of participant's source; nil while
// it receives no such track.
func (p *wsPage) received(session, participant, source string) *wsReceived {
	p.t.Helper()
	var r *wsReceived
	p.Eval(fmt.Sprintf("rtcdReceived(%s, %s, %s)", jsQuote(session), jsQuote(participant), jsQuote(source)), &r)
	return r
}

// waitReceiving waits until session decodes participant's source: for a
// video, frames decoded grow and the element has a size; for audio,
// packets grow and carry sound. It returns the last reading.
func (p *wsPage) waitReceiving(session, participant, source string) *wsReceived {
	p.t.Helper()
	deadline := time.Now().Add(wsEventWait)
	var first, last *wsReceived
	for {
		last = p.received(session, participant, source)
		if last != nil && first == nil {
			first = last
		}
		if last != nil && first != nil && flowing(first, last) {
			return last
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: %s does not receive %s of %s within %v: first %+v, last %+v; events:\n%s",
				p.name, session, source, participant, wsEventWait, first, last, wsEventList(p.events(session)))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// flowing reports whether media flowed between two readings of a track.
func flowing(a, b *wsReceived) bool {
	if b.Kind == "video" {
		return b.FramesDecoded > a.FramesDecoded && b.Width > 0 && b.Height > 0
	}
	return b.Packets > a.Packets && b.AudioEnergy > a.AudioEnergy
}

// device finds the page's device of kind (videoinput, audioinput) labelled
// label and returns its id.
func (p *wsPage) device(kind, label string) string {
	p.t.Helper()
	var ds []struct {
		DeviceID string `json:"deviceId"`
		Label    string `json:"label"`
	}
	p.Eval("rtcdDevices("+jsQuote(kind)+")", &ds)
	for _, d := range ds {
		if d.Label == label {
			return d.DeviceID
		}
	}
	p.t.Fatalf("%s: no %s labelled %q in %+v", p.name, kind, label, ds)
	return ""
}

// waitStill waits until session receives nothing more of participant's
// source: its packet count holds over wsStillFor (after a settle for what
// was in flight). It fails the test if packets keep coming.
func (p *wsPage) waitStill(session, participant, source string) {
	p.t.Helper()
	time.Sleep(wsStillSettle)
	a := p.received(session, participant, source)
	time.Sleep(wsStillFor)
	b := p.received(session, participant, source)
	if a == nil || b == nil || b.Packets != a.Packets || b.FramesDecoded != a.FramesDecoded {
		p.t.Fatalf("%s: %s still receives %s of %s: %+v, then %+v", p.name, session, source, participant, a, b)
	}
}

// A muted track sends nothing: wsStillFor without a packet (30 video frames
// a second, 50 audio packets) is proof; wsStillSettle lets what was
// already on the way arrive first.
const (
	wsStillSettle = 500 * time.Millisecond
	wsStillFor    = 1500 * time.Millisecond
)

// wsNamed keeps the events named name.
func wsNamed(evs []wsEvent, name string) []wsEvent {
	var out []wsEvent
	for _, ev := range evs {
		if ev.Name == name {
			out = append(out, ev)
		}
	}
	return out
}

// wsCutProxy is a TCP proxy in front of the media node's WebSocket
// (rtcd's --media-url points at it): a test cuts a page's media socket
// with it, as a network failure would, while the server runs on. Media
// itself (WebRTC over UDP) goes to the node directly.
type wsCutProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	target string
	conns  [][2]net.Conn // in the order they were accepted
}

// wsStartCutProxy listens on a loopback port; SetTarget says where to.
func wsStartCutProxy(t *testing.T) *wsCutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &wsCutProxy{ln: ln}
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			_ = c[0].Close()
			_ = c[1].Close()
		}
	})
	return p
}

func (p *wsCutProxy) Addr() string { return p.ln.Addr().String() }

func (p *wsCutProxy) SetTarget(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = addr
}

func (p *wsCutProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		out, err := net.Dial("tcp", target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, [2]net.Conn{in, out})
		p.mu.Unlock()
		go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
		go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
	}
}

// Cut closes the i-th connection the proxy accepted (from 0), both ways.
func (p *wsCutProxy) Cut(t *testing.T, i int) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if i >= len(p.conns) {
		t.Fatalf("the proxy carried %d connections, not %d", len(p.conns), i+1)
	}
	_ = p.conns[i][0].Close()
	_ = p.conns[i][1].Close()
}

// startJoin begins a join that may take longer than one Eval (the connect
// deadline); waitJoin waits for its result.
func (p *wsPage) startJoin(session, api, token string) {
	p.t.Helper()
	p.Eval(fmt.Sprintf("rtcdStart(%s, %s, %s)", jsQuote(session), jsQuote(api), jsQuote(token)), nil)
}

func (p *wsPage) waitJoin(session string, within time.Duration) wsResult {
	p.t.Helper()
	p.WaitTrue("the join of "+session+" to end", "window.rtcdResults["+jsQuote(session)+"] != null", within)
	var r wsResult
	p.Eval("window.rtcdResults["+jsQuote(session)+"]", &r)
	return r
}

// publishWith is publish with PublishOptions (a JavaScript object).
func (p *wsPage) publishWith(session, source, options string) wsLocal {
	p.t.Helper()
	var r wsLocal
	p.Eval(fmt.Sprintf("rtcdPublish(%s, %s, %s)", jsQuote(session), jsQuote(source), options), &r)
	return r
}
