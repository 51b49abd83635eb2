package main

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrapeTimeout bounds one GET /metrics; scrapeMaxBytes its body.
const (
	scrapeTimeout  = 10 * time.Second
	scrapeMaxBytes = 16 << 20
)

// Figures of rtcd's metrics listener (metrics/metrics.go and the Go and
// process collectors) that the report shows.
var (
	// counterFamilies are reported as deltas, in total and by label set.
	counterFamilies = []string{
		"rtcd_http_requests_total",
		"rtcd_connect_results_total",
		"process_cpu_seconds_total",
		pebbleWALBytes, // what the Pebble store wrote (the store scenario's bytes per op)
	}
	// gaugeFamilies are reported before, after and as a difference.
	gaugeFamilies = []string{
		"process_resident_memory_bytes",
		"go_goroutines",
		"go_memstats_heap_inuse_bytes",
		"process_open_fds",
		"rtcd_active_rooms",
		"rtcd_active_participants",
	}
	// histogramFamilies are reported as count and mean of the delta.
	histogramFamilies = []string{
		"rtcd_http_request_duration_seconds",
		"rtcd_journal_apply_duration_seconds",
		"rtcd_journal_sync_duration_seconds",
	}
)

// scrape is one reading of the metrics listener: series name{labels} ->
// value; a histogram adds name_count{…} and name_sum{…}.
type scrape struct {
	At     time.Time
	Values map[string]float64
}

var scrapeClient = &http.Client{Timeout: scrapeTimeout}

// scrapeMetrics reads base/metrics (base: http://host:port).
func scrapeMetrics(base string) (*scrape, error) {
	res, err := scrapeClient.Get(strings.TrimRight(base, "/") + "/metrics")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return nil, fmt.Errorf("GET /metrics: HTTP %d", res.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(io.LimitReader(res.Body, scrapeMaxBytes))
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %v", err)
	}
	s := &scrape{At: time.Now(), Values: map[string]float64{}}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			key := name + labelString(m.GetLabel())
			switch {
			case m.Counter != nil:
				s.Values[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				s.Values[key] = m.GetGauge().GetValue()
			case m.Untyped != nil:
				s.Values[key] = m.GetUntyped().GetValue()
			case m.Histogram != nil:
				s.Values[name+"_count"+labelString(m.GetLabel())] = float64(m.GetHistogram().GetSampleCount())
				s.Values[name+"_sum"+labelString(m.GetLabel())] = m.GetHistogram().GetSampleSum()
			case m.Summary != nil: // go_gc_duration_seconds: its count is the GCs completed
				s.Values[name+"_count"+labelString(m.GetLabel())] = float64(m.GetSummary().GetSampleCount())
				s.Values[name+"_sum"+labelString(m.GetLabel())] = m.GetSummary().GetSampleSum()
			}
		}
	}
	return s, nil
}

func labelString(ls []*dto.LabelPair) string {
	if len(ls) == 0 {
		return ""
	}
	parts := make([]string, 0, len(ls))
	for _, l := range ls {
		parts = append(parts, l.GetName()+"="+fmt.Sprintf("%q", l.GetValue()))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// sumFamily adds every series of a family (name or name{…}).
func (s *scrape) sumFamily(name string) (float64, bool) {
	var total float64
	found := false
	for k, v := range s.Values {
		if k == name || strings.HasPrefix(k, name+"{") {
			total += v
			found = true
		}
	}
	return total, found
}

// serverFigures compares two scrapes.
type serverFigures struct {
	Source      string                    `json:"source"`
	WallSeconds float64                   `json:"wall_seconds"`
	Counters    map[string]counterDelta   `json:"counters"`
	Gauges      map[string]gaugeChange    `json:"gauges"`
	Histograms  map[string]histogramDelta `json:"histograms"`
	CPUCores    float64                   `json:"cpu_cores_used"`
	Extra       map[string]float64        `json:"extra,omitempty"`
	Peak        map[string]float64        `json:"peak,omitempty"` // join: gauges while every socket was held
}

type counterDelta struct {
	Delta   float64            `json:"delta"`
	ByLabel map[string]float64 `json:"by_label,omitempty"`
}

type gaugeChange struct {
	Before float64 `json:"before"`
	After  float64 `json:"after"`
	Delta  float64 `json:"delta"`
}

type histogramDelta struct {
	Count   float64           `json:"count"`
	MeanMs  float64           `json:"mean_ms"`
	ByLabel map[string]string `json:"by_label,omitempty"` // labels -> "count @ mean ms"
}

// compare builds the figures from before to after.
func compare(source string, before, after *scrape) *serverFigures {
	f := &serverFigures{Source: source, WallSeconds: after.At.Sub(before.At).Seconds(),
		Counters: map[string]counterDelta{}, Gauges: map[string]gaugeChange{}, Histograms: map[string]histogramDelta{}}
	for _, name := range counterFamilies {
		d := counterDelta{ByLabel: map[string]float64{}}
		found := false
		for k, v := range after.Values {
			if k != name && !strings.HasPrefix(k, name+"{") {
				continue
			}
			found = true
			delta := v - before.Values[k]
			d.Delta += delta
			if labels := strings.TrimPrefix(k, name); labels != "" && delta != 0 {
				d.ByLabel[labels] = delta
			}
		}
		if found {
			if len(d.ByLabel) == 0 {
				d.ByLabel = nil
			}
			f.Counters[name] = d
		}
	}
	for _, name := range gaugeFamilies {
		b, ok1 := before.sumFamily(name)
		a, ok2 := after.sumFamily(name)
		if ok1 || ok2 {
			f.Gauges[name] = gaugeChange{Before: b, After: a, Delta: a - b}
		}
	}
	for _, name := range histogramFamilies {
		h := histogramDelta{ByLabel: map[string]string{}}
		var sum float64
		found := false
		for k, v := range after.Values {
			if !strings.HasPrefix(k, name+"_count") {
				continue
			}
			found = true
			labels := strings.TrimPrefix(k, name+"_count")
			dc := v - before.Values[k]
			ds := after.Values[name+"_sum"+labels] - before.Values[name+"_sum"+labels]
			h.Count += dc
			sum += ds
			if labels != "" && dc > 0 {
				h.ByLabel[labels] = fmt.Sprintf("%.0f @ %.3f ms", dc, ds/dc*1000)
			}
		}
		if !found {
			continue
		}
		if h.Count > 0 {
			h.MeanMs = sum / h.Count * 1000
		}
		if len(h.ByLabel) == 0 {
			h.ByLabel = nil
		}
		f.Histograms[name] = h
	}
	if c, ok := f.Counters["process_cpu_seconds_total"]; ok && f.WallSeconds > 0 {
		f.CPUCores = c.Delta / f.WallSeconds
	}
	return f
}
