package store_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
)

// TestResetKeepsAPairStoredAgainDirectly: a store of a pair the user
// already has from a turn's extraction answers stored false with the
// extracted item's id, the user's write of it. A reset (before replay
// --reset) deletes what a replay extracts again, but the replay, by
// another model, words the turn's pair otherwise: the pair the user
// stored was gone after the replay, where stored before the turn's
// extraction (the item then direct) it stayed. The user's write keeps the
// item whichever came first.
func TestResetKeepsAPairStoredAgainDirectly(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: "erin", UserMessage: "my dog is Rex", TurnAt: t0}}); err != nil {
		t.Fatal(err)
	}
	llm := store.Provenance{Extractor: "llm", Model: "m1", PromptVersion: "v3"}
	extracted, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "erin", Question: "What is my dog called?", Answer: "Rex",
		EventID: "e1", CreatedAt: t0, Provenance: llm})
	if err != nil {
		t.Fatal(err)
	}
	// The user's store of the same pair, as the store endpoint writes it.
	id, stored, err := s.StoreContext(ctx, store.ContextWrite{UserID: "erin", Question: "what is my dog called?", Answer: "Rex",
		Provenance: store.Provenance{Extractor: "direct"}})
	if err != nil || stored || id != extracted {
		t.Fatalf("store of a pair held: id %d stored %v, %v; want the extracted item %d, not stored", id, stored, err, extracted)
	}
	if _, _, err := s.ResetMemory(ctx, []string{"erin"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ContextByID(ctx, "erin", id); err != nil {
		t.Errorf("the pair erin stored, after a reset: %v; want it kept (a replay by another model does not bring it back)", err)
	}
}

// TestResetKeepsADirectPairImportedOverAnExtractedOne: an import's line
// of a pair the user wrote directly elsewhere (extractor "direct", no
// turn), into a memory holding the pair from a turn's extraction, left
// the item extracted: a reset deleted it, and a replay by another model
// did not bring it back. The import's direct line makes it the user's own,
// as a store does.
func TestResetKeepsADirectPairImportedOverAnExtractedOne(t *testing.T) {
	ctx, s := setup(t)
	if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "finn", Question: "What is my dog called?", Answer: "Rex",
		CreatedAt: t0, Provenance: store.Provenance{Extractor: "direct"}}); err != nil {
		t.Fatal(err)
	}
	var exp bytes.Buffer
	if err := s.Export(ctx, "finn", &exp); err != nil {
		t.Fatal(err)
	}
	// Held from gina's own turn, later than the exported line.
	if err := importOverHeldPair(t, ctx, s, "gina", t0.Add(time.Hour), store.Provenance{Extractor: "llm", Model: "m1"}, exp.Bytes()); err != nil {
		t.Errorf("the pair gina imported as her own write, after a reset: %v; want it kept", err)
	}
}

// importOverHeldPair has user hold "What is my dog called?" "Rex" from
// their own turn e1 at heldAt (written by prov), imports export over it,
// resets the user's memory, and returns the error of reading the held
// item back: nil when the reset kept it.
func importOverHeldPair(t *testing.T, ctx context.Context, s *store.Store, user string, heldAt time.Time, prov store.Provenance, export []byte) error {
	t.Helper()
	if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: user, UserMessage: "my dog is Rex", TurnAt: heldAt}}); err != nil {
		t.Fatal(err)
	}
	id, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: user, Question: "What is my dog called?", Answer: "Rex",
		EventID: "e1", CreatedAt: heldAt, Provenance: prov})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(ctx, user, user, bytes.NewReader(export)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ResetMemory(ctx, []string{user}); err != nil {
		t.Fatal(err)
	}
	_, err = s.ContextByID(ctx, user, id)
	return err
}

