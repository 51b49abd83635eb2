package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// DefaultBaseURL is the address used without WithBaseURL: rtcd serve's
// default --listen address, with /v1 appended.
const DefaultBaseURL = "http://127.0.0.1:8080"

// DefaultRetries is how many times a retryable request is retried by default
// (so at most DefaultRetries+1 attempts).
const DefaultRetries = 2

// DefaultTimeout bounds each attempt of a request sent with the default
// HTTP client (see WithHTTPClient).
const DefaultTimeout = 60 * time.Second

var defaultHTTPClient = &http.Client{Timeout: DefaultTimeout}

// maxResponseBytes bounds a response body read by the client.
const maxResponseBytes = 16 << 20

// Client calls the rtcd API with one secret API key. It is safe for
// concurrent use.
type Client struct {
	apiKey    secret
	base      string // scheme://host[/prefix]/vN, no trailing slash
	hc        *http.Client
	retries   int
	backoff   BackoffFunc
	userAgent string
}

// Option configures a Client (see New).
type Option func(*Client) error

// MaxRetryAfter is the longest Retry-After DefaultBackoff waits. A server
// asking for a longer pause gets no retry: the call returns its *APIError
// (with RetryAfter set) at once, and the caller decides what to do.
const MaxRetryAfter = 60 * time.Second

// BackoffFunc returns how long to wait before retry number retry (1 for the
// first retry). retryAfter is the Retry-After the server sent with the
// failed attempt (0 when none, e.g. after a connection error). A negative
// result means "do not retry": the call returns the last error at once.
type BackoffFunc func(retry int, retryAfter time.Duration) time.Duration

// DefaultBackoff waits the server's Retry-After when it sent one (up to
// MaxRetryAfter; a longer one is not waited for: DefaultBackoff returns a
// negative duration and the call returns the *APIError), else exponentially
// longer with jitter: about 0.5 s, 1 s, 2 s, … capped at 8 s.
func DefaultBackoff(retry int, retryAfter time.Duration) time.Duration {
	if retryAfter > MaxRetryAfter {
		return -1
	}
	if retryAfter > 0 {
		return retryAfter
	}
	d := 500 * time.Millisecond << min(max(retry-1, 0), 4)
	// Full jitter on the upper half: between d/2 and d.
	return d/2 + mrand.N(d/2+1)
}

// New returns a client that authenticates with apiKey (a secret key,
// sk_live_…, sent as Authorization: Bearer). Without options it talks to
// DefaultBaseURL with an HTTP client whose timeout is DefaultTimeout,
// DefaultRetries and DefaultBackoff.
func New(apiKey string, opts ...Option) (*Client, error) {
	if apiKey == "" {
		return nil, errors.New("rtcd: empty API key")
	}
	c := &Client{apiKey: secret(apiKey), hc: defaultHTTPClient, retries: DefaultRetries, backoff: DefaultBackoff}
	base, err := normalizeBaseURL(DefaultBaseURL)
	if err != nil {
		return nil, err
	}
	c.base = base
	for _, opt := range opts {
		if err := opt(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// WithBaseURL sets the API address. Per the interface specification (9.5),
// /v1 is appended when the address's path does not end in a version segment
// (/v1, /v2, …), and an address that does is kept as given; trailing
// slashes are ignored. So http://h, http://h/ and http://h/v1/ all mean
// http://h/v1, http://h/v2 stays http://h/v2 and http://h/prefix becomes
// http://h/prefix/v1. The scheme must be http or https, and the address
// may carry no query, fragment or user information.
func WithBaseURL(address string) Option {
	return func(c *Client) error {
		base, err := normalizeBaseURL(address)
		if err != nil {
			return err
		}
		c.base = base
		return nil
	}
}

// WithHTTPClient sets the HTTP client requests are sent with (timeouts,
// transport, proxies). nil means the default client (timeout
// DefaultTimeout per attempt).
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			hc = defaultHTTPClient
		}
		c.hc = hc
		return nil
	}
}

