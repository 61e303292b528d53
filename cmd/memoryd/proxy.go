package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/memoryd/memoryd/apikeys"
	"github.com/memoryd/memoryd/internal/app"
	"github.com/memoryd/memoryd/internal/secretfile"
	"github.com/memoryd/memoryd/proxy"
)

// runProxy serves the OpenAI-compatible endpoint with memory until ctx ends.
func runProxy(ctx context.Context, a *cli, args []string) error {
	var (
		conn            connOptions
		cfg             proxy.Config
		keysFile        string
		keyHashes       string
		shutdownTimeout time.Duration
		metrics         bool
		tracing         app.TracingConfig
	)
	f := newFlags("proxy", `Usage: memoryd proxy --upstream URL --keys FILE [flags]

Serves an OpenAI-compatible API (POST /v1/chat/completions, streaming or not;
GET /v1/models passed through) in front of the OpenAI-compatible server at
--upstream. Each request's user is the one its API key stands for ('memoryd
keys add' creates keys); the last user message is enriched with that user's
memory before it is forwarded, and the finished turn is published to memoryd.
A request with the header 'X-Memory: off' or the body field "memory": false
is forwarded without either. A running 'memoryd serve' answers enrich and
stores the turns.`)
	conn.register(f)
	f.Lookup("database-url").Usage = "not used: this command talks to memoryd over NATS only"
	f.String(&cfg.Upstream, "upstream", "", "OpenAI-compatible base URL to forward to, e.g. http://127.0.0.1:11434/v1 (required)")
	f.Secret(&cfg.UpstreamKey, "upstream-key", "API key sent to the upstream (never the client's memoryd key)")
	f.String(&cfg.UpstreamKeyFile, "upstream-key-file", "", "file holding the upstream's API key (instead of --upstream-key), read again when it changes: a key rotated in the file is sent from the next request on, without a restart")
	f.String(&cfg.UpstreamKeyHeader, "upstream-key-header", "", "header --upstream-key (or --upstream-key-file's key) is sent in, as it is (e.g. api-key for Azure OpenAI); empty: Authorization: Bearer")
	f.CommandEnvs("proxy") // MEMORYD_PROXY_LISTEN, ... (commandEnvs)
	f.String(&cfg.Listen, "listen", proxy.DefaultListen, "address the proxy listens on")
	f.String(&keysFile, "keys", "", "API key file, lines 'sha256:<hex> <user_id>' (memoryd keys add); reloaded on change")
	f.Secret(&keyHashes, "key-hashes", "more key lines in the --keys format, separated by ';'")
	f.String(&cfg.TrustedUserHeader, "trusted-user-header", "", "header a trusted gateway sets to the user id; only behind such a gateway (empty: off, keys only)")
	f.String(&cfg.EnrichFormat, "enrich-format", "inline", "injection format appended to the last user message: inline, system or markdown")
	f.Duration(&cfg.EnrichBudget, "enrich-budget", proxy.DefaultEnrichBudget, "bound on enrich; past it the request is forwarded unenriched")
	f.Duration(&cfg.UpstreamTimeout, "upstream-timeout", proxy.DefaultUpstreamTimeout, "bound on the wait for the upstream's response headers (a stream may then run longer); past it the client gets 504")
	f.Duration(&cfg.UpstreamIdle, "upstream-idle", proxy.DefaultUpstreamIdle, "bound on each wait for more of the upstream's response body once its headers came (a stream's next chunk); past it the client's response is cut and nothing is remembered")
	f.Int64(&cfg.MaxBodyBytes, "max-request-bytes", proxy.DefaultMaxBodyBytes, "largest request body accepted (a chat with images sent inline needs more); a larger one gets 413")
	f.Duration(&shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long requests in flight may take to finish on SIGINT/SIGTERM")

	// Prometheus metrics on the proxy's listener (issue 20).
	f.Bool(&metrics, "metrics", true, "serve Prometheus metrics at GET /metrics on --listen, without a key (counts and latencies, no user data)")
	// Traces (issue 20 item 5).
	f.String(&tracing.OTLPEndpoint, "otlp-endpoint", "", otlpEndpointUsage)
	if err := f.Parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return f.usageErr("unexpected argument %q", f.Arg(0))
	}
	if cfg.MaxBodyBytes <= 0 {
		return f.usageErr("--max-request-bytes %d is not a positive size", cfg.MaxBodyBytes)
	}
	if cfg.Upstream == "" {
		return f.usageErr("--upstream is required")
	}
	if u, err := url.Parse(cfg.Upstream); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return f.usageErr("--upstream %q is not an http or https URL, e.g. http://127.0.0.1:11434/v1", cfg.Upstream)
	}
	if cfg.UpstreamKey != "" && cfg.UpstreamKeyFile != "" {
		return f.usageErr("--upstream-key and --upstream-key-file are both set; give one")
	}
	logger, err := conn.logger(a)
	if err != nil {
		return err
	}
	for _, d := range f.deprecatedEnv {
		logger.Warn(d)
	}
	// Before connecting: a bad --otlp-endpoint is a bad flag (exit 2,
	// named as serve names it), whether NATS is up or not.
	tracing.ServiceName = "memoryd-proxy"
	routeOTelErrors(logger, tracing.OTLPEndpoint)
	tracer, err := app.StartTracing(tracing, version)
	if cerr := (*app.ConfigError)(nil); errors.As(err, &cerr) {
		return f.usageErr("%s", configErrorFlags(cerr))
	} else if err != nil {
		return err
	}
	// stopBy is when the stop must end, set as it begins; the last spans
	// are sent by then (a reserve of it is kept for them), not within a
	// --shutdown-timeout of their own (a stop took twice the timeout).
	var stopBy time.Time
	defer func() {
		if stopBy.IsZero() {
			stopBy = time.Now().Add(shutdownTimeout)
		}
		sctx, cancel := context.WithDeadline(context.Background(), stopBy)
		defer cancel()
		if err := tracer.Shutdown(sctx); err != nil {
			// As serve: spans lost are no failed stop, but said.
			logger.Warn("traces still buffered at stop were not all exported", "error", err)
		}
	}()
	if keysFile != "" || keyHashes != "" {
		keys, err := apikeys.New(apikeys.Config{File: keysFile, Text: keyHashes, Logger: logger})
		if err != nil {
			return err
		}
		if keys.Len() == 0 {
			logger.Warn("no API keys: every request is refused until keys are added (memoryd keys add)", "file", keysFile)
		}
		keys.Start()
		defer keys.Stop()
		cfg.Keys = keys
	} else if cfg.TrustedUserHeader == "" {
		return f.usageErr("--keys (or --key-hashes) is required unless --trusted-user-header is set")
	}
	// Before connecting, as serve checks --llm-api-key-file: a mistyped
	// path is said as such, not after "NATS is not reachable". The proxy
	// opens the file again (proxy.New), a second read of a small file.
	if _, err := secretfile.Open(cfg.UpstreamKeyFile, "upstream key", logger); err != nil {
		return fmt.Errorf("--upstream-key-file: %w", err)
	}
	nc, err := conn.connectNATS("memoryd-proxy", logger)
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := checkInbox(nc); err != nil {
		return err
	}
	cfg.Conn, cfg.Prefix, cfg.Logger = nc, conn.prefix, logger
	if metrics {
		m := app.NewProxyMetrics(app.ProxyLabels{Endpoints: proxy.Endpoints(), Outcomes: proxy.Outcomes(), EnrichOutcomes: proxy.EnrichOutcomes(), Version: version})
		cfg.Observer, cfg.Metrics = m, m.Handler()
	}
	cfg.TracerProvider = tracer.Provider
	p, err := proxy.New(cfg)
	if err != nil {
		return err
	}
	if err := p.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "memoryd proxy: listening on http://%s/v1\n", p.Addr())
	var served error
	select {
	case <-ctx.Done():
	case served = <-p.Done(): // stopped serving by itself: the turns being published still are
	}
	logger.Info("shutting down", "timeout", shutdownTimeout)
	stopBy = time.Now().Add(shutdownTimeout)
	stopCtx, cancel := context.WithDeadline(context.Background(), stopBy.Add(-tracingReserve(tracing, shutdownTimeout)))
	defer cancel()
	err = p.Stop(stopCtx)
	switch {
	case served != nil:
		return fmt.Errorf("proxy stopped serving: %w", served)
	case errors.Is(err, proxy.ErrRequestsCut):
		// As serve: what the deadline cut is said, and the stop is done.
		logger.Warn("stopped past --shutdown-timeout", "error", err)
	case err != nil:
		return err
	}
	logger.Info("stopped")
	return nil
}

// tracingReserve is the part of --shutdown-timeout a stop keeps for the
// last spans when tracing is on: a quarter, at most 5 s, as serve keeps for
// its requests.
func tracingReserve(t app.TracingConfig, timeout time.Duration) time.Duration {
	if t.OTLPEndpoint == "" {
		return 0
	}
	return min(timeout/4, 5*time.Second)
}
