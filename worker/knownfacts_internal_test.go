package worker

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

func TestKnownFactsApply(t *testing.T) {
	t.Parallel()
	add := func(k, v string) extractor.FactChange {
		return extractor.FactChange{Op: extractor.OpAdd, Key: k, Value: v}
	}
	rm := func(k, v string) extractor.FactChange {
		return extractor.FactChange{Op: extractor.OpRemove, Key: k, Value: v}
	}
	del := func(k string) extractor.FactChange { return extractor.FactChange{Op: extractor.OpDelete, Key: k} }
	for _, c := range []struct {
		name       string
		res        extractor.Result
		wantValues map[string]string
		wantOrder  []string
	}{
		{"nothing", extractor.Result{}, map[string]string{"name": "Ana", "allergies": "peanuts"}, []string{"name", "allergies"}},
		{"sets become newest, in key order", extractor.Result{Facts: map[string]string{"location": "Porto", "allergies": "soy"}},
			map[string]string{"name": "Ana", "allergies": "soy", "location": "Porto"}, []string{"location", "allergies", "name"}},
		{"add to a list", extractor.Result{Changes: []extractor.FactChange{add("allergies", "shellfish")}},
			map[string]string{"name": "Ana", "allergies": "peanuts, shellfish"}, []string{"allergies", "name"}},
		{"add of a present item", extractor.Result{Changes: []extractor.FactChange{add("allergies", " PEANUTS")}},
			map[string]string{"name": "Ana", "allergies": "peanuts"}, []string{"allergies", "name"}},
		{"add to a new list", extractor.Result{Facts: map[string]string{}, Changes: []extractor.FactChange{rm("allergies", "peanuts"), add("allergies", "soy")}},
			map[string]string{"name": "Ana", "allergies": "soy"}, []string{"allergies", "name"}},
		{"remove the last item", extractor.Result{Changes: []extractor.FactChange{rm("allergies", "Peanuts")}},
			map[string]string{"name": "Ana"}, []string{"name"}},
		{"remove of an absent item", extractor.Result{Changes: []extractor.FactChange{rm("allergies", "soy")}},
			map[string]string{"name": "Ana", "allergies": "peanuts"}, []string{"allergies", "name"}},
		{"delete", extractor.Result{Changes: []extractor.FactChange{del("name")}},
			map[string]string{"allergies": "peanuts"}, []string{"allergies"}},
		{"add on a single-valued key ignored", extractor.Result{Changes: []extractor.FactChange{add("name", "Bo")}},
			map[string]string{"name": "Ana", "allergies": "peanuts"}, []string{"name", "allergies"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := &knownFacts{values: map[string]string{"name": "Ana", "allergies": "peanuts"}, order: []string{"name", "allergies"}}
			facts, order := k.input()
			k.apply(c.res)
			if !reflect.DeepEqual(k.values, c.wantValues) || !reflect.DeepEqual(k.order, c.wantOrder) {
				t.Errorf("apply: %v %v, want %v %v", k.values, k.order, c.wantValues, c.wantOrder)
			}
			if facts["name"] != "Ana" || len(order) != 2 {
				t.Error("apply changed what input returned before")
			}
		})
	}
}

// TestLoadKnownFacts: the user's facts, most recently stated first, but
// for those last stated by the turns being extracted (which a model would
// otherwise call unchanged and leave out of a re-extraction that replaces
// them).
func TestLoadKnownFacts(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	var writes []store.FactWrite
	for i, f := range []struct{ user, key, value, event string }{
		{"ana", "name", "Ana", "e1"},
		{"ana", "location", "Porto", "e2"},
		{"ana", "pet", "cat", "e3"},
		{"bo", "name", "Bo", "e2"},
	} {
		writes = append(writes, store.FactWrite{UserID: f.user, Key: f.key, Value: f.value, EventID: f.event,
			SourceAt: at.Add(time.Duration(i) * time.Minute), Provenance: store.Provenance{Extractor: "rules"}})
	}
	// A list whose newest item is the job's own turn's: shown without that
	// item, not left out (the earlier item would be lost to a model that
	// states the list whole); a list of the job's turns alone is left out.
	for i, it := range []struct{ key, value, event string }{
		{"allergies", "eggs", "e0"}, {"allergies", "peanuts", "e2"}, {"languages", "Danish", "e9"},
	} {
		writes = append(writes, store.FactWrite{UserID: "ana", Key: it.key, Value: it.value, EventID: it.event, Op: store.FactAdd, List: true,
			SourceAt: at.Add(-time.Duration(3-i) * time.Minute), Provenance: store.Provenance{Extractor: "rules"}})
	}
	if _, err := s.UpsertFacts(ctx, writes); err != nil {
		t.Fatal(err)
	}
	k, err := loadKnownFacts(ctx, s, "ana", []store.Turn{{UserID: "ana", EventID: "e2"}, {UserID: "ana", EventID: "e9"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"name": "Ana", "pet": "cat", "allergies": "eggs"}; !reflect.DeepEqual(k.values, want) ||
		!reflect.DeepEqual(k.order, []string{"pet", "name", "allergies"}) {
		t.Errorf("known facts = %v %v, want %v [pet name allergies]", k.values, k.order, want)
	}
}
