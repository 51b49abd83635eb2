package actors

import (
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The package rules of actors/, checked on what the go tool reports so
// that they stay true:
//   - core imports no owner (and not the engine);
//   - no owner imports the engine (rtcd/actors);
//   - room and wallet import no other owner;
//   - nothing under actors/ exists that these rules do not place.
//
// Imports are counted transitively (Deps): an owner that reached another
// through a helper package would break the rule just the same.

// The owners of state, and the other packages under actors/.
var (
	owners     = []string{"rtcd/actors/room", "rtcd/actors/project", "rtcd/actors/wallet", "rtcd/actors/directory"}
	nonOwners  = []string{"rtcd/actors", "rtcd/actors/core", "rtcd/actors/core/coretest", "rtcd/actors/dispatch"}
	leafOwners = []string{"rtcd/actors/room", "rtcd/actors/wallet"} // import no other owner
)

// listedPackage is what `go list -json` says of a package.
type listedPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func goList(t *testing.T, patterns ...string) map[string]listedPackage {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goTool, append([]string{"list", "-json"}, patterns...)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]listedPackage{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

func TestPackageRules(t *testing.T) {
	pkgs := goList(t, "rtcd/actors/...")

	var listed []string
	for path := range pkgs {
		listed = append(listed, path)
	}
	known := append(slices.Clone(owners), nonOwners...)
	slices.Sort(listed)
	slices.Sort(known)
	if !slices.Equal(listed, known) {
		t.Fatalf("packages under actors/: %v\nthe rules place: %v (a new package needs its rule here)", listed, known)
	}

	dependsOn := func(pkg, dep string) bool {
		return slices.Contains(pkgs[pkg].Deps, dep)
	}
	for _, o := range owners {
		if dependsOn("rtcd/actors/core", o) {
			t.Errorf("core imports the owner %s; the kernel must import no owner", o)
		}
	}
	if dependsOn("rtcd/actors/core", "rtcd/actors") {
		t.Error("core imports rtcd/actors")
	}
	// coretest is the owners' shared test helpers: it may import the
	// kernel, never an owner or the engine (every owner's tests import it).
	for _, dep := range append(slices.Clone(owners), "rtcd/actors") {
		if dependsOn("rtcd/actors/core/coretest", dep) {
			t.Errorf("core/coretest imports %s; the owners' test helpers import only the kernel", dep)
		}
	}
	for _, o := range append(slices.Clone(owners), "rtcd/actors/dispatch") {
		if dependsOn(o, "rtcd/actors") {
			t.Errorf("%s imports rtcd/actors; no owner may import the engine", o)
		}
		if !slices.Contains(pkgs[o].Imports, "rtcd/actors/core") {
			t.Errorf("%s does not import rtcd/actors/core", o)
		}
	}
	for _, leaf := range leafOwners {
		for _, o := range owners {
			if o != leaf && dependsOn(leaf, o) {
				t.Errorf("%s imports the owner %s; room and wallet import no other owner", leaf, o)
			}
		}
	}
	if dependsOn("rtcd/actors/dispatch", "rtcd/actors/room") || dependsOn("rtcd/actors/dispatch", "rtcd/actors/project") ||
		dependsOn("rtcd/actors/dispatch", "rtcd/actors/wallet") || dependsOn("rtcd/actors/dispatch", "rtcd/actors/directory") {
		t.Error("dispatch imports an owner; it reads what projects publish in core")
	}
}
