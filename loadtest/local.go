package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Local server bounds.
const (
	localReadyTimeout = 60 * time.Second
	localStopTimeout  = 30 * time.Second
	localStartTries   = 3
	// localBootstrapCredit keeps the credit gate out of the way.
	localBootstrapCredit = "1000000"
)

// localServerFlags keep every limit out of the way of the load; the
// webhook and forwarded-for flags let the tool run its loopback webhook
// receiver and spread connects over synthetic source addresses.
var localServerFlags = []string{
	"--default-connect-requests-per-minute=100000000",
	"--connect-per-ip-per-minute=100000000",
	"--default-room-creates-per-minute=100000000",
	"--default-participant-creates-per-minute=100000000",
	"--default-max-active-rooms=1000000",
	"--default-max-active-participants=10000000",
	"--default-max-participants-per-room=500",
	"--webhook-allow-private",
	"--trust-forwarded-for",
	"--log-level=warn",
}

// credentials are what `rtcd init` prints.
type credentials struct {
	AccountID  string `json:"account_id"`
	ProjectID  string `json:"project_id"`
	APIKeyID   string `json:"api_key_id"`
	APIKey     string `json:"api_key"`
	OwnerEmail string `json:"owner_email"`
}

// localServer is an `rtcd serve` child process on a temporary data dir,
// and with ownNode an `rtcd media` child process beside it: the control
// plane then runs no media node of its own and sends clients to that one,
// so the node's figures (memory per held socket) are its own alone.
type localServer struct {
	dir     string // temporary directory: data, binary, logs
	dataDir string
	bin     string
	creds   credentials
	API     string // http://host:port
	Metrics string // http://host:port
	serve   *rtcdChild
	keep    bool

	ownNode      bool
	node         *rtcdChild // rtcd media, with ownNode
	MediaURL     string     // ws://host:port/rtc of the node run on its own
	MediaMetrics string     // http://host:port of its metrics listener
}

// rtcdChild is an rtcd process the tool started, with its output in a log file.
type rtcdChild struct {
	name    string // for errors: "rtcd serve", "rtcd media"
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error // set before exited is closed
	logPath string
}

// startRtcdChild starts bin with args, its output going to logPath. Not
// CommandContext: the process is stopped with SIGTERM (stop), so it drains
// like in production, also when the run was interrupted.
func startRtcdChild(name, bin string, args []string, logPath string) (*rtcdChild, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a ^C in the terminal reaches the tool only
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &rtcdChild{name: name, cmd: cmd, exited: make(chan struct{}), logPath: logPath}
	go func() {
		c.waitErr = cmd.Wait()
		_ = logf.Close()
		close(c.exited)
	}()
	return c, nil
}

// pid is the process id, or 0 for no process.
func (c *rtcdChild) pid() int {
	if c == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// kill kills the process (if it still runs) and waits for it.
func (c *rtcdChild) kill() {
	if c == nil {
		return
	}
	select {
	case <-c.exited:
	default:
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// stop sends SIGTERM and waits for the drain, killing after
// localStopTimeout.
func (c *rtcdChild) stop() {
	if c == nil {
		return
	}
	select {
	case <-c.exited:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(localStopTimeout):
		c.kill()
	}
}

// logTail is the end of the process's log.
func (c *rtcdChild) logTail() string {
	if c == nil {
		return ""
	}
	b, _ := os.ReadFile(c.logPath)
	const max = 4000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return strings.TrimSpace(string(b))
}

// moduleRoot walks up from the working directory to the go.mod of rtcd.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module rtcd\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no rtcd go.mod above the working directory; run from the repository or pass -rtcd-bin")
		}
		dir = parent
	}
}

// buildRtcd builds ./cmd/rtcd of the repository into dir.
func buildRtcd(ctx context.Context, dir string, logw io.Writer) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "rtcd")
	fmt.Fprintf(logw, "building rtcd (go build ./cmd/rtcd) ...\n")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/rtcd")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/rtcd: %v\n%s", err, out)
	}
	return bin, nil
}

