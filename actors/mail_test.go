package actors

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"rtcd/actors/core"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/mail"
	"rtcd/ratelimit"
)

// captureSender is a mail.Sender that hands every message to a channel.
// When block is set, Send waits until it is closed (a stuck SMTP server).
// When fail is set, Send returns an error after capturing.
type captureSender struct {
	sent  chan mail.Message
	block chan struct{}
	fail  bool

	mu    sync.Mutex
	calls int
}

func newCaptureSender() *captureSender {
	return &captureSender{sent: make(chan mail.Message, 4*mailQueueCapacity)}
}

func (c *captureSender) Send(ctx context.Context, m mail.Message) error {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	if c.block != nil {
		select {
		case <-c.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.sent <- m
	if c.fail {
		return errors.New("smtp: 451 try again later")
	}
	return nil
}

// next returns the next message sent, failing the test after a timeout.
func (c *captureSender) next(t *testing.T) mail.Message {
	t.Helper()
	select {
	case m := <-c.sent:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no mail was sent")
		return mail.Message{}
	}
}

// newBareEngine builds an engine without starting it: no actor recovers
// and no mail worker runs, so a test drives the queue by hand.
func newBareEngine(t *testing.T) *Engine {
	t.Helper()
	keys, err := auth.DeriveKeys(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(core.Settings{Region: "global"}, nil, clock.NewFake(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)),
		ratelimit.NewMemory(), keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.dispatcher.Close()
		e.system.Shutdown()
	})
	return e
}

// runMailWorker runs the engine's mail worker until the test ends.
func runMailWorker(t *testing.T, e *Engine) {
	t.Helper()
	go e.mailLoop()
	t.Cleanup(func() {
		close(e.stop)
		<-e.mailDone
	})
}

func testMail(i int) outgoingMail {
	return outgoingMail{kind: "sign_in", link: fmt.Sprintf("https://dash.example/sign-in/email?token=t%d", i),
		msg: mail.Message{To: fmt.Sprintf("user%d@example.com", i), Subject: "s", Text: fmt.Sprintf("body %d", i)}}
}

// enqueueAll enqueues n messages and fails the test if that takes long:
// enqueueMail runs on a request's goroutine and must never block.
func enqueueAll(t *testing.T, e *Engine, from, n int) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := from; i < from+n; i++ {
			e.enqueueMail(testMail(i))
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("enqueueMail blocked (queue capacity %d, %d messages)", mailQueueCapacity, n)
	}
}

func TestEnqueueMailNeverBlocksWhenFull(t *testing.T) {
	e := newBareEngine(t)
	if cap(e.mailQueue) != mailQueueCapacity {
		t.Fatalf("queue capacity %d, want %d", cap(e.mailQueue), mailQueueCapacity)
	}
	// No worker: the queue fills, and the rest is dropped without blocking.
	enqueueAll(t, e, 0, mailQueueCapacity+500)
	if n := len(e.mailQueue); n != mailQueueCapacity {
		t.Fatalf("queue holds %d, want %d", n, mailQueueCapacity)
	}
	// What was dropped is the overflow; the queued ones keep their order.
	for i := 0; i < mailQueueCapacity; i++ {
		m := <-e.mailQueue
		if want := testMail(i).msg.To; m.msg.To != want {
			t.Fatalf("queued message %d is for %s, want %s", i, m.msg.To, want)
		}
	}
	select {
	case m := <-e.mailQueue:
		t.Fatalf("an overflowing message was queued: %s", m.msg.To)
	default:
	}
}

func TestEnqueueMailNeverBlocksWhileSenderIsStuck(t *testing.T) {
	e := newBareEngine(t)
	s := newCaptureSender()
	s.block = make(chan struct{})
	e.SetMailer(Mailer{Sender: s, DashboardURL: "https://dash.example"})
	runMailWorker(t, e)
	// The worker takes one message and hangs in Send; the queue fills
	// behind it and enqueueing still returns at once.
	enqueueAll(t, e, 0, 1)
	deadline := time.Now().Add(10 * time.Second)
	for len(e.mailQueue) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the worker never took the first message")
		}
		time.Sleep(time.Millisecond)
	}
	enqueueAll(t, e, 1, 2*mailQueueCapacity)
	if n := len(e.mailQueue); n != mailQueueCapacity {
		t.Fatalf("queue holds %d, want %d", n, mailQueueCapacity)
	}
	close(s.block) // the server recovers: the queued mail goes out, in order
	for i := 0; i <= mailQueueCapacity; i++ {
		if m := s.next(t); m.To != testMail(i).msg.To {
			t.Fatalf("mail %d is for %s, want %s", i, m.To, testMail(i).msg.To)
		}
	}
}

func TestMailWorkerSendsQueuedMail(t *testing.T) {
	e := newBareEngine(t)
	s := newCaptureSender()
	e.SetMailer(Mailer{Sender: s, DashboardURL: "https://dash.example/"})
	runMailWorker(t, e)

	expires := time.Date(2026, 11, 22, 12, 15, 0, 0, time.UTC)
	token, err := auth.NewDashboardSecret(auth.SignInTokenPrefix)
	if err != nil {
		t.Fatal(err)
	}
	e.enqueueMail(e.signInMail("alice@example.com", token, expires))
	e.enqueueMail(e.invitationMail("bob@example.com", "rtc_inv_x", "Acme", "Alice (alice@example.com)", expires))
	enqueueAll(t, e, 0, 3)

	m := s.next(t)
	if m.To != "alice@example.com" || m.Subject == "" {
		t.Fatalf("sign-in mail: %+v", m)
	}
	if got := linkToken(t, m.Text, "https://dash.example/sign-in/email?", "token"); got != token {
		t.Fatalf("sign-in mail carries token %q, want %q", got, token)
	}
	m = s.next(t)
	if m.To != "bob@example.com" || !strings.Contains(m.Text, `"Acme"`) ||
		linkToken(t, m.Text, "https://dash.example/invitations/accept?", "invitation_token") != "rtc_inv_x" {
		t.Fatalf("invitation mail: %+v", m)
	}
	for i := 0; i < 3; i++ {
		if m := s.next(t); m.To != testMail(i).msg.To || m.Text != testMail(i).msg.Text {
			t.Fatalf("mail %d: %+v", i, m)
		}
	}
}

func TestMailWorkerSurvivesSendErrorsAndNoSender(t *testing.T) {
	e := newBareEngine(t)
	runMailWorker(t, e)
	// No Mailer yet: messages are logged and dropped, the worker goes on.
	enqueueAll(t, e, 0, 3)
	deadline := time.Now().Add(10 * time.Second)
	for len(e.mailQueue) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the worker did not drain the queue without a sender")
		}
		time.Sleep(time.Millisecond)
	}
	// A sender that fails every message: each is still attempted.
	s := newCaptureSender()
	s.fail = true
	e.SetMailer(Mailer{Sender: s, DashboardURL: "https://dash.example"})
	enqueueAll(t, e, 10, 3)
	for i := 10; i < 13; i++ {
		if m := s.next(t); m.To != testMail(i).msg.To {
			t.Fatalf("mail %d is for %s", i, m.To)
		}
	}
}

// linkToken finds the line of text starting with prefix and returns its
// query parameter name.
func linkToken(t *testing.T, text, prefix, name string) string {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			u, err := url.Parse(strings.TrimSpace(line))
			if err != nil {
				t.Fatalf("link %q: %v", line, err)
			}
			return u.Query().Get(name)
		}
	}
	t.Fatalf("no link starting with %q in:\n%s", prefix, text)
	return ""
}
