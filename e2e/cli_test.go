package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	dto "github.com/prometheus/client_model/go"
	"rtcd/actors"
	"rtcd/auth"
	"rtcd/internal/testtools"
	"rtcd/media"
	"rtcd/metrics"
	"rtcd/server"
)

// The operator commands, run as the built binary: `rtcd billing adjust`
// against a running `rtcd serve`, `rtcd media-key`, and `rtcd media`, a
// media node run on its own that a served rtcd uses.

// cliCommandTimeout bounds one run of a short command.
const cliCommandTimeout = 30 * time.Second

func TestCLIRealBinary(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("builds and runs the rtcd binary")
	}
	began := time.Now()
	bin := binBuild(t)
	t.Logf("built rtcd in %v", time.Since(began).Round(time.Millisecond))
	dir := t.TempDir()
	boot := binInit(t, bin, dir)
	t.Run("billing adjust", func(t *testing.T) { cliTestBillingAdjust(t, bin, dir, boot) })
	t.Run("media-key and media", func(t *testing.T) { cliTestStandaloneMedia(t, bin, dir, boot) })
}

// cliRun runs the binary with args (and env added to the test's
// environment) and returns what it printed and its exit code.
func cliRun(t *testing.T, bin string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliCommandTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr) && ctx.Err() == nil:
		code = exitErr.ExitCode()
	default:
		t.Fatalf("rtcd %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), errOut.String(), code
}

// cliHostPort is the host:port of an http:// base URL.
func cliHostPort(base string) string { return strings.TrimPrefix(base, "http://") }

