// Package server wires rtcd together: configuration, the master secret, the
// Pebble store, the actor engine, the API listener and the private metrics
// listener, and their orderly shutdown. `rtcd serve` and the end-to-end
// tests both start the real service through Start.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goccy/go-json"
	"github.com/valyala/fasthttp"
	"rtcd/actors"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/config"
	"rtcd/googleauth"
	api "rtcd/http"
	"rtcd/media"
	"rtcd/metrics"
	"rtcd/money"
	"rtcd/payments"
	"rtcd/persistence"
	"rtcd/ratelimit"
	"rtcd/webhooks"
)

// Version is the build's version, set with -ldflags at release time.
var Version = "0.1.0-dev"

// masterKeyBytes is the size of a generated master secret.
const masterKeyBytes = 32

// Options are what tests inject; the zero value is production.
type Options struct {
	Clock clock.Clock // nil: the real clock
	// BootstrapOut receives the JSON of a first-start bootstrap; nil: stdout.
	BootstrapOut io.Writer
	// Fatal handles an unrecoverable storage error; nil: log and exit(1).
	Fatal func(error)
}

// Server is a running rtcd.
type Server struct {
	cfg         *config.Config
	store       *persistence.Store
	engine      *actors.Engine
	api         *fasthttp.Server
	metricsSrv  *fasthttp.Server
	media       *embeddedMedia    // nil when --media-listen is empty
	remoteMedia *media.HTTPEngine // a node run on its own (--media-control-url)
	apiLn       net.Listener
	metricsLn   net.Listener
	serveErrors chan error
}

