package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
)

func TestPercentile(t *testing.T) {
	tests := []struct {
		name string
		xs   []int
		p    float64
		want int
	}{
		{"empty", nil, 0.5, 0},
		{"one", []int{7}, 0.5, 7},
		{"median odd", []int{5, 1, 3}, 0.5, 3},
		{"median even takes the lower middle", []int{4, 1, 3, 2}, 0.5, 2},
		{"p90 of ten", []int{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 0.9, 9},
		{"p90 of eleven", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 0.9, 10},
		{"max", []int{3, 9, 1}, 1, 9},
		{"tiny p is the min", []int{3, 9, 1}, 0.01, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]int(nil), tt.xs...)
			if got := percentile(tt.xs, tt.p); got != tt.want {
				t.Errorf("percentile(%v, %v) = %d, want %d", tt.xs, tt.p, got, tt.want)
			}
			for i := range in {
				if in[i] != tt.xs[i] {
					t.Fatalf("percentile reordered its input: %v, was %v", tt.xs, in)
				}
			}
		})
	}
}

func TestHolds(t *testing.T) {
	tests := []struct {
		value, want string
		ok          bool
	}{
		{"in a shoe rack in my closet", "shoe rack", true},
		{"Shoe-Rack", "shoe rack", true},
		{"shoe racks", "shoe rack", false}, // whole words only
		{"4", "four", true},
		{"four Korean restaurants", "4", true},
		{"1,300 followers", "1300", true},
		{"13000", "1300", false},
		{"my 5th project", "5", true},
		{"15 films", "5", false},
		{"two cups", "one cup", false},
		{"one cup a day", "One cup", true},
		{"anything", "", false},
		{"", "x", false},
	}
	for _, tt := range tests {
		if got := holds(tt.value, tt.want); got != tt.ok {
			t.Errorf("holds(%q, %q) = %v, want %v", tt.value, tt.want, got, tt.ok)
		}
	}
}

func TestSplitLatest(t *testing.T) {
	dates := []string{"2023/05/25 (Thu) 10:04", "2023/05/20 (Sat) 04:54", "2023/05/29 (Mon) 15:01", "2023/05/29 (Mon) 15:01"}
	tests := []struct {
		name          string
		ev            map[string]int
		latest, older []string
	}{
		{"by date, not by session order", map[string]int{"a": 0, "b": 1}, []string{"a"}, []string{"b"}},
		{"every turn of the latest session", map[string]int{"a": 0, "c": 2, "c2": 2}, []string{"c", "c2"}, []string{"a"}},
		{"equal dates: the later session", map[string]int{"c": 2, "d": 3}, []string{"d"}, []string{"c"}},
		{"one session", map[string]int{"a": 0}, []string{"a"}, nil},
		{"none", map[string]int{}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			latest, older := splitLatest(tt.ev, dates)
			if got := keys(latest); got != strings.Join(tt.latest, ",") {
				t.Errorf("latest = %s, want %v", got, tt.latest)
			}
			if got := keys(older); got != strings.Join(tt.older, ",") {
				t.Errorf("older = %s, want %v", got, tt.older)
			}
		})
	}
}

func keys(m map[string]bool) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

var snakeKey = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

