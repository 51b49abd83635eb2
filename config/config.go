// Package config owns rtcd's settings: one Config struct, its defaults in
// one table, each setting reachable as a flag (--name) and an environment
// variable (RTCD_NAME), with flags winning. Validation runs after parsing;
// an invalid value is an error at start, never a silent fallback.
// docs/configuration.md lists every setting; a test keeps them in step.
package config

import (
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"rtcd/media"
	"rtcd/money"
	"rtcd/ratelimit"
	"rtcd/webhookdelivery"
)

// Config is every setting of `rtcd serve`.
type Config struct {
	DataDir       string
	Listen        string
	MetricsListen string
	Region        string
	MediaURL      string
	MasterKey     string // hex; empty: read or create <data-dir>/master.key

	// Where the durable state lives: pebble (<data-dir>/pebble, the
	// default) or jetstream (a NATS JetStream stream, replicated).
	Store        string
	NATSURL      string // comma-separated NATS URLs, with --store=jetstream
	NATSStream   string // the stream (and subject root) of the records
	NATSReplicas int    // the stream's replication

	// Where the request-rate counters live: memory (this process, the
	// default) or redis (shared by every node of a cluster).
	RateLimitStore string
	RedisURL       string // redis:// or rediss:// URL, with --rate-limit-store=redis
	RedisKeyPrefix string // starts every counter key in Redis

	// Cluster mode (docs/cluster.md): several nodes over one JetStream
	// stream and one Redis, each workspace placed on one of them. An empty
	// ClusterName: a single node.
	ClusterName      string
	ClusterEtcd      string // comma-separated etcd client endpoints (host:port)
	ClusterListen    string // HOST:PORT of the node-to-node listener
	ClusterAdvertise string // HOST:PORT other nodes dial; empty: ClusterListen's address

	DefaultMaxActiveRooms              int
	DefaultMaxActiveParticipants       int
	DefaultMaxParticipantsPerRoom      int
	DefaultRoomCreatesPerMinute        int
	DefaultParticipantCreatesPerMinute int
	DefaultConnectRequestsPerMinute    int
	ConnectPerIPPerMinute              int

	BillingEnabled         bool
	Currency               string
	ParticipantMinutePrice string // decimal, six decimals
	LowCreditThreshold     string // decimal
	MinimumCreditToStart   string // decimal
	BootstrapCredit        string // decimal
	SettleIntervalSeconds  int
	TopupExpirySeconds     int
	PublicURL              string // the API origin payers' browsers reach (sandbox checkout, Stripe return pages)
	PaymentProvider        string // sandbox or stripe
	StripeSecretKey        string
	StripeWebhookSecret    string
	StripeAPIBase          string

	TLSCertFile string // PEM certificate chain of the API and built-in media listeners; empty: plain HTTP
	TLSKeyFile  string // PEM private key of TLSCertFile

	MediaListen     string // the built-in media node; empty: none
	MediaControlURL string // control origin of a node run on its own (rtcd media); empty: none
	MediaNodeIP     string // address in the built-in node's ICE host candidates; empty: the media listener's
	MediaUDPPort    int    // the one UDP port of the built-in node's WebRTC; 0: the media listener's port
	MediaTCPPort    int    // ICE over TCP port; 0: the media listener's port + 1; -1: off
	MediaTURNPort   int    // the built-in node's embedded TURN server (UDP and TCP); 0: off

	WebhookAllowPrivate         bool
	WebhookExtraCAFile          string
	WebhookTimeoutSeconds       int
	WebhookRetryScheduleSeconds string // comma-separated delays
	WebhookWindow               int    // attempts in flight per endpoint at most

	// The dashboard: who owns the first workspace, where links point, how
	// mail is sent, and Google sign-in.
	OwnerEmail         string
	DashboardURL       string
	MailFrom           string
	SMTPHost           string // empty: write mail to <data-dir>/outbox/
	SMTPPort           int
	SMTPUsername       string
	SMTPPassword       string
	SMTPTLS            string
	SMTPTimeoutSeconds int
	SMTPCAFile         string // PEM CAs trusted for the SMTP server besides the system roots
	GoogleClientID     string
	GoogleClientSecret string
	GoogleIssuer       string
	GoogleRedirectURL  string

	MediaTokenTTLSeconds   int
	SnapshotEveryEvents    int
	ShutdownTimeoutSeconds int
	TrustForwardedFor      bool
	LogLevel               string
}

