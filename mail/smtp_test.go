package mail

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"rtcd/internal/testtools"
	"strconv"
	"strings"
	"testing"
	"time"
)

// mailpit, an SMTP server with an HTTP API to read what it received, is a
// program the tests run, pinned in the tools module (../tools). The tests
// look for it in this order: $MAILPIT_BIN, mailpit in PATH, then the build
// cache below; when none exists they build it from the tools module. They
// skip only when that build fails.
const (
	mailpitVersion = "v1.30.5"
	// mailpitStartTimeout bounds mailpit opening its database and ports.
	mailpitStartTimeout = 30 * time.Second
	// mailpitPollInterval is how often the tests ask mailpit's HTTP API
	// whether it is up or has received a message.
	mailpitPollInterval = 50 * time.Millisecond
	// mailpitDeliveryTimeout bounds a sent message showing up in the API.
	mailpitDeliveryTimeout = 10 * time.Second
	// testSMTPTimeoutSeconds bounds one send in these tests.
	testSMTPTimeoutSeconds = 10
)

// mailpit is found or built once per test binary (see package testtools).
var mailpit = &testtools.Tool{Name: "mailpit", Package: "github.com/axllent/mailpit", Version: mailpitVersion,
	EnvVar: "MAILPIT_BIN", ToolsDir: "../tools"}

func mailpitBinary() (string, error) { return mailpit.Binary() }