func TestFactLoad(t *testing.T) {
	if len(factLoadKeys) != 40 {
		t.Errorf("%d keys in the fact load, the docs say 40", len(factLoadKeys))
	}
	seen := map[string]bool{}
	for _, k := range factLoadKeys {
		if !snakeKey.MatchString(k.key) || seen[k.key] {
			t.Errorf("key %q: not snake_case or repeated", k.key)
		}
		seen[k.key] = true
		if c, _ := events.CanonicalFactKey(k.key); c != k.key {
			t.Errorf("key %q is an alias of %q in the vocabulary: use a canonical key, or two keys may become one", k.key, c)
		}
		if len(k.values) < 3 {
			t.Errorf("key %q has %d values: users would look alike", k.key, len(k.values))
		}
		for _, v := range k.values {
			if strings.TrimSpace(v) == "" || strings.ContainsAny(v, "\n[]") {
				t.Errorf("key %q: implausible value %q", k.key, v)
			}
		}
	}
	// The core keys enrich always injects are part of a realistic profile.
	for _, k := range []string{"name", "location", "occupation", "native_language", "timezone", "pronouns"} {
		if !seen[k] {
			t.Errorf("fact load lacks core key %q", k)
		}
	}
	a, b := factLoad(0, 40), factLoad(1, 40)
	if len(a) != 40 || len(factLoad(0, 7)) != 7 || len(factLoad(0, 100)) != 40 {
		t.Errorf("factLoad sizes: %d, %d, %d; want 40, 7, 40", len(a), len(factLoad(0, 7)), len(factLoad(0, 100)))
	}
	same := 0
	for i := range a {
		if a[i][0] != b[i][0] {
			t.Fatalf("users get keys in different orders: %v vs %v", a[i], b[i])
		}
		if a[i][1] == b[i][1] {
			same++
		}
	}
	if same > 0 {
		t.Errorf("users 0 and 1 share %d of 40 values", same)
	}
	if c := factLoad(0, 40); c[5] != a[5] {
		t.Errorf("factLoad is not deterministic: %v then %v", a[5], c[5])
	}
}

// TestKnowledgeUpdateAnnotations checks each annotated value against the
// data: the latest value is stated in a turn of the latest evidence
// session, the superseded one in an older evidence turn, and every
// knowledge-update question but abstentions is annotated.
func TestKnowledgeUpdateAnnotations(t *testing.T) {
	path := filepath.Join(env("MEMEVAL_DATA", "/work/shared/data"), "longmemeval-s-dev.json.gz")
	var items []lmeItem
	if err := readGzipJSON(path, &items); err != nil {
		t.Skipf("no LongMemEval dev data: %v", err)
	}
	n := 0
	for _, it := range items {
		if it.QuestionType != "knowledge-update" || strings.HasSuffix(it.QuestionID, "_abs") {
			continue
		}
		n++
		v, ok := kuValues[it.QuestionID]
		if !ok {
			t.Errorf("%s: not annotated", it.QuestionID)
			continue
		}
		ev := map[string]int{}
		text := map[string]string{}
		for si, sess := range it.HaystackSessions {
			for ti, turn := range sess {
				if turn.HasAnswer {
					id := fmt.Sprintf("s%d-t%d", si, ti)
					ev[id], text[id] = si, turn.Content
				}
			}
		}
		latest, older := splitLatest(ev, it.HaystackDates)
		in := func(ids map[string]bool, value string) bool {
			for id := range ids {
				if holds(text[id], value) {
					return true
				}
			}
			return false
		}
		if !in(latest, v.latest) {
			t.Errorf("%s: latest value %q is in no turn of the latest evidence session", it.QuestionID, v.latest)
		}
		if !in(older, v.old) {
			t.Errorf("%s: superseded value %q is in no older evidence turn", it.QuestionID, v.old)
		}
	}
	if n != len(kuValues) {
		t.Errorf("%d knowledge-update questions, %d annotated", n, len(kuValues))
	}
}