// Start opens the data directory (bootstrapping it on first start), recovers
// every actor, and starts both listeners.
func Start(cfg *config.Config, opts Options) (*Server, error) {
	clk := opts.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	fatal := opts.Fatal
	if fatal == nil {
		fatal = func(err error) {
			slog.Error("fatal storage error; exiting so recovery starts from what is durable", "error", err)
			os.Exit(1)
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	m := metrics.New()
	store, err := persistence.Open(filepath.Join(cfg.DataDir, "pebble"), persistence.Metrics{
		ApplySeconds: m.JournalApply, SyncSeconds: m.JournalSync,
	}, fatal)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, store: store, serveErrors: make(chan error, 2)}
	fail := func(err error) (*Server, error) {
		_ = store.Close()
		return nil, err
	}
	keys, initialized, err := OpenKeys(cfg, store)
	if err != nil {
		return fail(err)
	}
	if !initialized {
		res, err := actors.Bootstrap(store, keys, clk, BillingFromConfig(cfg), cfg.OwnerEmail)
		if err != nil {
			return fail(err)
		}
		out := opts.BootstrapOut
		if out == nil {
			out = os.Stdout
		}
		slog.Info("first start: created a workspace, a project and an API key holding every scope; the key is printed once")
		if err := json.NewEncoder(out).Encode(res); err != nil {
			return fail(err)
		}
	}
	// The built-in media node listens first, so the connect response can
	// name its real address (the port may be chosen by the system).
	var mediaLn net.Listener
	mediaURL := cfg.MediaURL
	if cfg.MediaListen != "" {
		if mediaLn, err = net.Listen("tcp", cfg.MediaListen); err != nil {
			return fail(fmt.Errorf("media listen %s: %w", cfg.MediaListen, err))
		}
		if mediaURL == "" {
			mediaURL = "ws://" + mediaLn.Addr().String() + media.RTCPath
		}
	}
	engine, err := actors.New(actors.Settings{
		Region:   cfg.Region,
		MediaURL: mediaURL,
		DefaultLimits: actors.Limits{
			MaxActiveRooms:              cfg.DefaultMaxActiveRooms,
			MaxActiveParticipants:       cfg.DefaultMaxActiveParticipants,
			MaxParticipantsPerRoom:      cfg.DefaultMaxParticipantsPerRoom,
			RoomCreatesPerMinute:        cfg.DefaultRoomCreatesPerMinute,
			ParticipantCreatesPerMinute: cfg.DefaultParticipantCreatesPerMinute,
			ConnectRequestsPerMinute:    cfg.DefaultConnectRequestsPerMinute,
		},
		ConnectPerIPPerMinute: cfg.ConnectPerIPPerMinute,
		MediaTokenTTL:         time.Duration(cfg.MediaTokenTTLSeconds) * time.Second,
		SnapshotEveryEvents:   cfg.SnapshotEveryEvents,
		Billing:               BillingFromConfig(cfg),
		// Sessions on an embedded node end with the process; a node run on
		// its own (--media-control-url) keeps them across our restarts, and
		// only its silence can mean it died.
		MediaNodeRunsOnItsOwn: cfg.MediaControlURL != "",
		WebhookAllowPrivate:   cfg.WebhookAllowPrivate,
	}, store, clk, ratelimit.NewMemory(), keys)
	if err != nil {
		return fail(err)
	}
	engine.OnConnectResult(func(code string) { m.ConnectResults.WithLabelValues(code).Inc() })
	m.RegisterEngine(metrics.EngineGauges{
		ActiveRooms:         func() float64 { return float64(engine.Stats().ActiveRooms) },
		ActiveParticipants:  func() float64 { return float64(engine.Stats().ActiveParticipants) },
		ProjectMailboxDepth: func() float64 { return float64(engine.Stats().ProjectMailboxDepth) },
		RoomMailboxDepth:    func() float64 { return float64(engine.Stats().RoomMailboxDepth) },
	})
	if err := engine.Start(); err != nil {
		return fail(fmt.Errorf("recovery: %w", err))
	}
	if cfg.WebhookAllowPrivate || cfg.WebhookExtraCAFile != "" {
		slog.Warn("webhook testing settings are on: deliveries may reach private addresses or trust extra CAs; never in production")
	}
	sender := webhooks.NewClient(webhooks.ClientConfig{AllowPrivate: cfg.WebhookAllowPrivate,
		ExtraCAFile: cfg.WebhookExtraCAFile, TimeoutSeconds: cfg.WebhookTimeoutSeconds})
	if err := sender.Err(); err != nil {
		engine.Stop()
		return fail(fmt.Errorf("webhook client: %w", err))
	}
	schedule, _ := cfg.RetrySchedule() // validated by config
	engine.SetWebhookSender(sender, schedule)
	s.engine = engine

	if s.apiLn, err = listenDraining(cfg.Listen); err != nil {
		engine.Stop()
		return fail(fmt.Errorf("listen %s: %w", cfg.Listen, err))
	}
	if s.metricsLn, err = net.Listen("tcp", cfg.MetricsListen); err != nil {
		_ = s.apiLn.Close()
		engine.Stop()
		return fail(fmt.Errorf("metrics listen %s: %w", cfg.MetricsListen, err))
	}
	origin := cfg.DashboardOrigin(s.apiLn.Addr().String())
	pay, err := newPayments(cfg, keys, clk, "http://"+s.apiLn.Addr().String(), origin)
	if err != nil {
		_ = s.apiLn.Close()
		_ = s.metricsLn.Close()
		engine.Stop()
		return fail(err)
	}
	mailer, err := newMailer(cfg, clk, origin)
	if err == nil {
		engine.SetMailer(mailer)
	}
	var google *googleauth.Provider
	if err == nil {
		google, err = newGoogle(cfg, keys, clk, origin)
	}
	if err != nil {
		_ = s.apiLn.Close()
		_ = s.metricsLn.Close()
		engine.Stop()
		return fail(err)
	}
	apiSrv := api.New(engine, m, Version, cfg.TrustForwardedFor, pay)
	apiSrv.SetGoogle(google)
	s.api = apiSrv.NewFastHTTPServer()
	adminToken, err := LoadOrCreateAdminToken(cfg.DataDir)
	if err != nil {
		_ = s.apiLn.Close()
		_ = s.metricsLn.Close()
		engine.Stop()
		return fail(err)
	}
	s.metricsSrv = &fasthttp.Server{
		Name:               "rtcd-private",
		ReadTimeout:        10 * time.Second,
		WriteTimeout:       10 * time.Second,
		MaxRequestBodySize: media.MaxReportBodyBytes, // presence reports; admin bodies are bounded in their handler
		Handler: privateHandler(engine, m.Handler(), adminToken,
			mediaReportsHandler(engine, MediaReportKey(keys.MediaToken()), clk)),
	}
	if cfg.MediaControlURL != "" {
		remote, err := media.NewHTTPEngine(media.HTTPConfig{BaseURL: strings.TrimRight(cfg.MediaControlURL, "/"), Key: MediaReportKey(keys.MediaToken()), Clock: clk})
		if err != nil {
			engine.Stop()
			return fail(fmt.Errorf("media control: %w", err))
		}
		engine.SetMedia(remote)
		s.remoteMedia = remote
	}
	if mediaLn != nil {
		_, listenPort, _ := net.SplitHostPort(cfg.MediaListen)
		if s.media, err = startEmbeddedMedia(mediaLn, listenPort == "0", cfg.MediaNetwork(), engine, keys, clk); err != nil {
			_ = s.apiLn.Close()
			_ = s.metricsLn.Close()
			engine.Stop()
			return fail(fmt.Errorf("media node: %w", err))
		}
	}
	go func() { s.serveErrors <- s.api.Serve(s.apiLn) }()
	go func() { s.serveErrors <- s.metricsSrv.Serve(s.metricsLn) }()
	slog.Info("rtcd serving", "api", s.apiLn.Addr().String(), "metrics", s.metricsLn.Addr().String(),
		"region", cfg.Region, "data_dir", cfg.DataDir, "version", Version)
	return s, nil
}

// APIAddr is the API listener's address.
func (s *Server) APIAddr() string { return s.apiLn.Addr().String() }

// MediaAddr is the embedded media node's address ("" when none runs).
func (s *Server) MediaAddr() string {
	if s.media == nil {
		return ""
	}
	return s.media.ln.Addr().String()
}

// MetricsAddr is the metrics listener's address.
func (s *Server) MetricsAddr() string { return s.metricsLn.Addr().String() }

// Errors reports a listener that stopped serving on its own.
func (s *Server) Errors() <-chan error { return s.serveErrors }

// Shutdown drains in-flight requests (each waits for its durable reply),
// stops the actors and closes Pebble cleanly.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.api.ShutdownWithContext(ctx)
	if s.media != nil {
		s.media.stop() // leaves reported while the engine still runs
	}
	if s.remoteMedia != nil {
		_ = s.remoteMedia.Close(ctx) // flush queued commands
	}
	_ = s.metricsSrv.ShutdownWithContext(ctx)
	s.engine.Stop()
	if cerr := s.store.Close(); err == nil {
		err = cerr
	}
	return err
}

