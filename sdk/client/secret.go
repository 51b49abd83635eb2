package client

import (
	"fmt"
	"io"
	"log/slog"
)

// redacted is what a token prints as.
const redacted = "[redacted]"

// secret holds a token (the participant token, a media token). It never
// prints: fmt's verbs and slog show "[redacted]". The Session keeps it
// behind a pointer, so that even fmt printing a dereferenced Session (which
// cannot call the methods of unexported fields) shows an address, never the
// token.
type secret string

func newSecret(v string) *secret { s := secret(v); return &s }

// reveal returns the token ("" for nil).
func (p *secret) reveal() string {
	if p == nil {
		return ""
	}
	return string(*p)
}

func (secret) String() string             { return redacted }
func (secret) GoString() string           { return `"` + redacted + `"` }
func (secret) LogValue() slog.Value       { return slog.StringValue(redacted) }
func (secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, redacted) }
