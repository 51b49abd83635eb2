package media

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"

	"rtcd/auth"
)

// ReportsPath is where an HTTPReporter POSTs reports on the control plane.
const ReportsPath = "/internal/media/reports"

// Report types, the "type" of a Report.
const (
	ReportJoined   = "joined"
	ReportLeft     = "left"
	ReportPresence = "presence"
)

// maxPresenceSessionBytes bounds one SessionInfo in JSON: four ids of at
// most auth.MaxIDLength bytes, each escaped at worst six bytes per byte
// (\u00XX), plus keys, punctuation and two timestamps.
const maxPresenceSessionBytes = 4*6*auth.MaxIDLength + 192

// MaxReportBodyBytes bounds one report body. The largest is a presence
// report of a full node (every socket joined or waiting for admission);
// the control plane should refuse bodies above it.
const MaxReportBodyBytes = 40 << 20

// Compile-time check that a presence report of maxConnectionsLimit
// sessions (plus 64 KiB for its envelope) fits in MaxReportBodyBytes; if
// not, the array length is negative and the build fails.
var _ [MaxReportBodyBytes - maxConnectionsLimit*maxPresenceSessionBytes - 64<<10]struct{}

// Report is the body of a POST to ReportsPath: a type and the one report
// of that type.
type Report struct {
	Type     string          `json:"type"`
	Joined   *JoinReport     `json:"joined,omitempty"`
	Left     *LeaveReport    `json:"left,omitempty"`
	Presence *PresenceReport `json:"presence,omitempty"`
}

// ErrBadReport is returned by DecodeReport for a body that is not exactly
// one well-formed report.
var ErrBadReport = errors.New("media: malformed report")

// DecodeReport parses a report body the control plane received (after
// VerifyReport accepted it). Unknown fields, a type without its report, a
// report of another type, and trailing data are all refused.
func DecodeReport(body []byte) (Report, error) {
	var r Report
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Report{}, ErrBadReport
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Report{}, ErrBadReport
	}
	ok := false
	switch r.Type {
	case ReportJoined:
		ok = r.Joined != nil && r.Left == nil && r.Presence == nil
	case ReportLeft:
		ok = r.Left != nil && r.Joined == nil && r.Presence == nil && r.Left.Reason != ""
	case ReportPresence:
		ok = r.Presence != nil && r.Joined == nil && r.Left == nil
	}
	if !ok {
		return Report{}, ErrBadReport
	}
	return r, nil
}

// HTTPReporter is a Reporter (and PresenceReporter) that POSTs each report
// as a signed Report to BaseURL+ReportsPath. Calls never block: reports are
// queued (bounded) and sent in order by one goroutine, each retried with
// backoff on network errors, 429 and 5xx, and dropped (counted) when the
// queue is full or the retries run out. The control plane must answer 2xx
// once a report is accepted, and must treat reports idempotently: a retry
// after a lost response repeats one.
type HTTPReporter struct {
	s *signedSender
}

// NewHTTPReporter starts an HTTPReporter; cfg.BaseURL is the control plane's
// origin. Call Close to flush and stop it.
func NewHTTPReporter(cfg HTTPConfig) (*HTTPReporter, error) {
	s, err := newSignedSender(cfg)
	if err != nil {
		return nil, err
	}
	return &HTTPReporter{s: s}, nil
}

// Joined queues a join report.
func (r *HTTPReporter) Joined(j JoinReport) {
	r.s.enqueue(ReportsPath, ReportJoined, Report{Type: ReportJoined, Joined: &j})
}

// Left queues a leave report.
func (r *HTTPReporter) Left(l LeaveReport) {
	r.s.enqueue(ReportsPath, ReportLeft, Report{Type: ReportLeft, Left: &l})
}

// Presence queues a presence report.
func (r *HTTPReporter) Presence(p PresenceReport) {
	r.s.enqueue(ReportsPath, ReportPresence, Report{Type: ReportPresence, Presence: &p})
}

// Dropped returns how many reports were given up on.
func (r *HTTPReporter) Dropped() int64 { return r.s.dropped.Load() }

// Close stops taking reports and sends the queued ones, giving up on the
// rest when ctx is done (then it returns ctx's error).
func (r *HTTPReporter) Close(ctx context.Context) error { return r.s.close(ctx) }
