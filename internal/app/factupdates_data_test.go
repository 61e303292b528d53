package app

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
)

// The fact-update test set (testdata/factupdates, described in its
// README.md): scripted turns of many users with the operations a good model
// returns for each, and per user the expected final facts and in-order
// history. This file loads it and holds the reference resolver that checks
// the hand-written expectations against the fact model of issue 16.

// fuDir holds one JSON file per user.
const fuDir = "testdata/factupdates"

// fuListKeys are the list-valued keys the set uses; every other key it uses
// is single-valued. The vocabulary (events.CanonicalFactKey) must agree
// (TestFactUpdatesVocabulary).
var fuListKeys = map[string]bool{"allergies": true, "languages": true, "pets": true, "children": true}

// fuKeys are the canonical keys the set may use.
var fuKeys = []string{"name", "location", "occupation", "employer", "diet", "allergies", "languages", "pets",
	"children", "car", "birthday", "birth_year", "partner"}

// fuTags are the situations the set must cover, each at least twice.
var fuTags = []string{"set", "correction", "negation", "list_add", "list_remove", "list_set", "list_delete",
	"third_party", "hypothetical", "repeat", "tie", "late", "chitchat"}

type fuUser struct {
	User string `json:"user"`
	// Rules marks a user whose every turn the rules extractor reads exactly
	// as the scripted model reply says, so that the same expectations hold
	// under either extractor.
	Rules  bool     `json:"rules"`
	Turns  []fuTurn `json:"turns"`
	Expect fuExpect `json:"expect"`
	// ExpectRules is, for a user with some turns marked Rules, the facts
	// those turns alone leave (history is not checked for the rules).
	ExpectRules *fuExpect `json:"expect_rules"`
}

type fuTurn struct {
	ID           string    `json:"id"`
	Conversation string    `json:"conversation"`
	Timestamp    time.Time `json:"timestamp"`
	Tags         []string  `json:"tags"`
	// Rules marks a turn the rules extractor reads to the same effect as
	// the scripted reply.
	Rules             bool    `json:"rules"`
	UserMessage       string  `json:"user_message"`
	AssistantResponse string  `json:"assistant_response"`
	Reply             fuReply `json:"reply"`
}

// fuReply is a model reply in format v2; Turn is set only in a batch reply.
type fuReply struct {
	Facts   []fuItem `json:"facts"`
	Context []fuQA   `json:"context"`
}

type fuItem struct {
	Turn  int    `json:"turn,omitempty"`
	Op    string `json:"op"`
	Key   string `json:"key"`
	Value string `json:"value"`
}

type fuQA struct {
	Q string `json:"q"`
	A string `json:"a"`
}

type fuExpect struct {
	// Facts is key → value; a list's items joined by ", " in the order of
	// their identities.
	Facts map[string]string `json:"facts"`
	// History is key → "op event-id" per change of the key's value, when
	// the turns are processed one at a time in file order.
	History map[string][]string `json:"history"`
}

func (u fuUser) event(id string) (fuTurn, bool) {
	for _, t := range u.Turns {
		if t.ID == id {
			return t, true
		}
	}
	return fuTurn{}, false
}

// loadFactUpdates reads every user of the set, sorted by user.
func loadFactUpdates(t testing.TB) []fuUser {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(fuDir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fact update files in %s: %v", fuDir, err)
	}
	var users []fuUser
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var u fuUser
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&u); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		users = append(users, u)
	}
	slices.SortFunc(users, func(a, b fuUser) int { return cmp.Compare(a.User, b.User) })
	return users
}

// rulesView is what the rules extractor is run on for u: all its turns for
// a rules user, else its marked turns with ExpectRules; ok is false when
// none is marked.
func (u fuUser) rulesView() (view fuUser, ok bool) {
	if u.Rules {
		return u, true
	}
	view = fuUser{User: u.User}
	for _, t := range u.Turns {
		if t.Rules {
			view.Turns = append(view.Turns, t)
		}
	}
	if len(view.Turns) == 0 || u.ExpectRules == nil {
		return fuUser{}, false
	}
	view.Expect = *u.ExpectRules
	return view, true
}

