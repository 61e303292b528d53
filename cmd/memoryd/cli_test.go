package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/internal/app"
	"github.com/memoryd/memoryd/migrations"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// runArgs runs the binary's entry point in-process and returns stdout,
// stderr and the exit code.
func runArgs(ctx context.Context, args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	code := run(ctx, &cli{stdout: &out, stderr: &errOut}, args)
	return out.String(), errOut.String(), code
}

// TestVersion: `memoryd version` and `memoryd --version` print the version,
// the commit (the link-time variable when set), the newest migration the
// binary knows (the version string alone is the same for releases hundreds
// of commits apart, and upgrade notes are keyed by migration) and the Go
// version.
func TestVersion(t *testing.T) {
	newest, err := store.NewestMigration(migrations.FS)
	if err != nil || newest < 55 {
		t.Fatalf("newest embedded migration %d, %v", newest, err)
	}
	wantSchema := fmt.Sprintf("\nschema  %03d\n", newest)
	saved := commit
	t.Cleanup(func() { commit = saved })
	for _, set := range []string{"", "0123abcd"} {
		commit = set
		wantCommit := set
		if set == "" {
			rev, _ := buildCommit() // a test binary has no VCS stamp
			wantCommit = rev
			// and says so with the reason: a newcomer's `go run ./cmd/memoryd
			// version` (the README's) printed a bare "unknown" (walk9).
			if want := "unknown (not stamped: "; !strings.HasPrefix(rev, want) {
				t.Errorf("unstamped commit reads %q, want it to start %q", rev, want)
			}
		}
		for _, args := range [][]string{{"version"}, {"--version"}} {
			out, errOut, code := runArgs(context.Background(), args...)
			if code != 0 || errOut != "" {
				t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
			}
			for _, want := range []string{"memoryd " + version + "\n", "commit  " + wantCommit, wantSchema, runtime.Version()} {
				if !strings.Contains(out, want) {
					t.Errorf("%v with commit=%q: output lacks %q:\n%s", args, set, want, out)
				}
			}
		}
	}
}

// helpEntries splits a command's -h output into its flag entries, keyed by
// flag name: the "  --name type" line and its description.
func helpEntries(t *testing.T, help string) map[string]string {
	t.Helper()
	entries := map[string]string{}
	_, flagsPart, ok := strings.Cut(help, "\nFlags:\n")
	if !ok {
		t.Fatalf("no Flags: section in\n%s", help)
	}
	var name string
	for _, line := range strings.Split(flagsPart, "\n") {
		switch {
		case strings.HasPrefix(line, "  --"):
			name = strings.Fields(line)[0][2:]
			entries[name] = line
		case name != "" && strings.HasPrefix(line, "    \t"):
			entries[name] += "\n" + line
		default:
			name = ""
		}
	}
	return entries
}

// helpArgs is how to ask each command for its help.
func helpArgs(name string) []string {
	if name == "config" {
		return []string{"config", "print", "-h"}
	}
	return []string{name, "-h"}
}

// TestHelpOnStdoutEachDefaultOnce: every command's -h goes to stdout, exits
// 0, and shows each flag's default at most once.
func TestHelpOnStdoutEachDefaultOnce(t *testing.T) {
	t.Parallel()
	for _, c := range commands() {
		out, errOut, code := runArgs(context.Background(), helpArgs(c.name)...)
		if code != 0 || errOut != "" || out == "" {
			t.Errorf("%s -h: exit %d, %d bytes on stdout, stderr %q", c.name, code, len(out), errOut)
			continue
		}
		entries := helpEntries(t, out)
		if len(entries) == 0 {
			t.Errorf("%s -h lists no flags:\n%s", c.name, out)
		}
		for name, entry := range entries {
			if n := strings.Count(entry, "default"); n > 1 {
				t.Errorf("%s -h: --%s shows its default %d times:\n%s", c.name, name, n, entry)
			}
		}
	}
	out, _, _ := runArgs(context.Background(), "serve", "-h")
	if e := helpEntries(t, out)["ack-wait"]; !strings.Contains(e, "(default 30s; env MEMORYD_ACK_WAIT)") {
		t.Errorf("serve -h --ack-wait entry: %q", e)
	}
}

// TestBadFlagPointsAtHelp: a wrong flag or argument prints the error and one
// line pointing at -h, nothing on stdout, exit 2.
func TestBadFlagPointsAtHelp(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--bogus"}, "memoryd serve: unknown flag --bogus\nRun 'memoryd serve -h' for usage.\n"},
		{[]string{"facts", "list", "--user", "u", "--nope"}, "memoryd facts: unknown flag --nope\nRun 'memoryd facts -h' for usage.\n"},
		// Flags as the docs write them, and the likely one (walk7: "flag
		// provided but not defined: -usr").
		{[]string{"stats", "--usr", "bob"}, "memoryd stats: unknown flag --usr: did you mean --user?\nRun 'memoryd stats -h' for usage.\n"},
		{[]string{"stats", "--user"}, "memoryd stats: --user needs a value\nRun 'memoryd stats -h' for usage.\n"},
		{[]string{"stats", "--user", "u", "--timeout", "soon"}, "memoryd stats: invalid value \"soon\" for --timeout: parse error\nRun 'memoryd stats -h' for usage.\n"},
		{[]string{"replay", "--reset=maybe"}, "memoryd replay: invalid boolean value \"maybe\" for --reset: parse error\nRun 'memoryd replay -h' for usage.\n"},
		{[]string{"replay", "--since", "yesterday"}, "memoryd replay: --since \"yesterday\" is neither an RFC 3339 time nor a duration ago (90m, 2h)\nRun 'memoryd replay -h' for usage.\n"},
		{[]string{"facts", "frobnicate", "--user", "u"}, "memoryd facts: unknown action \"frobnicate\": use list, get, set, clear or history\nRun 'memoryd facts -h' for usage.\n"},
		// The arguments named as the usage names them (walk6: "takes 1
		// argument(s), got 0" named no KEY).
		{[]string{"facts", "get", "--user", "u"}, "memoryd facts: facts get takes KEY, got 0 argument(s)\nRun 'memoryd facts -h' for usage.\n"},
		{[]string{"facts", "set", "--user", "u", "city"}, "memoryd facts: facts set takes KEY VALUE, got 1 argument(s)\nRun 'memoryd facts -h' for usage.\n"},
		{[]string{"facts", "list", "--user", "u", "city"}, "memoryd facts: facts list takes no argument, got 1\nRun 'memoryd facts -h' for usage.\n"},
		{[]string{"nope"}, "memoryd: unknown command \"nope\"\nRun 'memoryd help' for the commands.\n"},
	} {
		out, errOut, code := runArgs(context.Background(), tt.args...)
		if code != 2 || out != "" || errOut != tt.want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tt.args, code, out, errOut, tt.want)
		}
	}
}

