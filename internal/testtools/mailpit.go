package testtools

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"
)

// mailpit, an SMTP server with an HTTP API to read what it received, is run
// by the mail and e2e tests as the real SMTP server.

// Bounds of running mailpit in tests.
const (
	MailpitVersion = "v1.30.5"
	// mailpitStartTimeout bounds mailpit opening its database and ports.
	mailpitStartTimeout = 30 * time.Second
	// mailpitPollInterval is how often its HTTP API is asked whether it is
	// up or has received a message.
	mailpitPollInterval = 50 * time.Millisecond
	// MailpitDeliveryTimeout bounds a sent message showing up in the API.
	MailpitDeliveryTimeout = 10 * time.Second
)

// Mailpit is found or built once per test binary: $MAILPIT_BIN, PATH, the
// user cache, else a build from the tools module (tests run one directory
// below the module root, so the tools module is ../tools).
var Mailpit = &Tool{Name: "mailpit", Package: "github.com/axllent/mailpit", Version: MailpitVersion,
	EnvVar: "MAILPIT_BIN", ToolsDir: "../tools"}

// MailpitServer is one private mailpit started by a test.
type MailpitServer struct {
	SMTPPort int
	APIURL   string // http://127.0.0.1:port
}

// MailpitMessage is a received message as mailpit's API shows it.
type MailpitMessage struct {
	Subject string `json:"Subject"`
	Text    string `json:"Text"`
	HTML    string `json:"HTML"`
	From    struct {
		Address string `json:"Address"`
	} `json:"From"`
	To []struct {
		Address string `json:"Address"`
	} `json:"To"`
	// Tags holds the SMTP user who sent it when mailpit runs with
	// --tags-username (and an auth file).
	Tags []string `json:"Tags"`
}

// freePort asks the kernel for a free loopback port. mailpit cannot report
// the port it bound, so there is a small pick-then-bind window.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartMailpit runs a private mailpit with its own database; it ends with
// the test. extraArgs are more mailpit flags, e.g. "--smtp-require-starttls"
// (see `mailpit --help`). Without a mailpit binary the test is skipped
// loudly, except in CI, where it fails (Tool.Require): CI builds mailpit
// first (.ci/run).
func StartMailpit(t testing.TB, extraArgs ...string) *MailpitServer {
	t.Helper()
	bin := Mailpit.Require(t)
	smtpPort, httpPort := freePort(t), freePort(t)
	args := append([]string{
		"--smtp", "127.0.0.1:" + strconv.Itoa(smtpPort),
		"--listen", "127.0.0.1:" + strconv.Itoa(httpPort),
		"--database", filepath.Join(t.TempDir(), "mailpit.db"),
		"--disable-version-check",
		"--quiet"}, extraArgs...)
	_, exited, output := startUntilTestEnds(t, bin, args...)

	m := &MailpitServer{SMTPPort: smtpPort, APIURL: "http://127.0.0.1:" + strconv.Itoa(httpPort)}
	ticker := time.NewTicker(mailpitPollInterval)
	defer ticker.Stop()
	deadline := time.NewTimer(mailpitStartTimeout)
	defer deadline.Stop()
	for {
		if res, err := http.Get(m.APIURL + "/api/v1/info"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return m
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("mailpit exited before answering: %v\n%s", err, output.String())
		case <-deadline.C:
			t.Fatalf("mailpit did not answer within %s", mailpitStartTimeout)
		case <-ticker.C:
		}
	}
}

// StartMailpitSTARTTLSLogin starts a mailpit that behaves like a
// production relay on rtcd's default SMTP settings: STARTTLS required, with
// a certificate for 127.0.0.1 issued by ca (a private CA, so the sender
// must be told to trust it), and a login required as user with password
// (neither may contain white space: mailpit splits its auth file at it).
// Each message is tagged with the user who sent it (MailpitMessage.Tags).
func StartMailpitSTARTTLSLogin(t testing.TB, ca *TestCA, user, password string) *MailpitServer {
	t.Helper()
	if strings.ContainsFunc(user+password, unicode.IsSpace) {
		t.Fatal("mailpit SMTP credentials must not contain white space")
	}
	cert, key := ca.Issue(t, "127.0.0.1")
	authFile := filepath.Join(t.TempDir(), "smtp-users")
	if err := os.WriteFile(authFile, []byte(user+":"+password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return StartMailpit(t, "--smtp-tls-cert", cert, "--smtp-tls-key", key, "--smtp-require-starttls",
		"--smtp-auth-file", authFile, "--tags-username")
}

// Await polls mailpit until a message to addr arrives and returns it;
// there must be exactly one.
func (m *MailpitServer) Await(t testing.TB, addr string) MailpitMessage {
	t.Helper()
	searchURL := m.APIURL + "/api/v1/search?query=" + url.QueryEscape("to:"+addr)
	ticker := time.NewTicker(mailpitPollInterval)
	defer ticker.Stop()
	deadline := time.NewTimer(MailpitDeliveryTimeout)
	defer deadline.Stop()
	for {
		var found struct {
			Messages []struct {
				ID string `json:"ID"`
			} `json:"messages"`
		}
		getJSON(t, searchURL, &found)
		if len(found.Messages) > 0 {
			if len(found.Messages) != 1 {
				t.Fatalf("mailpit holds %d messages to %s, want 1", len(found.Messages), addr)
			}
			var msg MailpitMessage
			getJSON(t, m.APIURL+"/api/v1/message/"+url.PathEscape(found.Messages[0].ID), &msg)
			return msg
		}
		select {
		case <-deadline.C:
			t.Fatalf("no message to %s in mailpit within %s", addr, MailpitDeliveryTimeout)
		case <-ticker.C:
		}
	}
}

// Total is how many messages mailpit has received.
func (m *MailpitServer) Total(t testing.TB) int {
	t.Helper()
	var list struct {
		Total int `json:"total"`
	}
	getJSON(t, m.APIURL+"/api/v1/messages?limit=1", &list)
	return list.Total
}

func getJSON(t testing.TB, u string, v any) {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("GET %s: %s: %s", u, res.Status, b)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// startUntilTestEnds starts bin with args, its output gathered, and kills
// it when the test ends (resuming it first, should a test have paused it
// with SIGSTOP). exited receives Wait's result.
func startUntilTestEnds(t testing.TB, bin string, args ...string) (cmd *exec.Cmd, exited <-chan error, output *strings.Builder) {
	t.Helper()
	cmd = exec.Command(bin, args...)
	output = &strings.Builder{}
	cmd.Stdout = output
	cmd.Stderr = output
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-done
	})
	return cmd, done, output
}
