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
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goccy/go-json"
	"github.com/valyala/fasthttp"
	"rtcd/actors"
	"rtcd/actors/dispatch"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/cluster"
	"rtcd/config"
	"rtcd/datadir"
	"rtcd/googleauth"
	api "rtcd/http"
	"rtcd/media"
	"rtcd/metrics"
	"rtcd/money"
	"rtcd/payments"
	"rtcd/persistence"
	"rtcd/persistence/jsstore"
	"rtcd/ratelimit"
	"rtcd/webhookdelivery"
)

// Version is the build's version, set with -ldflags at release time.
var Version = "0.1.0-dev"

// masterKeyBytes is the size of a generated master secret.
const masterKeyBytes = 32

// remoteMediaFlushOnFailure bounds how long a failed Start waits for the
// commands queued for a media node run on its own.
const remoteMediaFlushOnFailure = 5 * time.Second

// Options are what tests inject; the zero value is production.
type Options struct {
	Clock clock.Clock // nil: the real clock
	// BootstrapOut receives the JSON of a first-start bootstrap; nil: stdout.
	BootstrapOut io.Writer
	// Fatal handles an unrecoverable storage error; nil: log and exit(1).
	Fatal func(error)

	// afterStep, when set, runs after each step of Start that succeeded; an
	// error fails Start there as if the step had failed. Tests of this
	// package use it to check that a failure at any step releases
	// everything the earlier steps took.
	afterStep func(step string) error
}

// Server is a running rtcd.
type Server struct {
	cfg          *config.Config
	lock         *datadir.Lock // this process's claim on the data directory
	backups      *backups      // online backups, through the private listener
	store        persistence.Storage
	engine       *actors.Engine
	limiter      ratelimit.Store // the request-rate counters (--rate-limit-store)
	api          *fasthttp.Server
	metricsSrv   *fasthttp.Server
	media        *embeddedMedia    // nil when --media-listen is empty
	remoteMedia  *media.HTTPEngine // a node run on its own (--media-control-url)
	node         *cluster.Node     // this node's membership (--cluster-name); nil on a single node
	clusterMedia *clusterMedia     // the media nodes registered with the cluster; nil on a single node
	apiLn        net.Listener
	metricsLn    net.Listener
	serveErrors  chan error
}

// Start claims the data directory, binds every listener, then opens the
// data directory (bootstrapping it on first start), recovers every actor,
// and serves: nothing is bootstrapped before every listener is bound, so a
// start that cannot bind changes nothing. It runs startSteps in order; when
// one fails, what the earlier ones took (listeners, actors, media node, the
// store and its directory lock) is released in reverse order, so a failed
// Start can be followed by a successful one in the same process.
func Start(cfg *config.Config, opts Options) (*Server, error) {
	st := newStartup(cfg, opts)
	for _, step := range startSteps {
		err := step.run(st)
		if err == nil && opts.afterStep != nil {
			err = opts.afterStep(step.name)
		}
		if err != nil {
			st.release()
			return nil, err
		}
	}
	st.serve()
	return st.s, nil
}

// startSteps are the steps of Start, in order. Each may register how to
// release what it took (startup.onFailure).
var startSteps = []struct {
	name string
	run  func(*startup) error
}{
	{"tls", (*startup).loadTLS},
	{"data dir lock", (*startup).claimDataDir},
	{"listeners", (*startup).listen},
	{"store", (*startup).openStore},
	{"keys", (*startup).openKeys},
	{"rate limits", (*startup).openRateLimits},
	{"engine", (*startup).startEngine},
	{"webhook sender", (*startup).startWebhookSender},
	{"payments", (*startup).setUpPayments},
	{"mail", (*startup).setUpMail},
	{"google sign-in", (*startup).setUpGoogle},
	{"api server", (*startup).buildAPIServer},
	{"private server", (*startup).buildPrivateServer},
	{"remote media", (*startup).connectRemoteMedia},
	{"embedded media", (*startup).startEmbeddedMedia},
}

