package worker

import (
	"reflect"
	"testing"

	"github.com/memoryd/memoryd/extractor"
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
