package server

// Tests against the real server: TestMain builds cmd/rtcd from the
// repository this module sits in, initialises a data directory and runs
// `rtcd serve` on free loopback ports. The examples use the same server
// through RTCD_BASE_URL and RTCD_API_KEY, which TestMain sets.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rtcdServer is one running `rtcd serve`.
type rtcdServer struct {
	Base      string // http://127.0.0.1:port
	APIKey    string
	APIKeyID  string
	ProjectID string
	AccountID string
	cmd       *exec.Cmd
	exited    chan struct{}
	waitErr   error
	logPath   string
}

var (
	rtcdBin string      // the built binary
	mainSrv *rtcdServer // the server most tests and the examples use
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "rtcd-sdk-server-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if rtcdBin, err = buildRTCD(tmp); err != nil {
		fmt.Fprintln(os.Stderr, "building rtcd:", err)
		return 1
	}
	// The first automatic webhook retry is a day away: TestWebhookDelivery
	// counts attempts and retries by hand, and the default 10 s would add
	// an attempt of its own whenever the test runs slowly.
	mainSrv, err = startRTCD(filepath.Join(tmp, "main"), nil, []string{"--webhook-allow-private", "--webhook-retry-schedule=86400"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting rtcd:", err)
		return 1
	}
	defer mainSrv.stop()
	os.Setenv("RTCD_BASE_URL", mainSrv.Base)
	os.Setenv("RTCD_API_KEY", mainSrv.APIKey)
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" && flag.Lookup("test.skip").Value.String() == "" {
		if err := checkRouteCoverage(); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: route coverage:", err)
			code = 1
		}
	}
	if code != 0 {
		if b, err := os.ReadFile(mainSrv.logPath); err == nil && len(b) > 0 {
			fmt.Fprintf(os.Stderr, "--- rtcd log ---\n%s\n", b)
		}
	}
	return code
}

// repoRoot walks up from the working directory to the directory holding cmd/rtcd.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if st, err := os.Stat(filepath.Join(dir, "cmd", "rtcd")); err == nil && st.IsDir() {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no cmd/rtcd above the working directory")
		}
		dir = parent
	}
}

func buildRTCD(tmp string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(tmp, "rtcd")
	cmd := exec.Command(goTool, "build", "-o", bin, "./cmd/rtcd")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/rtcd: %v\n%s", err, out)
	}
	return bin, nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startRTCD runs `rtcd init` on dataDir (with initFlags), then `rtcd serve`
