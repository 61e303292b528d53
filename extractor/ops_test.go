package extractor

import (
	"reflect"
	"slices"
	"testing"
)

func TestResolveOps(t *testing.T) {
	t.Parallel()
	set := func(k, v string) factItem { return factItem{Op: OpSet, Key: k, Value: v} }
	add := func(k, v string) factItem { return factItem{Op: OpAdd, Key: k, Value: v} }
	rm := func(k, v string) factItem { return factItem{Op: OpRemove, Key: k, Value: v} }
	del := func(k, v string) factItem { return factItem{Op: OpDelete, Key: k, Value: v} }
	for _, c := range []struct {
		name    string
		items   []factItem
		facts   map[string]string
		changes []FactChange
	}{
		{"set", []factItem{set("Location", "Porto")}, map[string]string{"location": "Porto"}, nil},
		{"alias to canonical key", []factItem{set("city", "Porto")}, map[string]string{"location": "Porto"}, nil},
		{"last single op wins", []factItem{set("location", "Porto"), del("location", "Porto")}, map[string]string{},
			[]FactChange{{OpDelete, "location", "Porto"}}},
		{"delete then set", []factItem{del("location", "Berlin"), set("location", "Porto")}, map[string]string{"location": "Porto"}, nil},
		{"add on single key is a set", []factItem{add("name", "Ana")}, map[string]string{"name": "Ana"}, nil},
		{"remove on single key is a delete", []factItem{rm("name", "Ana")}, map[string]string{}, []FactChange{{OpDelete, "name", "Ana"}}},
		{"unknown value dropped", []factItem{set("name", "unknown"), add("allergies", "n/a")}, map[string]string{}, nil},
		{"no key dropped", []factItem{set("", "x"), set("__", "y")}, map[string]string{}, nil},
		{"list adds and removes", []factItem{add("allergy", "shellfish"), rm("allergies", "Peanuts")}, map[string]string{},
			[]FactChange{{OpAdd, "allergies", "shellfish"}, {OpRemove, "allergies", "Peanuts"}}},
		{"last op on an item wins", []factItem{add("allergies", "Peanuts"), rm("allergies", "peanuts")}, map[string]string{},
			[]FactChange{{OpRemove, "allergies", "peanuts"}}},
		// Items are identified as the store does, in Unicode NFKC.
		{"last op on an item wins in another width", []factItem{add("allergies", "Peanuts"), rm("allergies", "ｐｅａｎｕｔｓ")}, map[string]string{},
			[]FactChange{{OpRemove, "allergies", "ｐｅａｎｕｔｓ"}}},
		{"set items accumulate", []factItem{set("allergies", "peanuts"), set("allergies", "shellfish"), add("allergies", "Peanuts")},
			map[string]string{"allergies": "Peanuts, shellfish"}, nil},
		{"delete then add starts a new list", []factItem{del("allergies", ""), add("allergies", "soy")},
			map[string]string{"allergies": "soy"}, nil},
		{"add then delete drops the list", []factItem{add("allergies", "soy"), del("allergies", "")}, map[string]string{},
			[]FactChange{{OpDelete, "allergies", ""}}},
		{"set then remove all is a delete", []factItem{set("allergies", "soy"), rm("allergies", "soy")}, map[string]string{},
			[]FactChange{{OpDelete, "allergies", ""}}},
		{"a list set in one value is its items", []factItem{set("allergies", "peanuts; soy,")},
			map[string]string{"allergies": "peanuts, soy"}, nil},
		{"a list added in one value is its items", []factItem{add("allergies", "Peanuts, soy")},
			map[string]string{}, []FactChange{{OpAdd, "allergies", "Peanuts"}, {OpAdd, "allergies", "soy"}}},
		{"unknown op dropped", []factItem{{Op: "merge", Key: "name", Value: "Ana"}}, map[string]string{}, nil},
		{"unknown op on a list key dropped", []factItem{{Op: "merge", Key: "allergies", Value: "soy"}}, map[string]string{}, nil},
		{"a list value of no items is no set", []factItem{set("allergies", "peanuts"), set("allergies", " , ;")},
			map[string]string{"allergies": "peanuts"}, nil},
		{"a list set of only separators does not delete", []factItem{set("allergies", ",")}, map[string]string{}, nil},
		{"unknown items of a list value dropped", []factItem{add("allergies", "soy, none, n/a")}, map[string]string{},
			[]FactChange{{OpAdd, "allergies", "soy"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			facts, changes := resolveOps(c.items)
			if !reflect.DeepEqual(facts, c.facts) || !reflect.DeepEqual(changes, c.changes) {
				t.Errorf("resolveOps = %v, %v; want %v, %v", facts, changes, c.facts, c.changes)
			}
		})
	}
}

// TestSplitItems: a list value's items, at commas and semicolons, or the
// strings of a value written as a JSON array (a model quoting the list).
func TestSplitItems(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  []string
	}{
		{"peanuts, shellfish; eggs", []string{"peanuts", "shellfish", "eggs"}},
		{` ["climbing","go"] `, []string{"climbing", "go"}},
		{`["board games; cards", "chess", ""]`, []string{"board games", "cards", "chess"}},
		{`[climbing, go]`, []string{"[climbing", "go]"}}, // not JSON: split as written
		{`["unknown"]`, nil},
		{"", nil},
	} {
		if got := SplitItems(tt.value); !slices.Equal(got, tt.want) {
			t.Errorf("SplitItems(%q) = %q, want %q", tt.value, got, tt.want)
		}
	}
}
