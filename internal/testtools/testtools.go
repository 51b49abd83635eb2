// Package testtools finds or builds the programs tests run as real
// components (stripe-mock, mailpit, etcd), which are pinned in the tools
// module (tools/go.mod) so the service's own go.mod stays lean, finds the
// ones tests take from PATH (promtool, openssl, redis-server), and skips a test whose program
// is missing, or fails it in CI (require.go). It is for tests only.
package testtools

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// BuildTimeout bounds building a tool from a cold build cache.
const BuildTimeout = 5 * time.Minute

// Tool is one pinned program.
type Tool struct {
	Name       string // binary name, e.g. "stripe-mock"
	Package    string // its main package in the tools module
	Version    string // pinned version (names the cache directory)
	EnvVar     string // an explicit binary path, e.g. $STRIPE_MOCK_BIN
	ToolsDir   string // path of the tools module from the test's directory, e.g. "../tools"
	LookGOPATH bool   // also try $(go env GOPATH)/bin/<Name>

	once sync.Once
	bin  string
	err  error
}

// Binary returns the tool's path, found or built once per test binary: the
// env var, then PATH, then $GOPATH/bin when asked, then the user cache, and
// otherwise a build from the tools module. An error means the build failed.
func (t *Tool) Binary() (string, error) {
	t.once.Do(func() { t.bin, t.err = t.findOrBuild() })
	return t.bin, t.err
}

func (t *Tool) findOrBuild() (string, error) {
	if bin := os.Getenv(t.EnvVar); bin != "" {
		return bin, nil
	}
	if bin, err := exec.LookPath(t.Name); err == nil {
		return bin, nil
	}
	if t.LookGOPATH {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
				if bin := filepath.Join(dir, "bin", t.Name); isExecutable(bin) {
					return bin, nil
				}
			}
		}
	}
	cacheDir, err := os.UserCacheDir()
	if err != nil {
		cacheDir = os.TempDir()
	}
	dir := filepath.Join(cacheDir, "rtcd-tools", t.Name+"-"+t.Version)
	bin := filepath.Join(dir, t.Name)
	if isExecutable(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	toolsDir, err := filepath.Abs(t.ToolsDir)
	if err != nil {
		return "", err
	}
	// Build next to the target and rename, so a concurrent or interrupted
	// build never leaves a half-written binary at the cached path.
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, t.Package)
	cmd.Dir = toolsDir
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("go build %s in %s: %v\n%s", t.Package, toolsDir, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
