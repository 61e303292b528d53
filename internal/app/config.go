package app

import (
	"cmp"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// Job sizes New picks when Worker.JobSize is 0: small jobs for an LLM so the
// model calls run in parallel over the workers, large ones for the offline
// rules so that per-job overhead does not dominate.
const (
	JobSizeLLM   = 1
	JobSizeRules = 50
)

// Replay's batching. A replay enqueues the whole stream at once, so per-job
// overhead matters more than latency: its jobs are larger than ingest's, and
// with an LLM, 10 turns a job still spreads the model calls over the workers.
const (
	ReplayBatchSize    = 500
	ReplayJobSizeRules = 100
	ReplayJobSizeLLM   = 10
)

// Config configures an App: one group per component, each the component's
// own Config, plus what the App shares between them. Zero fields take the
// components' defaults (see Defaults); the fields the App sets itself are
// named in each group's comment.
type Config struct {
	// Logger receives every component's logs (River's too). Default
	// slog.Default().
	Logger *slog.Logger
	// Version is the service version the enrich service reports. Default
	// enricher.DefaultVersion.
	Version string
	// Prefix is the subject prefix and Stream the turn stream, shared by the
	// worker, the enrich service and the admin operations. Defaults
	// events.DefaultPrefix and events.DefaultStream.
	Prefix, Stream string
	// NoMigrate makes Start, Replay and EmbedBackfill leave the schema as
	// it is and refuse a database with migrations pending (--migrate=false:
	// a rolling upgrade whose migrations an operator applies once, with
	// memoryd migrate). Default false: they apply them.
	NoMigrate bool
	// Role is what Start runs: RoleAll, the default, everything; RoleEnrich
	// or RoleIngest one side, so that enrich and extraction can be placed
	// and scaled apart (see Role).
	Role Role

	// NATS is the connection every component shares.
	NATS NATSConfig
	// Conn, when set, is used instead of connecting with NATS; the App does
	// not close it. For tests and tools that hold a connection already.
	Conn *nats.Conn
	// Store opens Postgres. Its Logger is set by the App; its defaults
	// other than URL are left to store.Open.
	Store store.Config
	// Worker is the ingest consumer and the extraction workers. Conn, Store,
	// Extractor, Logger, Observer, Prefix and Stream are set by the App.
	// JobSize 0 picks JobSizeLLM with an LLM and JobSizeRules (at most
	// BatchSize) with the offline rules.
	Worker worker.Config
	// Changes publishes the changes of users' memory (issue 20 item 4).
	// Conn, Store, Logger and Prefix are set by the App.
	Changes worker.ChangesConfig
	// EnrichPool is the Postgres pool enrich reads from, apart from Store's
	// (which ingest, extraction and the other endpoints share), so that
	// they cannot take enrich's connections. Its URL is Store's.
	EnrichPool EnrichPoolConfig
	// BackPressure holds ingest and extraction back while enrich is slow
	// (the App sets Worker.Pacer from it).
	BackPressure BackPressureConfig
	// Enricher is the enrich service. Conn, Store, Logger, Observer,
	// Prefix, Version and Forget are set by the App.
	Enricher enricher.Config
	// LLM is the model extraction uses; an empty BaseURL selects the offline
	// rule-based extractor instead. Logger is set by the App.
	LLM extractor.LLMConfig
	// Embed is the embeddings endpoint context items are embedded with (as
	// River work, see worker's embed.go); an empty BaseURL, the default,
	// turns embedding off. Its other defaults are embedding.Config's.
	Embed embedding.Config
	// Ops serves /metrics, /healthz and /readyz when Addr is set.
	Ops OpsConfig
	// RiverUI mounts River's UI on the Ops endpoint; off by default.
	RiverUI RiverUIConfig
	// Tracing sends OpenTelemetry traces when OTLPEndpoint (or Provider) is
	// set (tracing.go); the App sets the components' TracerProvider from
	// it. Default off.
	Tracing TracingConfig
}

// Role is what a serving App runs (Config.Role). Every role publishes
// memory changes and serves the operators' endpoint; the admin operations
// (replay, forget, prune, ...) do not depend on it.
type Role string

const (
	// RoleAll runs the ingest consumer, the extraction workers (River's
	// extract, embed and document queues, and the leader's reconcile,
	// takeover and pruning) and the enrich service.
	RoleAll Role = "all"
	// RoleEnrich answers the memory.* requests (enrich, search, the memory
	// tools, documents, forget, stats) and runs no worker: it neither
	// consumes the turn stream nor works River jobs. The jobs its requests
	// enqueue (a large document's chunking, embeddings) are worked by the
	// RoleAll or RoleIngest processes beside it, which must exist.
	RoleEnrich Role = "enrich"
	// RoleIngest runs the ingest consumer and the workers, and answers no
	// memory.* request.
	RoleIngest Role = "ingest"
)

// runs reports whether a process of role r runs the worker (ingest and
// extraction) and the enrich service.
func (r Role) runs() (worker, enrich bool) {
	return r != RoleEnrich, r != RoleIngest
}

// OpsConfig configures the HTTP endpoint for operators.
type OpsConfig struct {
	// Addr is the listen address, e.g. 127.0.0.1:9090; empty: no endpoint.
	Addr string
	// Pprof also serves Go's pprof under /debug/pprof/.
	Pprof bool
}

// NATSConfig is how to connect to NATS.
type NATSConfig struct {
	// URL is the server URL(s), comma separated. Default nats.DefaultURL.
	URL string
	// Name is the connection name the server shows. Default "memoryd".
	Name string
	// User and Password, Token, Creds (a .creds file) and NKey (a seed
	// file) are the credentials; all optional.
	User, Password, Token, Creds, NKey string
	// PasswordFile and TokenFile name files holding the password or the
	// token (less a trailing line break), in place of Password or Token:
	// read at every connect and reconnect, as the TLS files and Creds
	// are, so that one rotated in the file is used without a restart.
	// Optional; each excludes its value.
	PasswordFile, TokenFile string
	// CA verifies the server's TLS certificate; Cert and Key are the
	// client's certificate and key files. All optional.
	CA, Cert, Key string
	// InboxPrefix replaces NATS's _INBOX as the prefix of reply subjects.
	// Optional.
	InboxPrefix string
	// PingInterval is how often the connection pings the server. A
	// connection whose server stopped answering without closing it is
	// dropped and made again after three intervals without an answer
	// (two outstanding pings), at most. Default 10s.
	PingInterval time.Duration
}

func (c NATSConfig) withDefaults() NATSConfig {
	if c.URL == "" {
		c.URL = nats.DefaultURL
	}
	if c.Name == "" {
		c.Name = "memoryd"
	}
	if c.PingInterval == 0 {
		c.PingInterval = 10 * time.Second
	}
	return c
}

// Defaults returns the configuration a zero Config runs with: every
// component's own defaults, the service's policy on top; memoryd's flags
// start from it, so that -h shows each default and none is written twice.
// The one policy a zero value cannot express is Store.CreateDatabase: a
// memoryd service creates its database when it is missing, so Defaults sets
// it (store.Open alone does not). Worker.JobSize stays 0, chosen by New from
// the extractor, and the fields New derives from others (the components'
// names, logger and version, the dead-letter stream, the process timeout,
// Enricher.StoreConns and Enricher.MaxUserEnrichInFlight) stay zero, so that a Config started from Defaults may change what they
// derive from.
func Defaults() Config {
	c := Config{Store: store.Config{CreateDatabase: true}}.withDefaults()
	c.Logger, c.Store.Logger = nil, nil
	c.Worker.JobSize = 0
	c.Worker.Logger, c.Worker.Observer, c.Worker.Prefix, c.Worker.Stream = nil, nil, "", ""
	c.Worker.DeadLetterStream, c.Worker.ProcessTimeout = "", 0
	c.Worker.OverCapExtractor, c.Worker.Now = nil, nil
	c.Enricher.Logger, c.Enricher.Prefix, c.Enricher.Version = nil, "", ""
	// Derived when the App is made, from EnrichPool and MaxInFlight as
	// they are then: a caller changing those is not held to these.
	c.Enricher.StoreConns, c.Enricher.MaxUserEnrichInFlight = 0, 0
	c.Changes.Logger, c.Changes.Prefix = nil, ""
	// Shown by the flags; embedding stays off without a BaseURL.
	c.Embed = c.Embed.WithDefaults()
	c.Embed.HTTPClient, c.Embed.Logger = nil, nil
	return c
}

// withDefaults fills every default in one place: the App's shared settings
// first, then each component's own defaults on top of them.
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Prefix == "" {
		c.Prefix = events.DefaultPrefix
	}
	if c.Stream == "" {
		c.Stream = events.DefaultStream
	}
	if c.Role == "" {
		c.Role = RoleAll
	}
	c.NATS = c.NATS.withDefaults()
	// Only the store's URL: its pool size defaults to the URL's
	// pool_max_conns, which store.Open reads.
	c.Store.Logger = c.Logger
	if c.Store.URL == "" {
		c.Store.URL = store.DefaultURL
	}

	c.EnrichPool = c.EnrichPool.withDefaults(c.Store.URL)
	c.BackPressure = c.BackPressure.withDefaults()

	c.Worker.Logger, c.Worker.Prefix, c.Worker.Stream = c.Logger, c.Prefix, c.Stream
	w := c.Worker
	w.JobSize = c.jobSize()
	c.Worker = w.WithDefaults()

	c.Changes.Logger, c.Changes.Prefix = c.Logger, c.Prefix
	c.Changes = c.Changes.WithDefaults()

	c.Enricher.Logger, c.Enricher.Prefix = c.Logger, c.Prefix
	c.Enricher.DailyTokensPerUser = c.Worker.DailyTokensPerUser // the cap stats show is the one the worker applies
	c.Enricher.StoreConns = c.EnrichPool.MaxConns               // enrich reads from the pool the App opens for it
	if c.Version != "" {
		c.Enricher.Version = c.Version
	}
	c.Enricher = c.Enricher.WithDefaults()
	c.Version = c.Enricher.Version

	if c.LLM.BaseURL != "" {
		c.LLM.Logger = c.Logger
		c.LLM = c.LLM.WithDefaults()
	}
	if c.Embed.BaseURL != "" {
		c.Embed.Logger = cmp.Or(c.Embed.Logger, c.Logger)
		c.Embed = c.Embed.WithDefaults()
	}
	c.RiverUI = c.RiverUI.withDefaults()
	c.Tracing = c.Tracing.withDefaults()
	return c
}