// WithRetries sets how many times a retryable request is retried (0: never).
func WithRetries(n int) Option {
	return func(c *Client) error {
		if n < 0 {
			return fmt.Errorf("rtcd: retries must not be negative, got %d", n)
		}
		c.retries = n
		return nil
	}
}

// WithBackoff sets the wait before each retry (nil: DefaultBackoff). The
// wait is cut short, and the last error returned, when the request's
// context ends first.
func WithBackoff(f BackoffFunc) Option {
	return func(c *Client) error {
		if f == nil {
			f = DefaultBackoff
		}
		c.backoff = f
		return nil
	}
}

// WithUserAgent puts the application's own product token (for example
// "acme-backend/2.3") in front of the SDK's in the User-Agent header.
func WithUserAgent(ua string) Option {
	return func(c *Client) error {
		c.userAgent = strings.TrimSpace(ua)
		return nil
	}
}

// secret holds the API key. It never prints: fmt's verbs and slog show
// "[redacted]", so a Client logged by mistake does not leak the key.
type secret string

const redacted = "[redacted]"

func (secret) String() string             { return redacted }
func (secret) GoString() string           { return `"` + redacted + `"` }
func (secret) LogValue() slog.Value       { return slog.StringValue(redacted) }
func (secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, redacted) }

// String describes the client without its API key. The methods have value
// receivers so that a dereferenced Client prints safely too (fmt cannot
// reach the key field's own methods, the field being unexported).
func (c Client) String() string {
	return fmt.Sprintf("rtcd.Client{base=%s key=%s}", c.base, redacted)
}

// GoString keeps %#v from printing the API key.
func (c Client) GoString() string { return c.String() }

// LogValue keeps slog from printing the API key.
func (c Client) LogValue() slog.Value {
	return slog.GroupValue(slog.String("base_url", c.base), slog.String("api_key", redacted))
}

// BaseURL is the address resource paths are appended to, ending in its
// version segment (for example http://127.0.0.1:8080/v1).
func (c *Client) BaseURL() string { return c.base }

var versionSegment = regexp.MustCompile(`^v[0-9]+$`)

func normalizeBaseURL(address string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(address))
	if err != nil {
		return "", fmt.Errorf("rtcd: invalid base URL %q: %w", address, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("rtcd: invalid base URL %q: want http:// or https:// and a host", address)
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", fmt.Errorf("rtcd: invalid base URL %q: no user information, query or fragment allowed", address)
	}
	path := strings.TrimRight(u.EscapedPath(), "/")
	last := path[strings.LastIndexByte(path, '/')+1:]
	if !versionSegment.MatchString(last) {
		path += "/v1"
	}
	return u.Scheme + "://" + u.Host + path, nil
}

// RequestOption configures one call.
type RequestOption func(*callOptions)

type callOptions struct {
	idempotencyKey string
	requestID      string
}

// WithIdempotencyKey sends the Idempotency-Key header (1 to 255 printable
// ASCII characters). Only the creates of rooms, participants, API keys and
// webhook endpoints accept it; other calls fail before sending. A repeated
// create with the same key, path and body within 24 hours returns the stored
// response instead of creating again. When retries are on and no key is
// given, those creates get a random key, so the SDK's own retries are safe.
func WithIdempotencyKey(key string) RequestOption {
	return func(o *callOptions) { o.idempotencyKey = key }
}

// WithRequestID sends X-Request-Id, which the server uses as the request's
// id (prefixed with req_ unless it has it): 1 to 64 characters of A–Z a–z
// 0–9 _ - . (other values are replaced by a fresh id by the server).
func WithRequestID(id string) RequestOption {
	return func(o *callOptions) { o.requestID = id }
}

