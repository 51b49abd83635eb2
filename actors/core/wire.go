package core

import (
	"time"

	"github.com/goccy/go-json"
)

// timeLayout renders timestamps as ISO 8601 UTC with millisecond precision.
const timeLayout = "2006-01-02T15:04:05.000Z"

// Timestamp renders t for the wire.
func Timestamp(t time.Time) string { return t.UTC().Format(timeLayout) }

// OptionalTimestamp renders t, or null for the zero time.
func OptionalTimestamp(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := Timestamp(t)
	return &s
}

// OptionalString is s, or null for "".
func OptionalString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// AuditEntry is one audit log entry (GET /v1/audit-logs).
type AuditEntry struct {
	Object    string         `json:"object"`
	ID        string         `json:"id"`
	Action    string         `json:"action"`
	Actor     Actor          `json:"actor"`
	Target    AuditTarget    `json:"target"`
	RequestID *string        `json:"request_id"`
	SourceIP  *string        `json:"source_ip"`
	CreatedAt string         `json:"created_at"`
	Details   map[string]any `json:"details"`
}

// AuditTarget is the object an audited operation acted on.
type AuditTarget struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// MustJSON encodes a view. Views are plain structs of strings, numbers and
// raw JSON that was validated on the way in, so an error is a bug.
func MustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("core: encoding a view failed: " + err.Error())
	}
	return b
}

// Encode encodes an event or a state for the journal and snapshots; an
// error is a bug (they are plain structs).
func Encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("core: encoding state failed: " + err.Error())
	}
	return b
}

// LedgerAmountDecimals shows ledger amounts with the price's precision, so a
// per-second usage charge is never rounded on display.
const LedgerAmountDecimals = 6