// newPayments builds the configured payment provider. apiOrigin is the API
// listener's own address: the sandbox posts its signed callbacks there, and
// it is the public origin when --public-url is empty. dashboardOrigin is
// where payers come back to: the dashboard's page of their top-up.
func newPayments(cfg *config.Config, keys auth.Keys, clk clock.Clock, apiOrigin, dashboardOrigin string) (api.Payments, error) {
	public := cfg.PublicURL
	if public == "" {
		public = apiOrigin
	}
	public = strings.TrimRight(public, "/")
	pay := api.Payments{Now: clk.Now}
	switch cfg.PaymentProvider {
	case payments.ProviderStripe:
		st, err := payments.NewStripe(payments.StripeConfig{
			SecretKey: cfg.StripeSecretKey, WebhookSecret: cfg.StripeWebhookSecret, APIBaseURL: cfg.StripeAPIBase,
			SuccessURL: dashboardOrigin + api.TopupReturnPath + payments.PaymentIDPlaceholder,
			CancelURL:  dashboardOrigin + api.TopupReturnPath + payments.PaymentIDPlaceholder + "?canceled=1",
		})
		if err != nil {
			return pay, fmt.Errorf("stripe: %w", err)
		}
		pay.Provider = st
	default:
		sb, err := payments.NewSandbox(payments.SandboxConfig{
			PublicBaseURL: public, Secret: keys.PaymentsSandbox(),
			CallbackURL: apiOrigin + "/v1/billing/providers/" + payments.ProviderSandbox + "/webhook", Clock: clk,
			ReturnURL: dashboardOrigin + api.TopupReturnPath + payments.PaymentIDPlaceholder,
		})
		if err != nil {
			return pay, fmt.Errorf("sandbox payments: %w", err)
		}
		pay.Provider, pay.Sandbox = sb, sb
	}
	return pay, nil
}

// BillingFromConfig is the pricing and credit policy of cfg (validated by
// config.Validate, so the amounts parse).
func BillingFromConfig(cfg *config.Config) actors.Billing {
	amount := func(s string) money.Micros {
		m, _ := money.Parse(s, money.MaxDecimals)
		return m
	}
	return actors.Billing{
		Enabled:                cfg.BillingEnabled,
		Currency:               cfg.Currency,
		ParticipantMinutePrice: amount(cfg.ParticipantMinutePrice),
		LowCreditThreshold:     amount(cfg.LowCreditThreshold),
		MinimumCreditToStart:   amount(cfg.MinimumCreditToStart),
		BootstrapCredit:        amount(cfg.BootstrapCredit),
		SettleInterval:         time.Duration(cfg.SettleIntervalSeconds) * time.Second,
		TopupExpiry:            time.Duration(cfg.TopupExpirySeconds) * time.Second,
	}
}

