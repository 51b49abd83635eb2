package e2e

import (
	"bytes"
	"encoding/base64"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Dashboard helpers: reading the embedded outbox (<data-dir>/outbox/*.eml)
// the way a person reads their mail, and signing in through it.

// readMails is every .eml path a helper has already consumed, so the next
// call returns the next message.
var readMails sync.Map // path -> struct{}

// linkPattern finds the links the dashboard mails carry.
var linkPattern = regexp.MustCompile(`https?://[^\s"<>]+`)

// mailBody decodes the text of an RFC 5322 message (plain, quoted-printable
// or base64, single part or multipart).
func mailBody(t *testing.T, raw []byte) (*mail.Message, string) {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("outbox message is not RFC 5322: %v", err)
	}
	body := decodePart(t, msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body)
	return msg, body
}

func decodePart(t *testing.T, contentType, encoding string, r io.Reader) string {
	t.Helper()
	mediaType, params, _ := mime.ParseMediaType(contentType)
	if strings.HasPrefix(mediaType, "multipart/") {
		mr := multipart.NewReader(r, params["boundary"])
		var out strings.Builder
		for {
			p, err := mr.NextPart()
			if err != nil {
				break
			}
			out.WriteString(decodePart(t, p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p))
		}
		return out.String()
	}
	switch strings.ToLower(encoding) {
	case "quoted-printable":
		r = quotedprintable.NewReader(r)
	case "base64":
		b, _ := io.ReadAll(r)
		dec, err := decodeBase64Lines(b)
		if err != nil {
			t.Fatalf("base64 body: %v", err)
		}
		return string(dec)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading mail body: %v", err)
	}
	return string(b)
}

// nextMail waits for the next unread outbox message to `to` and returns its
// header and text.
func (e *env) nextMail(to string) (*mail.Message, string) {
	e.t.Helper()
	dirs := e.outboxes
	if dirs == nil {
		dirs = []string{filepath.Join(e.dataDir, "outbox")}
	}
	var found string
	e.eventually("a mail to "+to+" in "+strings.Join(dirs, ", "), func() bool {
		var paths []string
		for _, dir := range dirs {
			entries, _ := os.ReadDir(dir)
			for _, de := range entries {
				if strings.HasSuffix(de.Name(), ".eml") && !strings.HasPrefix(de.Name(), ".") {
					paths = append(paths, filepath.Join(dir, de.Name()))
				}
			}
		}
		sort.Strings(paths) // the outbox names sort by time within a directory
		for _, p := range paths {
			if _, seen := readMails.Load(p); seen {
				continue
			}
			raw, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			msg, err := mail.ReadMessage(bytes.NewReader(raw))
			if err != nil || !strings.Contains(strings.ToLower(msg.Header.Get("To")), strings.ToLower(to)) {
				continue
			}
			readMails.Store(p, struct{}{})
			found = p
			return true
		}
		return false
	})
	raw, err := os.ReadFile(found)
	if err != nil {
		e.t.Fatal(err)
	}
	return mailBody(e.t, raw)
}

// mailLink returns the first link in the next mail to `to` and the value of
// its query parameter param.
func (e *env) mailLink(to, param string) (link, value string) {
	e.t.Helper()
	_, body := e.nextMail(to)
	for _, l := range linkPattern.FindAllString(body, -1) {
		u, err := url.Parse(l)
		if err != nil {
			continue
		}
		if v := u.Query().Get(param); v != "" {
			return l, v
		}
	}
	e.t.Fatalf("the mail to %s has no link with %s: %q", to, param, body)
	return "", ""
}

// startSignIn asks for a sign-in link, moving the fake clock past the
// per-IP minute window when a test has used it up (every test client is
// 127.0.0.1).
func (e *env) startSignIn(body map[string]any) *resp {
	e.t.Helper()
	r := e.do("POST", "/v1/auth/email/start", "", body)
	if r.Status == 429 {
		e.clock.Advance(time.Minute)
		r = e.do("POST", "/v1/auth/email/start", "", body)
	}
	return r.must(e.t, 202)
}

// signInResp signs in by e-mail link (with an optional invitation token)
// and returns the verify response.
func (e *env) signInResp(email, invitationToken string) *resp {
	e.t.Helper()
	body := map[string]any{"email": email}
	if invitationToken != "" {
		body["invitation_token"] = invitationToken
	}
	e.startSignIn(body)
	_, token := e.mailLink(email, "token")
	r := e.do("POST", "/v1/auth/email/verify", "", map[string]any{"token": token})
	if r.Status == 429 {
		e.clock.Advance(time.Minute)
		r = e.do("POST", "/v1/auth/email/verify", "", map[string]any{"token": token})
	}
	return r.must(e.t, 200)
}

// signIn signs in by e-mail link and returns the session token.
func (e *env) signIn(email string) string {
	e.t.Helper()
	tok := e.signInResp(email, "").Str("token")
	if !strings.HasPrefix(tok, "rtc_us_") {
		e.t.Fatalf("session token %q lacks rtc_us_", tok)
	}
	return tok
}

// me returns GET /v1/me for a session.
func (e *env) me(session string) *resp {
	e.t.Helper()
	return e.do("GET", "/v1/me", session, nil).must(e.t, 200)
}

// firstAccount returns the id of a session's first workspace and of its
// first project.
func (e *env) firstAccount(session string) (accountID, projectID string) {
	e.t.Helper()
	accts, _ := e.me(session).JSON["accounts"].([]any)
	if len(accts) == 0 {
		e.t.Fatal("the user has no workspace")
	}
	a := accts[0].(map[string]any)
	projects, _ := a["projects"].([]any)
	if len(projects) == 0 {
		e.t.Fatal("the workspace has no project")
	}
	return a["id"].(string), projects[0].(map[string]any)["id"].(string)
}

// decodeBase64Lines decodes a base64 body split into lines.
func decodeBase64Lines(b []byte) ([]byte, error) {
	return base64.StdEncoding.DecodeString(strings.Join(strings.Fields(string(b)), ""))
}
