package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestTurnMetadataNumbersExact: metadata is stored and read back as raw
// JSON; a big integer and a high-precision decimal keep every digit.
func TestTurnMetadataNumbersExact(t *testing.T) {
	ctx, s := setup(t)
	meta := `{"n": 1234567890123456789, "x": 0.1000000000000000055511151231257827}`
	if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: "alice", UserMessage: "hi", TurnAt: t0, Metadata: []byte(meta)}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTurn(ctx, "alice", "e1")
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Metadata) != meta {
		t.Fatalf("metadata read back = %s, want %s", got.Metadata, meta)
	}
}

// A frontend that retries a turn first sent without metadata may send
// "metadata":{} (its serialiser's default for an empty map): the retry is
// the same turn, not a conflicting duplicate to dead-letter, whichever of
// the two was recorded first.
func TestEmptyMetadataIsNoMetadata(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := storetest.Schema(t)
	s := storetest.Open(t, url)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })

	turn := func(id, meta string) store.Turn {
		tr := store.Turn{EventID: id, UserID: "alice", ConversationID: "c1", UserMessage: "I live in Lisbon", AssistantResponse: "Nice!", TurnAt: t0}
		if meta != "-" {
			tr.Metadata = []byte(meta)
		}
		return tr
	}
	if out, err := s.InsertTurns(ctx, []store.Turn{turn("e1", "-"), turn("e2", `{}`)}); err != nil || !slices.Equal(out, []store.TurnOutcome{store.TurnInserted, store.TurnInserted}) {
		t.Fatalf("first inserts: %v, %v", out, err)
	}
	// e3 is recorded as the code before this change did: the empty object
	// stored and hashed.
	if _, err := conn.Exec(ctx, `INSERT INTO turns (event_id, user_id, conversation_id, user_message, assistant_response, turn_at, metadata, content_hash)
		VALUES ('e3', 'alice', 'c1', 'I live in Lisbon', 'Nice!', $1, '{}', memoryd_turn_hash('c1', 'I live in Lisbon', 'Nice!', $1, '{}'))`, t0); err != nil {
		t.Fatal(err)
	}
	// Stored as sent: a memoryd before this change, running beside this one
	// in a rolling upgrade, compares {} with {} only.
	var empty int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE event_id = 'e1' AND metadata IS NULL) + count(*) FILTER (WHERE event_id = 'e2' AND metadata = '{}') FROM turns`).Scan(&empty); err != nil || empty != 2 {
		t.Fatalf("turns sent without metadata and with {} stored as sent: %d of 2 (%v)", empty, err)
	}

	for _, c := range []struct {
		id, meta string
		want     store.TurnOutcome
	}{
		{"e1", `{}`, store.TurnDuplicate},
		{"e1", " { \n } ", store.TurnDuplicate},
		{"e1", `null`, store.TurnDuplicate},
		{"e2", "-", store.TurnDuplicate},
		{"e3", "-", store.TurnDuplicate},
		{"e3", `{}`, store.TurnDuplicate},
		{"e1", `{"k":1}`, store.TurnConflict},
		{"e3", `{"k":1}`, store.TurnConflict},
		{"e1", `{"k":{}}`, store.TurnConflict},
	} {
		out, err := s.InsertTurns(ctx, []store.Turn{turn(c.id, c.meta)})
		if err != nil || !slices.Equal(out, []store.TurnOutcome{c.want}) {
			t.Errorf("%s re-sent with metadata %q: %v, %v; want %v", c.id, c.meta, out, err, c.want)
		}
	}

	// A replay re-reads such retries from the stream: the recorded turn is
	// the same, so it is requeued with its content refreshed.
	if err := s.MarkProcessed(ctx, "alice", []string{"e1", "e2", "e3"}, store.Provenance{Extractor: "rules"}); err != nil {
		t.Fatal(err)
	}
	keys, err := s.RequeueTurns(ctx, []store.Turn{turn("e1", `{}`), turn("e2", "-"), turn("e3", "-")}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 {
		t.Fatalf("replay requeued %v; want e1, e2 and e3", keys)
	}
	if keys, err := s.RequeueTurns(ctx, []store.Turn{turn("e1", `{"k":1}`)}, time.Time{}); err != nil || len(keys) != 0 {
		t.Fatalf("replay of a conflicting event requeued %v (%v); want nothing", keys, err)
	}
}