// (with serveFlags) on free ports, and waits until it answers. A port
// picked free can be taken before the server binds it: then it retries.
func startRTCD(dataDir string, initFlags, serveFlags []string) (*rtcdServer, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(rtcdBin, append([]string{"init", "--data-dir", dataDir, "--log-level", "error"}, initFlags...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("rtcd init: %v\n%s", err, stderr.String())
	}
	var creds struct {
		AccountID string `json:"account_id"`
		ProjectID string `json:"project_id"`
		APIKeyID  string `json:"api_key_id"`
		APIKey    string `json:"api_key"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &creds); err != nil || creds.APIKey == "" {
		return nil, fmt.Errorf("rtcd init printed %q: %v", stdout.String(), err)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		api, err1 := freeAddr()
		metrics, err2 := freeAddr()
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		logf, err := os.CreateTemp(filepath.Dir(dataDir), "rtcd-*.log")
		if err != nil {
			return nil, err
		}
		args := append([]string{"serve", "--data-dir", dataDir, "--listen", api, "--metrics-listen", metrics,
			"--media-listen", "127.0.0.1:0", "--log-level", "error"}, serveFlags...)
		s := &rtcdServer{Base: "http://" + api, APIKey: creds.APIKey, APIKeyID: creds.APIKeyID, ProjectID: creds.ProjectID,
			AccountID: creds.AccountID, cmd: exec.Command(rtcdBin, args...), exited: make(chan struct{}), logPath: logf.Name()}
		s.cmd.Stdout, s.cmd.Stderr = logf, logf
		if err := s.cmd.Start(); err != nil {
			logf.Close()
			return nil, err
		}
		go func() { s.waitErr = s.cmd.Wait(); logf.Close(); close(s.exited) }()
		if lastErr = s.waitReady(30 * time.Second); lastErr == nil {
			return s, nil
		}
		s.stop()
	}
	return nil, lastErr
}

func (s *rtcdServer) waitReady(within time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			b, _ := os.ReadFile(s.logPath)
			return fmt.Errorf("rtcd serve exited during start: %v\n%s", s.waitErr, b)
		default:
		}
		req, _ := http.NewRequest(http.MethodGet, s.Base+"/v1/system/info", nil)
		req.Header.Set("Authorization", "Bearer "+s.APIKey)
		if res, err := hc.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("rtcd serve did not answer in time")
}

// stop ends the server: an interrupt (graceful), then a kill.
func (s *rtcdServer) stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// startExtra starts another server for one test, stopped at its end.
func startExtra(t *testing.T, initFlags, serveFlags []string) *rtcdServer {
	t.Helper()
	s, err := startRTCD(filepath.Join(t.TempDir(), "data"), initFlags, serveFlags)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	return s
}

// --- route coverage ----------------------------------------------------------

// sdkRoutes is every route the SDK covers: every public /v1 route except
// /v1/connect, the dashboard routes, the payment provider's callback and
// the payer-facing HTML pages.
var sdkRoutes = []string{
	"POST /v1/rooms", "GET /v1/rooms", "GET /v1/rooms/{}", "DELETE /v1/rooms/{}",
	"POST /v1/rooms/{}/participants", "GET /v1/rooms/{}/participants",
	"GET /v1/rooms/{}/participants/{}", "DELETE /v1/rooms/{}/participants/{}",
	"POST /v1/api-keys", "GET /v1/api-keys", "DELETE /v1/api-keys/{}",
	"GET /v1/project/limits", "GET /v1/audit-logs", "GET /v1/system/info",
	"GET /v1/usage/summary", "GET /v1/usage/daily",
	"GET /v1/billing/balance", "GET /v1/billing/pricing", "GET /v1/billing/ledger",
	"POST /v1/billing/topups", "GET /v1/billing/topups", "GET /v1/billing/topups/{}",
	"POST /v1/webhook-endpoints", "GET /v1/webhook-endpoints", "DELETE /v1/webhook-endpoints/{}",
	"GET /v1/webhook-endpoints/{}/deliveries", "POST /v1/webhook-endpoints/{}/deliveries/{}/retry",
}

// notForServerSDKs are the public /v1 routes of http/routes.go and
// http/billing.go the server SDK leaves out on purpose (spec 9.6).
var notForServerSDKs = []string{"/v1/connect", "/v1/billing/providers/{}/webhook", "/v1/billing/return"}

var (
	calledMu sync.Mutex
	called   = map[string]bool{} // "METHOD /v1/path with ids as {}"
	idSeg    = regexp.MustCompile(`/(room|part|key|pay|we|wdl)_[^/]+`)
)

// recordingTransport records the route of every request the tests send.
type recordingTransport struct{ base http.RoundTripper }

func (rt recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	calledMu.Lock()
	called[r.Method+" "+idSeg.ReplaceAllString(r.URL.EscapedPath(), "/{}")] = true
	calledMu.Unlock()
	return rt.base.RoundTrip(r)
}

// checkRouteCoverage checks that the tests called every route the SDK
// covers, and that the server's route files name no public /v1 route the
// SDK neither covers nor leaves out on purpose.
func checkRouteCoverage() error {
	var problems []string
	for _, r := range sdkRoutes {
		if !called[r] {
			problems = append(problems, "not exercised: "+r)
		}
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, r := range sdkRoutes {
		known[r[strings.IndexByte(r, ' ')+1:]] = true
	}
	for _, p := range notForServerSDKs {
		known[p] = true
	}
	literal := regexp.MustCompile(`"(/v1/[^"]*)"`)
	param := regexp.MustCompile(`\{[a-z_]+\}`)
	for _, f := range []string{"routes.go", "billing.go"} {
		src, err := os.ReadFile(filepath.Join(root, "http", f))
		if err != nil {
			return err
		}
		for _, m := range literal.FindAllStringSubmatch(string(src), -1) {
			if p := param.ReplaceAllString(m[1], "{}"); !known[p] {
				problems = append(problems, "server route not covered by the SDK: "+m[1]+" (http/"+f+")")
			}
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func clientFor(t *testing.T, s *rtcdServer, key string, opts ...Option) *Client {
	t.Helper()
	hc := &http.Client{Timeout: 20 * time.Second, Transport: recordingTransport{base: http.DefaultTransport}}
	c, err := New(key, append([]Option{WithBaseURL(s.Base), WithHTTPClient(hc)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wantAPIError asserts err is an *APIError with status and code, and returns it.
func wantAPIError(t *testing.T, err error, status int, code string) *APIError {
	t.Helper()
	var apiErr *APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("want %d %s, got %v", status, code, err)
	}
	if apiErr.Status != status || apiErr.Code != code {
		t.Fatalf("want %d %s, got %v (details %v)", status, code, apiErr, apiErr.Details)
	}
	if !strings.HasPrefix(apiErr.RequestID, "req_") || apiErr.Message == "" || apiErr.Details == nil {
		t.Fatalf("incomplete error %#v", apiErr)
	}
	return apiErr
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRoomsAndParticipants(t *testing.T) {
	ctx := context.Background()
	c := clientFor(t, mainSrv, mainSrv.APIKey)

	room, err := c.CreateRoom(ctx, &CreateRoomParams{
		Name: String("standup"), MaxParticipants: Int(5), ExpiresIn: Int(3600), Region: String("global"),
		Metadata: Metadata{"team": "core", "big": json.Number("123456789012345678901234567890")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(room.ID, "room_") || room.Name == nil || *room.Name != "standup" || room.Status != RoomStatusWaiting ||
		room.Region != "global" || room.MaxParticipants != 5 || room.Metadata["team"] != "core" ||
		room.Metadata["big"] != json.Number("123456789012345678901234567890") || room.EndedAt != nil || room.EndReason != nil {
		t.Fatalf("room %+v", room)
	}
	if d := room.ExpiresAt.Sub(room.CreatedAt); d != time.Hour {
		t.Fatalf("expires_at - created_at = %v", d)
	}
	// A nil params pointer creates a room with the defaults.
	plain, err := c.CreateRoom(ctx, nil)
	if err != nil || plain.Name != nil || plain.MaxParticipants != 100 || len(plain.Metadata) != 0 {
		t.Fatalf("plain room %+v, %v", plain, err)
	}
	got, err := c.GetRoom(ctx, room.ID)
	if err != nil || got.ID != room.ID || !got.CreatedAt.Equal(room.CreatedAt) {
		t.Fatalf("get %+v, %v", got, err)
	}
	page, err := c.ListRooms(ctx, 1)
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != plain.ID || !page.HasMore {
		t.Fatalf("list(1) %+v, %v", page, err)
	}
	page, err = c.ListRooms(ctx, 0) // the server's default
	if err != nil || !slices.ContainsFunc(page.Data, func(r Room) bool { return r.ID == room.ID }) {
		t.Fatalf("list(0) %+v, %v", page, err)
	}

	// Idempotency: the same key and body replay; another body is a conflict.
	key := "sdk-test-" + room.ID
	p := &CreateRoomParams{Name: String("idem")}
	r1, err := c.CreateRoom(ctx, p, WithIdempotencyKey(key))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.CreateRoom(ctx, p, WithIdempotencyKey(key))
	if err != nil || r2.ID != r1.ID {
		t.Fatalf("replay gave %+v, %v; want room %s", r2, err, r1.ID)
	}
	_, err = c.CreateRoom(ctx, &CreateRoomParams{Name: String("other")}, WithIdempotencyKey(key))
	if e := wantAPIError(t, err, 409, CodeConflict); e.DetailString("reason") != "idempotency_key_reused" {
		t.Fatalf("details %v", e.Details)
	}

	// Participants.
	ps, err := c.CreateParticipant(ctx, room.ID, &CreateParticipantParams{
		ExternalID: String("user-42"), Name: String("Ann"), Role: String(RoleSubscriber), ExpiresIn: Int(600),
		Metadata: Metadata{"seat": json.Number("3")},
	}, WithIdempotencyKey("part-"+room.ID))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ps.ID, "part_") || ps.RoomID != room.ID || !strings.HasPrefix(ps.Token, "rtc_pt_") ||
		ps.Role != RoleSubscriber || ps.Status != "created" || *ps.ExternalID != "user-42" || *ps.Name != "Ann" ||
		ps.Metadata["seat"] != json.Number("3") || ps.JoinURL != "" {
		t.Fatalf("participant %+v", ps)
	}
	publisher, err := c.CreateParticipant(ctx, room.ID, nil)
	if err != nil || publisher.Role != RolePublisher {
		t.Fatalf("default participant %+v, %v", publisher, err)
	}
	gp, err := c.GetParticipant(ctx, room.ID, ps.ID)
	if err != nil || gp.ID != ps.ID || gp.ConnectedAt != nil {
		t.Fatalf("get participant %+v, %v", gp, err)
	}
	pp, err := c.ListParticipants(ctx, room.ID, 1)
	if err != nil || len(pp.Data) != 1 || pp.Data[0].ID != publisher.ID || !pp.HasMore {
		t.Fatalf("list participants %+v, %v", pp, err)
	}
	removed, err := c.DeleteParticipant(ctx, room.ID, ps.ID)
	if err != nil || removed.Status != "removed" || removed.EndedAt == nil {
		t.Fatalf("delete participant %+v, %v", removed, err)
	}
	if again, err := c.DeleteParticipant(ctx, room.ID, ps.ID); err != nil || again.Status != "removed" {
		t.Fatalf("delete participant again %+v, %v", again, err)
	}
	_, err = c.GetParticipant(ctx, room.ID, "part_aaaaaaaaaaaaaaaaaaaaaaaa")
	wantAPIError(t, err, 404, CodeParticipantNotFound)

	// Deleting the room ends it; it admits nobody afterwards.
	ended, err := c.DeleteRoom(ctx, room.ID)
	if err != nil || (ended.Status != RoomStatusEnding && ended.Status != RoomStatusEnded) || ended.EndReason == nil || *ended.EndReason != "deleted" {
		t.Fatalf("delete room %+v, %v", ended, err)
	}
	if _, err := c.DeleteRoom(ctx, room.ID); err != nil {
		t.Fatalf("delete room again: %v", err)
	}
	_, err = c.CreateParticipant(ctx, room.ID, nil)
	wantAPIError(t, err, 410, CodeRoomEnded)
	eventually(t, 10*time.Second, "the room to end", func() bool {
		r, err := c.GetRoom(ctx, room.ID)
		return err == nil && r.Status == RoomStatusEnded && r.EndedAt != nil
	})
	for _, id := range []string{plain.ID, r1.ID} {
		if _, err := c.DeleteRoom(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	c := clientFor(t, mainSrv, mainSrv.APIKey)

	// 400: a field breaking its rule, a bad limit, bad usage dates.
	_, err := c.CreateRoom(ctx, &CreateRoomParams{ExpiresIn: Int(5)})
	if e := wantAPIError(t, err, 400, CodeInvalidRequest); e.DetailString("field") != "expires_in" {
		t.Fatalf("details %v", e.Details)
	}
	_, err = c.CreateRoom(ctx, &CreateRoomParams{Region: String("mars")})
	wantAPIError(t, err, 400, CodeInvalidRequest)
	_, err = c.ListRooms(ctx, 101)
	if e := wantAPIError(t, err, 400, CodeInvalidRequest); e.DetailString("field") != "limit" {
		t.Fatalf("details %v", e.Details)
	}
	_, err = c.GetUsageSummary(ctx, "2026-13-01", "2026-12-01")
	if e := wantAPIError(t, err, 400, CodeInvalidRequest); e.DetailString("field") != "from" {
		t.Fatalf("details %v", e.Details)
	}

	// 401: an unknown key, and the error has WWW-Authenticate's meaning only.
	bad := clientFor(t, mainSrv, "sk_live_notarealkeynotarealkeynotarealkey12345")
	_, err = bad.GetSystemInfo(ctx)
	wantAPIError(t, err, 401, CodeAuthenticationFailed)

	// 404s.
	_, err = c.GetRoom(ctx, "room_aaaaaaaaaaaaaaaaaaaaaaaa")
	wantAPIError(t, err, 404, CodeRoomNotFound)
	_, err = c.GetRoom(ctx, "not-an-id")
	wantAPIError(t, err, 404, CodeRoomNotFound)
	_, err = c.GetTopup(ctx, "pay_aaaaaaaaaaaaaaaaaaaaaaaa")
	if e := wantAPIError(t, err, 404, CodeInvalidRequest); e.DetailString("field") != "payment_id" {
		t.Fatalf("details %v", e.Details)
	}
	_, err = c.RevokeAPIKey(ctx, "key_aaaaaaaaaaaaaaaaaaaaaaaa")
	wantAPIError(t, err, 404, CodeAPIKeyNotFound)
	_, err = c.DisableWebhookEndpoint(ctx, "we_aaaaaaaaaaaaaaaaaaaaaaaa")
	wantAPIError(t, err, 404, CodeWebhookEndpointNotFound)
	_, err = c.ListWebhookDeliveries(ctx, "we_aaaaaaaaaaaaaaaaaaaaaaaa", 10)
	wantAPIError(t, err, 404, CodeWebhookEndpointNotFound)

	// A path segment with reserved characters stays one segment.
	_, err = c.GetRoom(ctx, "room_a/../../system/info")
	wantAPIError(t, err, 404, CodeRoomNotFound)
}

func TestAPIKeys(t *testing.T) {
	ctx := context.Background()
	c := clientFor(t, mainSrv, mainSrv.APIKey)

	created, err := c.CreateAPIKey(ctx, &CreateAPIKeyParams{Name: String("reader"), Scopes: []string{ScopeRoomsRead}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(created.ID, "key_") || !strings.HasPrefix(created.Secret, "sk_live_") ||
		created.Last4 != created.Secret[len(created.Secret)-4:] || created.Status != "active" ||
		!slices.Equal(created.Scopes, []string{ScopeRoomsRead}) || *created.Name != "reader" || created.LastUsedAt != nil {
		t.Fatalf("created key %+v", created)
	}
	keys, err := c.ListAPIKeys(ctx, 100)
	if err != nil || !slices.ContainsFunc(keys.Data, func(k APIKey) bool { return k.ID == created.ID && k.Status == "active" }) {
		t.Fatalf("list keys %+v, %v", keys, err)
	}

	// 403: the reader key lacks rooms:write and api_keys:write.
	reader := clientFor(t, mainSrv, created.Secret)
	usedFrom := time.Now().Truncate(time.Millisecond) // the server shows milliseconds
	if _, err := reader.ListRooms(ctx, 1); err != nil {
		t.Fatalf("reader lists rooms: %v", err)
	}
	usedBy := time.Now()
	// Its use reaches the list shortly after the request (the server
	// records it without making the request wait).
	var lastUsed *time.Time
	eventually(t, 10*time.Second, "the reader key's use to be listed", func() bool {
		keys, err := c.ListAPIKeys(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(keys.Data, func(k APIKey) bool { return k.ID == created.ID })
		if i < 0 {
			t.Fatalf("key %s not listed", created.ID)
		}
		lastUsed = keys.Data[i].LastUsedAt
		return lastUsed != nil
	})
	if lastUsed.Before(usedFrom) || lastUsed.After(usedBy) {
		t.Fatalf("last_used_at %v, want the use between %v and %v", lastUsed, usedFrom, usedBy)
	}
	_, err = reader.CreateRoom(ctx, nil)
	if e := wantAPIError(t, err, 403, CodePermissionDenied); e.DetailString("required_scope") != ScopeRoomsWrite {
		t.Fatalf("details %v", e.Details)
	}
	_, err = reader.CreateAPIKey(ctx, &CreateAPIKeyParams{Scopes: []string{ScopeRoomsRead}})
	wantAPIError(t, err, 403, CodePermissionDenied)

	// 400: an empty or unknown scopes list.
	_, err = c.CreateAPIKey(ctx, &CreateAPIKeyParams{Scopes: []string{}})
	wantAPIError(t, err, 400, CodeInvalidRequest)
	_, err = c.CreateAPIKey(ctx, &CreateAPIKeyParams{Scopes: []string{"rooms:fly"}})
	wantAPIError(t, err, 400, CodeInvalidRequest)

	// 409: the key the client authenticates with cannot revoke itself.
	_, err = c.RevokeAPIKey(ctx, mainSrv.APIKeyID)
	if e := wantAPIError(t, err, 409, CodeConflict); e.DetailString("reason") != "cannot_revoke_current_key" {
		t.Fatalf("details %v", e.Details)
	}

	revoked, err := c.RevokeAPIKey(ctx, created.ID)
	if err != nil || revoked.Status != "revoked" || revoked.RevokedAt == nil {
		t.Fatalf("revoke %+v, %v", revoked, err)
	}
	if revoked.LastUsedAt == nil || revoked.LastUsedAt.Before(*lastUsed) {
		t.Fatalf("revoked key's last_used_at %v, want the use listed (%v) or a later one", revoked.LastUsedAt, lastUsed)
	}
	_, err = reader.ListRooms(ctx, 1)
	wantAPIError(t, err, 401, CodeAuthenticationFailed)

	// Creating a key is idempotent with a key too.
	k1, err := c.CreateAPIKey(ctx, &CreateAPIKeyParams{Scopes: []string{ScopeUsageRead}}, WithIdempotencyKey("apikey-"+created.ID))
	if err != nil {
		t.Fatal(err)
	}
	k2, err := c.CreateAPIKey(ctx, &CreateAPIKeyParams{Scopes: []string{ScopeUsageRead}}, WithIdempotencyKey("apikey-"+created.ID))
	if err != nil || k2.ID != k1.ID || k2.Secret != k1.Secret {
		t.Fatalf("replayed key %+v, %v", k2, err)
	}
	if _, err := c.RevokeAPIKey(ctx, k1.ID); err != nil {
		t.Fatal(err)
	}
}

func TestProjectUsageAndSystem(t *testing.T) {
	ctx := context.Background()
	c := clientFor(t, mainSrv, mainSrv.APIKey)

	info, err := c.GetSystemInfo(ctx)
	if err != nil || info.Service != "rtcd" || info.APIVersion != APIVersion || info.Region != "global" || info.Version == "" {
		t.Fatalf("system info %+v, %v", info, err)
	}
	limits, err := c.GetProjectLimits(ctx)
	if err != nil || limits.ProjectID != mainSrv.ProjectID || limits.MaxActiveRooms <= 0 || limits.MaxParticipantsPerRoom != 100 ||
		limits.RoomCreatesPerMinute <= 0 || limits.ParticipantCreatesPerMinute <= 0 || limits.ConnectRequestsPerMinute <= 0 ||
		limits.MaxActiveParticipants <= 0 {
		t.Fatalf("limits %+v, %v", limits, err)
	}
	logs, err := c.ListAuditLogs(ctx, 100)
	if err != nil || len(logs.Data) == 0 {
		t.Fatalf("audit logs %+v, %v", logs, err)
	}
	if !slices.ContainsFunc(logs.Data, func(e AuditLogEntry) bool {
		return e.Action == "api_key.created" && e.Target.Type == "api_key" && e.Target.ID == mainSrv.APIKeyID && e.Actor.Type == "operator"
	}) {
		t.Fatalf("no bootstrap api_key.created entry in %+v", logs.Data)
	}

	now := time.Now()
	today, yesterday := Day(now), Day(now.AddDate(0, 0, -1))
	sum, err := c.GetUsageSummary(ctx, today, today)
	if err != nil || sum.ProjectID != mainSrv.ProjectID || !sum.FinalizedOnly || sum.Period.To.Sub(sum.Period.From) != 24*time.Hour ||
		Day(sum.Period.From) != today || sum.ParticipantSeconds != 0 {
		t.Fatalf("usage summary %+v, %v", sum, err)
	}
	daily, err := c.GetUsageDaily(ctx, yesterday, today)
	if err != nil || len(daily.Data) != 2 || daily.Data[0].Date != yesterday || daily.Data[1].Date != today || !daily.FinalizedOnly {
		t.Fatalf("usage daily %+v, %v", daily, err)
	}
}

func TestBilling(t *testing.T) {
	ctx := context.Background()
	c := clientFor(t, mainSrv, mainSrv.APIKey)

	bal, err := c.GetBalance(ctx)
	if err != nil || bal.Currency != "USD" || bal.Available != "10.00" || bal.Reserved != "0.00" {
		t.Fatalf("balance %+v, %v", bal, err)
	}
	pr, err := c.GetPricing(ctx)
	if err != nil || pr.CreditState != CreditStateNormal || !pr.BillingEnabled || pr.ParticipantMinutePrice != "0.004000" ||
		pr.MinimumCreditToStart != "1.00" || pr.LowCreditThreshold != "5.00" || pr.Currency != "USD" {
		t.Fatalf("pricing %+v, %v", pr, err)
	}
	ledger, err := c.ListLedgerEntries(ctx, 10)
	if err != nil || len(ledger.Data) == 0 || ledger.HasMore {
		t.Fatalf("ledger %+v, %v", ledger, err)
	}
	opening := ledger.Data[len(ledger.Data)-1]
	if opening.Type != "adjustment" || opening.Amount != "10.000000" || opening.BalanceAfter != "10.000000" || opening.Reference["type"] != "operator" {
		t.Fatalf("opening entry %+v", opening)
	}

	top, err := c.CreateTopup(ctx, &CreateTopupParams{Amount: "25.00", Method: String(TopupMethodCard)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(top.PaymentID, "pay_") || top.Status != "pending" || top.Amount != "25.00" || top.Method != TopupMethodCard ||
		top.AuthorizeURL == "" || top.ReceiptURL != "" || top.CompletedAt != nil || top.Provider != "sandbox" {
		t.Fatalf("top-up %+v", top)
	}
	got, err := c.GetTopup(ctx, top.PaymentID)
	if err != nil || got.PaymentID != top.PaymentID || got.AuthorizeURL != top.AuthorizeURL {
		t.Fatalf("get top-up %+v, %v", got, err)
	}
	tops, err := c.ListTopups(ctx, 5)
	if err != nil || len(tops.Data) == 0 || tops.Data[0].PaymentID != top.PaymentID {
		t.Fatalf("list top-ups %+v, %v", tops, err)
	}
	for _, amount := range []string{"1.00", "5.001", "10000.01"} {
		_, err = c.CreateTopup(ctx, &CreateTopupParams{Amount: amount})
		if e := wantAPIError(t, err, 400, CodeInvalidRequest); e.DetailString("field") != "amount" {
			t.Fatalf("%s: details %v", amount, e.Details)
		}
	}
}

// TestRateLimited runs a server whose projects may create one room a minute.
func TestRateLimited(t *testing.T) {
	s := startExtra(t, nil, []string{"--default-room-creates-per-minute=1"})
	ctx := context.Background()
	c := clientFor(t, s, s.APIKey, WithRetries(0))
	// Two creates within one clock minute get a 429; three tries make sure
	// two of them share a minute.
	var apiErr *APIError
	for i := 0; i < 3 && apiErr == nil; i++ {
		_, err := c.CreateRoom(ctx, nil)
		if err != nil {
			apiErr = wantAPIError(t, err, 429, CodeRateLimited)
		}
	}
	if apiErr == nil {
		t.Fatal("no 429 after three room creations")
	}
	if apiErr.RetryAfter <= 0 || apiErr.RetryAfter > time.Minute || apiErr.DetailString("limit_name") != "room_creates_per_minute" {
		t.Fatalf("429 %+v", apiErr)
	}

	// With retries, the SDK waits what Retry-After says (the injected
	// backoff records it and does not sleep).
	rec := &recorder{}
	cr := clientFor(t, s, s.APIKey, WithRetries(1), WithBackoff(rec.backoff))
	_, err := cr.CreateRoom(ctx, nil)
	if len(rec.calls) != 1 || rec.calls[0][1] <= 0 || rec.calls[0][1] > time.Minute {
		t.Fatalf("backoff calls %v (err %v)", rec.calls, err)
	}
}

// TestInsufficientCredit runs a server whose workspace starts without
// credit: participant creation gets 402 until a top-up is paid.
func TestInsufficientCredit(t *testing.T) {
	credit := []string{"--bootstrap-credit=0", "--minimum-credit-to-start=1.00"}
	s := startExtra(t, credit, credit)
	ctx := context.Background()
	c := clientFor(t, s, s.APIKey)

	pr, err := c.GetPricing(ctx)
	if err != nil || pr.CreditState != CreditStateExhausted {
		t.Fatalf("pricing %+v, %v", pr, err)
	}
	room, err := c.CreateRoom(ctx, nil) // rooms are not gated
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateParticipant(ctx, room.ID, nil)
	wantAPIError(t, err, 402, CodeInsufficientCredit)

	// Pay a top-up through the sandbox checkout, as its Pay button does.
	top, err := c.CreateTopup(ctx, &CreateTopupParams{Amount: "5.00"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.PostForm(top.AuthorizeURL, url.Values{"outcome": {"succeeded"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("sandbox checkout answered %d", res.StatusCode)
	}
	eventually(t, 10*time.Second, "the top-up to succeed", func() bool {
		got, err := c.GetTopup(ctx, top.PaymentID)
		return err == nil && got.Status == "succeeded" && got.ReceiptURL != "" && got.CompletedAt != nil
	})
	bal, err := c.GetBalance(ctx)
	if err != nil || bal.Available != "5.00" {
		t.Fatalf("balance %+v, %v", bal, err)
	}
	if ps, err := c.CreateParticipant(ctx, room.ID, nil); err != nil || !strings.HasPrefix(ps.Token, "rtc_pt_") {
		t.Fatalf("participant after the top-up: %+v, %v", ps, err)
	}
	ledger, err := c.ListLedgerEntries(ctx, 0)
	if err != nil || len(ledger.Data) != 1 || ledger.Data[0].Type != "topup" || ledger.Data[0].Amount != "5.000000" {
		t.Fatalf("ledger %+v, %v", ledger, err)
	}
}

// received is one delivery the test receiver got.
type received struct {
	body   []byte
	header http.Header
}

// TestWebhookDelivery receives real deliveries from the server and
// verifies them with VerifyWebhook; it also lists and retries deliveries.
func TestWebhookDelivery(t *testing.T) {
	ctx := context.Background()
	c := clientFor(t, mainSrv, mainSrv.APIKey)

	var fail atomic.Bool
	fail.Store(true) // the first attempts fail, so there is a delivery to retry
	got := make(chan received, 100)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- received{body: body, header: r.Header.Clone()}
		if fail.Load() {
			http.Error(w, "not yet", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	ep, err := c.CreateWebhookEndpoint(ctx, &CreateWebhookEndpointParams{URL: receiver.URL + "/hooks", Events: []string{EventRoomEnded}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ep.ID, "we_") || !strings.HasPrefix(ep.SigningSecret, "whsec_") || ep.Status != "enabled" ||
		!slices.Equal(ep.Events, []string{EventRoomEnded}) || ep.DisabledAt != nil {
		t.Fatalf("endpoint %+v", ep)
	}
	eps, err := c.ListWebhookEndpoints(ctx, 16)
	if err != nil || !slices.ContainsFunc(eps.Data, func(e WebhookEndpoint) bool { return e.ID == ep.ID }) {
		t.Fatalf("list endpoints %+v, %v", eps, err)
	}
	_, err = c.CreateWebhookEndpoint(ctx, &CreateWebhookEndpointParams{URL: "ftp://example.com/x"})
	if e := wantAPIError(t, err, 400, CodeInvalidRequest); e.DetailString("field") != "url" {
		t.Fatalf("details %v", e.Details)
	}

	room, err := c.CreateRoom(ctx, &CreateRoomParams{Name: String("hooked")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteRoom(ctx, room.ID); err != nil {
		t.Fatal(err)
	}

	// waitFor returns the next verified delivery of room.ended for our room
	// (other tests' rooms may end while the endpoint exists).
	waitFor := func(eventID string) (received, *WebhookEvent) {
		t.Helper()
		timeout := time.After(15 * time.Second)
		for {
			select {
			case d := <-got:
				ev, err := VerifyWebhook(ep.SigningSecret, d.body, d.header, 0, time.Now())
				if err != nil {
					t.Fatalf("a real delivery did not verify: %v\n%s\n%v", err, d.body, d.header)
				}
				var data struct {
					RoomID string `json:"room_id"`
					Reason string `json:"reason"`
				}
				if err := ev.DecodeData(&data); err != nil {
					t.Fatal(err)
				}
				if data.RoomID == room.ID && (eventID == "" || ev.ID == eventID) {
					if ev.Type != EventRoomEnded || data.Reason != "deleted" || ev.ProjectID != mainSrv.ProjectID ||
						d.header.Get(HeaderWebhookID) != ev.ID || d.header.Get("User-Agent") != "rtcd-Webhooks/0.1" ||
						d.header.Get("Content-Type") != "application/json" {
						t.Fatalf("delivery %s %v", d.body, d.header)
					}
					return d, ev
				}
			case <-timeout:
				t.Fatal("no delivery for the room")
			}
		}
	}
	first, ev := waitFor("")

	// The failed first attempt leaves the delivery retrying; retry it now.
	var delivery WebhookDelivery
	eventually(t, 10*time.Second, "the delivery to be retrying", func() bool {
		page, err := c.ListWebhookDeliveries(ctx, ep.ID, 100)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(page.Data, func(d WebhookDelivery) bool { return d.EventID == ev.ID })
		if i < 0 || page.Data[i].Status != "retrying" {
			return false
		}
		delivery = page.Data[i]
		return true
	})
	if delivery.AttemptCount != 1 || len(delivery.Attempts) != 1 || delivery.Attempts[0].ResponseStatus != 500 ||
		delivery.Attempts[0].Error == nil || delivery.NextAttemptAt == nil || delivery.EventType != EventRoomEnded || delivery.EndpointID != ep.ID {
		t.Fatalf("delivery %+v", delivery)
	}
	fail.Store(false)
	retried, err := c.RetryWebhookDelivery(ctx, ep.ID, delivery.ID)
	if err != nil || retried.ID != delivery.ID || retried.Status != "retrying" {
		t.Fatalf("retry %+v, %v", retried, err)
	}
	second, _ := waitFor(ev.ID)
	if !bytes.Equal(first.body, second.body) {
		t.Fatalf("the retry sent another body:\n%s\n%s", first.body, second.body)
	}
	eventually(t, 10*time.Second, "the delivery to succeed", func() bool {
		page, err := c.ListWebhookDeliveries(ctx, ep.ID, 100)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(page.Data, func(d WebhookDelivery) bool { return d.ID == delivery.ID })
		return i >= 0 && page.Data[i].Status == "succeeded" && page.Data[i].AttemptCount == 2 && page.Data[i].NextAttemptAt == nil
	})
	_, err = c.RetryWebhookDelivery(ctx, ep.ID, delivery.ID)
	wantAPIError(t, err, 409, CodeConflict)
	_, err = c.RetryWebhookDelivery(ctx, ep.ID, "wdl_aaaaaaaaaaaaaaaaaaaaaaaa")
	if e := wantAPIError(t, err, 404, CodeInvalidRequest); e.DetailString("field") != "delivery_id" {
		t.Fatalf("details %v", e.Details)
	}

	// A real delivery altered, checked with another secret, or replayed late.
	tampered := bytes.Replace(second.body, []byte(`"deleted"`), []byte(`"expired"`), 1)
	if _, err := VerifyWebhook(ep.SigningSecret, tampered, second.header, 0, time.Now()); !errors.Is(err, ErrWebhookSignatureMismatch) {
		t.Fatalf("tampered body: %v", err)
	}
	if _, err := VerifyWebhook("whsec_"+strings.Repeat("A", 43), second.body, second.header, 0, time.Now()); !errors.Is(err, ErrWebhookSignatureMismatch) {
		t.Fatalf("wrong secret: %v", err)
	}
	if _, err := VerifyWebhook(ep.SigningSecret, second.body, second.header, 0, time.Now().Add(6*time.Minute)); !errors.Is(err, ErrWebhookTimestampOutsideTolerance) {
		t.Fatalf("stale timestamp: %v", err)
	}
	if _, err := VerifyWebhook(ep.SigningSecret, second.body, second.header, time.Hour, time.Now().Add(6*time.Minute)); err != nil {
		t.Fatalf("wider tolerance: %v", err)
	}

	// Disabling is final and idempotent; a disabled endpoint's deliveries
	// cannot be retried.
	disabled, err := c.DisableWebhookEndpoint(ctx, ep.ID)
	if err != nil || disabled.Status != "disabled" || disabled.DisabledAt == nil {
		t.Fatalf("disable %+v, %v", disabled, err)
	}
	if again, err := c.DisableWebhookEndpoint(ctx, ep.ID); err != nil || !again.DisabledAt.Equal(*disabled.DisabledAt) {
		t.Fatalf("disable again %+v, %v", again, err)
	}
	_, err = c.RetryWebhookDelivery(ctx, ep.ID, delivery.ID)
	wantAPIError(t, err, 409, CodeConflict)
	if page, err := c.ListWebhookDeliveries(ctx, ep.ID, 0); err != nil || len(page.Data) == 0 {
		t.Fatalf("deliveries of a disabled endpoint %+v, %v", page, err)
	}

	// An endpoint created with an Idempotency-Key replays its secret.
	key := "ep-" + ep.ID
	p := &CreateWebhookEndpointParams{URL: receiver.URL + "/all"}
	e1, err := c.CreateWebhookEndpoint(ctx, p, WithIdempotencyKey(key))
	if err != nil || len(e1.Events) != 13 {
		t.Fatalf("endpoint for every event %+v, %v", e1, err)
	}
	e2, err := c.CreateWebhookEndpoint(ctx, p, WithIdempotencyKey(key))
	if err != nil || e2.ID != e1.ID || e2.SigningSecret != e1.SigningSecret {
		t.Fatalf("replayed endpoint %+v, %v", e2, err)
	}
	if _, err := c.DisableWebhookEndpoint(ctx, e1.ID); err != nil {
		t.Fatal(err)
	}
}
