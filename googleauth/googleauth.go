package googleauth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

const (
	// googleIssuer is used when Config.Issuer is empty.
	googleIssuer = "https://accounts.google.com"

	// defaultHTTPTimeout bounds every request to the provider when the
	// caller gives no client, so a hung provider cannot hold a sign-in (or
	// the discovery mutex) forever.
	defaultHTTPTimeout = 10 * time.Second

	// minStateLen keeps the state, from which the nonce and PKCE verifier
	// are derived, long enough to be unguessable when drawn at random
	// (16 base64url chars carry 96 bits).
	minStateLen = 16
	// maxStateLen keeps the state, echoed in URLs and cookies, well under
	// common URL and header limits.
	maxStateLen = 512

	// The labels keep the nonce and the PKCE verifier independent: the
	// nonce travels in the ID token and the authorization URL, and must
	// tell nothing about the verifier. The NUL separator cannot occur in a
	// valid state, so label and state cannot run into each other.
	nonceLabel = "nonce\x00"
	pkceLabel  = "pkce\x00"
)

// Error classes. Every error returned by AuthURL and Exchange wraps exactly
// one of them.
var (
	// ErrInvalidState means the state is not a valid state (see ValidState).
	ErrInvalidState = errors.New("googleauth: invalid state")
	// ErrRejected means the provider or its ID token refused the sign-in:
	// a bad or reused code, a token endpoint 4xx, a missing or invalid ID
	// token (signature, audience, issuer, expiry, nonce), or no email.
	// Trying again with the same input will not help.
	ErrRejected = errors.New("googleauth: sign-in rejected")
	// ErrUnavailable means the provider could not be asked or gave no
	// usable answer: network failure, failed discovery, 5xx. Trying again
	// later may help.
	ErrUnavailable = errors.New("googleauth: provider unavailable")
)

// scopes are what the dashboard needs: openid for the ID token, email to
// know who signed in, profile for a display name.
var scopes = []string{oidc.ScopeOpenID, "email", "profile"}

// Config configures the provider. Issuer defaults to
// https://accounts.google.com when empty.
type Config struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	RedirectURL  string   // the dashboard's callback page, registered with the provider
	StateKey     [32]byte // secret used to derive nonce and PKCE verifier from the caller's state
	// HTTPClient is used for every request to the provider; nil means a
	// client with a bounded timeout.
	HTTPClient *http.Client
	// Now is the clock used for ID-token expiry checks; nil means time.Now.
	Now func() time.Time
}

// Identity is who signed in, as stated by a verified ID token.
type Identity struct {
	Subject       string // the provider's stable user id ("sub")
	Email         string // lowercased
	EmailVerified bool
	Name          string // display name; may be empty
}

// Provider signs users in with one OpenID Connect provider. It is safe for
// concurrent use.
type Provider struct {
	issuer       string
	clientID     string
	clientSecret string
	redirectURL  string
	stateKey     [32]byte
	client       *http.Client
	now          func() time.Time

	// mu guards disc. It is held during discovery so that concurrent first
	// sign-ins make one discovery request, not a burst of them.
	mu   sync.Mutex
	disc *discovery // nil until discovery has succeeded once
}

// discovery is what the provider's discovery document tells us. It is
// immutable once built, so it is used without holding Provider.mu.
type discovery struct {
	oauth        oauth2.Config
	keys         oidc.KeySet // caches the provider's signing keys
	verifyConfig oidc.Config
}

// New checks cfg and returns a Provider. It does not contact the provider:
// discovery waits for the first AuthURL or Exchange.
func New(cfg Config) (*Provider, error) {
	issuer := cfg.Issuer
	if issuer == "" {
		issuer = googleIssuer
	}
	if err := checkHTTPURL(issuer); err != nil {
		return nil, fmt.Errorf("googleauth: Issuer: %w", err)
	}
	if cfg.ClientID == "" {
		return nil, errors.New("googleauth: ClientID is required")
	}
	if cfg.ClientSecret == "" {
		return nil, errors.New("googleauth: ClientSecret is required")
	}
	if cfg.RedirectURL == "" {
		return nil, errors.New("googleauth: RedirectURL is required")
	}
	if err := checkHTTPURL(cfg.RedirectURL); err != nil {
		return nil, fmt.Errorf("googleauth: RedirectURL: %w", err)
	}
	// An all-zero key is almost surely a key that was never loaded; with it
	// anyone who sees a state could compute its PKCE verifier.
	if cfg.StateKey == ([32]byte{}) {
		return nil, errors.New("googleauth: StateKey is required")
	}

	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: defaultHTTPTimeout}
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Provider{
		issuer:       issuer,
		clientID:     cfg.ClientID,
		clientSecret: cfg.ClientSecret,
		redirectURL:  cfg.RedirectURL,
		stateKey:     cfg.StateKey,
		client:       client,
		now:          now,
	}, nil
}

