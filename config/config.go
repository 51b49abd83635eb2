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
	"os"
	"strconv"
	"strings"
)

// Config is every setting of `rtcd serve`.
type Config struct {
	DataDir       string
	Listen        string
	MetricsListen string
	Region        string
	MediaURL      string
	MasterKey     string // hex; empty: read or create <data-dir>/master.key

	DefaultMaxActiveRooms              int
	DefaultMaxActiveParticipants       int
	DefaultMaxParticipantsPerRoom      int
	DefaultRoomCreatesPerMinute        int
	DefaultParticipantCreatesPerMinute int
	DefaultConnectRequestsPerMinute    int
	ConnectPerIPPerMinute              int

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
		{Name: "listen", Default: "127.0.0.1:8080", Help: "HOST:PORT of the public API", str: &c.Listen},
		{Name: "metrics-listen", Default: "127.0.0.1:9100", Help: "HOST:PORT of /metrics and /healthz (keep it private)", str: &c.MetricsListen},
		{Name: "region", Default: "global", Help: "the region this server runs in; rooms may only ask for this one", str: &c.Region},
		{Name: "media-url", Default: "ws://127.0.0.1:8081/v1/media", Help: "media endpoint returned by POST /v1/connect (ws:// or wss://)", str: &c.MediaURL},
		{Name: "master-key", Default: "", Help: "hex master secret (at least 32 bytes); empty: <data-dir>/master.key, created on first start", str: &c.MasterKey},
		{Name: "default-max-active-rooms", Default: "1000", Help: "max_active_rooms of projects without limits of their own", num: &c.DefaultMaxActiveRooms},
		{Name: "default-max-active-participants", Default: "10000", Help: "max_active_participants of projects without limits of their own", num: &c.DefaultMaxActiveParticipants},
		{Name: "default-max-participants-per-room", Default: "100", Help: "max_participants_per_room of projects without limits of their own", num: &c.DefaultMaxParticipantsPerRoom},
		{Name: "default-room-creates-per-minute", Default: "600", Help: "room_creates_per_minute of projects without limits of their own", num: &c.DefaultRoomCreatesPerMinute},
		{Name: "default-participant-creates-per-minute", Default: "6000", Help: "participant_creates_per_minute of projects without limits of their own", num: &c.DefaultParticipantCreatesPerMinute},
		{Name: "default-connect-requests-per-minute", Default: "60000", Help: "connect_requests_per_minute of projects without limits of their own", num: &c.DefaultConnectRequestsPerMinute},
		{Name: "connect-per-ip-per-minute", Default: "6000", Help: "POST /v1/connect requests per source IP per minute (abuse guard)", num: &c.ConnectPerIPPerMinute},
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
	if c.MediaURL != "" && !strings.HasPrefix(c.MediaURL, "ws://") && !strings.HasPrefix(c.MediaURL, "wss://") {
		return fmt.Errorf("--media-url=%q: want a ws:// or wss:// address", c.MediaURL)
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
