package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goccy/go-json"
)

// Preparation bounds.
const (
	prepParallel     = 32
	prepMaxRetries   = 20
	prepMaxRetryWait = 5 * time.Second
	// mailWaitTimeout bounds the wait for the sign-in mail in the outbox.
	mailWaitTimeout = 15 * time.Second
	// maxProjects is the server's cap of projects per workspace.
	maxProjects = 100
)

// projectKey is one project and a key holding every scope in it.
type projectKey struct {
	ProjectID string
	Key       string
}

// target is the server under test.
type target struct {
	api        *apiClient
	metricsURL string // "" when not known: no server figures
	projects   []projectKey
	accountID  string
	ownerEmail string
	dataDir    string       // the local server's, for its mail outbox; "" for a remote one
	local      *localServer // nil for a remote one
	limits     projectLimits
	// mediaMetricsURL is the metrics of the process that holds the media
	// sockets ("" when not known), and mediaProcess says which process
	// that is (mediaProcessOwn or mediaProcessBuiltin).
	mediaMetricsURL string
	mediaProcess    string
}

// projectLimits is GET /v1/project/limits.
type projectLimits struct {
	ProjectID              string `json:"project_id"`
	MaxActiveRooms         int    `json:"max_active_rooms"`
	MaxActiveParticipants  int    `json:"max_active_participants"`
	MaxParticipantsPerRoom int    `json:"max_participants_per_room"`
	RoomCreatesPerMinute   int    `json:"room_creates_per_minute"`
	ParticipantCreates     int    `json:"participant_creates_per_minute"`
	ConnectRequests        int    `json:"connect_requests_per_minute"`
}

// room and participant are prepared fixtures.
type room struct {
	project int
	id      string
}

type participant struct {
	project int
	room    string
	id      string
	token   string
	connect []byte // the POST /v1/connect body
}

// connectBody is the request body of POST /v1/connect for token.
func connectBody(token string) []byte {
	return mustJSON(map[string]any{"token": token, "sdk": map[string]string{"name": "loadtest", "version": "0", "platform": "go"}})
}

// callRetry calls and retries 429 answers (after Retry-After, capped) and
// transport errors, prepMaxRetries times.
func (t *target) callRetry(ctx context.Context, method, path, key string, body []byte, headers ...string) (response, error) {
	for attempt := 0; ; attempt++ {
		r, err := t.api.call(method, path, key, body, true, headers...)
		retry := err != nil || r.Status == 429 || r.Status == 503
		if !retry || attempt >= prepMaxRetries || ctx.Err() != nil {
			if err != nil {
				return r, err
			}
			return r, ctx.Err()
		}
		wait := 200 * time.Millisecond
		if s, ok := r.Header["Retry-After"]; ok {
			if n, err := strconv.Atoi(s); err == nil {
				wait = time.Duration(n) * time.Second
			}
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(min(wait, prepMaxRetryWait)):
		}
	}
}

// expect decodes a 2xx answer into out, or describes the failure.
func expect(r response, err error, status int, what string, out any) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if r.Status != status {
		return fmt.Errorf("%s: HTTP %d %s", what, r.Status, bytes.TrimSpace(r.Body))
	}
	if out != nil {
		if err := json.Unmarshal(r.Body, out); err != nil {
			return fmt.Errorf("%s: %v", what, err)
		}
	}
	return nil
}

// loadLimits reads the first project's effective limits.
func (t *target) loadLimits(ctx context.Context) error {
	r, err := t.callRetry(ctx, "GET", "/v1/project/limits", t.projects[0].Key, nil)
	if err := expect(r, err, 200, "GET /v1/project/limits", &t.limits); err != nil {
		return err
	}
	if t.projects[0].ProjectID == "" {
		t.projects[0].ProjectID = t.limits.ProjectID
	}
	return nil
}

// ensureProjects makes n projects available: with keys given for a remote
// server (one per project), or created through a dashboard session signed
// in by the local server's mail outbox.
func (t *target) ensureProjects(ctx context.Context, n int) error {
	if n <= len(t.projects) {
		return nil
	}
	if t.local == nil {
		return fmt.Errorf("-projects %d: a remote server needs one API key per project (-api-key k1,k2,…); %d given", n, len(t.projects))
	}
	if n > maxProjects {
		return fmt.Errorf("-projects %d: a workspace holds at most %d", n, maxProjects)
	}
	session, err := t.signIn(ctx)
	if err != nil {
		return fmt.Errorf("dashboard sign-in (for -projects): %w", err)
	}
	for i := len(t.projects); i < n; i++ {
		var p struct {
			ID string `json:"id"`
		}
		r, err := t.callRetry(ctx, "POST", "/v1/accounts/"+t.accountID+"/projects", session,
			mustJSON(map[string]string{"name": fmt.Sprintf("loadtest %d", i)}))
		if err := expect(r, err, 201, "create project", &p); err != nil {
			return err
		}
		var k struct {
			Secret string `json:"secret"`
		}
		r, err = t.callRetry(ctx, "POST", "/v1/api-keys", session, mustJSON(map[string]any{
			"name": "loadtest", "scopes": []string{"rooms:read", "rooms:write", "participants:read", "participants:write",
				"project:read", "webhooks:read", "webhooks:write"}}), "X-Project-Id", p.ID)
		if err := expect(r, err, 201, "create API key", &k); err != nil {
			return err
		}
		t.projects = append(t.projects, projectKey{ProjectID: p.ID, Key: k.Secret})
	}
	return nil
}

var signInTokenPattern = regexp.MustCompile(`token=(rtc_el_[A-Za-z0-9_.\-]+)`)

