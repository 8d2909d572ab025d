package cron

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	occurrences *prometheus.CounterVec
	lateness    prometheus.Histogram
	errors      prometheus.Counter
	budgetWaits prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		occurrences: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "gaffer", Subsystem: "cron", Name: "occurrences_total",
			Help: "Cron occurrences handled, by outcome: fired, skipped (overlap), missed (missed-fire policy)."}, []string{"status"}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "gaffer", Subsystem: "cron", Name: "lateness_seconds",
			Help:    "From an occurrence's scheduled instant to its job's insert, by the database clock.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "gaffer", Subsystem: "cron", Name: "fire_errors_total",
			Help: "Firings of a cron entry that failed (recorded on the entry as last_error)."}),
		budgetWaits: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "gaffer", Subsystem: "cron", Name: "budget_waits_total",
			Help: "Due cron entries left for a later pass because their tenant's fire budget was spent."}),
	}
	if reg != nil {
		reg.MustRegister(m.occurrences, m.lateness, m.errors, m.budgetWaits)
	}
	return m
}