// freePort asks the kernel for a free loopback port. mailpit cannot report
// the port it bound, so there is a small pick-then-bind window.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startMailpit runs a private mailpit with its own database and returns its
// SMTP port and HTTP base URL; the process ends with the test.
func startMailpit(t *testing.T) (smtpPort int, apiURL string) {
	t.Helper()
	bin, err := mailpitBinary()
	if err != nil {
		t.Skipf("\n\n*** SKIPPING: mailpit %s could not be built, so the SMTP tests did not run ***\n%v\n"+
			"Build it with: (cd tools && go build -o \"$(go env GOPATH)/bin/mailpit\" github.com/axllent/mailpit) or set MAILPIT_BIN.\n\n",
			mailpitVersion, err)
	}
	smtpPort = freePort(t)
	httpPort := freePort(t)
	cmd := exec.Command(bin,
		"--smtp", "127.0.0.1:"+strconv.Itoa(smtpPort),
		"--listen", "127.0.0.1:"+strconv.Itoa(httpPort),
		"--database", filepath.Join(t.TempDir(), "mailpit.db"),
		"--disable-version-check",
		"--quiet")
	var output strings.Builder
	cmd.Stdout = &output
	cmd.Stderr = &output
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	apiURL = "http://127.0.0.1:" + strconv.Itoa(httpPort)
	ticker := time.NewTicker(mailpitPollInterval)
	defer ticker.Stop()
	deadline := time.NewTimer(mailpitStartTimeout)
	defer deadline.Stop()
	for {
		resp, err := http.Get(apiURL + "/api/v1/info")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return smtpPort, apiURL
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

type mailpitSearch struct {
	Messages []struct {
		ID      string `json:"ID"`
		Subject string `json:"Subject"`
		To      []struct {
			Address string `json:"Address"`
		} `json:"To"`
	} `json:"messages"`
}

type mailpitMessage struct {
	Subject string `json:"Subject"`
	Text    string `json:"Text"`
	HTML    string `json:"HTML"`
	From    struct {
		Address string `json:"Address"`
	} `json:"From"`
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// awaitMessage polls mailpit's search API until a message to addr arrives
// and returns it.
func awaitMessage(t *testing.T, apiURL, addr string) mailpitMessage {
	t.Helper()
	searchURL := apiURL + "/api/v1/search?query=" + url.QueryEscape("to:"+addr)
	ticker := time.NewTicker(mailpitPollInterval)
	defer ticker.Stop()
	deadline := time.NewTimer(mailpitDeliveryTimeout)
	defer deadline.Stop()
	for {
		var found mailpitSearch
		getJSON(t, searchURL, &found)
		if len(found.Messages) > 0 {
			if len(found.Messages) != 1 {
				t.Fatalf("mailpit holds %d messages to %s, want 1", len(found.Messages), addr)
			}
			var m mailpitMessage
			getJSON(t, apiURL+"/api/v1/message/"+url.PathEscape(found.Messages[0].ID), &m)
			return m
		}
		select {
		case <-deadline.C:
			t.Fatalf("no message to %s in mailpit within %s", addr, mailpitDeliveryTimeout)
		case <-ticker.C:
		}
	}
}

func TestSMTPSenderDeliversToMailpit(t *testing.T) {
	smtpPort, apiURL := startMailpit(t)
	s, err := NewSMTPSender(SMTPConfig{
		Host:           "127.0.0.1",
		Port:           smtpPort,
		From:           "noreply@rtcd.test",
		TLS:            TLSNone,
		TimeoutSeconds: testSMTPTimeoutSeconds,
	})
	if err != nil {
		t.Fatal(err)
	}
	link := "https://app.rtcd.test/sign-in?token=abc_DEF-123"
	m := Message{
		To:      "carol@example.com",
		Subject: "Sign in to rtcd",
		Text:    "Open this link to sign in:\n" + link + "\n",
		HTML:    `<p><a href="` + link + `">Sign in</a></p>`,
	}
	if err := s.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	got := awaitMessage(t, apiURL, m.To)
	if got.Subject != m.Subject {
		t.Errorf("Subject = %q, want %q", got.Subject, m.Subject)
	}
	if !strings.Contains(got.Text, link) {
		t.Errorf("Text = %q, want it to hold %q", got.Text, link)
	}
	if !strings.Contains(got.HTML, link) {
		t.Errorf("HTML = %q, want it to hold %q", got.HTML, link)
	}
	if got.From.Address != "noreply@rtcd.test" {
		t.Errorf("From = %q", got.From.Address)
	}

	// A refused message never reaches the server.
	bad := Message{To: "dave@example.com", Subject: "hi\r\nBcc: evil@example.com", Text: "x"}
	if err := s.Send(context.Background(), bad); !errors.Is(err, ErrInvalidHeader) {
		t.Fatalf("Send = %v, want ErrInvalidHeader", err)
	}
}

func TestSMTPSenderTimesOut(t *testing.T) {
	// A listener that accepts and never greets: the send must give up.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	s, err := NewSMTPSender(SMTPConfig{
		Host: "127.0.0.1", Port: l.Addr().(*net.TCPAddr).Port,
		From: "noreply@rtcd.test", TLS: TLSNone, TimeoutSeconds: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Send(context.Background(), Message{To: "x@example.com", Subject: "s", Text: "t"}) }()
	deadline := time.NewTimer(mailpitDeliveryTimeout)
	defer deadline.Stop()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Send to a silent server succeeded")
		}
	case <-deadline.C:
		t.Fatalf("Send did not give up within %s", mailpitDeliveryTimeout)
	}
}

func TestNewSMTPSenderValidates(t *testing.T) {
	good := SMTPConfig{Host: "smtp.example.com", Port: 587, From: "noreply@rtcd.test", TLS: TLSStartTLS}
	if _, err := NewSMTPSender(good); err != nil {
		t.Fatalf("good config: %v", err)
	}
	bad := map[string]func(c *SMTPConfig){
		"no host":       func(c *SMTPConfig) { c.Host = "" },
		"port 0":        func(c *SMTPConfig) { c.Port = 0 },
		"port too big":  func(c *SMTPConfig) { c.Port = 65536 },
		"tls unknown":   func(c *SMTPConfig) { c.TLS = "maybe" },
		"from injected": func(c *SMTPConfig) { c.From = "a@b.test\r\nBcc: e@v.test" },
		"timeout big":   func(c *SMTPConfig) { c.TimeoutSeconds = MaxSMTPTimeoutSeconds + 1 },
		"timeout neg":   func(c *SMTPConfig) { c.TimeoutSeconds = -1 },
	}
	for name, mutate := range bad {
		t.Run(name, func(t *testing.T) {
			c := good
			mutate(&c)
			if _, err := NewSMTPSender(c); err == nil {
				t.Fatal("NewSMTPSender accepted it")
			}
		})
	}
}
