package events

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var snakeCaseRE = regexp.MustCompile(`^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$`)

// TestFactKeysWellFormed: keys and aliases are snake_case, every spelling
// names one entry only, and every entry says what its value is.
func TestFactKeysWellFormed(t *testing.T) {
	seen := map[string]string{} // spelling → the entry it belongs to
	for _, k := range FactKeys() {
		if k.Doc == "" || strings.Contains(k.Doc, "|") {
			t.Errorf("%s: doc %q is empty or holds a '|' (it is a markdown table cell)", k.Key, k.Doc)
		}
		for _, s := range append([]string{k.Key}, k.Aliases...) {
			if !snakeCaseRE.MatchString(s) {
				t.Errorf("%s: %q is not snake_case", k.Key, s)
			}
			if other, dup := seen[s]; dup {
				t.Errorf("%q is a spelling of both %s and %s", s, other, k.Key)
			}
			seen[s] = k.Key
		}
	}
	if n := len(FactKeys()); n < 25 || n > 35 {
		t.Errorf("%d keys, want the ~30 that matter", n)
	}
}

// TestCanonicalFactKey: every alias maps to its key, keys to themselves,
// other keys are free and single-valued, and the list flag is the entry's.
func TestCanonicalFactKey(t *testing.T) {
	for _, k := range FactKeys() {
		for _, s := range append([]string{k.Key}, k.Aliases...) {
			if got, list := CanonicalFactKey(s); got != k.Key || list != k.List {
				t.Errorf("CanonicalFactKey(%q) = %q, %v; want %q, %v", s, got, list, k.Key, k.List)
			}
		}
	}
	tests := []struct {
		key, want string
		list      bool
	}{
		{"city", "location", false},
		{"language", "languages", true},
		{"allergy", "allergies", true},
		{"food_allergies", "allergies", true},
		{"wife_name", "partner", false},
		{"daughter", "children", true},
		{"dog_name", "pets", true},
		{"job", "occupation", false},
		{"hobby", "hobbies", true},
		{"age", "age", false}, // an age is not a birth year: never an alias
		{"favorite_color", "favorite_color", false},
		{"", "", false},
	}
	for _, tt := range tests {
		if got, list := CanonicalFactKey(tt.key); got != tt.want || list != tt.list {
			t.Errorf("CanonicalFactKey(%q) = %q, %v; want %q, %v", tt.key, got, list, tt.want, tt.list)
		}
	}
}

// TestFactKeysFlags pins which keys are lists and which are core: changing
// either changes what memoryd stores and injects.
func TestFactKeysFlags(t *testing.T) {
	var lists, core []string
	for _, k := range FactKeys() {
		if k.List {
			lists = append(lists, k.Key)
		}
		if k.Core {
			core = append(core, k.Key)
		}
	}
	wantLists := []string{"languages", "children", "siblings", "pets", "allergies", "dietary_restrictions", "health_conditions",
		"likes", "dislikes", "hobbies", "preferences", "goals", "plans"}
	if !slices.Equal(lists, wantLists) {
		t.Errorf("list keys = %q, want %q", lists, wantLists)
	}
	wantCore := []string{"name", "preferred_name", "pronouns", "location", "timezone", "native_language", "languages", "occupation"}
	if !slices.Equal(core, wantCore) {
		t.Errorf("core keys = %q, want %q", core, wantCore)
	}
}

// TestFactKeysCopy: FactKeys hands out copies.
func TestFactKeysCopy(t *testing.T) {
	k := FactKeys()
	k[0].Key = "changed"
	k[0].Aliases[0] = "changed"
	if got := FactKeys()[0]; got.Key == "changed" || got.Aliases[0] == "changed" {
		t.Errorf("FactKeys()[0] = %+v after changing a copy", got)
	}
}

// TestFactKeysDocumented: the table in docs/protocol.md ("Fact keys") is
// the vocabulary, row for row and cell for cell.
func TestFactKeysDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := factKeyTable(string(b))
	if err != nil {
		t.Fatal(err)
	}
	keys := FactKeys()
	for i := 0; i < max(len(rows), len(keys)); i++ {
		switch {
		case i >= len(rows):
			t.Errorf("docs/protocol.md lacks a row for %q", keys[i].Key)
			continue
		case i >= len(keys):
			t.Errorf("docs/protocol.md documents %q, which is not in events.FactKeys()", rows[i].Key)
			continue
		}
		want := keys[i]
		if len(want.Aliases) == 0 {
			want.Aliases = nil
		}
		if got := rows[i]; got.Key != want.Key || got.List != want.List || got.Core != want.Core ||
			!slices.Equal(got.Aliases, want.Aliases) || got.Doc != want.Doc {
			t.Errorf("docs/protocol.md row %d = %+v,\nevents.FactKeys() has %+v", i+1, got, want)
		}
	}
}

// factKeyTable parses the table of the "## Fact keys" section:
// | `key` | yes/no | yes/no | `alias`, `alias` | doc |
func factKeyTable(doc string) ([]FactKeyInfo, error) {
	_, sec, ok := strings.Cut(doc, "\n## Fact keys\n")
	if !ok {
		return nil, errors.New("docs/protocol.md has no section \"## Fact keys\"")
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	var rows []FactKeyInfo
	inTable := false
	for _, line := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break // the first table is the vocabulary
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if !inTable { // the header
			inTable = true
			continue
		}
		if strings.HasPrefix(cells[0], "---") {
			continue
		}
		if len(cells) != 5 {
			return nil, errors.New("row with " + strings.Join(cells, "|") + ": want 5 cells")
		}
		row := FactKeyInfo{Key: strings.Trim(cells[0], "`"), List: cells[1] == "yes", Core: cells[2] == "yes", Doc: cells[4]}
		for _, flag := range cells[1:3] {
			if flag != "yes" && flag != "no" {
				return nil, errors.New(row.Key + ": flag " + flag + " is not yes or no")
			}
		}
		if cells[3] != "" {
			for _, a := range strings.Split(cells[3], ",") {
				row.Aliases = append(row.Aliases, strings.Trim(strings.TrimSpace(a), "`"))
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func TestListArray(t *testing.T) {
	for _, tt := range []struct {
		value           string
		strs            []string
		bracketed, isOK bool
	}{
		{`["climbing","go"]`, []string{"climbing", "go"}, true, true},
		{` [ "a" ] `, []string{"a"}, true, true},
		{`[]`, []string{}, true, true},
		{`[climbing, go]`, nil, true, false},
		{`["a", 3]`, nil, true, false},
		{`climbing, go`, nil, false, false},
		{`[a] b`, nil, false, false},
	} {
		strs, bracketed, ok := ListArray(tt.value)
		if len(strs) != len(tt.strs) || bracketed != tt.bracketed || ok != tt.isOK {
			t.Errorf("ListArray(%q) = %q, %v, %v; want %q, %v, %v", tt.value, strs, bracketed, ok, tt.strs, tt.bracketed, tt.isOK)
			continue
		}
		for i := range strs {
			if strs[i] != tt.strs[i] {
				t.Errorf("ListArray(%q) = %q, want %q", tt.value, strs, tt.strs)
			}
		}
	}
}
