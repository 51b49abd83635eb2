package testtools

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A test that needs an outside program either runs with it or says loudly
// that it did not run. In CI nothing may skip: there the same message fails
// the test, so a CI machine that lacks a tool goes red instead of green with
// less tested.

// InCI reports whether the tests run in CI: the CI environment variable is
// set (GitHub Actions, GitLab CI and most others set CI=true) and is not
// "0" or "false".
func InCI() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv("CI"))) {
	case "", "0", "false":
		return false
	}
	return true
}

// SkipUnlessCI skips t loudly, saying why it did not run; in CI it fails t
// with the same message instead.
func SkipUnlessCI(t testing.TB, why string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s: %s\n(CI is set: a missing tool fails the test instead of skipping it)", t.Name(), why)
	}
	t.Skipf("\n\n*** SKIPPING %s: %s ***\n\n", t.Name(), why)
}

// RequireOnPath returns the path of the program name on PATH. Without it
// the test is skipped unless in CI (SkipUnlessCI); install says how to get
// it.
func RequireOnPath(t testing.TB, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		SkipUnlessCI(t, fmt.Sprintf("%s is not on PATH (%v). Install it: %s", name, err, install))
	}
	return path
}

// Require returns the tool's binary (see Binary). When it is neither found
// nor built, or $EnvVar names no file, the test is skipped unless in CI
// (SkipUnlessCI), with how to build it.
func (tool *Tool) Require(t testing.TB) string {
	t.Helper()
	bin, err := tool.Binary()
	if err == nil {
		// $EnvVar is taken as given; a path to nothing is not found.
		if _, serr := os.Stat(bin); serr != nil {
			err = serr
		}
	}
	if err != nil {
		SkipUnlessCI(t, fmt.Sprintf("%s %s could not be found or built: %v\n"+
			"Build it with: (cd tools && go build -o \"$(go env GOPATH)/bin/%s\" %s) or set %s to its path.",
			tool.Name, tool.Version, err, tool.Name, tool.Package, tool.EnvVar))
	}
	return bin
}