// Setting describes one setting for flags, environment and docs.
type Setting struct {
	Name    string // flag name; the environment variable is RTCD_ + upper snake case
	Default string
	Help    string
	str     *string
	num     *int
	boolean *bool
}

// EnvName is the setting's environment variable.
func (s Setting) EnvName() string {
	return "RTCD_" + strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
}

// Settings returns the table of settings bound to c's fields.
func (c *Config) Settings() []Setting {
	return []Setting{
		{Name: "data-dir", Default: "./data", Help: "directory of the Pebble database and master key", str: &c.DataDir},
		{Name: "store", Default: "pebble", Help: "where the durable state lives: pebble (<data-dir>/pebble) or jetstream (a replicated NATS JetStream stream, see --nats-url; docs/cluster.md)", str: &c.Store},
		{Name: "nats-url", Default: "", Help: "comma-separated NATS server URLs of the JetStream cluster, with --store=jetstream", str: &c.NATSURL},
		{Name: "nats-stream", Default: "RTCD", Help: "the JetStream stream holding the records (created if missing), with --store=jetstream", str: &c.NATSStream},
		{Name: "nats-replicas", Default: "3", Help: "replicas of the stream (3: one server may be lost; 1 only for a single test server)", num: &c.NATSReplicas},
		{Name: "rate-limit-store", Default: "memory", Help: "where the request-rate counters live: memory (this process) or redis (shared by every node, see --redis-url; docs/cluster.md)", str: &c.RateLimitStore},
		{Name: "redis-url", Default: "", Help: "redis://[user:password@]host:port/db (rediss:// for TLS) of the shared rate counters, with --rate-limit-store=redis", str: &c.RedisURL},
		{Name: "redis-key-prefix", Default: "rtcd:", Help: "prefix of every rate-counter key in Redis, so deployments can share one Redis", str: &c.RedisKeyPrefix},
		{Name: "cluster-name", Default: "", Help: "run as a node of the named cluster (needs --store=jetstream, --rate-limit-store=redis and --cluster-etcd; docs/cluster.md); empty: a single node", str: &c.ClusterName},
		{Name: "cluster-etcd", Default: "", Help: "comma-separated etcd client endpoints (host:port) holding the cluster's membership, with --cluster-name", str: &c.ClusterEtcd},
		{Name: "cluster-listen", Default: "127.0.0.1:9300", Help: "HOST:PORT of the node-to-node listener other nodes forward requests to (keep it private), with --cluster-name", str: &c.ClusterListen},
		{Name: "cluster-advertise", Default: "", Help: "HOST:PORT other nodes dial to reach --cluster-listen (behind NAT or in a container); empty: the listener's own address", str: &c.ClusterAdvertise},
		{Name: "listen", Default: "127.0.0.1:8080", Help: "HOST:PORT of the public API", str: &c.Listen},
		{Name: "metrics-listen", Default: "127.0.0.1:9100", Help: "HOST:PORT of /metrics and /healthz (keep it private)", str: &c.MetricsListen},
		{Name: "region", Default: "global", Help: "the region this server runs in; rooms may only ask for this one", str: &c.Region},
		{Name: "tls-cert", Default: "", Help: "PEM certificate (chain) the API and the built-in media node serve HTTPS and wss:// with; empty: plain HTTP and ws:// (behind a TLS proxy, or on loopback)", str: &c.TLSCertFile},
		{Name: "tls-key", Default: "", Help: "PEM private key of --tls-cert", str: &c.TLSKeyFile},
		{Name: "media-listen", Default: "127.0.0.1:8081", Help: "HOST:PORT of the built-in reference media node (empty: do not run one)", str: &c.MediaListen},
		{Name: "media-node-ip", Default: "", Help: "IP address clients send media to (ICE host candidates) of the built-in node; empty: the --media-listen host", str: &c.MediaNodeIP},
		{Name: "media-udp-port", Default: "0", Help: "the one UDP port every WebRTC peer of the built-in node uses; 0: the --media-listen port number (on UDP)", num: &c.MediaUDPPort},
		{Name: "media-tcp-port", Default: "0", Help: "ICE over TCP port of the built-in node, the fallback where UDP is blocked; 0: the --media-listen port + 1; -1: off", num: &c.MediaTCPPort},
		{Name: "media-turn-port", Default: "0", Help: "run an embedded TURN server (UDP and TCP) on this port for clients that reach neither the UDP port nor ICE over TCP; clients get time-limited credentials at join; 0: off", num: &c.MediaTURNPort},
		{Name: "media-control-url", Default: "", Help: "http(s) origin of a media node run on its own (rtcd media --listen), where rooms are closed and participants removed; use with --media-listen= and --media-url", str: &c.MediaControlURL},
		{Name: "media-url", Default: "", Help: "media endpoint returned by POST /v1/connect; empty: ws://<media-listen address>/rtc of the built-in node; behind TLS set a wss:// address", str: &c.MediaURL},
		{Name: "master-key", Default: "", Help: "hex master secret (at least 32 bytes); empty: <data-dir>/master.key, created on first start", str: &c.MasterKey},
		{Name: "default-max-active-rooms", Default: "1000", Help: "max_active_rooms of projects without limits of their own", num: &c.DefaultMaxActiveRooms},
		{Name: "default-max-active-participants", Default: "10000", Help: "max_active_participants of projects without limits of their own", num: &c.DefaultMaxActiveParticipants},
		{Name: "default-max-participants-per-room", Default: "100", Help: "max_participants_per_room of projects without limits of their own", num: &c.DefaultMaxParticipantsPerRoom},
		{Name: "default-room-creates-per-minute", Default: "600", Help: "room_creates_per_minute of projects without limits of their own", num: &c.DefaultRoomCreatesPerMinute},
		{Name: "default-participant-creates-per-minute", Default: "6000", Help: "participant_creates_per_minute of projects without limits of their own", num: &c.DefaultParticipantCreatesPerMinute},
		{Name: "default-connect-requests-per-minute", Default: "60000", Help: "connect_requests_per_minute of projects without limits of their own", num: &c.DefaultConnectRequestsPerMinute},
		{Name: "connect-per-ip-per-minute", Default: "6000", Help: "POST /v1/connect requests per source IP per minute (abuse guard)", num: &c.ConnectPerIPPerMinute},
		{Name: "billing-enabled", Default: "true", Help: "meter and charge usage and gate new sessions on credit; false: nothing is gated or charged", boolean: &c.BillingEnabled},
		{Name: "currency", Default: "USD", Help: "currency of wallets, prices and top-ups", str: &c.Currency},
		{Name: "participant-minute-price", Default: "0.004000", Help: "price of one participant-minute (decimal, up to six decimals)", str: &c.ParticipantMinutePrice},
		{Name: "low-credit-threshold", Default: "5.00", Help: "below this balance the credit state is low (credit.low)", str: &c.LowCreditThreshold},
		{Name: "minimum-credit-to-start", Default: "1.00", Help: "below this balance new participant sessions and connects get 402 insufficient_credit", str: &c.MinimumCreditToStart},
		{Name: "bootstrap-credit", Default: "10.00", Help: "opening credit of the first workspace created by rtcd init or the first start", str: &c.BootstrapCredit},
		{Name: "settle-interval-seconds", Default: "60", Help: "how often running sessions are charged to the wallet", num: &c.SettleIntervalSeconds},
		{Name: "topup-expiry-seconds", Default: "3600", Help: "an unpaid top-up expires after this many seconds", num: &c.TopupExpirySeconds},
		{Name: "public-url", Default: "", Help: "origin of the API as payers' browsers reach it (sandbox checkout page, provider return pages); empty: http://<listen address>", str: &c.PublicURL},
		{Name: "payment-provider", Default: "sandbox", Help: "sandbox (built-in checkout page) or stripe", str: &c.PaymentProvider},
		{Name: "stripe-secret-key", Default: "", Help: "Stripe secret key (payment-provider=stripe)", str: &c.StripeSecretKey},
		{Name: "stripe-webhook-secret", Default: "", Help: "Stripe webhook signing secret whsec_… (payment-provider=stripe)", str: &c.StripeWebhookSecret},
		{Name: "stripe-api-base", Default: "", Help: "Stripe API origin; empty: Stripe's own (tests point it at stripe-mock)", str: &c.StripeAPIBase},
		{Name: "webhook-allow-private", Default: "false", Help: "TESTING ONLY: let webhook endpoints use http:// and private or loopback addresses", boolean: &c.WebhookAllowPrivate},
		{Name: "webhook-extra-ca-file", Default: "", Help: "TESTING ONLY: a PEM file of CAs trusted for webhook deliveries besides the system roots", str: &c.WebhookExtraCAFile},
		{Name: "webhook-timeout-seconds", Default: "10", Help: "timeout of one webhook delivery attempt", num: &c.WebhookTimeoutSeconds},
		{Name: "webhook-retry-schedule", Default: "10,60,300,1800,7200,21600,86400", Help: "delays in seconds between webhook attempts after a failure; after the last the delivery is dead", str: &c.WebhookRetryScheduleSeconds},
		{Name: "webhook-window", Default: strconv.Itoa(webhookdelivery.DefaultWindowAttempts), Help: fmt.Sprintf("webhook attempts in flight to one endpoint at most (1 to %d); the window shrinks to one while an endpoint fails and grows back as it succeeds", webhookdelivery.MaxWindowAttempts), num: &c.WebhookWindow},
		{Name: "owner-email", Default: "owner@localhost", Help: "e-mail address of the first workspace's owner, created by rtcd init or the first start; sign in to the dashboard with it", str: &c.OwnerEmail},
		{Name: "dashboard-url", Default: "", Help: "origin of the dashboard that sign-in and invitation links point at (never taken from a request's Host); empty: the public URL", str: &c.DashboardURL},
		{Name: "mail-from", Default: "rtcd@localhost", Help: "sender address of sign-in and invitation mail", str: &c.MailFrom},
		{Name: "smtp-host", Default: "", Help: "SMTP server for dashboard mail; empty: write each message as an .eml file to <data-dir>/outbox/ and log its link", str: &c.SMTPHost},
		{Name: "smtp-port", Default: "587", Help: "SMTP server port", num: &c.SMTPPort},
		{Name: "smtp-username", Default: "", Help: "SMTP user (empty: no authentication)", str: &c.SMTPUsername},
		{Name: "smtp-password", Default: "", Help: "SMTP password", str: &c.SMTPPassword},
		{Name: "smtp-tls", Default: "starttls", Help: "starttls (required), tls (implicit, usually port 465) or none (trusted networks only)", str: &c.SMTPTLS},
		{Name: "smtp-timeout-seconds", Default: "30", Help: "timeout of sending one message, dial to QUIT", num: &c.SMTPTimeoutSeconds},
		{Name: "smtp-ca-file", Default: "", Help: "a PEM file of CAs trusted for the SMTP server's certificate besides the system roots (a private CA); needs smtp-tls starttls or tls", str: &c.SMTPCAFile},
		{Name: "google-client-id", Default: "", Help: "OAuth client id of Google sign-in; empty: Google sign-in is off", str: &c.GoogleClientID},
		{Name: "google-client-secret", Default: "", Help: "OAuth client secret of Google sign-in", str: &c.GoogleClientSecret},
		{Name: "google-issuer", Default: "https://accounts.google.com", Help: "OpenID issuer of Google sign-in (tests point it at a local provider)", str: &c.GoogleIssuer},
		{Name: "google-redirect-url", Default: "", Help: "redirect URL registered with the provider; empty: <dashboard url>/sign-in/google", str: &c.GoogleRedirectURL},
		{Name: "media-token-ttl-seconds", Default: "60", Help: "lifetime of the media token and connect session", num: &c.MediaTokenTTLSeconds},
		{Name: "snapshot-every-events", Default: "1000", Help: "an actor writes a snapshot every this many journal events", num: &c.SnapshotEveryEvents},
		{Name: "shutdown-timeout-seconds", Default: "15", Help: "on SIGTERM, how long in-flight requests may take to finish", num: &c.ShutdownTimeoutSeconds},
		{Name: "trust-forwarded-for", Default: "false", Help: "take the source IP from X-Forwarded-For (only behind your own proxy)", boolean: &c.TrustForwardedFor},
		{Name: "log-level", Default: "info", Help: "debug, info, warn or error", str: &c.LogLevel},
	}
}

