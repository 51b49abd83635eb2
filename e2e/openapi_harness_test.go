package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"rtcd/apierr"
)

// Every request the harness sends (env.send) is checked against
// docs/openapi.yaml: the response always, when the document has the route;
// the request too when the server accepted it (status below 400), since
// tests send malformed requests on purpose. Violations are collected per
// env and reported when the test ends, so the document cannot drift from
// the code.

// openAPIPath is the document, relative to this package.
const openAPIPath = "../docs/openapi.yaml"

// openAPI is the document and its router, loaded once for the package.
var openAPI struct {
	once   sync.Once
	doc    *openapi3.T
	router routers.Router
	err    error
}

// loadOpenAPI parses and validates the document.
func loadOpenAPI() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(openAPIPath)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", openAPIPath, err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("validating %s: %w", openAPIPath, err)
	}
	return doc, nil
}

// openAPIRouter returns the router over the document's paths. The test
// servers listen on random ports, so routing ignores the document's
// servers and matches on the path alone.
func openAPIRouter() (routers.Router, error) {
	openAPI.once.Do(func() {
		doc, err := loadOpenAPI()
		if err != nil {
			openAPI.err = err
			return
		}
		doc.Servers = nil
		openAPI.doc = doc
		openAPI.router, openAPI.err = legacy.NewRouter(doc)
	})
	return openAPI.router, openAPI.err
}

// openAPIOptions: undocumented statuses fail, response headers and bodies
// are checked; authentication is the server's job, so any credential passes.
var openAPIOptions = func() *openapi3filter.Options {
	o := &openapi3filter.Options{
		IncludeResponseStatus: true,
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
	}
	// The reason and where, without the whole schema in every report.
	o.WithCustomSchemaErrorFunc(func(err *openapi3.SchemaError) string {
		return fmt.Sprintf("%s at %q: %s (value %.200s)", err.SchemaField, "/"+strings.Join(err.JSONPointer(), "/"), err.Reason, fmt.Sprint(err.Value))
	})
	return o
}()

// openAPIRecorder collects one env's violations; send runs in goroutines.
type openAPIRecorder struct {
	mu         sync.Mutex
	violations []string
}

// openAPIRecorders maps each env to its recorder, made (and its report
// registered with t.Cleanup) on the env's first request.
var openAPIRecorders sync.Map // *env -> *openAPIRecorder

func (e *env) openAPIRecorder() *openAPIRecorder {
	if r, ok := openAPIRecorders.Load(e); ok {
		return r.(*openAPIRecorder)
	}
	r, loaded := openAPIRecorders.LoadOrStore(e, &openAPIRecorder{})
	rec := r.(*openAPIRecorder)
	if !loaded {
		t := e.t
		t.Cleanup(func() {
			openAPIRecorders.Delete(e)
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.violations) > 0 {
				t.Errorf("%d response(s) or request(s) do not match %s:\n%s",
					len(rec.violations), openAPIPath, strings.Join(rec.violations, "\n"))
			}
		})
	}
	return rec
}

func (r *openAPIRecorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

// checkOpenAPI validates one exchange of send: sent is the request as sent
// (its body already consumed), body its bytes, and status, header and raw
// the response.
func (e *env) checkOpenAPI(sent *http.Request, body []byte, status int, header http.Header, raw []byte) {
	rec := e.openAPIRecorder()
	router, err := openAPIRouter()
	if err != nil {
		rec.add("  the document does not load: %v", err)
		return
	}
	if len(bytes.Trim(body, " \t\r\n")) == 0 {
		body = nil // JSON whitespace alone is an empty body to the server (docs/api.md)
	}
	ctx := context.Background()
	req := sent.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	route, params, err := router.FindRoute(req)
	if err != nil {
		return // not a documented route and method (a deliberate 404 or 405)
	}
	for _, v := range params {
		if v == "" {
			// The legacy router lets a trailing {param} match nothing
			// (DELETE /v1/rooms as /v1/rooms/{room_id}); the server's
			// router does not, so this is an undocumented route.
			return
		}
	}
	where := fmt.Sprintf("%s %s -> %d", sent.Method, sent.URL.RequestURI(), status)
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: openAPIOptions}
	if status < 400 {
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			rec.add("  %s: request: %v", where, oneLine(err))
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header, Options: openAPIOptions}
	out.SetBodyBytes(raw)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		rec.add("  %s: response: %v (body %.300s)", where, oneLine(err), raw)
	}
	if status >= 400 && strings.HasPrefix(header.Get("Content-Type"), "application/json") {
		if msg := errorStatusMismatch(status, raw); msg != "" {
			rec.add("  %s: %s", where, msg)
		}
	}
}

// errorStatusMismatch checks the error envelope's code against its status:
// the status of the code's row in apierr's table, or, for invalid_request,
// one of the protocol statuses it is also sent with.
func errorStatusMismatch(status int, raw []byte) string {
	var env struct {
		Error struct {
			Code apierr.Code `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &env) != nil || env.Error.Code == "" {
		return "" // the schema check reports it
	}
	code := env.Error.Code
	if code == apierr.InvalidRequest {
		switch status {
		case 400, 404, 405, 413, 414, 415, 431:
			return ""
		}
	} else if apierr.Status(code) == status {
		return ""
	}
	return fmt.Sprintf("error code %s is not sent with status %d (apierr table: %d)", code, status, apierr.Status(code))
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// openAPIDocument returns the loaded document (for the coverage test).
func openAPIDocument(t *testing.T) *openapi3.T {
	t.Helper()
	if _, err := openAPIRouter(); err != nil {
		t.Fatal(err)
	}
	return openAPI.doc
}
