package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"hash"
	"sync"
	"sync/atomic"
)

// MinMasterKeyLength is the shortest master secret DeriveKeys accepts. 32
// bytes matches the HMAC-SHA256 output size; anything shorter would make the
// master secret, not the algorithm, the weakest link.
const MinMasterKeyLength = 32

// Labels for key derivation. Each subkey is HMAC-SHA256(master, label), so
// distinct labels give independent keys. The "/v1" suffix lets a future
// format rotate one subkey without touching the others. Never change an
// existing label: every credential signed under it would stop verifying.
const (
	labelAPIKeyHash       = "rtcd/api-key-hash/v1"
	labelParticipantToken = "rtcd/participant-token/v1"
	labelMediaToken       = "rtcd/media-token/v1"
	labelIdempotency      = "rtcd/idempotency/v1"
	labelPaymentsSandbox  = "rtcd/payments-sandbox/v1"
	labelDashboardSecret  = "rtcd/dashboard-secret-hash/v1"
	labelGoogleState      = "rtcd/google-state/v1"
	labelClusterSecret    = "rtcd/cluster-secret/v1"
)

// ErrMasterKeyTooShort is returned by DeriveKeys when the master secret is
// shorter than MinMasterKeyLength.
var ErrMasterKeyTooShort = errors.New("auth: master key too short")

// Keys holds the per-purpose subkeys derived from the master secret.
//
// The zero Keys is not usable: build one with DeriveKeys. Token verification
// rejects everything under an all-zero key, so a forgotten initialisation
// fails closed instead of accepting tokens anyone could forge.
type Keys struct {
	apiKeyHash       [32]byte
	participantToken [32]byte
	mediaToken       [32]byte
	idempotency      [32]byte
	paymentsSandbox  [32]byte
	dashboardSecret  [32]byte
	googleState      [32]byte
	clusterSecret    [32]byte
}

// DeriveKeys derives all subkeys from master. master must be at least
// MinMasterKeyLength bytes of high-entropy secret material; DeriveKeys does
// not stretch passwords.
func DeriveKeys(master []byte) (Keys, error) {
	if len(master) < MinMasterKeyLength {
		return Keys{}, ErrMasterKeyTooShort
	}
	return Keys{
		apiKeyHash:       deriveSubkey(master, labelAPIKeyHash),
		participantToken: deriveSubkey(master, labelParticipantToken),
		mediaToken:       deriveSubkey(master, labelMediaToken),
		idempotency:      deriveSubkey(master, labelIdempotency),
		paymentsSandbox:  deriveSubkey(master, labelPaymentsSandbox),
		dashboardSecret:  deriveSubkey(master, labelDashboardSecret),
		googleState:      deriveSubkey(master, labelGoogleState),
		clusterSecret:    deriveSubkey(master, labelClusterSecret),
	}, nil
}

func deriveSubkey(master []byte, label string) [32]byte {
	return hmacSHA256(master, []byte(label))
}

// Idempotency returns the subkey used to key idempotency records.
func (k Keys) Idempotency() [32]byte { return k.idempotency }

// PaymentsSandbox returns the key the sandbox payment provider signs its
// checkout links and callbacks with.
func (k Keys) PaymentsSandbox() [32]byte { return k.paymentsSandbox }

// GoogleState returns the key the Google sign-in derives its nonce and PKCE
// verifier from the caller's state with.
func (k Keys) GoogleState() [32]byte { return k.googleState }

// ClusterSecret returns the secret the nodes of a cluster present to each
// other: every node holds the master secret (they verify each other's
// tokens), so none needs a second secret to be configured.
func (k Keys) ClusterSecret() [32]byte { return k.clusterSecret }

// MediaToken returns the media token subkey. It exists so the media node can
// be provisioned with only this key (see NewMediaVerifier) instead of the
// master secret, which would let it mint participant tokens too.
func (k Keys) MediaToken() [32]byte { return k.mediaToken }

// String redacts the keys so an accidental log line or %v cannot leak them.
func (Keys) String() string { return "auth.Keys{REDACTED}" }

// GoString redacts the keys for %#v as well.
func (Keys) GoString() string { return "auth.Keys{REDACTED}" }

// hmacSHA256 is the one place a MAC is computed, so every credential kind
// uses the same primitive. Keyed MAC states are reused from a pool per key:
// building one (hmac.New hashes the padded key twice and allocates two
// SHA-256 states) was a tenth of the connect path's CPU and a quarter of its
// allocations (docs/performance.md).
func hmacSHA256(key []byte, message []byte) [32]byte {
	var out [32]byte
	pool := macPool(key)
	if pool == nil {
		mac := hmac.New(sha256.New, key)
		mac.Write(message) // hash.Hash.Write never returns an error.
		mac.Sum(out[:0])
		return out
	}
	mac := pool.Get().(hash.Hash)
	mac.Reset() // back to the keyed state
	mac.Write(message)
	mac.Sum(out[:0])
	pool.Put(mac)
	return out
}

// maxPooledMACKeys bounds the keys that get a pool. A server has a handful
// of subkeys; tests that make many master keys fall back to hmac.New.
const maxPooledMACKeys = 64

var (
	macPools     sync.Map // string(key) -> *sync.Pool of keyed hash.Hash
	macPoolCount atomic.Int32
)

func macPool(key []byte) *sync.Pool {
	if p, ok := macPools.Load(string(key)); ok {
		return p.(*sync.Pool)
	}
	if macPoolCount.Add(1) > maxPooledMACKeys {
		macPoolCount.Add(-1)
		return nil
	}
	k := append([]byte(nil), key...)
	p, loaded := macPools.LoadOrStore(string(k), &sync.Pool{New: func() any { return hmac.New(sha256.New, k) }})
	if loaded {
		macPoolCount.Add(-1)
	}
	return p.(*sync.Pool)
}
