package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMakeRunHonoursEnvironment runs `make run` as the README says, with
// the data directory and every listener chosen by RTCD_ variables, and
// checks that rtcd serves there: make must not override the environment
// with flags of its own. npm is hidden from make (NPM=), so the committed
// dashboard build is served and the source tree is not rebuilt.
func TestMakeRunHonoursEnvironment(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("runs make run, which builds and starts rtcd")
	}
	makeTool, err := exec.LookPath("make")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("make is not installed")
		}
		t.Skip("make is not installed")
	}
	dataDir := filepath.Join(t.TempDir(), "elsewhere")
	api, private := binFreePort(t), binFreePort(t)
	logf, err := os.CreateTemp(t.TempDir(), "make-run-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(makeTool, "--no-print-directory", "run", "NPM=rtcd-test-no-npm")
	cmd.Dir = binModuleRoot(t)
	cmd.Env = append(os.Environ(), "RTCD_DATA_DIR="+dataDir, "RTCD_LISTEN="+api, "RTCD_METRICS_LISTEN="+private,
		"RTCD_MEDIA_LISTEN=127.0.0.1:0", "RTCD_LOG_LEVEL=info")
	cmd.Stdout, cmd.Stderr = logf, logf
	// make, go run and rtcd form one process group, stopped together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &binProc{t: t, cmd: cmd, dataDir: dataDir, Base: "http://" + api, logPath: logf.Name(), exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = logf.Close()
		close(p.exited)
	}()
	group := -cmd.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(group, syscall.SIGKILL)
		<-p.exited
	})

	boot := startupBootstrapLine(t, p) // go run compiles first: allow for it
	if err := p.waitReady(boot.APIKey, 60*time.Second); err != nil {
		t.Fatalf("make run with RTCD_LISTEN=%s: %v\n%s", api, err, p.logTail())
	}
	if _, err := os.Stat(filepath.Join(dataDir, "pebble")); err != nil {
		t.Errorf("RTCD_DATA_DIR=%s was not used: %v\n%s", dataDir, err, p.logTail())
	}
	line := regexp.MustCompile(`msg="rtcd serving" .*metrics=` + regexp.QuoteMeta(private) + `.* data_dir=` + regexp.QuoteMeta(dataDir))
	if !p.waitLog(line, 10*time.Second) {
		t.Errorf("the start line does not show RTCD_DATA_DIR and RTCD_METRICS_LISTEN:\n%s", p.logTail())
	}

	_ = syscall.Kill(group, syscall.SIGINT)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("make run did not stop on SIGINT\n%s", p.logTail())
	}
	if !strings.Contains(p.logTail(), "stopped cleanly") {
		t.Errorf("rtcd did not stop cleanly on SIGINT:\n%s", p.logTail())
	}
}