// TestReextractionKeepsAPairStoredAgainDirectly: the re-extraction by the
// model of a turn a spend cap sent to the offline extractor deletes what
// the offline extractor stored of it; a pair of those the user had
// stored again (stored false) went with them.
func TestReextractionKeepsAPairStoredAgainDirectly(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: "hana", UserMessage: "Remember: the gate code is 4411", TurnAt: t0}}); err != nil {
		t.Fatal(err)
	}
	rules := store.Provenance{Extractor: "rules"}
	pair := store.ContextWrite{UserID: "hana", Question: "Remember: the gate code is 4411", Answer: "Noted.", EventID: "e1", CreatedAt: t0, Provenance: rules}
	id, _, err := s.StoreContext(ctx, pair)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MarkProcessed(ctx, "hana", []string{"e1"}, rules); err != nil {
		t.Fatal(err)
	}
	pair.EventID, pair.CreatedAt, pair.Provenance = "", time.Time{}, store.Provenance{Extractor: "direct"}
	if again, stored, err := s.StoreContext(ctx, pair); err != nil || stored || again != id {
		t.Fatalf("store of the offline pair: %d, stored %v, %v; want %d held", again, stored, err, id)
	}
	llm := store.Provenance{Extractor: "llm", Model: "m"}
	if err := s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
		_, err := q.ReplaceOffline(ctx, store.Reextraction{UserID: "hana", EventIDs: []string{"e1"}, Offline: "rules", Provenance: llm,
			Context: []store.ContextWrite{{UserID: "hana", Question: "What is the gate code?", Answer: "4411", EventID: "e1", CreatedAt: t0, Provenance: llm}}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ContextByID(ctx, "hana", id); err != nil {
		t.Errorf("the pair hana stored, after the model's re-extraction: %v; want it kept", err)
	}
}

// TestResetKeepsAPairImportedOverAHeldOne: an import's line of a pair
// extracted on another memoryd (extractor llm, its event id none of this
// user's turns), into a memory holding the pair from the user's own turn
// here, merges into the held item, which keeps its own turn's event id.
// A reset matched the import's record (import_sources, the foreign event
// id) against the item's event id, found none, and deleted the item: a
// replay by another model words the user's turn otherwise, and what the
// import brought was lost, where imported into a memory without the pair
// it stayed. Whichever line is later (the import's takes the item's time,
// or leaves it).
func TestResetKeepsAPairImportedOverAHeldOne(t *testing.T) {
	for _, importLater := range []bool{true, false} {
		name := "import_earlier"
		if importLater {
			name = "import_later"
		}
		t.Run(name, func(t *testing.T) {
			ctx, s := setup(t)
			llm := store.Provenance{Extractor: "llm", Model: "m1", PromptVersion: "v3"}
			exportedAt, heldAt := t0, t0.Add(time.Hour)
			if importLater {
				exportedAt, heldAt = heldAt, exportedAt
			}
			// ivan's memory elsewhere: the pair from his turn x9 there.
			if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "ivan", Question: "What is my dog called?", Answer: "Rex",
				EventID: "x9", CreatedAt: exportedAt, Provenance: llm}); err != nil {
				t.Fatal(err)
			}
			var exp bytes.Buffer
			if err := s.Export(ctx, "ivan", &exp); err != nil {
				t.Fatal(err)
			}
			// jade holds the pair from her own turn e1 here.
			if err := importOverHeldPair(t, ctx, s, "jade", heldAt, llm, exp.Bytes()); err != nil {
				t.Errorf("the pair jade imported over the one she held, after a reset: %v; want it kept", err)
			}
		})
	}
}

