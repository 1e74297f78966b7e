// Package tracing is the edge's OpenTelemetry tracing: off by default; on,
// a span per request with child spans for the cache lookup, a coalesced
// wait, the shared tier and the legacy call, exported over OTLP/HTTP, and
// W3C traceparent passed on to the legacy host.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"tradergate/cache/configerr"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Config is the `tracing:` section.
type Config struct {
	// Endpoint is the OTLP/HTTP collector, e.g. "http://127.0.0.1:4318";
	// zero: tracing off (no cost on any request).
	Endpoint string `yaml:"endpoint"`
	// SamplingRatio is the share of requests traced, 0 to 1, unless the
	// caller's traceparent already says sampled; zero: 0.01.
	SamplingRatio float64 `yaml:"sampling_ratio"`
	// ServiceName names the edge in traces; zero: "tradergate".
	ServiceName string `yaml:"service_name"`
}

// Enabled reports whether tracing is on.
func (c Config) Enabled() bool { return c.Endpoint != "" }

// ApplyDefaults fills the zero fields with the defaults their comments name.
func (c *Config) ApplyDefaults() {
	if c.SamplingRatio == 0 {
		c.SamplingRatio = 0.01
	}
	if c.ServiceName == "" {
		c.ServiceName = "tradergate"
	}
}

// Validate reports every problem, each naming its field path, joined.
func (c *Config) Validate() error {
	var errs configerr.List
	if c.Endpoint != "" {
		if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			errs.Add("tracing.endpoint", "must be the http(s) URL of an OTLP/HTTP collector, got %q", c.Endpoint)
		}
	}
	if c.SamplingRatio < 0 || c.SamplingRatio > 1 {
		errs.Add("tracing.sampling_ratio", "must be 0 to 1, got %v", c.SamplingRatio)
	}
	return errs.Err()
}

// Tracing is the edge's tracer and how it ends.
type Tracing struct {
	Tracer     trace.Tracer
	Propagator propagation.TextMapPropagator
	provider   *sdktrace.TracerProvider
}

// Provider is the tracer provider, for instrumented clients (otelhttp).
func (t *Tracing) Provider() trace.TracerProvider { return t.provider }

// Options are what New takes besides the configuration.
type Options struct {
	// Exporter replaces the OTLP exporter (tests use an in-memory
	// recorder); nil: OTLP/HTTP to Config.Endpoint.
	Exporter sdktrace.SpanExporter
	// SpanProcessor, when set, receives the spans instead of a batching
	// exporter (tests' tracetest.SpanRecorder).
	SpanProcessor sdktrace.SpanProcessor
}

// New starts tracing for cfg, or returns nil when it is off.
func New(cfg Config, opt Options) (*Tracing, error) {
	if !cfg.Enabled() && opt.SpanProcessor == nil {
		return nil, nil
	}
	sp := opt.SpanProcessor
	if sp == nil {
		exp := opt.Exporter
		if exp == nil {
			var err error
			exp, err = otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(cfg.Endpoint+"/v1/traces"))
			if err != nil {
				return nil, fmt.Errorf("tracing.endpoint: %w", err)
			}
		}
		sp = sdktrace.NewBatchSpanProcessor(exp)
	}
	p := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(sp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", cfg.ServiceName))),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SamplingRatio))),
	)
	return &Tracing{
		Tracer:     p.Tracer("tradergate"),
		Propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		provider:   p,
	}, nil
}

// Close flushes the spans not yet exported, for up to five seconds.
func (t *Tracing) Close() error {
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return errors.Join(t.provider.Shutdown(ctx))
}