// startup is one run of Start: the parts built so far, and the clean-up of
// each part that holds something (a listener, running actors, the store's
// directory lock).
type startup struct {
	cfg   *config.Config
	opts  Options
	clk   clock.Clock
	fatal func(error)
	s     *Server

	m          *metrics.Metrics
	pebble     *persistence.Store // the store when it is Pebble, else nil
	keys       auth.Keys
	mediaLn    net.Listener // nil when --media-listen is empty
	mediaURL   string
	tls        *listenerTLS // nil: the API and media listeners serve plain HTTP
	origin     string       // the dashboard's origin
	pay        api.Payments
	google     *googleauth.Provider
	adminToken string

	cleanUps []func() // run in reverse when a step fails
}

func newStartup(cfg *config.Config, opts Options) *startup {
	st := &startup{cfg: cfg, opts: opts, clk: opts.Clock, fatal: opts.Fatal,
		s: &Server{cfg: cfg, serveErrors: make(chan error, 2)}}
	if st.clk == nil {
		st.clk = clock.Real{}
	}
	if st.fatal == nil {
		st.fatal = func(err error) {
			slog.Error("fatal storage error; exiting so recovery starts from what is durable", "error", err)
			os.Exit(1)
		}
	}
	if cfg.ClusterName != "" {
		st.fatal = fencedIsNotFatal(st.fatal, func() *metrics.Metrics { return st.m })
	}
	return st
}

// onFailure registers the release of what a step just took.
func (st *startup) onFailure(cleanUp func()) { st.cleanUps = append(st.cleanUps, cleanUp) }

// release runs the registered clean-ups, newest first.
func (st *startup) release() {
	for i := len(st.cleanUps) - 1; i >= 0; i-- {
		st.cleanUps[i]()
	}
	st.cleanUps = nil
}

// loadTLS reads --tls-cert and --tls-key, when set.
func (st *startup) loadTLS() error {
	t, err := loadListenerTLS(st.cfg)
	st.tls = t
	return err
}

// claimDataDir creates the data directory if needed and takes its lock,
// so a second rtcd on it is told which process holds it.
func (st *startup) claimDataDir() error {
	lock, err := datadir.Acquire(st.cfg.DataDir)
	if err != nil {
		return err
	}
	st.onFailure(func() { _ = lock.Release() })
	st.s.lock = lock
	return nil
}

// listen binds the API, private and media listeners (bindListeners) before
// anything is opened or bootstrapped. The media node's address is known
// from here on, so the connect response can name it (the port may be chosen
// by the system), and the dashboard's origin follows from the API's address
// when --public-url is empty.
func (st *startup) listen() error {
	lns, err := bindListeners(st.cfg)
	if err != nil {
		return err
	}
	st.onFailure(lns.close)
	st.s.apiLn, st.s.metricsLn, st.mediaLn = lns.api, lns.private, lns.media
	st.mediaURL = st.cfg.MediaURL
	if st.mediaLn != nil && st.mediaURL == "" {
		st.mediaURL = st.tls.scheme("ws", "wss") + "://" + st.mediaLn.Addr().String() + media.RTCPath
	}
	st.origin = st.cfg.DashboardOrigin(lns.api.Addr().String())
	return nil
}

// openStore opens the configured store: Pebble in the claimed data
// directory, or the JetStream stream (--store).
func (st *startup) openStore() error {
	st.m = metrics.New()
	st.m.RegisterBuildInfo(Version)
	store, pebbleStore, err := OpenStorage(st.cfg, persistence.Metrics{
		ApplySeconds: st.m.JournalApply, SyncSeconds: st.m.JournalSync, SnapshotSeconds: st.m.Storage.SnapshotWrite,
	}, st.fatal)
	if err != nil {
		return err
	}
	st.onFailure(func() { _ = store.Close() })
	st.s.store = store
	st.pebble = pebbleStore
	if pebbleStore != nil {
		st.m.RegisterPebble(func() metrics.PebbleReading {
			pm, stalls := pebbleStore.PebbleMetrics()
			return metrics.PebbleReading{Metrics: pm, WriteStalls: stalls}
		})
	}
	return nil
}

