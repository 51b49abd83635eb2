package e2e

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"rtcd/actors"
	api "rtcd/http"
	"rtcd/payments"
)

// docs/openapi.yaml against the code: the document is a valid OpenAPI 3.1
// document, and it has exactly the routes the API router registers. Every
// response of the suite is checked against it by env.send
// (openapi_harness_test.go).

func TestOpenAPIDocumentIsValid(t *testing.T) {
	ctx := context.Background()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(openAPIPath)
	if err != nil {
		t.Fatalf("loading %s: %v", openAPIPath, err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi %q, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(ctx); err != nil {
		t.Fatalf("validating %s: %v", openAPIPath, err)
	}
	seen := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.OperationID == "" {
				t.Errorf("%s %s has no operationId", method, path)
			} else if other, dup := seen[op.OperationID]; dup {
				t.Errorf("operationId %s is used by %s and %s %s", op.OperationID, other, method, path)
			}
			seen[op.OperationID] = method + " " + path
		}
	}
}

func TestOpenAPICoversEveryRoute(t *testing.T) {
	doc := openAPIDocument(t)

	// Every route New registers, the sandbox provider's pages included. The
	// handlers are never called, so the engine and provider can be empty.
	srv := api.New(&actors.Engine{}, nil, "test", false, api.Payments{Sandbox: &payments.Sandbox{}})
	registered := map[string]bool{}
	for method, paths := range srv.Routes() {
		for _, p := range paths {
			// The web dashboard's pages and files are not API routes; the
			// dashboard's tests cover them.
			if !strings.HasPrefix(p, "/v1/") {
				continue
			}
			registered[method+" "+p] = true
		}
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}

	var missing, extra []string
	for r := range registered {
		if !documented[r] {
			missing = append(missing, r)
		}
	}
	for r := range documented {
		if !registered[r] {
			extra = append(extra, r)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	for _, r := range missing {
		t.Errorf("route %s is served but not in %s", r, openAPIPath)
	}
	for _, r := range extra {
		t.Errorf("%s documents %s, which the router does not serve", openAPIPath, r)
	}
	if len(registered) < 50 {
		t.Errorf("only %d routes registered: %v", len(registered), registered)
	}
}
