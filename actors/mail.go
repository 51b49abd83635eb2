package actors

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"rtcd/actors/core"
	"rtcd/actors/directory"
	"rtcd/mail"
)

// The mail queue takes dashboard mail (sign-in links, invitations) off the
// request path: the directory answers once the link a message carries is
// durable, naming the mail (SignInMail, InvitationMail), the request's
// handler enqueues it without blocking, and one worker goroutine sends it.
// A request therefore takes the same time whether or not a mail is sent, so
// timing does not tell whether an address is known.

// Named bounds of the mail queue.
const (
	// mailQueueCapacity bounds the messages waiting to be sent; past it a
	// message is dropped and logged (the person can ask for a new link).
	mailQueueCapacity = 1024
	// mailSendTimeout bounds one Send, so a stuck SMTP server cannot hold
	// the worker forever.
	mailSendTimeout = 30 * time.Second
)

// Mailer is how the engine sends dashboard mail.
type Mailer struct {
	Sender mail.Sender
	// DashboardURL is the origin links point at (configuration, never a
	// request's Host header).
	DashboardURL string
	// LogLinks logs each message's link. On for the embedded outbox, where
	// the log is how a local operator signs in; off for SMTP, where a link
	// in a log would be a credential leak.
	LogLinks bool
}

// outgoingMail is one queued message and the link it carries.
type outgoingMail struct {
	kind string // "sign_in" or "invitation", for logs
	link string
	msg  mail.Message
}

// SetMailer sets how dashboard mail is sent. Until it is called, mail is
// logged and dropped.
func (e *Engine) SetMailer(m Mailer) { e.mailer.Store(&m) }

// mailSettings is the current Mailer (zero until SetMailer).
func (e *Engine) mailSettings() Mailer {
	if m := e.mailer.Load(); m != nil {
		return *m
	}
	return Mailer{}
}

// enqueueMail queues m without blocking; a full queue drops it.
func (e *Engine) enqueueMail(m outgoingMail) {
	select {
	case e.mailQueue <- m:
	default:
		slog.Warn("mail queue full; message dropped", "kind", m.kind, "capacity", mailQueueCapacity)
	}
}

// mailLoop sends queued mail until the engine stops.
func (e *Engine) mailLoop() {
	defer close(e.mailDone)
	for {
		select {
		case <-e.stop:
			return
		case m := <-e.mailQueue:
			e.sendMail(m)
		}
	}
}

func (e *Engine) sendMail(m outgoingMail) {
	mailer := e.mailSettings()
	if mailer.LogLinks {
		// The outbox's own log names recipient and subject only; the link
		// is logged here so a local operator can sign in from the log.
		slog.Info("dashboard mail link", "kind", m.kind, "to", m.msg.To, "link", m.link)
	}
	if mailer.Sender == nil {
		slog.Warn("no mail sender configured; message not sent", "kind", m.kind, "to", m.msg.To)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), mailSendTimeout)
	defer cancel()
	if err := mailer.Sender.Send(ctx, m.msg); err != nil {
		slog.Error("sending dashboard mail failed", "kind", m.kind, "to", m.msg.To, "error", err)
	}
}

// signInMail is the sign-in message with the link; its token is the link's
// token query parameter.
func (e *Engine) signInMail(to, token string, expiresAt time.Time) outgoingMail {
	link := e.dashboardLink("/sign-in/email", url.Values{"token": {token}})
	text := "Use this link to sign in to rtcd:\n\n" + link +
		"\n\nIt works once and expires at " + core.Timestamp(expiresAt) + " (" + directory.SignInLinkTTL.String() + ").\n" +
		"If you did not ask for it, ignore this message.\n"
	return outgoingMail{kind: "sign_in", link: link, msg: mail.Message{To: to, Subject: "Your rtcd sign-in link", Text: text}}
}

// invitationMail is the invitation message with its link.
func (e *Engine) invitationMail(to, token, workspace, inviter string, expiresAt time.Time) outgoingMail {
	link := e.dashboardLink("/invitations/accept", url.Values{"invitation_token": {token}})
	text := inviter + " invited you to the rtcd workspace \"" + workspace + "\".\n\nOpen this link to join:\n\n" + link +
		"\n\nThe invitation is for this address only and expires at " + core.Timestamp(expiresAt) + ".\n"
	return outgoingMail{kind: "invitation", link: link, msg: mail.Message{To: to, Subject: "You are invited to an rtcd workspace", Text: text}}
}

// dashboardLink builds a link on the configured dashboard origin, never
// on a request's Host header.
func (e *Engine) dashboardLink(path string, q url.Values) string {
	return strings.TrimRight(e.mailSettings().DashboardURL, "/") + path + "?" + q.Encode()
}
