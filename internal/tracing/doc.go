// Package tracing sets up OpenTelemetry's SDK for gaffer server and dev
// from the standard OTEL_* environment variables, and hands the node the
// tracer provider its attempt spans go through.
//
// Tracing is off unless asked for: OTEL_TRACES_EXPORTER=otlp, or an OTLP
// endpoint variable set while OTEL_TRACES_EXPORTER is unset (the
// specification's default exporter is otlp; Gaffer's is none, so that a
// node never sends spans nowhere in particular). OTEL_SDK_DISABLED=true
// wins over both. Off, the provider is the no-op one, which the job
// package recognises: attempts then pay nothing for tracing.
//
// On, spans go to one OTLP exporter, http/protobuf (the specification's
// default) or grpc (OTEL_EXPORTER_OTLP_PROTOCOL, or its _TRACES_ form),
// through a batch span processor. The exporter reads its own variables
// (endpoint, headers, timeout, compression, TLS files), the SDK its
// sampler (OTEL_TRACES_SAMPLER, _ARG) and batching (OTEL_BSP_*), and the
// resource takes OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES over the
// defaults (service.name "gaffer", service.version the binary's).
//
// What this package must never do: install a global provider or
// propagator. Libraries in the same process (the etcd client among them)
// pick up the global provider, and would start exporting spans of their
// own that nobody asked for.
package tracing