// TestRunReportsFigures runs memeval on one conversation and one
// LongMemEval question against the local Postgres and NATS and checks the
// two figures' tables: with the fact load, "all" injects every fact and
// "relevant" fewer, in fewer tokens, with the same recall; the
// knowledge-update table has its row and totals.
func TestRunReportsFigures(t *testing.T) {
	data := env("MEMEVAL_DATA", "/work/shared/data")
	if _, err := os.Stat(filepath.Join(data, "longmemeval-s-dev.json.gz")); err != nil {
		t.Skipf("no dev data: %v", err)
	}
	var out, errOut strings.Builder
	if err := run(t.Context(), []string{"-limit", "1", "-data", data}, &out, &errOut); err != nil {
		t.Fatalf("memeval: %v\n%s", err, errOut.String())
	}
	type row struct {
		held, factsP50, factTokensP50, tokensP50 int
		recall                                   string
	}
	rows := map[string]row{} // set|load|facts|request
	for _, line := range strings.Split(out.String(), "\n") {
		c := strings.Split(line, "|")
		if len(c) != 16 || !strings.Contains(c[2], "facts/user") {
			continue
		}
		for i := range c {
			c[i] = strings.TrimSpace(c[i])
		}
		load := "extracted"
		if strings.HasPrefix(c[2], "extracted + 40 set") {
			load = "loaded"
		}
		var r row
		if _, err := fmt.Sscanf(c[2][strings.Index(c[2], "facts/user p50 "):], "facts/user p50 %d,", &r.held); err != nil {
			t.Fatalf("fact load column %q: %v", c[2], err)
		}
		if _, err := fmt.Sscanf(c[6], "%d /", &r.factsP50); err != nil {
			t.Fatalf("facts column %q: %v", c[6], err)
		}
		if _, err := fmt.Sscanf(c[7], "%d /", &r.factTokensP50); err != nil {
			t.Fatalf("fact tokens column %q: %v", c[7], err)
		}
		if _, err := fmt.Sscanf(c[8], "%d", &r.tokensP50); err != nil {
			t.Fatalf("tokens column %q: %v", c[8], err)
		}
		r.recall = strings.Join(c[11:15], "|")
		rows[c[1]+"|"+load+"|"+c[3]+"|"+strings.Fields(c[4])[0]] = r
	}
	if len(rows) != 16 {
		t.Fatalf("%d token rows, want 16 (2 sets × 2 loads × 2 selections × 2 requests):\n%s", len(rows), out.String())
	}
	for _, set := range []string{"locomo-dev", "longmemeval-s-dev"} {
		for _, req := range []string{"eval", "default"} {
			rel, all := rows[set+"|loaded|relevant|"+req], rows[set+"|loaded|all|"+req]
			if all.held < 40 || all.factsP50 != min(all.held, enricher.DefaultMaxFacts) {
				t.Errorf("%s, %s request, 40 facts set: the user holds %d facts, all injects %d; want at least 40 held, all of them injected", set, req, all.held, all.factsP50)
			}
			if rel.factsP50 >= all.factsP50 || rel.factTokensP50 >= all.factTokensP50 || rel.factTokensP50 == 0 {
				t.Errorf("%s, %s request, 40 facts set: relevant injects %d facts in %d tokens, all %d in %d; want relevant fewer facts and tokens than all, and not none",
					set, req, rel.factsP50, rel.factTokensP50, all.factsP50, all.factTokensP50)
			}
			if req == "eval" && rel.tokensP50 >= all.tokensP50 {
				t.Errorf("%s, eval request, 40 facts set: relevant injects %d tokens, all %d; want fewer", set, rel.tokensP50, all.tokensP50)
			}
			if req == "eval" && rel.recall != all.recall {
				t.Errorf("%s, eval request: recall %s with relevant facts, %s with all; facts cannot change what is ranked", set, rel.recall, all.recall)
			}
		}
	}
	if !strings.Contains(out.String(), "| 07741c45 | in a shoe rack in my closet | shoe rack / under my bed |") ||
		!strings.Contains(out.String(), "knowledge-update totals over 1 questions:") {
		t.Errorf("knowledge-update table missing its row or totals:\n%s", out.String())
	}
}

func TestFactBlockTokens(t *testing.T) {
	tests := []struct {
		injection string
		want      int
	}{
		{"", 0},
		{"[context: User: hi]", 0},
		{"[facts: a=b]", 3}, // 12 runes
		{"[facts: name=Zoë]\n[context: User: a long question]", 5}, // 17 runes of the first line
		{"[facts: k=v, x=yz]", 5},                                  // 18 runes, rounded up
	}
	for _, tt := range tests {
		if got := factBlockTokens(tt.injection); got != tt.want {
			t.Errorf("factBlockTokens(%q) = %d, want %d", tt.injection, got, tt.want)
		}
	}
}
