package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// docs/openapi.yaml must generate working clients with the tools
// integrators use: oapi-codegen (pinned in tools/go.mod) generates a Go
// client and openapi-typescript (pinned in the npm lock) TypeScript types;
// each compiles with a small program (e2e/testdata/openapi-clients) that
// creates a room on a live server. Redocly's linter finds no error.

// clientsCommandTimeout bounds one generator, compiler or program run.
const clientsCommandTimeout = 5 * time.Minute

// clientsRun runs name with args in dir (env added) and returns its stdout.
func clientsRun(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clientsCommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s%s", name, strings.Join(args, " "), dir, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// clientsNodeTools returns the repository's node_modules/.bin, or skips the
// test (fails it under CI) when `make web-deps` has not installed it.
func clientsNodeTools(t *testing.T, root string, tools ...string) string {
	t.Helper()
	bin := filepath.Join(root, "node_modules", ".bin")
	for _, tool := range tools {
		if _, err := os.Stat(filepath.Join(bin, tool)); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed (npm ci at the repository root): %v", tool, err)
			}
			t.Skipf("%s is not installed (run make web-deps): %v", tool, err)
		}
	}
	return bin
}

// clientsCheckOutput checks a program's line against the server.
func clientsCheckOutput(t *testing.T, e *env, out, wantName string) {
	t.Helper()
	var got struct {
		RoomID     string  `json:"room_id"`
		Name       string  `json:"name"`
		Status     string  `json:"status"`
		Listed     bool    `json:"listed"`
		NextCursor *string `json:"next_cursor"`
		EventType  string  `json:"event_type"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("the program printed %q: %v", out, err)
	}
	if got.Name != wantName || got.Status != "waiting" || !got.Listed || got.NextCursor != nil || got.EventType != "room.ended" {
		t.Errorf("the program printed %+v", got)
	}
	r := e.do("GET", "/v1/rooms/"+got.RoomID, e.Boot.APIKey, nil).must(t, 200)
	if r.Str("name") != wantName {
		t.Errorf("the server has room %s named %q, want %q", got.RoomID, r.Str("name"), wantName)
	}
}

func TestOpenAPIGeneratedGoClient(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("builds oapi-codegen and a generated client")
	}
	root := binModuleRoot(t)
	e := start(t)
	work := t.TempDir()
	goTool := "go"
	gen := filepath.Join(work, "oapi-codegen")
	clientsRun(t, filepath.Join(root, "tools"), nil, goTool, "build", "-o", gen, "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen")

	// A module of its own with the tools module's dependency graph (the
	// generated code imports github.com/oapi-codegen/runtime, pinned there).
	mod := filepath.Join(work, "client")
	if err := os.MkdirAll(filepath.Join(mod, "rtcdapi"), 0o755); err != nil {
		t.Fatal(err)
	}
	goMod, err := os.ReadFile(filepath.Join(root, "tools", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goMod = bytes.Replace(goMod, []byte("module rtcd/tools\n"), []byte("module rtcdclientcheck\n"), 1)
	goSum, err := os.ReadFile(filepath.Join(root, "tools", "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	program, err := os.ReadFile(filepath.Join("testdata", "openapi-clients", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"go.mod": goMod, "go.sum": goSum, "main.go": program} {
		if err := os.WriteFile(filepath.Join(mod, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The generator's defaults: no option papers over the document.
	clientsRun(t, mod, nil, gen, "-generate", "types,client", "-package", "rtcdapi",
		"-o", filepath.Join(mod, "rtcdapi", "rtcdapi.gen.go"), filepath.Join(root, "docs", "openapi.yaml"))
	clientsRun(t, mod, []string{"GOWORK=off", "GOFLAGS=-mod=readonly"}, goTool, "vet", "./...")
	out := clientsRun(t, mod, []string{"GOWORK=off", "GOFLAGS=-mod=readonly"}, goTool, "run", ".", e.Base, e.Boot.APIKey)
	clientsCheckOutput(t, e, out, "created by a client oapi-codegen generated")
}

func TestOpenAPIGeneratedTypeScriptClient(t *testing.T) {
	root := binModuleRoot(t)
	bin := clientsNodeTools(t, root, "openapi-typescript", "tsc")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	e := start(t)
	work := t.TempDir()
	for _, name := range []string{"main.ts", "tsconfig.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "openapi-clients", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	clientsRun(t, root, nil, filepath.Join(bin, "openapi-typescript"), filepath.Join(root, "docs", "openapi.yaml"),
		"-o", filepath.Join(work, "schema.d.ts"))
	clientsRun(t, work, nil, filepath.Join(bin, "tsc"), "-p", filepath.Join(work, "tsconfig.json"))
	out := clientsRun(t, work, nil, node, filepath.Join(work, "out", "main.js"), e.Base, e.Boot.APIKey)
	clientsCheckOutput(t, e, out, "created by a client openapi-typescript typed")
}

// TestOpenAPIRedoclyLint runs Redocly's recommended rules: no error (its
// warnings are printed, not fatal).
func TestOpenAPIRedoclyLint(t *testing.T) {
	root := binModuleRoot(t)
	bin := clientsNodeTools(t, root, "redocly")
	env := []string{"REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true"}
	out := clientsRun(t, root, env, filepath.Join(bin, "redocly"), "lint", "--format=summary", filepath.Join(root, "docs", "openapi.yaml"))
	t.Logf("redocly lint:\n%s", out)
}
