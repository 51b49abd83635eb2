package jsstore

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"
)

// Subjects. Every record of the store is the last message on its own
// subject of one stream (the stream keeps one message per subject), under
// <root>.k.; each journal's head (the fence) is under <root>.h.:
//
//	<root>.k.<token>.<token>...   a key: one token per '/'-separated segment
//	<root>.h.<token>.<token>...   the head of journal <actor>, same encoding
//
// A segment made only of [A-Za-z0-9_-] is its own token, so subjects stay
// readable to an operator (`RTCD.k.ri.prj_x.~ffff...`); any other segment,
// the empty one included, is '~' and its bytes in lowercase hex. '~' is not
// in the plain alphabet, so decoding is unambiguous, and no token holds a
// byte a subject forbids ('.', '*', '>', whitespace, controls).
//
// A prefix that ends with '/' is the subject filter <its tokens>.>. A scan
// of any other prefix filters on its segments before the last '/' and
// drops what does not start with the prefix. JetStream lists subjects in
// no useful order, so a scan sorts its keys bytewise itself: the encoding
// need not (and, since a '/' inside a binary part also splits, cannot)
// preserve key order.
const (
	keyToken  = "k"
	headToken = "h"
	hexMark   = '~'
)

func plainSegment(seg []byte) bool {
	if len(seg) == 0 {
		return false
	}
	for _, c := range seg {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// appendSegments appends the tokens of b's '/'-separated segments, each
// preceded by '.'.
func appendSegments(sb *strings.Builder, b []byte) {
	for {
		i := bytes.IndexByte(b, '/')
		seg := b
		if i >= 0 {
			seg = b[:i]
		}
		sb.WriteByte('.')
		if plainSegment(seg) {
			sb.Write(seg)
		} else {
			sb.WriteByte(hexMark)
			sb.WriteString(hex.EncodeToString(seg))
		}
		if i < 0 {
			return
		}
		b = b[i+1:]
	}
}

// keySubject is the subject of key under root.
func keySubject(root string, key []byte) string {
	var sb strings.Builder
	sb.Grow(len(root) + 3 + 2*len(key))
	sb.WriteString(root)
	sb.WriteString("." + keyToken)
	appendSegments(&sb, key)
	return sb.String()
}

// headSubject is the subject of actor's journal head under root.
func headSubject(root, actor string) string {
	var sb strings.Builder
	sb.WriteString(root)
	sb.WriteString("." + headToken)
	appendSegments(&sb, []byte(actor))
	return sb.String()
}

// scanFilter is the subject filter that holds every key with prefix
// (maybe more: the caller checks the prefix).
func scanFilter(root string, prefix []byte) string {
	last := -1
	for i, c := range prefix {
		if c == '/' {
			last = i
		}
	}
	if last < 0 {
		return root + "." + keyToken + ".>"
	}
	var sb strings.Builder
	sb.WriteString(root)
	sb.WriteString("." + keyToken)
	appendSegments(&sb, prefix[:last])
	sb.WriteString(".>")
	return sb.String()
}

// subjectKey decodes the key of a subject under root.
func subjectKey(root, subject string) ([]byte, error) {
	rest, ok := strings.CutPrefix(subject, root+"."+keyToken+".")
	if !ok {
		return nil, fmt.Errorf("jsstore: subject %q is not a key under %s", subject, root)
	}
	var key []byte
	for i, tok := range strings.Split(rest, ".") {
		if i > 0 {
			key = append(key, '/')
		}
		if len(tok) > 0 && tok[0] == hexMark {
			seg, err := hex.DecodeString(tok[1:])
			if err != nil {
				return nil, fmt.Errorf("jsstore: subject %q: token %q: %w", subject, tok, err)
			}
			key = append(key, seg...)
			continue
		}
		if !plainSegment([]byte(tok)) {
			return nil, fmt.Errorf("jsstore: subject %q: token %q is neither plain nor hex", subject, tok)
		}
		key = append(key, tok...)
	}
	return key, nil
}