// checkHTTPURL accepts only absolute http or https URLs with a host.
func checkHTTPURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an absolute http(s) URL", raw)
	}
	return nil
}

// ValidState reports whether state can be used with AuthURL and Exchange:
// 16 to 512 characters, each an RFC 3986 unreserved character
// [A-Za-z0-9._~-], so it needs no escaping in URLs or cookies.
func ValidState(state string) bool {
	if len(state) < minStateLen || len(state) > maxStateLen {
		return false
	}
	for i := 0; i < len(state); i++ {
		c := state[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '_', c == '~', c == '-':
		default:
			return false
		}
	}
	return true
}

func invalidState() error {
	return fmt.Errorf("%w: want %d to %d characters of [A-Za-z0-9._~-]",
		ErrInvalidState, minStateLen, maxStateLen)
}

// AuthURL returns the provider URL to send the browser to for state. The
// URL carries state, the nonce and the S256 PKCE challenge derived from it.
func (p *Provider) AuthURL(ctx context.Context, state string) (string, error) {
	if !ValidState(state) {
		return "", invalidState()
	}
	d, err := p.discover(ctx)
	if err != nil {
		return "", err
	}
	return d.oauth.AuthCodeURL(state,
		oidc.Nonce(p.derive(nonceLabel, state)),
		oauth2.S256ChallengeOption(p.derive(pkceLabel, state)),
	), nil
}

// Exchange redeems code, which the provider sent back to the callback, and
// returns the verified identity. state must be the state the login was
// started with, as bound to the browser: the PKCE verifier and the expected
// nonce are re-derived from it, so a code obtained for another state is
// refused.
func (p *Provider) Exchange(ctx context.Context, code, state string) (Identity, error) {
	if !ValidState(state) {
		return Identity{}, invalidState()
	}
	if code == "" {
		return Identity{}, fmt.Errorf("%w: no authorization code", ErrRejected)
	}
	d, err := p.discover(ctx)
	if err != nil {
		return Identity{}, err
	}
	ctx = oidc.ClientContext(ctx, p.client)

	tok, err := d.oauth.Exchange(ctx, code, oauth2.VerifierOption(p.derive(pkceLabel, state)))
	if err != nil {
		return Identity{}, classifyTokenError(err)
	}
	rawIDToken, ok := tok.Extra("id_token").(string)
	if !ok || rawIDToken == "" {
		return Identity{}, fmt.Errorf("%w: token response has no id_token", ErrRejected)
	}

	// The verifier is built per call only to get a fresh keyFetchRecorder;
	// the key set behind it, and its cache, are shared.
	keys := &keyFetchRecorder{inner: d.keys}
	idToken, err := oidc.NewVerifier(p.issuer, keys, &d.verifyConfig).Verify(ctx, rawIDToken)
	if err != nil {
		if keys.fetchErr != nil {
			return Identity{}, fmt.Errorf("%w: fetching signing keys: %w", ErrUnavailable, keys.fetchErr)
		}
		return Identity{}, fmt.Errorf("%w: ID token: %w", ErrRejected, err)
	}
	// go-oidc does not check the nonce; this is what ties the ID token to
	// the browser's state. Constant time, as the nonce is a MAC.
	wantNonce := p.derive(nonceLabel, state)
	if subtle.ConstantTimeCompare([]byte(idToken.Nonce), []byte(wantNonce)) != 1 {
		return Identity{}, fmt.Errorf("%w: ID token nonce does not match the state", ErrRejected)
	}

	var c idClaims
	if err := idToken.Claims(&c); err != nil {
		return Identity{}, fmt.Errorf("%w: decoding ID token claims: %w", ErrRejected, err)
	}
	return identityFromClaims(idToken.Subject, c)
}

// idClaims are the ID token claims Identity is built from.
type idClaims struct {
	Email string `json:"email"`
	// EmailVerified is any because Google has sent it both as a JSON
	// boolean and as the string "true".
	EmailVerified any    `json:"email_verified"`
	Name          string `json:"name"`
}

