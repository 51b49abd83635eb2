package media

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"rtcd/clock"
	"rtcd/metrics"
)

// Bounds of signed HTTP delivery (HTTPReporter and HTTPEngine).
const (
	// senderQueueRequests bounds the requests waiting to be sent. When it is
	// full new requests are dropped and counted: the caller (a node's hub,
	// a room actor) must never wait on the network, and presence snapshots
	// and the reconciler recover what was dropped.
	senderQueueRequests = 4096
	// senderMaxAttempts bounds the tries of one request; with the backoff
	// below they span about 24 seconds plus the request timeouts.
	senderMaxAttempts = 8
	// senderRetryInitialMillis is the wait after the first failure; it
	// doubles after each further failure up to senderRetryMaxMillis.
	senderRetryInitialMillis = 250
	senderRetryMaxMillis     = 8000
	// senderRequestTimeoutSeconds bounds one attempt, response included.
	senderRequestTimeoutSeconds = 10
	// maxResponseDrainBytes bounds what is read of a response (to reuse
	// the connection); responses carry nothing we need.
	maxResponseDrainBytes = 4096
)

// HTTPConfig configures an HTTPReporter or an HTTPEngine.
type HTTPConfig struct {
	// BaseURL is the receiver's origin, http or https, without a path:
	// the control plane for an HTTPReporter, the node for an HTTPEngine.
	BaseURL string
	// Key signs every request (SignRequest). It must not be all zero.
	Key [32]byte
	// Clock stamps the signatures; nil means clock.Real.
	Clock clock.Clock
	// Client sends the requests; nil means a client with a 10 second
	// timeout that uses no proxy and follows no redirect (a redirect would
	// send a signed body somewhere it was not meant for).
	Client *http.Client
	// Logger receives delivery failures; nil means slog.Default().
	Logger *slog.Logger
	// Metrics counts the reports sent and failed (an HTTPReporter's);
	// nil counts nothing.
	Metrics *metrics.Media
}

// outgoing is one queued request: value is encoded to JSON by the sender
// goroutine, so queuing costs the caller almost nothing.
type outgoing struct {
	path  string
	kind  string // the report type, counted in the metrics; "" for a command
	value any
}

// signedSender delivers signed JSON POSTs in order, one at a time, from a
// bounded queue, retrying each with backoff before giving up on it. One
// request at a time keeps reports in the order they happened.
type signedSender struct {
	baseURL string
	key     [32]byte
	clock   clock.Clock
	client  *http.Client
	logger  *slog.Logger
	metrics *metrics.Media

	queue     chan outgoing
	dropped   atomic.Int64
	closing   chan struct{}
	closeOnce sync.Once
	done      chan struct{}
	ctx       context.Context // cancelled when Close gives up waiting
	cancel    context.CancelFunc
}

// permanentError is a response that retrying cannot fix (a 4xx other than
// 429: a bad signature, a malformed body).
type permanentError struct{ status int }

func (e permanentError) Error() string {
	return fmt.Sprintf("media: receiver answered HTTP %d", e.status)
}

func newSignedSender(cfg HTTPConfig) (*signedSender, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
		return nil, fmt.Errorf("media: BaseURL must be an http or https origin, got %q", cfg.BaseURL)
	}
	if cfg.Key == ([32]byte{}) {
		return nil, errors.New("media: the signing key must not be all zero")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Client == nil {
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.Proxy = nil // internal traffic: never through an environment proxy
		cfg.Client = &http.Client{
			Transport:     transport,
			Timeout:       senderRequestTimeoutSeconds * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &signedSender{
		baseURL: strings.TrimRight(cfg.BaseURL, "/"),
		key:     cfg.Key,
		clock:   cfg.Clock,
		client:  cfg.Client,
		logger:  cfg.Logger,
		metrics: cfg.Metrics,
		queue:   make(chan outgoing, senderQueueRequests),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
		ctx:     ctx,
		cancel:  cancel,
	}
	go s.loop()
	return s, nil
}

// enqueue queues a request without blocking; a full queue or a closed
// sender drops it (counted in dropped). kind is the report type it carries
// ("" for a command).
func (s *signedSender) enqueue(path, kind string, value any) {
	select {
	case <-s.closing:
		s.drop(kind)
		return
	default:
	}
	select {
	case s.queue <- outgoing{path: path, kind: kind, value: value}:
	default:
		s.drop(kind)
		s.logger.Warn("media: send queue full; request dropped", "path", path)
	}
}

// drop counts a request given up on.
func (s *signedSender) drop(kind string) {
	s.dropped.Add(1)
	if kind != "" {
		s.metrics.Report(kind, "failed")
	}
}

// close stops taking requests and delivers the queued ones, giving up on
// whatever is left when ctx is done.
func (s *signedSender) close(ctx context.Context) error {
	s.closeOnce.Do(func() { close(s.closing) })
	defer s.cancel()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		s.cancel()
		<-s.done
		return ctx.Err()
	}
}

func (s *signedSender) loop() {
	defer close(s.done)
	for {
		select {
		case o := <-s.queue:
			s.deliver(o)
		case <-s.closing:
			for {
				select {
				case o := <-s.queue:
					s.deliver(o)
				default:
					return
				}
			}
		}
	}
}

// deliver sends o, retrying failures that may be temporary.
func (s *signedSender) deliver(o outgoing) {
	body, err := json.Marshal(o.value)
	if err != nil {
		panic("media: encoding a signed request: " + err.Error()) // a bug: only our own plain structs are queued
	}
	backoff := senderRetryInitialMillis * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := s.post(s.ctx, o.path, body)
		if err == nil {
			if o.kind != "" {
				s.metrics.Report(o.kind, "sent")
			}
			return
		}
		var permanent permanentError
		if errors.As(err, &permanent) || attempt == senderMaxAttempts || s.ctx.Err() != nil {
			s.drop(o.kind)
			s.logger.Warn("media: request dropped", "path", o.path, "attempts", attempt, "error", err)
			return
		}
		// Real time: this paces retries against a real network.
		wait := time.NewTimer(backoff)
		select {
		case <-wait.C:
		case <-s.ctx.Done():
			wait.Stop()
		}
		backoff = min(2*backoff, senderRetryMaxMillis*time.Millisecond)
	}
}

// post makes one signed attempt. A 2xx is success; a 429, a 5xx or a
// network failure is worth retrying; anything else is a permanentError.
func (s *signedSender) post(ctx context.Context, path string, body []byte) error {
	timestamp, signature := SignRequest(s.key, s.clock.Now(), body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.baseURL+path, bytes.NewReader(body))
	if err != nil {
		return permanentError{status: 0}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "rtcd-media/1")
	req.Header.Set(HeaderTimestamp, timestamp)
	req.Header.Set(HeaderSignature, signature)
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseDrainBytes))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return fmt.Errorf("media: receiver answered HTTP %d", resp.StatusCode)
	default:
		return permanentError{status: resp.StatusCode}
	}
}