// ErrIdempotencyNotSupported is returned when WithIdempotencyKey is used on
// a call whose route takes no Idempotency-Key.
var ErrIdempotencyNotSupported = errors.New("rtcd: this call takes no Idempotency-Key")

// request is one API call.
type request struct {
	method string
	path   string // below the base URL, starting with "/"
	query  url.Values
	body   any  // JSON-encoded when non-nil
	idemOK bool // the route accepts Idempotency-Key
}

func newIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "sdk_" + hex.EncodeToString(b[:])
}

// do performs r and decodes a 2xx body into out (when out is non-nil).
func (c *Client) do(ctx context.Context, r request, out any, opts []RequestOption) error {
	var o callOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.idempotencyKey != "" && !r.idemOK {
		return ErrIdempotencyNotSupported
	}
	if r.idemOK && o.idempotencyKey == "" && c.retries > 0 {
		o.idempotencyKey = newIdempotencyKey()
	}
	var payload []byte
	if r.body != nil {
		var err error
		if payload, err = json.Marshal(r.body); err != nil {
			return fmt.Errorf("rtcd: encoding the request body: %w", err)
		}
		if string(payload) == "null" {
			payload = []byte("{}")
		}
	}
	target := c.base + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	retryable := r.method == http.MethodGet || r.method == http.MethodDelete || o.idempotencyKey != ""

	for attempt := 0; ; attempt++ {
		res, body, err := c.send(ctx, r.method, target, payload, o)
		var retryAfter time.Duration
		if err == nil {
			if res.StatusCode >= 200 && res.StatusCode < 300 {
				if out == nil || len(body) == 0 {
					return nil
				}
				if derr := json.Unmarshal(body, out); derr != nil {
					return fmt.Errorf("rtcd: decoding the %s %s response: %w", r.method, r.path, derr)
				}
				return nil
			}
			apiErr := parseAPIError(res, body)
			err, retryAfter = apiErr, apiErr.RetryAfter
			if !retryable || !retryableStatus(apiErr) {
				return err
			}
		} else if ctx.Err() != nil || !retryable {
			return err
		}
		if attempt >= c.retries {
			return err
		}
		wait := c.backoff(attempt+1, retryAfter)
		if wait < 0 {
			return err // the backoff declined to wait (e.g. Retry-After above MaxRetryAfter)
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return err // the wait would outlive the context: report what happened
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
		}
	}
}

// retryableStatus says which API errors a safe request is retried after.
func retryableStatus(e *APIError) bool {
	switch {
	case e.Status == http.StatusTooManyRequests, e.Status == http.StatusServiceUnavailable:
		return true
	case e.Status == http.StatusConflict && e.Code == CodeIdempotencyInProgress:
		// The first attempt (which the client gave up on) is still running
		// on the server; once it completes the same key replays its result.
		return true
	}
	return false
}

func (c *Client) send(ctx context.Context, method, target string, payload []byte, o callOptions) (*http.Response, []byte, error) {
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, nil, fmt.Errorf("rtcd: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+string(c.apiKey))
	req.Header.Set("Accept", "application/json")
	ua := "rtcd-go-server/" + Version
	if c.userAgent != "" {
		ua = c.userAgent + " " + ua
	}
	req.Header.Set("User-Agent", ua)
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if o.idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", o.idempotencyKey)
	}
	if o.requestID != "" {
		req.Header.Set("X-Request-Id", o.requestID)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes))
	if err != nil {
		return nil, nil, fmt.Errorf("rtcd: reading the response: %w", err)
	}
	return res, data, nil
}

// parseRetryAfter reads Retry-After: delay seconds or an HTTP date.
func parseRetryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// pathID escapes one path segment; an empty id is refused before sending
// (it would name another route).
func pathID(name, id string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("rtcd: %s is empty", name)
	}
	return url.PathEscape(id), nil
}

func limitQuery(limit int) url.Values {
	if limit == 0 {
		return nil
	}
	return url.Values{"limit": {strconv.Itoa(limit)}}
}
