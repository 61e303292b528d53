package store_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
)

// TestResetKeepsAFactImportedBehindTheUsersNewerOne: an import's fact
// (another memoryd's turn x9) into a memory holding the key from the
// user's own, later turn here loses by the facts' rule (the latest
// statement wins) and is written nowhere but the import's record. A reset
// deletes the user's fact (the replay extracts it again); a replay by a
// model that no longer extracts it then left the user without the key at
// all, though the import still said it. After a reset the key holds what
// the sources that survive it say: the imported value, until the replay
// states the user's own later one again, which wins as before.
func TestResetKeepsAFactImportedBehindTheUsersNewerOne(t *testing.T) {
	ctx, s := setup(t)
	llm := store.Provenance{Extractor: "llm", Model: "m1", PromptVersion: "v3"}
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "ivan", Key: "location", Value: "Lisbon",
		SourceAt: t0, EventID: "x9", Provenance: llm}}); err != nil {
		t.Fatal(err)
	}
	var exp bytes.Buffer
	if err := s.Export(ctx, "ivan", &exp); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Hour)
	own := []store.FactWrite{{UserID: "jade", Key: "location", Value: "Paris", SourceAt: later, EventID: "e1", Provenance: llm}}
	if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: "jade", UserMessage: "I moved to Paris", TurnAt: later}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertFacts(ctx, own); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(ctx, "jade", "jade", bytes.NewReader(exp.Bytes())); err != nil {
		t.Fatal(err)
	}
	if f, err := s.Fact(ctx, "jade", "location"); err != nil || f.Value != "Paris" {
		t.Fatalf("jade's location after the import: %+v, %v; want her own later Paris", f, err)
	}
	if _, _, err := s.ResetMemory(ctx, []string{"jade"}); err != nil {
		t.Fatal(err)
	}
	// The replay's model extracts nothing from e1.
	if f, err := s.Fact(ctx, "jade", "location"); err != nil || f.Value != "Lisbon" || f.EventID != "x9" || !f.SourceAt.Equal(t0) {
		t.Fatalf("jade's location after a reset whose replay no longer extracts her own: %+v, %v; want the imported Lisbon of x9", f, err)
	}
	// A replay that extracts it again: her later statement wins.
	if _, err := s.UpsertFacts(ctx, own); err != nil {
		t.Fatal(err)
	}
	if f, err := s.Fact(ctx, "jade", "location"); err != nil || f.Value != "Paris" {
		t.Errorf("jade's location after the replay extracted hers again: %+v, %v; want Paris", f, err)
	}
	// A second reset: the import's value again, not both nor none.
	if _, _, err := s.ResetMemory(ctx, []string{"jade"}); err != nil {
		t.Fatal(err)
	}
	if f, err := s.Fact(ctx, "jade", "location"); err != nil || f.Value != "Lisbon" {
		t.Errorf("jade's location after a second reset: %+v, %v; want Lisbon", f, err)
	}
}

// TestReextractionKeepsWhatAnImportBrought: the re-extraction by the
// model of a turn a spend cap sent to the offline extractor deletes what
// the offline extractor made of it, found by the turn's event id and
// extractor. An import's pair under the same event id (another memoryd's
// turn e1, extracted there by the same offline extractor: event ids are
// unique per user only) went with it, though this turn never said it,
// and its import record (import_sources) stayed behind naming nothing. A
// reset keeps what an import brought (rebuilt); the re-extraction now does
// too.
func TestReextractionKeepsWhatAnImportBrought(t *testing.T) {
	ctx, s := setup(t)
	rules := store.Provenance{Extractor: "rules"}
	if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "ivan", Question: "What is my dog called?", Answer: "Rex",
		EventID: "e1", CreatedAt: t0, Provenance: rules}); err != nil {
		t.Fatal(err)
	}
	importUnderOwnEventID(t, ctx, s, rules)
	items, err := s.ListContext(ctx, "nora", store.ContextCursor{}, 10)
	if err != nil || len(items) != 1 {
		t.Fatalf("nora's items after the import: %+v, %v; want the pair", items, err)
	}
	llm := store.Provenance{Extractor: "llm", Model: "m"}
	if err := s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
		_, err := q.ReplaceOffline(ctx, store.Reextraction{UserID: "nora", EventIDs: []string{"e1"}, Offline: "rules", Provenance: llm})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ContextByID(ctx, "nora", items[0].ID); err != nil {
		t.Errorf("the pair nora imported, after the model's re-extraction of her own turn e1: %v; want it kept", err)
	}
}

