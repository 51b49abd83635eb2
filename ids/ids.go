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
	g := generators.Get().(*mrand.ChaCha8)
	_, _ = g.Read(b[:]) // never fails
	generators.Put(g)
	buf := make([]byte, len(prefix)+RandomChars)
	copy(buf, prefix)
	encoding.Encode(buf[len(prefix):], b[:])
	return string(buf)
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