// turnEvent is the wire event of a scripted turn.
func (u fuUser) turnEvent(t fuTurn) events.Turn {
	return events.Turn{ID: t.ID, UserID: u.User, ConversationID: t.Conversation, UserMessage: t.UserMessage,
		AssistantResponse: t.AssistantResponse, Timestamp: t.Timestamp}
}

// itemID is a list item's identity: lowercased, white space collapsed.
func itemID(v string) string { return strings.Join(strings.Fields(strings.ToLower(v)), " ") }

// splitItems splits a list value into its items.
func splitItems(v string) []string {
	var out []string
	for _, it := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ';' }) {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}

// refWrite is one store write a scripted item makes (the worker splits a
// list set into one set per item).
type refWrite struct {
	op, key, value, event string
	at                    time.Time
}

// refFact is a key's resolved value and the event that stated it (for a
// list, of its newest present item).
type refFact struct {
	value, event string
	at           time.Time
}

func later(aAt time.Time, aEv string, bAt time.Time, bEv string) bool {
	return aAt.After(bAt) || (aAt.Equal(bAt) && aEv > bEv)
}

func turnWrites(t fuTurn) []refWrite {
	var ws []refWrite
	for _, it := range t.Reply.Facts {
		w := refWrite{op: it.Op, key: it.Key, value: strings.TrimSpace(it.Value), event: t.ID, at: t.Timestamp}
		if fuListKeys[it.Key] && it.Op == "set" {
			for _, v := range splitItems(it.Value) {
				w.value = v
				ws = append(ws, w)
			}
			continue
		}
		ws = append(ws, w)
	}
	return ws
}