// TestResetDeletesAPairFromATurnAfterTheImportedOneWasCleared: a pair an
// import brought (another memoryd's turn x9), which the user then
// cleared, and which a turn of the user's here later stated again (an
// extraction, under that turn's id), is that turn's pair: a reset deletes
// it, and the replay, maybe by another model, extracts it again. The
// import's record of the pair outlived the clear, and a reset matching
// imported pairs by content alone (whatever the event id, for a pair an
// import merged into a held one) kept it: the old model's wording stayed
// beside the new one's. A clear (or an update away) of the pair drops the
// import's record of it.
func TestResetDeletesAPairFromATurnAfterTheImportedOneWasCleared(t *testing.T) {
	for _, how := range []string{"clear", "update", "prune", "import_clear"} {
		t.Run(how, func(t *testing.T) {
			ctx, s := setup(t)
			llm := store.Provenance{Extractor: "llm", Model: "m1", PromptVersion: "v3"}
			q, a := "What is my dog called?", "Rex"
			if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "ivan", Question: q, Answer: a,
				EventID: "x9", CreatedAt: t0, Provenance: llm}); err != nil {
				t.Fatal(err)
			}
			var exp bytes.Buffer
			if err := s.Export(ctx, "ivan", &exp); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Import(ctx, "kim", "kim", bytes.NewReader(exp.Bytes())); err != nil {
				t.Fatal(err)
			}
			items, err := s.ListContext(ctx, "kim", store.ContextCursor{}, 10)
			if err != nil || len(items) != 1 {
				t.Fatalf("kim's items after the import: %+v, %v; want the pair", items, err)
			}
			switch how {
			case "clear":
				if _, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "kim", ID: items[0].ID}); err != nil {
					t.Fatal(err)
				}
			case "import_clear":
				// kim's export from where the pair came from, after she
				// cleared it there: its clear line deletes hers here.
				clear := fmt.Sprintf(`{"type":%q,"version":%d}`+"\n"+`{"type":"context_clear","hash":%q,"cleared_at":%q}`+"\n",
					store.ExportType, store.ExportVersion, hex.EncodeToString(store.ContentHash("kim", q, a)), t0.Add(time.Hour).Format(time.RFC3339Nano))
				if _, err := s.Import(ctx, "kim", "kim", strings.NewReader(clear)); err != nil {
					t.Fatal(err)
				}
				if left, err := s.ListContext(ctx, "kim", store.ContextCursor{}, 10); err != nil || len(left) != 0 {
					t.Fatalf("kim's items after importing ivan's clear: %+v, %v; want none", left, err)
				}
			case "prune":
				// The prune's cap: every item over none per user goes.
				if n, err := s.DeleteContextOverCap(ctx, 0, 10); err != nil || n != 2 {
					t.Fatalf("pruned %d items, %v; want ivan's and kim's", n, err)
				}
			default:
				other := "Rex the dog"
				if _, err := s.UpdateContext(ctx, store.ContextUpdate{UserID: "kim", ID: items[0].ID, Answer: &other}); err != nil {
					t.Fatal(err)
				}
			}
			// kim's own turn here states the pair again, after the clear.
			at := time.Now()
			if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "e5", UserID: "kim", UserMessage: "my dog is Rex", TurnAt: at}}); err != nil {
				t.Fatal(err)
			}
			id, inserted, err := s.StoreContext(ctx, store.ContextWrite{UserID: "kim", Question: q, Answer: a,
				EventID: "e5", CreatedAt: at, Provenance: llm})
			if err != nil || !inserted {
				t.Fatalf("the turn's pair: %v, %v; want it inserted", inserted, err)
			}
			if _, _, err := s.ResetMemory(ctx, []string{"kim"}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ContextByID(ctx, "kim", id); err == nil {
				t.Errorf("the pair of kim's turn e5, extracted after she cleared the imported one, after a reset: kept; want it deleted (the replay extracts it again)")
			}
		})
	}
}

// TestPruneWaitsForNoImportRecordHeld: the prune's delete of an import's
// records of its victims' pairs passes over the records another
// transaction holds (a forget deletes them before the user's items, which
// the prune holds meanwhile: waiting, the two closed a cycle).
func TestPruneWaitsForNoImportRecordHeld(t *testing.T) {
	ctx, s := setup(t)
	if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "ivan", Question: "What is my dog called?", Answer: "Rex",
		EventID: "x9", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	var exp bytes.Buffer
	if err := s.Export(ctx, "ivan", &exp); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(ctx, "kim", "kim", bytes.NewReader(exp.Bytes())); err != nil {
		t.Fatal(err)
	}
	hold, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx)
	if _, err := hold.Exec(ctx, `DELETE FROM import_sources WHERE user_id = 'kim'`); err != nil {
		t.Fatal(err)
	}
	// Bounded: a prune that waits for the holder fails on the lock
	// timeout instead of hanging the test.
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if n, err := s.DeleteContextOverCap(pctx, 0, 10); err != nil || n != 2 {
		t.Fatalf("pruned %d items, %v; want ivan's and kim's, past kim's record held", n, err)
	}
}
