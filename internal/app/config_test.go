package app

import (
	"errors"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// TestDefaults: a zero Config takes the components' own defaults, the
// shared settings reach every component, and the job size follows the
// extractor unless set.
func TestDefaults(t *testing.T) {
	t.Parallel()
	wdef := worker.Config{}.WithDefaults()
	for _, tt := range []struct {
		name  string
		cfg   Config
		check func(Config) bool
	}{
		{"worker defaults", Config{}, func(c Config) bool {
			return c.Worker.Workers == wdef.Workers && c.Worker.AckWait == wdef.AckWait && c.Worker.Durable == wdef.Durable
		}},
		{"enricher defaults", Config{}, func(c Config) bool {
			return c.Enricher.Timeout == enricher.Config{}.WithDefaults().Timeout && c.Version == enricher.DefaultVersion
		}},
		// The per-user share follows the total unless set, and takes at
		// most half of enrich's connections.
		{"enrich per-user share", Config{Enricher: enricher.Config{MaxInFlight: 200}, EnrichPool: EnrichPoolConfig{MaxConns: 200}}, func(c Config) bool {
			return c.Enricher.MaxUserEnrichInFlight == 50
		}},
		{"enrich per-user within half the pool", Config{}, func(c Config) bool {
			return c.Enricher.StoreConns == DefaultEnrichMaxConns && c.Enricher.MaxUserEnrichInFlight == DefaultEnrichMaxConns/2
		}},
		{"enrich per-user follows --enrich-max-conns", Config{EnrichPool: EnrichPoolConfig{MaxConns: 20}}, func(c Config) bool {
			return c.Enricher.StoreConns == 20 && c.Enricher.MaxUserEnrichInFlight == 10
		}},
		{"enrich per-user under the URL's pool cap", Config{Store: store.Config{URL: store.DefaultURL + "&pool_max_conns=3"}}, func(c Config) bool {
			return c.Enricher.StoreConns == 3 && c.Enricher.MaxUserEnrichInFlight == 1
		}},
		{"enrich per-user from Defaults with another pool", func() Config { d := Defaults(); d.EnrichPool.MaxConns = 40; return d }(), func(c Config) bool {
			return c.Enricher.StoreConns == 40 && c.Enricher.MaxUserEnrichInFlight == 16
		}},
		{"enrich per-user set", Config{Enricher: enricher.Config{MaxUserEnrichInFlight: 64}}, func(c Config) bool {
			return c.Enricher.MaxUserEnrichInFlight == 64 && c.Enricher.MaxInFlight == 64
		}},
		{"store defaults", Config{}, func(c Config) bool { return c.Store.URL == store.DefaultURL && !c.Store.CreateDatabase }},
		{"shared names", Config{}, func(c Config) bool {
			return c.Prefix == events.DefaultPrefix && c.Worker.Prefix == c.Prefix && c.Enricher.Prefix == c.Prefix &&
				c.Stream == events.DefaultStream && c.Worker.Stream == c.Stream && c.Worker.DeadLetterStream == c.Stream+"_DEADLETTER"
		}},
		{"own prefix everywhere", Config{Prefix: "p", Stream: "S"}, func(c Config) bool {
			return c.Worker.Prefix == "p" && c.Enricher.Prefix == "p" && c.Worker.DeadLetterStream == "S_DEADLETTER"
		}},
		{"version reaches the enricher", Config{Version: "1.2.3"}, func(c Config) bool { return c.Enricher.Version == "1.2.3" }},
		{"rules: large jobs", Config{}, func(c Config) bool { return c.Worker.JobSize == JobSizeRules }},
		{"rules: jobs within a batch", Config{Worker: worker.Config{BatchSize: 20}}, func(c Config) bool { return c.Worker.JobSize == 20 }},
		{"LLM: one turn a job", Config{LLM: llm("m")}, func(c Config) bool { return c.Worker.JobSize == JobSizeLLM }},
		{"explicit job size", Config{Worker: worker.Config{JobSize: 7}, LLM: llm("m")}, func(c Config) bool { return c.Worker.JobSize == 7 }},
		{"NATS name", Config{}, func(c Config) bool { return c.NATS.Name == "memoryd" && c.NATS.URL != "" }},
		{"embedding off by default", Config{}, func(c Config) bool { return c.Embed.BaseURL == "" }},
		{"embedding defaults when on", Config{Embed: embedding.Config{BaseURL: "http://x/v1"}}, func(c Config) bool {
			return c.Embed.Model == embedding.DefaultModel && c.Embed.BatchSize == embedding.DefaultBatchSize && c.Embed.Timeout == embedding.DefaultTimeout
		}},
	} {
		if c := tt.cfg.withDefaults(); !tt.check(c) {
			t.Errorf("%s: %+v", tt.name, c)
		}
	}
	// Defaults is what the flags show: the service creates its database,
	// and the job size stays automatic (chosen from the extractor).
	if d := Defaults(); !d.Store.CreateDatabase || d.Worker.JobSize != 0 || d.Worker.Workers != wdef.Workers ||
		d.Embed.BaseURL != "" || d.Embed.Model != embedding.DefaultModel {
		t.Errorf("Defaults() = %+v", d)
	}
}

// TestValidateNamesTheField: New refuses what no component could use,
// naming the Config field.
func TestValidateNamesTheField(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{Worker: worker.Config{Workers: -1}}, "app: Config.Worker.Workers -1 is out of range"},
		{Config{Worker: worker.Config{BatchSize: -5}}, "app: Config.Worker.BatchSize -5 is out of range"},
		{Config{Worker: worker.Config{AckWait: -time.Second}}, "app: Config.Worker.AckWait -1s is out of range"},
		{Config{Worker: worker.Config{MaxDBSize: -1}}, "app: Config.Worker.MaxDBSize -1 is out of range"},
		{Config{Enricher: enricher.Config{Timeout: -time.Millisecond}}, "app: Config.Enricher.Timeout -1ms is out of range"},
		{Config{Enricher: enricher.Config{MaxInFlight: -1}}, "app: Config.Enricher.MaxInFlight -1 is out of range"},
		{Config{Enricher: enricher.Config{MaxUserEnrichInFlight: -2}}, "app: Config.Enricher.MaxUserEnrichInFlight -2 is out of range"},
		{Config{Enricher: enricher.Config{MaxUserEnrichInFlight: 65}}, "app: Config.Enricher.MaxUserEnrichInFlight 65 is above Enricher.MaxInFlight (64)"},
		{Config{LLM: llm("")}, "app: Config.LLM.Model is required with LLM.BaseURL"},
		{Config{LLM: func() extractor.LLMConfig { c := llm("m"); c.MaxTokens = -1; return c }()}, "app: Config.LLM.MaxTokens -1 is out of range"},
		// Before, the worker refused it at start (exit 1), after the
		// extractor was logged, and `config print` took it.
		{Config{LLM: func() extractor.LLMConfig { c := llm("m"); c.Timeout = 5 * time.Second; return c }(), Worker: worker.Config{JobTimeout: 10 * time.Second}},
			"app: Config.Worker.JobTimeout 10s must be longer than one extractor call, 10s (two model requests of LLM.Timeout)"},
		{Config{NATS: NATSConfig{InboxPrefix: "_INBOX.*"}}, `app: Config.NATS.InboxPrefix "_INBOX.*" must be`},
		{Config{NATS: NATSConfig{InboxPrefix: "$JS.API"}}, `app: Config.NATS.InboxPrefix "$JS.API" must be _INBOX or begin with _INBOX_`},
		{Config{NATS: NATSConfig{InboxPrefix: "memory.inbox"}}, `app: Config.NATS.InboxPrefix "memory.inbox" must be _INBOX or begin with _INBOX_`},
		{Config{NATS: NATSConfig{InboxPrefix: "replies_alice"}}, `app: Config.NATS.InboxPrefix "replies_alice" must be _INBOX or begin with _INBOX_`},
		{Config{NATS: NATSConfig{InboxPrefix: "_R_"}}, `app: Config.NATS.InboxPrefix "_R_" must be _INBOX or begin with _INBOX_`},
		{Config{Embed: embedding.Config{BaseURL: "localhost:11434"}}, `app: Config.Embed.BaseURL must be an http or https URL`},
		{Config{Embed: embedding.Config{BaseURL: "http://x/v1", BatchSize: -1}}, `app: Config.Embed.BatchSize must be between 1 and 2048`},

		// River's UI (issue 20 item 3).
		{Config{Ops: OpsConfig{Addr: ":9090"}, RiverUI: RiverUIConfig{Enabled: true}}, "app: Config.RiverUI.Token or RiverUI.User and RiverUI.Password are required"},
		{Config{Ops: OpsConfig{Addr: ":9090"}, RiverUI: RiverUIConfig{Enabled: true, User: "u"}}, "app: Config.RiverUI.Password is required with RiverUI.User"},
		{Config{Ops: OpsConfig{Addr: ":9090"}, RiverUI: RiverUIConfig{Enabled: true, Password: "p", Token: "t"}}, "app: Config.RiverUI.User is required with RiverUI.Password"},
		{Config{Ops: OpsConfig{Addr: ":9090"}, RiverUI: RiverUIConfig{Enabled: true, User: "a:b", Password: "p"}}, "app: Config.RiverUI.User must not contain ':'"},
		{Config{RiverUI: RiverUIConfig{Enabled: true, Token: "t"}}, "app: Config.Ops.Addr is required with RiverUI.Enabled"},
		{Config{Ops: OpsConfig{Addr: ":9090"}, RiverUI: RiverUIConfig{Enabled: true, Token: "t", Path: "/"}}, `app: Config.RiverUI.Path "/" must be an absolute path`},
		{Config{Ops: OpsConfig{Addr: ":9090"}, RiverUI: RiverUIConfig{Enabled: true, Token: "t", Path: "riverui"}}, `app: Config.RiverUI.Path "riverui/" must be an absolute path`},
		{Config{Ops: OpsConfig{Addr: ":9090"}, RiverUI: RiverUIConfig{Enabled: true, Token: "t", Path: "/metrics/ui/"}}, `app: Config.RiverUI.Path "/metrics/ui/" overlaps /metrics`},
		{Config{Ops: OpsConfig{Addr: ":9090"}, RiverUI: RiverUIConfig{Enabled: true, Token: "t", Path: "/debug/"}}, `app: Config.RiverUI.Path "/debug/" overlaps /debug/`},
	} {
		_, err := New(tt.cfg)
		var cerr *ConfigError
		if !errors.As(err, &cerr) || len(err.Error()) < len(tt.want) || err.Error()[:len(tt.want)] != tt.want {
			t.Errorf("New(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
	if _, err := New(Config{}); err != nil {
		t.Errorf("New(Config{}) = %v", err)
	}
}

func llm(model string) (c extractor.LLMConfig) {
	c.BaseURL, c.Model = "http://127.0.0.1:1/v1", model
	return c
}

// TestDefaultsAsBase: a Config started from Defaults and given its own
// names derives the dead-letter stream and the components' names from them,
// not from the default names.
func TestDefaultsAsBase(t *testing.T) {
	t.Parallel()
	c := Defaults()
	c.Prefix, c.Stream = "p", "S"
	c.Worker.HeartbeatInterval = time.Minute
	c = c.withDefaults()
	if c.Worker.DeadLetterStream != "S_DEADLETTER" || c.Worker.Prefix != "p" || c.Enricher.Prefix != "p" || c.Worker.ProcessTimeout < 2*time.Minute {
		t.Errorf("from Defaults with own names: %+v", c.Worker)
	}
}
