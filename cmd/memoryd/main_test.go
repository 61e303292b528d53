package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
)

// runCmd runs the binary's entry point with isolated Postgres schema and
// NATS prefix, the way a user would run the command.
func runCmd(t *testing.T, dbURL, prefix, stream string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	full := append([]string{}, args...)
	full = append(full, "--database-url", dbURL+fmt.Sprintf("&pool_max_conns=%d", storetest.MaxConns), "--nats-url", eventstest.URL(), "--prefix", prefix, "--stream", stream, "--log-format", "json")
	code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, full)
	return out.String(), errOut.String(), code
}

func TestDemoPrintsStoredMemory(t *testing.T) {
	t.Parallel()
	_, dbURL := storetest.Schema(t)
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "demo")
	if code != 0 {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"offline rules", "name", "Ada", "location", "Lisbon", "favorite_food", "grilled sardines", "context (5 items", "[facts:"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	// Its times name their zone, as every time printed for people does
	// (README, "Running it"): "[2026-11-20 09:00]" read in another zone
	// than UTC looked like the turns' own time.
	contextLine := regexp.MustCompile(`(?m)^  \[\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)? [^\]\s]+\] Q: `)
	if n := len(contextLine.FindAllString(out, -1)); n != 5 {
		t.Errorf("demo output has %d context lines with a time naming its zone, want 5:\n%s", n, out)
	}
	// Running it again changes nothing and still succeeds.
	out2, errOut2, code := runCmd(t, dbURL, prefix, stream, "demo")
	if code != 0 || !strings.Contains(out2, "context (5 items") {
		t.Fatalf("second demo run: exit %d\n%s\n%s", code, out2, errOut2)
	}
}

func TestPublishFromStdinJSON(t *testing.T) {
	t.Parallel()
	var sent []string
	in := strings.NewReader(`{"id":"a","user_id":"alice","user_message":"hi","timestamp":"2026-11-21T10:00:00Z"}
{"user_id":"bob","user_message":"yo"}`)
	err := publishStream(in, func(turn events.Turn) error {
		sent = append(sent, turn.UserID+":"+turn.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 || sent[0] != "alice:a" || !strings.HasPrefix(sent[1], "bob:evt-") {
		t.Fatalf("sent = %v", sent)
	}
	if err := publishStream(strings.NewReader(`{"id":`), func(events.Turn) error { return nil }); err == nil {
		t.Fatal("malformed stdin accepted")
	}
	// Latin-1 bytes in a JSON string: decoding would have published
	// "K\uFFFDln" as if it had been sent.
	err = publishStream(strings.NewReader("{\"user_id\":\"alice\",\"user_message\":\"I live in K\xf6ln\"}"), func(turn events.Turn) error {
		t.Errorf("published %q", turn.UserMessage)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "stdin turn 1: not valid UTF-8") {
		t.Fatalf("stdin turn with invalid UTF-8: %v", err)
	}
}

func TestUnknownCommandAndBadEnv(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, []string{"nope"}); code != 2 {
		t.Fatalf("unknown command exit = %d", code)
	}
	t.Setenv("MEMORYD_WORKERS", "many")
	errOut.Reset()
	if code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, []string{"serve"}); code != 2 || !strings.Contains(errOut.String(), "MEMORYD_WORKERS") {
		t.Fatalf("bad env: exit %d, stderr %q", code, errOut.String())
	}
	// A connection setting is traced to its variable too (before, a bad
	// prefix from the environment was named as the flag alone).
	t.Setenv("MEMORYD_WORKERS", "2")
	t.Setenv("MEMORYD_PREFIX", "a b")
	for _, args := range [][]string{{"stats", "--user", "x"}, {"serve"}} {
		errOut.Reset()
		if code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, args); code != 2 || !strings.Contains(errOut.String(), "(set by MEMORYD_PREFIX)") {
			t.Errorf("%s with a bad MEMORYD_PREFIX: exit %d, stderr %q", args[0], code, errOut.String())
		}
	}
}

// TestCheckNATSURL: a --nats-url nats.go would dial at another address
// than the one written is refused before any dial, naming what it read; a
// URL nats.go dials as meant passes. The password is never echoed.
func TestCheckNATSURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want string // "" for accepted
	}{
		{"nats://127.0.0.1:4222", ""},
		{"127.0.0.1:4222", ""},
		{"localhost", ""},
		{"nats://:4222", ""},
		{"[::1]:4222", ""},
		{"tls://nats.example.com:4443/", ""},
		{"ws://127.0.0.1:8080/nats", ""}, // websocket URLs may have a path
		{"nats://a:4222, nats://b:4222,", ""},
		{"nats://u:pw@127.0.0.1:4222", ""},
		{"nats//127.0.0.1:4222", `reads as host "nats" and path "//127.0.0.1:4222"`},
		{"127.0.0.1:4222:1", `names no host and port to dial ("127.0.0.1:4222:1")`},
		{"nats://u:secret@127.0.0.1:42x2", `invalid port ":42x2" after host`},
		{"nats://a:4222,nats://b:4222/x", `reads as host "b:4222" and path "/x"`},
		{"nats://[::1", "is not a URL such as nats://127.0.0.1:4222"},
		// A password with a character that ends the authority: the
		// parse reads part of it as a port, a host or a path.
		{"nats://u:secret#1@127.0.0.1:4222", "written %2F, %3F, %23 or %40"},
		{"nats://u:secret?1@127.0.0.1:4222", "written %2F, %3F, %23 or %40"},
		{"nats://u:secret/1@127.0.0.1:4222", "written %2F, %3F, %23 or %40"},
		{"nats://u:9/secret@127.0.0.1:4222", "written %2F, %3F, %23 or %40"},
		{"nats://u:secret%2F1@127.0.0.1:4222", ""},
		// An unescaped '%' in a password: the parse's error quotes the
		// '%' and the two characters after it.
		{"nats://u:50%secret@127.0.0.1:4222", "a '%' in a user or password is written %25"},
		{"nats://u:secret%@127.0.0.1:4222", "a '%' in a user or password is written %25"},
		{"nats://u:p@ss%secret@127.0.0.1:4222", "a '%' in a user or password is written %25"},
		{"nats://127.0.0.1%zz:4222", `invalid URL escape "%zz"`},
		// A ',' in a password: nats.go splits the list there, and the
		// parse reads the piece before it as a port, a host or a path.
		{"nats://u:secret,1@127.0.0.1:4222", "a ',' in a user or password is written %2C)"},
		{"nats://u:1:secret,1@127.0.0.1:4222", "a ',' in a user or password is written %2C)"},
		{"nats://u:secret:1,2@127.0.0.1:4222", "a ',' in a user or password is written %2C)"},
		{"nats://u@x:secret,1@127.0.0.1:4222", "a ',' in a user or password is written %2C)"},
		{"nats://u:secret%2C1@127.0.0.1:4222", ""},
		{"nats://a:4222,u:pw@b:4222", ""},
		{"nats//a:4222,nats://u:pw@b:4222", "has a URL before one with a user or password that is not a URL"},
	} {
		err := checkNATSURL(tc.url)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("checkNATSURL(%q) = %v; want it accepted", tc.url, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("checkNATSURL(%q) = %v; want an error holding %q", tc.url, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "secret"):
			t.Errorf("checkNATSURL(%q) echoed the password: %v", tc.url, err)
		}
	}
	// Through a command: refused as a usage error (exit 2), before any dial.
	var out, errOut bytes.Buffer
	code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, []string{"stats", "--user", "x", "--nats-url", "nats//127.0.0.1:4222"})
	if code != 2 || !strings.Contains(errOut.String(), "--nats-url reads as host") {
		t.Errorf("stats with --nats-url nats//127.0.0.1:4222: exit %d, stderr %q; want exit 2 naming the host and path it reads", code, errOut.String())
	}
}

