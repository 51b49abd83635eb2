package server

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"rtcd/actors"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/config"
	"rtcd/googleauth"
	"rtcd/mail"
)

// newMailer builds the dashboard's mail sender: SMTP when --smtp-host is
// set, else the embedded outbox in <data-dir>/outbox/, whose links are
// logged so a local operator can sign in.
func newMailer(cfg *config.Config, clk clock.Clock, origin string) (actors.Mailer, error) {
	if cfg.SMTPHost == "" {
		dir := filepath.Join(cfg.DataDir, "outbox")
		sender, err := mail.NewOutboxSender(dir, cfg.MailFrom, clk, slog.Default())
		if err != nil {
			return actors.Mailer{}, fmt.Errorf("mail outbox: %w", err)
		}
		return actors.Mailer{Sender: sender, DashboardURL: origin, LogLinks: true}, nil
	}
	sender, err := mail.NewSMTPSender(mail.SMTPConfig{
		Host: cfg.SMTPHost, Port: cfg.SMTPPort, Username: cfg.SMTPUsername, Password: cfg.SMTPPassword,
		From: cfg.MailFrom, TLS: cfg.SMTPTLS, TimeoutSeconds: cfg.SMTPTimeoutSeconds, CAFile: cfg.SMTPCAFile,
	})
	if err != nil {
		return actors.Mailer{}, fmt.Errorf("smtp: %w", err)
	}
	return actors.Mailer{Sender: sender, DashboardURL: origin}, nil
}

// newGoogle builds the Google sign-in provider, or nil when it is off.
func newGoogle(cfg *config.Config, keys auth.Keys, clk clock.Clock, origin string) (*googleauth.Provider, error) {
	if cfg.GoogleClientID == "" {
		return nil, nil
	}
	redirect := cfg.GoogleRedirectURL
	if redirect == "" {
		redirect = strings.TrimRight(origin, "/") + "/sign-in/google"
	}
	p, err := googleauth.New(googleauth.Config{
		Issuer: cfg.GoogleIssuer, ClientID: cfg.GoogleClientID, ClientSecret: cfg.GoogleClientSecret,
		RedirectURL: redirect, StateKey: keys.GoogleState(), Now: clk.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("google sign-in: %w", err)
	}
	return p, nil
}
