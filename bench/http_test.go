package bench

import (
	"net"
	"testing"

	"github.com/goccy/go-json"
	"github.com/valyala/fasthttp"
	api "rtcd/http"
)

// BenchmarkConnectHTTP is POST /v1/connect through the real API handler
// (rtcd/http, the one `rtcd serve` mounts) called in process, without a
// socket: request id, in-flight limit, strict JSON check and decoding,
// Engine.Connect as in BenchmarkConnect/reconnect, and the response written
// in the envelope. x_engine is the multiple of Engine.Connect alone on the
// same engine, measured after (so the HTTP layer's share is x_engine-1).
func BenchmarkConnectHTTP(b *testing.B) {
	f := newFixture(b)
	_, token := f.connectedParticipant(b)
	body, err := json.Marshal(map[string]any{
		"token": token,
		"sdk":   map[string]string{"name": "rtcd-js", "version": "1.4.2", "platform": "web"},
	})
	if err != nil {
		b.Fatal(err)
	}
	handler := api.New(f.e, nil, "bench", false, api.Payments{}).Handler()
	var req fasthttp.Request
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("/v1/connect")
	req.Header.SetContentType("application/json")
	req.SetBody(body)
	remote := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 40000}
	var ctx fasthttp.RequestCtx
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ctx.Init(&req, remote, nil)
		handler(&ctx)
		if code := ctx.Response.StatusCode(); code != fasthttp.StatusOK {
			b.Fatalf("status %d: %s", code, ctx.Response.Body())
		}
	}
	reportVsBaseline(b, "engine", func() error { return f.connect(token) })
}
