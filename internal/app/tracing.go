package app

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TracingConfig turns on OpenTelemetry traces: a turn's path from its
// publish to its stored memory, enrich requests and, in `memoryd proxy`,
// chat requests (see docs/operations.md, "Traces").
type TracingConfig struct {
	// OTLPEndpoint is the OTLP/HTTP endpoint spans are exported to, an
	// http(s) URL, e.g. http://127.0.0.1:4318 (a collector's or Jaeger's
	// OTLP/HTTP port; the path /v1/traces is added when the URL has none).
	// Default "": tracing off, at no cost.
	OTLPEndpoint string
	// ServiceName is the service.name of the spans. Default "memoryd".
	ServiceName string
	// Provider, when set, is used instead of an exporter to OTLPEndpoint
	// (tests, or a program that sets up OpenTelemetry itself); the App does
	// not shut it down. Default nil.
	Provider trace.TracerProvider
}

func (c TracingConfig) withDefaults() TracingConfig {
	if c.ServiceName == "" {
		c.ServiceName = "memoryd"
	}
	return c
}

// validate checks OTLPEndpoint.
func (c TracingConfig) validate() error {
	if c.OTLPEndpoint == "" {
		return nil
	}
	u, err := url.Parse(c.OTLPEndpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &ConfigError{Field: "Tracing.OTLPEndpoint", Value: fmt.Sprintf("%q", RedactURL(c.OTLPEndpoint)), Reason: "is not an http(s) URL (e.g. http://127.0.0.1:4318)"}
	}
	if u.User != nil {
		// The exporter sends only the host and path: the collector would
		// see no credentials, with nothing said. A user alone may be a
		// token, so the whole user info is masked.
		u.User = url.User("xxxxx")
		return &ConfigError{Field: "Tracing.OTLPEndpoint", Value: fmt.Sprintf("%q", u.String()),
			Reason: "carries credentials, which the OTLP exporter does not send; give them as a header instead: OTEL_EXPORTER_OTLP_HEADERS=Authorization=Basic%20<base64 of user:password>"}
	}
	return nil
}

// Tracer is a started trace pipeline: Provider for the components'
// Configs, Shutdown to flush and stop it.
type Tracer struct {
	// Provider is nil when tracing is off.
	Provider trace.TracerProvider
	sdk      *sdktrace.TracerProvider // the one this process owns, if any
}

// StartTracing returns the tracer provider cfg asks for: Provider as it is,
// an OTLP/HTTP exporter to OTLPEndpoint (spans are batched and sent in the
// background; nothing connects until the first batch), or none. It
// validates cfg, naming the bad field.
func StartTracing(cfg TracingConfig, version string) (*Tracer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Provider != nil || cfg.OTLPEndpoint == "" {
		return &Tracer{Provider: cfg.Provider}, nil
	}
	u, _ := url.Parse(cfg.OTLPEndpoint) // validated
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(u.String()))
	if err != nil {
		return nil, fmt.Errorf("tracing: otlp exporter: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", cfg.ServiceName), attribute.String("service.version", version))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracer{Provider: tp, sdk: tp}, nil
}

// Shutdown exports the spans still buffered (until ctx ends) and stops the
// exporter it owns. Its error says when spans were not exported: the
// flush first, since the SDK's Shutdown reports its own deadline but not
// an export that failed (a collector refusing connections: the spans
// lost without a word).
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil || t.sdk == nil {
		return nil
	}
	flushed := t.sdk.ForceFlush(ctx)
	if err := t.sdk.Shutdown(ctx); err != nil {
		if flushed != nil && flushed.Error() != err.Error() {
			err = errors.Join(flushed, err)
		}
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	if flushed != nil {
		return fmt.Errorf("tracing: export at stop: %w", flushed)
	}
	return nil
}

// tracerLocked starts the App's trace pipeline once; a.mu is held.
func (a *App) tracerLocked() (trace.TracerProvider, error) {
	if a.tracer == nil {
		t, err := StartTracing(a.cfg.Tracing, a.cfg.Version)
		if err != nil {
			return nil, err
		}
		if t.sdk != nil {
			// Nothing else tells until an export fails.
			a.logger.Info("tracing: on, spans exported over OTLP/HTTP in the background", "otlp_endpoint", RedactURL(a.cfg.Tracing.OTLPEndpoint))
		}
		a.tracer = t
	}
	return a.tracer.Provider, nil
}
