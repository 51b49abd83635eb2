package config

import (
	"os"
	"strings"
	"testing"
)

// envOf returns an environment lookup over m.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

var noEnv = envOf(nil)

// docRows returns the table rows of docs/configuration.md, each split into
// its cells with surrounding spaces and backquotes removed.
func docRows(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatalf("docs/configuration.md must exist and list every setting: %v", err)
	}
	var rows [][]string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.Trim(strings.TrimSpace(c), "`"))
		}
		rows = append(rows, cells)
	}
	return rows
}

// TestDocsListEverySetting keeps docs/configuration.md in step with
// Settings(): each setting has a table row holding its flag, its environment
// variable and its default.
func TestDocsListEverySetting(t *testing.T) {
	rows := docRows(t)
	for _, s := range (&Config{}).Settings() {
		flagName, envName := "--"+s.Name, s.EnvName()
		var row []string
		for _, r := range rows {
			hasFlag, hasEnv := false, false
			for _, c := range r {
				hasFlag = hasFlag || c == flagName
				hasEnv = hasEnv || c == envName
			}
			if hasFlag && hasEnv {
				row = r
				break
			}
		}
		if row == nil {
			t.Errorf("docs/configuration.md has no table row with both %s and %s", flagName, envName)
			continue
		}
		if s.Default == "" {
			continue // shown as a description ("empty: ...")
		}
		found := false
		for _, c := range row {
			found = found || c == s.Default
		}
		if !found {
			t.Errorf("docs/configuration.md row of %s does not show its default %q: %q", flagName, s.Default, row)
		}
	}
}

func TestDefaults(t *testing.T) {
	c, err := Parse("test", nil, noEnv)
	if err != nil {
		t.Fatalf("defaults must be valid: %v", err)
	}
	want := map[string]any{
		"data-dir": "./data", "store": "pebble", "nats-url": "", "nats-stream": "RTCD", "nats-replicas": 3,
		"rate-limit-store": "memory", "redis-url": "", "redis-key-prefix": "rtcd:", "cluster-name": "", "cluster-etcd": "",
		"cluster-listen": "127.0.0.1:9300", "cluster-advertise": "", "listen": "127.0.0.1:8080", "metrics-listen": "127.0.0.1:9100",
		"region": "global", "media-url": "", "media-control-url": "", "webhook-allow-private": false, "webhook-extra-ca-file": "",
		"webhook-timeout-seconds": 10, "webhook-retry-schedule": "10,60,300,1800,7200,21600,86400", "webhook-window": 32, "master-key": "",
		"media-listen": "127.0.0.1:8081", "media-node-ip": "", "media-udp-port": 0, "media-tcp-port": 0, "media-turn-port": 0, "tls-cert": "", "tls-key": "", "billing-enabled": true, "currency": "USD",
		"participant-minute-price": "0.004000", "low-credit-threshold": "5.00", "minimum-credit-to-start": "1.00",
		"bootstrap-credit": "10.00", "settle-interval-seconds": 60, "topup-expiry-seconds": 3600,
		"public-url": "", "payment-provider": "sandbox", "stripe-secret-key": "",
		"stripe-webhook-secret": "", "stripe-api-base": "",
		"default-max-active-rooms": 1000, "default-max-active-participants": 10000,
		"default-max-participants-per-room": 100, "default-room-creates-per-minute": 600,
		"default-participant-creates-per-minute": 6000, "default-connect-requests-per-minute": 60000,
		"connect-per-ip-per-minute": 6000, "media-token-ttl-seconds": 60, "snapshot-every-events": 1000,
		"shutdown-timeout-seconds": 15, "trust-forwarded-for": false, "log-level": "info",
		"owner-email": "owner@localhost", "dashboard-url": "", "mail-from": "rtcd@localhost",
		"smtp-host": "", "smtp-port": 587, "smtp-username": "", "smtp-password": "", "smtp-tls": "starttls",
		"smtp-timeout-seconds": 30, "smtp-ca-file": "", "google-client-id": "", "google-client-secret": "",
		"google-issuer": "https://accounts.google.com", "google-redirect-url": "",
	}
	settings := c.Settings()
	if len(settings) != len(want) {
		t.Errorf("%d settings, this test knows %d: add the new one here and to docs/configuration.md", len(settings), len(want))
	}
	for _, s := range settings {
		w, ok := want[s.Name]
		if !ok {
			t.Errorf("setting %s is not covered by this test", s.Name)
			continue
		}
		if got := valueOf(s); got != w {
			t.Errorf("default of --%s = %v, want %v", s.Name, got, w)
		}
	}
}

