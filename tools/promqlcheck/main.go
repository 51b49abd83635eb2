// Command promqlcheck parses every PromQL expression of Prometheus rule
// files (groups[].rules[].expr) and Grafana dashboards (every "expr" of a
// panel's targets, and label_values(...) queries of template variables)
// with Prometheus's own parser, and prints, as JSON, how many it parsed and
// the metric names they select. A file that does not parse, or an
// expression that does not, makes it exit 1 after naming each one.
//
// Grafana's interval variables ($__rate_interval, $__interval, $__range)
// are replaced by 5m before parsing; other $variables stand inside label
// values, where they parse as they are.
//
// e2e/deploy_metrics_test.go builds it from this module (it pulls in
// github.com/prometheus/prometheus, which rtcd's go.mod must not) and
// checks the names against a live server's /metrics.
//
//	promqlcheck deploy/prometheus/rtcd-alerts.yml deploy/grafana/rtcd.json
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

// Result is what promqlcheck prints.
type Result struct {
	Expressions int      `json:"expressions"`
	Metrics     []string `json:"metrics"`
}

// source is one expression and where it was found.
type source struct{ where, expr string }

var (
	intervalVariable = regexp.MustCompile(`\$\{?__(rate_interval|interval|range)\}?`)
	labelValuesQuery = regexp.MustCompile(`^label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\)$`)
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: promqlcheck FILE.yml|FILE.json ...")
		os.Exit(2)
	}
	var all []source
	failed := false
	for _, path := range os.Args[1:] {
		found, err := expressionsOf(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			failed = true
		}
		all = append(all, found...)
	}
	p := parser.NewParser(parser.Options{})
	names := map[string]bool{}
	for _, s := range all {
		expr, err := p.ParseExpr(intervalVariable.ReplaceAllString(s.expr, "5m"))
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %q: %v\n", s.where, s.expr, err)
			failed = true
			continue
		}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				if name := selectorName(vs); name != "" {
					names[name] = true
				} else {
					fmt.Fprintf(os.Stderr, "%s: %q selects no metric by name\n", s.where, s.expr)
					failed = true
				}
			}
			return nil
		})
	}
	if len(all) == 0 {
		fmt.Fprintln(os.Stderr, "no expressions found")
		failed = true
	}
	out := Result{Expressions: len(all), Metrics: make([]string, 0, len(names))}
	for n := range names {
		out.Metrics = append(out.Metrics, n)
	}
	slices.Sort(out.Metrics)
	_ = json.NewEncoder(os.Stdout).Encode(out)
	if failed {
		os.Exit(1)
	}
}

// selectorName is the metric name a selector selects: its name, or an
// equality matcher on __name__.
func selectorName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

// expressionsOf reads the expressions of a rule file (.yml, .yaml) or a
// dashboard (.json).
func expressionsOf(path string) ([]source, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	switch {
	case strings.HasSuffix(path, ".json"):
		var doc any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return nil, err
		}
		var out []source
		walkDashboard(path, doc, &out)
		return out, nil
	case strings.HasSuffix(path, ".yml") || strings.HasSuffix(path, ".yaml"):
		var rules struct {
			Groups []struct {
				Name  string `yaml:"name"`
				Rules []struct {
					Alert  string `yaml:"alert"`
					Record string `yaml:"record"`
					Expr   string `yaml:"expr"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal(raw, &rules); err != nil {
			return nil, err
		}
		var out []source
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				out = append(out, source{where: path + ": " + g.Name + "/" + r.Alert + r.Record, expr: r.Expr})
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("neither .yml nor .json")
}

// walkDashboard collects every "expr" string, and the selector inside every
// label_values(...) template query, anywhere in a dashboard.
func walkDashboard(where string, v any, out *[]source) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			s, isString := child.(string)
			switch {
			case k == "expr" && isString:
				*out = append(*out, source{where: where, expr: s})
			case (k == "query" || k == "definition") && isString:
				if m := labelValuesQuery.FindStringSubmatch(s); m != nil {
					*out = append(*out, source{where: where + " (template)", expr: m[1]})
				}
			default:
				walkDashboard(where, child, out)
			}
		}
	case []any:
		for _, child := range v {
			walkDashboard(where, child, out)
		}
	}
}
