package store_test

import (
	"testing"

	"github.com/memoryd/memoryd/store"
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
