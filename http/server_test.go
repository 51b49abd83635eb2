package http

import (
	stdjson "encoding/json"
	"testing"

	"github.com/valyala/fasthttp"
	"rtcd/apierr"
	"rtcd/metrics"
)

// A panicking handler answers 500 in the envelope, frees its in-flight slot
// and is counted under 500, not under the 200 a response starts with.
func TestWrapPanic(t *testing.T) {
	m := metrics.New()
	s := &Server{metrics: m}
	h := s.wrap("/test/panic", noAuth, func(rc *reqCtx) {
		rc.ctx.Response.Header.Set("Idempotent-Replayed", "true")
		panic("boom")
	})
	for range 3 {
		ctx := new(fasthttp.RequestCtx)
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI("/test/panic")
		h(ctx)
		if got := s.inFlight.Load(); got != 0 {
			t.Fatalf("in flight after a panic: %d", got)
		}
		if ctx.Response.StatusCode() != 500 {
			t.Fatalf("status %d", ctx.Response.StatusCode())
		}
		var env errorEnvelope
		if err := stdjson.Unmarshal(ctx.Response.Body(), &env); err != nil || env.Error.Code != apierr.Internal {
			t.Fatalf("body %s: %v", ctx.Response.Body(), err)
		}
		if rid := string(ctx.Response.Header.Peek("X-Request-Id")); rid == "" || rid != env.Error.RequestID {
			t.Errorf("X-Request-Id %q, envelope %q", rid, env.Error.RequestID)
		}
		if len(ctx.Response.Header.Peek("Idempotent-Replayed")) != 0 {
			t.Error("headers set before the panic were sent")
		}
	}
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var counted float64
	for _, mf := range families {
		if mf.GetName() != "rtcd_http_requests_total" {
			continue
		}
		for _, metric := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] != "/test/panic" {
				continue
			}
			hasStatus := false
			for _, v := range labels {
				hasStatus = hasStatus || v == "500"
			}
			if !hasStatus {
				t.Errorf("panicking requests counted as %v", labels)
			}
			counted += metric.GetCounter().GetValue()
		}
	}
	if counted != 3 {
		t.Errorf("counted %v panicking requests, want 3", counted)
	}
}
