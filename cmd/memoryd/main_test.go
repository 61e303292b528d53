package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

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
	full = append(full, "--database-url", dbURL, "--nats-url", eventstest.URL(), "--prefix", prefix, "--stream", stream, "--log-format", "json")
	code := run(context.Background(), &app{stdout: &out, stderr: &errOut}, full)
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
}

func TestUnknownCommandAndBadEnv(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), &app{stdout: &out, stderr: &errOut}, []string{"nope"}); code != 2 {
		t.Fatalf("unknown command exit = %d", code)
	}
	t.Setenv("MEMORYD_WORKERS", "many")
	errOut.Reset()
	if code := run(context.Background(), &app{stdout: &out, stderr: &errOut}, []string{"serve"}); code != 1 || !strings.Contains(errOut.String(), "MEMORYD_WORKERS") {
		t.Fatalf("bad env: exit %d, stderr %q", code, errOut.String())
	}
}

func TestMigrateNamesUnreachablePostgres(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run(context.Background(), &app{stdout: &out, stderr: &errOut},
		[]string{"migrate", "--database-url", "postgres://postgres@127.0.0.1:1/memoryd?sslmode=disable&connect_timeout=2", "--log-format", "json"})
	if code != 1 || !strings.Contains(errOut.String(), "Postgres is not reachable at 127.0.0.1:1") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
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