// refResolve is the fact model of issue 16 (common brief), written
// independently of the store: it resolves writes, in any order, into the
// final facts. The event id breaks a tie of source times where memoryd
// takes the turn published later: the set's tie pairs are in id order and
// every run publishes them in file order (fuKeepTieOrder).
//
//   - Single-valued key (an add is a set, a remove a delete): the latest
//     set by (source time, event id) wins, unless a delete at or after its
//     time removes it. A delete with a value removes that value only (by
//     identity): a set of it at or before the delete's time is not a value,
//     but still a delete of the key at its own time (it superseded the
//     values before it, retracted or not).
//   - List key: a delete at T clears items stated no later than T; a set at
//     T clears at T-1µs and adds its items at T. Each item is present when
//     its latest add/remove (by time, then event id) is an add after the
//     clear. Items are ordered by the add that began their presence (their
//     first statement since they were last removed), then event id, then
//     identity.
func refResolve(ws []refWrite) map[string]refFact {
	byKey := map[string][]refWrite{}
	for _, w := range ws {
		byKey[w.key] = append(byKey[w.key], w)
	}
	out := map[string]refFact{}
	for key, kws := range byKey {
		var clear time.Time
		if !fuListKeys[key] {
			// The latest delete of each value, by identity.
			gone := map[string]time.Time{}
			for _, w := range kws {
				if id := itemID(w.value); (w.op == "delete" || w.op == "remove") && id != "" && w.at.After(gone[id]) {
					gone[id] = w.at
				}
			}
			var best *refWrite
			for i, w := range kws {
				switch {
				case (w.op == "delete" || w.op == "remove") && itemID(w.value) == "":
					if w.at.After(clear) {
						clear = w.at
					}
				case w.op == "set" || w.op == "add":
					if t, ok := gone[itemID(w.value)]; ok && !t.Before(w.at) {
						if w.at.After(clear) {
							clear = w.at
						}
						continue
					}
					if best == nil || later(w.at, w.event, best.at, best.event) {
						best = &kws[i]
					}
				}
			}
			if best != nil && best.at.After(clear) {
				out[key] = refFact{value: best.value, event: best.event, at: best.at}
			}
			continue
		}
		for _, w := range kws {
			at := w.at
			if w.op == "set" {
				at = at.Add(-time.Microsecond)
			}
			if (w.op == "set" || w.op == "delete") && at.After(clear) {
				clear = at
			}
		}
		type item struct {
			id           string
			latest, last *refWrite // latest op; last add of the current presence
		}
		items := map[string]*item{}
		var ids []string
		for i, w := range kws {
			if w.op == "delete" {
				continue
			}
			id := itemID(w.value)
			it := items[id]
			if it == nil {
				it = &item{id: id}
				items[id] = it
				ids = append(ids, id)
			}
			if it.latest == nil || later(w.at, w.event, it.latest.at, it.latest.event) {
				it.latest = &kws[i]
			}
		}
		var present []*item
		for _, id := range ids {
			it := items[id]
			if it.latest.op == "remove" || !it.latest.at.After(clear) {
				continue
			}
			// The item's source is its last add after the clear and after
			// its latest remove.
			var lastRemove *refWrite
			for i, w := range kws {
				if w.op == "remove" && itemID(w.value) == id && (lastRemove == nil || later(w.at, w.event, lastRemove.at, lastRemove.event)) {
					lastRemove = &kws[i]
				}
			}
			for i, w := range kws {
				if (w.op != "add" && w.op != "set") || itemID(w.value) != id || !w.at.After(clear) {
					continue
				}
				if lastRemove != nil && !later(w.at, w.event, lastRemove.at, lastRemove.event) {
					continue
				}
				if it.last == nil || later(w.at, w.event, it.last.at, it.last.event) {
					it.last = &kws[i]
				}
			}
			present = append(present, it)
		}
		if len(present) == 0 {
			continue
		}
		// Items read in the order of their identities, each as its latest
		// operation stated it (store/factitems.go).
		slices.SortFunc(present, func(a, b *item) int { return cmp.Compare(a.id, b.id) })
		values := make([]string, len(present))
		newest := present[0].last
		for i, it := range present {
			values[i] = it.latest.value
			if later(it.last.at, it.last.event, newest.at, newest.event) {
				newest = it.last
			}
		}
		out[key] = refFact{value: strings.Join(values, ", "), event: newest.event, at: newest.at}
	}
	return out
}

// refFinal resolves all of a user's turns.
func refFinal(u fuUser) map[string]refFact {
	var ws []refWrite
	for _, t := range u.Turns {
		ws = append(ws, turnWrites(t)...)
	}
	return refResolve(ws)
}

// refHistory is the history the turns leave when processed one at a time
// in file order: an entry "op event" for each key whose value a turn
// changes, op being the turn's operation on that key.
func refHistory(u fuUser) (map[string][]string, error) {
	hist := map[string][]string{}
	var ws []refWrite
	before := map[string]refFact{}
	for _, t := range u.Turns {
		ops := map[string]string{}
		for _, it := range t.Reply.Facts {
			if prev, ok := ops[it.Key]; ok && prev != it.Op {
				return nil, fmt.Errorf("%s: two operations (%s, %s) on %s in one turn make its history entry ambiguous", t.ID, prev, it.Op, it.Key)
			}
			ops[it.Key] = it.Op
		}
		ws = append(ws, turnWrites(t)...)
		after := refResolve(ws)
		for key := range ops {
			if before[key].value != after[key].value {
				hist[key] = append(hist[key], ops[key]+" "+t.ID)
			}
		}
		before = after
	}
	return hist, nil
}

