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

// localServer is an `rtcd serve` child process on a temporary data dir.
type localServer struct {
	dir     string // temporary directory: data, binary, log
	dataDir string
	bin     string
	creds   credentials
	API     string // http://host:port
	Metrics string // http://host:port
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	logPath string
	keep    bool
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

// startLocal builds (unless bin is given) and starts rtcd on a fresh data
// directory, then waits until it answers.
func startLocal(ctx context.Context, bin string, keep bool, extraFlags []string, logw io.Writer) (*localServer, error) {
	dir, err := os.MkdirTemp("", "rtcd-loadtest-*")
	if err != nil {
		return nil, err
	}
	s := &localServer{dir: dir, dataDir: filepath.Join(dir, "data"), keep: keep}
	fail := func(err error) (*localServer, error) {
		s.Stop()
		return nil, err
	}
	if bin == "" {
		root, err := moduleRoot()
		if err != nil {
			return fail(err)
		}
		bin = filepath.Join(dir, "rtcd")
		fmt.Fprintf(logw, "building rtcd (go build ./cmd/rtcd) ...\n")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/rtcd")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fail(fmt.Errorf("go build ./cmd/rtcd: %v\n%s", err, out))
		}
	}
	s.bin = bin
	var stdout, stderr bytes.Buffer
	initCmd := exec.CommandContext(ctx, bin, "init", "--data-dir", s.dataDir, "--log-level", "error",
		"--bootstrap-credit", localBootstrapCredit)
	initCmd.Stdout, initCmd.Stderr = &stdout, &stderr
	if err := initCmd.Run(); err != nil {
		return fail(fmt.Errorf("rtcd init: %v\n%s", err, stderr.String()))
	}
	if err := json.Unmarshal(stdout.Bytes(), &s.creds); err != nil || s.creds.APIKey == "" {
		return fail(fmt.Errorf("rtcd init printed %q: %v", stdout.String(), err))
	}
	for attempt := 1; ; attempt++ {
		err := s.launch(extraFlags)
		if err == nil {
			err = s.waitReady(ctx)
		}
		if err == nil {
			return s, nil
		}
		s.kill()
		if attempt == localStartTries || ctx.Err() != nil {
			return fail(fmt.Errorf("rtcd serve did not start: %v\n%s", err, s.logTail()))
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
	logf, err := os.Create(filepath.Join(s.dir, "rtcd.log"))
	if err != nil {
		return err
	}
	s.logPath = logf.Name()
	args := append([]string{"serve", "--data-dir", s.dataDir, "--listen", api, "--metrics-listen", metrics,
		"--media-listen", "127.0.0.1:0"}, localServerFlags...)
	args = append(args, extraFlags...)
	// Not CommandContext: the process is stopped with SIGTERM in Stop, so
	// it drains like in production, also when the run was interrupted.
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a ^C in the terminal reaches the tool only
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start rtcd serve: %w", err)
	}
	s.cmd, s.API, s.Metrics = cmd, "http://"+api, "http://"+metrics
	s.exited = make(chan struct{})
	go func() {
		s.waitErr = cmd.Wait()
		_ = logf.Close()
		close(s.exited)
	}()
	return nil
}

func (s *localServer) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(localReadyTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case <-s.exited:
			return fmt.Errorf("exited during start: %v", s.waitErr)
		default:
		}
		req, _ := http.NewRequest("GET", s.API+"/v1/system/info", nil)
		req.Header.Set("Authorization", "Bearer "+s.creds.APIKey)
		if res, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			if res.StatusCode == 200 {
				return nil
			}
			return fmt.Errorf("GET /v1/system/info answered %d", res.StatusCode)
		}
		time.Sleep(20 * time.Millisecond) // polling a starting process
	}
	return fmt.Errorf("no answer within %v", localReadyTimeout)
}

// Pid is the server's process id.
func (s *localServer) Pid() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

func (s *localServer) kill() {
	if s.cmd == nil {
		return
	}
	select {
	case <-s.exited:
	default:
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// Stop sends SIGTERM, waits for the drain (killing after
// localStopTimeout), and removes the temporary directory unless kept.
func (s *localServer) Stop() {
	if s.cmd != nil {
		select {
		case <-s.exited:
		default:
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-s.exited:
			case <-time.After(localStopTimeout):
				s.kill()
			}
		}
	}
	if s.keep {
		return
	}
	_ = os.RemoveAll(s.dir)
}

func (s *localServer) logTail() string {
	b, _ := os.ReadFile(s.logPath)
	const max = 4000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return strings.TrimSpace(string(b))
}