func TestMigrateNamesUnreachablePostgres(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run(context.Background(), &cli{stdout: &out, stderr: &errOut},
		[]string{"migrate", "--database-url", "postgres://postgres@127.0.0.1:1/memoryd?sslmode=disable&connect_timeout=2", "--log-format", "json"})
	if code != 1 || !strings.Contains(errOut.String(), "Postgres is not reachable at 127.0.0.1:1") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	// Debian's default cluster listens on 5432: naming it for another
	// port sends the operator to start the wrong server.
	if strings.Contains(errOut.String(), "15 main") {
		t.Fatalf("a server on port 1 was told to start Debian's default cluster: %q", errOut.String())
	}
}

// TestMigrateNamesFullPostgres: a server that refuses a connection for
// want of slots (53300) is named as full, not as unreachable. A role with
// CONNECTION LIMIT 0 gets that refusal without filling the shared server.
func TestMigrateNamesFullPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := storetest.Schema(t)
	conn, err := pgx.Connect(ctx, storetest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	role := "t_full_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE ROLE "+role+" LOGIN CONNECTION LIMIT 0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := conn.Exec(context.Background(), "DROP ROLE "+role); err != nil {
			t.Logf("drop role %s: %v", role, err)
		}
		conn.Close(context.Background())
	})
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	var out, errOut bytes.Buffer
	code := run(ctx, &cli{stdout: &out, stderr: &errOut}, []string{"migrate", "--database-url", u.String(), "--log-format", "json"})
	if code != 1 || !strings.Contains(errOut.String(), "has no free connection") || strings.Contains(errOut.String(), "not reachable") ||
		!strings.Contains(errOut.String(), `ALTER ROLE "`+role+`" CONNECTION LIMIT`) || strings.Contains(errOut.String(), "max_connections") {
		t.Fatalf("exit %d, stderr %q; want the role's connection limit named as what is full", code, errOut.String())
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int64
		bad  bool
	}{
		{"", 0, false},
		{"1024", 1024, false},
		{"500M", 500 << 20, false},
		{"10G", 10 << 30, false},
		{"10g", 10 << 30, false},
		{"1.5K", 1536, false},
		{"2T", 2 << 40, false},
		{"64MiB", 64 << 20, false},
		{"10GB", 10 << 30, false},
		{"-1G", 0, true},
		{"ten", 0, true},
		{"10X", 0, true},
		{"99999999T", 0, true},
	}
	for _, tt := range tests {
		got, err := parseSize(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d, bad=%v", tt.in, got, err, tt.want, tt.bad)
		}
	}
}