// jobSize is Worker.JobSize, or when 0 the size for the extractor, at most
// BatchSize (a job holds turns of one batch).
func (c Config) jobSize() int {
	batch := c.Worker.BatchSize
	if batch == 0 {
		batch = worker.Config{}.WithDefaults().BatchSize
	}
	switch {
	case c.Worker.JobSize != 0:
		return min(c.Worker.JobSize, max(batch, 1))
	case c.LLM.BaseURL != "":
		return JobSizeLLM
	}
	return min(JobSizeRules, max(batch, 1))
}

// validate names the first field no component could use. The components
// check their own fields again in their New; this catches, before anything
// connects, what would otherwise surface only after connecting.
func (c Config) validate() error {
	for _, d := range []struct {
		field string
		value any
		bad   bool
		want  string // what the value must be
	}{
		{"NATS.PingInterval", c.NATS.PingInterval, c.NATS.PingInterval < 0, "0 or more"},
		{"Worker.Workers", c.Worker.Workers, c.Worker.Workers < 1, "at least 1"},
		{"Worker.BatchSize", c.Worker.BatchSize, c.Worker.BatchSize < 1, "at least 1"},
		{"Worker.MaxAttempts", c.Worker.MaxAttempts, c.Worker.MaxAttempts < 1, "at least 1"},
		{"Worker.JobSize", c.Worker.JobSize, c.Worker.JobSize < 1, "at least 1"},
		{"Worker.JobTimeout", c.Worker.JobTimeout, c.Worker.JobTimeout <= 0, "more than 0"},
		{"Worker.AckWait", c.Worker.AckWait, c.Worker.AckWait <= 0, "more than 0"},
		{"Worker.ExtractDebounce", c.Worker.ExtractDebounce, c.Worker.ExtractDebounce < 0, "0 or more"},
		{"Worker.MaxDBSize", c.Worker.MaxDBSize, c.Worker.MaxDBSize < 0, "0 or more"},
		{"Worker.MaxContextPerUser", c.Worker.MaxContextPerUser, c.Worker.MaxContextPerUser < 0, "0 or more"},
		{"Worker.PruneInterval", c.Worker.PruneInterval, c.Worker.PruneInterval <= 0, "more than 0"},
		{"Worker.DailyTokensPerUser", c.Worker.DailyTokensPerUser, c.Worker.DailyTokensPerUser < 0, "0 or more"},
		{"Worker.DailyTokens", c.Worker.DailyTokens, c.Worker.DailyTokens < 0, "0 or more"},
		{"Worker.MaxPause", c.Worker.MaxPause, c.Worker.MaxPause <= 0, "more than 0"},
		{"Changes.PollInterval", c.Changes.PollInterval, c.Changes.PollInterval <= 0, "more than 0"},
		{"Changes.BatchSize", c.Changes.BatchSize, c.Changes.BatchSize < 1, "at least 1"},
		{"Changes.FlushTimeout", c.Changes.FlushTimeout, c.Changes.FlushTimeout <= 0, "more than 0"},
		{"Enricher.Timeout", c.Enricher.Timeout, c.Enricher.Timeout <= 0, "more than 0"},
		{"Enricher.MaxDocsSize", c.Enricher.MaxDocsSize, c.Enricher.MaxDocsSize < 0, "0 or more"},
		{"Enricher.MaxInFlight", c.Enricher.MaxInFlight, c.Enricher.MaxInFlight < 1, "at least 1"},
		{"Enricher.MaxUserEnrichInFlight", c.Enricher.MaxUserEnrichInFlight, c.Enricher.MaxUserEnrichInFlight < 1, "at least 1"},
		{"EnrichPool.MaxConns", c.EnrichPool.MaxConns, c.EnrichPool.MaxConns < 1, "at least 1"},
		{"EnrichPool.MinConns", c.EnrichPool.MinConns, c.EnrichPool.MinConns < 0 || c.EnrichPool.MinConns > c.EnrichPool.MaxConns, "0 to EnrichPool.MaxConns"},
		{"LLM.Timeout", c.LLM.Timeout, c.LLM.BaseURL != "" && c.LLM.Timeout <= 0, "more than 0"},
		{"LLM.MaxConcurrency", c.LLM.MaxConcurrency, c.LLM.BaseURL != "" && c.LLM.MaxConcurrency < 1, "at least 1"},
		{"LLM.RequestsPerSecond", c.LLM.RequestsPerSecond, c.LLM.RequestsPerSecond < 0, "0 or more"},
		{"LLM.MaxTokens", c.LLM.MaxTokens, c.LLM.BaseURL != "" && c.LLM.MaxTokens < 1, "at least 1"},
	} {
		if d.bad {
			return &ConfigError{Field: d.field, Value: fmt.Sprint(d.value), Reason: "is out of range: it must be " + d.want}
		}
	}
	if err := events.CheckPrefix(c.Prefix); err != nil {
		return &ConfigError{Field: "Prefix", Value: c.Prefix, Reason: err.Error()}
	}
	if err := events.CheckStream(c.Stream); err != nil {
		return &ConfigError{Field: "Stream", Value: c.Stream, Reason: err.Error()}
	}
	switch c.Role {
	case RoleAll, RoleEnrich, RoleIngest:
	default:
		return &ConfigError{Field: "Role", Value: string(c.Role), Reason: fmt.Sprintf("is not one of %s, %s, %s", RoleAll, RoleEnrich, RoleIngest)}
	}
	if c.LLM.BaseURL != "" && c.LLM.Model == "" {
		return &ConfigError{Field: "LLM.Model", Reason: "is required with LLM.BaseURL"}
	}
	if c.LLM.BaseURL != "" {
		// The extractor checks these too, but only once serve has connected
		// to Postgres and NATS (exit 1, no source named); here config print
		// and every command refuse them first, naming the flag (exit 2).
		if err := extractor.CheckBaseURL(c.LLM.BaseURL); err != nil {
			return &ConfigError{Field: "LLM.BaseURL", Value: fmt.Sprintf("%q", RedactURL(c.LLM.BaseURL)), Reason: err.Error()}
		}
		if c.LLM.ResponseFormat != "" {
			if err := extractor.CheckResponseFormat(c.LLM.ResponseFormat); err != nil {
				return &ConfigError{Field: "LLM.ResponseFormat", Value: fmt.Sprintf("%q", c.LLM.ResponseFormat), Reason: err.Error()}
			}
		}
	}
	if call := 2 * c.LLM.Timeout; c.LLM.BaseURL != "" && c.Worker.JobTimeout <= call {
		// One extraction call is up to two model requests (the request and
		// one correction): the worker refuses a job that cannot hold one,
		// and so does every command here, before anything starts.
		return &ConfigError{Field: "Worker.JobTimeout", Value: c.Worker.JobTimeout.String(),
			Reason: fmt.Sprintf("must be longer than one extractor call, %s (two model requests of LLM.Timeout)", call)}
	}
	if c.Embed.BaseURL != "" && (c.Enricher.EmbedTimeout <= 0 || c.Enricher.EmbedTimeout >= c.Enricher.Timeout) {
		return &ConfigError{Field: "Enricher.EmbedTimeout", Value: c.Enricher.EmbedTimeout.String(), Reason: "must be positive and under Enricher.Timeout"}
	}
	if c.Enricher.MaxUserEnrichInFlight > c.Enricher.MaxInFlight {
		return &ConfigError{Field: "Enricher.MaxUserEnrichInFlight", Value: fmt.Sprint(c.Enricher.MaxUserEnrichInFlight),
			Reason: fmt.Sprintf("is above Enricher.MaxInFlight (%d)", c.Enricher.MaxInFlight)}
	}
	if c.Enricher.VectorCacheBytes < 0 {
		return &ConfigError{Field: "Enricher.VectorCacheBytes", Value: fmt.Sprint(c.Enricher.VectorCacheBytes), Reason: "is out of range: it must be 0 or more"}
	}
	if c.Embed.BaseURL != "" {
		if err := c.Embed.Validate(); err != nil {
			// "embedding: Config.Field reason" names the field in Embed.
			// A field the reason names too ("is set with Config.APIKey")
			// is Embed's as well.
			field, reason, _ := strings.Cut(strings.TrimPrefix(err.Error(), "embedding: Config."), " ")
			return &ConfigError{Field: "Embed." + field, Reason: strings.ReplaceAll(reason, "Config.", "Embed.")}
		}
	}
	if err := c.RiverUI.validate(c.Ops.Addr); err != nil {
		return err
	}
	if err := c.Tracing.validate(); err != nil {
		return err
	}
	if p := c.NATS.InboxPrefix; strings.ContainsAny(p, "*> \t") || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") {
		return &ConfigError{Field: "NATS.InboxPrefix", Value: fmt.Sprintf("%q", p), Reason: "must be a subject without wildcards or spaces, not starting or ending with '.'"}
	}
	if p := c.NATS.InboxPrefix; p != "" && (strings.HasPrefix(p, "_R_") || !enricher.SafeReplySubject(p+".x", cmp.Or(c.Prefix, events.DefaultPrefix))) {
		// _R_ is nats-server's own, for the replies of service imports.
		// memoryd would drop every request (protocol.md, "Reply subjects").
		return &ConfigError{Field: "NATS.InboxPrefix", Value: fmt.Sprintf("%q", p), Reason: "must be _INBOX or begin with _INBOX_ (e.g. _INBOX_alice_frontend), and not be memoryd's prefix: memoryd answers only requests whose reply subject is such an inbox"}
	}
	return nil
}

// ConfigError names a Config field no component can use.
type ConfigError struct {
	// Field is the field's path in Config, e.g. "Worker.Workers".
	Field string
	// Value is the field's value as text; empty when Reason says it all.
	Value string
	// Reason says what is wrong; it may name other fields by their path.
	Reason string
}

func (e *ConfigError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("app: Config.%s %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("app: Config.%s %s %s", e.Field, e.Value, e.Reason)
}