// TestResetKeepsAFactAnImportClearedCleared: a fact an import brought
// (ivan's Lisbon of x9) and a later import's clear of it (kim's memory,
// where a turn said the key, or the value, is no longer true) leave the
// key empty. The reset drops the clears turns made, the import's among
// them, and wrote the import's recorded line back: the key said Lisbon
// again, though nothing here nor in any import says it any more. In
// either order of the imports.
func TestResetKeepsAFactAnImportClearedCleared(t *testing.T) {
	for _, tc := range []struct {
		name       string
		clear      store.FactWrite
		clearFirst bool
	}{
		{"key", store.FactWrite{Op: store.FactDelete}, false},
		{"value", store.FactWrite{Op: store.FactDelete, Value: "Lisbon"}, false},
		{"key cleared first", store.FactWrite{Op: store.FactDelete}, true},
		{"value cleared first", store.FactWrite{Op: store.FactDelete, Value: "Lisbon"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, s := setup(t)
			llm := store.Provenance{Extractor: "llm", Model: "m1", PromptVersion: "v3"}
			if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "ivan", Key: "location", Value: "Lisbon",
				SourceAt: t0, EventID: "x9", Provenance: llm}}); err != nil {
				t.Fatal(err)
			}
			var first bytes.Buffer
			if err := s.Export(ctx, "ivan", &first); err != nil {
				t.Fatal(err)
			}
			c := tc.clear
			c.UserID, c.Key, c.SourceAt, c.EventID, c.Provenance = "kim", "location", t0.Add(time.Hour), "k1", llm
			if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "kim", Key: "location", Value: "Lisbon",
				SourceAt: t0, EventID: "k0", Provenance: llm}, c}); err != nil {
				t.Fatal(err)
			}
			var second bytes.Buffer
			if err := s.Export(ctx, "kim", &second); err != nil {
				t.Fatal(err)
			}
			exps := []*bytes.Buffer{&first, &second}
			if tc.clearFirst {
				exps[0], exps[1] = exps[1], exps[0]
			}
			for _, exp := range exps {
				if _, err := s.Import(ctx, "jade", "jade", bytes.NewReader(exp.Bytes())); err != nil {
					t.Fatal(err)
				}
			}
			if f, err := s.Fact(ctx, "jade", "location"); err == nil {
				t.Fatalf("jade's location after the imports: %+v; want none (the second import's clear)", f)
			}
			if _, _, err := s.ResetMemory(ctx, []string{"jade"}); err != nil {
				t.Fatal(err)
			}
			if f, err := s.Fact(ctx, "jade", "location"); err == nil {
				t.Errorf("jade's location after a reset: %+v; want none, as before it (an import cleared it)", f)
			}
		})
	}
}

// TestReextractionKeepsAFactAnImportBrought: as above, for a fact and a
// list item the import brought under the turn's event id (the offline
// extractor's there too): the model's re-extraction of nora's own turn e1
// writing the same keys deleted them, and its values took their place,
// though the import's were stated later.
func TestReextractionKeepsAFactAnImportBrought(t *testing.T) {
	ctx, s := setup(t)
	rules := store.Provenance{Extractor: "rules"}
	later := t0.Add(time.Hour)
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{
		{UserID: "ivan", Key: "pet", Value: "Rex", SourceAt: later, EventID: "e1", Provenance: rules},
		{UserID: "ivan", Key: "languages", Value: "Welsh", List: true, Op: store.FactAdd, SourceAt: later, EventID: "e1", Provenance: rules},
	}); err != nil {
		t.Fatal(err)
	}
	importUnderOwnEventID(t, ctx, s, rules)
	llm := store.Provenance{Extractor: "llm", Model: "m"}
	if err := s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
		_, err := q.ReplaceOffline(ctx, store.Reextraction{UserID: "nora", EventIDs: []string{"e1"}, Offline: "rules", Provenance: llm,
			Facts: []store.FactWrite{
				{UserID: "nora", Key: "pet", Value: "Tom", SourceAt: t0, EventID: "e1", Provenance: llm},
				{UserID: "nora", Key: "languages", Value: "Basque", List: true, Op: store.FactAdd, SourceAt: t0, EventID: "e1", Provenance: llm},
			}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if f, err := s.Fact(ctx, "nora", "pet"); err != nil || f.Value != "Rex" {
		t.Errorf("nora's pet after the model's re-extraction of e1: %+v, %v; want the imported, later Rex", f, err)
	}
	if f, err := s.Fact(ctx, "nora", "languages"); err != nil || f.Value != "Basque, Welsh" {
		t.Errorf("nora's languages after the model's re-extraction of e1: %+v, %v; want the imported Welsh beside Basque", f, err)
	}
}

// importUnderOwnEventID imports ivan's memory (written under event id e1)
// into nora's, who has a turn e1 of her own processed by the rules
// extractor: the import's rows share the event id of her turn.
func importUnderOwnEventID(t *testing.T, ctx context.Context, s *store.Store, rules store.Provenance) {
	t.Helper()
	var exp bytes.Buffer
	if err := s.Export(ctx, "ivan", &exp); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: "nora", UserMessage: "What time is it?", TurnAt: t0}}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkProcessed(ctx, "nora", []string{"e1"}, rules); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(ctx, "nora", "nora", bytes.NewReader(exp.Bytes())); err != nil {
		t.Fatal(err)
	}
}