// unsetSettingsEnv unsets, for the test, the variables of memoryd's
// settings the developer's environment sets (README: "Servers elsewhere:
// set MEMORYD_DATABASE_URL and MEMORYD_NATS_URL"): a test of where a value
// comes from must not find it in the environment of whoever runs it. The
// tests' own variables (MEMORYD_TEST_ and the like) stay.
func unsetSettingsEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "MEMORYD_") || slices.ContainsFunc(toolEnvPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		t.Setenv(name, "") // restored when the test ends
		if err := os.Unsetenv(name); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConfigFilePrecedenceAndRedaction(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/memoryd.yaml"
	if err := os.WriteFile(path, []byte("workers: 7\nrole: enrich\nbatch_size: 50\nllm_api_key: sk-secret\ndatabase_url: postgres://u:pw@db:5432/m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	unsetSettingsEnv(t)
	t.Setenv("MEMORYD_BATCH_SIZE", "99")
	var out, errOut bytes.Buffer
	if code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, []string{"config", "print", "--config", path, "--max-attempts", "9"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{
		`workers: "7"  # file ` + path,
		`role: "enrich"  # file ` + path, // serve's own flag
		`batch_size: "99"  # env MEMORYD_BATCH_SIZE`,
		`max_attempts: "9"  # flag`,
		`llm_api_key: "xxxxx"`,
		`database_url: "postgres://u:xxxxx@db:5432/m"`,
		`prefix: "memory"  # default`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("config print lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "secret") || strings.Contains(out.String(), ":pw@") {
		t.Fatal("a secret was printed")
	}
	if err := os.WriteFile(path, []byte("wrokers: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	if code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, []string{"config", "print", "--config", path}); code != 2 || !strings.Contains(errOut.String(), `unknown key "wrokers": did you mean "workers"?`) {
		t.Fatalf("misspelt key: exit %d, %q", code, errOut.String())
	}
	// A per-invocation argument in the file is said to be one, whether
	// the command has it or not, and not matched to a setting spelt alike
	// ("file" was answered "did you mean role?").
	for _, tc := range []struct{ file, cmd, want string }{
		{"user: bob\n", "stats", `key "user" is --user, an argument of memoryd stats read from the command line only`},
		{"file: x\n", "config", `unknown key "file" (per-invocation arguments, such as --user, are read from the command line only)`},
	} {
		if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		errOut.Reset()
		args := []string{"config", "print", "--config", path}
		if tc.cmd == "stats" {
			args = []string{"stats", "--config", path, "--user", "x"}
		}
		if code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, args); code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%q in the file of %s: exit %d, %q; want exit 2 and %q", tc.file, tc.cmd, code, errOut.String(), tc.want)
		}
	}
	// A bad file value says what it must be, as a bad variable does, with
	// a bad flag's exit status.
	if err := os.WriteFile(path, []byte("workers: many\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	if code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, []string{"config", "print", "--config", path}); code != 2 || !strings.Contains(errOut.String(), `workers: "many" is not a whole number`) {
		t.Fatalf("bad file value: exit %d, %q", code, errOut.String())
	}
	// A value out of range names where it is set.
	if err := os.WriteFile(path, []byte("workers: -3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	if code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, []string{"config", "print", "--config", path}); code != 2 || !strings.Contains(errOut.String(), "workers is set in "+path) {
		t.Fatalf("file value out of range: exit %d, %q; want 2 naming the file", code, errOut.String())
	}
	// What serve refuses, config print refuses: it shows a configuration
	// serve would run.
	for _, args := range [][]string{{"--workers", "-3"}, {"--log-level", "loud"}, {"--max-db-size", "10Q"}, {"--role", "both"}, {"--prefix", "bad prefix"}, {"--stream", "A.B"}} {
		errOut.Reset()
		if code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, append([]string{"config", "print"}, args...)); code != 2 || !strings.Contains(errOut.String(), args[0]) {
			t.Errorf("config print %v: exit %d, %q; want 2 naming the flag", args, code, errOut.String())
		}
	}
}

func TestHelpListsEveryFlagWithEnvAndDefault(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, []string{"serve", "-h"}); code != 0 {
		t.Fatalf("serve -h: exit %d, stderr %q", code, errOut.String())
	}
	help := out.String()
	for _, want := range []string{"--nats-url", "MEMORYD_NATS_URL", `default "nats://127.0.0.1:4222"`, "--llm-api-key", "MEMORYD_LLM_API_KEY", "--max-db-size", "--config"} {
		if !strings.Contains(help, want) {
			t.Errorf("serve -h lacks %q", want)
		}
	}
}

// TestServeExplainsNATSWithoutJetStream runs its own nats-server without -js
// (own port, no data dir) and checks the one-sentence explanation.
func TestServeExplainsNATSWithoutJetStream(t *testing.T) {
	t.Parallel()
	url := eventstest.PrivateServer(t, func(port int) []string { return []string{"-a", "127.0.0.1", "-p", fmt.Sprint(port)} })
	_, dbURL := storetest.Schema(t)
	// Each command's first JetStream call: the stream for publish, the
	// ingest consumer for serve (it used to say "worker: read consumer
	// memoryd-ingest: nats: no responders available for request"), the
	// stream for replay and forget, the dead-letter stream for deadletters.
	for _, args := range [][]string{
		{"publish", "--user", "u", "--message", "hi"},
		{"serve", "--workers", "1", "--enrich-max-conns", "1", "--enrich-min-conns", "1"},
		{"replay", "--no-work"},
		{"forget", "--user", "u"},
		{"deadletters"},
	} {
		var out, errOut bytes.Buffer
		full := append(append([]string{}, args...), "--nats-url", url, "--database-url", dbURL, "--log-format", "json")
		code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, full)
		if code != 1 || !strings.Contains(errOut.String(), "without JetStream; restart it with -js") {
			t.Errorf("%s: exit %d, stderr %q", args[0], code, errOut.String())
		}
	}
}

// TestServeExplainsAnAccountWithoutServerJetStream: a server configured as
// the docs' NATS accounts example, an account with "jetstream: enabled",
// but without JetStream itself (no -js, no jetstream block: Debian's
// /etc/nats-server.conf with the example appended) answers no JetStream
// API request of that account, not even with "no responders", and each
// command failed on "context deadline exceeded" (a newcomer's walk). It
// now says what the server may lack. Newer nats-servers (2.15.2) answer
// such a request at once, as a server without JetStream: the message
// names the configuration file's jetstream block then too.
func TestServeExplainsAnAccountWithoutServerJetStream(t *testing.T) {
	t.Parallel()
	url := natsWithConfig(t, "accounts {\n  MEMORYD {\n    jetstream: enabled\n    users: [{user: memoryd, password: mpw}]\n  }\n}\n")
	_, dbURL := storetest.Schema(t)
	for _, args := range [][]string{
		{"publish", "--user", "u", "--message", "hi"},
		{"serve", "--workers", "1", "--enrich-max-conns", "1", "--enrich-min-conns", "1"},
	} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			full := append(append([]string{}, args...), "--nats-url", url, "--nats-user", "memoryd", "--nats-password", "mpw",
				"--database-url", dbURL, "--log-format", "json")
			code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, full)
			noAnswer := strings.Contains(errOut.String(), "JetStream API did not answer in time: the server may run without JetStream") // 2.9
			notEnabled := strings.Contains(errOut.String(), "the NATS server runs without JetStream; restart it with -js")              // 2.15.2
			if code != 1 || !(noAnswer || notEnabled) || !strings.Contains(errOut.String(), "top-level jetstream block") {
				t.Errorf("%s: exit %d, stderr %q", args[0], code, errOut.String())
			}
		})
	}
}