// Parse fills c from defaults, then the environment, then args.
func Parse(name string, args []string, env func(string) string) (*Config, error) {
	c := &Config{}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	for _, s := range c.Settings() {
		def := s.Default
		if v := env(s.EnvName()); v != "" {
			def = v
		}
		switch {
		case s.str != nil:
			fs.StringVar(s.str, s.Name, def, s.Help+" ("+s.EnvName()+")")
		case s.num != nil:
			n, err := strconv.Atoi(def)
			if err != nil {
				return nil, fmt.Errorf("%s=%q: not an integer", s.EnvName(), def)
			}
			fs.IntVar(s.num, s.Name, n, s.Help+" ("+s.EnvName()+")")
		case s.boolean != nil:
			b, err := strconv.ParseBool(def)
			if err != nil {
				return nil, fmt.Errorf("%s=%q: not a boolean", s.EnvName(), def)
			}
			fs.BoolVar(s.boolean, s.Name, b, s.Help+" ("+s.EnvName()+")")
		}
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return c, c.Validate()
}

// FromEnv parses the process environment and args.
func FromEnv(name string, args []string) (*Config, error) { return Parse(name, args, os.Getenv) }

// RetrySchedule parses --webhook-retry-schedule.
func (c *Config) RetrySchedule() ([]int, error) {
	var out []int
	for _, f := range strings.Split(c.WebhookRetryScheduleSeconds, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 7*24*3600 {
			return nil, fmt.Errorf("--webhook-retry-schedule=%q: want comma-separated delays of 1 to 604800 seconds", c.WebhookRetryScheduleSeconds)
		}
		out = append(out, n)
	}
	if len(out) > 32 {
		return nil, fmt.Errorf("--webhook-retry-schedule: at most 32 retries")
	}
	return out, nil
}

// CheckMediaURL checks a media endpoint: the spec makes it a secure
// WebSocket address. Plain ws:// is accepted only for a loopback host (the embedded
// default and local testing), where there is no network to protect.
func CheckMediaURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "ws" && u.Scheme != "wss") {
		return fmt.Errorf("--media-url=%q: want a wss:// address (ws:// only on a loopback host)", raw)
	}
	if u.Scheme == "ws" {
		host := u.Hostname()
		ip := net.ParseIP(host)
		if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("--media-url=%q: a media endpoint off this machine must be wss:// (secure WebSocket)", raw)
		}
	}
	return nil
}

