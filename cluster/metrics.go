package cluster

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	isLeader        prometheus.Gauge
	leaderChanges   prometheus.Counter
	fenceRejections prometheus.Counter
	etcdConnected   prometheus.Gauge
	nodes           *prometheus.GaugeVec
	draining        prometheus.Gauge
	drainInFlight   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "gaffer", Subsystem: "cluster", Name: name, Help: help})
	}
	m := &metrics{
		isLeader: gauge("is_leader", "1 while this node is the proven leader."),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "gaffer", Subsystem: "cluster", Name: "leader_changes_total",
			Help: "Times this node gained or lost leadership."}),
		fenceRejections: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "gaffer", Subsystem: "cluster", Name: "fence_rejections_total",
			Help: "Leader-only writes from this node refused by the PostgreSQL fence (a newer leader existed)."}),
		etcdConnected: gauge("etcd_connected", "1 while this node holds a live etcd session."),
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "gaffer", Subsystem: "cluster", Name: "nodes",
			Help: "Nodes by state, as the leader sees them in the nodes table."}, []string{"state"}),
		draining:      gauge("draining", "1 while this node drains."),
		drainInFlight: gauge("drain_in_flight", "Jobs still running on this node while it drains."),
	}
	if reg != nil {
		reg.MustRegister(m.isLeader, m.leaderChanges, m.fenceRejections, m.etcdConnected, m.nodes, m.draining, m.drainInFlight)
	}
	return m
}
