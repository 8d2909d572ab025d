package tracing

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Protocols an OTLP exporter speaks here.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Config is what the environment does not say.
type Config struct {
	// ServiceName is service.name unless OTEL_SERVICE_NAME or
	// OTEL_RESOURCE_ATTRIBUTES set it. Default "gaffer".
	ServiceName string
	// Version is service.version. Default: none.
	Version string
}

// Provider is the tracer provider the environment asked for.
type Provider struct {
	trace.TracerProvider
	// Enabled: spans are exported. Off, TracerProvider is the no-op one.
	Enabled bool
	// Protocol and Endpoint are the exporter's, for the start-up log
	// ("" when off). Endpoint is as configured (a URL or host:port), or
	// the exporter's default.
	Protocol, Endpoint string
	// Addr is Endpoint as host:port, for the outbound guard; "" when off
	// or when Endpoint cannot be read as one.
	Addr string

	sdk *sdktrace.TracerProvider
}

// Shutdown exports the spans still buffered and stops the exporter; ctx
// bounds the wait. It does nothing when tracing is off.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.sdk == nil {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}

// FromEnv reads the OTEL_* variables and returns the provider they ask
// for. An unsupported exporter or protocol is an error naming the
// variable. ctx bounds reading the resource; nothing connects yet (the
// exporters dial on first export).
func FromEnv(ctx context.Context, cfg Config) (*Provider, error) {
	on, err := enabled()
	if err != nil || !on {
		return &Provider{TracerProvider: noop.NewTracerProvider()}, err
	}
	protocol, name := env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	if protocol == "" {
		protocol = ProtocolHTTP
	}
	endpoint, _ := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	var (
		exp         sdktrace.SpanExporter
		defaultPort string
	)
	switch protocol {
	case ProtocolHTTP:
		defaultPort = "4318"
		exp, err = otlptracehttp.New(ctx)
	case ProtocolGRPC:
		defaultPort = "4317"
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("%s: %q is not supported: use %s or %s", name, protocol, ProtocolHTTP, ProtocolGRPC)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	if endpoint == "" {
		endpoint = "localhost:" + defaultPort
	}
	if cfg.ServiceName == "" {
		cfg.ServiceName = "gaffer"
	}
	defaults := []attribute.KeyValue{attribute.String("service.name", cfg.ServiceName)}
	if cfg.Version != "" {
		defaults = append(defaults, attribute.String("service.version", cfg.Version))
	}
	// Later detectors win: the environment over the defaults.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithHost(),
		resource.WithAttributes(defaults...), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		exp.Shutdown(ctx)
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Provider{TracerProvider: sdk, Enabled: true, Protocol: protocol, Endpoint: endpoint,
		Addr: hostPort(endpoint, defaultPort), sdk: sdk}, nil
}

// hostPort reads an OTLP endpoint, a URL or host[:port], as host:port.
func hostPort(endpoint, defaultPort string) string {
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil || u.Hostname() == "" {
			return ""
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		if port == "" {
			port = defaultPort
		}
		return net.JoinHostPort(u.Hostname(), port)
	}
	if host, port, err := net.SplitHostPort(endpoint); err == nil {
		return net.JoinHostPort(host, port)
	}
	return net.JoinHostPort(endpoint, defaultPort)
}

// enabled reads OTEL_SDK_DISABLED and OTEL_TRACES_EXPORTER.
func enabled() (bool, error) {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	exporters := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))
	if exporters == "" {
		endpoint, _ := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
		return endpoint != "", nil
	}
	on := false
	for _, e := range strings.Split(exporters, ",") {
		switch e = strings.ToLower(strings.TrimSpace(e)); e {
		case "otlp":
			on = true
		case "none", "":
		default:
			return false, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not supported: use otlp or none", e)
		}
	}
	return on, nil
}

// env is the first of the variables that is set, and its name (the last
// one's when none is).
func env(names ...string) (value, name string) {
	for _, name = range names {
		if v := strings.TrimSpace(os.Getenv(name)); v != "" {
			return v, name
		}
	}
	return "", name
}