// Validate checks every setting.
func (c *Config) Validate() error {
	for _, s := range c.Settings() {
		if s.num != nil && *s.num < 0 {
			return fmt.Errorf("--%s must not be negative", s.Name)
		}
	}
	for _, hp := range []struct{ name, v string }{{"listen", c.Listen}, {"metrics-listen", c.MetricsListen}} {
		if _, _, err := net.SplitHostPort(hp.v); err != nil {
			return fmt.Errorf("--%s=%q: want HOST:PORT", hp.name, hp.v)
		}
	}
	if c.DataDir == "" {
		return fmt.Errorf("--data-dir must not be empty")
	}
	if c.Region == "" {
		return fmt.Errorf("--region must not be empty")
	}
	switch c.Store {
	case "pebble":
	case "jetstream":
		if c.NATSURL == "" {
			return fmt.Errorf("--store=jetstream needs --nats-url (RTCD_NATS_URL)")
		}
		if c.NATSReplicas < 1 || c.NATSReplicas > 5 {
			return fmt.Errorf("--nats-replicas must be 1 to 5 (JetStream's range)")
		}
		for _, ch := range c.NATSStream {
			if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' || ch == '-') {
				return fmt.Errorf("--nats-stream=%q: use only letters, digits, '_' and '-'", c.NATSStream)
			}
		}
		if c.NATSStream == "" {
			return fmt.Errorf("--nats-stream must not be empty")
		}
	default:
		return fmt.Errorf("--store=%q: want pebble or jetstream", c.Store)
	}
	switch c.RateLimitStore {
	case "memory":
	case "redis":
		if c.RedisURL == "" {
			return fmt.Errorf("--rate-limit-store=redis needs --redis-url (RTCD_REDIS_URL)")
		}
		if _, err := ratelimit.ParseRedisURL(c.RedisURL); err != nil {
			return fmt.Errorf("--redis-url: %w", err)
		}
		if err := ratelimit.CheckRedisKeyPrefix(c.RedisKeyPrefix); err != nil {
			return fmt.Errorf("--redis-key-prefix: %w", err)
		}
	default:
		return fmt.Errorf("--rate-limit-store=%q: want memory or redis", c.RateLimitStore)
	}
	if err := c.validateCluster(); err != nil {
		return err
	}
	if err := CheckMediaURL(c.MediaURL); err != nil {
		return err
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return fmt.Errorf("--tls-cert and --tls-key go together")
	}
	for _, m := range []struct{ name, v string }{
		{"participant-minute-price", c.ParticipantMinutePrice}, {"low-credit-threshold", c.LowCreditThreshold},
		{"minimum-credit-to-start", c.MinimumCreditToStart}, {"bootstrap-credit", c.BootstrapCredit},
	} {
		v, err := money.Parse(m.v, money.MaxDecimals)
		if err != nil || v < 0 {
			return fmt.Errorf("--%s=%q: want a non-negative decimal amount with at most six decimals", m.name, m.v)
		}
	}
	if c.Currency != "USD" {
		// Both payment providers (the sandbox and the Stripe adapter) take USD
		// only; accepting another code would make every top-up fail.
		return fmt.Errorf("--currency=%q: only USD is supported by the payment providers", c.Currency)
	}
	if c.SettleIntervalSeconds < 1 {
		return fmt.Errorf("--settle-interval-seconds must be at least 1")
	}
	if c.TopupExpirySeconds < 60 {
		return fmt.Errorf("--topup-expiry-seconds must be at least 60")
	}
	if c.PublicURL != "" && !strings.HasPrefix(c.PublicURL, "http://") && !strings.HasPrefix(c.PublicURL, "https://") {
		return fmt.Errorf("--public-url=%q: want an http:// or https:// origin", c.PublicURL)
	}
	switch c.PaymentProvider {
	case "sandbox":
	case "stripe":
		if c.StripeSecretKey == "" || c.StripeWebhookSecret == "" {
			return fmt.Errorf("--payment-provider=stripe needs --stripe-secret-key and --stripe-webhook-secret")
		}
		if c.TopupExpirySeconds < 1800 || c.TopupExpirySeconds > 86400 {
			return fmt.Errorf("--topup-expiry-seconds must be 1800 to 86400 with Stripe (its Checkout Sessions expire within that window)")
		}
	default:
		return fmt.Errorf("--payment-provider=%q: want sandbox or stripe", c.PaymentProvider)
	}
	if c.MediaControlURL != "" && !strings.HasPrefix(c.MediaControlURL, "http://") && !strings.HasPrefix(c.MediaControlURL, "https://") {
		return fmt.Errorf("--media-control-url=%q: want an http:// or https:// origin", c.MediaControlURL)
	}
	if c.MediaListen != "" {
		if _, _, err := net.SplitHostPort(c.MediaListen); err != nil {
			return fmt.Errorf("--media-listen=%q: want HOST:PORT", c.MediaListen)
		}
	}
	if err := c.MediaNetwork().Validate(); err != nil {
		return err
	}
	if _, err := c.RetrySchedule(); err != nil {
		return err
	}
	if c.WebhookTimeoutSeconds < 1 || c.WebhookTimeoutSeconds > 60 {
		return fmt.Errorf("--webhook-timeout-seconds must be 1 to 60")
	}
	if c.WebhookWindow < 1 || c.WebhookWindow > webhookdelivery.MaxWindowAttempts {
		return fmt.Errorf("--webhook-window must be 1 to %d", webhookdelivery.MaxWindowAttempts)
	}
	if err := c.validateDashboard(); err != nil {
		return err
	}
	if c.MediaTokenTTLSeconds < 1 {
		return fmt.Errorf("--media-token-ttl-seconds must be at least 1")
	}
	if c.SnapshotEveryEvents < 1 {
		return fmt.Errorf("--snapshot-every-events must be at least 1")
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("--log-level=%q: want debug, info, warn or error", c.LogLevel)
	}
	return nil
}