// OpenKeys returns the keys derived from the master secret and whether the
// store is already initialised. The master key file is created only for a
// store that is not initialised yet; for an initialised one a missing key
// file, or a key that does not match the one the store was initialised with,
// is an error, never a silent new key (every API key would stop working).
func OpenKeys(cfg *config.Config, store *persistence.Store) (auth.Keys, bool, error) {
	initialized, err := actors.Initialized(store)
	if err != nil {
		return auth.Keys{}, false, err
	}
	master, err := loadMasterKey(cfg, !initialized)
	if err != nil {
		return auth.Keys{}, initialized, err
	}
	keys, err := auth.DeriveKeys(master)
	if err != nil {
		return auth.Keys{}, initialized, err
	}
	if initialized {
		if err := actors.CheckMasterKey(store, keys); err != nil {
			return auth.Keys{}, initialized, err
		}
	}
	return keys, initialized, nil
}

// loadMasterKey returns the configured master secret, or the one in
// <data-dir>/master.key, creating it (0600) when create is set.
func loadMasterKey(cfg *config.Config, create bool) ([]byte, error) {
	if cfg.MasterKey != "" {
		k, err := hex.DecodeString(cfg.MasterKey)
		if err != nil || len(k) < masterKeyBytes {
			return nil, fmt.Errorf("RTCD_MASTER_KEY must be at least %d bytes of hex", masterKeyBytes)
		}
		return k, nil
	}
	path := filepath.Join(cfg.DataDir, "master.key")
	b, err := os.ReadFile(path)
	if err == nil {
		k, derr := hex.DecodeString(strings.TrimSpace(string(b)))
		if derr != nil || len(k) < masterKeyBytes {
			return nil, fmt.Errorf("%s is not a hex master key of at least %d bytes", path, masterKeyBytes)
		}
		return k, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if !create {
		return nil, fmt.Errorf("%s is missing but the data directory is initialised: restore the key file (or set RTCD_MASTER_KEY); a new key would invalidate every API key and token", path)
	}
	k := make([]byte, masterKeyBytes)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString(hex.EncodeToString(k) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return k, err
}

// drainListener is the API listener. fasthttp's Shutdown waits for every
// open connection, and counts one that is waiting for its first request as
// active, not idle: a single connection that never sends a byte (a client's
// spare dial, a TCP health check) would hold the drain until ReadTimeout,
// past the shutdown timeout. So once the listener is closed (the first step
// of Shutdown), every accepted connection on which no byte was read yet is
// closed too. No request was read from such a connection, so none is cut
// off: the caller sees the connection refused, as if it had been queued.
type drainListener struct {
	net.Listener
	mu     sync.Mutex
	closed bool
	conns  map[*drainConn]struct{}
}

// listenDraining listens on addr (a plain nil interface on error).
func listenDraining(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &drainListener{Listener: ln, conns: make(map[*drainConn]struct{})}, nil
}

func (l *drainListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	dc := &drainConn{Conn: c, l: l}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	l.conns[dc] = struct{}{}
	return dc, nil
}

// Close closes the listener and every connection not yet used.
func (l *drainListener) Close() error {
	err := l.Listener.Close()
	l.mu.Lock()
	l.closed = true
	unused := make([]*drainConn, 0, len(l.conns))
	for c := range l.conns {
		unused = append(unused, c)
	}
	l.mu.Unlock()
	for _, c := range unused {
		c.closeIfUnused()
	}
	return err
}

type drainConn struct {
	net.Conn
	l    *drainListener
	used atomic.Bool // a byte was read: a request began; set only under mu
	mu   sync.Mutex
	shut bool // closed by the listener's Close before any byte was read
}

func (c *drainConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.used.Load() {
		return n, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shut {
		return 0, net.ErrClosed // bytes that raced the close are dropped, never served
	}
	if n > 0 {
		c.used.Store(true)
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	}
	return n, err
}

func (c *drainConn) closeIfUnused() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.used.Load() {
		c.shut = true
		_ = c.Conn.Close()
	}
}

func (c *drainConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