// TestResetKeepsAClearAnImportBrought: an import's clear of a key, or of
// one value of it (kim's memory, where a turn said it is no longer true),
// clears what jade's own earlier turn e1 said. The reset dropped it with
// the clears turns made, and the replay's extraction of e1 brought the
// fact back, though the import still cleared it. A reset keeps an
// import's clears, by the facts' rule: a statement later than the clear
// still wins.
func TestResetKeepsAClearAnImportBrought(t *testing.T) {
	for _, tc := range []struct {
		name  string
		clear store.FactWrite
	}{
		{"key", store.FactWrite{Op: store.FactDelete}},
		{"value", store.FactWrite{Op: store.FactDelete, Value: "Paris"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, s := setup(t)
			llm := store.Provenance{Extractor: "llm", Model: "m1", PromptVersion: "v3"}
			c := tc.clear
			c.UserID, c.Key, c.SourceAt, c.EventID, c.Provenance = "kim", "location", t0.Add(time.Hour), "k1", llm
			if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "kim", Key: "location", Value: "Paris",
				SourceAt: t0, EventID: "k0", Provenance: llm}, c}); err != nil {
				t.Fatal(err)
			}
			var exp bytes.Buffer
			if err := s.Export(ctx, "kim", &exp); err != nil {
				t.Fatal(err)
			}
			own := []store.FactWrite{{UserID: "jade", Key: "location", Value: "Paris", SourceAt: t0, EventID: "e1", Provenance: llm}}
			if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: "jade", UserMessage: "I live in Paris", TurnAt: t0}}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.UpsertFacts(ctx, own); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Import(ctx, "jade", "jade", bytes.NewReader(exp.Bytes())); err != nil {
				t.Fatal(err)
			}
			if f, err := s.Fact(ctx, "jade", "location"); err == nil {
				t.Fatalf("jade's location after the import: %+v; want none (the import's later clear)", f)
			}
			for i := range 2 { // a second reset keeps it as the first
				if _, _, err := s.ResetMemory(ctx, []string{"jade"}); err != nil {
					t.Fatal(err)
				}
				// The replay extracts e1 again.
				if _, err := s.UpsertFacts(ctx, own); err != nil {
					t.Fatal(err)
				}
				if f, err := s.Fact(ctx, "jade", "location"); err == nil {
					t.Fatalf("jade's location after reset %d and the replay of e1: %+v; want none, as before it (the import cleared it later)", i+1, f)
				}
			}
			// Her own statement later than the clear wins, as before.
			later := own[0]
			later.Value, later.SourceAt, later.EventID = "Rome", t0.Add(2*time.Hour), "e2"
			if _, err := s.UpsertFacts(ctx, []store.FactWrite{later}); err != nil {
				t.Fatal(err)
			}
			if f, err := s.Fact(ctx, "jade", "location"); err != nil || f.Value != "Rome" {
				t.Errorf("jade's location after her later statement: %+v, %v; want Rome", f, err)
			}
		})
	}
}