func cliTestBillingAdjust(t *testing.T, bin, dir string, boot bootstrap) {
	p := binServe(t, bin, dir, boot.APIKey)
	c := binClient(true)
	balance := func() string {
		t.Helper()
		r, err := binCall(c, "GET", p.Base+"/v1/billing/balance", boot.APIKey, nil)
		if err != nil || r.status != 200 {
			t.Fatalf("balance: %v %d %s", err, r.status, r.raw)
		}
		return r.str("available")
	}
	ledger := func() []map[string]any { // newest first
		t.Helper()
		r, err := binCall(c, "GET", p.Base+"/v1/billing/ledger?limit=100", boot.APIKey, nil)
		if err != nil || r.status != 200 {
			t.Fatalf("ledger: %v %d %s", err, r.status, r.raw)
		}
		data, _ := r.json["data"].([]any)
		out := make([]map[string]any, 0, len(data))
		for _, d := range data {
			en, _ := d.(map[string]any)
			out = append(out, en)
		}
		return out
	}
	if b := balance(); b != "10.00" {
		t.Fatalf("opening balance %s", b)
	}
	private := "--metrics-listen=" + cliHostPort(p.Metrics)

	// A credit, as the docs write the command.
	stdout, stderr, code := cliRun(t, bin, nil, "billing", "adjust", "--account", boot.AccountID, "--amount", "12.345678",
		"--reason", "goodwill credit", "--operator", "alice", "--data-dir", dir, private)
	if code != 0 {
		t.Fatalf("billing adjust exited %d: %s", code, stderr)
	}
	var entry map[string]any
	if err := json.Unmarshal([]byte(stdout), &entry); err != nil {
		t.Fatalf("billing adjust printed %q: %v", stdout, err)
	}
	ref, _ := entry["reference"].(map[string]any)
	if entry["object"] != "ledger_entry" || entry["type"] != "adjustment" || entry["amount"] != "12.345678" ||
		entry["balance_after"] != "22.345678" || entry["description"] != "goodwill credit" ||
		ref["type"] != "operator" || ref["id"] != "alice" {
		t.Fatalf("billing adjust printed %s", stdout)
	}
	if b := balance(); b != "22.345678" {
		t.Fatalf("balance %s after +12.345678", b)
	}
	if l := ledger(); len(l) != 2 || l[0]["id"] != entry["id"] {
		t.Fatalf("the ledger's newest entry is not the adjustment: %v", l)
	}

	// A debit, with the data directory and the private listener from the
	// environment and the negative amount as its own argument.
	env := []string{"RTCD_DATA_DIR=" + dir, "RTCD_METRICS_LISTEN=" + cliHostPort(p.Metrics)}
	stdout, stderr, code = cliRun(t, bin, env, "billing", "adjust", "--account", boot.AccountID, "--amount", "-2.345678", "--reason", "correction")
	if code != 0 || !strings.Contains(stdout, `"amount":"-2.345678"`) || !strings.Contains(stdout, `"balance_after":"20.000000"`) {
		t.Fatalf("debit: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if b := balance(); b != "20.00" {
		t.Fatalf("balance %s after -2.345678", b)
	}

	// The adjustments are audited as the operator's.
	r, err := binCall(c, "GET", p.Base+"/v1/audit-logs", boot.APIKey, nil)
	if err != nil || r.status != 200 {
		t.Fatalf("audit log: %v %d %s", err, r.status, r.raw)
	}
	audited := 0
	data, _ := r.json["data"].([]any)
	for _, d := range data {
		a, _ := d.(map[string]any)
		actor, _ := a["actor"].(map[string]any)
		if a["action"] == "billing.adjusted" && actor["type"] == "operator" {
			audited++
		}
	}
	if audited != 2 {
		t.Fatalf("%d billing.adjusted audit entries by an operator, want 2: %s", audited, r.raw)
	}

	// Bad input: a clear message, exit 1, nothing printed on stdout and
	// nothing changed.
	noToken := t.TempDir()
	wrongToken := t.TempDir()
	if err := os.WriteFile(filepath.Join(wrongToken, "admin.token"), []byte(strings.Repeat("0", 64)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	adjust := func(extra ...string) []string {
		return append([]string{"billing", "adjust", "--data-dir", dir, private}, extra...)
	}
	acct, amount, reason := []string{"--account", boot.AccountID}, []string{"--amount", "1.00"}, []string{"--reason", "x"}
	join := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, bad := range []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", []string{"billing"}, "usage: rtcd billing adjust"},
		{"unknown subcommand", []string{"billing", "refund"}, "usage: rtcd billing adjust"},
		{"unknown flag", adjust(join(acct, amount, reason, []string{"--force"})...), "flag provided but not defined: -force"},
		{"no account", adjust(join(amount, reason)...), "--account, --amount and --reason are required"},
		{"no amount", adjust(join(acct, reason)...), "--account, --amount and --reason are required"},
		{"no reason", adjust(join(acct, amount)...), "--account, --amount and --reason are required"},
		{"zero", adjust(join(acct, []string{"--amount", "0"}, reason)...), "the server refused the adjustment (400)"},
		{"not a number", adjust(join(acct, []string{"--amount", "ten"}, reason)...), "the server refused the adjustment (400)"},
		{"seven decimals", adjust(join(acct, []string{"--amount", "1.0000001"}, reason)...), "the server refused the adjustment (400)"},
		{"reason too long", adjust(join(acct, amount, []string{"--reason", strings.Repeat("r", actors.MaxAdjustmentReasonBytes+1)})...),
			"the server refused the adjustment (400)"},
		{"unknown workspace", adjust(join([]string{"--account", "acct_doesnotexist0000000000"}, amount, reason)...),
			"the server refused the adjustment (404)"},
		{"wrong admin token", join([]string{"billing", "adjust", "--data-dir", wrongToken, private}, acct, amount, reason),
			"the server refused the adjustment (401)"},
		{"no admin token", join([]string{"billing", "adjust", "--data-dir", noToken, private}, acct, amount, reason),
			"reading the admin token"},
		{"server not running", join([]string{"billing", "adjust", "--data-dir", dir, "--metrics-listen", binFreePort(t)}, acct, amount, reason),
			"is rtcd serve running with --metrics-listen"},
	} {
		stdout, stderr, code := cliRun(t, bin, nil, bad.args...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, bad.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1, nothing on stdout and %q", bad.name, code, stdout, stderr, bad.want)
		}
	}
	if b, l := balance(), ledger(); b != "20.00" || len(l) != 3 {
		t.Fatalf("refused adjustments changed the wallet: balance %s, %d ledger entries", b, len(l))
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if st := p.waitExit(20 * time.Second); st.ExitCode() != 0 {
		t.Fatalf("SIGTERM: exit %v\n%s", st, p.logTail())
	}
}

// cliNode is a running `rtcd media`.
type cliNode struct {
	cmd    *exec.Cmd
	addr   string
	log    *os.File
	exited chan struct{}
}

// cliStartNode runs `rtcd media` on addr and waits until it accepts
// connections.
func cliStartNode(t *testing.T, bin, addr string, args ...string) *cliNode {
	t.Helper()
	logf, err := os.CreateTemp(t.TempDir(), "media-*.log")
	if err != nil {
		t.Fatal(err)
	}
	n := &cliNode{addr: addr, log: logf, exited: make(chan struct{})}
	n.cmd = exec.Command(bin, append([]string{"media", "--listen", addr}, args...)...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = n.cmd.Wait()
		close(n.exited)
	}()
	t.Cleanup(func() {
		_ = n.cmd.Process.Kill()
		<-n.exited
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return n
		}
		select {
		case <-n.exited:
			t.Fatalf("rtcd media exited during start:\n%s", n.logText())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("rtcd media did not listen on %s within 30s:\n%s", addr, n.logText())
		}
		time.Sleep(20 * time.Millisecond) // polling a starting process, not a clock
	}
}

func (n *cliNode) logText() string {
	b, _ := os.ReadFile(n.log.Name())
	return string(b)
}

// cliJoin opens a WebSocket at endpoint, sends the join and returns the
// socket and the node's first answer.
func cliJoin(t *testing.T, endpoint, mediaToken string) (*websocket.Conn, map[string]any) {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.Dial(endpoint, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", endpoint, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if err := conn.WriteJSON(map[string]any{"type": "join", "media_token": mediaToken}); err != nil {
		t.Fatal(err)
	}
	return conn, cliRead(t, conn)
}

// cliRead returns the next message that is not a pong.
func cliRead(t *testing.T, conn *websocket.Conn) map[string]any {
	t.Helper()
	for {
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, raw, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		if m["type"] != "pong" {
			return m
		}
	}
}

func cliTestStandaloneMedia(t *testing.T, bin, dir string, boot bootstrap) {
	// rtcd media-key prints the media key derived from the master key.
	stdout, stderr, code := cliRun(t, bin, nil, "media-key", "--data-dir", dir)
	raw, err := os.ReadFile(filepath.Join(dir, "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	master, _ := hex.DecodeString(strings.TrimSpace(string(raw)))
	keys, err := auth.DeriveKeys(master)
	if err != nil {
		t.Fatal(err)
	}
	mediaKey := keys.MediaToken()
	if code != 0 || stdout != hex.EncodeToString(mediaKey[:])+"\n" {
		t.Fatalf("rtcd media-key: exit %d, printed %q (stderr %q); want the media key as hex", code, stdout, stderr)
	}
	if stdout, stderr, code := cliRun(t, bin, nil, "media-key", "--data-dir", t.TempDir()); code != 1 || stdout != "" ||
		!strings.Contains(stderr, "no --media-key and no master key") {
		t.Fatalf("rtcd media-key on a directory without a master key: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	// The control plane runs no node of its own and sends commands to the
	// one `rtcd media` runs with the printed key (not the data directory).
	nodeAddr, nodeMetrics := binFreePort(t), binFreePort(t)
	p := binServe(t, bin, dir, boot.APIKey, "--media-listen=", "--media-url=ws://"+nodeAddr+media.RTCPath,
		"--media-control-url=http://"+nodeAddr)
	node := cliStartNode(t, bin, nodeAddr, "--control-url", p.Metrics, "--media-key", strings.TrimSpace(stdout),
		"--data-dir", t.TempDir(), "--node-id", "standalone-1", "--log-level", "info", "--metrics-listen", nodeMetrics)

	c := binClient(true)
	call := func(method, path string, body any, want int) binResult {
		t.Helper()
		r, err := binCall(c, method, p.Base+path, boot.APIKey, body)
		if err != nil || r.status != want {
			t.Fatalf("%s %s: %v %d %s, want %d", method, path, err, r.status, r.raw, want)
		}
		return r
	}
	room := call("POST", "/v1/rooms", map[string]any{"name": "standalone"}, 201).str("id")
	part := call("POST", "/v1/rooms/"+room+"/participants", map[string]any{"name": "ann"}, 201)
	cs, err := binCall(c, "POST", p.Base+"/v1/connect", "", map[string]any{"token": part.str("token")})
	if err != nil || cs.status != 200 || cs.str("endpoint") != "ws://"+nodeAddr+media.RTCPath {
		t.Fatalf("connect: %v %d %s; want the standalone node's endpoint", err, cs.status, cs.raw)
	}
	conn, first := cliJoin(t, cs.str("endpoint"), cs.str("media_token"))
	if first["type"] != "joined" {
		t.Fatalf("join on the standalone node answered %v\n%s", first, node.logText())
	}
	// The node reports the join to the control plane's private listener.
	pid := part.str("id")
	deadline := time.Now().Add(10 * time.Second)
	for call("GET", "/v1/rooms/"+room+"/participants/"+pid, nil, 200).str("status") != "joined" {
		if time.Now().After(deadline) {
			t.Fatalf("the join was not reported to the control plane\nnode log:\n%s\nrtcd log:\n%s", node.logText(), p.logTail())
		}
		time.Sleep(20 * time.Millisecond) // polling another process's report
	}
	cliCheckNodeMetrics(t, "http://"+nodeMetrics, node, []string{room, pid, boot.AccountID, boot.ProjectID})

	// A node with another key refuses the same media token. Its metrics
	// listener comes from the environment.
	otherMetrics := binFreePort(t)
	t.Setenv("RTCD_MEDIA_METRICS_LISTEN", otherMetrics)
	other := cliStartNode(t, bin, binFreePort(t), "--control-url", p.Metrics, "--media-key", strings.Repeat("ab", 32),
		"--node-id", "wrong-key")
	if _, m := cliJoin(t, "ws://"+other.addr+media.RTCPath, cs.str("media_token")); m["type"] != "error" || m["code"] != media.CodeTokenInvalid {
		t.Fatalf("a node with another key answered the join with %v, want error %s", m, media.CodeTokenInvalid)
	}
	cliAwaitNodeMetric(t, "http://"+otherMetrics, "rtcd_media_joins_total", nil, 0)
	// A metrics address that is not HOST:PORT stops the start.
	if _, stderr, code := cliRun(t, bin, nil, "media", "--listen", binFreePort(t), "--media-key", strings.Repeat("ab", 32),
		"--metrics-listen", "9101"); code != 1 || !strings.Contains(stderr, `--metrics-listen="9101": want HOST:PORT`) {
		t.Fatalf("rtcd media --metrics-listen 9101: exit %d, stderr %q; want exit 1 and the flag named", code, stderr)
	}

	// Ending the room reaches the node as a signed command: the client is
	// told, and the room ends.
	call("DELETE", "/v1/rooms/"+room, nil, 200)
	for {
		m := cliRead(t, conn)
		if m["type"] == "room.closed" || m["type"] == "error" {
			break
		}
	}
	deadline = time.Now().Add(10 * time.Second)
	for call("GET", "/v1/rooms/"+room, nil, 200).str("status") != "ended" {
		if time.Now().After(deadline) {
			t.Fatalf("the room did not end\nnode log:\n%s", node.logText())
		}
		time.Sleep(20 * time.Millisecond) // polling another process's report
	}

	// The node stops cleanly on SIGTERM.
	if err := node.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-node.exited:
		if code := node.cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("rtcd media exited %d on SIGTERM\n%s", code, node.logText())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("rtcd media did not stop within 20s of SIGTERM\n%s", node.logText())
	}
}

// cliAwaitNodeMetric scrapes a media node's metrics listener at base until
// the series reads want, and returns the last scrape.
func cliAwaitNodeMetric(t *testing.T, base, name string, labels map[string]string, want float64) ([]byte, map[string]*dto.MetricFamily) {
	t.Helper()
	c := binClient(false)
	deadline := time.Now().Add(10 * time.Second)
	for {
		raw, fams := obsScrapeURL(t, c, base+"/metrics")
		got := obsValue(t, fams, name, labels)
		if got == want {
			return raw, fams
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v on %s, want %v", name, labels, got, base, want)
		}
		time.Sleep(20 * time.Millisecond) // polling another process's report
	}
}

// cliCheckNodeMetrics checks the metrics listener of `rtcd media` at base,
// with one participant joined: the node's families only (media, build
// info, Go runtime and process), every rtcd_ one documented, the join and
// its report counted, no identifier in it, and promtool check metrics clean.
func cliCheckNodeMetrics(t *testing.T, base string, node *cliNode, ids []string) {
	t.Helper()
	res, err := binClient(false).Get(base + "/healthz")
	if err != nil {
		t.Fatalf("node /healthz: %v\n%s", err, node.logText())
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(body) != "ok\n" {
		t.Fatalf("node /healthz: %d %q", res.StatusCode, body)
	}
	// The report is counted sent once the control plane has answered it.
	raw, fams := cliAwaitNodeMetric(t, base, "rtcd_media_reports_total", map[string]string{"type": "joined", "result": "sent"}, 1)
	for name, want := range map[string]float64{"rtcd_media_sessions": 1, "rtcd_media_connections": 1, "rtcd_media_joins_total": 1,
		"rtcd_media_turn_allocations": 0, "rtcd_media_keyframe_requests_total": 0} {
		if got := obsValue(t, fams, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	for _, kind := range metrics.MediaKinds {
		for _, name := range []string{"rtcd_media_published_tracks", "rtcd_media_subscriptions", "rtcd_media_received_packets_total",
			"rtcd_media_forwarded_bytes_total", "rtcd_media_dropped_packets_total"} {
			if got := obsValue(t, fams, name, map[string]string{"kind": kind}); got != 0 {
				t.Errorf("%s{kind=%q} = %v, want a series at 0", name, kind, got)
			}
		}
	}
	if got := obsValue(t, fams, "rtcd_build_info", map[string]string{"version": server.Version, "goversion": runtime.Version()}); got != 1 {
		t.Errorf("rtcd_build_info{version=%q} = %v, want 1", server.Version, got)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_gc_heap_live_bytes", "process_resident_memory_bytes", "process_open_fds"} {
		if fams[name] == nil {
			t.Errorf("the node does not export %s", name)
		}
	}
	doc, err := os.ReadFile(filepath.Join(binModuleRoot(t), "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range fams {
		switch {
		case strings.HasPrefix(name, "go_"), strings.HasPrefix(name, "process_"):
		case name != "rtcd_build_info" && !strings.HasPrefix(name, "rtcd_media_"):
			t.Errorf("the node exports %s, which is not one of its families", name)
		case !bytes.Contains(doc, []byte("`"+name+"`")):
			t.Errorf("docs/metrics.md does not document %s", name)
		}
	}
	for _, id := range ids {
		if bytes.Contains(raw, []byte(id)) {
			t.Errorf("the node's metrics expose %q", id)
		}
	}
	promtool := testtools.RequireOnPath(t, "promtool", "apt-get install prometheus (Debian), or a Prometheus release's promtool on PATH")
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(raw)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics on the node's metrics: %v\n%s", err, out)
	}
}