// OpenStorage opens the store cfg names (--store): Pebble in
// <data-dir>/pebble, also returned as such for what only Pebble has (its
// metrics, online backups), or the JetStream stream (docs/cluster.md),
// with a nil Pebble store.
func OpenStorage(cfg *config.Config, m persistence.Metrics, fatal func(error)) (persistence.Storage, *persistence.Store, error) {
	switch cfg.Store {
	case "jetstream":
		js, err := jsstore.Open(jsstore.Config{URL: cfg.NATSURL, Stream: cfg.NATSStream, Replicas: cfg.NATSReplicas, Metrics: m}, fatal)
		if err != nil {
			return nil, nil, err
		}
		return js, nil, nil
	default:
		store, err := persistence.Open(filepath.Join(cfg.DataDir, "pebble"), m, fatal)
		if err != nil {
			return nil, nil, err
		}
		return store, store, nil
	}
}

// openKeys derives the keys from the master secret and, on first start,
// bootstraps the store and prints what it created.
func (st *startup) openKeys() error {
	keys, initialized, err := OpenKeys(st.cfg, st.s.store)
	if err != nil {
		return err
	}
	st.keys = keys
	if initialized {
		return nil
	}
	if st.cfg.ClusterName != "" {
		return ErrClusterNeedsInit
	}
	res, err := actors.Bootstrap(st.s.store, keys, st.clk, BillingFromConfig(st.cfg), st.cfg.OwnerEmail)
	if err != nil {
		return err
	}
	out := st.opts.BootstrapOut
	if out == nil {
		out = os.Stdout
	}
	slog.Info("first start: created a workspace, a project and an API key holding every scope; the key is printed once")
	return json.NewEncoder(out).Encode(res)
}

// openRateLimits builds the request-rate counter store: in this process,
// or Redis shared by every node (docs/cluster.md). Redis is not asked
// here: while it does not answer, decisions are local (ratelimit.Redis),
// so a Redis outage never stops a node from starting.
func (st *startup) openRateLimits() error {
	if st.cfg.RateLimitStore != "redis" {
		st.s.limiter = ratelimit.NewMemory()
		return nil
	}
	m := st.m.RateLimits
	r, err := ratelimit.NewRedis(ratelimit.RedisConfig{
		URL: st.cfg.RedisURL, KeyPrefix: st.cfg.RedisKeyPrefix,
		OnLocalDecision: m.DecidedLocally, OnReachable: m.StoreReachable,
	})
	if err != nil {
		return fmt.Errorf("rate-limit store: %w", err)
	}
	st.onFailure(func() { _ = r.Close() })
	st.s.limiter = r
	return nil
}

// startEngine creates the actor engine and recovers every actor.
func (st *startup) startEngine() error {
	cfg := st.cfg
	engine, err := actors.New(actors.Settings{
		Region:   cfg.Region,
		MediaURL: st.mediaURL,
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
	}, st.s.store, st.clk, st.s.limiter, st.keys, st.m)
	if err != nil {
		return err
	}
	m := st.m
	m.RegisterEngine(metrics.EngineGauges{
		ActiveRooms:         func() float64 { return float64(engine.Stats().ActiveRooms) },
		ActiveParticipants:  func() float64 { return float64(engine.Stats().ActiveParticipants) },
		ProjectMailboxDepth: func() float64 { return float64(engine.Stats().ProjectMailboxDepth) },
		RoomMailboxDepth:    func() float64 { return float64(engine.Stats().RoomMailboxDepth) },
	})
	// Engine.Stop waits for the loops a successful Start begins, so a
	// failed recovery has nothing here to stop.
	recoveryStart := time.Now() // a duration on the monotonic clock, not a point in time
	start := engine.Start
	if cfg.ClusterName != "" {
		// A cluster node recovers each workspace when it is placed here.
		start = engine.StartClustered
	}
	if err := start(); err != nil {
		return fmt.Errorf("recovery: %w", err)
	}
	m.Storage.Recovered(time.Since(recoveryStart).Seconds())
	st.onFailure(engine.Stop)
	st.s.engine = engine
	return nil
}

