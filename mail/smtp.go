package mail

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// TLS modes for SMTPConfig.TLS.
const (
	TLSNone     = "none"     // plain text; only for a server on a trusted network
	TLSStartTLS = "starttls" // STARTTLS is required
	TLSImplicit = "tls"      // TLS from the first byte (usually port 465)
)

const (
	// DefaultSMTPTimeoutSeconds applies when SMTPConfig.TimeoutSeconds is 0.
	DefaultSMTPTimeoutSeconds = 30
	// MaxSMTPTimeoutSeconds bounds SMTPConfig.TimeoutSeconds.
	MaxSMTPTimeoutSeconds = 300
	// maxPort is the largest TCP port.
	maxPort = 65535
)

// SMTPConfig says how to reach an SMTP server. Username and Password are
// optional; when Username is set the client authenticates with the best
// mechanism the server offers.
type SMTPConfig struct {
	Host           string
	Port           int
	Username       string
	Password       string
	From           string
	TLS            string // TLSNone, TLSStartTLS or TLSImplicit
	TimeoutSeconds int    // per message, dial to QUIT; 0 means DefaultSMTPTimeoutSeconds
	// CAFile names a PEM file of CA certificates trusted for the server's
	// certificate in addition to the system roots (a relay with a
	// certificate from a private CA). Empty: the system roots only. It
	// needs TLS (TLSStartTLS or TLSImplicit).
	CAFile string
}

// SMTPSender sends each message through an SMTP server, one connection per
// message.
type SMTPSender struct {
	host    string
	from    string
	timeout time.Duration
	options []gomail.Option
}

// NewSMTPSender checks cfg and returns a sender for it. It does not connect.
func NewSMTPSender(cfg SMTPConfig) (*SMTPSender, error) {
	if cfg.Host == "" || hasControl(cfg.Host) {
		return nil, fmt.Errorf("mail: smtp host %q is invalid", cfg.Host)
	}
	if cfg.Port < 1 || cfg.Port > maxPort {
		return nil, fmt.Errorf("mail: smtp port %d is out of range 1..%d", cfg.Port, maxPort)
	}
	from, err := ParseAddress(cfg.From)
	if err != nil {
		return nil, fmt.Errorf("smtp from: %w", err)
	}
	timeoutSeconds := cfg.TimeoutSeconds
	if timeoutSeconds == 0 {
		timeoutSeconds = DefaultSMTPTimeoutSeconds
	}
	if timeoutSeconds < 1 || timeoutSeconds > MaxSMTPTimeoutSeconds {
		return nil, fmt.Errorf("mail: smtp timeout %ds is out of range 1..%d", timeoutSeconds, MaxSMTPTimeoutSeconds)
	}
	timeout := time.Duration(timeoutSeconds) * time.Second

	options := []gomail.Option{gomail.WithPort(cfg.Port), gomail.WithTimeout(timeout)}
	// The certificate is always verified, against the host name as
	// configured; the CA file only adds roots.
	tlsConfig := &tls.Config{ServerName: cfg.Host, MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		if cfg.TLS == TLSNone {
			return nil, fmt.Errorf("mail: smtp CA file %s is set but smtp tls is %q; use %q or %q", cfg.CAFile, TLSNone, TLSStartTLS, TLSImplicit)
		}
		roots, err := systemRootsPlus(cfg.CAFile)
		if err != nil {
			return nil, err
		}
		tlsConfig.RootCAs = roots
	}
	options = append(options, gomail.WithTLSConfig(tlsConfig))
	switch cfg.TLS {
	case TLSNone:
		options = append(options, gomail.WithTLSPolicy(gomail.NoTLS))
	case TLSStartTLS:
		options = append(options, gomail.WithTLSPolicy(gomail.TLSMandatory))
	case TLSImplicit:
		options = append(options, gomail.WithSSL())
	default:
		return nil, fmt.Errorf("mail: smtp tls %q is not one of %q, %q, %q", cfg.TLS, TLSNone, TLSStartTLS, TLSImplicit)
	}
	if cfg.Username != "" {
		options = append(options,
			gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(cfg.Username),
			gomail.WithPassword(cfg.Password))
	}
	return &SMTPSender{host: cfg.Host, from: from, timeout: timeout, options: options}, nil
}

// systemRootsPlus is the system's trusted roots plus the certificates of
// the PEM file at path. A file without a certificate is an error: the
// operator asked to trust something, and trusting nothing more must not
// pass silently.
func systemRootsPlus(path string) (*x509.CertPool, error) {
	pemBytes, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mail: reading the smtp CA file: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool() // no system roots here: the file's CAs alone
	}
	if !roots.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("mail: no PEM certificates in the smtp CA file %s", path)
	}
	return roots, nil
}

// Send delivers m, giving up after the configured timeout.
func (s *SMTPSender) Send(ctx context.Context, m Message) error {
	msg, err := build(m, s.from, time.Now().UTC())
	if err != nil {
		return err
	}
	if _, err := render(msg); err != nil {
		return err
	}
	client, err := gomail.NewClient(s.host, s.options...)
	if err != nil {
		return fmt.Errorf("mail: smtp client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := client.DialAndSendWithContext(ctx, msg); err != nil {
		return fmt.Errorf("mail: smtp send to %s: %w", s.host, err)
	}
	return nil
}

// Compile-time check that SMTPSender is a Sender.
var _ Sender = (*SMTPSender)(nil)
