package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestForgetLogsThroughTheCommandsLogger: memoryd forget's warnings go to
// the command's logger, in its --log-format, not to Go's default one (an
// ops walk's forget with --log-format json wrote "2026/12/06 12:18:35 WARN
// forget: not recorded in NATS ..." between its JSON lines, which a JSON
// log pipeline cannot read). The record of forgets is made to fail with a
// bucket whose values may hold one byte.
func TestForgetLogsThroughTheCommandsLogger(t *testing.T) {
	t.Parallel()
	dbURL := storetest.Migrated(t)
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	if _, errOut, code := runCmd(t, dbURL, prefix, stream, "publish", "--user", "alice", "--message", "I live in Lisbon", "--response", "ok"); code != 0 {
		t.Fatalf("publish: exit %d, stderr %q", code, errOut)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: stream + "_FORGETS", MaxValueSize: 1}); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCmd(t, dbURL, prefix, stream, "forget", "--user", "alice")
	if code != 0 || !strings.Contains(errOut, "not recorded in NATS") {
		t.Fatalf("forget with its record refused: exit %d, stderr %q; want its warning on the command's stderr", code, errOut)
	}
	for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("forget --log-format json wrote a line that is not JSON: %q", line)
		}
	}
}
