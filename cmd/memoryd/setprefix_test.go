package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestSetPrefixSaysWhatStaysInTheOldStream: migrate --set-prefix says what
// the move leaves with the stream the database served before, which no
// memoryd of the new prefix reads: an ops walk's move left a replay
// --reset refused for the old turns' memory, and a forget that deleted
// none of the user's events there ("stream_events": 0), with nothing said
// at the move.
func TestSetPrefixSaysWhatStaysInTheOldStream(t *testing.T) {
	t.Parallel()
	_, dbURL := storetest.Schema(t)
	db := dbURL + fmt.Sprintf("&pool_max_conns=%d", storetest.MaxConns)
	move := func(prefix, stream string) string {
		t.Helper()
		out, errOut, code := runArgs(context.Background(), "migrate", "--set-prefix", "--prefix", prefix, "--stream", stream,
			"--database-url", db, "--nats-url", eventstest.URL(), "--log-format", "json")
		if code != 0 {
			t.Fatalf("migrate --set-prefix --prefix %s --stream %s: exit %d, stdout %q, stderr %q", prefix, stream, code, out, errOut)
		}
		return out
	}
	if out := move("pa", "PA"); strings.Contains(out, "stay") {
		t.Errorf("first record of a prefix: %q; want nothing said of a stream before", out)
	}
	out := move("pb", "PB")
	for _, want := range []string{`stream PA (prefix "pa")`, "no replay of stream PB rebuilds", "forget", "docs/operations.md"} {
		if !strings.Contains(out, want) {
			t.Errorf("move pa/PA -> pb/PB: %q; want it to say %q", out, want)
		}
	}
	// The same stream for another prefix: its ingest consumer reads the
	// old prefix's subjects, and serve refuses it.
	if out := move("pc", "PB"); !strings.Contains(out, "memoryd-ingest") || !strings.Contains(out, "new --stream") {
		t.Errorf("move pb/PB -> pc/PB: %q; want the stream's consumer named and a new --stream advised", out)
	}
	if out := move("pc", "PB"); strings.Contains(out, "stay") {
		t.Errorf("set-prefix to what is recorded: %q; want nothing said", out)
	}
}
