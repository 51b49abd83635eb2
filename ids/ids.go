// Package ids owns the format of identifiers: a public type prefix (room_,
// part_, cs_, key_, evt_, prj_, req_, ...) followed by 24 characters of
// lowercase base32 from 120 random bits. Identifiers are opaque to callers.
package ids

import (
	"crypto/rand"
	"encoding/base32"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
)

// Public identifier prefixes.
const (
	Room           = "room_"
	Participant    = "part_"
	ConnectSession = "cs_"
	APIKey         = "key_"
	Event          = "evt_"
	Project        = "prj_"
	Request        = "req_"
	Account        = "acct_"
	Audit          = "aud_"
	Ledger         = "led_"
	Payment        = "pay_"
	Charge         = "chg_"
	Endpoint       = "we_"
	Delivery       = "wdl_"
	User           = "usr_"
	Invitation     = "inv_"
)

// randomBytes is the entropy of an id; 15 bytes encode to 24 base32 chars.
const randomBytes = 15

// RandomChars is the length of the random part of an id.
const RandomChars = randomBytes * 8 / 5

var encoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// generators hands out ChaCha8 generators, each seeded from crypto/rand.
// ChaCha8 is a cryptographically strong generator, so ids stay
// unpredictable, but drawing from it costs no system call: a connect makes
// two ids, and reading crypto/rand for each was 12% of the connect path's
// CPU (docs/performance.md). A generator is used by one goroutine at a time.
var generators = sync.Pool{New: func() any {
	var seed [32]byte
	_, _ = rand.Read(seed[:]) // crypto/rand.Read never fails on supported platforms
	return mrand.NewChaCha8(seed)
}}

// New returns a fresh id with prefix.
func New(prefix string) string {
	var b [randomBytes]byte
	if s := seeded.Load(); s != nil {
		s.read(b[:])
	} else {
		g := generators.Get().(*mrand.ChaCha8)
		_, _ = g.Read(b[:]) // never fails
		generators.Put(g)
	}
	buf := make([]byte, len(prefix)+RandomChars)
	copy(buf, prefix)
	encoding.Encode(buf[len(prefix):], b[:])
	return string(buf)
}

// seeded, when set, is the one generator every id comes from (Seed).
var seeded atomic.Pointer[seededSource]

// seededSource is a generator seeded by a test, shared by every goroutine
// (a mutex: only tests draw from it).
type seededSource struct {
	mu sync.Mutex
	g  *mrand.ChaCha8
}

func (s *seededSource) read(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.g.Read(b) // never fails
}

// Seed makes every id from now on a function of seed and of the order ids
// are drawn in, until restore is called. It is for tests that must replay
// a run exactly (the crash simulation, package sim: the same seed gives the
// same ids, so the same trace); ids stay well-formed but are predictable, so
// nothing outside a test may call it.
func Seed(seed uint64) (restore func()) {
	var key [32]byte
	for i := 0; i < 8; i++ {
		key[i] = byte(seed >> (8 * i))
	}
	old := seeded.Swap(&seededSource{g: mrand.NewChaCha8(key)})
	return func() { seeded.Store(old) }
}

// Valid reports whether s looks like an id with prefix: the prefix, then
// exactly RandomChars characters of the id alphabet. It lets handlers reject
// garbage path parameters before asking any actor.
func Valid(s, prefix string) bool {
	if len(s) != len(prefix)+RandomChars || !strings.HasPrefix(s, prefix) {
		return false
	}
	for i := len(prefix); i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}