// signIn signs the owner in by e-mail link, read from the outbox.
func (t *target) signIn(ctx context.Context) (string, error) {
	outbox := filepath.Join(t.dataDir, "outbox")
	before := map[string]bool{}
	entries, _ := os.ReadDir(outbox)
	for _, e := range entries {
		before[e.Name()] = true
	}
	r, err := t.callRetry(ctx, "POST", "/v1/auth/email/start", "", mustJSON(map[string]string{"email": t.ownerEmail}))
	if err := expect(r, err, 202, "POST /v1/auth/email/start", nil); err != nil {
		return "", err
	}
	deadline := time.Now().Add(mailWaitTimeout)
	var token string
	for token == "" {
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no sign-in mail in %s within %v", outbox, mailWaitTimeout)
		}
		entries, _ := os.ReadDir(outbox)
		for _, e := range entries {
			if before[e.Name()] || !strings.HasSuffix(e.Name(), ".eml") || strings.HasPrefix(e.Name(), ".") {
				continue
			}
			raw, err := os.ReadFile(filepath.Join(outbox, e.Name()))
			if err != nil {
				continue
			}
			if m := signInTokenPattern.FindStringSubmatch(mailText(raw)); m != nil {
				token = m[1]
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	var s struct {
		Token string `json:"token"`
	}
	r, err = t.callRetry(ctx, "POST", "/v1/auth/email/verify", "", mustJSON(map[string]string{"token": token}))
	if err := expect(r, err, 200, "POST /v1/auth/email/verify", &s); err != nil {
		return "", err
	}
	return s.Token, nil
}

// mailText decodes an RFC 5322 message's text parts (multipart,
// quoted-printable, base64); on any failure it returns the raw text.
func mailText(raw []byte) string {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return string(raw)
	}
	return decodeMailPart(msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body)
}

func decodeMailPart(contentType, encoding string, r io.Reader) string {
	mediaType, params, _ := mime.ParseMediaType(contentType)
	if strings.HasPrefix(mediaType, "multipart/") {
		mr := multipart.NewReader(r, params["boundary"])
		var out strings.Builder
		for {
			p, err := mr.NextRawPart()
			if err != nil {
				break
			}
			out.WriteString(decodeMailPart(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p))
		}
		return out.String()
	}
	switch strings.ToLower(encoding) {
	case "quoted-printable":
		r = quotedprintable.NewReader(r)
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, &newlineStripper{r: r})
	}
	b, _ := io.ReadAll(r)
	return string(b)
}

type newlineStripper struct{ r io.Reader }

func (n *newlineStripper) Read(p []byte) (int, error) {
	for {
		k, err := n.r.Read(p)
		j := 0
		for _, c := range p[:k] {
			if c != '\r' && c != '\n' {
				p[j] = c
				j++
			}
		}
		if j > 0 || err != nil {
			return j, err
		}
	}
}

// fixture is what a scenario runs over.
type fixture struct {
	rooms        []room
	participants []participant
}

// prepare creates nRooms rooms spread over the first nProjects projects and
// nParts participants spread over the rooms (participant i in room
// i % nRooms), all living ttl (rooms) and partTTL (participants) seconds.
func (t *target) prepare(ctx context.Context, nProjects, nRooms, nParts, roomTTL, partTTL int, log io.Writer) (*fixture, error) {
	if nRooms < 1 {
		return nil, fmt.Errorf("at least one room is needed")
	}
	if per := (nParts + nRooms - 1) / nRooms; t.limits.MaxParticipantsPerRoom > 0 && per > t.limits.MaxParticipantsPerRoom {
		return nil, fmt.Errorf("%d participants in %d rooms is %d per room, above the server's max_participants_per_room %d: use more rooms",
			nParts, nRooms, per, t.limits.MaxParticipantsPerRoom)
	}
	start := time.Now()
	f := &fixture{rooms: make([]room, nRooms), participants: make([]participant, nParts)}
	roomBody := mustJSON(map[string]any{"name": "loadtest", "expires_in": roomTTL})
	if err := parallel(ctx, nRooms, func(i int) error {
		p := i % nProjects
		var out struct {
			ID string `json:"id"`
		}
		r, err := t.callRetry(ctx, "POST", "/v1/rooms", t.projects[p].Key, roomBody)
		if err := expect(r, err, 201, "POST /v1/rooms", &out); err != nil {
			return err
		}
		f.rooms[i] = room{project: p, id: out.ID}
		return nil
	}); err != nil {
		return nil, err
	}
	partBody := mustJSON(map[string]any{"name": "loadtest", "expires_in": partTTL})
	if err := parallel(ctx, nParts, func(i int) error {
		rm := f.rooms[i%nRooms]
		var out struct {
			ID    string `json:"id"`
			Token string `json:"token"`
		}
		r, err := t.callRetry(ctx, "POST", "/v1/rooms/"+rm.id+"/participants", t.projects[rm.project].Key, partBody)
		if err := expect(r, err, 201, "POST /v1/rooms/{id}/participants", &out); err != nil {
			return err
		}
		f.participants[i] = participant{project: rm.project, room: rm.id, id: out.ID, token: out.Token, connect: connectBody(out.Token)}
		return nil
	}); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "prepared %d rooms and %d participants in %d project(s) in %v\n",
		nRooms, nParts, nProjects, time.Since(start).Round(time.Millisecond))
	return f, nil
}

// parallel runs fn(0..n-1) on prepParallel goroutines; the first error
// stops the rest.
func parallel(ctx context.Context, n int, fn func(i int) error) error {
	var next atomic.Int64
	var once sync.Once
	var first error
	var failed atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < min(prepParallel, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() && ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}