// TestFactUpdatesData checks the test set itself: its size and coverage,
// unique ids and messages, the keys it uses, and that every user's
// hand-written expectations are what the fact model gives.
func TestFactUpdatesData(t *testing.T) {
	users := loadFactUpdates(t)
	turns, rulesUsers, rulesTurns := 0, 0, 0
	ids, messages := map[string]bool{}, map[string]bool{}
	tags := map[string]int{}
	withConv, withoutConv, late := 0, 0, 0
	for _, u := range users {
		if u.Rules {
			rulesUsers++
		}
		marked := 0
		for _, tr := range u.Turns {
			if tr.Rules {
				marked++
			}
		}
		switch {
		case u.Rules && (marked > 0 || u.ExpectRules != nil):
			t.Errorf("%s: a rules user (all its turns read, to expect) must not mark turns nor have expect_rules", u.User)
		case !u.Rules && (marked > 0) != (u.ExpectRules != nil):
			t.Errorf("%s: %d turns marked rules but expect_rules %v", u.User, marked, u.ExpectRules)
		}
		if view, ok := u.rulesView(); ok {
			rulesTurns += len(view.Turns)
			got := map[string]string{}
			for k, f := range refFinal(view) {
				got[k] = f.value
			}
			if !reflect.DeepEqual(got, view.Expect.Facts) {
				t.Errorf("%s: expected rules facts %v, the fact model gives %v", u.User, view.Expect.Facts, got)
			}
		}
		var newest time.Time
		for _, tr := range u.Turns {
			turns++
			if !strings.HasPrefix(tr.ID, u.User+"-") || ids[tr.ID] {
				t.Errorf("%s: turn id %q is not unique or not prefixed by the user", u.User, tr.ID)
			}
			ids[tr.ID] = true
			// The fake model finds a turn by its message alone.
			if m := strings.Join(strings.Fields(tr.UserMessage), " "); m == "" || messages[m] {
				t.Errorf("%s: user message %q is empty or not unique", tr.ID, tr.UserMessage)
			} else {
				messages[m] = true
			}
			if tr.Timestamp.IsZero() || tr.AssistantResponse == "" {
				t.Errorf("%s: timestamp or assistant response missing", tr.ID)
			}
			if tr.Conversation == "" {
				withoutConv++
			} else {
				withConv++
			}
			if tr.Timestamp.Before(newest) {
				late++
			}
			if tr.Timestamp.After(newest) {
				newest = tr.Timestamp
			}
			for _, tag := range tr.Tags {
				if !slices.Contains(fuTags, tag) {
					t.Errorf("%s: unknown tag %q", tr.ID, tag)
				}
				tags[tag]++
			}
			for _, it := range tr.Reply.Facts {
				if !slices.Contains(fuKeys, it.Key) || !slices.Contains([]string{"set", "add", "remove", "delete"}, it.Op) {
					t.Errorf("%s: item %+v uses a key or op outside the set's vocabulary", tr.ID, it)
				}
				if (it.Op == "add" || it.Op == "remove") && !fuListKeys[it.Key] {
					t.Errorf("%s: %s on the single-valued key %s (a good model sets or deletes it)", tr.ID, it.Op, it.Key)
				}
				if it.Op != "delete" && it.Value == "" {
					t.Errorf("%s: %s of %s without a value", tr.ID, it.Op, it.Key)
				}
			}
		}
		final := refFinal(u)
		got := map[string]string{}
		for k, f := range final {
			got[k] = f.value
		}
		if !reflect.DeepEqual(got, u.Expect.Facts) {
			t.Errorf("%s: expected facts %v, the fact model gives %v", u.User, u.Expect.Facts, got)
		}
		hist, err := refHistory(u)
		if err != nil {
			t.Error(err)
		} else if !reflect.DeepEqual(hist, u.Expect.History) {
			t.Errorf("%s: expected history %v, the fact model gives %v", u.User, u.Expect.History, hist)
		}
	}
	if len(users) < 20 || turns < 200 || rulesUsers < 3 || rulesTurns < 60 {
		t.Errorf("the set has %d users, %d turns, %d rules users, %d rules turns; want at least 20, 200, 3, 60", len(users), turns, rulesUsers, rulesTurns)
	}
	if withConv < 20 || withoutConv < 20 || late < 10 {
		t.Errorf("turns with conversation %d, without %d, late %d; want at least 20, 20, 10", withConv, withoutConv, late)
	}
	for _, tag := range fuTags {
		if tags[tag] < 2 {
			t.Errorf("tag %q is used %d times; the set must cover it at least twice", tag, tags[tag])
		}
	}
	t.Logf("factupdates data: users=%d turns=%d rules_users=%d rules_turns=%d with_conversation=%d without=%d late=%d tags=%v",
		len(users), turns, rulesUsers, rulesTurns, withConv, withoutConv, late, tags)
}

