package webhookdelivery

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// Client defaults and bounds.
const (
	// DefaultTimeoutSeconds bounds one whole attempt: connect, TLS, request,
	// response headers and the captured body. A receiver is expected to
	// acknowledge quickly and do its work afterwards.
	DefaultTimeoutSeconds = 10
	// MaxTimeoutSeconds caps a configured timeout so that one slow receiver
	// cannot pin a delivery worker for long.
	MaxTimeoutSeconds = 60
	// DefaultMaxResponseCaptureBytes is how much of a response body is kept
	// with an attempt, for the customer to debug their receiver.
	DefaultMaxResponseCaptureBytes = 4096
	// MaxResponseCaptureBytes caps a configured capture size; captures are
	// stored with every attempt.
	MaxResponseCaptureBytes = 64 << 10 // 64 KiB
	// maxResponseDiscardBytes is how much of the body beyond the capture is
	// read and thrown away so the connection can be reused. A receiver that
	// sends more gets its connection closed instead of being read to the end.
	maxResponseDiscardBytes = 64 << 10 // 64 KiB
	// maxResponseHeaderBytes bounds the response headers a receiver can make
	// us buffer (net/http's default is 1 MiB).
	maxResponseHeaderBytes = 64 << 10 // 64 KiB
	// maxDialAddresses bounds how many of a name's addresses are tried in
	// turn; each try shares the attempt's single timeout anyway.
	maxDialAddresses = 4
	// maxIdleConns and maxIdleConnsPerHost bound the keep-alive pool, which
	// saves a TLS handshake per delivery to busy receivers. Per host it
	// keeps a whole window (the attempts the dispatcher has in flight to
	// one endpoint at most), so a full window's connections are all reused;
	// in all, as many as the dispatcher has attempts in flight over every
	// endpoint (its webhookConcurrency).
	maxIdleConns        = 256
	maxIdleConnsPerHost = MaxWindowAttempts
	// idleConnTimeout closes pooled connections a receiver no longer uses.
	idleConnTimeout = 90 * time.Second
)

// ClientConfig configures NewClient. The zero value is the production
// setting: public HTTPS destinations only, system roots, default bounds.
type ClientConfig struct {
	// AllowPrivate switches off the destination address and name checks and
	// accepts plain http. For local testing only; a warning is logged.
	AllowPrivate bool
	// ExtraCAFile names a PEM file of certificates trusted in addition to
	// the system roots. For local testing only; a warning is logged.
	ExtraCAFile string
	// TimeoutSeconds bounds each attempt; zero or less means
	// DefaultTimeoutSeconds, more than MaxTimeoutSeconds is capped.
	TimeoutSeconds int
	// MaxResponseCaptureBytes bounds the response body kept per attempt;
	// zero or less means DefaultMaxResponseCaptureBytes, more than
	// MaxResponseCaptureBytes is capped.
	MaxResponseCaptureBytes int
	// Resolver returns the addresses of a host name. Nil means
	// net.DefaultResolver. Tests use it to make a name resolve anywhere.
	Resolver func(ctx context.Context, host string) ([]netip.Addr, error)
	// Logger receives the testing-settings warning and configuration
	// errors. Nil means slog.Default().
	Logger *slog.Logger
}

// Attempt is the outcome of one delivery attempt, as the dispatcher records
// it. The dispatcher adds the attempt number, request time, next attempt
// time and final state.
type Attempt struct {
	// StatusCode is the receiver's HTTP status, 0 when no response arrived.
	StatusCode int `json:"status_code"`
	// LatencyMillis is the time from sending the request to receiving the
	// response headers, or to the failure.
	LatencyMillis int64 `json:"latency_ms"`
	// ResponseBody is the start of the response body, at most the capture
	// bound in bytes, made valid UTF-8 (invalid bytes become U+FFFD).
	ResponseBody string `json:"response_body"`
	// Err says why the attempt failed; empty exactly when Success is true.
	Err string `json:"error,omitempty"`
	// Success is true for a status of 200 through 299 and nothing else. A
	// redirect (3xx) is a failure; it is not followed.
	Success bool `json:"success"`
	// Outcome classifies the attempt for the metrics (one of the Outcome
	// constants); see Result.
	Outcome string `json:"-"`
}

// Attempt outcomes: the label of rtcd_webhook_attempts_total (package
// metrics pre-creates exactly these).
const (
	OutcomeSucceeded    = "succeeded"     // a 2xx status
	OutcomeHTTPError    = "http_error"    // another status (3xx, 4xx, 5xx)
	OutcomeTimeout      = "timeout"       // no response within the timeout
	OutcomeNetworkError = "network_error" // resolving, connecting, TLS or reading failed
	OutcomeRefused      = "refused"       // the destination policy refused the URL or its addresses
)

// Result is a's outcome: Outcome when set, else derived from Success and
// StatusCode (an Attempt made by another sender, a test's), so it is always
// one of the Outcome constants.
func (a Attempt) Result() string {
	switch {
	case a.Success:
		return OutcomeSucceeded
	case a.StatusCode != 0:
		return OutcomeHTTPError
	case a.Outcome != "":
		return a.Outcome
	}
	return OutcomeNetworkError
}

