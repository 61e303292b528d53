package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/memoryd/memoryd/events"
)

// kuValue is the value a LongMemEval knowledge-update question expects in
// the short form a fact would hold, and the value it superseded, both read
// off the question's two evidence turns (the dataset gives only the answer
// sentence, and no old value).
type kuValue struct{ latest, old string }

// kuValues annotates the dev set's knowledge-update questions (the one
// abstention question, 031748ae_abs, is skipped like every abstention
// question). A question missing here is matched on its answer alone, and
// its stale value is not checked.
var kuValues = map[string]kuValue{
	"07741c45": {"shoe rack", "under my bed"}, // where the old sneakers are kept
	"b6019101": {"5", "4"},                    // MCU films watched in 3 months
	"6071bd76": {"5 ounces", "6 ounces"},      // water per tablespoon of coffee
	"a2f3aa27": {"1300", "1250"},              // Instagram followers
	"c6853660": {"two cups", "one cup"},       // morning coffee limit
	"b01defab": {"finished", "put down"},      // The Nightingale
	"0f05491a": {"120", "125"},                // stars to Starbucks gold
	"6aeb4375": {"four", "three"},             // Korean restaurants tried
	"06db6396": {"5", "4"},                    // painting projects completed
}

// numberWords maps number words to digits, so that "four" matches "4".
var numberWords = map[string]string{
	"zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
	"eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "fifth": "5", "fourth": "4",
}

// normalize lowercases s, makes every run of characters other than letters
// and digits one space, spells numbers as digits and drops thousands
// separators ("1,300" is "1300").
func normalize(s string) string {
	s = strings.ToLower(s)
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		case r == ',' && i > 0 && i+1 < len(rs) && unicode.IsDigit(rs[i-1]) && unicode.IsDigit(rs[i+1]):
			// a thousands separator
		default:
			b.WriteByte(' ')
		}
	}
	words := strings.Fields(b.String())
	for i, w := range words {
		if d, ok := numberWords[w]; ok {
			words[i] = d
		}
		if t := strings.TrimSuffix(w, "th"); t != w && t != "" && strings.Trim(t, "0123456789") == "" {
			words[i] = t // "5th" is "5"
		}
	}
	return strings.Join(words, " ")
}

// holds reports whether value holds want: the normalised value equals it,
// or holds its normalised words as a whole-word run. An empty want holds
// nowhere.
func holds(value, want string) bool {
	v, w := normalize(value), normalize(want)
	if w == "" {
		return false
	}
	return v == w || strings.Contains(" "+v+" ", " "+w+" ")
}

// kuRow is one knowledge-update question's outcome.
type kuRow struct {
	id, answer, latest, old string
	stored                  string   // key=value of a fact holding the latest value; "" when none
	stale                   string   // key=value of a fact holding the superseded value; "" when none
	held                    []string // keys of the facts the user holds
	injectedFact            bool     // the enrich injected a fact holding the latest value
	// latestTurn and olderTurn are the 1-based positions among the
	// injected items of the first turn stating the latest value and of the
	// first stating the superseded one; 0 when not injected.
	latestTurn, olderTurn int
}

// knowledgeUpdates checks, for each knowledge-update question of the
// LongMemEval set, whether a current fact holds the expected latest value
// (its answer, or the annotated short form) and one the superseded value,
// and what an enrich for the question with memoryd's defaults (relevant
// facts, 3 items, threshold 0.3, 2000 tokens) injects: a fact holding the
// latest value, the turn stating it, the turn stating the older one.
func knowledgeUpdates(ctx context.Context, in *instance, s dataset) ([]kuRow, error) {
	var out []kuRow
	for _, h := range s.haystacks {
		for _, q := range h.questions {
			if q.category != "knowledge-update" {
				continue
			}
			v := kuValues[q.id]
			row := kuRow{id: q.id, answer: q.answer, latest: v.latest, old: v.old}
			facts, err := in.client.ListFacts(ctx, in.userID(h))
			if err != nil {
				return nil, fmt.Errorf("facts.list for %s: %w", h.name, err)
			}
			for _, f := range facts {
				row.held = append(row.held, f.Key)
				if row.stored == "" && (holds(f.Value, q.answer) || holds(f.Value, v.latest)) {
					row.stored = f.Key + "=" + f.Value
				}
				if row.stale == "" && holds(f.Value, v.old) {
					row.stale = f.Key + "=" + f.Value
				}
			}
			r, err := in.enrich(ctx, h, q, events.FactsRelevant, defaultShape())
			if err != nil {
				return nil, fmt.Errorf("enrich %s: %w", q.id, err)
			}
			for _, f := range r.Facts {
				if holds(f.Value, q.answer) || holds(f.Value, v.latest) {
					row.injectedFact = true
				}
			}
			for i, it := range r.Context {
				if row.latestTurn == 0 && q.latest[it.EventID] {
					row.latestTurn = i + 1
				}
				if row.olderTurn == 0 && q.older[it.EventID] {
					row.olderTurn = i + 1
				}
			}
			out = append(out, row)
		}
	}
	return out, nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// position is a 1-based position, or "no" for 0.
func position(i int) string {
	if i == 0 {
		return "no"
	}
	return fmt.Sprintf("yes (item %d)", i)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// reportKnowledgeUpdates prints one row per knowledge-update question and
// the totals.
func reportKnowledgeUpdates(w io.Writer, rows []kuRow) {
	fmt.Fprintf(w, "\nlongmemeval-s-dev knowledge-update: the expected latest value as a current fact (before any fact load), and what enrich with memoryd's defaults injects for the question\n\n")
	fmt.Fprintf(w, "| question | expected (answer) | latest / superseded value | facts held | fact holding the latest value | stale: fact holding the superseded value | fact injected | latest turn injected | superseded turn injected |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|\n")
	var stored, stale, injFact, latest, older, both, latestFirst int
	for _, r := range rows {
		lo := "-"
		if r.latest != "" {
			lo = r.latest + " / " + r.old
		}
		staleCell := orDash(r.stale)
		if r.old == "" {
			staleCell = "? (not annotated)"
		}
		held := fmt.Sprint(len(r.held))
		if len(r.held) > 0 {
			held += " (" + strings.Join(r.held, ", ") + ")"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.id, clip(r.answer, 40), lo, held,
			orDash(r.stored), staleCell, yesNo(r.injectedFact), position(r.latestTurn), position(r.olderTurn))
		if r.stored != "" {
			stored++
		}
		if r.stale != "" {
			stale++
		}
		if r.injectedFact {
			injFact++
		}
		if r.latestTurn > 0 {
			latest++
		}
		if r.olderTurn > 0 {
			older++
		}
		if r.latestTurn > 0 && r.olderTurn > 0 {
			both++
			if r.latestTurn < r.olderTurn {
				latestFirst++
			}
		}
	}
	n := len(rows)
	fmt.Fprintf(w, "\nknowledge-update totals over %d questions: latest value stored as a current fact %d/%d (superseded value still a fact: %d); injected as a fact %d/%d; turn stating the latest value injected %d/%d, the superseded one %d/%d; both injected %d, the latest above the superseded in %d of them\n",
		n, stored, n, stale, injFact, n, latest, n, older, n, both, latestFirst)
}
