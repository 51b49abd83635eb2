package e2e

import (
	"syscall"
	"testing"
	"time"

	"rtcd/internal/natstest"
)

// TestKill9UnderLoadOnJetStream is the kill -9 crash test of the real
// binary (binTestKillUnderLoad) with the state in NATS JetStream: three
// embedded servers clustered on loopback, an R3 stream (docs/cluster.md).
// Room, participant and connect load runs, rtcd is killed with SIGKILL,
// started again on the same stream, and every acknowledged room and
// participant is there, and the recovered rooms admit their acknowledged
// connects again up to their caps. Then SIGTERM drains and exits 0.
func TestKill9UnderLoadOnJetStream(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the rtcd binary and three NATS servers")
	}
	bin := binBuild(t)
	cluster, err := natstest.Start()
	if err != nil {
		t.Fatalf("start the NATS cluster: %v", err)
	}
	defer cluster.Shutdown()
	flags := append([]string{"--store", "jetstream", "--nats-url", cluster.URLs}, binGenerousLimits...)
	dir := t.TempDir()
	boot := binInit(t, bin, dir, "--store", "jetstream", "--nats-url", cluster.URLs)
	p := binServe(t, bin, dir, boot.APIKey, flags...)

	began := time.Now()
	load := binStartLoad(p, boot.APIKey, "js", binClient(true))
	load.runFor()
	load.stopping.Store(true)
	p.kill()
	acks := load.finish()
	if st := p.cmd.ProcessState; st == nil || st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("rtcd was not killed by SIGKILL but exited with %v\n%s", st, p.logTail())
	}
	if len(acks.rooms) < binMinAcked {
		t.Fatalf("only %d rooms acknowledged before the kill; the load did not load\n%s", len(acks.rooms), p.logTail())
	}
	loadTime := time.Since(began)

	began = time.Now()
	p = binServe(t, bin, dir, boot.APIKey, flags...)
	restartTime := time.Since(began)
	binVerify(t, p, boot.APIKey, acks)
	binVerifySlots(t, p, boot.APIKey, acks, 25)
	t.Logf("killed after %v with %d rooms, %d participants, %d connects acknowledged; restart %v",
		loadTime.Round(time.Millisecond), len(acks.rooms), len(acks.participants), len(acks.connected), restartTime.Round(time.Millisecond))

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if st := p.waitExit(20 * time.Second); st.ExitCode() != 0 {
		t.Fatalf("SIGTERM exit %v\n%s", st, p.logTail())
	}
}
