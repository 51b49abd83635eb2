package e2e

import (
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"rtcd/internal/testtools"
)

// Dashboard mail through a real SMTP server: a private mailpit (pinned in
// the tools module, found or built like in mail/smtp_test.go), read back
// through its HTTP API.

const (
	smtpMailpitVersion = "v1.30.5"
	// smtpMailpitStartTimeout bounds mailpit opening its database and ports.
	smtpMailpitStartTimeout = 30 * time.Second
	// smtpDashboardURL is the configured dashboard origin links must use.
	smtpDashboardURL = "https://app.example.test"
	smtpMailFrom     = "noreply@rtcd.test"
)

// smtpMailpit is found or built once per test binary: $MAILPIT_BIN, PATH,
// the user cache, else a build from the tools module.
var smtpMailpit = &testtools.Tool{Name: "mailpit", Package: "github.com/axllent/mailpit", Version: smtpMailpitVersion,
	EnvVar: "MAILPIT_BIN", ToolsDir: "../tools"}

// smtpFreePort asks the kernel for a free loopback port. mailpit cannot
// report the port it bound, so there is a small pick-then-bind window.
func smtpFreePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// smtpStartMailpit runs a private mailpit and returns its SMTP port and HTTP
// API base URL; it ends with the test. Without a mailpit binary the test is
// skipped, except in CI (CI set), where it fails.
func smtpStartMailpit(t *testing.T) (smtpPort int, apiURL string) {
	t.Helper()
	bin, err := smtpMailpit.Binary()
	if err == nil {
		// $MAILPIT_BIN is taken as given; a path to nothing is not found.
		if _, serr := os.Stat(bin); serr != nil {
			err = serr
		}
	}
	if err != nil {
		msg := "mailpit " + smtpMailpitVersion + " could not be found or built: " + err.Error() +
			"\nBuild it with: (cd tools && go build -o \"$(go env GOPATH)/bin/mailpit\" github.com/axllent/mailpit) or set MAILPIT_BIN."
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip("\n\n*** SKIPPING the dashboard SMTP test: " + msg + " ***\n\n")
	}
	smtpPort = smtpFreePort(t)
	httpPort := smtpFreePort(t)
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
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	deadline := time.NewTimer(smtpMailpitStartTimeout)
	defer deadline.Stop()
	for {
		if res, err := http.Get(apiURL + "/api/v1/info"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return smtpPort, apiURL
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("mailpit exited before answering: %v\n%s", err, output.String())
		case <-deadline.C:
			t.Fatalf("mailpit did not answer within %s", smtpMailpitStartTimeout)
		case <-ticker.C:
		}
	}
}

type smtpSearch struct {
	Messages []struct {
		ID string `json:"ID"`
	} `json:"messages"`
}

type smtpMessage struct {
	Subject string `json:"Subject"`
	Text    string `json:"Text"`
	From    struct {
		Address string `json:"Address"`
	} `json:"From"`
	To []struct {
		Address string `json:"Address"`
	} `json:"To"`
}

func smtpGetJSON(t *testing.T, u string, v any) {
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

// smtpAwait waits until mailpit holds a message to addr and returns it;
// there must be exactly one.
func (e *env) smtpAwait(apiURL, addr string) smtpMessage {
	e.t.Helper()
	searchURL := apiURL + "/api/v1/search?query=" + url.QueryEscape("to:"+addr)
	var found smtpSearch
	e.eventually("a message to "+addr+" in mailpit", func() bool {
		found = smtpSearch{}
		smtpGetJSON(e.t, searchURL, &found)
		return len(found.Messages) > 0
	})
	if len(found.Messages) != 1 {
		e.t.Fatalf("mailpit holds %d messages to %s, want 1", len(found.Messages), addr)
	}
	var m smtpMessage
	smtpGetJSON(e.t, apiURL+"/api/v1/message/"+url.PathEscape(found.Messages[0].ID), &m)
	return m
}

// smtpSignInLink checks a sign-in message and returns its link's token.
func smtpSignInLink(t *testing.T, m smtpMessage, to string) string {
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
	smtpPort, apiURL := smtpStartMailpit(t)
	e := start(t,
		"--smtp-host=127.0.0.1", "--smtp-port="+strconv.Itoa(smtpPort), "--smtp-tls=none",
		"--mail-from="+smtpMailFrom, "--dashboard-url="+smtpDashboardURL)

	// A new address asks for a link: 202, and the link arrives by SMTP on
	// the configured origin.
	const alice = "alice@example.com"
	r := e.do("POST", "/v1/auth/email/start", "", map[string]any{"email": alice}).must(t, 202)
	if r.Str("status") != "accepted" {
		t.Fatalf("start: %s", r.Raw)
	}
	token := smtpSignInLink(t, e.smtpAwait(apiURL, alice), alice)

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
	bm := e.smtpAwait(apiURL, bob)
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