// TestClientCommandsParseFlagsAnywhere runs each client command with flags
// before and after its arguments; the parse loop used to register --config
// once per pass and panic with "flag redefined: config".
func TestClientCommandsParseFlagsAnywhere(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"enrich", "--user", "alice", "where do I live?"},
		{"facts", "set", "city", "Paris", "--user", "alice"},
		{"facts", "list", "--user", "alice"},
		{"memory", "store", "--user", "alice", "Q?", "A."},
		{"memory", "search", "dog", "--user", "alice"},
		{"stats", "--user", "alice"},
	} {
		var out, errOut bytes.Buffer
		full := append(append([]string{}, args...), "--nats-url", "nats://127.0.0.1:1", "--timeout", "1s", "--log-format", "json")
		code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, full)
		if code != 1 || !strings.Contains(errOut.String(), "127.0.0.1:1") {
			t.Errorf("%v: exit %d, stderr %q (want exit 1 naming the unreachable NATS)", args, code, errOut.String())
		}
	}
}

// TestConfigFileSharedByEveryCommand: one memoryd.yaml holds settings of
// several commands (the client commands' timeout, publish's ensure_stream,
// serve's workers); each command takes its own keys and is not refused for
// the others'.
func TestConfigFileSharedByEveryCommand(t *testing.T) {
	path := t.TempDir() + "/memoryd.yaml"
	if err := os.WriteFile(path, []byte("timeout: 10s\nensure_stream: false\nworkers: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, []string{"config", "print", "--config", path}); code != 0 {
		t.Fatalf("config print: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), `workers: "3"  # file `) {
		t.Errorf("serve's key not applied:\n%s", out.String())
	}
	// A client command takes its timeout from the file and ignores serve's
	// keys (it fails on the unreachable NATS, not on the file).
	errOut.Reset()
	code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, []string{"stats", "--config", path, "--user", "u", "--nats-url", "nats://127.0.0.1:1"})
	if code != 1 || strings.Contains(errOut.String(), "unknown key") {
		t.Fatalf("stats with a shared file: exit %d, %q", code, errOut.String())
	}
}

// TestHelpCommandShowsACommandsHelp: `memoryd help publish` prints publish's
// flags, as `memoryd publish -h` does, not the command list.
func TestHelpCommandShowsACommandsHelp(t *testing.T) {
	t.Parallel()
	var out, out2, errOut bytes.Buffer
	if code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, []string{"help", "publish"}); code != 0 {
		t.Fatalf("help publish: exit %d, %s", code, errOut.String())
	}
	run(context.Background(), &cli{stdout: &out2, stderr: &errOut}, []string{"publish", "-h"})
	if !strings.Contains(out.String(), "--message") || out.String() != out2.String() {
		t.Fatalf("help publish printed:\n%s\nwant publish -h:\n%s", out.String(), out2.String())
	}
}

