package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"net"
	"time"

	"github.com/valyala/fasthttp"
	"rtcd/actors"
	"rtcd/auth"
	"rtcd/clock"
	"rtcd/media"
	"rtcd/metrics"
)

// reportSigningLabel derives the key that signs media node <-> control
// plane requests from the media token key, so a node provisioned with the
// one media key can both verify tokens and sign its reports.
const reportSigningLabel = "rtcd/media-reports/v1"

// MediaReportKey is the signing key of reports and control commands.
func MediaReportKey(mediaKey [32]byte) [32]byte {
	mac := hmac.New(sha256.New, mediaKey[:])
	mac.Write([]byte(reportSigningLabel))
	var out [32]byte
	mac.Sum(out[:0])
	return out
}

// engineReporter turns a media node's reports into engine calls.
type engineReporter struct{ e *actors.Engine }

func (r engineReporter) Joined(j media.JoinReport) {
	r.e.MediaJoined(actors.MediaJoin{SessionID: j.SessionID, ProjectID: j.ProjectID, RoomID: j.RoomID, ParticipantID: j.ParticipantID,
		IssuedAt: j.IssuedAt, At: j.At, NodeID: j.NodeID})
}

func (r engineReporter) Left(l media.LeaveReport) {
	r.e.MediaLeft(actors.MediaLeave{SessionID: l.SessionID, ProjectID: l.ProjectID, RoomID: l.RoomID, ParticipantID: l.ParticipantID, At: l.At, Reason: l.Reason})
}

// sessionJoin is a presence report's session as the engine takes it.
func sessionJoin(s media.SessionInfo) actors.MediaJoin {
	return actors.MediaJoin{SessionID: s.SessionID, ProjectID: s.ProjectID, RoomID: s.RoomID, ParticipantID: s.ParticipantID,
		IssuedAt: s.IssuedAt, At: s.JoinedAt}
}

func (r engineReporter) Presence(p media.PresenceReport) {
	joins := func(in []media.SessionInfo) []actors.MediaJoin {
		out := make([]actors.MediaJoin, 0, len(in))
		for _, s := range in {
			out = append(out, sessionJoin(s))
		}
		return out
	}
	r.e.MediaPresence(actors.MediaPresence{NodeID: p.NodeID, At: p.At, Sessions: joins(p.Sessions), Pending: joins(p.Pending)})
}

// embeddedMedia is the reference media node `rtcd serve` runs in process.
type embeddedMedia struct {
	node     *media.Node
	reporter *media.AsyncReporter
	ln       net.Listener
	cancel   context.CancelFunc
	served   chan error
}

// startEmbeddedMedia runs the node on ln (listened on before the engine
// was created, so the media URL could name its real address).
// Its WebRTC sockets follow net (see media.OpenWebRTC); a listener asked
// for on port 0 gets ephemeral media ports.
func startEmbeddedMedia(ln net.Listener, ephemeral bool, netOpts media.NetworkOptions, engine *actors.Engine, keys auth.Keys, clk clock.Clock, counts *metrics.Media) (*embeddedMedia, error) {
	webrtc, err := media.OpenWebRTC(netOpts, ln.Addr(), ephemeral)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	reporter := media.NewAsyncReporter(engineReporter{engine}, counts)
	// The node serves a join once the room recorded it (the join is the
	// point of record; the connect only reserved).
	node, err := media.NewNode(media.NodeConfig{NodeID: "embedded", Verifier: keys.MediaVerifier(), Clock: clk, Reporter: reporter, WebRTC: webrtc, Metrics: counts,
		AwaitAdmission: true})
	if err != nil {
		_ = ln.Close()
		media.CloseWebRTC(webrtc)
		reporter.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &embeddedMedia{node: node, reporter: reporter, ln: ln, cancel: cancel, served: make(chan error, 1)}
	go func() { m.served <- node.Serve(ctx, ln, nil) }()
	engine.SetMedia(node)
	return m, nil
}

// stop closes the node (every client is told and its leave reported) and
// delivers the last reports to the engine before it stops.
func (m *embeddedMedia) stop() {
	m.cancel()
	<-m.served
	m.reporter.Close()
}

// reportReceiver takes a standalone node's reports: engineReporter, or on
// a cluster node clusterReporter.
type reportReceiver interface {
	media.Reporter
	media.PresenceReporter
}

// mediaReportsHandler receives a standalone node's signed reports on the
// private listener (media.ReportsPath).
func mediaReportsHandler(rep reportReceiver, key [32]byte, clk clock.Clock) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if !ctx.IsPost() {
			ctx.SetStatusCode(405)
			return
		}
		body := ctx.PostBody()
		if media.VerifyReport(key, string(ctx.Request.Header.Peek(media.HeaderTimestamp)),
			string(ctx.Request.Header.Peek(media.HeaderSignature)), body, clk.Now(),
			media.DefaultSignatureToleranceSeconds*time.Second) != nil {
			ctx.SetStatusCode(401)
			return
		}
		r, err := media.DecodeReport(body)
		if err != nil {
			ctx.SetStatusCode(400)
			return
		}
		switch {
		case r.Joined != nil:
			rep.Joined(*r.Joined)
		case r.Left != nil:
			rep.Left(*r.Left)
		case r.Presence != nil:
			rep.Presence(*r.Presence)
		}
		ctx.SetStatusCode(204)
	}
}