// failureOutcome classifies an error of an attempt that got no response.
func failureOutcome(err error) string {
	var urlErr *url.Error
	switch {
	case errors.Is(err, ErrForbiddenDestination) || errors.Is(err, ErrInvalidURL):
		return OutcomeRefused
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &urlErr) && urlErr.Timeout()):
		return OutcomeTimeout
	}
	return OutcomeNetworkError
}

// Client delivers signed webhook requests under the destination policy. It
// is safe for concurrent use; one Client should serve all deliveries so the
// connection pool is shared.
type Client struct {
	allowPrivate bool
	timeout      time.Duration
	captureBytes int
	resolve      func(ctx context.Context, host string) ([]netip.Addr, error)
	// dial connects to an already checked "ip:port". It is a field so that
	// tests can observe which address is dialled.
	dial    func(ctx context.Context, network, address string) (net.Conn, error)
	http    *http.Client
	initErr error
}

// NewClient returns a Client for cfg. A configuration error (an unreadable
// or empty ExtraCAFile) is logged, reported by Err, and makes every Deliver
// fail: the client never falls back to a trust setting it was not given.
func NewClient(cfg ClientConfig) *Client {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}

	timeoutSeconds := cfg.TimeoutSeconds
	if timeoutSeconds <= 0 {
		timeoutSeconds = DefaultTimeoutSeconds
	}
	timeoutSeconds = min(timeoutSeconds, MaxTimeoutSeconds)
	captureBytes := cfg.MaxResponseCaptureBytes
	if captureBytes <= 0 {
		captureBytes = DefaultMaxResponseCaptureBytes
	}
	captureBytes = min(captureBytes, MaxResponseCaptureBytes)

	c := &Client{
		allowPrivate: cfg.AllowPrivate,
		timeout:      time.Duration(timeoutSeconds) * time.Second,
		captureBytes: captureBytes,
		resolve:      cfg.Resolver,
	}
	if c.resolve == nil {
		c.resolve = defaultResolve
	}

	dialer := &net.Dialer{Timeout: c.timeout}
	if !cfg.AllowPrivate {
		dialer.Control = checkDialledAddress
	}
	c.dial = dialer.DialContext

	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.ExtraCAFile != "" {
		roots, err := systemRootsPlus(cfg.ExtraCAFile)
		if err != nil {
			c.initErr = err
			logger.Error("webhook delivery client is unusable", "error", err)
		}
		tlsConfig.RootCAs = roots
	}

	transport := &http.Transport{
		// Environment proxies (HTTPS_PROXY and friends) are never used: a
		// proxy would connect on our behalf and bypass the address checks.
		Proxy: nil,
		// The transport gives the URL's host to DialContext; dialContext
		// resolves and checks it. TLS runs over the returned connection with
		// ServerName (SNI and certificate name) taken from the URL host, so
		// certificates are verified against the name, not the dialled IP.
		DialContext:            c.dialContext,
		TLSClientConfig:        tlsConfig,
		TLSHandshakeTimeout:    c.timeout,
		ResponseHeaderTimeout:  c.timeout,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		MaxIdleConns:           maxIdleConns,
		MaxIdleConnsPerHost:    maxIdleConnsPerHost,
		IdleConnTimeout:        idleConnTimeout,
		// The captured body is kept as the receiver sent it, and a
		// compressed body cannot expand behind the capture bound.
		DisableCompression: true,
		// HTTP/2 where a TLS receiver offers it (ALPN): a window of
		// attempts then shares one connection. A transport with its own
		// DialContext and TLS configuration speaks only HTTP/1.1 unless
		// asked; HTTP/2 connections are dialled through the same
		// dialContext, so every address check above still applies.
		ForceAttemptHTTP2: true,
	}
	c.http = &http.Client{
		Transport: transport,
		Timeout:   c.timeout,
		// A redirect is a failed attempt and is not followed: following it
		// would send a signed request to a destination nobody checked.
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}

	if cfg.AllowPrivate || cfg.ExtraCAFile != "" {
		logger.Warn("webhook delivery testing settings are on: do not use in production",
			"allow_private_destinations", cfg.AllowPrivate,
			"extra_ca_file", cfg.ExtraCAFile)
	}
	return c
}

// Err reports a configuration error found by NewClient, or nil. Call it at
// start-up to fail fast.
func (c *Client) Err() error {
	return c.initErr
}

