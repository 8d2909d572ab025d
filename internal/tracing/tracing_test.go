package tracing

import (
	"context"
	"strings"
	"testing"
)

// otelVars are the variables FromEnv reads; each case starts with none.
var otelVars = []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"}

func TestFromEnv(t *testing.T) {
	for _, c := range []struct {
		name     string
		env      map[string]string
		on       bool
		protocol string
		addr     string
		err      string
	}{
		{name: "nothing set: off"},
		{name: "none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}},
		{name: "otlp", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true, protocol: ProtocolHTTP, addr: "localhost:4318"},
		{name: "an endpoint alone", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector.example:443"},
			on: true, protocol: ProtocolHTTP, addr: "collector.example:443"},
		{name: "traces endpoint, grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "127.0.0.1:4317",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true, protocol: ProtocolGRPC, addr: "127.0.0.1:4317"},
		{name: "disabled wins", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "zipkin", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER"},
		{name: "http/json", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
			err: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, v := range otelVars {
				t.Setenv(v, "")
			}
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			p, err := FromEnv(context.Background(), Config{Version: "test"})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one naming %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer p.Shutdown(context.Background())
			if p.Enabled != c.on || p.Protocol != c.protocol || p.Addr != c.addr {
				t.Fatalf("enabled %v protocol %q addr %q; want %v %q %q", p.Enabled, p.Protocol, p.Addr, c.on, c.protocol, c.addr)
			}
		})
	}
}

func TestHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"http://collector:4318/v1/traces": "collector:4318",
		"https://collector":               "collector:443",
		"http://[::1]:4318":               "[::1]:4318",
		"collector:4317":                  "collector:4317",
		"collector":                       "collector:4317",
	} {
		if got := hostPort(in, "4317"); got != want {
			t.Errorf("hostPort(%q) = %q, want %q", in, got, want)
		}
	}
}
