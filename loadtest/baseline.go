package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// baselineBody is the fixed answer of the baseline server: the size and
// shape of a connect session, so the wire work compares.
var baselineBody = []byte(`{"object":"connect_session","session_id":"cs_aaaaaaaaaaaaaaaaaaaaaaaa",` +
	`"endpoint":"ws://127.0.0.1:8081/rtc","media_token":"rtc_mt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",` +
	`"expires_at":"2026-11-22T12:31:10.000Z","room":{"id":"room_aaaaaaaaaaaaaaaaaaaaaaaa"},` +
	`"participant":{"id":"part_aaaaaaaaaaaaaaaaaaaaaaaa"},"features":{"audio":true,"video":true,"screen_share":true}}`)

// baselineHandler answers every request with baselineBody.
func baselineHandler(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("application/json")
	ctx.SetBody(baselineBody)
}

// newBaselineServer is a fasthttp server tuned like a minimal production
// one (no extras).
func newBaselineServer() *fasthttp.Server {
	return &fasthttp.Server{Handler: baselineHandler, Name: "baseline", ReadTimeout: httpTimeout, WriteTimeout: httpTimeout,
		IdleTimeout: httpIdleConnTimeout, NoDefaultDate: true, NoDefaultContentType: true}
}

// serveBaseline is the child process mode (-serve-baseline ADDR): it
// prints the bound address, serves until stdin closes (the parent exited
// or stopped it), then exits.
func serveBaseline(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String())
	srv := newBaselineServer()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = srv.Shutdown()
	}()
	return srv.Serve(ln)
}

// baselineServer is the running baseline: a child process (default) or a
// server in this process (-baseline-in-process, and the tests).
type baselineServer struct {
	Addr  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	srv   *fasthttp.Server
	stop  func() // an in-process server other than srv
}

func startBaseline(inProcess bool) (*baselineServer, error) {
	if inProcess {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		b := &baselineServer{Addr: ln.Addr().String(), srv: newBaselineServer()}
		go func() { _ = b.srv.Serve(ln) }()
		return b, nil
	}
	return startChild("-serve-baseline", "127.0.0.1:0")
}

// startChild runs this program again with args (an internal -serve-…
// flag, and its loopback address), reads the address it prints, and
// returns it as a baselineServer: the child serves until its stdin closes
// (Stop), and its CPU time is read from /proc.
func startChild(args ...string) (*baselineServer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("child %s: %w (for a baseline, use -baseline-in-process)", args[0], err)
	}
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("child %s: %w", args[0], err)
	}
	b := &baselineServer{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(s)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case b.Addr = <-line:
	case <-time.After(localReadyTimeout):
	}
	if b.Addr == "" {
		b.Stop()
		return nil, fmt.Errorf("child %s did not start", args[0])
	}
	return b, nil
}

// CPUSeconds is the child's user+system CPU time (Linux /proc), or -1.
func (b *baselineServer) CPUSeconds() float64 {
	if b.cmd == nil {
		return -1
	}
	return procCPUSeconds(b.cmd.Process.Pid)
}

func (b *baselineServer) Stop() {
	if b.srv != nil {
		_ = b.srv.Shutdown()
	}
	if b.stop != nil {
		b.stop()
	}
	if b.cmd != nil {
		_ = b.stdin.Close()
		done := make(chan struct{})
		go func() { _ = b.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(localStopTimeout):
			_ = b.cmd.Process.Kill()
			<-done
		}
	}
}