// startWebhookSender gives the engine its webhook delivery client, which
// starts the dispatcher.
func (st *startup) startWebhookSender() error {
	cfg := st.cfg
	if cfg.WebhookAllowPrivate || cfg.WebhookExtraCAFile != "" {
		slog.Warn("webhook testing settings are on: deliveries may reach private addresses or trust extra CAs; never in production")
	}
	sender := webhookdelivery.NewClient(webhookdelivery.ClientConfig{AllowPrivate: cfg.WebhookAllowPrivate,
		ExtraCAFile: cfg.WebhookExtraCAFile, TimeoutSeconds: cfg.WebhookTimeoutSeconds})
	if err := sender.Err(); err != nil {
		return fmt.Errorf("webhook client: %w", err)
	}
	schedule, _ := cfg.RetrySchedule() // validated by config
	st.s.engine.SetWebhookSender(sender, dispatch.Settings{ScheduleSeconds: schedule, WindowAttempts: cfg.WebhookWindow})
	return nil
}

// setUpPayments builds the configured payment provider.
func (st *startup) setUpPayments() error {
	pay, err := newPayments(st.cfg, st.keys, st.clk, st.cfg.ListenerScheme()+"://"+st.s.apiLn.Addr().String(), st.origin, st.tls.callbackClient())
	if err != nil {
		return err
	}
	st.pay = pay
	return nil
}

// setUpMail gives the engine the dashboard's mail sender.
func (st *startup) setUpMail() error {
	mailer, err := newMailer(st.cfg, st.clk, st.origin)
	if err != nil {
		return err
	}
	st.s.engine.SetMailer(mailer)
	return nil
}

// setUpGoogle builds the Google sign-in provider (nil when it is off).
func (st *startup) setUpGoogle() error {
	google, err := newGoogle(st.cfg, st.keys, st.clk, st.origin)
	if err != nil {
		return err
	}
	st.google = google
	return nil
}

// buildAPIServer builds the public API's HTTP server (it serves only once
// every step succeeded).
func (st *startup) buildAPIServer() error {
	apiSrv := api.New(st.s.engine, st.m, Version, st.cfg.TrustForwardedFor, st.pay)
	apiSrv.SetGoogle(st.google)
	apiSrv.AllowDashboardOrigin(st.origin, st.cfg.APIOrigin(st.s.apiLn.Addr().String()))
	apiSrv.SetMediaEndpoint(st.mediaURL)
	if st.cfg.ClusterName != "" {
		if err := st.joinCluster(apiSrv); err != nil {
			return err
		}
	}
	st.s.api = apiSrv.NewFastHTTPServer()
	return nil
}

// buildPrivateServer loads the admin token and builds the private
// listener's HTTP server.
func (st *startup) buildPrivateServer() error {
	adminToken, err := LoadOrCreateAdminToken(st.cfg.DataDir)
	if err != nil {
		return err
	}
	engine := st.s.engine
	adjust := adjustHandler(engine)
	if st.s.node != nil {
		// On a cluster node, the adjustment runs where the wallet runs.
		adjust = clusterAdjust(st.s.node, adjust)
	}
	st.s.backups = &backups{cfg: st.cfg, store: st.pebble, now: st.clk.Now}
	st.s.metricsSrv = &fasthttp.Server{
		Name:               "rtcd-private",
		ReadTimeout:        10 * time.Second,
		WriteTimeout:       10 * time.Second,
		MaxRequestBodySize: media.MaxReportBodyBytes, // presence reports; admin bodies are bounded in their handler
		Handler: withBackups(privateHandler(engine, st.m.Handler(), adminToken,
			mediaReportsHandler(st.mediaReporter(), MediaReportKey(st.keys.MediaToken()), st.clk), adjust),
			st.s.backups, adminToken),
	}
	return nil
}

