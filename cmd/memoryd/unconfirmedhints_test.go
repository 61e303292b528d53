package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestOperatorCommandsWhoseCommitWasCutSayWhatToDo: an operator command
// that writes to Postgres itself, whose connection is lost once a COMMIT
// was sent (commitCut), says that the write may be done and what is safe
// to do, not only "commit not confirmed: ..."; and what it says is safe,
// running it again, then succeeds.
func TestOperatorCommandsWhoseCommitWasCutSayWhatToDo(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name  string
		setup func(t *testing.T, s *store.Store, conn []string) (more []string)
		on    string
		args  []string
		want  string
		again string // in stdout of the run again
	}{{
		name: "docs grant", on: "AFTER INSERT OR UPDATE ON collection_readers",
		args: []string{"docs", "grant", "--scope", "team", "--user", "alice"},
		want: "it may be granted already; granting it again is safe", again: "granted: alice reads team's collections",
	}, {
		name: "docs revoke", on: "AFTER DELETE ON collection_readers",
		setup: func(t *testing.T, s *store.Store, _ []string) []string {
			if _, err := s.GrantReader(context.Background(), "team", "alice"); err != nil {
				t.Fatal(err)
			}
			return nil
		},
		args: []string{"docs", "grant", "--revoke", "--scope", "team", "--user", "alice"},
		want: "it may be revoked already; revoking it again is safe", again: "alice reads team's collections",
	}, {
		name: "prune", on: "AFTER DELETE ON context",
		setup: func(t *testing.T, s *store.Store, _ []string) []string {
			ws := []store.ContextWrite{{UserID: "alice", Question: "q0", Answer: "a", CreatedAt: at}, {UserID: "alice", Question: "q1", Answer: "a", CreatedAt: at.Add(time.Minute)}}
			if _, err := s.InsertContext(context.Background(), ws); err != nil {
				t.Fatal(err)
			}
			return nil
		},
		args: []string{"prune", "--max-context-per-user", "1"},
		want: "part of it may be done; running it again is safe", again: "over the per-user cap",
	}, {
		name: "replay", on: "AFTER INSERT ON turns",
		setup: func(t *testing.T, _ *store.Store, conn []string) []string {
			if _, errOut, code := runArgs(context.Background(), append([]string{"publish", "--user", "alice", "--message", "I live in Oslo."}, conn...)...); code != 0 {
				t.Fatalf("publish: exit %d, %s", code, errOut)
			}
			return nil
		},
		args: []string{"replay", "--no-work"},
		want: "its turns may be recorded and enqueued already; re-running replay is safe", again: "read 1",
	}, {
		name: "embed", on: "AFTER INSERT ON river_job",
		setup: func(t *testing.T, s *store.Store, _ []string) []string {
			if _, err := s.InsertContext(context.Background(), []store.ContextWrite{{UserID: "alice", Question: "home town", Answer: "Paris"}}); err != nil {
				t.Fatal(err)
			}
			return []string{"--embed-base-url", embeddingtest.New(t).URL}
		},
		args: []string{"embed", "--backfill", "--no-work", "--embed-model", "m1"},
		want: "part of it may be done; re-running the backfill is safe", again: "to embed",
	}, {
		name: "migrate --set-prefix", on: "AFTER INSERT OR UPDATE ON deployment",
		args: []string{"migrate", "--set-prefix"},
		want: "the prefix may be recorded already; running migrate again is safe", again: "this database now serves prefix",
	}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dbURL := storetest.Migrated(t)
			s := storetest.Unmigrated(t, dbURL)
			prefix, stream := eventstest.Names(t, eventstest.Conn(t))
			conn := []string{"--database-url", dbURL, "--nats-url", eventstest.URL(), "--prefix", prefix, "--stream", stream, "--log-level", "error"}
			args := tt.args
			if tt.setup != nil {
				args = append(append([]string{}, args...), tt.setup(t, s, conn)...)
			}
			got := commitCut(t, dbURL, tt.on, tt.name, func() (string, int) {
				_, errOut, code := runArgs(context.Background(), append(append([]string{}, args...), conn...)...)
				return errOut, code
			})
			if got.code != 1 || !strings.Contains(got.errOut, tt.want) {
				t.Errorf("%s whose COMMIT's backend was terminated: exit %d, stderr %q; want it to say %q", tt.name, got.code, got.errOut, tt.want)
			}
			out, errOut, code := runArgs(context.Background(), append(append([]string{}, args...), conn...)...)
			if code != 0 || !strings.Contains(out, tt.again) {
				t.Errorf("%s run again: exit %d, stdout %q, stderr %q; want %q", tt.name, code, out, errOut, tt.again)
			}
		})
	}
}

// TestStartsWhoseMigrationCommitWasCutSayRunMigrate: serve, replay and
// embed migrate when they start; one whose migration's COMMIT lost its
// connection (commitCut) says what migrate says of it, that running
// migrate again is safe, not the generic "check what it changed" nor its
// own command's hint (replay's and the backfill's speak of their turns
// and jobs); and migrate run again then succeeds.
func TestStartsWhoseMigrationCommitWasCutSayRunMigrate(t *testing.T) {
	t.Parallel()
	const want = "a migration or the prefix may be recorded already; running migrate again is safe"
	for _, tt := range []struct {
		name string
		args func(t *testing.T, conn []string) []string
	}{
		{"serve", func(*testing.T, []string) []string { return []string{"serve", "--http", "127.0.0.1:0"} }},
		{"replay", func(t *testing.T, conn []string) []string {
			if _, errOut, code := runArgs(context.Background(), append([]string{"publish", "--user", "alice", "--message", "I live in Oslo."}, conn...)...); code != 0 {
				t.Fatalf("publish: exit %d, %s", code, errOut)
			}
			return []string{"replay", "--no-work"}
		}},
		{"embed", func(t *testing.T, _ []string) []string {
			return []string{"embed", "--backfill", "--no-work", "--embed-model", "m1", "--embed-base-url", embeddingtest.New(t).URL}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dbURL := storetest.Migrated(t)
			s := storetest.Unmigrated(t, dbURL)
			// Migration 073 pending: its function dropped with its
			// triggers, its record deleted.
			if _, err := s.Pool().Exec(context.Background(), `DROP FUNCTION memoryd_chunk_vector_checked() CASCADE;
				DELETE FROM memoryd_migrations WHERE version = 73`); err != nil {
				t.Fatal(err)
			}
			prefix, stream := eventstest.Names(t, eventstest.Conn(t))
			conn := []string{"--database-url", dbURL, "--nats-url", eventstest.URL(), "--prefix", prefix, "--stream", stream, "--log-level", "error"}
			args := append(tt.args(t, conn), conn...)
			got := commitCut(t, dbURL, "AFTER INSERT ON memoryd_migrations", tt.name, func() (string, int) {
				_, errOut, code := runArgs(context.Background(), args...)
				return errOut, code
			})
			if got.code != 1 || !strings.Contains(got.errOut, want) {
				t.Errorf("%s whose migration's COMMIT's backend was terminated: exit %d, stderr %q; want it to say %q", tt.name, got.code, got.errOut, want)
			}
			out, errOut, code := runArgs(context.Background(), append([]string{"migrate"}, conn...)...)
			if code != 0 || !strings.Contains(out, "migrations applied: 1 (schema up to date)") {
				t.Errorf("migrate run again: exit %d, stdout %q, stderr %q; want migration 073 applied", code, out, errOut)
			}
		})
	}
}
