package e2e

// What ships beside the metrics (deploy/): the Prometheus alerting rules
// pass promtool's checks and its unit tests, and every expression of the
// rules and of the Grafana dashboard parses with Prometheus's PromQL
// parser and names only metrics a live rtcd exports.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"rtcd/internal/testtools"
)

const (
	deployRules     = "deploy/prometheus/rtcd-alerts.yml"
	deployRulesTest = "deploy/prometheus/rtcd-alerts.test.yml"
	deployDashboard = "deploy/grafana/rtcd.json"
)

// prometheusGenerated are names Prometheus makes itself, not the target.
var prometheusGenerated = map[string]bool{"up": true}

func TestAlertRulesPromtool(t *testing.T) {
	root := binModuleRoot(t)
	promtool := testtools.RequireOnPath(t, "promtool", "apt-get install prometheus (Debian), or a Prometheus release's promtool on PATH")
	for _, args := range [][]string{
		{"check", "rules", deployRules},
		{"test", "rules", deployRulesTest},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

func TestDeployExpressionsNameLiveMetrics(t *testing.T) {
	root := binModuleRoot(t)
	checker := filepath.Join(t.TempDir(), "promqlcheck")
	clientsRun(t, filepath.Join(root, "tools"), nil, "go", "build", "-o", checker, "./promqlcheck")
	out := clientsRun(t, root, nil, checker, deployRules, deployDashboard)
	var parsed struct {
		Expressions int      `json:"expressions"`
		Metrics     []string `json:"metrics"`
	}
	if err := json.Unmarshal([]byte(out), &parsed); err != nil {
		t.Fatalf("promqlcheck printed %q: %v", out, err)
	}
	if parsed.Expressions < 30 || len(parsed.Metrics) < 30 {
		t.Fatalf("promqlcheck found %d expressions naming %d metrics; the rules and the dashboard have more", parsed.Expressions, len(parsed.Metrics))
	}

	// A live server with a little traffic: every family is exported.
	e := start(t)
	room := e.createRoom(nil)
	_, token := e.createParticipant(room, nil)
	e.connect(token).must(t, 200)
	_, fams := obsScrape(t, e)
	exported := func(name string) bool {
		if fams[name] != nil {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && fams[base] != nil && fams[base].GetType() == dto.MetricType_HISTOGRAM {
				return true
			}
		}
		return false
	}
	for _, name := range parsed.Metrics {
		// The Pebble store's families are not there on JetStream; their
		// panels and alerts are about the default store.
		if onJetStream() && strings.HasPrefix(name, "rtcd_pebble_") {
			continue
		}
		if !prometheusGenerated[name] && !exported(name) {
			t.Errorf("%s or %s uses %s, which the server does not export", deployRules, deployDashboard, name)
		}
	}

	// And every rtcd family the server exports is documented.
	doc, err := os.ReadFile(filepath.Join(root, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range fams {
		if strings.HasPrefix(name, "rtcd_") && !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/metrics.md does not document %s", name)
		}
	}
}
