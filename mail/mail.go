// Package mail sends rtcd's own e-mail (sign-in links, invitations) through
// one small interface, Sender, with two implementations: OutboxSender, the
// embedded default, writes each message as an RFC 5322 .eml file into a
// directory and logs who it was for; SMTPSender hands it to a real SMTP
// server through github.com/wneessen/go-mail.
//
// Every message is checked before it is rendered: addresses must parse, stay
// within MaxAddressBytes and be bare (no display name); no header value may
// hold a CR, LF or other control character, so a caller can never smuggle in
// a header of its own ("\r\nBcc: ..."); and the bodies and the rendered
// message are bounded in size.
package mail

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	netmail "net/mail"
	"strings"
	"time"
	"unicode"

	gomail "github.com/wneessen/go-mail"
)

// Bounds on what a message may hold.
const (
	// MaxAddressBytes is the longest address accepted (RFC 5321 path limit).
	MaxAddressBytes = 254
	// MaxSubjectBytes bounds the subject before encoding.
	MaxSubjectBytes = 256
	// MaxBodyBytes bounds the text and HTML bodies together, before encoding.
	MaxBodyBytes = 256 << 10
	// MaxMessageBytes bounds the rendered message (headers, encoded bodies).
	MaxMessageBytes = 1 << 20
	// messageIDRandomBytes is the randomness in a Message-ID (128 bits).
	messageIDRandomBytes = 16
)

// Errors a Sender returns for a message it refuses; they are wrapped, so
// test with errors.Is.
var (
	ErrInvalidAddress = errors.New("mail: invalid address")
	ErrInvalidHeader  = errors.New("mail: invalid header value")
	ErrEmptyBody      = errors.New("mail: empty text body")
	ErrTooLarge       = errors.New("mail: message too large")
)

// Message is one e-mail to one recipient. Text is required; HTML is optional
// and, when set, is sent as the alternative to Text.
type Message struct {
	To      string
	Subject string
	Text    string
	HTML    string
}

// Sender delivers a Message. Implementations are safe for concurrent use.
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// ParseAddress checks that s is a single bare address ("a@example.com", no
// display name, no CR or LF) of at most MaxAddressBytes and returns it.
func ParseAddress(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalidAddress)
	}
	if len(s) > MaxAddressBytes {
		return "", fmt.Errorf("%w: longer than %d bytes", ErrInvalidAddress, MaxAddressBytes)
	}
	if hasControl(s) {
		return "", fmt.Errorf("%w: control character", ErrInvalidAddress)
	}
	a, err := netmail.ParseAddress(s)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidAddress, err)
	}
	if a.Name != "" || a.Address != s {
		return "", fmt.Errorf("%w: want a bare address, got %q", ErrInvalidAddress, s)
	}
	return a.Address, nil
}

// hasControl reports whether s holds a CR, LF or any other control
// character, none of which belong in a header value.
func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}

// validate checks m against the package's bounds and returns the parsed
// recipient.
func validate(m Message) (string, error) {
	to, err := ParseAddress(m.To)
	if err != nil {
		return "", err
	}
	if hasControl(m.Subject) {
		return "", fmt.Errorf("%w: subject holds a control character", ErrInvalidHeader)
	}
	if len(m.Subject) > MaxSubjectBytes {
		return "", fmt.Errorf("%w: subject longer than %d bytes", ErrTooLarge, MaxSubjectBytes)
	}
	if m.Text == "" {
		return "", ErrEmptyBody
	}
	if len(m.Text)+len(m.HTML) > MaxBodyBytes {
		return "", fmt.Errorf("%w: bodies longer than %d bytes", ErrTooLarge, MaxBodyBytes)
	}
	return to, nil
}

// build renders m from from, dated now, as a go-mail message:
// multipart/alternative (text, then HTML) when HTML is set, otherwise a
// single text part, both quoted-printable.
func build(m Message, from string, now time.Time) (*gomail.Msg, error) {
	to, err := validate(m)
	if err != nil {
		return nil, err
	}
	msg := gomail.NewMsg(gomail.WithEncoding(gomail.EncodingQP), gomail.WithNoDefaultUserAgent())
	if err := msg.From(from); err != nil {
		return nil, fmt.Errorf("%w: from: %v", ErrInvalidAddress, err)
	}
	if err := msg.To(to); err != nil {
		return nil, fmt.Errorf("%w: to: %v", ErrInvalidAddress, err)
	}
	msg.Subject(m.Subject)
	msg.SetDateWithValue(now)
	id, err := messageID(from)
	if err != nil {
		return nil, err
	}
	msg.SetMessageIDWithValue(id)
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	if m.HTML != "" {
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	}
	return msg, nil
}

// render writes msg into memory, refusing anything over MaxMessageBytes.
func render(msg *gomail.Msg) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := msg.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("mail: render: %w", err)
	}
	if buf.Len() > MaxMessageBytes {
		return nil, fmt.Errorf("%w: rendered message is %d bytes, limit %d", ErrTooLarge, buf.Len(), MaxMessageBytes)
	}
	return buf.Bytes(), nil
}

// messageID returns a fresh Message-ID value (without angle brackets) in the
// sender's domain, so it does not depend on the host name.
func messageID(from string) (string, error) {
	random, err := randomHex(messageIDRandomBytes)
	if err != nil {
		return "", err
	}
	domain := from[strings.LastIndexByte(from, '@')+1:]
	return random + "@" + domain, nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("mail: random: %w", err)
	}
	return hex.EncodeToString(b), nil
}