// Deliver POSTs body with headers to rawURL once and reports the outcome. It
// never retries; the dispatcher schedules retries with NextAttemptAt.
//
// rawURL is checked with CheckURL again before every attempt, since the
// policy may be stricter than when the endpoint was stored. Header names are
// sent exactly as given (for example X-RTC-Webhook-Id); use Headers to build
// them. The attempt is bounded by the client's timeout and by ctx.
func (c *Client) Deliver(ctx context.Context, rawURL string, headers map[string]string, body []byte) Attempt {
	if c.initErr != nil {
		return Attempt{Err: c.initErr.Error(), Outcome: OutcomeNetworkError}
	}
	if _, err := CheckURL(rawURL, c.allowPrivate); err != nil {
		return Attempt{Err: err.Error(), Outcome: OutcomeRefused}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return Attempt{Err: err.Error(), Outcome: OutcomeRefused}
	}
	for name, value := range headers {
		// Assigned directly rather than with Header.Set, which would
		// rewrite X-RTC-Webhook-Id as X-Rtc-Webhook-Id on the wire.
		req.Header[name] = []string{value}
	}

	// Latency is a duration on the monotonic clock, not a point in time, so
	// it is measured with time.Now rather than the injected clock.
	start := time.Now()
	resp, err := c.http.Do(req)
	latency := time.Since(start).Milliseconds()
	if err != nil {
		return Attempt{LatencyMillis: latency, Err: describeError(err), Outcome: failureOutcome(err)}
	}
	defer resp.Body.Close()

	// A failed body read after the status arrived does not change the
	// outcome: the status decides, and the body is only kept for debugging.
	captured, _ := io.ReadAll(io.LimitReader(resp.Body, int64(c.captureBytes)))
	_, _ = io.CopyN(io.Discard, resp.Body, maxResponseDiscardBytes)

	attempt := Attempt{
		StatusCode:    resp.StatusCode,
		LatencyMillis: latency,
		ResponseBody:  validUTF8Prefix(captured, c.captureBytes),
		Success:       resp.StatusCode >= 200 && resp.StatusCode <= 299,
		Outcome:       OutcomeSucceeded,
	}
	if !attempt.Success {
		attempt.Outcome = OutcomeHTTPError
		attempt.Err = "unexpected status " + strconv.Itoa(resp.StatusCode)
		if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
			attempt.Err += " (redirects are not followed)"
		}
	}
	return attempt
}

// dialContext is the transport's dialer: resolve the host once, refuse the
// connection if any address is forbidden, then dial the checked addresses
// themselves so no later resolution can substitute another one.
func (c *Client) dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("%w: port %q", ErrInvalidURL, portText)
	}

	addrs, err := c.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	if !c.allowPrivate {
		// One forbidden answer refuses the whole name: an attacker controls
		// the order of the answers, so a mixed set is not trusted at all.
		for _, ip := range addrs {
			if ForbiddenIP(ip) {
				return nil, liftedByAllowPrivate(fmt.Errorf("%w: %s resolves to %s", ErrForbiddenDestination, host, ip))
			}
		}
	}

	var dialErrs []error
	for i, ip := range addrs {
		if i == maxDialAddresses {
			break
		}
		conn, err := c.dial(ctx, network, netip.AddrPortFrom(ip, uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		dialErrs = append(dialErrs, err)
	}
	return nil, errors.Join(dialErrs...)
}

// lookup returns the addresses for host: the literal itself for an IP
// literal, otherwise the resolver's answer, unmapped so that IPv4 answers
// are dialled as IPv4.
func (c *Client) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip.Unmap()}, nil
	}
	answers, err := c.resolve(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", host, err)
	}
	if len(answers) == 0 {
		return nil, fmt.Errorf("resolving %s: no addresses", host)
	}
	addrs := make([]netip.Addr, 0, len(answers))
	for _, ip := range answers {
		addrs = append(addrs, ip.Unmap())
	}
	return addrs, nil
}

// defaultResolve asks the system resolver for IPv4 and IPv6 addresses.
func defaultResolve(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// checkDialledAddress is the net.Dialer Control hook: it runs on the socket
// about to connect and re-checks the address actually being dialled.
func checkDialledAddress(network, address string, _ syscall.RawConn) error {
	addrPort, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparseable dial address %q", ErrForbiddenDestination, address)
	}
	if ForbiddenIP(addrPort.Addr()) {
		return fmt.Errorf("%w: dialled address %s", ErrForbiddenDestination, addrPort.Addr())
	}
	return nil
}

// systemRootsPlus returns the system roots plus the certificates in path.
func systemRootsPlus(path string) (*x509.CertPool, error) {
	pemBytes, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("webhooks: reading extra CA file: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		// No system roots on this machine: the extra CA alone is still
		// exactly what the operator asked to trust in addition.
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("webhooks: no PEM certificates in extra CA file %s", path)
	}
	return roots, nil
}

// describeError drops the "Post \"<url>\": " prefix net/http adds, since the
// URL is recorded with the endpoint, and names timeouts plainly.
func describeError(err error) string {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		if urlErr.Timeout() {
			return "timeout: " + urlErr.Err.Error()
		}
		return urlErr.Err.Error()
	}
	return err.Error()
}

// validUTF8Prefix returns the longest prefix of b, with each invalid byte
// replaced by U+FFFD, that fits in limit bytes. A capture cut in the middle
// of a multi-byte character therefore loses that character instead of
// storing half of it.
func validUTF8Prefix(b []byte, limit int) string {
	var out strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		// DecodeRune returns RuneError with size 1 for an invalid byte;
		// writing RuneError stores U+FFFD, 3 bytes.
		if out.Len()+utf8.RuneLen(r) > limit {
			break
		}
		out.WriteRune(r)
		b = b[size:]
	}
	return out.String()
}