func identityFromClaims(subject string, c idClaims) (Identity, error) {
	if subject == "" {
		return Identity{}, fmt.Errorf("%w: ID token has no subject", ErrRejected)
	}
	// Email is how the dashboard finds the account, and addresses compare
	// case-insensitively in practice.
	email := strings.ToLower(c.Email)
	if email == "" {
		return Identity{}, fmt.Errorf("%w: ID token has no email", ErrRejected)
	}
	verified := false
	switch v := c.EmailVerified.(type) {
	case bool:
		verified = v
	case string:
		verified = v == "true"
	}
	return Identity{Subject: subject, Email: email, EmailVerified: verified, Name: c.Name}, nil
}

// classifyTokenError sorts a failed code exchange into ErrRejected or
// ErrUnavailable.
func classifyTokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		// The RetrieveError itself is not wrapped: its message carries the
		// provider's error_description or raw body, which may echo the code.
		if status >= http.StatusInternalServerError {
			return fmt.Errorf("%w: token endpoint answered HTTP %d", ErrUnavailable, status)
		}
		return fmt.Errorf("%w: token endpoint answered HTTP %d %q", ErrRejected, status, re.ErrorCode)
	}
	// Everything else is no answer at all (refused connection, timeout,
	// cancelled request) or an answer we could not read (a 2xx body that
	// is not a token response): the provider did not say no, so it is
	// worth trying again later. These messages hold at most the token
	// endpoint's URL; the code travels in the request body.
	return fmt.Errorf("%w: token request: %w", ErrUnavailable, err)
}

// discover returns the provider's endpoints and keys, fetching the
// discovery document on first use. Failures are not cached, so a provider
// that was down is retried on the next call.
func (p *Provider) discover(ctx context.Context) (*discovery, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.disc != nil {
		return p.disc, nil
	}

	op, err := oidc.NewProvider(oidc.ClientContext(ctx, p.client), p.issuer)
	if err != nil {
		return nil, fmt.Errorf("%w: discovering %s: %w", ErrUnavailable, p.issuer, err)
	}
	var meta struct {
		JWKSURL string `json:"jwks_uri"`
	}
	if err := op.Claims(&meta); err != nil || meta.JWKSURL == "" {
		return nil, fmt.Errorf("%w: discovery document of %s has no jwks_uri", ErrUnavailable, p.issuer)
	}

	endpoint := op.Endpoint()
	// Send client_id and client_secret in the form body (client_secret_post,
	// which Google supports) instead of letting oauth2 probe: the probe can
	// send the code twice and muddles which answer is classified.
	endpoint.AuthStyle = oauth2.AuthStyleInParams

	p.disc = &discovery{
		oauth: oauth2.Config{
			ClientID:     p.clientID,
			ClientSecret: p.clientSecret,
			Endpoint:     endpoint,
			RedirectURL:  p.redirectURL,
			Scopes:       scopes,
		},
		// The key set outlives the request that discovered it, so it gets
		// a background context that carries only the HTTP client.
		keys: oidc.NewRemoteKeySet(oidc.ClientContext(context.Background(), p.client), meta.JWKSURL),
		verifyConfig: oidc.Config{
			ClientID: p.clientID,
			// Google signs ID tokens with RS256; accepting nothing else
			// rules out algorithm confusion.
			SupportedSigningAlgs: []string{oidc.RS256},
			Now:                  p.now,
		},
	}
	return p.disc, nil
}

// keyFetchRecorder wraps the shared key set for one verification and
// remembers whether fetching the provider's keys failed. go-oidc flattens
// key-set errors into text, which would make a key-endpoint outage look
// like a bad signature (ErrRejected) instead of ErrUnavailable.
type keyFetchRecorder struct {
	inner    oidc.KeySet
	fetchErr error
}

func (k *keyFetchRecorder) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	payload, err := k.inner.VerifySignature(ctx, jwt)
	// oidc.RemoteKeySet wraps a cause (with %w) only when fetching the key
	// set failed (network, non-200, undecodable body, cancelled); a token
	// that no key verifies comes back as a bare error. The tests pin this.
	if err != nil && errors.Unwrap(err) != nil {
		k.fetchErr = err
	}
	return payload, err
}

// derive returns base64url(HMAC-SHA256(StateKey, label || state)) without
// padding: 43 characters, the length RFC 7636 recommends for a verifier.
func (p *Provider) derive(label, state string) string {
	mac := hmac.New(sha256.New, p.stateKey[:])
	mac.Write([]byte(label))
	mac.Write([]byte(state))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}
