package store_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// Forget leaves no row naming the user in any table of the schema with a
// user_id column, whatever wrote it: a table a migration adds is covered
// by this test without being named in it. The exceptions are what the
// forget itself keeps by design: its own memory change (the counter row
// stays so that change numbers never go back).
func TestForgetLeavesNoRowOfTheUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, url := storetest.Schema(t)
	s := storetest.Open(t, url)
	rules := store.Provenance{Extractor: "rules"}
	for i, u := range []string{"alice", "bob"} {
		at := t0.Add(time.Duration(i) * time.Hour)
		if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: u, UserMessage: "I live in Paris", TurnAt: at}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: u, Key: "location", Value: "Paris", SourceAt: at, EventID: "e1", Provenance: rules}}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: u, Question: "I live in Paris " + u, Answer: "ok", EventID: "e1", CreatedAt: at, Provenance: rules}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddUsage(ctx, u, "m", store.TokenUsage{PromptTokens: 10, CompletionTokens: 2, Extractions: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetLanguage(ctx, u, "fr", "french"); err != nil {
			t.Fatal(err)
		}
	}
	// An import of another user's export records where its rows came from.
	var exp bytes.Buffer
	if err := s.Export(ctx, "bob", &exp); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(ctx, "alice", "alice", &exp); err != nil {
		t.Fatal(err)
	}
	// A copy of an export in progress (a spool).
	if _, _, _, err := s.SpoolExport(ctx, "alice", "alice", 1, always); err != nil {
		t.Fatal(err)
	}

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.columns
		WHERE table_schema = $1 AND column_name = 'user_id' ORDER BY table_name`, schema)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) < 5 {
		t.Fatalf("tables with a user_id: %v, %v", tables, err)
	}
	count := func(table, user string) int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s WHERE user_id = $1`, pgx.Identifier{table}.Sanitize()), user).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	held := 0
	for _, table := range tables {
		held += count(table, "alice")
	}
	if held == 0 || count("import_sources", "alice") == 0 || count("export_spools", "alice") == 0 {
		t.Fatal("alice has no rows (or no import sources, or no export copy) before the forget: the test writes nothing")
	}
	history := count("fact_history", "alice")
	removed, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{})
	if err != nil {
		t.Fatal(err)
	}
	// The reply counts the history the user had, not the rows the facts'
	// delete trigger added to it on the way.
	if history == 0 || removed.FactHistory != int64(history) {
		t.Errorf("forget removed %d fact history rows; alice had %d", removed.FactHistory, history)
	}
	kept := map[string]int{"memory_changes": 1}
	for _, table := range tables {
		if n := count(table, "alice"); n > kept[table] {
			t.Errorf("%s holds %d rows of alice after her forget", table, n)
		}
	}
	// The change counter stays, so that change numbers never go back, but
	// under a hash of the id: no column of it holds the id.
	var counters int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM memory_change_seqs WHERE user_key = sha256(convert_to('alice', 'UTF8'))`).Scan(&counters); err != nil {
		t.Fatal(err)
	}
	if counters != 1 {
		t.Errorf("alice's change counter: %d rows under her hash, want 1", counters)
	}
	for _, table := range []string{"turns", "facts", "context", "llm_usage"} {
		if count(table, "bob") == 0 {
			t.Errorf("%s lost bob's rows in alice's forget", table)
		}
	}
}