// connectRemoteMedia points the engine at a media node run on its own
// (--media-control-url), when one is configured.
func (st *startup) connectRemoteMedia() error {
	if st.cfg.MediaControlURL == "" {
		return nil
	}
	remote, err := media.NewHTTPEngine(media.HTTPConfig{BaseURL: strings.TrimRight(st.cfg.MediaControlURL, "/"), Key: MediaReportKey(st.keys.MediaToken()), Clock: st.clk})
	if err != nil {
		return fmt.Errorf("media control: %w", err)
	}
	st.onFailure(func() {
		// Flush what the engine queued meanwhile (a swept room's close),
		// but do not let an unreachable node hold a failed start.
		ctx, cancel := context.WithTimeout(context.Background(), remoteMediaFlushOnFailure)
		defer cancel()
		_ = remote.Close(ctx)
	})
	st.s.engine.SetMedia(remote)
	st.s.remoteMedia = remote
	return nil
}

// startEmbeddedMedia runs the built-in media node on the listener of
// listen, when there is one.
func (st *startup) startEmbeddedMedia() error {
	if st.mediaLn == nil {
		return nil
	}
	_, listenPort, _ := net.SplitHostPort(st.cfg.MediaListen)
	node, err := startEmbeddedMedia(st.tls.wrap(st.mediaLn), listenPort == "0", st.cfg.MediaNetwork(), st.s.engine, st.keys, st.clk, st.m.Media)
	if err != nil {
		return fmt.Errorf("media node: %w", err)
	}
	st.onFailure(node.stop) // before the engine stops: it delivers the last reports
	st.s.media = node
	return nil
}

// serve starts serving the API and the private listener.
func (st *startup) serve() {
	s := st.s
	go func() { s.serveErrors <- s.api.Serve(st.tls.wrap(s.apiLn)) }()
	go func() { s.serveErrors <- s.metricsSrv.Serve(s.metricsLn) }()
	slog.Info("rtcd serving", "api", s.apiLn.Addr().String(), "metrics", s.metricsLn.Addr().String(),
		"media", s.mediaDescription(), "tls", st.tls != nil, "region", st.cfg.Region, "data_dir", st.cfg.DataDir, "version", Version)
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
	if s.clusterMedia != nil {
		s.clusterMedia.stop(ctx) // flush queued commands
	}
	if s.remoteMedia != nil {
		_ = s.remoteMedia.Close(ctx) // flush queued commands
	}
	_ = s.metricsSrv.ShutdownWithContext(ctx)
	if s.node != nil {
		// Its workspaces are released (their writes durable) and its
		// lease ended, so the other nodes take them over at once.
		s.node.Leave()
	}
	s.engine.Stop()
	// A backup still running (its request outlived the drain) finishes
	// before the store closes under it; none starts after this.
	s.backups.stop()
	if c, ok := s.limiter.(interface{ Close() error }); ok {
		_ = c.Close()
	}
	if cerr := s.store.Close(); err == nil {
		err = cerr
	}
	_ = s.lock.Release()
	return err
}

// newPayments builds the configured payment provider. apiOrigin is the API
// listener's own address: the sandbox posts its signed callbacks there, and
// it is the public origin when --public-url is empty. dashboardOrigin is
// where payers come back to: the dashboard's page of their top-up.
// callbackClient sends the sandbox's callbacks (nil: its default client).
func newPayments(cfg *config.Config, keys auth.Keys, clk clock.Clock, apiOrigin, dashboardOrigin string, callbackClient *http.Client) (api.Payments, error) {
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
			ReturnURL:  dashboardOrigin + api.TopupReturnPath + payments.PaymentIDPlaceholder,
			HTTPClient: callbackClient,
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
func OpenKeys(cfg *config.Config, store persistence.Storage) (auth.Keys, bool, error) {
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
