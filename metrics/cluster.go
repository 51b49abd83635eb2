package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Cluster watches this node's part in a cluster (--cluster-name,
// docs/cluster.md); on a single node its members read 0 and nothing is
// fenced.
type Cluster struct {
	members       atomic.Pointer[func() int]
	fencedBatches prometheus.Counter
	mediaNodes    prometheus.Gauge
}

func newCluster(r *prometheus.Registry) *Cluster {
	c := &Cluster{fencedBatches: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "rtcd_cluster_fenced_batches_total",
		Help: "Batches the store refused because another node took over their journal (their actors moved); none was acknowledged.",
	})}
	members := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rtcd_cluster_members",
		Help: "Members of the cluster this node sees, itself included while its lease holds (0 on a single node).",
	}, func() float64 {
		if f := c.members.Load(); f != nil {
			return float64((*f)())
		}
		return 0
	})
	mediaNodes := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rtcd_cluster_media_nodes",
		Help: "Media nodes run on their own that are registered with the cluster, as this node sees them (0 on a single node).",
	})
	c.mediaNodes = mediaNodes
	r.MustRegister(c.fencedBatches, members, mediaNodes)
	return c
}

// SetMediaNodes sets how many media nodes are registered.
func (c *Cluster) SetMediaNodes(n int) { c.mediaNodes.Set(float64(n)) }

// SetMembers gives the gauge its source.
func (c *Cluster) SetMembers(f func() int) { c.members.Store(&f) }

// Fenced counts one batch refused because its journal moved.
func (c *Cluster) Fenced() { c.fencedBatches.Inc() }