func valueOf(s Setting) any {
	switch {
	case s.str != nil:
		return *s.str
	case s.num != nil:
		return *s.num
	default:
		return *s.boolean
	}
}

func TestEnvName(t *testing.T) {
	for name, want := range map[string]string{
		"data-dir":                          "RTCD_DATA_DIR",
		"default-max-participants-per-room": "RTCD_DEFAULT_MAX_PARTICIPANTS_PER_ROOM",
		"connect-per-ip-per-minute":         "RTCD_CONNECT_PER_IP_PER_MINUTE",
		"region":                            "RTCD_REGION",
		"media-url":                         "RTCD_MEDIA_URL",
	} {
		if got := (Setting{Name: name}).EnvName(); got != want {
			t.Errorf("EnvName(%s) = %s, want %s", name, got, want)
		}
	}
}

func TestEnvironmentApplies(t *testing.T) {
	c, err := Parse("test", nil, envOf(map[string]string{
		"RTCD_DATA_DIR":                               "/var/lib/rtcd",
		"RTCD_LISTEN":                                 "0.0.0.0:9000",
		"RTCD_METRICS_LISTEN":                         "127.0.0.1:9200",
		"RTCD_REGION":                                 "eu-west",
		"RTCD_MEDIA_URL":                              "wss://media.example.com/v1/media",
		"RTCD_MASTER_KEY":                             strings.Repeat("ab", 32),
		"RTCD_DEFAULT_MAX_ACTIVE_ROOMS":               "5",
		"RTCD_DEFAULT_MAX_ACTIVE_PARTICIPANTS":        "50",
		"RTCD_DEFAULT_MAX_PARTICIPANTS_PER_ROOM":      "10",
		"RTCD_DEFAULT_ROOM_CREATES_PER_MINUTE":        "7",
		"RTCD_DEFAULT_PARTICIPANT_CREATES_PER_MINUTE": "8",
		"RTCD_DEFAULT_CONNECT_REQUESTS_PER_MINUTE":    "9",
		"RTCD_CONNECT_PER_IP_PER_MINUTE":              "11",
		"RTCD_MEDIA_TOKEN_TTL_SECONDS":                "30",
		"RTCD_SNAPSHOT_EVERY_EVENTS":                  "12",
		"RTCD_SHUTDOWN_TIMEOUT_SECONDS":               "3",
		"RTCD_TRUST_FORWARDED_FOR":                    "true",
		"RTCD_LOG_LEVEL":                              "debug",
		"RTCD_MEDIA_LISTEN":                           "127.0.0.1:7000",
		"RTCD_BILLING_ENABLED":                        "false",
		"RTCD_CURRENCY":                               "USD",
		"RTCD_PARTICIPANT_MINUTE_PRICE":               "0.001500",
		"RTCD_LOW_CREDIT_THRESHOLD":                   "3.00",
		"RTCD_MINIMUM_CREDIT_TO_START":                "0.50",
		"RTCD_BOOTSTRAP_CREDIT":                       "0",
		"RTCD_SETTLE_INTERVAL_SECONDS":                "5",
		"RTCD_TOPUP_EXPIRY_SECONDS":                   "1800",
		"RTCD_PUBLIC_URL":                             "https://rtc.example.com",
		"RTCD_PAYMENT_PROVIDER":                       "stripe",
		"RTCD_STRIPE_SECRET_KEY":                      "sk_test_x",
		"RTCD_STRIPE_WEBHOOK_SECRET":                  "whsec_x",
		"RTCD_STRIPE_API_BASE":                        "http://127.0.0.1:12111",
		"RTCD_WEBHOOK_ALLOW_PRIVATE":                  "true",
		"RTCD_WEBHOOK_EXTRA_CA_FILE":                  "/tmp/ca.pem",
		"RTCD_WEBHOOK_TIMEOUT_SECONDS":                "5",
		"RTCD_WEBHOOK_RETRY_SCHEDULE":                 "1,2,3",
		"RTCD_WEBHOOK_WINDOW":                         "4",
		"RTCD_OWNER_EMAIL":                            "ops@example.com",
		"RTCD_DASHBOARD_URL":                          "https://app.example.com",
		"RTCD_MAIL_FROM":                              "no-reply@example.com",
		"RTCD_SMTP_HOST":                              "smtp.example.com",
		"RTCD_SMTP_PORT":                              "465",
		"RTCD_SMTP_USERNAME":                          "mailer",
		"RTCD_SMTP_PASSWORD":                          "pw",
		"RTCD_SMTP_TLS":                               "tls",
		"RTCD_SMTP_TIMEOUT_SECONDS":                   "12",
		"RTCD_SMTP_CA_FILE":                           "/etc/rtcd/smtp-ca.pem",
		"RTCD_GOOGLE_CLIENT_ID":                       "cid",
		"RTCD_GOOGLE_CLIENT_SECRET":                   "csecret",
		"RTCD_GOOGLE_ISSUER":                          "https://issuer.example.com",
		"RTCD_GOOGLE_REDIRECT_URL":                    "https://app.example.com/cb",
		"RTCD_STORE":                                  "jetstream",
		"RTCD_NATS_URL":                               "nats://127.0.0.1:4222,nats://127.0.0.1:4223",
		"RTCD_NATS_STREAM":                            "RTCD_EU",
		"RTCD_NATS_REPLICAS":                          "5",
		"RTCD_RATE_LIMIT_STORE":                       "redis",
		"RTCD_REDIS_URL":                              "redis://:pw@127.0.0.1:6380/2",
		"RTCD_REDIS_KEY_PREFIX":                       "rtcd:eu:",
		"RTCD_CLUSTER_NAME":                           "eu",
		"RTCD_CLUSTER_ETCD":                           "10.0.0.1:2379, 10.0.0.2:2379",
		"RTCD_CLUSTER_LISTEN":                         "0.0.0.0:9300",
		"RTCD_CLUSTER_ADVERTISE":                      "10.0.0.7:9300",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		DataDir: "/var/lib/rtcd", Listen: "0.0.0.0:9000", MetricsListen: "127.0.0.1:9200", Region: "eu-west",
		MediaURL: "wss://media.example.com/v1/media", MasterKey: strings.Repeat("ab", 32),
		DefaultMaxActiveRooms: 5, DefaultMaxActiveParticipants: 50, DefaultMaxParticipantsPerRoom: 10,
		DefaultRoomCreatesPerMinute: 7, DefaultParticipantCreatesPerMinute: 8, DefaultConnectRequestsPerMinute: 9,
		ConnectPerIPPerMinute: 11, MediaTokenTTLSeconds: 30, SnapshotEveryEvents: 12, ShutdownTimeoutSeconds: 3,
		TrustForwardedFor: true, LogLevel: "debug",
		MediaListen: "127.0.0.1:7000", BillingEnabled: false, Currency: "USD", ParticipantMinutePrice: "0.001500",
		LowCreditThreshold: "3.00", MinimumCreditToStart: "0.50", BootstrapCredit: "0", SettleIntervalSeconds: 5,
		TopupExpirySeconds: 1800, PublicURL: "https://rtc.example.com", PaymentProvider: "stripe",
		StripeSecretKey: "sk_test_x", StripeWebhookSecret: "whsec_x", StripeAPIBase: "http://127.0.0.1:12111",
		WebhookAllowPrivate: true, WebhookExtraCAFile: "/tmp/ca.pem", WebhookTimeoutSeconds: 5, WebhookRetryScheduleSeconds: "1,2,3", WebhookWindow: 4,
		OwnerEmail: "ops@example.com", DashboardURL: "https://app.example.com", MailFrom: "no-reply@example.com",
		SMTPHost: "smtp.example.com", SMTPPort: 465, SMTPUsername: "mailer", SMTPPassword: "pw", SMTPTLS: "tls",
		SMTPTimeoutSeconds: 12, SMTPCAFile: "/etc/rtcd/smtp-ca.pem", GoogleClientID: "cid", GoogleClientSecret: "csecret",
		GoogleIssuer: "https://issuer.example.com", GoogleRedirectURL: "https://app.example.com/cb",
		Store: "jetstream", NATSURL: "nats://127.0.0.1:4222,nats://127.0.0.1:4223", NATSStream: "RTCD_EU", NATSReplicas: 5,
		RateLimitStore: "redis", RedisURL: "redis://:pw@127.0.0.1:6380/2", RedisKeyPrefix: "rtcd:eu:",
		ClusterName: "eu", ClusterEtcd: "10.0.0.1:2379, 10.0.0.2:2379", ClusterListen: "0.0.0.0:9300", ClusterAdvertise: "10.0.0.7:9300",
	}
	if *c != want {
		t.Errorf("environment not applied:\n got %+v\nwant %+v", *c, want)
	}
}

func TestEmptyEnvironmentVariableIsUnset(t *testing.T) {
	c, err := Parse("test", nil, envOf(map[string]string{"RTCD_LISTEN": "", "RTCD_DEFAULT_MAX_ACTIVE_ROOMS": ""}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:8080" || c.DefaultMaxActiveRooms != 1000 {
		t.Errorf("empty variables must leave the defaults: listen %q, max rooms %d", c.Listen, c.DefaultMaxActiveRooms)
	}
}

func TestFlagsBeatEnvironment(t *testing.T) {
	env := envOf(map[string]string{
		"RTCD_LISTEN":                            "127.0.0.1:1111",
		"RTCD_REGION":                            "from-env",
		"RTCD_DEFAULT_MAX_PARTICIPANTS_PER_ROOM": "10",
		"RTCD_TRUST_FORWARDED_FOR":               "true",
		"RTCD_LOG_LEVEL":                         "warn",
	})
	c, err := Parse("test", []string{
		"--listen", "127.0.0.1:2222",
		"--region=from-flag",
		"--default-max-participants-per-room=20",
		"--trust-forwarded-for=false",
	}, env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:2222" || c.Region != "from-flag" || c.DefaultMaxParticipantsPerRoom != 20 || c.TrustForwardedFor {
		t.Errorf("flags must win over the environment: %+v", *c)
	}
	if c.LogLevel != "warn" {
		t.Errorf("a setting without a flag keeps its environment value: log level %q", c.LogLevel)
	}
}

// clusterStores are the store settings a cluster node needs.
var clusterStores = []string{"--store=jetstream", "--nats-url=nats://127.0.0.1:4222", "--rate-limit-store=redis", "--redis-url=redis://127.0.0.1:6379/0"}

func TestInvalidValues(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string // a fragment of the error
	}{
		{"negative flag", []string{"--default-max-active-rooms=-1"}, nil, "negative"},
		{"unknown store", []string{"--store=redis"}, nil, "want pebble or jetstream"},
		{"jetstream without nats url", []string{"--store=jetstream"}, nil, "needs --nats-url"},
		{"jetstream replicas", []string{"--store=jetstream", "--nats-url=nats://127.0.0.1:4222", "--nats-replicas=0"}, nil, "1 to 5"},
		{"jetstream stream name", nil, map[string]string{"RTCD_STORE": "jetstream", "RTCD_NATS_URL": "nats://127.0.0.1:4222", "RTCD_NATS_STREAM": "a.b"}, "letters, digits"},
		{"unknown rate-limit store", []string{"--rate-limit-store=etcd"}, nil, "want memory or redis"},
		{"redis without url", []string{"--rate-limit-store=redis"}, nil, "needs --redis-url"},
		{"redis url scheme", []string{"--rate-limit-store=redis", "--redis-url=http://127.0.0.1:6379"}, nil, "--redis-url"},
		{"redis key prefix", nil, map[string]string{"RTCD_RATE_LIMIT_STORE": "redis", "RTCD_REDIS_URL": "redis://127.0.0.1:6379/0", "RTCD_REDIS_KEY_PREFIX": "a b"}, "printable"},
		{"cluster on pebble", []string{"--cluster-name=eu", "--cluster-etcd=127.0.0.1:2379"}, nil, "needs --store=jetstream"},
		{"cluster without redis", []string{"--cluster-name=eu", "--cluster-etcd=127.0.0.1:2379", "--store=jetstream", "--nats-url=nats://127.0.0.1:4222"}, nil, "needs --rate-limit-store=redis"},
		{"cluster without etcd", append([]string{"--cluster-name=eu"}, clusterStores...), nil, "needs --cluster-etcd"},
		{"cluster etcd not host:port", append([]string{"--cluster-name=eu", "--cluster-etcd=etcd.example.com"}, clusterStores...), nil, "not host:port"},
		{"cluster name", append([]string{"--cluster-name=e/u", "--cluster-etcd=127.0.0.1:2379"}, clusterStores...), nil, "letters, digits"},
		{"cluster listen", append([]string{"--cluster-name=eu", "--cluster-etcd=127.0.0.1:2379", "--cluster-listen=9300"}, clusterStores...), nil, "--cluster-listen"},
		{"cluster advertise", append([]string{"--cluster-name=eu", "--cluster-etcd=127.0.0.1:2379", "--cluster-advertise=10.0.0.7"}, clusterStores...), nil, "--cluster-advertise"},
		{"etcd without cluster", []string{"--cluster-etcd=127.0.0.1:2379"}, nil, "need --cluster-name"},
		{"negative env", nil, map[string]string{"RTCD_CONNECT_PER_IP_PER_MINUTE": "-5"}, "negative"},
		{"negative participants per room", []string{"--default-max-participants-per-room", "-10"}, nil, "negative"},
		{"listen without port", []string{"--listen", "localhost"}, nil, "HOST:PORT"},
		{"listen garbage env", nil, map[string]string{"RTCD_LISTEN": "not an address"}, "HOST:PORT"},
		{"metrics listen without port", []string{"--metrics-listen=127.0.0.1"}, nil, "HOST:PORT"},
		{"media url http", []string{"--media-url=http://media.example.com"}, nil, "ws://"},
		{"media url https env", nil, map[string]string{"RTCD_MEDIA_URL": "https://media.example.com"}, "ws://"},
		{"log level", []string{"--log-level=verbose"}, nil, "log-level"},
		{"log level env", nil, map[string]string{"RTCD_LOG_LEVEL": "INFO"}, "log-level"},
		{"non-integer env", nil, map[string]string{"RTCD_DEFAULT_MAX_ACTIVE_ROOMS": "ten"}, "not an integer"},
		{"float env", nil, map[string]string{"RTCD_MEDIA_TOKEN_TTL_SECONDS": "1.5"}, "not an integer"},
		{"non-boolean env", nil, map[string]string{"RTCD_TRUST_FORWARDED_FOR": "maybe"}, "not a boolean"},
		{"non-integer flag", []string{"--snapshot-every-events=many"}, nil, "invalid value"},
		{"zero media token ttl", []string{"--media-token-ttl-seconds=0"}, nil, "at least 1"},
		{"zero snapshot cadence", []string{"--snapshot-every-events=0"}, nil, "at least 1"},
		{"zero webhook window", []string{"--webhook-window=0"}, nil, "--webhook-window must be 1 to 64"},
		{"webhook window above the bound", nil, map[string]string{"RTCD_WEBHOOK_WINDOW": "65"}, "--webhook-window must be 1 to 64"},
		{"empty data dir", []string{"--data-dir="}, nil, "data-dir"},
		{"empty region", []string{"--region="}, nil, "region"},
		{"unknown flag", []string{"--no-such-setting=1"}, nil, "no-such-setting"},
		{"stray argument", []string{"extra"}, nil, "unexpected arguments"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("test", tc.args, envOf(tc.env))
			if err == nil {
				t.Fatalf("args %q env %v: want an error", tc.args, tc.env)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestValidEdgeValues(t *testing.T) {
	for _, args := range [][]string{
		{"--media-url=wss://media.example.com/v1/media"},
		{"--media-url="}, // no media node: connects answer service_unavailable
		{"--listen=[::1]:8080", "--metrics-listen=:9100"},
		{"--listen=127.0.0.1:0"},
		{"--webhook-window=1"}, {"--webhook-window=64"},
		{"--default-max-active-rooms=0"}, // zero is allowed: the project can create no rooms
		{"--trust-forwarded-for"},
		{"--log-level=error"},
	} {
		if _, err := Parse("test", args, noEnv); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

func TestMediaURLMustBeSecureOffLoopback(t *testing.T) {
	for raw, ok := range map[string]bool{
		"ws://127.0.0.1:8081/rtc":         true,
		"ws://localhost:8081/rtc":         true,
		"ws://[::1]:8081/rtc":             true,
		"wss://media.example.com/rtc":     true,
		"":                                true,
		"ws://media.example.com/rtc":      false,
		"ws://10.0.0.5:8081/rtc":          false,
		"http://127.0.0.1:8081/rtc":       false,
		"wss://":                          false,
		"media.example.com/rtc":           false,
		"ws://127.0.0.1.example.com/rtc":  false,
		"wss://media.example.com:443/rtc": true,
	} {
		_, err := Parse("test", []string{"--media-url=" + raw}, noEnv)
		if (err == nil) != ok {
			t.Errorf("--media-url=%q: err %v, want ok=%v", raw, err, ok)
		}
	}
}

func TestDashboardSettingsValidate(t *testing.T) {
	for _, args := range [][]string{
		{"--owner-email=not-an-address"},
		{"--owner-email=a b@example.com"},
		{"--mail-from=Name <x@example.com>"},
		{"--dashboard-url=ftp://example.com"},
		{"--dashboard-url=example.com"},
		{"--google-redirect-url=javascript:alert(1)"},
		{"--smtp-tls=ssl"},
		{"--smtp-port=70000"},
		{"--smtp-timeout-seconds=0"},
		{"--smtp-ca-file=/etc/rtcd/smtp-ca.pem", "--smtp-tls=none"},
		{"--google-client-id=abc"},
		{"--google-client-id=abc", "--google-client-secret=s", "--google-issuer="},
	} {
		if _, err := Parse("test", args, noEnv); err == nil {
			t.Errorf("Parse(%v) accepted an invalid dashboard setting", args)
		}
	}
	c, err := Parse("test", []string{"--public-url=https://api.example.com/"}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.DashboardOrigin(c.Listen); got != "https://api.example.com" {
		t.Errorf("DashboardOrigin falls back to the public URL: got %q", got)
	}
	c, _ = Parse("test", []string{"--public-url=https://api.example.com", "--dashboard-url=https://app.example.com"}, noEnv)
	if got := c.DashboardOrigin(c.Listen); got != "https://app.example.com" {
		t.Errorf("DashboardOrigin prefers --dashboard-url: got %q", got)
	}
	c, _ = Parse("test", nil, noEnv)
	if got := c.DashboardOrigin(c.Listen); got != "http://127.0.0.1:8080" {
		t.Errorf("DashboardOrigin defaults to the listen address: got %q", got)
	}
}

// --tls-cert and --tls-key go together, and make the API's own origin
// https (the dashboard's too, unless it has its own).
func TestTLSSettings(t *testing.T) {
	for _, args := range [][]string{{"--tls-cert=/etc/rtcd/cert.pem"}, {"--tls-key=/etc/rtcd/key.pem"}} {
		if _, err := Parse("test", args, noEnv); err == nil {
			t.Errorf("Parse(%v) accepted half a TLS setting", args)
		}
	}
	c, err := Parse("test", []string{"--tls-cert=/etc/rtcd/cert.pem", "--tls-key=/etc/rtcd/key.pem"}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if !c.ServesTLS() || c.ListenerScheme() != "https" {
		t.Errorf("ServesTLS %v, scheme %q", c.ServesTLS(), c.ListenerScheme())
	}
	if got := c.APIOrigin(c.Listen); got != "https://127.0.0.1:8080" {
		t.Errorf("APIOrigin with TLS: %q", got)
	}
	if got := c.DashboardOrigin(c.Listen); got != "https://127.0.0.1:8080" {
		t.Errorf("DashboardOrigin with TLS: %q", got)
	}
	c, _ = Parse("test", nil, noEnv)
	if c.ServesTLS() || c.APIOrigin(c.Listen) != "http://127.0.0.1:8080" {
		t.Errorf("without TLS: ServesTLS %v, APIOrigin %q", c.ServesTLS(), c.APIOrigin(c.Listen))
	}
}
