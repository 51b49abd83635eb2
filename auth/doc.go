// Package auth owns rtcd's credential formats: API key secrets, participant
// tokens and media tokens.
//
// Every credential here is verified with CPU only. Nothing in this package
// touches a database, the network or the clock (callers pass "now" in), so a
// verification costs a few microseconds and can run on any node that holds
// the right key, including a standalone media node that only has the media
// token key.
//
// All keys are derived from one master secret with DeriveKeys, so a single
// secret is provisioned per deployment and each credential kind still gets its
// own key: a leak or a bug in one kind cannot be used to forge another.
//
// Formats (all versioned so they can be changed later without ambiguity):
//
//	API key secret:    sk_live_<32 random base62><6 base62 CRC32 of the random part>
//	Participant token: rtc_pt_<base64url payload>.<base64url HMAC-SHA256>
//	Media token:       rtc_mt_<base64url payload>.<base64url HMAC-SHA256>
//
// See token.go for the binary payload layout.
package auth