// validateDashboard checks the dashboard's settings.
func (c *Config) validateDashboard() error {
	if c.OwnerEmail == "" || strings.ContainsAny(c.OwnerEmail, " \t\r\n<>") || strings.Count(c.OwnerEmail, "@") != 1 {
		return fmt.Errorf("--owner-email=%q: want a bare e-mail address", c.OwnerEmail)
	}
	if c.MailFrom == "" || strings.ContainsAny(c.MailFrom, " \t\r\n<>") || strings.Count(c.MailFrom, "@") != 1 {
		return fmt.Errorf("--mail-from=%q: want a bare e-mail address", c.MailFrom)
	}
	for _, o := range []struct{ name, v string }{{"dashboard-url", c.DashboardURL}, {"google-redirect-url", c.GoogleRedirectURL}, {"google-issuer", c.GoogleIssuer}} {
		if o.v == "" {
			continue
		}
		u, err := url.Parse(o.v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--%s=%q: want an http:// or https:// URL", o.name, o.v)
		}
	}
	switch c.SMTPTLS {
	case "starttls", "tls", "none":
	default:
		return fmt.Errorf("--smtp-tls=%q: want starttls, tls or none", c.SMTPTLS)
	}
	if c.SMTPPort < 1 || c.SMTPPort > 65535 {
		return fmt.Errorf("--smtp-port must be 1 to 65535")
	}
	if c.SMTPTimeoutSeconds < 1 || c.SMTPTimeoutSeconds > 300 {
		return fmt.Errorf("--smtp-timeout-seconds must be 1 to 300")
	}
	if c.SMTPCAFile != "" && c.SMTPTLS == "none" {
		return fmt.Errorf("--smtp-ca-file is set but --smtp-tls=none: trusting a CA needs starttls or tls")
	}
	if (c.GoogleClientID == "") != (c.GoogleClientSecret == "") {
		return fmt.Errorf("--google-client-id and --google-client-secret go together")
	}
	if c.GoogleClientID != "" && c.GoogleIssuer == "" {
		return fmt.Errorf("--google-issuer must not be empty when Google sign-in is on")
	}
	return nil
}

