package mail

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	netmail "net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rtcd/clock"
)

var testStart = time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC)

func newTestOutbox(t *testing.T) (*OutboxSender, *clock.Fake, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	clk := clock.NewFake(testStart)
	dir := filepath.Join(t.TempDir(), "outbox")
	s, err := NewOutboxSender(dir, "noreply@rtcd.test", clk, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return s, clk, &logs
}

func outboxFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// textPart returns the decoded text/plain part of a parsed message.
func textPart(t *testing.T, msg *netmail.Message) (text, html string) {
	t.Helper()
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	if mediaType != "multipart/alternative" {
		t.Fatalf("Content-Type = %q, want multipart/alternative", mediaType)
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := r.NextRawPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if enc := p.Header.Get("Content-Transfer-Encoding"); enc != "quoted-printable" {
			t.Fatalf("part encoding = %q, want quoted-printable", enc)
		}
		body, err := io.ReadAll(quotedprintable.NewReader(p))
		if err != nil {
			t.Fatal(err)
		}
		ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		switch ct {
		case "text/plain":
			text = string(body)
		case "text/html":
			html = string(body)
		}
	}
	return text, html
}

func TestOutboxWritesParseableEML(t *testing.T) {
	s, _, logs := newTestOutbox(t)
	link := "https://app.rtcd.test/sign-in?token=abc_DEF-123"
	m := Message{
		To:      "alice@example.com",
		Subject: "Sign in to rtcd — ünïcode",
		Text:    "Open this link to sign in:\n" + link + "\n",
		HTML:    `<p><a href="` + link + `">Sign in</a></p>`,
	}
	if err := s.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}

	dirInfo, err := os.Stat(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if perm := dirInfo.Mode().Perm(); perm != 0o700 {
		t.Errorf("outbox mode = %o, want 700", perm)
	}
	names := outboxFiles(t, s.Dir())
	if len(names) != 1 || !strings.HasSuffix(names[0], ".eml") || !strings.HasPrefix(names[0], "20240301T120000") {
		t.Fatalf("outbox holds %q, want one time-stamped .eml", names)
	}
	path := filepath.Join(s.Dir(), names[0])
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("file mode = %o, want 600", perm)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(bytes.ReplaceAll(raw, []byte("\r\n"), nil), []byte("\n")) {
		t.Error("message has a bare LF; RFC 5322 wants CRLF line endings")
	}

	msg, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	from, err := msg.Header.AddressList("From")
	if err != nil || len(from) != 1 || from[0].Address != "noreply@rtcd.test" {
		t.Errorf("From = %v (%v)", from, err)
	}
	to, err := msg.Header.AddressList("To")
	if err != nil || len(to) != 1 || to[0].Address != "alice@example.com" {
		t.Errorf("To = %v (%v)", to, err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil || subject != m.Subject {
		t.Errorf("Subject = %q (%v), want %q", subject, err, m.Subject)
	}
	date, err := msg.Header.Date()
	if err != nil || !date.Equal(testStart) {
		t.Errorf("Date = %v (%v), want %v", date, err, testStart)
	}
	if id := msg.Header.Get("Message-ID"); !strings.HasPrefix(id, "<") || !strings.HasSuffix(id, "@rtcd.test>") {
		t.Errorf("Message-ID = %q", id)
	}
	if v := msg.Header.Get("MIME-Version"); v != "1.0" {
		t.Errorf("MIME-Version = %q", v)
	}
	text, html := textPart(t, msg)
	if !strings.Contains(text, link) {
		t.Errorf("text body %q does not hold the link", text)
	}
	if !strings.Contains(html, link) {
		t.Errorf("html body %q does not hold the link", html)
	}

	log := logs.String()
	if strings.Count(log, "\n") != 1 || !strings.Contains(log, "alice@example.com") || !strings.Contains(log, "Sign in to rtcd") {
		t.Errorf("log = %q, want one line with recipient and subject", log)
	}
	if strings.Contains(log, "token=") {
		t.Errorf("log %q holds the body", log)
	}
}

func TestOutboxNamesSortByTime(t *testing.T) {
	s, clk, _ := newTestOutbox(t)
	const messages = 3
	for i := range messages {
		if err := s.Send(context.Background(), Message{To: "bob@example.com", Subject: "n", Text: string(rune('a' + i))}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	names := outboxFiles(t, s.Dir()) // os.ReadDir sorts by name
	if len(names) != messages {
		t.Fatalf("outbox holds %d files, want %d: %q", len(names), messages, names)
	}
	for i, name := range names {
		raw, err := os.ReadFile(filepath.Join(s.Dir(), name))
		if err != nil {
			t.Fatal(err)
		}
		msg, err := netmail.ReadMessage(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		date, _ := msg.Header.Date()
		if want := testStart.Add(time.Duration(i) * time.Second); !date.Equal(want) {
			t.Errorf("file %d (%s) dated %v, want %v", i, name, date, want)
		}
	}
}

func TestOutboxRejectsHeaderInjection(t *testing.T) {
	s, _, logs := newTestOutbox(t)
	cases := map[string]Message{
		"subject CRLF":   {To: "alice@example.com", Subject: "hi\r\nBcc: evil@example.com", Text: "x"},
		"subject LF":     {To: "alice@example.com", Subject: "hi\nBcc: evil@example.com", Text: "x"},
		"to CRLF":        {To: "alice@example.com\r\nBcc: evil@example.com", Subject: "hi", Text: "x"},
		"to two":         {To: "alice@example.com, evil@example.com", Subject: "hi", Text: "x"},
		"to named":       {To: "Alice <alice@example.com>", Subject: "hi", Text: "x"},
		"to not address": {To: "alice", Subject: "hi", Text: "x"},
		"to too long":    {To: strings.Repeat("a", MaxAddressBytes) + "@example.com", Subject: "hi", Text: "x"},
		"empty text":     {To: "alice@example.com", Subject: "hi"},
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			err := s.Send(context.Background(), m)
			if !errors.Is(err, ErrInvalidAddress) && !errors.Is(err, ErrInvalidHeader) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrEmptyBody) {
				t.Fatalf("Send = %v, want a refusal", err)
			}
		})
	}
	if names := outboxFiles(t, s.Dir()); len(names) != 0 {
		t.Errorf("outbox holds %q after refusals", names)
	}
	if logs.Len() != 0 {
		t.Errorf("refusals logged %q", logs.String())
	}
}

func TestOutboxBodyInjectionStaysInBody(t *testing.T) {
	s, _, _ := newTestOutbox(t)
	if err := s.Send(context.Background(), Message{To: "alice@example.com", Subject: "hi", Text: "x\r\nBcc: evil@example.com\r\n"}); err != nil {
		t.Fatal(err)
	}
	names := outboxFiles(t, s.Dir())
	raw, err := os.ReadFile(filepath.Join(s.Dir(), names[0]))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if bcc := msg.Header.Get("Bcc"); bcc != "" {
		t.Errorf("Bcc header = %q", bcc)
	}
}

func TestOutboxSizeBound(t *testing.T) {
	s, _, _ := newTestOutbox(t)
	cases := map[string]Message{
		"text":    {To: "alice@example.com", Subject: "big", Text: strings.Repeat("a", MaxBodyBytes+1)},
		"both":    {To: "alice@example.com", Subject: "big", Text: strings.Repeat("a", MaxBodyBytes/2), HTML: strings.Repeat("b", MaxBodyBytes/2+1)},
		"subject": {To: "alice@example.com", Subject: strings.Repeat("s", MaxSubjectBytes+1), Text: "x"},
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			if err := s.Send(context.Background(), m); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Send = %v, want ErrTooLarge", err)
			}
		})
	}
	// Exactly at the bound is fine.
	if err := s.Send(context.Background(), Message{To: "alice@example.com", Subject: "max", Text: strings.Repeat("a", MaxBodyBytes)}); err != nil {
		t.Fatalf("Send at the bound = %v", err)
	}
	if names := outboxFiles(t, s.Dir()); len(names) != 1 {
		t.Errorf("outbox holds %q, want the one message at the bound", names)
	}
}

func TestNewOutboxSenderRejectsBadFrom(t *testing.T) {
	_, err := NewOutboxSender(t.TempDir(), "x@y.test\r\nBcc: e@v.test", clock.NewFake(testStart), slog.New(slog.DiscardHandler))
	if !errors.Is(err, ErrInvalidAddress) {
		t.Fatalf("NewOutboxSender = %v, want ErrInvalidAddress", err)
	}
}
