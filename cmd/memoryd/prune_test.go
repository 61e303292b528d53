package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// TestPruneCommand: `memoryd prune` applies the limits it is given once
// and says what it removed (an operator looked for a way to run a prune
// other than restarting serve); --json prints the prune job's report.
func TestPruneCommand(t *testing.T) {
	t.Parallel()
	dbURL := storetest.Migrated(t) // a migrated schema of the pool
	s := storetest.Unmigrated(t, dbURL)
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	var ws []store.ContextWrite
	for i := range 5 {
		ws = append(ws, store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("q%d", i), Answer: "a", CreatedAt: t0.Add(time.Duration(i) * time.Minute)})
	}
	if _, err := s.InsertContext(context.Background(), ws); err != nil {
		t.Fatal(err)
	}
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "prune", "--max-context-per-user", "3")
	if code != 0 || !strings.Contains(out, "removed 0 context items for size and 2 over the per-user cap") {
		t.Fatalf("prune --max-context-per-user 3: exit %d\n%s%s", code, out, errOut)
	}
	if st, err := s.Stats(context.Background(), "alice"); err != nil || st.ContextItems != 3 {
		t.Fatalf("alice after the prune: %+v, %v; want 3 items", st, err)
	}
	out, errOut, code = runCmd(t, dbURL, prefix, stream, "prune", "--max-context-per-user", "1", "--max-db-size", "1G", "--json")
	var rep worker.PruneReport
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || rep.RemovedForCap != 2 || rep.After.LiveBytes <= 0 {
		t.Fatalf("prune --json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	// A limit below what pruning can reach is refused by the prune
	// command (serve logs it and runs on), before anything is pruned: the
	// cap given with it deletes nothing.
	out, errOut, code = runCmd(t, dbURL, prefix, stream, "prune", "--max-db-size", "10K", "--max-context-per-user", "0")
	if code != 1 || !strings.Contains(errOut, "--max-db-size 10K is below") {
		t.Fatalf("prune --max-db-size 10K: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := s.InsertContext(context.Background(), ws[:3]); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runCmd(t, dbURL, prefix, stream, "prune", "--max-db-size", "10K", "--max-context-per-user", "1")
	if st, err := s.Stats(context.Background(), "alice"); code != 1 || err != nil || st.ContextItems < 2 {
		t.Fatalf("prune --max-db-size 10K --max-context-per-user 1: exit %d, alice %+v, %v; want exit 1 and no item pruned\n%s%s", code, st, err, out, errOut)
	}
	// A database that does not exist is not created to be pruned.
	// On the test server (MEMORYD_TEST_DATABASE_URL), which the check below
	// reads: a fixed 127.0.0.1:5432 asked another server than it checked.
	mu, err := url.Parse(storetest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	mu.Path = "/memoryd_prune_missing_" + strings.ToLower(t.Name())
	missing := mu.String()
	out, errOut, code = runCmd(t, missing, prefix, stream, "prune", "--max-context-per-user", "1")
	if code != 1 || !strings.Contains(errOut, "the database does not exist") {
		t.Fatalf("prune of a missing database: exit %d\n%s%s", code, out, errOut)
	}
	var exists bool
	if err := s.Pool().QueryRow(context.Background(), `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`,
		"memoryd_prune_missing_"+strings.ToLower(t.Name())).Scan(&exists); err != nil || exists {
		t.Fatalf("the missing database exists after the prune: %v, %v", exists, err)
	}
}

// The command's failure says why the size is still over the limit: the
// floor (context spared: raise the limit) only when that is the reason.
// Before, a prune that deleted context and was left over by writes while
// it ran said none was deleted and to raise the limit.
func TestPruneErrorSaysWhy(t *testing.T) {
	const limit = 1000
	tests := []struct {
		name string
		rep  worker.PruneReport
		want string // "" for no error
	}{
		{"under the limit", worker.PruneReport{After: store.SizeReport{LiveBytes: 900, FloorBytes: 100}}, ""},
		{"floor over the limit", worker.PruneReport{OverLimit: true, ContextSpared: true, After: store.SizeReport{LiveBytes: 1500, FloorBytes: 1200}}, "cannot go under"},
		{"context spared", worker.PruneReport{OverLimit: true, ContextSpared: true, After: store.SizeReport{LiveBytes: 1500, FloorBytes: 900}}, "none was deleted for size"},
		// The last hour's turn text, which pruning spares, is named: over
		// the limit for that alone, the limit holds an hour later.
		{"context spared for recent text", worker.PruneReport{OverLimit: true, ContextSpared: true, After: store.SizeReport{LiveBytes: 1500, FloorBytes: 900}}, "stored in the last hour"},
		{"written while it pruned", worker.PruneReport{OverLimit: true, RemovedForSize: 89, After: store.SizeReport{LiveBytes: 1100, FloorBytes: 100}}, "after deleting 89 context items"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := pruneError(tt.rep, limit)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

// TestPruneJSONWithoutASizeLimitMeasuresNoSize: prune --json without
// --max-db-size measures no size, and its report says so, "before" and
// "after" null, where before they held zeros, read as an empty database
// by a script, beside the turn texts it cleared; with the limit they
// hold the sizes measured.
func TestPruneJSONWithoutASizeLimitMeasuresNoSize(t *testing.T) {
	t.Parallel()
	dbURL := storetest.Migrated(t)
	s := storetest.Unmigrated(t, dbURL)
	if _, err := s.InsertContext(context.Background(), []store.ContextWrite{{UserID: "alice", Question: "q", Answer: "a"}}); err != nil {
		t.Fatal(err)
	}
	prefix, stream := eventstest.Names(t, eventstest.Conn(t))
	for _, tt := range []struct {
		args  []string
		sized bool
	}{
		{[]string{"--turn-retention", "24h"}, false},
		{[]string{"--turn-retention", "24h", "--max-db-size", "1G"}, true},
	} {
		out, errOut, code := runCmd(t, dbURL, prefix, stream, append([]string{"prune", "--json"}, tt.args...)...)
		var rep map[string]json.RawMessage
		if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
			t.Fatalf("prune --json %v: exit %d, %v\n%s%s", tt.args, code, err, out, errOut)
		}
		for _, key := range []string{"before", "after"} {
			var size *store.SizeReport
			if err := json.Unmarshal(rep[key], &size); err != nil || rep[key] == nil {
				t.Fatalf("prune --json %v: %q is %s (%v)", tt.args, key, rep[key], err)
			}
			if tt.sized && (size == nil || size.RealBytes <= 0) || !tt.sized && size != nil {
				t.Errorf("prune --json %v: %q is %s; want the size measured: %v", tt.args, key, rep[key], tt.sized)
			}
		}
	}
}