// startLocal builds (unless bin is given) and starts rtcd on a fresh data
// directory (with ownNode, and an `rtcd media` node beside it), then waits
// until it answers. storeFlags choose where the state lives (none: the
// data directory's Pebble store), for `rtcd init` and `rtcd serve` alike.
func startLocal(ctx context.Context, bin string, keep, ownNode bool, storeFlags, extraFlags []string, logw io.Writer) (*localServer, error) {
	dir, err := os.MkdirTemp("", "rtcd-loadtest-*")
	if err != nil {
		return nil, err
	}
	s := &localServer{dir: dir, dataDir: filepath.Join(dir, "data"), keep: keep, ownNode: ownNode}
	fail := func(err error) (*localServer, error) {
		s.Stop()
		return nil, err
	}
	if bin == "" {
		if bin, err = buildRtcd(ctx, dir, logw); err != nil {
			return fail(err)
		}
	}
	s.bin = bin
	var stdout, stderr bytes.Buffer
	initArgs := append([]string{"init", "--data-dir", s.dataDir, "--log-level", "error",
		"--bootstrap-credit", localBootstrapCredit}, storeFlags...)
	initCmd := exec.CommandContext(ctx, bin, initArgs...)
	initCmd.Stdout, initCmd.Stderr = &stdout, &stderr
	if err := initCmd.Run(); err != nil {
		return fail(fmt.Errorf("rtcd init: %v\n%s", err, stderr.String()))
	}
	if err := json.Unmarshal(stdout.Bytes(), &s.creds); err != nil || s.creds.APIKey == "" {
		return fail(fmt.Errorf("rtcd init printed %q: %v", stdout.String(), err))
	}
	for attempt := 1; ; attempt++ {
		err := s.launch(append(slices.Clip(storeFlags), extraFlags...))
		if err == nil {
			err = s.waitReady(ctx)
		}
		if err == nil {
			return s, nil
		}
		tail := s.serve.logTail() + "\n" + s.node.logTail()
		s.kill()
		if attempt == localStartTries || ctx.Err() != nil {
			return fail(fmt.Errorf("rtcd did not start: %v\n%s", err, strings.TrimSpace(tail)))
		}
	}
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func (s *localServer) launch(extraFlags []string) error {
	api, err := freePort()
	if err != nil {
		return err
	}
	metrics, err := freePort()
	if err != nil {
		return err
	}
	s.API, s.Metrics = "http://"+api, "http://"+metrics
	mediaFlags := []string{"--media-listen", "127.0.0.1:0"}
	var nodeAddr, nodeMetrics string
	if s.ownNode {
		if nodeAddr, err = freePort(); err != nil {
			return err
		}
		if nodeMetrics, err = freePort(); err != nil {
			return err
		}
		s.MediaURL, s.MediaMetrics = "ws://"+nodeAddr+"/rtc", "http://"+nodeMetrics
		mediaFlags = []string{"--media-listen=", "--media-control-url", "http://" + nodeAddr, "--media-url", s.MediaURL}
	}
	args := append([]string{"serve", "--data-dir", s.dataDir, "--listen", api, "--metrics-listen", metrics}, mediaFlags...)
	args = append(append(args, localServerFlags...), extraFlags...)
	if s.serve, err = startRtcdChild("rtcd serve", s.bin, args, filepath.Join(s.dir, "rtcd.log")); err != nil {
		return err
	}
	if !s.ownNode {
		return nil
	}
	// The node reports to the control plane's private listener and takes
	// its key from the same data directory. ICE over TCP is off: nothing
	// here needs it, and it would take a second port next to the node's.
	s.node, err = startRtcdChild("rtcd media", s.bin, []string{"media", "--listen", nodeAddr, "--control-url", s.Metrics,
		"--data-dir", s.dataDir, "--metrics-listen", nodeMetrics, "--node-id", "loadtest", "--media-tcp-port=-1",
		"--log-level=warn"}, filepath.Join(s.dir, "media.log"))
	return err
}

func (s *localServer) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(localReadyTimeout)
	ready := func(c *rtcdChild, url, auth string) error {
		for time.Now().Before(deadline) && ctx.Err() == nil {
			select {
			case <-c.exited:
				return fmt.Errorf("%s exited during start: %v", c.name, c.waitErr)
			default:
			}
			req, _ := http.NewRequest("GET", url, nil)
			if auth != "" {
				req.Header.Set("Authorization", "Bearer "+auth)
			}
			if res, err := client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				_ = res.Body.Close()
				if res.StatusCode == 200 {
					return nil
				}
				return fmt.Errorf("%s: GET %s answered %d", c.name, url, res.StatusCode)
			}
			time.Sleep(20 * time.Millisecond) // polling a starting process
		}
		return fmt.Errorf("%s: no answer within %v", c.name, localReadyTimeout)
	}
	if err := ready(s.serve, s.API+"/v1/system/info", s.creds.APIKey); err != nil {
		return err
	}
	if s.ownNode {
		return ready(s.node, s.MediaMetrics+"/healthz", "")
	}
	return nil
}

// Pid is the server's process id.
func (s *localServer) Pid() int { return s.serve.pid() }

// NodePid is the process id of the media node: the node run on its own,
// or rtcd serve, whose built-in node it is.
func (s *localServer) NodePid() int {
	if s.ownNode {
		return s.node.pid()
	}
	return s.Pid()
}

func (s *localServer) kill() {
	s.node.kill()
	s.serve.kill()
}

// Stop sends SIGTERM, waits for the drain (killing after
// localStopTimeout), and removes the temporary directory unless kept. The
// node goes first, so its last leave reports reach the control plane.
func (s *localServer) Stop() {
	s.node.stop()
	s.serve.stop()
	if s.keep {
		return
	}
	_ = os.RemoveAll(s.dir)
}
