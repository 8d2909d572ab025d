package main

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel"

	"github.com/gafferhq/gaffer/internal/tracing"
)

// startTracing sets up the tracer provider the OTEL_* variables ask for
// (off unless they ask; see docs/configuration.md, "Tracing"). stop exports what is
// buffered, waiting at most five seconds.
func startTracing(ctx context.Context, log hclog.Logger) (tp *tracing.Provider, stop func(), err error) {
	tp, err = tracing.FromEnv(ctx, tracing.Config{Version: version()})
	if err != nil {
		return nil, nil, usageError(err.Error())
	}
	if !tp.Enabled {
		return tp, func() {}, nil
	}
	// The SDK reports export failures through the global handler: into
	// the node's log, not the standard logger's stderr lines.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("export spans", "error", err)
	}))
	log.Info("tracing on", "protocol", tp.Protocol, "endpoint", tp.Endpoint)
	return tp, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("flush spans", "error", err)
		}
	}, nil
}

// tracingEndpoints are the endpoints http jobs must not reach: the
// collector takes spans from anyone who can reach it.
func tracingEndpoints(tp *tracing.Provider) []string {
	if tp.Addr == "" {
		return nil
	}
	return []string{tp.Addr}
}