// TestServeRefusesBadValuesBeforeConnecting: a value no component can use is
// a usage error naming the flag (exit 2), found before any connection (the
// database URL here points nowhere and is never dialled); 0 is not silently
// replaced by the default.
func TestServeRefusesBadValuesBeforeConnecting(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--workers", "0"}, "--workers 0 is out of range"},
		{[]string{"--batch-size", "0"}, "--batch-size 0 is out of range"},
		{[]string{"--ack-wait", "0s"}, "--ack-wait 0s is out of range"},
		{[]string{"--max-db-size", "10X"}, "--max-db-size"},
		{[]string{"--log-level", "loud"}, `--log-level "loud"`},
		{[]string{"--llm-base-url", "http://127.0.0.1:1/v1"}, "--llm-model is required with --llm-base-url"},
		{[]string{"--llm-base-url", "http://127.0.0.1:1/v1", "--llm-model", "m", "--llm-timeout", "5s", "--job-timeout", "10s"},
			"--job-timeout 10s must be longer than one extractor call, 10s (two model requests of --llm-timeout)"},
		{[]string{"--embed-base-url", "localhost:11434"}, "--embed-base-url must be an http or https URL"},
		// Checked by the extractor only once connected, before (exit 1).
		{[]string{"--llm-base-url", "ftp://127.0.0.1/v1", "--llm-model", "m"}, "must be an absolute http or https URL"},
		{[]string{"--llm-base-url", "http://127.0.0.1:2/v1", "--llm-model", "m", "--llm-response-format", "xml"}, `--llm-response-format "xml" must be "json_schema", "json_object" or "none"`},
		{[]string{"--role", "reader"}, `--role "reader" is not all, enrich or ingest`},
		{[]string{"--http", "notanaddr"}, `--http "notanaddr" is not an address`},
		{[]string{"--turn-retention", "-1h"}, "--turn-retention -1h0m0s is out of range: it must be 0 (forever) or more"},
		{[]string{"--database-url", "mysql://root:secret@127.0.0.1:1/db"}, "--database-url is a mysql:// URL: memoryd needs a postgres://"},
		{[]string{"--nats-creds", "/nonexistent/u.creds", "--nats-nkey", "/nonexistent/u.nk"}, "--nats-creds and --nats-nkey are both set"},
		{[]string{"--nats-user", "u", "--nats-password", "p", "--nats-password-file", "/nonexistent/pw"}, "--nats-password and --nats-password-file are both set"},
		{[]string{"--nats-token", "t", "--nats-token-file", "/nonexistent/tok"}, "--nats-token and --nats-token-file are both set"},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"serve", "--database-url", "postgres://postgres@127.0.0.1:1/none?connect_timeout=1", "--nats-url", "nats://127.0.0.1:1"}, tt.args...)
		code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, args)
		if code != 2 || !strings.Contains(errOut.String(), tt.want) || strings.Contains(errOut.String(), "127.0.0.1:1") {
			t.Errorf("serve %v: exit %d, stderr %q; want exit 2 naming %q before connecting", tt.args, code, errOut.String(), tt.want)
		}
	}
}

// TestReplayRefusesContradictoryScopes: --reset deletes all the users'
// extracted memory, so with --since or --from-seq it would rebuild only part
// of it (a review found `replay --reset --from-seq 5` leaving 1 fact of 5);
// --since with --from-seq, and a negative sequence, are refused too. All
// before connecting (the URLs point nowhere), exit 2.
func TestReplayRefusesContradictoryScopes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--reset", "--from-seq", "5"}, "--reset rebuilds all"},
		{[]string{"--reset", "--since", "2026-01-01T00:00:00Z"}, "--reset rebuilds all"},
		{[]string{"--since", "2026-01-01T00:00:00Z", "--from-seq", "3"}, "give one"},
		{[]string{"--from-seq", "-1"}, "--from-seq -1 is negative"},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"replay", "--database-url", "postgres://postgres@127.0.0.1:1/none?connect_timeout=1", "--nats-url", "nats://127.0.0.1:1"}, tt.args...)
		code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, args)
		if code != 2 || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("replay %v: exit %d, stderr %q; want exit 2 saying %q", tt.args, code, errOut.String(), tt.want)
		}
	}
}

// TestOneShotArgumentsCheckedBeforeConnecting: a turn without its user and a
// negative limit are usage errors naming the flag, not a validation message
// about a JSON field or an SQL error.
func TestOneShotArgumentsCheckedBeforeConnecting(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"publish", "--message", "hi"}, "--user is required with --message"},
		{[]string{"failed", "--limit", "-1"}, "--limit -1 is not a positive number"},
		{[]string{"retry-failed", "--limit", "0"}, "--limit 0 is not a positive number"},
	} {
		var out, errOut bytes.Buffer
		args := append(tt.args, "--database-url", "postgres://postgres@127.0.0.1:1/none?connect_timeout=1", "--nats-url", "nats://127.0.0.1:1")
		code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, args)
		if code != 2 || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 saying %q", tt.args, code, errOut.String(), tt.want)
		}
	}
}

// An export to a directory that does not exist names the file asked for,
// not the temporary file beside it.
func TestWriteFileAtomicNamesThePath(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/missing/alice.jsonl"
	err := writeFileAtomic(path, []byte("x"))
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "does not exist") || strings.Contains(err.Error(), ".alice.jsonl.") {
		t.Fatalf("write into a missing directory: %v", err)
	}
}

