package http

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
	"rtcd/actors"
	"rtcd/apierr"
	"rtcd/strictjson"
)

// decode runs the strict check before decoding, on the real request types,
// and answers its refusals as a 400 invalid_request naming the field (the
// check itself is tested in package strictjson).
func TestDecodeStrict(t *testing.T) {
	deep := `{"metadata":` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `}`
	cases := []struct {
		body, field string
		target      func() any
	}{
		{`{"NAME":"x"}`, "NAME", nil},
		{"{\"name\":\"a\xffb\"}", "name", nil},
		{`{"name":"\ud800"}`, "name", nil},
		{`{"name":"a","name":"b"}`, "name", nil},
		{`{"metadata":{"n":1e400}}`, "metadata", nil},
		{deep, "metadata", nil},
		{`{"name":"a"} x`, "", nil},
		{"{\"\xff\":1}", "", nil},
		{`{"token":"x","sdk":{"extra":"y"}}`, "sdk.extra", func() any { return new(actors.ConnectParams) }},
		{`{"sdk":{"name":"a","name":"b"}}`, "sdk.name", func() any { return new(actors.ConnectParams) }},
		{`{"Scopes":[]}`, "Scopes", func() any { return new(actors.APIKeyParams) }},
		{`{"AMOUNT":"10.00"}`, "AMOUNT", func() any { return new(actors.TopupParams) }},
	}
	for _, c := range cases {
		ctx := new(fasthttp.RequestCtx)
		ctx.Request.SetBodyString(c.body)
		ctx.Request.Header.SetContentType("application/json")
		var target any = new(actors.RoomParams)
		if c.target != nil {
			target = c.target()
		}
		err := (&reqCtx{ctx: ctx}).decode(target, true)
		if err == nil {
			t.Errorf("%q accepted as %+v", c.body, target)
			continue
		}
		if err.Code != apierr.InvalidRequest || apierr.StatusOf(err) != 400 {
			t.Errorf("%q: %v, want a 400 invalid_request", c.body, err)
		}
		got, has := err.Details["field"].(string)
		if got != c.field || has != (c.field != "") {
			t.Errorf("%q: details.field %q (present %v), want %q (%v)", c.body, got, has, c.field, err)
		}
		if _, has := err.Details["max_depth"]; has != (c.body == deep) {
			t.Errorf("%q: details.max_depth present %v (%v)", c.body, has, err)
		}
	}
	if err := (&reqCtx{ctx: bodyCtx(deep)}).decode(new(actors.RoomParams), true); err.Details["max_depth"] != strictjson.MaxDepth {
		t.Errorf("details.max_depth %v, want %d", err.Details["max_depth"], strictjson.MaxDepth)
	}
	// A valid body still decodes, metadata byte for byte.
	var p actors.RoomParams
	if err := (&reqCtx{ctx: bodyCtx(`{"name":"ann","metadata":{"a":"\ud83d\ude00","n":1.10}}`)}).decode(&p, true); err != nil {
		t.Fatal(err)
	}
	if *p.Name != "ann" || string(p.Metadata) != `{"a":"\ud83d\ude00","n":1.10}` {
		t.Errorf("decoded %q %s", *p.Name, p.Metadata)
	}
}

func bodyCtx(body string) *fasthttp.RequestCtx {
	ctx := new(fasthttp.RequestCtx)
	ctx.Request.SetBodyString(body)
	ctx.Request.Header.SetContentType("application/json")
	return ctx
}

// A body is read only when declared as JSON: any other media type or
// charset is 415, an empty body needs no type.
func TestDecodeNeedsJSONContentType(t *testing.T) {
	for ct, ok := range map[string]bool{
		"application/json": true, "Application/JSON": true, "application/json; charset=utf-8": true,
		"application/json;charset=UTF-8": true, "application/json; foo=bar": true,
		"": false, "text/plain": false, "text/plain; charset=utf-8": false, "application/x-www-form-urlencoded": false,
		"multipart/form-data; boundary=x": false, "application/json; charset=latin1": false, "application/jsonp": false,
		"application/ld+json": false, "application/json; charset=": false, "json": false,
	} {
		ctx := new(fasthttp.RequestCtx)
		ctx.Request.SetBodyString(`{"name":"a"}`)
		if ct != "" {
			ctx.Request.Header.SetContentType(ct)
		}
		err := (&reqCtx{ctx: ctx}).decode(new(actors.RoomParams), true)
		switch {
		case ok && err != nil:
			t.Errorf("%q refused: %v", ct, err)
		case !ok && (err == nil || apierr.StatusOf(err) != 415 || err.Code != apierr.InvalidRequest):
			t.Errorf("%q: %v, want 415 invalid_request", ct, err)
		}
	}
	ctx := new(fasthttp.RequestCtx)
	ctx.Request.Header.SetContentType("text/plain")
	if err := (&reqCtx{ctx: ctx}).decode(new(actors.RoomParams), true); err != nil {
		t.Errorf("an empty body of any type is {} where that is allowed: %v", err)
	}
}

// The strict check must not allocate on a valid body of the real connect
// request: it runs on every POST /v1/connect.
func TestStrictCheckConnectAllocs(t *testing.T) {
	body := []byte(benchConnectBody)
	var p actors.ConnectParams
	if n := testing.AllocsPerRun(100, func() {
		if err := strictjson.Check(body, &p); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per check, want 0", n)
	}
}

const benchConnectBody = `{"token":"pt_v1.eyJwcmoiOiJwcmpfd252NWtueWJ0NXlsMzN4cWk1ZndyaWsiLCJyb29tIjoicm9vbV9laXh4eWIzbmMzdnEyeGo1ZXljanRtNWkiLCJwYXJ0IjoicGFydF9hYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3giLCJleHAiOjE3OTM0NTYwMDB9.c2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJl","sdk":{"name":"rtcd-js","version":"1.4.2","platform":"web"}}`

// BenchmarkDecodeConnect is what POST /v1/connect pays to read its body: the
// strict check and the decoding.
func BenchmarkDecodeConnect(b *testing.B) {
	ctx := bodyCtx(benchConnectBody)
	rc := &reqCtx{ctx: ctx}
	b.ReportAllocs()
	b.SetBytes(int64(len(benchConnectBody)))
	for b.Loop() {
		var p actors.ConnectParams
		if err := rc.decode(&p, false); err != nil {
			b.Fatal(err)
		}
	}
}
