package http

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"reflect"
	"strings"

	"github.com/goccy/go-json"
	"rtcd/actors"
	"rtcd/apierr"
	"rtcd/strictjson"
)

// jsonWhitespace is the insignificant whitespace of JSON (RFC 8259).
const jsonWhitespace = " \t\r\n"

// decode reads the body as exactly one JSON object into v, strictly:
// invalid JSON or UTF-8, lone surrogate escapes, duplicate keys, numbers
// beyond float64, nesting deeper than strictjson.MaxDepth, keys that are not
// exactly a field's json name (at every struct level), wrong types and
// trailing data are invalid_request. An empty body (no bytes at all) counts
// as {} when emptyOK (every field of the request is optional); a body of
// only whitespace is not empty, and is refused like any other non-object.
//
// A body must be declared as JSON (Content-Type application/json, charset
// utf-8 if any): anything else is 415 before a byte of it is parsed, so a form
// or a text/plain body a browser sends cross-origin without a preflight
// never acts (docs/api.md, "Strict request bodies").
func (rc *reqCtx) decode(v any, emptyOK bool) *apierr.Error {
	raw := rc.ctx.PostBody()
	if err := checkBodyType(raw, rc.ctx.Request.Header.ContentType()); err != nil {
		return err
	}
	return decodeBody(raw, v, emptyOK)
}

// checkBodyType refuses (415) a body raw whose declared Content-Type is not
// JSON. An empty body has no type to check: decodeBody refuses it as no
// JSON object (or takes it as {}).
func checkBodyType(raw, contentType []byte) *apierr.Error {
	if len(raw) == 0 {
		return nil
	}
	return checkJSONContentType(contentType)
}

// decodeBody is decode of the body raw, once its type is checked
// (checkBodyType).
func decodeBody(raw []byte, v any, emptyOK bool) *apierr.Error {
	if len(raw) == 0 && emptyOK {
		return nil
	}
	body := bytes.Trim(raw, jsonWhitespace)
	if len(body) == 0 {
		return apierr.New(apierr.InvalidRequest, "the request body must be a JSON object")
	}
	if body[0] != '{' {
		return apierr.New(apierr.InvalidRequest, "the request body must be a JSON object")
	}
	// The raw bytes are checked before decoding: the decoder would replace
	// invalid UTF-8 and lone surrogates with U+FFFD, keep the last of
	// duplicate keys and match field names case-insensitively.
	if err := strictjson.Check(body, v); err != nil {
		return strictError(err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return apierr.New(apierr.InvalidRequest, "the request body must hold exactly one JSON object")
	}
	return nil
}

// jsonMediaType is the one media type a JSON route accepts.
const jsonMediaType = "application/json"

// checkJSONContentType refuses (415) a body not declared as JSON: no
// Content-Type, another media type (text/plain and form encodings above
// all: a browser sends those cross-origin without asking first), or a
// charset other than UTF-8 (RFC 8259 section 8.1).
func checkJSONContentType(header []byte) *apierr.Error {
	if string(header) == jsonMediaType {
		return nil // what clients send: no parse, no allocation (the connect path)
	}
	refuse := func() *apierr.Error {
		return apierr.New(apierr.InvalidRequest, "the request body must be JSON sent with Content-Type: %s", jsonMediaType).
			WithDetails("header", "Content-Type").WithDetails("expected", jsonMediaType).WithStatus(415)
	}
	mediaType, params, err := mime.ParseMediaType(string(header))
	if err != nil || mediaType != jsonMediaType {
		return refuse()
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return refuse()
	}
	return nil
}

// strictError is the invalid_request of a body the strict check refused:
// details.field names the field at fault when there is one, and
// details.max_depth the limit a too deeply nested body broke.
func strictError(e *strictjson.Error) *apierr.Error {
	var err *apierr.Error
	if e.Field == "" {
		err = apierr.New(apierr.InvalidRequest, "%s", e.Message)
	} else {
		err = apierr.Invalid(e.Field, "%s", e.Message)
	}
	if e.TooDeep {
		err = err.WithDetails("max_depth", strictjson.MaxDepth)
	}
	return err
}

// jsonError turns a decoding error into a message that names the field and
// the expected JSON type, without Go type names.
func jsonError(err error) *apierr.Error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		if field == "" {
			return apierr.New(apierr.InvalidRequest, "the request body must be a JSON object")
		}
		return apierr.Invalid(field, "field %s must be %s, not %s", field, jsonTypeName(typeErr.Type), typeErr.Value)
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		name := strings.Trim(rest, `"`)
		return apierr.Invalid(name, "unknown field %s", rest)
	}
	return apierr.New(apierr.InvalidRequest, "the request body is not valid JSON")
}

func jsonTypeName(t reflect.Type) string {
	if t == nil {
		return "a valid value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeOf(json.RawMessage{}) {
		return "a JSON object"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a valid value"
}

// limit parses the limit query parameter: absent means the default, else a
// plain decimal integer from 1 to 100.
func (rc *reqCtx) limit() (int, *apierr.Error) {
	args := rc.ctx.QueryArgs()
	if !args.Has("limit") {
		return actors.PageLimitDefault, nil
	}
	v := args.Peek("limit")
	bad := apierr.Invalid("limit", "limit must be an integer from %d to %d", actors.PageLimitMin, actors.PageLimitMax)
	if len(v) == 0 || len(v) > 3 {
		return 0, bad
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, bad
		}
		n = n*10 + int(c-'0')
	}
	if n < actors.PageLimitMin || n > actors.PageLimitMax {
		return 0, bad
	}
	return n, nil
}

// idempotency reads the Idempotency-Key header; nil when absent. The header
// may appear once: of two keys, neither could be honored.
func (rc *reqCtx) idempotency() (*actors.IdempotencyRequest, *apierr.Error) {
	v := rc.ctx.Request.Header.Peek("Idempotency-Key")
	if v == nil {
		return nil, nil
	}
	if len(rc.ctx.Request.Header.PeekAll("Idempotency-Key")) > 1 {
		return nil, apierr.Invalid("Idempotency-Key", "send at most one Idempotency-Key header")
	}
	if len(v) == 0 || len(v) > actors.MaxIdempotencyKeyBytes {
		return nil, apierr.Invalid("Idempotency-Key", "the Idempotency-Key header must be 1 to %d characters", actors.MaxIdempotencyKeyBytes)
	}
	for _, c := range v {
		if c < 0x20 || c > 0x7e {
			return nil, apierr.Invalid("Idempotency-Key", "the Idempotency-Key header must be printable ASCII")
		}
	}
	return &actors.IdempotencyRequest{
		Key:         string(v),
		RequestHash: actors.HashRequest(string(rc.ctx.Method()), string(rc.ctx.Path()), rc.ctx.PostBody()),
	}, nil
}