// DashboardOrigin is where dashboard links point: --dashboard-url, else
// the API's origin (APIOrigin).
func (c *Config) DashboardOrigin(apiAddr string) string {
	if c.DashboardURL != "" {
		return strings.TrimRight(c.DashboardURL, "/")
	}
	return c.APIOrigin(apiAddr)
}

// APIOrigin is the API's origin as browsers reach it: --public-url, else
// <scheme>://<apiAddr>, the API listener's real address (the port may have
// been chosen by the system), https when rtcd serves TLS itself.
func (c *Config) APIOrigin(apiAddr string) string {
	if c.PublicURL != "" {
		return strings.TrimRight(c.PublicURL, "/")
	}
	return c.ListenerScheme() + "://" + apiAddr
}

// ServesTLS reports whether the API and the built-in media node serve TLS
// themselves (--tls-cert and --tls-key).
func (c *Config) ServesTLS() bool { return c.TLSCertFile != "" }

// ListenerScheme is the scheme of the API listener: https with TLS, else
// http.
func (c *Config) ListenerScheme() string {
	if c.ServesTLS() {
		return "https"
	}
	return "http"
}

// MediaNetwork is where the built-in media node's WebRTC traffic goes.
func (c *Config) MediaNetwork() media.NetworkOptions {
	return media.NetworkOptions{NodeIP: c.MediaNodeIP, UDPPort: c.MediaUDPPort, TCPPort: c.MediaTCPPort, TURNPort: c.MediaTURNPort}
}

