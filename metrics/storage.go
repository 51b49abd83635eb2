package metrics

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// snapshotBucketsSeconds spans a small actor's snapshot (50 µs) to a large
// one's (a directory of many users, seconds).
var snapshotBucketsSeconds = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Storage are the store's collectors beyond the journal's latencies: actor
// snapshots, the recovery at start, and Pebble's own metrics, read from
// the database at scrape time (RegisterPebble).
type Storage struct {
	// SnapshotWrite observes the time to encode an actor's state and add
	// it to its batch as a snapshot (persistence.Metrics.SnapshotSeconds).
	SnapshotWrite prometheus.Histogram
	recovery      prometheus.Gauge
}

func newStorage(r *prometheus.Registry) *Storage {
	s := &Storage{
		SnapshotWrite: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "rtcd_snapshot_write_duration_seconds",
			Help:    "Time to encode an actor's state and add it as a snapshot to the batch of the change that made it due.",
			Buckets: snapshotBucketsSeconds,
		}),
		recovery: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rtcd_recovery_duration_seconds",
			Help: "Time the last start took to recover every actor from its snapshot and journal, before serving.",
		}),
	}
	r.MustRegister(s.SnapshotWrite, s.recovery)
	return s
}

// Recovered records how long the recovery at start took.
func (s *Storage) Recovered(seconds float64) { s.recovery.Set(seconds) }

// PebbleReading is what the Pebble collector reads at each scrape.
type PebbleReading struct {
	Metrics     *pebble.Metrics
	WriteStalls int64 // write stalls begun since the store opened (persistence's event listener)
}

// RegisterPebble registers the collector of Pebble's metrics; read is
// called at each scrape (pebble.DB.Metrics is cheap: a copy of counters).
// The private listener stops before the store closes, so no scrape reads
// a closed database.
func (m *Metrics) RegisterPebble(read func() PebbleReading) {
	m.Registry.MustRegister(&pebbleCollector{read: read})
}

// pebbleCollector turns a Pebble metrics reading into rtcd_pebble_*
// families. Pebble's counters are cumulative since the database opened,
// which is since this process started: they are Prometheus counters.
type pebbleCollector struct {
	read func() PebbleReading
}

var pebbleDescs = struct {
	compactions, compactionsInProgress, compactionDebt, flushes, l0Files, l0Sublevels, readAmp,
	walFiles, walSize, walWritten, diskUsage, memtableSize, writeStalls *prometheus.Desc
}{
	compactions:           prometheus.NewDesc("rtcd_pebble_compactions_total", "Compactions Pebble completed.", nil, nil),
	compactionsInProgress: prometheus.NewDesc("rtcd_pebble_compactions_in_progress", "Compactions Pebble is running.", nil, nil),
	compactionDebt:        prometheus.NewDesc("rtcd_pebble_compaction_debt_bytes", "Bytes Pebble estimates it must compact to bring the LSM back into shape.", nil, nil),
	flushes:               prometheus.NewDesc("rtcd_pebble_flushes_total", "Memtable flushes Pebble completed.", nil, nil),
	l0Files:               prometheus.NewDesc("rtcd_pebble_l0_files", "Tables in level 0 of the LSM; many means compactions fall behind and writes will stall.", nil, nil),
	l0Sublevels:           prometheus.NewDesc("rtcd_pebble_l0_sublevels", "Sublevels of level 0 (each one more table a read may consult).", nil, nil),
	readAmp:               prometheus.NewDesc("rtcd_pebble_read_amplification", "Tables or sublevels a point read may consult (Pebble's read amplification).", nil, nil),
	walFiles:              prometheus.NewDesc("rtcd_pebble_wal_files", "Live write-ahead log files.", nil, nil),
	walSize:               prometheus.NewDesc("rtcd_pebble_wal_size_bytes", "Bytes on disk of the live write-ahead log files.", nil, nil),
	walWritten:            prometheus.NewDesc("rtcd_pebble_wal_bytes_written_total", "Bytes written to the write-ahead log, framing included.", nil, nil),
	diskUsage:             prometheus.NewDesc("rtcd_pebble_disk_usage_bytes", "Bytes the database takes on disk: tables, write-ahead log, manifests and files awaiting deletion.", nil, nil),
	memtableSize:          prometheus.NewDesc("rtcd_pebble_memtable_size_bytes", "Bytes allocated by memtables, the ones being flushed included.", nil, nil),
	writeStalls:           prometheus.NewDesc("rtcd_pebble_write_stalls_total", "Times Pebble stalled writes (too many memtables or level 0 files).", nil, nil),
}

func (c *pebbleCollector) Describe(ch chan<- *prometheus.Desc) {
	d := pebbleDescs
	for _, desc := range []*prometheus.Desc{d.compactions, d.compactionsInProgress, d.compactionDebt, d.flushes, d.l0Files,
		d.l0Sublevels, d.readAmp, d.walFiles, d.walSize, d.walWritten, d.diskUsage, d.memtableSize, d.writeStalls} {
		ch <- desc
	}
}

func (c *pebbleCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.read()
	m := r.Metrics
	if m == nil {
		return
	}
	d := pebbleDescs
	counter := func(desc *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v)
	}
	gauge := func(desc *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v)
	}
	counter(d.compactions, float64(m.Compact.Count))
	gauge(d.compactionsInProgress, float64(m.Compact.NumInProgress))
	gauge(d.compactionDebt, float64(m.Compact.EstimatedDebt))
	counter(d.flushes, float64(m.Flush.Count))
	gauge(d.l0Files, float64(m.Levels[0].TablesCount))
	gauge(d.l0Sublevels, float64(m.Levels[0].Sublevels))
	gauge(d.readAmp, float64(m.ReadAmp()))
	gauge(d.walFiles, float64(m.WAL.Files))
	gauge(d.walSize, float64(m.WAL.PhysicalSize))
	counter(d.walWritten, float64(m.WAL.BytesWritten))
	gauge(d.diskUsage, float64(m.DiskSpaceUsage()))
	gauge(d.memtableSize, float64(m.MemTable.Size))
	counter(d.writeStalls, float64(r.WriteStalls))
}