// TestResetWritesBackAListAnImportBrought: an import's list key (kim's
// languages, Basque and Welsh) whose items jade's own later turn e1
// removed. A reset deletes the removes (the replay makes them again) and
// wrote the import's line of the key back as one value, "Basque, Welsh",
// not as the two items it was: the next item written materialised the
// key from its items alone, and the imported languages were gone. After a
// reset the key holds the imported items again, until the replay removes
// them again; a later item joins them.
func TestResetWritesBackAListAnImportBrought(t *testing.T) {
	ctx, s := setup(t)
	llm := store.Provenance{Extractor: "llm", Model: "m1", PromptVersion: "v3"}
	item := func(user, value string, op store.FactOp, at time.Time, event string) store.FactWrite {
		return store.FactWrite{UserID: user, Key: "languages", Value: value, List: true, Op: op, SourceAt: at, EventID: event, Provenance: llm}
	}
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{item("kim", "Basque", store.FactAdd, t0, "k0"), item("kim", "Welsh", store.FactAdd, t0, "k0")}); err != nil {
		t.Fatal(err)
	}
	var exp bytes.Buffer
	if err := s.Export(ctx, "kim", &exp); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(ctx, "jade", "jade", bytes.NewReader(exp.Bytes())); err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(time.Hour)
	removes := []store.FactWrite{item("jade", "Basque", store.FactRemove, t1, "e1"), item("jade", "Welsh", store.FactRemove, t1, "e1")}
	if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: "jade", UserMessage: "I forgot Basque and Welsh", TurnAt: t1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertFacts(ctx, removes); err != nil {
		t.Fatal(err)
	}
	if f, err := s.Fact(ctx, "jade", "languages"); err == nil {
		t.Fatalf("jade's languages after her removes: %+v; want none", f)
	}
	// A replay that makes the removes again: none, as before the reset.
	if _, _, err := s.ResetMemory(ctx, []string{"jade"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertFacts(ctx, removes); err != nil {
		t.Fatal(err)
	}
	if f, err := s.Fact(ctx, "jade", "languages"); err == nil {
		t.Errorf("jade's languages after a reset whose replay removes them again: %+v; want none", f)
	}
	// A replay whose model no longer extracts the removes: the imported
	// items, as items.
	if _, _, err := s.ResetMemory(ctx, []string{"jade"}); err != nil {
		t.Fatal(err)
	}
	if f, err := s.Fact(ctx, "jade", "languages"); err != nil || f.Value != "Basque, Welsh" {
		t.Fatalf("jade's languages after a reset whose replay extracts nothing: %+v, %v; want the imported Basque, Welsh", f, err)
	}
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{item("jade", "French", store.FactAdd, t1.Add(time.Hour), "e2")}); err != nil {
		t.Fatal(err)
	}
	if f, err := s.Fact(ctx, "jade", "languages"); err != nil || f.Value != "Basque, French, Welsh" {
		t.Errorf("jade's languages after she adds French: %+v, %v; want Basque, French, Welsh (the imported items beside hers)", f, err)
	}
}

// TestResetWritesBackAFactBesideAListNamedAfterIt: ivan's single-valued
// key "pet" and his list key "pet:names", imported into jade's memory
// behind her own later "pet". The reset told a list key's line by an item
// record's content starting "i:pet:", which "pet:names"'s items do too
// (a key may hold ':'), and left "pet" without the imported value.
func TestResetWritesBackAFactBesideAListNamedAfterIt(t *testing.T) {
	ctx, s := setup(t)
	llm := store.Provenance{Extractor: "llm", Model: "m1", PromptVersion: "v3"}
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{
		{UserID: "ivan", Key: "pet", Value: "cat", SourceAt: t0, EventID: "x9", Provenance: llm},
		{UserID: "ivan", Key: "pet:names", Value: "Tom", List: true, Op: store.FactAdd, SourceAt: t0, EventID: "x9", Provenance: llm},
	}); err != nil {
		t.Fatal(err)
	}
	var exp bytes.Buffer
	if err := s.Export(ctx, "ivan", &exp); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Hour)
	if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: "jade", UserMessage: "I have a dog", TurnAt: later}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "jade", Key: "pet", Value: "dog", SourceAt: later, EventID: "e1", Provenance: llm}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(ctx, "jade", "jade", bytes.NewReader(exp.Bytes())); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ResetMemory(ctx, []string{"jade"}); err != nil {
		t.Fatal(err)
	}
	// The replay's model extracts nothing from e1.
	if f, err := s.Fact(ctx, "jade", "pet"); err != nil || f.Value != "cat" {
		t.Errorf("jade's pet after a reset whose replay no longer extracts her own: %+v, %v; want the imported cat", f, err)
	}
	if f, err := s.Fact(ctx, "jade", "pet:names"); err != nil || f.Value != "Tom" {
		t.Errorf("jade's pet:names after the reset: %+v, %v; want the imported Tom", f, err)
	}
}