// migrate on a database a newer memoryd migrated says so, not "schema up
// to date" (an operator's walk: the warning, then "up to date").
func TestMigrateOnANewerSchemaSaysSo(t *testing.T) {
	t.Parallel()
	_, dbURL := storetest.Schema(t)
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	// --status lists what migrate would apply, and applies nothing.
	for range 2 {
		if out, errOut, code := runCmd(t, dbURL, prefix, stream, "migrate", "--status"); code != 0 || !strings.Contains(out, "pending: 001_init.sql") || !strings.Contains(out, "pending (River)") {
			t.Fatalf("migrate --status on a fresh schema: exit %d\n%s\n%s", code, out, errOut)
		}
	}
	if out, errOut, code := runCmd(t, dbURL, prefix, stream, "migrate"); code != 0 || !strings.Contains(out, "schema up to date") {
		t.Fatalf("migrate: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := runCmd(t, dbURL, prefix, stream, "migrate", "--status"); code != 0 || strings.TrimSpace(out) != "pending migrations: none" {
		t.Fatalf("migrate --status after migrate: exit %d\n%s\n%s", code, out, errOut)
	}
	s := storetest.Open(t, dbURL)
	if _, err := s.Pool().Exec(context.Background(), `INSERT INTO memoryd_migrations (version, name) VALUES (9999, '9999_from_the_future.sql')`); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "migrate")
	if code != 0 || strings.Contains(out, "up to date") || !strings.Contains(out, "migrations [9999], which a newer memoryd applied") {
		t.Fatalf("migrate on a newer schema: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if out, errOut, code := runCmd(t, dbURL, prefix, stream, "migrate", "--status"); code != 0 || !strings.Contains(out, "migrations [9999], which a newer memoryd applied") {
		t.Fatalf("migrate --status on a newer schema: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestServeStoppedWhileStarting: SIGINT/SIGTERM during serve's start (its
// context ended) ends it with exit 0 and a log line, not with the error of
// the step it cut short (review: three stops during start exited 1 with
// "Postgres is not reachable at 127.0.0.1:5432", though it was).
func TestServeStoppedWhileStarting(t *testing.T) {
	t.Parallel()
	_, dbURL := storetest.Schema(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the signal came before the first connection
	var out, errOut bytes.Buffer
	code := run(ctx, &cli{stdout: &out, stderr: &errOut},
		[]string{"serve", "--nats-url", eventstest.URL(), "--database-url", dbURL, "--log-format", "json"})
	if code != 0 || strings.Contains(errOut.String(), "not reachable") || !strings.Contains(errOut.String(), "stopped before it was ready") {
		t.Fatalf("exit %d, stderr %q; want exit 0 and 'stopped before it was ready'", code, errOut.String())
	}
}

// SIGHUP stops memoryd, unless it was started with SIGHUP ignored (nohup):
// signal.Notify for an ignored SIGHUP installs a handler, so that a nohup'd
// serve stopped when its terminal closed (before SIGHUP was handled, it
// ran on, as nohup is for).
func TestStopSignalsLeaveAnIgnoredSIGHUPIgnored(t *testing.T) {
	has := func(sigs []os.Signal, s os.Signal) bool { return slices.Contains(sigs, s) }
	if sigs := stopSignals(func(os.Signal) bool { return false }); !has(sigs, syscall.SIGHUP) || !has(sigs, syscall.SIGTERM) || !has(sigs, os.Interrupt) {
		t.Errorf("stop signals: %v; want SIGINT, SIGTERM and SIGHUP", sigs)
	}
	if sigs := stopSignals(func(s os.Signal) bool { return s == syscall.SIGHUP }); has(sigs, syscall.SIGHUP) || !has(sigs, syscall.SIGTERM) {
		t.Errorf("stop signals with SIGHUP ignored (nohup): %v; want SIGINT and SIGTERM only", sigs)
	}
}

// TestStrayEnvIsNamed: a MEMORYD_ variable no command reads is warned of,
// with the known one it likely misspells; every variable the docs and
// the compose file name is known. Before, MEMORYD_DATABSE_URL was ignored
// without a word and the default database created and filled (a newcomer
// walk).
func TestStrayEnvIsNamed(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		env  string
		want string // "" for no warning
	}{
		{"MEMORYD_DATABSE_URL=x", "MEMORYD_DATABSE_URL is set, but no memoryd setting reads it: did you mean MEMORYD_DATABASE_URL?"},
		{"MEMORYD_NATS_ULR=x", "did you mean MEMORYD_NATS_URL?"},
		{"MEMORYD_USER=bob", "MEMORYD_USER is set, but no memoryd setting reads it (per-invocation arguments, such as --user, are read from the command line only)"},
		{"MEMORYD_FILE=x", "MEMORYD_FILE is set, but no memoryd setting reads it (per-invocation arguments"}, // not "did you mean MEMORYD_ROLE?"
		{"MEMORYD_ROEL=x", "did you mean MEMORYD_ROLE?"},                                                     // a swap is one edit, which a short name takes
		{"MEMORYD_DATABASE_URL=x", ""},
		{"MEMORYD_PROXY_LISTEN=x", ""},
		{"MEMORYD_LISTEN=x", ""}, // deprecated, still read
		{"MEMORYD_CONFIG=x", ""},
		{"MEMORYD_TEST_DATABASE_URL=x", ""},
		{"OTHER_DATABSE_URL=x", ""},
	} {
		got := strayEnv([]string{tt.env})
		switch {
		case tt.want == "" && len(got) != 0:
			t.Errorf("%s: warned %q, want nothing", tt.env, got)
		case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want)):
			t.Errorf("%s: warned %q, want %q", tt.env, got, tt.want)
		}
	}

	var documented []string
	for _, file := range []string{"../../README.md", "../../docs/operations.md", "../../docs/protocol.md", "../../compose.yaml", "../../Dockerfile"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range regexp.MustCompile(`MEMORYD_[A-Z0-9_]*[A-Z0-9]`).FindAllString(string(data), -1) {
			// An example's placeholder, the strays the docs warn of, MEMORYD_EMBED_* cut.
			if !map[string]bool{"MEMORYD_X": true, "MEMORYD_USER": true, "MEMORYD_DATABSE_URL": true, "MEMORYD_EMBED": true}[name] {
				documented = append(documented, name+"=1")
			}
		}
	}
	if len(documented) < 20 {
		t.Fatalf("%d variables found in the docs: the test reads nothing", len(documented))
	}
	if got := strayEnv(documented); len(got) != 0 {
		t.Errorf("variables the docs name are warned of as read by no setting:\n%s", strings.Join(got, "\n"))
	}
}

// TestStrayEnvWarnsOnStderr: the warning goes to stderr, before the
// command's own output, and the command still runs.
func TestStrayEnvWarnsOnStderr(t *testing.T) {
	t.Setenv("MEMORYD_DATABSE_URL", "postgres://elsewhere/db")
	var out, errOut bytes.Buffer
	if code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, []string{"version"}); code != 0 {
		t.Fatalf("version: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "memoryd version: warning: MEMORYD_DATABSE_URL is set, but no memoryd setting reads it: did you mean MEMORYD_DATABASE_URL?") || !strings.Contains(out.String(), "schema") {
		t.Errorf("stdout %q, stderr %q", out.String(), errOut.String())
	}
}

// TestStrayEnvLeavesKubernetesServiceLinksAlone: the variables Kubernetes
// sets in every pod of a namespace with a Service named memoryd (or
// memoryd-proxy, ...) are not warned of: no one set them, and a serve
// warned of seven of them at every start. A misspelt setting beside them
// still is.
func TestStrayEnvLeavesKubernetesServiceLinksAlone(t *testing.T) {
	t.Parallel()
	links := []string{
		"MEMORYD_SERVICE_HOST=10.0.0.1", "MEMORYD_SERVICE_PORT=8080", "MEMORYD_SERVICE_PORT_HTTP=8080",
		"MEMORYD_PORT=tcp://10.0.0.1:8080", "MEMORYD_PORT_8080_TCP=tcp://10.0.0.1:8080",
		"MEMORYD_PORT_8080_TCP_ADDR=10.0.0.1", "MEMORYD_PORT_8080_TCP_PORT=8080", "MEMORYD_PORT_8080_TCP_PROTO=tcp",
		"MEMORYD_PROXY_SERVICE_HOST=10.0.0.2", "MEMORYD_PROXY_PORT=tcp://10.0.0.2:8081", "MEMORYD_PROXY_PORT_8081_UDP_ADDR=10.0.0.2",
	}
	if got := strayEnv(links); len(got) != 0 {
		t.Errorf("Kubernetes service links warned of:\n%s", strings.Join(got, "\n"))
	}
	if got := strayEnv(append(links, "MEMORYD_DATABSE_URL=x")); len(got) != 1 || !strings.Contains(got[0], "MEMORYD_DATABSE_URL") {
		t.Errorf("a misspelt setting beside service links: %q, want it alone warned of", got)
	}
	// Names of a service link's shape with values no Service has are
	// settings someone made up, warned of (a review: all were silent).
	for _, kv := range []string{
		"MEMORYD_METRICS_PORT=9090", "MEMORYD_PROXY_PORT=8081", "MEMORYD_HEALTH_PORT=1",
		"MEMORYD_SERVICE_HOST=memoryd.internal", "MEMORYD_SERVICE_PORT=http", "MEMORYD_PORT_8080_TCP_PROTO=http",
		"MEMORYD_PORT_8080_TCP=tcp://memoryd:8080",
	} {
		if got := strayEnv([]string{kv}); len(got) != 1 {
			t.Errorf("%s: warnings %q, want one", kv, got)
		}
	}
}

// TestMigrateExplainsASearchPathWithoutItsSchema: the docs' one schema per
// deployment (search_path in the database URL) with the schema not created
// yet is one sentence saying so; it was River's "error applying version
// 001 [UP]: no schema has been selected to create in (SQLSTATE 3F000)" (a
// first-start walk).
func TestMigrateExplainsASearchPathWithoutItsSchema(t *testing.T) {
	t.Parallel()
	url := storetest.Database(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, []string{"migrate", "--database-url", url + sep + "search_path=nosuchschema"})
	if code != 1 || !strings.Contains(errOut.String(), "the Postgres search_path names no schema that exists") {
		t.Fatalf("migrate with a search_path of no schema: exit %d, stderr %q; want exit 1 saying so", code, errOut.String())
	}
}

// TestMigrateNamesHungPostgres: a server that accepts the connection and
// never answers is named as not answering, not as down ("start it"; a
// first-start walk).
func TestMigrateNamesHungPostgres(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn // held open, never answered
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	var out, errOut bytes.Buffer
	code := run(context.Background(), &cli{stdout: &out, stderr: &errOut},
		[]string{"migrate", "--database-url", "postgres://postgres@" + ln.Addr().String() + "/memoryd?sslmode=disable&connect_timeout=1", "--log-format", "json"})
	if code != 1 || !strings.Contains(errOut.String(), "did not answer in time") {
		t.Fatalf("exit %d, stderr %q; want exit 1 saying the server does not answer", code, errOut.String())
	}
}

// TestMigrateNamesReadOnlyPostgres: a database that refuses writes (a
// standby, default_transaction_read_only) is named as read-only, not left
// at "cannot execute INSERT in a read-only transaction (SQLSTATE 25006)"
// (a walk of a DBA's settings).
func TestMigrateNamesReadOnlyPostgres(t *testing.T) {
	t.Parallel()
	_, dbURL := storetest.Schema(t)
	var out, errOut bytes.Buffer
	code := run(context.Background(), &cli{stdout: &out, stderr: &errOut},
		[]string{"migrate", "--database-url", dbURL + "&options=-c%20default_transaction_read_only%3Don", "--log-format", "json"})
	if code != 1 || !strings.Contains(errOut.String(), "the Postgres database is read-only") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

// TestMissingCredentialFilesSaidBeforeConnecting: a credential file that
// is not there is said naming its flag, whether NATS is up or not. Before,
// --embed-api-key-file and the proxy's --upstream-key-file were opened
// after connecting, so with NATS down a mistyped path showed as "NATS is
// not reachable", and fixing that only to meet the next error.
func TestMissingCredentialFilesSaidBeforeConnecting(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	for _, args := range [][]string{
		{"serve", "--llm-base-url", "http://127.0.0.1:1/v1", "--llm-model", "m", "--llm-api-key-file", missing},
		{"serve", "--embed-base-url", "http://127.0.0.1:1/v1", "--embed-model", "m", "--embed-api-key-file", missing},
		{"serve", "--role", "enrich", "--embed-base-url", "http://127.0.0.1:1/v1", "--embed-model", "m", "--embed-api-key-file", missing},
		{"serve", "--nats-user", "u", "--nats-password-file", missing},
		{"serve", "--nats-token-file", missing},
		{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--trusted-user-header", "X-User", "--upstream-key-file", missing},
	} {
		flag := args[len(args)-2]
		var out, errOut bytes.Buffer
		args = append(args, "--database-url", "postgres://postgres@127.0.0.1:1/none?connect_timeout=1", "--nats-url", "nats://127.0.0.1:1")
		code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, args)
		if code == 0 || !strings.Contains(errOut.String(), flag+": ") || !strings.Contains(errOut.String(), "no such file") || strings.Contains(errOut.String(), "not reachable") {
			t.Errorf("%v: exit %d, stderr %q; want the missing %s said before connecting", args, code, errOut.String(), flag)
		}
	}
}

// publish from stdin checks an event's timestamp as memoryd does: one sent
// as Go's zero time is year 1, refused, not taken as absent (it went out
// stamped now), and a lowercase "z" is refused with memoryd's reason, not
// Go's parser's; a timestamp absent or null is still the current time.
func TestPublishFromStdinChecksTimestampAsMemoryd(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ ts, want string }{
		{`"0001-01-01T00:00:00Z"`, "stdin turn 1: invalid turn event: timestamp: year 1 (UTC) is out of range"},
		{`"2026-11-21T10:00:00z"`, "stdin turn 1: invalid turn event: timestamp: must be RFC 3339"},
		{`"1969-12-31T23:59:59Z"`, "stdin turn 1: invalid turn event: timestamp: year 1969 (UTC) is out of range"},
	} {
		err := publishStream(strings.NewReader(`{"user_id":"alice","user_message":"hi","timestamp":`+tt.ts+`}`), func(turn events.Turn) error {
			t.Errorf("timestamp %s: published as %v", tt.ts, turn.Timestamp)
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("timestamp %s: %v; want %q", tt.ts, err, tt.want)
		}
	}
	var sent []events.Turn
	before := time.Now()
	err := publishStream(strings.NewReader(`{"user_id":"alice","user_message":"hi","timestamp":null,"ID":""}
{"user_id":"alice","user_message":"hi","metadata":{"n":1234567890123456789}}`), func(turn events.Turn) error {
		sent = append(sent, turn)
		return nil
	})
	after := time.Now()
	if err != nil || len(sent) != 2 {
		t.Fatalf("turns without a timestamp: %v, %d sent", err, len(sent))
	}
	for _, turn := range sent {
		if !strings.HasPrefix(turn.ID, "evt-") || turn.Timestamp.Before(before.Truncate(time.Microsecond)) || turn.Timestamp.After(after) {
			t.Errorf("turn without id or timestamp sent as id %q at %v; want a random id, now", turn.ID, turn.Timestamp)
		}
	}
	if string(sent[1].Metadata) != `{"n":1234567890123456789}` {
		t.Errorf("metadata sent as %s", sent[1].Metadata)
	}
}

// natsWithConfig starts a nats-server of the test's own, on its own port,
// with the configuration file conf, and returns its URL.
func natsWithConfig(t *testing.T, conf string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return eventstest.PrivateServer(t, func(port int) []string {
		return []string{"-c", path, "-a", "127.0.0.1", "-p", strconv.Itoa(port)}
	})
}
