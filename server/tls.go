package server

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"rtcd/config"
)

// listenerTLS is what --tls-cert and --tls-key give: the TLS settings the
// API listener (HTTPS) and the built-in media node (wss://) serve with, and
// the certificate itself, which the sandbox payment provider's callbacks to
// the API pin.
type listenerTLS struct {
	config *tls.Config
	leaf   []byte // DER of the served certificate
}

// sandboxCallbackTimeout bounds one callback of the sandbox to the API
// over TLS (as payments.SandboxCallbackTimeout does over plain HTTP).
const sandboxCallbackTimeout = 15 * time.Second

// loadListenerTLS reads the certificate and key of cfg; nil without them.
// A file that is missing, unreadable or not a matching PEM pair fails the
// start: rtcd never falls back to plain HTTP on its own.
func loadListenerTLS(cfg *config.Config) (*listenerTLS, error) {
	if !cfg.ServesTLS() {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s / --tls-key %s: %w", cfg.TLSCertFile, cfg.TLSKeyFile, err)
	}
	if len(cert.Certificate) == 0 {
		return nil, errors.New("--tls-cert holds no certificate")
	}
	return &listenerTLS{
		config: &tls.Config{
			Certificates: []tls.Certificate{cert},
			MinVersion:   tls.VersionTLS12,
			// HTTP/1.1 only: the API's server and the media node's
			// WebSocket upgrade speak nothing else.
			NextProtos: []string{"http/1.1"},
		},
		leaf: cert.Certificate[0],
	}, nil
}

// wrap returns ln serving TLS, or ln itself when t is nil.
func (t *listenerTLS) wrap(ln net.Listener) net.Listener {
	if t == nil || ln == nil {
		return ln
	}
	return tls.NewListener(ln, t.config)
}

// scheme is the scheme of URLs of a listener: secure when t is set.
func (t *listenerTLS) scheme(plain, secure string) string {
	if t == nil {
		return plain
	}
	return secure
}

// callbackClient is the HTTP client of the sandbox's callbacks to the API's
// own listener: it trusts exactly the certificate the listener serves
// (pinned), whatever names it was issued for, since the callback dials the
// listener's address, not its public name. No proxy, no redirects, like
// the sandbox's own default client. nil without TLS (the default client).
func (t *listenerTLS) callbackClient() *http.Client {
	if t == nil {
		return nil
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil
	transport.TLSClientConfig = &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain is checked by VerifyPeerCertificate, against the pin.
		InsecureSkipVerify: true, //nolint:gosec // pinned below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || !bytes.Equal(raw[0], t.leaf) {
				return errors.New("the API listener presented a certificate other than --tls-cert")
			}
			return nil
		},
	}
	return &http.Client{
		Transport: transport,
		Timeout:   sandboxCallbackTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
