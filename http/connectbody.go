package http

import (
	"unicode/utf8"

	"rtcd/actors"
	"rtcd/apierr"
)

// The body of POST /v1/connect is read in one pass over its bytes, with no
// reflection and no second decode: the connect path is the API's hot path
// (issue 15). The pass accepts only bodies it reads completely, each of
// which the strict check (strictjson) and the decoder would accept with the
// same result: one object with at most the keys token and sdk, sdk an
// object with at most name, version and platform, every value a string
// without escapes (plain printable ASCII or valid UTF-8) or null, each key
// once. Anything else (a refusal, or a body it does not read: escapes,
// numbers, other keys, another shape) goes through the generic strict
// decoding, so every refusal keeps its exact answer: duplicate and unknown
// keys, invalid UTF-8, wrong types, trailing data, depth. The two are
// compared on a corpus and under fuzzing (connectbody_test.go).

// decodeConnect decodes the connect body raw, declared as contentType, into
// p. The declared type is checked first, as for every body (checkBodyType).
func decodeConnect(raw, contentType []byte, p *actors.ConnectParams) *apierr.Error {
	if err := checkBodyType(raw, contentType); err != nil {
		return err
	}
	if readConnect(raw, p) {
		return nil
	}
	*p = actors.ConnectParams{}
	return decodeBody(raw, p, false)
}

// connectReader is one pass over a connect body.
type connectReader struct {
	b   []byte
	pos int
}

// readConnect reads raw into p and reports whether it read all of it (p is
// then exactly what the strict decoding gives); false means the generic
// decoding must decide.
func readConnect(raw []byte, p *actors.ConnectParams) bool {
	r := connectReader{b: raw}
	r.space()
	if !r.byte('{') {
		return false
	}
	var seenToken, seenSDK bool
	ok := r.members(func(key []byte) bool {
		switch string(key) {
		case "token":
			if seenToken {
				return false
			}
			seenToken = true
			s, null, ok := r.stringOrNull()
			if ok && !null {
				p.Token = &s
			}
			return ok
		case "sdk":
			if seenSDK {
				return false
			}
			seenSDK = true
			return r.sdk(p)
		}
		return false
	})
	if !ok {
		return false
	}
	r.space()
	return r.pos == len(r.b)
}

// sdk reads the sdk value: null or an object of its three strings.
func (r *connectReader) sdk(p *actors.ConnectParams) bool {
	r.space()
	if r.literalNull() {
		return true
	}
	if !r.byte('{') {
		return false
	}
	var sdk actors.SDKParams
	var seen [3]bool
	ok := r.members(func(key []byte) bool {
		var field *string
		var i int
		switch string(key) {
		case "name":
			field, i = &sdk.Name, 0
		case "version":
			field, i = &sdk.Version, 1
		case "platform":
			field, i = &sdk.Platform, 2
		default:
			return false
		}
		if seen[i] {
			return false
		}
		seen[i] = true
		s, null, ok := r.stringOrNull()
		if ok && !null {
			*field = s
		}
		return ok
	})
	if ok {
		p.SDK = &sdk
	}
	return ok
}

// members reads an object's members after its '{', up to and including
// its '}', calling value for each key (plain, without escapes) with the
// reader before the key's value.
func (r *connectReader) members(value func(key []byte) bool) bool {
	r.space()
	if r.byte('}') {
		return true
	}
	for {
		r.space()
		key, ok := r.plainString()
		if !ok {
			return false
		}
		r.space()
		if !r.byte(':') || !value(key) {
			return false
		}
		r.space()
		if r.byte('}') {
			return true
		}
		if !r.byte(',') {
			return false
		}
	}
}

// stringOrNull reads a string value without escapes, or null.
func (r *connectReader) stringOrNull() (s string, null, ok bool) {
	r.space()
	if r.literalNull() {
		return "", true, true
	}
	raw, ok := r.plainString()
	if !ok {
		return "", false, false
	}
	return string(raw), false, true
}

// plainString reads a string at r.pos whose content has no escape and no
// control character and is valid UTF-8, and returns its content.
func (r *connectReader) plainString() ([]byte, bool) {
	if !r.byte('"') {
		return nil, false
	}
	start := r.pos
	for r.pos < len(r.b) {
		c := r.b[r.pos]
		switch {
		case c == '"':
			s := r.b[start:r.pos]
			r.pos++
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c < utf8.RuneSelf:
			r.pos++
		default:
			rn, size := utf8.DecodeRune(r.b[r.pos:])
			if rn == utf8.RuneError && size <= 1 {
				return nil, false
			}
			r.pos += size
		}
	}
	return nil, false
}

func (r *connectReader) literalNull() bool {
	if len(r.b)-r.pos >= 4 && string(r.b[r.pos:r.pos+4]) == "null" {
		r.pos += 4
		return true
	}
	return false
}

// byte consumes c if it is next.
func (r *connectReader) byte(c byte) bool {
	if r.pos < len(r.b) && r.b[r.pos] == c {
		r.pos++
		return true
	}
	return false
}

func (r *connectReader) space() {
	for r.pos < len(r.b) {
		switch r.b[r.pos] {
		case ' ', '\t', '\r', '\n':
			r.pos++
		default:
			return
		}
	}
}