// TestPerInvocationArgsIgnoreEnvironment: a stray MEMORYD_USER (or
// MEMORYD_RESET, ...) never chooses whose memory a command reads or deletes,
// nor does the configuration file; help says which flags have a variable.
func TestPerInvocationArgsIgnoreEnvironment(t *testing.T) {
	for name, value := range map[string]string{
		"USER": "mallory", "MESSAGE": "hi", "RESPONSE": "hello", "JSON": "true", "ID": "7", "QUESTION": "q",
		"ALL": "true", "RESET": "true", "DRY_RUN": "true", "URL": "http://127.0.0.1:1/readyz",
	} {
		t.Setenv("MEMORYD_"+name, value)
	}
	unreachable := []string{"--nats-url", "nats://127.0.0.1:1", "--database-url", "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=1", "--log-format", "json"}
	for _, args := range [][]string{{"facts", "list"}, {"forget"}, {"stats"}, {"memory", "clear", "--all"}, {"mcp"}} {
		out, errOut, code := runArgs(context.Background(), append(args, unreachable...)...)
		if code != 2 || !strings.Contains(errOut, "--user is required") || out != "" {
			t.Errorf("%v with MEMORYD_USER=mallory: exit %d, stdout %q, stderr %q; want exit 2, --user is required", args, code, out, errOut)
		}
	}
	// Nor from the configuration file: "user" is not a setting.
	path := t.TempDir() + "/memoryd.yaml"
	if err := os.WriteFile(path, []byte("user: mallory\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runArgs(context.Background(), append([]string{"facts", "list", "--config", path}, unreachable...)...)
	if code == 0 || !strings.Contains(errOut, `key "user" is --user, an argument of memoryd facts read from the command line only`) {
		t.Errorf("user from the config file: exit %d, stderr %q", code, errOut)
	}

	perInvocation := map[string][]string{
		"enrich":  {"user", "json", "format", "max-results", "at", "facts", "collections"},
		"facts":   {"user", "json", "max-results", "before"},
		"memory":  {"user", "id", "question", "all", "limit", "after", "answer"},
		"publish": {"user", "message", "response", "id", "conversation", "timestamp", "no-memory"},
		"replay":  {"user", "reset", "dry-run", "since", "from-seq", "no-work"},
		"forget":  {"user"},
		"mcp":     {"user"},
		"failed":  {"user", "limit"},
		"health":  {"url"},
	}
	for cmd, names := range perInvocation {
		out, _, _ := runArgs(context.Background(), cmd, "-h")
		entries := helpEntries(t, out)
		for _, name := range names {
			if e, ok := entries[name]; !ok || strings.Contains(e, "env MEMORYD_") {
				t.Errorf("%s -h: --%s should be listed without an env variable: %q", cmd, name, e)
			}
		}
		if cmd != "health" && !strings.Contains(entries["nats-url"], "env MEMORYD_NATS_URL") {
			t.Errorf("%s -h: --nats-url should name MEMORYD_NATS_URL: %q", cmd, entries["nats-url"])
		}
	}
}

// TestErrorsNameFlags: a component's validation error reaches the user
// naming the flag, not the Go field.
func TestErrorsNameFlags(t *testing.T) {
	t.Parallel()
	_, llmErr := extractor.NewLLM(extractor.LLMConfig{BaseURL: "http://127.0.0.1:1/v1", Model: "m", Timeout: -time.Second})
	tests := []struct{ in, want string }{
		{"worker: Config.Workers must be between 1 and 10000, not -1", "--workers must be between 1 and 10000, not -1"},
		{"worker: Config.JobSize must be between 1 and BatchSize (200), not 500", "--job-size must be between 1 and --batch-size (200), not 500"},
		{"worker: Config.AckWait must be at least 1s, not 10ms", "--ack-wait must be at least 1s, not 10ms"},
		{"extractor: LLMConfig.BaseBackoff must not exceed LLMConfig.MaxBackoff", "extractor: LLMConfig.BaseBackoff must not exceed LLMConfig.MaxBackoff"}, // no flag sets these
		{"enricher: Config.Timeout -1s is negative", "--enrich-timeout -1s is negative"},
		{"replay: worker: Config.Workers must be between 1 and 10000, not 0", "replay: --workers must be between 1 and 10000, not 0"},
		{"cannot connect to NATS at nats://x: Config.Workers", "cannot connect to NATS at nats://x: Config.Workers"},
		{llmErr.Error(), "--llm-timeout must not be negative"},
		{"extractor: LLMConfig.MaxTokens must be positive", "--llm-max-tokens must be positive"},
		{"embedding: Config.Timeout must be positive, not -1s", "--embed-timeout must be positive, not -1s"},
		{"embedding: Config.Dimensions must not be negative, not -1", "--embed-dimensions must not be negative, not -1"},
	}
	for _, tt := range tests {
		if got := flagNames(tt.in); got != tt.want {
			t.Errorf("flagNames(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}

	// Through the command line.
	_, errOut, code := runArgs(context.Background(), "serve", "--llm-base-url", "http://127.0.0.1:1/v1")
	if code != 2 || !strings.HasPrefix(errOut, "memoryd serve: --llm-model is required with --llm-base-url\n") {
		t.Errorf("serve without --llm-model: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = runArgs(context.Background(), "serve", "--llm-base-url", "http://127.0.0.1:1/v1", "--llm-model", "m", "--llm-max-tokens", "-1")
	if code != 2 || !strings.HasPrefix(errOut, "memoryd serve: --llm-max-tokens -1 is out of range: it must be at least 1\n") {
		t.Errorf("serve --llm-max-tokens -1: exit %d, stderr %q", code, errOut)
	}
	// --embed-timeout reaches the embeddings client (an embeddings walk:
	// its 30 s had no flag).
	_, errOut, code = runArgs(context.Background(), "serve", "--embed-base-url", "http://127.0.0.1:1/v1", "--embed-timeout", "-1s")
	if code != 2 || !strings.HasPrefix(errOut, "memoryd serve: --embed-timeout must be positive, not -1s\n") {
		t.Errorf("serve --embed-timeout -1s: exit %d, stderr %q", code, errOut)
	}
	dbURL := storetest.Migrated(t)
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	// A value only the component refuses: its error reaches the user with
	// the flag's name, not the Config field's.
	_, errOut, code = runArgs(context.Background(), "serve", "--workers", "20000", "--database-url", dbURL, "--nats-url", eventstest.URL(),
		"--prefix", prefix, "--stream", stream, "--log-level", "error")
	if code != 1 || errOut != "memoryd serve: --workers must be between 1 and 10000, not 20000\n" {
		t.Errorf("serve --workers 20000: exit %d, stderr %q", code, errOut)
	}
	// An embed job that cannot hold one request (a review): River cut
	// every attempt of a slow server's jobs, and nothing was embedded.
	_, errOut, code = runArgs(context.Background(), "serve", "--embed-base-url", "http://127.0.0.1:1/v1", "--embed-timeout", "10m",
		"--database-url", dbURL, "--nats-url", eventstest.URL(), "--prefix", prefix, "--stream", stream, "--log-level", "error")
	if code != 1 || !strings.HasPrefix(errOut, "memoryd serve: --job-timeout must be longer than one embed call, 10m10s") {
		t.Errorf("serve --embed-timeout 10m: exit %d, stderr %q", code, errOut)
	}
}

// TestClientWithoutServiceSaysSoOnce: with NATS up and no memoryd serving
// the prefix, each client command says so in one line, prefixed once.
func TestClientWithoutServiceSaysSoOnce(t *testing.T) {
	t.Parallel()
	nc := eventstest.Conn(t)
	prefix, _ := eventstest.Names(t, nc)
	for _, args := range [][]string{
		{"enrich", "--user", "alice", "where do I live?"},
		{"facts", "list", "--user", "alice"},
		{"memory", "search", "dog", "--user", "alice"},
		{"stats", "--user", "alice"},
	} {
		_, errOut, code := runArgs(context.Background(), append(args, "--nats-url", eventstest.URL(), "--prefix", prefix, "--log-format", "json")...)
		want := fmt.Sprintf("memoryd %s: no memoryd service answers on %s under prefix %q: start 'memoryd serve' (the default role, or --role enrich: a serve of --role ingest answers none) with the same --nats-url and --prefix\n",
			args[0], eventstest.URL(), prefix)
		if code != 1 || errOut != want {
			t.Errorf("%v: exit %d, stderr %q; want %q", args, code, errOut, want)
		}
	}
}

// TestHealthExplainsHTTPIsOff: when nothing listens, health says that serve
// has no HTTP endpoint unless started with --http.
func TestHealthExplainsHTTPIsOff(t *testing.T) {
	t.Parallel()
	// A 503's body says why: shown (an operator's walk saw only the status).
	notReady := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"nats":"not connected: RECONNECTING"}` + "\n"))
	}))
	defer notReady.Close()
	if _, errOut, code := runArgs(context.Background(), "health", "--url", notReady.URL); code != 1 || !strings.Contains(errOut, `503 Service Unavailable: {"nats":"not connected: RECONNECTING"}`) {
		t.Errorf("health of a 503: exit %d, stderr %q; want the body shown", code, errOut)
	}
	healthHTTPOff(t)
}

func healthHTTPOff(t *testing.T) {
	_, errOut, code := runArgs(context.Background(), "health", "--url", "http://127.0.0.1:1/readyz")
	if code != 1 || !strings.Contains(errOut, "--http (off by default)") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	// serve's --http address alone probes its /readyz.
	for _, addr := range []string{"http://127.0.0.1:1", "127.0.0.1:1", ":1"} {
		if _, errOut, code := runArgs(context.Background(), "health", "--url", addr); code != 1 || !strings.Contains(errOut, "http://127.0.0.1:1/readyz") {
			t.Errorf("health --url %s: exit %d, stderr %q; want its /readyz probed", addr, code, errOut)
		}
	}
	// Without --url, the address serve's http setting gives, from the
	// configuration file serve reads; --url still wins.
	path := filepath.Join(t.TempDir(), "memoryd.yaml")
	if err := os.WriteFile(path, []byte("http: 127.0.0.1:2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runArgs(context.Background(), "health", "--config", path); code != 1 || !strings.Contains(errOut, "http://127.0.0.1:2/readyz") {
		t.Errorf("health with http in the configuration file: exit %d, stderr %q; want 127.0.0.1:2/readyz probed", code, errOut)
	}
	if _, errOut, code := runArgs(context.Background(), "health", "--config", path, "--url", ":1"); code != 1 || !strings.Contains(errOut, "http://127.0.0.1:1/readyz") {
		t.Errorf("health --url with http in the configuration file: exit %d, stderr %q; want --url probed", code, errOut)
	}
}

// jsonLines parses every line of a JSON log.
func jsonLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		recs = append(recs, rec)
	}
	return recs
}

// TestServeLogsDurationsAsStringsAndRiverQuietly runs serve in-process and
// stops it: durations are logged as "30s", River's routine info lines
// (client started/stopped, producer job counts) are not at info.
func TestServeLogsDurationsAsStringsAndRiverQuietly(t *testing.T) {
	t.Parallel()
	_, dbURL := storetest.Schema(t)
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	var stdout, stderr eventstest.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &cli{stdout: &stdout, stderr: &stderr}, []string{"serve", "--database-url", dbURL, "--nats-url", eventstest.URL(),
			"--prefix", prefix, "--stream", stream, "--log-format", "json", "--workers", "2", "--shutdown-timeout", "30s"})
	}()
	eventstest.Eventually(t, "serve to start", time.Minute, func() (bool, string) {
		select {
		case code := <-done:
			done <- code // seen again below
			return true, ""
		default:
		}
		return strings.Contains(stderr.String(), `"enrich service started"`), stderr.String()
	})
	if !strings.Contains(stderr.String(), `"enrich service started"`) {
		t.Fatalf("serve exited before it started:\n%s", stderr.String())
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, stderr.String())
	}
	var sawShutdown bool
	for _, rec := range jsonLines(t, stderr.String()) {
		if rec["msg"] == "shutting down" {
			sawShutdown = true
			if rec["timeout"] != "30s" {
				t.Errorf("shutting down: timeout = %#v, want \"30s\"", rec["timeout"])
			}
		}
		if rec["component"] == "river" && rec["level"] == "INFO" {
			t.Errorf("River line at info: %v", rec)
		}
		// A clean stop is not an error: nothing above info says only that
		// a context was cancelled.
		if rec["level"] == "ERROR" || rec["level"] == "WARN" {
			if e, _ := rec["error"].(string); strings.HasSuffix(e, "context canceled") {
				t.Errorf("clean stop logged at %s: %v", rec["level"], rec)
			}
		}
	}
	if !sawShutdown {
		t.Errorf("no shutting down line:\n%s", stderr.String())
	}
}

// TestReplayOutput: progress and logs are JSON lines on stderr, stdout has
// the summary (no carriage-return progress); --dry-run does not claim to
// have enqueued anything.
func TestReplayOutput(t *testing.T) {
	t.Parallel()
	common, _, _ := replaySetup(t, 3)

	out, errOut, code := runArgs(context.Background(), append([]string{"replay", "--dry-run"}, common...)...)
	if code != 0 {
		t.Fatalf("replay --dry-run: exit %d\n%s", code, errOut)
	}
	if strings.Contains(out, "enqueued") || !strings.Contains(out, "nothing was written") {
		t.Errorf("replay --dry-run stdout: %q", out)
	}
	out, errOut, code = runArgs(context.Background(), append([]string{"replay", "--workers", "2"}, common...)...)
	if code != 0 {
		t.Fatalf("replay: exit %d\n%s", code, errOut)
	}
	if strings.Contains(out, "\r") || !strings.Contains(out, "3 turns enqueued") || !strings.Contains(out, "replay done") {
		t.Errorf("replay stdout: %q", out)
	}
	jsonLines(t, errOut) // every stderr line is a log record
	// A reset's dry run says its loss check passes, not only when it fails.
	out, errOut, code = runArgs(context.Background(), append([]string{"replay", "--dry-run", "--reset"}, common...)...)
	if code != 0 || !strings.Contains(out, "would pass the loss check") {
		t.Errorf("replay --dry-run --reset: exit %d, stdout %q, stderr %q; want it to say the loss check passes", code, out, errOut)
	}
}

// TestReplayOfNothingSaysWhy: a replay that reads no event says which of
// its selections found nothing (an ops walk's --from-seq past the end and
// --user of a user with no events printed only "read 0 events").
func TestReplayOfNothingSaysWhy(t *testing.T) {
	t.Parallel()
	common, _, _ := replaySetup(t, 3)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--from-seq", "99"}, "nothing to replay: --from-seq 99 is past the stream's last sequence, 3"},
		{[]string{"--user", "Alice"}, "nothing to replay: the stream (last sequence 3) holds no event of the user(s) named"},
		{[]string{"--since", "2099-01-01T00:00:00Z"}, "nothing to replay: the stream (last sequence 3) holds no event stored since 2099-01-01T00:00:00Z"},
		// Selections together are named together: all 3 events were
		// stored since 2020, none of them is carol's.
		{[]string{"--user", "carol", "--since", "2020-01-01T00:00:00Z"}, "nothing to replay: the stream (last sequence 3) holds no event of the user(s) named stored since 2020-01-01T00:00:00Z"},
		{[]string{"--user", "carol", "--from-seq", "2"}, "nothing to replay: the stream (last sequence 3) holds no event of the user(s) named from sequence 2"},
		// How long ago: the events were stored before the last
		// microsecond, and within the last day (below).
		{[]string{"--since", "1us"}, "nothing to replay: the stream (last sequence 3) holds no event stored since "},
	} {
		for _, mode := range []string{"--dry-run", "--no-work"} {
			out, errOut, code := runArgs(context.Background(), append(append([]string{"replay", mode}, c.args...), common...)...)
			if code != 0 || !strings.Contains(out, c.want) {
				t.Errorf("replay %s %v: exit %d, stdout %q, stderr %q; want %q", mode, c.args, code, out, errOut, c.want)
			}
		}
	}
	// One that reads events says nothing of the kind.
	if out, errOut, code := runArgs(context.Background(), append([]string{"replay", "--dry-run"}, common...)...); code != 0 || strings.Contains(out, "nothing to replay") {
		t.Errorf("replay --dry-run of 3 events: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out, errOut, code := runArgs(context.Background(), append([]string{"replay", "--dry-run", "--since", "24h"}, common...)...); code != 0 || strings.Contains(out, "nothing to replay") {
		t.Errorf("replay --dry-run --since 24h of 3 events stored just now: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// replaySetup publishes n turns (publishTurns) to a stream of its own and
// returns the flags that point a command at it and at a schema of its own,
// with the connection and the subject prefix.
func replaySetup(t *testing.T, n int) (flags []string, nc *nats.Conn, prefix string) {
	t.Helper()
	// A migrated schema of the pool (the command finds nothing to
	// migrate): a fresh one cost Postgres about 0.7 s of CPU a test.
	dbURL := storetest.Migrated(t)
	nc = eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	publishTurns(t, nc, prefix, stream, n)
	return []string{"--database-url", dbURL, "--nats-url", eventstest.URL(), "--prefix", prefix, "--stream", stream, "--log-format", "json"}, nc, prefix
}

// TestReplayUsersFile: a user id holding a comma cannot be named by --user
// (a comma-separated list); --users-file names it, one id a line.
func TestReplayUsersFile(t *testing.T) {
	t.Parallel()
	common, nc, prefix := replaySetup(t, 2)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range []string{"Smith, Bob", "Smith, Bob", "Smith"} {
		if _, err := events.NewPublisher(js, prefix).Publish(context.Background(), events.Turn{ID: fmt.Sprintf("s%d", i), UserID: u,
			UserMessage: "I live in Oslo", Timestamp: time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)}); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(file, []byte("Smith, Bob\nalice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runArgs(context.Background(), append([]string{"replay", "--dry-run", "--users-file", file}, common...)...)
	if code != 0 {
		t.Fatalf("replay --users-file: exit %d\n%s", code, errOut)
	}
	if !strings.Contains(out, "read 3 events") {
		t.Errorf("replay --users-file of \"Smith, Bob\" and alice: stdout %q, want 3 events read (2 of Smith, Bob, 1 of alice)", out)
	}
	// Bad arguments: exit status 2, naming the flag. Before, a missing
	// file exited 1 and a job size over the most was cut without a word.
	for _, args := range [][]string{
		{"--users-file", filepath.Join(t.TempDir(), "missing")},
		{"--job-size", "501"},
	} {
		_, errOut, code := runArgs(context.Background(), append(append([]string{"replay", "--dry-run"}, args...), common...)...)
		if code != 2 || !strings.Contains(errOut, args[0]) {
			t.Errorf("replay %v: exit %d, %q; want 2 naming %s", args, code, errOut, args[0])
		}
	}
}

// TestReplayJobSizesMatchHelp: replay splits the turns into jobs of the size
// its -h states, for the offline extractor and for an LLM.
func TestReplayJobSizesMatchHelp(t *testing.T) {
	t.Parallel()
	help, _, _ := runArgs(context.Background(), "replay", "-h")
	sizes := regexp.MustCompile(`0 picks (\d+) for the offline extractor and (\d+) for an LLM`).FindStringSubmatch(help)
	if sizes == nil {
		t.Fatalf("replay -h states no job sizes:\n%s", help)
	}
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	const turns = 101
	publishTurns(t, nc, prefix, stream, turns)
	for i, extra := range [][]string{nil, {"--llm-base-url", "http://127.0.0.1:1/v1", "--llm-model", "m"}} {
		size, _ := strconv.Atoi(sizes[i+1])
		dbURL := storetest.Migrated(t)
		args := append([]string{"replay", "--no-work", "--database-url", dbURL, "--nats-url", eventstest.URL(), "--prefix", prefix, "--stream", stream, "--log-format", "json"}, extra...)
		if _, errOut, code := runArgs(context.Background(), args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, errOut)
		}
		s := storetest.Unmigrated(t, dbURL) // migrated
		depth, err := s.QueueDepth(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got, want := depth[[2]string{"extract", "available"}], int64((turns+size-1)/size); got != want {
			t.Errorf("%v: %d jobs for %d turns; -h says jobs of %d turns, so %d", extra, got, turns, size, want)
		}
	}
}

// publishTurns publishes n turns of two users to the test stream.
func publishTurns(t *testing.T, nc *nats.Conn, prefix, stream string, n int) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: prefix, Stream: stream}); err != nil {
		t.Fatal(err)
	}
	pub := events.NewPublisher(js, prefix)
	base := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	for i := range n {
		turn := events.Turn{ID: fmt.Sprintf("turn-%d", i), UserID: []string{"alice", "bob"}[i%2], UserMessage: fmt.Sprintf("I live in city %d", i),
			AssistantResponse: "noted", Timestamp: base.Add(time.Duration(i) * time.Minute)}
		if _, err := pub.Publish(ctx, turn); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServeHelpShowsComponentDefaults: serve's flags start from the
// components' own defaults (through app.Defaults), so -h shows what a
// component does with its field unset and no default is written twice.
func TestServeHelpShowsComponentDefaults(t *testing.T) {
	t.Parallel()
	w, e := worker.Config{}.WithDefaults(), enricher.Config{}.WithDefaults()
	l := extractor.LLMConfig{}.WithDefaults()
	out, _, _ := runArgs(context.Background(), "serve", "-h")
	entries := helpEntries(t, out)
	for name, want := range map[string]string{
		"workers":             strconv.Itoa(w.Workers),
		"batch-size":          strconv.Itoa(w.BatchSize),
		"max-attempts":        strconv.Itoa(w.MaxAttempts),
		"job-timeout":         w.JobTimeout.String(),
		"ack-wait":            w.AckWait.String(),
		"prune-interval":      w.PruneInterval.String(),
		"turn-retention":      w.TurnRetention.String(),
		"changes-max-age":     worker.ChangesConfig{}.WithDefaults().MaxAge.String(),
		"enrich-timeout":      e.Timeout.String(),
		"llm-timeout":         l.Timeout.String(),
		"llm-concurrency":     strconv.Itoa(l.MaxConcurrency),
		"llm-response-format": strconv.Quote(l.ResponseFormat),
		"llm-max-tokens":      strconv.Itoa(l.MaxTokens),
		"llm-max-outage":      w.MaxModelOutage.String(),
		"database-url":        strconv.Quote(store.DefaultURL),
		"prefix":              strconv.Quote(events.DefaultPrefix),
		"stream":              strconv.Quote(events.DefaultStream),
		"create-database":     "true",
	} {
		if !strings.Contains(entries[name], "(default "+want+";") {
			t.Errorf("serve -h --%s: want default %s, got %q", name, want, entries[name])
		}
	}
	// The job size is chosen from the extractor when 0: -h names both sizes.
	if e := entries["job-size"]; !strings.Contains(e, fmt.Sprintf("0 picks %d for the offline extractor and %d for an LLM", app.JobSizeRules, app.JobSizeLLM)) {
		t.Errorf("serve -h --job-size: %q", e)
	}
}

// TestEverySettingIsAFileKey: one memoryd.yaml serves every command, so
// each command's settings (the flags with an environment variable) are
// keys every other command accepts and skips, rather than "unknown key".
func TestEverySettingIsAFileKey(t *testing.T) {
	t.Parallel()
	for _, c := range commands() {
		out, _, _ := runArgs(context.Background(), helpArgs(c.name)...)
		for name, entry := range helpEntries(t, out) {
			if strings.Contains(entry, "env MEMORYD_") && !knownFlag(name) {
				t.Errorf("%s's setting --%s is an unknown key to the other commands' configuration file", c.name, name)
			}
		}
	}
}

// replay --reset naming a stream that is not there deletes nothing: the
// reset came first, and a mistyped --stream emptied every user's memory.
func TestReplayResetOfAMissingStreamDeletesNothing(t *testing.T) {
	t.Parallel()
	common, _, _ := replaySetup(t, 4)
	ctx := context.Background()
	if _, errOut, code := runArgs(ctx, append([]string{"replay"}, common...)...); code != 0 {
		t.Fatalf("replay: exit %d\n%s", code, errOut)
	}
	before := countRows(t, common[1], "context")
	if before == 0 {
		t.Fatal("the replay extracted no context: the test's premise does not hold")
	}
	args := append([]string{"replay", "--reset"}, common...)
	args = append(args, "--stream", "MEMORYD_NO_SUCH_STREAM")
	_, errOut, code := runArgs(ctx, args...)
	if code == 0 || !strings.Contains(errOut, "MEMORYD_NO_SUCH_STREAM") {
		t.Errorf("replay --reset of a missing stream: exit %d, stderr %q; want a failure naming the stream", code, errOut)
	}
	if after := countRows(t, common[1], "context"); after != before {
		t.Errorf("replay --reset of a missing stream left %d of %d context items", after, before)
	}
	// Nor another prefix: the stream does not capture its turns, which is
	// found before the database is opened (the database, recorded as the
	// first prefix's, would refuse it too).
	args = append([]string{"replay", "--reset"}, common...)
	args = append(args, "--prefix", "nosuchprefix")
	_, errOut, code = runArgs(ctx, args...)
	if code == 0 || !strings.Contains(errOut, `not the turns of prefix "nosuchprefix"`) {
		t.Errorf("replay --reset of another prefix: exit %d, stderr %q; want a failure naming the prefixes", code, errOut)
	}
	if after := countRows(t, common[1], "context"); after != before {
		t.Errorf("replay --reset of a prefix the stream does not store left %d of %d context items", after, before)
	}
}

// A replay --reset stopped while it reads (Ctrl-C) says that the users'
// memory was deleted and is not rebuilt yet, and what to run; it said only
// "context canceled".
func TestInterruptedReplayResetSaysTheMemoryIsGone(t *testing.T) {
	t.Parallel()
	common, _, _ := replaySetup(t, 600) // more than one batch of 500 read: the first progress report is mid-read
	ctx := context.Background()
	if _, errOut, code := runArgs(ctx, append([]string{"replay"}, common...)...); code != 0 {
		t.Fatalf("replay: exit %d\n%s", code, errOut)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out bytes.Buffer
	errOut := &cancelOn{match: "replay progress", cancel: cancel}
	code := run(rctx, &cli{stdout: &out, stderr: errOut}, append([]string{"replay", "--reset"}, common...))
	if code == 0 || !strings.Contains(errOut.String(), "the reset deleted") || !strings.Contains(errOut.String(), "run memoryd replay again") {
		t.Errorf("replay --reset interrupted while it reads: exit %d, stderr %q; want it to say the memory is deleted and to run replay again", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "memoryd replay: interrupted after reading ") || strings.Contains(errOut.String(), "context canceled") {
		t.Errorf("replay --reset interrupted while it reads: stderr %q; want the error said as an interruption, not as the store's \"context canceled\"", errOut.String())
	}

	// It is not only that command that knows: a replay of someone else
	// says so when it ends, and serve when it starts (a replay killed, or
	// run by someone else, says nothing itself).
	const unfinished = "has not read the stream back"
	out2, errOut2, code := runArgs(ctx, append([]string{"replay", "--user", "carol"}, common...)...)
	if code != 0 || !strings.Contains(errOut2, "a replay --reset of every user at") || !strings.Contains(errOut2, unfinished) {
		t.Errorf("replay of carol after the interrupted reset: exit %d, stdout %q, stderr %q; want it to warn of the unfinished reset", code, out2, errOut2)
	}
	sctx, scancel := context.WithTimeout(ctx, 2*time.Minute)
	defer scancel()
	serveErr := &cancelOn{match: unfinished, cancel: scancel}
	run(sctx, &cli{stdout: io.Discard, stderr: serveErr}, append([]string{"serve"}, common...))
	if !strings.Contains(serveErr.String(), unfinished) {
		t.Errorf("serve after the interrupted reset did not warn of it; log:\n%s", serveErr.String())
	}
	// A replay of every user reads it back: it says so, and nothing is
	// left to warn of.
	out3, errOut3, code := runArgs(ctx, append([]string{"replay"}, common...)...)
	if code != 0 || !strings.Contains(out3, "completed 1 earlier replay --reset") || strings.Contains(errOut3, unfinished) {
		t.Errorf("replay of everyone after the interrupted reset: exit %d, stdout %q, stderr %q; want it to complete the reset", code, out3, errOut3)
	}
}

// cancelOn is a writer, safe for concurrent use (a serve logs from many
// goroutines), that calls cancel once what was written holds match.
type cancelOn struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	match  string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.buf.Write(p)
	if strings.Contains(c.buf.String(), c.match) {
		c.cancel()
	}
	return n, err
}

func (c *cancelOn) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// A replay stopped while it waits for the extraction (Ctrl-C, or a
// `timeout` in a script) exits 1, saying the rest is enqueued: it exited 0,
// which says "done", while the users' turns were not extracted.
func TestReplayInterruptedWaitingIsNotDone(t *testing.T) {
	t.Parallel()
	common, _, _ := replaySetup(t, 5)
	llm := extractortest.NewServer(t)
	// The model is down: the replay's workers retry, and the wait goes on.
	llm.SetHandler(func(openai.ChatCompletionRequest) extractortest.Reply {
		return extractortest.Error(http.StatusServiceUnavailable, "down for the test")
	})
	rctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &cancelOn{match: "turns enqueued for extraction", cancel: cancel}
	var errOut bytes.Buffer
	args := append([]string{"replay", "--llm-base-url", llm.URL(), "--llm-model", "m"}, common...)
	code := run(rctx, &cli{stdout: out, stderr: &errOut}, args)
	if !strings.Contains(out.String(), "5 turns enqueued") {
		t.Fatalf("replay: exit %d, stdout %q, stderr %q: it did not enqueue the turns", code, out.String(), errOut.String())
	}
	if code != 1 || !strings.Contains(errOut.String(), "interrupted") || !strings.Contains(errOut.String(), "re-running replay is safe") {
		t.Errorf("replay interrupted while waiting for the extraction: exit %d, stderr %q; want exit 1 saying the rest is enqueued and replay can be re-run", code, errOut.String())
	}
	if strings.Contains(out.String(), "replay done") {
		t.Errorf("replay interrupted while waiting said it was done: %q", out.String())
	}
}

// countRows counts the rows of table in the database at url.
func countRows(t *testing.T, url, table string) int {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A user id (or other text argument) that is not UTF-8, or holds a NUL,
// is refused as a bad argument before anything runs; forget passed it to
// Postgres and printed its encoding error.
func TestTextArgumentsMustBeUTF8(t *testing.T) {
	t.Parallel()
	unreachable := []string{"--database-url", "postgres://memoryd@127.0.0.1:1/none", "--nats-url", "nats://127.0.0.1:1"}
	for _, args := range [][]string{
		{"forget", "--user", "\xff\xfe"},
		{"facts", "list", "--user", "al\x00ice"},
		{"replay", "--user", "\xffbob", "--dry-run"},
		{"publish", "--user", "alice", "--message", "I live in \xffOslo"},
	} {
		_, errOut, code := runArgs(context.Background(), append(args, unreachable...)...)
		if code != 2 || !(strings.Contains(errOut, "is not valid UTF-8") || strings.Contains(errOut, "contains a NUL byte")) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 saying the argument is not UTF-8 text", args, code, errOut)
		}
	}
}

// Text that is not UTF-8 in a positional argument or a file is refused
// too, before it is sent (here to a NATS server on which no memoryd
// answers): encoding/json replaced each bad byte with U+FFFD, so the
// service stored "K\uFFFDln" and the command succeeded.
func TestTextInArgumentsAndFilesMustBeUTF8(t *testing.T) {
	t.Parallel()
	nc := eventstest.Conn(t)
	prefix, _ := eventstest.Names(t, nc)
	dir := t.TempDir()
	latin1 := filepath.Join(dir, "menu.md")
	if err := os.WriteFile(latin1, []byte("# Caf\xe9 menu\n\nWe serve cr\xe8me br\xfbl\xe9e.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	export := filepath.Join(dir, "alice.jsonl")
	if err := os.WriteFile(export, []byte(events.ExportHeader+"\n{\"kind\":\"fact\",\"key\":\"city\",\"value\":\"K\xf6ln\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	conn := []string{"--nats-url", eventstest.URL(), "--prefix", prefix, "--timeout", "5s"}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"memory", "store", "--user", "carol", "Where \xff is it", "here"}, 2, "the request's question is not valid UTF-8"},
		{[]string{"facts", "set", "--user", "carol", "city", "K\xf6ln"}, 2, "the request's value is not valid UTF-8"},
		// A read is sent, its bad bytes replaced (no service answers here).
		{[]string{"enrich", "--user", "carol", "where is K\xf6ln?"}, 1, "no memoryd service answers"},
		// docs put reports each file and exits 1 when any failed.
		{[]string{"docs", "put", "--user", "carol", "--collection", "edge", latin1}, 1, "menu.md: failed: the request's content is not valid UTF-8"},
		{[]string{"import", "--user", "carol", export}, 2, "line 2: not valid UTF-8"},
	} {
		out, errOut, code := runArgs(context.Background(), append(tt.args, conn...)...)
		if code != tt.code || !strings.Contains(out+errOut, tt.want) {
			t.Errorf("%q: exit %d, output %q; want exit %d saying %q", tt.args, code, out+errOut, tt.code, tt.want)
		}
	}
}

// publish refuses what would wait on a terminal or fail obscurely: an empty
// --message (it read standard input instead), --user without --message,
// and, with --ensure-stream=false, a prefix no stream stores (JetStream
// says only "no response from stream").
func TestPublishSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	nc := eventstest.Conn(t)
	prefix, _ := eventstest.Names(t, nc)
	conn := []string{"--nats-url", eventstest.URL(), "--prefix", prefix}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--user", "alice", "--message", ""}, 2, "--message is empty"},
		{[]string{"--user", "alice", "--message", "  "}, 2, "--message is empty"},
		{[]string{"--user", "alice"}, 2, "--user goes with --message"},
		// A flag's value a turn cannot hold is a usage error (it exited 1).
		{[]string{"--user", strings.Repeat("u", 300), "--message", "hi"}, 2, "user_id"},
		{[]string{"--user", "alice", "--message", "hi", "--id", strings.Repeat("i", 200)}, 2, "id"},
		{[]string{"--ensure-stream=false", "--user", "alice", "--message", "I live in Oslo"}, 1, "no stream stores " + events.TurnSubjects(prefix)},
	} {
		_, errOut, code := runArgs(context.Background(), append(append([]string{"publish"}, tt.args...), conn...)...)
		if code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("publish %q: exit %d, stderr %q; want %d saying %q", tt.args, code, errOut, tt.code, tt.want)
		}
	}
}

// replay's summary adds up: events neither invalid, opted out, forgotten
// nor enqueued are counted with why (here: already pending from the replay
// before, which no worker ran).
func TestReplaySummaryAddsUp(t *testing.T) {
	t.Parallel()
	common, _, _ := replaySetup(t, 4)
	args := append([]string{"replay", "--no-work"}, common...)
	if out, errOut, code := runArgs(context.Background(), args...); code != 0 || !strings.Contains(out, "4 turns enqueued") {
		t.Fatalf("first replay: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code := runArgs(context.Background(), args...)
	if code != 0 || !strings.Contains(out, "read 4 events") || !strings.Contains(out, "0 turns enqueued") || !strings.Contains(out, "4 events not enqueued again") {
		t.Errorf("second replay: exit %d, stdout %q, stderr %q; want its 4 events accounted for", code, out, errOut)
	}
}

// A client command's setting from the configuration file keeps its source
// through the parses after each argument, so that a bad value names the
// file; an unreadable file or a bad variable is a bad argument (exit 2).
func TestClientSettingErrorsNameTheirSource(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "memoryd.yaml")
	for _, tt := range []struct {
		file, want string
	}{
		{"timeout: -1s\n", "timeout is set in " + path},
		{"timeout: [1]\n", "timeout must be a single value"},
		{"timeout: [1\n", "config file " + path},
	} {
		if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := runArgs(context.Background(), "enrich", "--config", path, "--user", "u", "where do I live?", "--nats-url", "nats://127.0.0.1:1")
		if code != 2 || !strings.Contains(errOut, tt.want) {
			t.Errorf("file %q: exit %d, stderr %q; want 2 saying %q", tt.file, code, errOut, tt.want)
		}
	}
}

// TestReplayWarnsWithoutTheEmbeddingEndpoint: a replay that extracts in
// its own process without --embed-base-url, in a database holding
// vectors, while no running worker embeds, says that its items get no
// embed jobs (a race hunt found 29 to 276 items of a replayed user found
// by keywords only until the hourly sweep, and nothing said so); with the
// endpoint, with --no-work, or beside a running worker that embeds (its
// items then get that worker's model's jobs: worker.EmbedFollower), it
// says nothing of the kind.
func TestReplayWarnsWithoutTheEmbeddingEndpoint(t *testing.T) {
	t.Parallel()
	common, _, _ := replaySetup(t, 2)
	dbURL := common[1]
	s := storetest.Open(t, dbURL)
	if _, err := s.Pool().Exec(context.Background(), `INSERT INTO embedding_models (model, dims) VALUES ('nomic-embed-text', 768)`); err != nil {
		t.Fatal(err)
	}
	const warning = "extracts without --embed-base-url, no running worker embeds, and the database holds vectors"
	for _, c := range []struct {
		args []string
		warn bool
		// live records a running worker that embeds with nomic-embed-text
		// first.
		live bool
	}{
		{nil, true, false},
		{[]string{"--no-work"}, false, false},
		{[]string{"--embed-base-url", embeddingtest.New(t).URL}, false, false},
		{nil, false, true},
	} {
		if c.live {
			if _, err := s.Pool().Exec(context.Background(), `INSERT INTO memoryd_processes (id, embed_model, heartbeat_at)
				VALUES ('serve-embedding', 'nomic-embed-text', now() + interval '1 hour')`); err != nil {
				t.Fatal(err)
			}
		}
		out, errOut, code := runArgs(context.Background(), append(append([]string{"replay"}, c.args...), common...)...)
		if code != 0 {
			t.Fatalf("replay %v: exit %d\n%s%s", c.args, code, out, errOut)
		}
		if strings.Contains(errOut, warning) != c.warn {
			t.Errorf("replay %v: warned %v, want %v\n%s", c.args, !c.warn, c.warn, errOut)
		}
	}
}

// TestEnrichPoolCapSaid: the --database-url's pool_max_conns caps the
// enrich pool; a size the operator set above it is lowered with a warning
// naming the flag, the default's silently.
func TestEnrichPoolCapSaid(t *testing.T) {
	url := "--database-url=postgres://u@db:5432/m?pool_max_conns=4"
	_, errOut, code := runArgs(context.Background(), "config", "print", url, "--enrich-max-conns", "16")
	if code != 0 || !strings.Contains(errOut, "--enrich-max-conns 16 is lowered to 4") {
		t.Errorf("--enrich-max-conns 16 under pool_max_conns=4: exit %d, stderr %q; want a warning naming it", code, errOut)
	}
	if _, errOut, code = runArgs(context.Background(), "config", "print", url); code != 0 || strings.Contains(errOut, "lowered") {
		t.Errorf("the default under pool_max_conns=4: exit %d, stderr %q; want no warning", code, errOut)
	}
}

// A configuration file naming one setting twice, in its two spellings
// (nats-url and nats_url are the same key), is refused: which value won
// depended on the order Go iterates a map (a walk saw nats_url win).
func TestConfigFileRefusesOneKeyTwice(t *testing.T) {
	t.Parallel()
	_, errOut, code := configPrintOf(t, "nats-url: nats://127.0.0.1:1\nnats_url: nats://127.0.0.1:2\n")
	if code != 2 || !strings.Contains(errOut, "nats-url and nats_url are the same key") {
		t.Errorf("config print with nats-url and nats_url: exit %d, stderr %q; want exit 2 naming both", code, errOut)
	}
}

// A key written without a value ("llm-base-url:", "key: ~") is not set: it
// was the text "<nil>", a base URL refused as such.
func TestConfigFileKeyWithoutValueIsUnset(t *testing.T) {
	t.Parallel()
	out, errOut, code := configPrintOf(t, "llm-base-url:\nllm-model: ~\n")
	if code != 0 || strings.Contains(out, "<nil>") {
		t.Errorf("config print with empty keys: exit %d, stderr %q, stdout %q; want them unset", code, errOut, out)
	}
}

// configPrintOf runs config print on a configuration file holding yaml.
func configPrintOf(t *testing.T, yaml string) (stdout, stderr string, code int) {
	t.Helper()
	path := t.TempDir() + "/memoryd.yaml"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return runArgs(context.Background(), "config", "print", "--config", path)
}

// TestReplayDoesNotWaitForLiveTurns: replay waits for the turns it read, not
// for turns ingest recorded after it began reading. Found by a lifecycle
// walk: with turns published steadily beside a model taking 2-5 s, some live
// turn was always pending, and a `replay --since` of 48 turns, all processed
// within 45 s, waited until its `timeout 150` ended it (exit 1,
// "interrupted"). Here a pending turn stored after the stream's end stands
// for that flow: before the fix, the replay waited until the test's
// deadline.
func TestReplayDoesNotWaitForLiveTurns(t *testing.T) {
	t.Parallel()
	common, _, _ := replaySetup(t, 4)
	dbURL := common[1]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A first replay extracts the 4 turns (on replaySetup's migrated schema).
	if out, errOut, code := runArgs(ctx, append([]string{"replay"}, common...)...); code != 0 || !strings.Contains(out, "replay done") {
		t.Fatalf("first replay: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// A live turn recorded after the stream's last sequence, still pending
	// extraction: its job waits (snoozed by a rate limit, say) for an hour.
	if _, err := pool.Exec(ctx, `INSERT INTO turns (event_id, user_id, user_message, turn_at, stream_seq, status)
		VALUES ('live-1', 'carol', 'I live in Bergen', now(), 1000, 'pending')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO river_job (kind, args, queue, max_attempts, metadata, priority, state, scheduled_at)
		VALUES ('memoryd_extract', '{"user_id": "carol", "event_ids": ["live-1"]}', 'extract', 5, '{"memoryd_source": "ingest"}', 1, 'scheduled', now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runArgs(ctx, append([]string{"replay"}, common...)...)
	if code != 0 || !strings.Contains(out, "replay done") {
		t.Errorf("replay beside a live pending turn: exit %d, stdout %q, stderr %q; want done once its own 4 turns are extracted", code, out, errOut)
	}
	var status string
	if err := pool.QueryRow(context.Background(), `SELECT status FROM turns WHERE event_id = 'live-1'`).Scan(&status); err != nil || status != "pending" {
		t.Errorf("the live turn: status %q, %v; want it left pending (not the replay's)", status, err)
	}
}

// A blank --user of deadletters is refused before anything runs: "" (a
// script's unset variable) listed every user's dead letters and "  " none
// (an identity walk), where every other command refuses a blank user id.
func TestDeadLettersRefusesABlankUser(t *testing.T) {
	t.Parallel()
	unreachable := []string{"--nats-url", "nats://127.0.0.1:1"}
	for _, user := range []string{"", "  "} {
		_, errOut, code := runArgs(context.Background(), append([]string{"deadletters", "--user", user}, unreachable...)...)
		if code != 2 || !strings.Contains(errOut, "--user is blank") {
			t.Errorf("deadletters --user %q: exit %d, stderr %q; want exit 2 saying --user is blank", user, code, errOut)
		}
	}
}

// TestForgetThatFailedSaysRunAgain: a forget whose database side fails
// says that it did not finish and that running it again is safe, and run
// again it completes (a Postgres walk's user read only "forget: lock
// users: unexpected EOF"). The failure here is a table missing from the
// test's own schema.
func TestForgetThatFailedSaysRunAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := storetest.Migrated(t)
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	conn := []string{"--database-url", dbURL, "--nats-url", eventstest.URL(), "--prefix", prefix, "--stream", stream, "--log-level", "error"}
	if _, errOut, code := runArgs(ctx, append([]string{"publish", "--user", "alice", "--message", "I live in Oslo."}, conn...)...); code != 0 {
		t.Fatalf("publish: exit %d, %s", code, errOut)
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `ALTER TABLE facts RENAME TO facts_away`); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runArgs(ctx, append([]string{"forget", "--user", "alice"}, conn...)...)
	if code != 1 || !strings.Contains(errOut, "the forget did not finish and deleted nothing; it is safe to run again") {
		t.Fatalf("forget with its database side failing: exit %d, stderr %q", code, errOut)
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE facts_away RENAME TO facts`); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runArgs(ctx, append([]string{"forget", "--user", "alice"}, conn...)...)
	if code != 0 || !strings.Contains(out, `"stream_events": 1`) {
		t.Fatalf("forget run again: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestModelFlagsWithoutBaseURLSaid: a model, key or key file given without
// its server's base URL is unused (the offline rules extract; retrieval is
// lexical), and said so, naming the flag; with the URL, nothing is said.
func TestModelFlagsWithoutBaseURLSaid(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(key, []byte("sk-test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--llm-api-key-file", key}, "--llm-api-key-file is set without --llm-base-url"},
		{[]string{"--llm-model", "m"}, "--llm-model is set without --llm-base-url"},
		{[]string{"--embed-api-key", "k"}, "--embed-api-key is set without --embed-base-url"},
		{[]string{"--llm-base-url", "http://127.0.0.1:1/v1", "--llm-model", "m", "--llm-api-key-file", key}, ""},
	} {
		_, errOut, code := runArgs(context.Background(), append([]string{"config", "print"}, c.args...)...)
		if code != 0 || c.want != "" && !strings.Contains(errOut, c.want) || c.want == "" && strings.Contains(errOut, "is set without") {
			t.Errorf("config print %v: exit %d, stderr %q; want %q", c.args, code, errOut, c.want)
		}
	}
}

// TestConfigPrintAsFileWarnsOfNothing: config print's output is a valid
// memoryd.yaml (operations.md), and read back it warns of no model setting:
// its empty keys and default model names are not settings given without a
// base URL (an ops walk's commands each warned six times, "--llm-api-key
// is set without --llm-base-url", of llm_api_key: "").
func TestConfigPrintAsFileWarnsOfNothing(t *testing.T) {
	out, errOut, code := runArgs(context.Background(), "config", "print")
	if code != 0 {
		t.Fatalf("config print: exit %d, stderr %q", code, errOut)
	}
	file := filepath.Join(t.TempDir(), "memoryd.yaml")
	if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = runArgs(context.Background(), "config", "print", "--config", file)
	if code != 0 || strings.Contains(errOut, "is set without") {
		t.Fatalf("config print --config of its own output: exit %d, stderr %q", code, errOut)
	}
}