// validateCluster checks the cluster settings: a node of a cluster keeps
// its state where every node reads it (JetStream) and its rate counters
// where every node counts (Redis).
func (c *Config) validateCluster() error {
	if c.ClusterName == "" {
		if c.ClusterEtcd != "" || c.ClusterAdvertise != "" {
			return fmt.Errorf("--cluster-etcd and --cluster-advertise need --cluster-name")
		}
		return nil
	}
	for _, ch := range c.ClusterName {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' || ch == '-') {
			return fmt.Errorf("--cluster-name=%q: use only letters, digits, '_' and '-'", c.ClusterName)
		}
	}
	if c.Store != "jetstream" {
		return fmt.Errorf("--cluster-name needs --store=jetstream: every node must read the state the others write")
	}
	if c.RateLimitStore != "redis" {
		return fmt.Errorf("--cluster-name needs --rate-limit-store=redis: every node must count the same requests")
	}
	if c.ClusterEtcd == "" {
		return fmt.Errorf("--cluster-name needs --cluster-etcd (RTCD_CLUSTER_ETCD)")
	}
	for _, ep := range c.EtcdEndpoints() {
		if _, _, err := net.SplitHostPort(ep); err != nil {
			return fmt.Errorf("--cluster-etcd: %q is not host:port", ep)
		}
	}
	if _, _, err := net.SplitHostPort(c.ClusterListen); err != nil {
		return fmt.Errorf("--cluster-listen: %w", err)
	}
	if c.ClusterAdvertise != "" {
		if _, _, err := net.SplitHostPort(c.ClusterAdvertise); err != nil {
			return fmt.Errorf("--cluster-advertise: %w", err)
		}
	}
	return nil
}

// EtcdEndpoints are --cluster-etcd's endpoints.
func (c *Config) EtcdEndpoints() []string {
	var out []string
	for _, ep := range strings.Split(c.ClusterEtcd, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			out = append(out, ep)
		}
	}
	return out
}
