package main

import (
	"regexp"
	"strings"

	"github.com/memoryd/memoryd/internal/app"
)

// fieldFlags maps the Config fields that components name in their validation
// errors to the flags that set them. The components name their own fields
// (they know nothing of flags); cmd owns the flag names, so the translation
// lives here. Fields no flag sets (connections, internal knobs) are absent and
// stay as they are: such an error is a bug, not bad input.
var fieldFlags = map[string]map[string]string{
	"worker": {
		"BatchSize":             "--batch-size",
		"JobSize":               "--job-size",
		"Workers":               "--workers",
		"MaxAttempts":           "--max-attempts",
		"JobTimeout":            "--job-timeout",
		"AckWait":               "--ack-wait",
		"ExtractDebounce":       "--extract-debounce",
		"BacklogTurns":          "--backlog-turns",
		"MaxDBSize":             "--max-db-size",
		"MaxContextPerUser":     "--max-context-per-user",
		"PruneInterval":         "--prune-interval",
		"CompletedJobRetention": "--completed-job-retention",
		"MaxPause":              "--max-pause",
		"FetchCooldown":         "--fetch-cooldown",
		"MaxModelOutage":        "--llm-max-outage",

		// Spend caps (issue 16 item 8).
		"DailyTokensPerUser": "--llm-daily-tokens-per-user",
		"DailyTokens":        "--llm-daily-tokens",
	},
	"extractor": {
		"BaseURL":           "--llm-base-url",
		"Model":             "--llm-model",
		"Timeout":           "--llm-timeout",
		"MaxConcurrency":    "--llm-concurrency",
		"RequestsPerSecond": "--llm-rps",
		"Burst":             "--llm-burst",
		"ResponseFormat":    "--llm-response-format",
		"MaxTokens":         "--llm-max-tokens",
		"APIKey":            "--llm-api-key",
		"APIKeyFile":        "--llm-api-key-file",
	},
	"embedding": {
		"BaseURL":    "--embed-base-url",
		"Model":      "--embed-model",
		"Dimensions": "--embed-dimensions",
		"Timeout":    "--embed-timeout",
		"APIKey":     "--embed-api-key",
		"APIKeyFile": "--embed-api-key-file",
	},
	"enricher": {
		"Timeout":               "--enrich-timeout",
		"Prefix":                "--prefix",
		"MaxInFlight":           "--enrich-max-in-flight",
		"MaxUserEnrichInFlight": "--enrich-max-user-in-flight",

		// Hybrid retrieval (issue 17).
		"EmbedTimeout":     "--embed-query-timeout",
		"VectorCacheBytes": "--vector-cache-bytes",

		// Knowledge bases (issue 19).
		"MaxDocumentBytes": "--max-document-bytes",
		"MaxDocsSize":      "--max-docs-size",
	},
	"store": {
		"URL":            "--database-url",
		"CreateDatabase": "--create-database",
	},
	"nats": {
		"InboxPrefix":  "--inbox-prefix",
		"PasswordFile": "--nats-password-file",
		"TokenFile":    "--nats-token-file",
	},
	"enrichpool": {
		"MaxConns": "--enrich-max-conns",
		"MinConns": "--enrich-min-conns",
	},
	"backpressure": {
		"Latency": "--backpressure-latency",
		"GiveWay": "--backpressure-giveway",
	},

	// River's UI (issue 20 item 3).
	"ops": {
		"Addr": "--http",
	},
	"riverui": {
		"Enabled":        "--riverui",
		"Path":           "--riverui-path",
		"User":           "--riverui-user",
		"Password":       "--riverui-password",
		"Token":          "--riverui-token",
		"AllowMutations": "--riverui-mutations",
	},

	// Traces (issue 20 item 5).
	"tracing": {
		"OTLPEndpoint": "--otlp-endpoint",
	},
}

// appGroups maps the app's Config groups to the components whose fields
// they hold.
var appGroups = map[string]string{"Worker": "worker", "LLM": "extractor", "Embed": "embedding", "Enricher": "enricher", "Store": "store", "NATS": "nats",
	"EnrichPool": "enrichpool", "BackPressure": "backpressure", "Ops": "ops", "RiverUI": "riverui", "Tracing": "tracing"}

// appField matches a field path of the app's Config, e.g. Worker.Workers.
var appField = regexp.MustCompile(`\b(Worker|LLM|Embed|Enricher|Store|NATS|EnrichPool|BackPressure|Ops|RiverUI|Tracing)\.([A-Z]\w*)`)

// configErrorFlags is the app's configuration error naming flags instead of
// Config fields: "--workers -1 is out of range".
func configErrorFlags(e *app.ConfigError) string {
	msg := strings.TrimPrefix(e.Error(), "app: Config.")
	return appField.ReplaceAllStringFunc(msg, func(s string) string {
		group, field, _ := strings.Cut(s, ".")
		if fl, ok := fieldFlags[appGroups[group]][field]; ok {
			return fl
		}
		return s
	})
}

// componentField matches "<component>: <Type>.<Field>", the way the
// components' validate methods start their errors.
var componentField = regexp.MustCompile(`\b(worker|extractor|embedding|enricher|store|nats): (?:[A-Z]\w*)?Config\.([A-Z]\w*)`)

// fieldName matches a Go field name, with or without its Config type.
var fieldName = regexp.MustCompile(`\b(?:\w*Config\.)?[A-Z]\w*\b`)

// flagNames rewrites a component's validation error so that it names the
// flags instead of the Go fields: "worker: Config.Workers must be between 1
// and 10000, not -1" becomes "--workers must be between 1 and 10000, not -1".
// A message that names no known field is returned unchanged.
func flagNames(msg string) string {
	m := componentField.FindStringSubmatchIndex(msg)
	if m == nil {
		return msg
	}
	table := fieldFlags[msg[m[2]:m[3]]]
	if _, ok := table[msg[m[4]:m[5]]]; !ok {
		return msg
	}
	// Drop the "component: " prefix, then replace every field of the
	// component named in the rest ("between 1 and BatchSize (200)").
	rest := msg[m[2]:]
	rest = rest[strings.Index(rest, ": ")+2:]
	rest = fieldName.ReplaceAllStringFunc(rest, func(s string) string {
		name := s[strings.LastIndexByte(s, '.')+1:]
		if fl, ok := table[name]; ok {
			return fl
		}
		return s
	})
	return msg[:m[2]] + rest
}
