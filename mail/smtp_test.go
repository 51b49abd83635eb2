package mail

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"rtcd/internal/testtools"
	"strings"
	"testing"
	"time"
)

// The SMTP tests send through a real mailpit (testtools.StartMailpit).

// testSMTPTimeoutSeconds bounds one send in these tests.
const testSMTPTimeoutSeconds = 10

func TestSMTPSenderDeliversToMailpit(t *testing.T) {
	mp := testtools.StartMailpit(t)
	s, err := NewSMTPSender(SMTPConfig{
		Host:           "127.0.0.1",
		Port:           mp.SMTPPort,
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
	got := mp.Await(t, m.To)
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

// The default SMTP mode, STARTTLS with a login, against a server that
// requires both; then every way of getting it wrong is refused and
// delivers nothing.
func TestSMTPSenderSTARTTLSWithLogin(t *testing.T) {
	ca := testtools.NewTestCA(t)
	const user, password = "rtcd-mailer", "correct-horse-battery"
	mp := testtools.StartMailpitSTARTTLSLogin(t, ca, user, password)
	good := SMTPConfig{
		Host: "127.0.0.1", Port: mp.SMTPPort, Username: user, Password: password,
		From: "noreply@rtcd.test", TLS: TLSStartTLS, CAFile: ca.CAFile, TimeoutSeconds: testSMTPTimeoutSeconds,
	}
	s, err := NewSMTPSender(good)
	if err != nil {
		t.Fatal(err)
	}
	m := Message{To: "erin@example.com", Subject: "Sign in to rtcd", Text: "https://app.rtcd.test/sign-in?token=abc\n"}
	if err := s.Send(context.Background(), m); err != nil {
		t.Fatalf("Send with STARTTLS and login: %v", err)
	}
	got := mp.Await(t, m.To)
	if got.Subject != m.Subject || len(got.Tags) != 1 || got.Tags[0] != user {
		t.Fatalf("received %q tagged %v; want %q sent by the logged-in %s", got.Subject, got.Tags, m.Subject, user)
	}

	for name, mutate := range map[string]func(c *SMTPConfig){
		// The certificate is from a CA only the CA file makes trusted.
		"without the CA file": func(c *SMTPConfig) { c.CAFile = "" },
		// The certificate names 127.0.0.1, not localhost: verified by name.
		"by a name the certificate lacks": func(c *SMTPConfig) { c.Host = "localhost" },
		"with a wrong password":           func(c *SMTPConfig) { c.Password = "wrong" },
		"without a login":                 func(c *SMTPConfig) { c.Username, c.Password = "", "" },
		"in plain text":                   func(c *SMTPConfig) { c.TLS, c.CAFile = TLSNone, "" },
		"with implicit TLS":               func(c *SMTPConfig) { c.TLS = TLSImplicit },
	} {
		t.Run(name, func(t *testing.T) {
			c := good
			mutate(&c)
			s, err := NewSMTPSender(c)
			if err != nil {
				t.Fatal(err)
			}
			err = s.Send(context.Background(), Message{To: "mallory@example.com", Subject: "s", Text: "t"})
			if err == nil {
				t.Fatal("Send succeeded")
			}
			t.Logf("refused: %v", err)
		})
	}
	if n := mp.Total(t); n != 1 {
		t.Fatalf("mailpit received %d messages, want only the one sent correctly", n)
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
	deadline := time.NewTimer(testtools.MailpitDeliveryTimeout)
	defer deadline.Stop()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Send to a silent server succeeded")
		}
	case <-deadline.C:
		t.Fatalf("Send did not give up within %s", testtools.MailpitDeliveryTimeout)
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
		"CA file without TLS": func(c *SMTPConfig) {
			c.TLS, c.CAFile = TLSNone, testtools.NewTestCA(t).CAFile
		},
		"CA file missing": func(c *SMTPConfig) { c.CAFile = filepath.Join(t.TempDir(), "none.pem") },
		"CA file without a certificate": func(c *SMTPConfig) {
			c.CAFile = filepath.Join(t.TempDir(), "empty.pem")
			if err := os.WriteFile(c.CAFile, []byte("not a certificate\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		},
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
