package main

import (
	"context"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestEmbedBackfillOnAnEmptyDatabaseMigratesFirst: embed --backfill
// migrates before it reads the database, as replay does, and with
// --migrate=false refuses with the pending migrations named. Before, it
// read first (the mark of what exists, for the wait), and on a database
// memoryd never migrated failed "mark embeddings: relation "context" does
// not exist" either way.
func TestEmbedBackfillOnAnEmptyDatabaseMigratesFirst(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		flags   []string
		code    int
		stdout  string
		stderr  string
		pending bool
	}{
		{"--migrate=false", []string{"--migrate=false"}, 1, "", "the database holds no memoryd schema yet", true},
		{"migrating", nil, 0, "0 items without a m1 vector to embed", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			_, dbURL := storetest.Schema(t)
			prefix, stream := eventstest.Names(t, eventstest.Conn(t))
			conn := []string{"--database-url", dbURL, "--nats-url", eventstest.URL(), "--prefix", prefix, "--stream", stream, "--log-level", "error"}
			args := append([]string{"embed", "--backfill", "--no-work", "--embed-model", "m1", "--embed-base-url", embeddingtest.New(t).URL}, tt.flags...)
			out, errOut, code := runArgs(ctx, append(args, conn...)...)
			if code != tt.code || !strings.Contains(out, tt.stdout) || !strings.Contains(errOut, tt.stderr) || strings.Contains(errOut, "does not exist") {
				t.Fatalf("embed --backfill %v on an empty database: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
					tt.flags, code, out, errOut, tt.code, tt.stdout, tt.stderr)
			}
			status, errOut, code := runArgs(ctx, append([]string{"migrate", "--status"}, conn...)...)
			if code != 0 || strings.Contains(status, "pending migrations: none") == tt.pending {
				t.Fatalf("migrate --status after it: exit %d, stdout %q, stderr %q; want pending migrations %v", code, status, errOut, tt.pending)
			}
		})
	}
}