// TestFactUpdatesVocabulary: the keys the set uses are canonical, and the
// vocabulary says list exactly for the set's list keys.
func TestFactUpdatesVocabulary(t *testing.T) {
	for _, key := range fuKeys {
		canonical, list := events.CanonicalFactKey(key)
		if canonical != key || list != fuListKeys[key] {
			t.Errorf("CanonicalFactKey(%q) = %q, list %v; the test set takes it as canonical, list %v", key, canonical, list, fuListKeys[key])
		}
	}
}

// TestRefResolveOrderFree: the reference resolver itself gives the same
// facts for every user whatever order the writes come in, so it can judge
// the shuffled runs.
func TestRefResolveOrderFree(t *testing.T) {
	for _, u := range loadFactUpdates(t) {
		var ws []refWrite
		for _, tr := range u.Turns {
			ws = append(ws, turnWrites(tr)...)
		}
		want := refResolve(ws)
		for i := range 20 {
			shuffled := slices.Clone(ws)
			// A deterministic permutation: rotate and reverse.
			slices.Reverse(shuffled)
			if len(shuffled) > 0 {
				k := (i * 7) % len(shuffled)
				shuffled = append(shuffled[k:], shuffled[:k]...)
			}
			if got := refResolve(shuffled); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: permutation %d gives %v, file order %v", u.User, i, got, want)
			}
		}
	}
}

// TestRefResolveValueDeletes: the reference resolver's rule for a delete
// with a value on a single-valued key, the store's (TestFactOperations):
// only that value goes, with the values before it; another value stays.
func TestRefResolveValueDeletes(t *testing.T) {
	base := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	w := func(op, value string, minutes int) refWrite {
		return refWrite{op: op, key: "location", value: value, event: fmt.Sprintf("e%d", minutes), at: base.Add(time.Duration(minutes) * time.Minute)}
	}
	for _, c := range []struct {
		name   string
		writes []refWrite
		want   string // "": no fact
	}{
		{"another value stays", []refWrite{w("set", "Munich", 5), w("delete", "Berlin", 6)}, "Munich"},
		{"the value and the older ones go", []refWrite{w("set", "Munich", 1), w("set", "Berlin", 2), w("delete", " berlin", 3)}, ""},
		{"a later value stays", []refWrite{w("set", "Berlin", 1), w("set", "Porto", 2), w("delete", "Berlin", 3)}, "Porto"},
		{"a later current value stays", []refWrite{w("set", "A", 3), w("set", "B", 2), w("delete", "B", 5)}, "A"},
		{"a delete before the value", []refWrite{w("delete", "Berlin", 1), w("set", "Berlin", 2)}, "Berlin"},
		{"a delete without a value", []refWrite{w("set", "Munich", 1), w("delete", "", 2)}, ""},
	} {
		for _, ws := range [][]refWrite{c.writes, reversedWrites(c.writes)} {
			if got := refResolve(ws)["location"].value; got != c.want {
				t.Errorf("%s: location = %q, want %q", c.name, got, c.want)
			}
		}
	}
}

func reversedWrites(ws []refWrite) []refWrite {
	out := slices.Clone(ws)
	slices.Reverse(out)
	return out
}
