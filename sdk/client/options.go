package client

import (
	"log/slog"
	"net/http"
	"runtime"

	"github.com/gorilla/websocket"
)

// Option configures Connect.
type Option func(*config)

type config struct {
	httpClient *http.Client
	dialer     *websocket.Dialer
	clock      Clock
	logger     *slog.Logger
	reconnect  ReconnectPolicy
	platform   string
	handlers   []namedHandler
	media      Media       // nil: presence only (protocol 1)
	iceServers []ICEServer // added to the node's
}

type namedHandler struct {
	name string
	fn   func(Event)
}

func defaultConfig() config {
	return config{
		httpClient: http.DefaultClient,
		dialer:     websocket.DefaultDialer,
		clock:      systemClock{},
		logger:     slog.New(slog.DiscardHandler),
		reconnect:  DefaultReconnectPolicy(),
		platform:   "go/" + runtime.GOOS + "-" + runtime.GOARCH,
	}
}

// WithHTTPClient sets the HTTP client of the token exchange
// (POST /v1/connect). Default: http.DefaultClient. Its own Timeout, if any,
// applies on top of the 15-second connect deadline.
func WithHTTPClient(c *http.Client) Option {
	return func(cfg *config) {
		if c != nil {
			cfg.httpClient = c
		}
	}
}

// WithDialer sets the WebSocket dialer of the media connection. Default:
// websocket.DefaultDialer.
func WithDialer(d *websocket.Dialer) Option {
	return func(cfg *config) {
		if d != nil {
			cfg.dialer = d
		}
	}
}

// WithClock sets the clock of the connect deadline, reconnect backoff,
// heartbeats and media token expiry. Default: the system clock.
func WithClock(c Clock) Option {
	return func(cfg *config) {
		if c != nil {
			cfg.clock = c
		}
	}
}

// WithLogger sets the logger of the session's operational messages
// (states, reconnect attempts). Tokens are never logged. Default: none.
func WithLogger(l *slog.Logger) Option {
	return func(cfg *config) {
		if l != nil {
			cfg.logger = l
		}
	}
}

// WithReconnectPolicy sets how the session reconnects after a drop.
// Default: DefaultReconnectPolicy().
func WithReconnectPolicy(p ReconnectPolicy) Option {
	return func(cfg *config) { cfg.reconnect = p }
}

// WithPlatform sets sdk.platform of the connect request (at most 64 bytes).
// Default: "go/<GOOS>-<GOARCH>".
func WithPlatform(platform string) Option {
	return func(cfg *config) { cfg.platform = platform }
}

// WithHandler registers a handler before the session starts, so it sees
// every event from the first one (idle → connecting), including those of a
// Connect that fails. Session.On registers handlers afterwards. The event
// name must be one of EventNames (WithHandler panics otherwise, like On).
func WithHandler(event string, handler func(Event)) Option {
	mustKnowEvent(event)
	return func(cfg *config) { cfg.handlers = append(cfg.handlers, namedHandler{event, handler}) }
}

func mustKnowEvent(name string) {
	if !knownEvent(name) {
		panic("client: unknown event name " + `"` + name + `"` + " (see EventNames)")
	}
}
