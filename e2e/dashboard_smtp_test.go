package e2e

import (
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"rtcd/internal/testtools"
)

// Dashboard mail through a real SMTP server: a private mailpit (pinned in
// the tools module, found or built like in mail/smtp_test.go), read back
// through its HTTP API.

const (
	// smtpDashboardURL is the configured dashboard origin links must use.
	smtpDashboardURL = "https://app.example.test"
	smtpMailFrom     = "noreply@rtcd.test"
)

// smtpSignInLink checks a sign-in message and returns its link's token.
func smtpSignInLink(t *testing.T, m testtools.MailpitMessage, to string) string {
	t.Helper()
	if len(m.To) != 1 || m.To[0].Address != to {
		t.Errorf("To = %v, want %s", m.To, to)
	}
	if m.From.Address != smtpMailFrom {
		t.Errorf("From = %q, want %s", m.From.Address, smtpMailFrom)
	}
	if m.Subject != "Your rtcd sign-in link" {
		t.Errorf("Subject = %q", m.Subject)
	}
	links := linkPattern.FindAllString(m.Text, -1)
	if len(links) != 1 {
		t.Fatalf("the message holds links %v, want exactly one: %q", links, m.Text)
	}
	const prefix = smtpDashboardURL + "/sign-in/email?token=rtc_el_"
	if !strings.HasPrefix(links[0], prefix) {
		t.Fatalf("link %q does not start with %s", links[0], prefix)
	}
	u, err := url.Parse(links[0])
	if err != nil {
		t.Fatal(err)
	}
	token := u.Query().Get("token")
	if !strings.HasPrefix(token, "rtc_el_") || len(u.Query()) != 1 {
		t.Fatalf("link %q: want one token=rtc_el_… parameter", links[0])
	}
	return token
}

func TestDashboardSignInMailOverSMTP(t *testing.T) {
	mp := testtools.StartMailpit(t)
	e := start(t,
		"--smtp-host=127.0.0.1", "--smtp-port="+strconv.Itoa(mp.SMTPPort), "--smtp-tls=none",
		"--mail-from="+smtpMailFrom, "--dashboard-url="+smtpDashboardURL)

	// A new address asks for a link: 202, and the link arrives by SMTP on
	// the configured origin.
	const alice = "alice@example.com"
	r := e.do("POST", "/v1/auth/email/start", "", map[string]any{"email": alice}).must(t, 202)
	if r.Str("status") != "accepted" {
		t.Fatalf("start: %s", r.Raw)
	}
	token := smtpSignInLink(t, mp.Await(t, alice), alice)

	// A request with a spoofed Host (and forwarding headers) does not move
	// the link: it is built from --dashboard-url only.
	const bob = "bob@example.com"
	body := strings.NewReader(`{"email":"` + bob + `"}`)
	req, err := http.NewRequest("POST", e.Base+"/v1/auth/email/start", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "evil.example"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-Host", "evil.example")
	req.Header.Set("X-Forwarded-Proto", "http")
	req.Header.Set("Forwarded", "host=evil.example;proto=http")
	res, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 202 {
		t.Fatalf("start with a spoofed Host: %d %s", res.StatusCode, b)
	}
	bm := mp.Await(t, bob)
	if strings.Contains(bm.Text, "evil.example") {
		t.Fatalf("the spoofed Host reached the mail: %q", bm.Text)
	}
	bobToken := smtpSignInLink(t, bm, bob)

	// The mailed token signs in, once.
	v := e.do("POST", "/v1/auth/email/verify", "", map[string]any{"token": token}).must(t, 200)
	session := v.Str("token")
	if v.Str("object") != "session" || !strings.HasPrefix(session, "rtc_us_") {
		t.Fatalf("verify: %s", v.Raw)
	}
	if got := ggUserField(v, "email"); got != alice {
		t.Fatalf("user email = %q, want %s", got, alice)
	}
	if accts := e.ggAccounts(session); len(accts) != 1 || accts[0]["role"] != "owner" {
		t.Fatalf("accounts = %v, want a workspace of alice's own", accts)
	}
	again := e.do("POST", "/v1/auth/email/verify", "", map[string]any{"token": token})
	if again.Status != 401 || again.ErrCode() != "authentication_failed" {
		t.Fatalf("reused link: %d %s, want 401 authentication_failed", again.Status, again.Raw)
	}
	bv := e.do("POST", "/v1/auth/email/verify", "", map[string]any{"token": bobToken}).must(t, 200)
	if got := ggUserField(bv, "email"); got != bob {
		t.Fatalf("bob's link signed in %q", got)
	}

	// With SMTP configured nothing goes to the embedded outbox: both
	// messages have been delivered, and no outbox or .eml file exists.
	if _, err := os.Stat(filepath.Join(e.dataDir, "outbox")); !os.IsNotExist(err) {
		t.Errorf("outbox dir: %v, want it not to exist", err)
	}
	_ = filepath.WalkDir(e.dataDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".eml") {
			t.Errorf("an .eml file was written with SMTP configured: %s", p)
		}
		return nil
	})
}

// The default SMTP mode end to end: rtcd on its default --smtp-tls
// (starttls) with a login, against a server that requires both and has a
// certificate from a private CA that only --smtp-ca-file makes trusted.
// The sign-in link arrives, sent by the configured user, and signs in.
func TestDashboardSignInMailOverSTARTTLSWithLogin(t *testing.T) {
	ca := testtools.NewTestCA(t)
	const user, password = "rtcd-mailer", "s3cret-pass"
	mp := testtools.StartMailpitSTARTTLSLogin(t, ca, user, password)
	e := start(t,
		"--smtp-host=127.0.0.1", "--smtp-port="+strconv.Itoa(mp.SMTPPort),
		"--smtp-username="+user, "--smtp-password="+password, "--smtp-ca-file="+ca.CAFile,
		"--mail-from="+smtpMailFrom, "--dashboard-url="+smtpDashboardURL)

	const carol = "carol@example.com"
	e.do("POST", "/v1/auth/email/start", "", map[string]any{"email": carol}).must(t, 202)
	m := mp.Await(t, carol)
	if len(m.Tags) != 1 || m.Tags[0] != user {
		t.Fatalf("the message is tagged %v, want it sent by the logged-in %s", m.Tags, user)
	}
	token := smtpSignInLink(t, m, carol)
	v := e.do("POST", "/v1/auth/email/verify", "", map[string]any{"token": token}).must(t, 200)
	if got := ggUserField(v, "email"); got != carol || !strings.HasPrefix(v.Str("token"), "rtc_us_") {
		t.Fatalf("verify: %s", v.Raw)
	}
}
