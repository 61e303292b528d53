package store_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// Writes for the fact operation tests: at is minutes after t0, the event
// id names the turn. allergies and pets are list keys, city and car single.
func at(minutes int) time.Time { return t0.Add(time.Duration(minutes) * time.Minute) }

func opWrite(op store.FactOp, list bool, key, value string, minutes int, event string) store.FactWrite {
	return store.FactWrite{UserID: "alice", Key: key, Value: value, SourceAt: at(minutes), EventID: event,
		ConversationID: "c-" + event, Op: op, List: list, Provenance: store.Provenance{Extractor: "rules"}}
}

func add(key, value string, minutes int, event string) store.FactWrite {
	return opWrite(store.FactAdd, true, key, value, minutes, event)
}

func remove(key, value string, minutes int, event string) store.FactWrite {
	return opWrite(store.FactRemove, true, key, value, minutes, event)
}

func setItem(key, value string, minutes int, event string) store.FactWrite {
	return opWrite(store.FactSet, true, key, value, minutes, event)
}

func del(key string, list bool, minutes int, event string) store.FactWrite {
	return opWrite(store.FactDelete, list, key, "", minutes, event)
}

// delValue is a delete of one value of a single-valued key ("I don't live
// in Berlin anymore").
func delValue(key, value string, minutes int, event string) store.FactWrite {
	return opWrite(store.FactDelete, false, key, value, minutes, event)
}

func set(key, value string, minutes int, event string) store.FactWrite {
	return opWrite(store.FactSet, false, key, value, minutes, event)
}

// forUser returns writes as the user's.
func forUser(user string, writes []store.FactWrite) []store.FactWrite {
	out := slices.Clone(writes)
	for i := range out {
		out[i].UserID = user
	}
	return out
}

// factRows renders a user's facts rows (key, value, source time, event id),
// sorted by key: what two orders of the same writes must agree on byte for
// byte.
func factRows(t *testing.T, ctx context.Context, s *store.Store, user string) string {
	t.Helper()
	facts, err := s.Facts(ctx, user, 0)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(facts, func(a, b store.Fact) int { return strings.Compare(a.Key, b.Key) })
	var b strings.Builder
	for _, f := range facts {
		fmt.Fprintf(&b, "%s=%q @%s %s %s\n", f.Key, f.Value, f.SourceAt.UTC().Format(time.RFC3339Nano), f.EventID, f.ConversationID)
	}
	return b.String()
}

func values(t *testing.T, ctx context.Context, s *store.Store, user string) map[string]string {
	t.Helper()
	facts, err := s.Facts(ctx, user, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, f := range facts {
		m[f.Key] = f.Value
	}
	return m
}

// TestFactOperations: each case's writes, one call per step, give the
// expected facts, and so do the steps in reverse order and all in one call:
// the result depends on the writes, not on their order.
func TestFactOperations(t *testing.T) {
	ctx, s := setup(t)
	for _, tc := range []struct {
		name  string
		steps [][]store.FactWrite
		want  map[string]string
	}{
		{"also allergic keeps both", [][]store.FactWrite{
			{add("allergies", "peanuts", 1, "e1")},
			{add("allergies", "shellfish", 2, "e2")},
		}, map[string]string{"allergies": "peanuts, shellfish"}},
		{"remove one item", [][]store.FactWrite{
			{add("allergies", "peanuts", 1, "e1")},
			{add("allergies", "shellfish", 2, "e2")},
			{remove("allergies", "Peanuts ", 3, "e3")},
		}, map[string]string{"allergies": "shellfish"}},
		{"removing the last item deletes the fact", [][]store.FactWrite{
			{add("allergies", "peanuts", 1, "e1")},
			{remove("allergies", "PEANUTS", 3, "e3")},
		}, map[string]string{}},
		{"a remove earlier than the add does not remove", [][]store.FactWrite{
			{remove("allergies", "peanuts", 1, "e1")},
			{add("allergies", "peanuts", 2, "e2")},
		}, map[string]string{"allergies": "peanuts"}},
		{"delete the key", [][]store.FactWrite{
			{add("allergies", "peanuts", 1, "e1"), add("pets", "Rex", 1, "e1")},
			{add("allergies", "shellfish", 2, "e2")},
			{del("allergies", true, 3, "e3")},
		}, map[string]string{"pets": "Rex"}},
		{"an older add after a delete stays deleted", [][]store.FactWrite{
			{add("allergies", "peanuts", 1, "e1")},
			{del("allergies", true, 3, "e3")},
			{add("allergies", "shellfish", 2, "e2")},
		}, map[string]string{}},
		{"an add at the delete's time is deleted", [][]store.FactWrite{
			{del("allergies", true, 3, "e3")},
			{add("allergies", "shellfish", 3, "e4")},
		}, map[string]string{}},
		{"a later add after a delete comes back", [][]store.FactWrite{
			{add("allergies", "peanuts", 1, "e1")},
			{del("allergies", true, 3, "e3")},
			{add("allergies", "shellfish", 4, "e4")},
		}, map[string]string{"allergies": "shellfish"}},
		{"a set of the list replaces it", [][]store.FactWrite{
			{add("allergies", "peanuts", 1, "e1")},
			{add("allergies", "shellfish", 2, "e2")},
			{setItem("allergies", "milk", 3, "e3"), setItem("allergies", "eggs", 3, "e3")},
			{add("allergies", "soy", 4, "e4")},
		}, map[string]string{"allergies": "eggs, milk, soy"}},
		{"a set's items in separate calls all stay", [][]store.FactWrite{
			{add("allergies", "peanuts", 1, "e1")},
			{setItem("allergies", "milk", 3, "e3")},
			{setItem("allergies", "eggs", 3, "e3")},
		}, map[string]string{"allergies": "eggs, milk"}},
		{"an older set does not replace", [][]store.FactWrite{
			{setItem("allergies", "milk", 3, "e3")},
			{setItem("allergies", "eggs", 1, "e1")},
		}, map[string]string{"allergies": "milk"}},
		{"same time: the larger event id wins an item", [][]store.FactWrite{
			{add("pets", "Rex", 5, "e5a")},
			{remove("pets", "rex", 5, "e5b")},
			{add("pets", "Tom", 5, "e5b")},
			{remove("pets", "tom", 5, "e5a")},
		}, map[string]string{"pets": "Tom"}},
		{"single delete then a later set", [][]store.FactWrite{
			{del("city", false, 1, "e1")},
			{set("city", "Porto", 2, "e2")},
		}, map[string]string{"city": "Porto"}},
		{"single delete after a later set", [][]store.FactWrite{
			{set("city", "Porto", 2, "e2")},
			{del("city", false, 1, "e1")},
		}, map[string]string{"city": "Porto"}},
		{"single delete then an earlier set", [][]store.FactWrite{
			{del("city", false, 2, "e2")},
			{set("city", "Porto", 1, "e1")},
		}, map[string]string{}},
		{"single delete after an earlier set", [][]store.FactWrite{
			{set("city", "Porto", 1, "e1")},
			{del("city", false, 2, "e2")},
		}, map[string]string{}},
		{"single delete at the set's time", [][]store.FactWrite{
			{set("city", "Porto", 2, "e2")},
			{del("city", false, 2, "e1")},
		}, map[string]string{}},
		{"single-valued add is a set, remove a delete", [][]store.FactWrite{
			{opWrite(store.FactAdd, false, "car", "Golf", 1, "e1"), set("city", "Porto", 1, "e1")},
			{opWrite(store.FactRemove, false, "city", "Porto", 2, "e2")},
		}, map[string]string{"car": "Golf"}},
		{"a value delete keeps another current value", [][]store.FactWrite{
			{set("city", "Munich", 5, "e5")},
			{delValue("city", "Berlin", 6, "e6")},
		}, map[string]string{"city": "Munich"}},
		{"a value delete deletes that value and the older ones", [][]store.FactWrite{
			{set("city", "Munich", 1, "e1")},
			{set("city", "Berlin", 2, "e2")},
			{delValue("city", " berlin ", 3, "e3")},
		}, map[string]string{}},
		{"a value delete leaves a later value", [][]store.FactWrite{
			{set("city", "Berlin", 1, "e1")},
			{set("city", "Porto", 2, "e2")},
			{delValue("city", "Berlin", 3, "e3")},
		}, map[string]string{"city": "Porto"}},
		{"a deleted value still superseded the older ones", [][]store.FactWrite{
			{set("city", "Lisbon", 3, "e3")},
			{set("city", "Berlin", 2, "e2")},
			{delValue("city", "Berlin", 5, "e5")},
		}, map[string]string{"city": "Lisbon"}},
		{"a deleted value's older values stay gone", [][]store.FactWrite{
			{set("city", "Munich", 1, "e1")},
			{delValue("city", "Berlin", 3, "e3")},
			{set("city", "Berlin", 2, "e2")},
		}, map[string]string{}},
		{"a value delete before the value does not delete it", [][]store.FactWrite{
			{delValue("city", "Berlin", 1, "e1")},
			{set("city", "Berlin", 2, "e2")},
		}, map[string]string{"city": "Berlin"}},
		{"a blank value delete clears the key", [][]store.FactWrite{
			{set("city", "Munich", 1, "e1")},
			{delValue("city", "  ", 2, "e2")},
		}, map[string]string{}},
		{"a single-valued remove deletes that value only", [][]store.FactWrite{
			{set("city", "Munich", 1, "e1")},
			{opWrite(store.FactRemove, false, "city", "Berlin", 2, "e2")},
		}, map[string]string{"city": "Munich"}},
		{"single ties: the larger event id, then value", [][]store.FactWrite{
			{set("city", "Porto", 2, "e2a")},
			{set("city", "Lisbon", 2, "e2b")},
			{set("car", "Golf", 2, "e2")},
			{set("car", "Audi", 2, "e2")},
		}, map[string]string{"city": "Lisbon", "car": "Golf"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var all []store.FactWrite
			for _, step := range tc.steps {
				all = append(all, step...)
			}
			variants := map[string][][]store.FactWrite{
				"forward":  tc.steps,
				"reversed": reversed(tc.steps),
				"one call": {all},
			}
			var rows []string
			for _, name := range []string{"forward", "reversed", "one call"} {
				user := tc.name + "/" + name
				for _, step := range variants[name] {
					if _, err := s.UpsertFacts(ctx, forUser(user, step)); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
				}
				if got := values(t, ctx, s, user); !maps.Equal(got, tc.want) {
					t.Errorf("%s: facts = %q, want %q", name, got, tc.want)
				}
				rows = append(rows, factRows(t, ctx, s, user))
			}
			if rows[0] != rows[1] || rows[0] != rows[2] {
				t.Errorf("orders disagree:\nforward:\n%sreversed:\n%sone call:\n%s", rows[0], rows[1], rows[2])
			}
		})
	}
}

func reversed[T any](s []T) []T {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// permutationWrites mixes every operation on list and single-valued keys,
// with ties of source time (broken by event id, by a direct write, by
// value), clears covering writes at their own time, and sets of a list.
func permutationWrites() []store.FactWrite {
	direct := set("job", "teacher", 2, "")
	direct.Extractor = "direct"
	writes := []store.FactWrite{
		add("allergies", "peanuts", 1, "e1"),
		add("allergies", "shellfish", 2, "e2"),
		remove("allergies", "peanuts", 3, "e3"),
		setItem("allergies", "milk", 4, "e4"),
		setItem("allergies", "Eggs", 4, "e4"),
		add("allergies", "Peanuts", 5, "e5"),
		add("pets", "Rex", 1, "e1"),
		add("pets", "Tom", 1, "e1"),
		remove("pets", "rex", 2, "e2a"),
		add("pets", "rex", 2, "e2b"),
		del("pets", true, 3, "e3"),
		add("pets", "Kiwi", 3, "e3b"),
		add("pets", "Luna", 4, "e4"),
		remove("pets", "luna", 4, "e4"),
		add("pets", "Max", 4, "e4"),
		add("languages", "english", 1, "e1"),
		setItem("languages", "Portuguese", 2, "e2"),
		setItem("languages", "English", 2, "e2"),
		add("languages", "french", 2, "e1"),
		set("city", "Berlin", 1, "e1"),
		del("city", false, 2, "e2"),
		set("city", "Porto", 3, "e3"),
		set("city", "Lisbon", 3, "e3b"),
		set("city", "Madrid", 3, "e3b"),
		set("car", "Golf", 1, "e1"),
		del("car", false, 2, "e2"),
		set("car", "Audi", 2, "e2x"),
		set("job", "nurse", 2, "e9"),
		direct,
		// Value deletes of single-valued keys: the deleted value and every
		// value before it go (home), another current value stays (team),
		// and so does a value later than the deleted one (school).
		set("home", "Munich", 1, "e1"),
		set("home", "Berlin", 2, "e2"),
		delValue("home", "berlin", 3, "e3"),
		set("school", "Berlin", 1, "e1"),
		set("school", "Porto", 2, "e2"),
		delValue("school", "Berlin", 3, "e3"),
		set("team", "A", 3, "e3"),
		set("team", "B", 2, "e2"),
		delValue("team", "B", 5, "e5"),
	}
	bob := forUser("bob", []store.FactWrite{
		add("allergies", "nuts", 1, "e1"),
		del("allergies", true, 1, "e1"),
		add("allergies", "dust", 2, "e2"),
		set("city", "Oslo", 1, "e1"),
	})
	return append(writes, bob...)
}

// TestFactWritesConvergeInAnyOrder: the same writes applied in many random
// orders, split at random into calls, give byte-identical facts rows.
func TestFactWritesConvergeInAnyOrder(t *testing.T) {
	ctx, s := setup(t)
	checkConvergence(t, ctx, s, permutationWrites(), rand.New(rand.NewPCG(16, 1)), 40)
	// What the writes mean, so that a rule broken the same way in every
	// order still fails.
	wantValues := map[string]string{"allergies": "Eggs, milk, Peanuts", "pets": "Luna, Max", "languages": "English, french, Portuguese",
		"city": "Madrid", "job": "teacher", "school": "Porto", "team": "A"}
	if got := values(t, ctx, s, "ref/alice"); !maps.Equal(got, wantValues) {
		t.Fatalf("facts = %q, want %q", got, wantValues)
	}
	if got := values(t, ctx, s, "ref/bob"); !maps.Equal(got, map[string]string{"allergies": "dust", "city": "Oslo"}) {
		t.Fatalf("bob's facts = %q", got)
	}
}

// checkConvergence applies writes one call each, in their order, to users
// prefixed "ref/", then in rounds random orders split at random into calls
// (each round its own prefix), and fails unless every round leaves facts
// rows byte-identical to the reference's.
func checkConvergence(t *testing.T, ctx context.Context, s *store.Store, writes []store.FactWrite, rng *rand.Rand, rounds int) {
	t.Helper()
	apply := func(prefix string, calls [][]store.FactWrite) string {
		t.Helper()
		for _, call := range calls {
			if _, err := s.UpsertFacts(ctx, forUserPrefix(prefix, call)); err != nil {
				t.Fatal(err)
			}
		}
		return factRows(t, ctx, s, prefix+"alice") + "bob:\n" + factRows(t, ctx, s, prefix+"bob")
	}
	one := make([][]store.FactWrite, len(writes))
	for i, w := range writes {
		one[i] = []store.FactWrite{w}
	}
	want := apply("ref/", one)
	for round := range rounds {
		perm := slices.Clone(writes)
		rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		var calls [][]store.FactWrite
		for len(perm) > 0 {
			n := 1 + rng.IntN(min(len(perm), 8))
			calls, perm = append(calls, perm[:n]), perm[n:]
		}
		if got := apply(fmt.Sprintf("p%d/", round), calls); got != want {
			t.Fatalf("round %d (%d calls): facts\n%s\nwant\n%s", round, len(calls), got, want)
		}
	}
}

// forUserPrefix returns writes with prefix before each write's user.
func forUserPrefix(prefix string, writes []store.FactWrite) []store.FactWrite {
	out := slices.Clone(writes)
	for i := range out {
		out[i].UserID = prefix + out[i].UserID
	}
	return out
}

// TestListHistoryRecordsOperations: a list key's history says add, remove,
// delete and set, each with the turn, conversation and time of the write
// that caused it; an extracted delete of a single-valued key says delete
// (of one value: from the delete's turn; of the values a retracted value
// had superseded: from that value's turn), facts.clear says clear.
func TestListHistoryRecordsOperations(t *testing.T) {
	ctx, s := setup(t)
	for _, step := range [][]store.FactWrite{
		{add("allergies", "peanuts", 1, "e1")},
		{add("allergies", "shellfish", 2, "e2")},
		{remove("allergies", "peanuts", 3, "e3")},
		{del("allergies", true, 4, "e4")},
		{setItem("allergies", "milk", 5, "e5"), setItem("allergies", "eggs", 5, "e5")},
		{add("allergies", "soy", 6, "e6"), remove("allergies", "milk", 6, "e6")},
		{remove("allergies", "eggs", 7, "e7"), remove("allergies", "soy", 7, "e7")},
		{set("city", "Porto", 1, "e1")},
		{del("city", false, 2, "e2")},
		{set("home", "Munich", 1, "e1")},
		{set("home", "Berlin", 2, "e2")},
		{delValue("home", "berlin", 3, "e3")},
		{set("work", "Acme", 1, "e1")},
		{delValue("work", "Initech", 3, "e3")},
		{set("work", "Initech", 2, "e2")},
	} {
		if _, err := s.UpsertFacts(ctx, step); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.SetFact(ctx, "alice", "car", "Golf"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteFact(ctx, "alice", "car"); err != nil {
		t.Fatal(err)
	}
	type entry struct {
		key, op  string
		old, new *string
		event    string
		minutes  int // source time; -1: none
	}
	wants := []entry{
		{"allergies", store.FactOpAdd, nil, str("peanuts"), "e1", 1},
		{"allergies", store.FactOpAdd, str("peanuts"), str("peanuts, shellfish"), "e2", 2},
		{"allergies", store.FactOpRemove, str("peanuts, shellfish"), str("shellfish"), "e3", 3},
		{"allergies", store.FactOpDelete, str("shellfish"), nil, "e4", 4},
		{"allergies", store.FactOpSet, nil, str("eggs, milk"), "e5", 5},
		{"allergies", store.FactOpAdd, str("eggs, milk"), str("eggs, soy"), "e6", 6}, // a mix: the latest write's op (of a tie, the first)
		{"allergies", store.FactOpRemove, str("eggs, soy"), nil, "e7", 7},
		{"city", store.FactOpSet, nil, str("Porto"), "e1", 1},
		{"city", store.FactOpDelete, str("Porto"), nil, "e2", 2},
		{"home", store.FactOpSet, nil, str("Munich"), "e1", 1},
		{"home", store.FactOpSet, str("Munich"), str("Berlin"), "e2", 2},
		{"home", store.FactOpDelete, str("Berlin"), nil, "e3", 3},
		{"work", store.FactOpSet, nil, str("Acme"), "e1", 1},
		// Initech, retracted at 3, was still stated at 2: Acme went then.
		{"work", store.FactOpDelete, str("Acme"), nil, "e2", 2},
		{"car", store.FactOpSet, nil, str("Golf"), "", -2},
		{"car", store.FactOpClear, str("Golf"), nil, "", -1},
	}
	got, err := s.FactHistory(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(wants) {
		t.Fatalf("%d history entries, want %d: %+v", len(got), len(wants), got)
	}
	for i, w := range wants {
		c := got[i]
		ok := c.Key == w.key && c.Op == w.op && sameValue(c.OldValue, w.old) && sameValue(c.NewValue, w.new) && c.EventID == w.event
		switch {
		case w.minutes >= 0:
			ok = ok && c.SourceAt != nil && c.SourceAt.Equal(at(w.minutes)) && c.ConversationID == "c-"+w.event
		case w.minutes == -1:
			ok = ok && c.SourceAt == nil
		}
		if !ok {
			t.Errorf("entry %d = %+v (source %v), want %+v", i, c, c.SourceAt, w)
		}
	}
}

// TestSetFactValues: a direct write of a whole list replaces the items
// stated before it, keeps an item from a turn stamped later, wins a tie
// with an extracted write, and says when a later turn's operation keeps a
// value out.
func TestSetFactValues(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{add("allergies", "peanuts", 1, "e1")}); err != nil {
		t.Fatal(err)
	}
	f, stored, err := s.SetFactValues(ctx, "alice", "allergies", []string{"Shellfish", " milk ", "shellfish"})
	if err != nil || !stored || f.Value != "milk, Shellfish" || f.EventID != "" || f.SourceAt.IsZero() {
		t.Fatalf("set values = %+v, %v, %v; want milk, Shellfish stored", f, stored, err)
	}
	now := f.SourceAt
	// An extracted remove at the very same time loses to the direct write;
	// a later turn's add and remove apply on top.
	later := now.Add(time.Minute)
	tie := remove("allergies", "milk", 0, "zzz")
	tie.SourceAt = now
	addLater, removeLater := add("allergies", "soy", 0, "e9"), remove("allergies", "shellfish", 0, "e9")
	addLater.SourceAt, removeLater.SourceAt = later, later
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{tie, addLater, removeLater}); err != nil {
		t.Fatal(err)
	}
	if got := values(t, ctx, s, "alice")["allergies"]; got != "milk, soy" {
		t.Fatalf("allergies = %q, want milk, soy", got)
	}
	// A direct write now cannot bring back what the later turn removed,
	// and says so; the later turn's item stays.
	f, stored, err = s.SetFactValues(ctx, "alice", "allergies", []string{"shellfish", "eggs"})
	if err != nil || stored || f.Value != "eggs, soy" {
		t.Fatalf("set values under a later turn = %+v, %v, %v; want eggs, soy and not stored", f, stored, err)
	}
	if _, _, err := s.SetFactValues(ctx, "alice", "allergies", []string{" ", ""}); err == nil {
		t.Fatal("a list of no item was accepted")
	}
	// facts.clear of a list key clears its items: an earlier item arriving
	// afterwards stays out, a later one comes back alone.
	if n, err := s.DeleteFact(ctx, "alice", "allergies"); err != nil || n != 1 {
		t.Fatalf("clear = %d, %v", n, err)
	}
	var items int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM fact_items WHERE user_id = 'alice'`).Scan(&items); err != nil || items != 0 {
		t.Fatalf("%d items after a clear (%v), want 0", items, err)
	}
	early, late := add("allergies", "dust", 0, "e10"), add("allergies", "pollen", 0, "e11")
	early.SourceAt, late.SourceAt = later, later.Add(time.Hour)
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{early, late}); err != nil {
		t.Fatal(err)
	}
	if got := values(t, ctx, s, "alice")["allergies"]; got != "pollen" {
		t.Fatalf("allergies after a clear = %q, want pollen", got)
	}
}

// TestForgetAndResetCoverListItems: a forget deletes every list item of the
// user and no other user's; a reset deletes the extracted items and keeps
// the direct ones, whose key's fact is rebuilt from them.
func TestForgetAndResetCoverListItems(t *testing.T) {
	ctx, s := setup(t)
	// The extracted items' turns are recorded: a reset deletes only what a
	// replay rebuilds.
	for _, user := range []string{"alice", "bob"} {
		if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: user, UserMessage: "hi", TurnAt: time.Now()},
			{EventID: "e2", UserID: user, UserMessage: "hi", TurnAt: time.Now()}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, user := range []string{"alice", "bob"} {
		if _, err := s.UpsertFacts(ctx, forUser(user, []store.FactWrite{add("allergies", "peanuts", 1, "e1"), remove("pets", "rex", 1, "e1")})); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.SetFactValues(ctx, user, "languages", []string{"English"}); err != nil {
			t.Fatal(err)
		}
	}
	// An extracted item later than the direct ones: the key's fact carries
	// its provenance, and a reset must not lose the direct item with it.
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "languages", Value: "French", SourceAt: time.Now().Add(time.Minute),
		EventID: "e2", Op: store.FactAdd, List: true, Provenance: store.Provenance{Extractor: "rules"}}}); err != nil {
		t.Fatal(err)
	}
	if got := values(t, ctx, s, "alice")["languages"]; got != "English, French" {
		t.Fatalf("languages = %q", got)
	}
	countItems := func(user string) int {
		t.Helper()
		var n int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM fact_items WHERE user_id = $1`, user).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, _, err := s.ResetMemory(ctx, []string{"alice"}); err != nil {
		t.Fatal(err)
	}
	if got := values(t, ctx, s, "alice"); !maps.Equal(got, map[string]string{"languages": "English"}) {
		t.Fatalf("after a reset: facts = %q, want the direct languages alone", got)
	}
	if n := countItems("alice"); n != 1 {
		t.Fatalf("after a reset: %d items, want the direct one", n)
	}
	bobBefore := factRows(t, ctx, s, "bob")
	if _, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}, store.RiverJobs{}); err != nil {
		t.Fatal(err)
	}
	if n := countItems("alice"); n != 0 {
		t.Fatalf("after a forget: %d items of alice, want 0", n)
	}
	if n := countItems("bob"); n != 3 {
		t.Fatalf("after alice's forget: %d items of bob, want 3", n)
	}
	if got := factRows(t, ctx, s, "bob"); got != bobBefore {
		t.Fatalf("bob's facts changed by alice's forget:\n%s\nwas\n%s", got, bobBefore)
	}
}

// TestListKeyAdoptsAStoredValue: a value stored under a list key before it
// had items (a single-valued write) becomes the list's items at the first
// operation instead of being dropped.
func TestListKeyAdoptsAStoredValue(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{set("allergies", "peanuts, shellfish", 1, "e1"), set("city", "Porto", 1, "e1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{add("allergies", "soy", 2, "e2"), remove("allergies", "Peanuts", 2, "e2")}); err != nil {
		t.Fatal(err)
	}
	got := values(t, ctx, s, "alice")
	want := map[string]string{"allergies": "shellfish, soy", "city": "Porto"}
	if !maps.Equal(got, want) {
		t.Fatalf("fact values = %q, want %q", got, want)
	}
}

// TestConcurrentListWritesKeepEveryItem: two transactions adding items to
// the same list key at once both count: the second waits for the first and
// materialises the list with its items.
func TestConcurrentListWritesKeepEveryItem(t *testing.T) {
	ctx, s := setup(t)
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := s.WithTx(tx).UpsertFacts(ctx, []store.FactWrite{add("allergies", "peanuts", 1, "e1")}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.UpsertFacts(ctx, []store.FactWrite{add("allergies", "shellfish", 2, "e2")})
		done <- err
	}()
	eventstest.Eventually(t, "the second writer to wait for the key", 30*time.Second, func() (bool, string) {
		var n int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted AND classid::int = hashtext('memoryd.factkey.' || current_schema())`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0, "no writer waits for the list key's lock"
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := values(t, ctx, s, "alice")["allergies"]; got != "peanuts, shellfish" {
		t.Fatalf("allergies = %q, want both items", got)
	}
}

// TestConcurrentDeleteAndOlderSet: a delete of a single-valued key and an
// older set of it, in concurrent transactions in either order, leave no
// value: the second waits for the first's key lock, then sees its row or
// its clear.
func TestConcurrentDeleteAndOlderSet(t *testing.T) {
	for _, c := range []struct {
		name          string
		first, second store.FactWrite
	}{
		{"delete first", del("car", false, 2, "e2"), set("car", "Golf", 1, "e1")},
		{"set first", set("car", "Golf", 1, "e1"), del("car", false, 2, "e2")},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, s := setup(t)
			tx, err := s.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := s.WithTx(tx).UpsertFacts(ctx, []store.FactWrite{c.first}); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := s.UpsertFacts(ctx, []store.FactWrite{c.second})
				done <- err
			}()
			eventstest.Eventually(t, "the second writer to wait for the key", 30*time.Second, func() (bool, string) {
				var n int
				err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks
					WHERE locktype = 'advisory' AND NOT granted AND classid::int = hashtext('memoryd.factkey.' || current_schema())`).Scan(&n)
				if err != nil {
					t.Fatal(err)
				}
				return n > 0, "no writer waits for the key's lock"
			})
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got, ok := values(t, ctx, s, "alice")["car"]; ok {
				t.Fatalf("car = %q after a later delete, want no value", got)
			}
		})
	}
}

// BenchmarkUpsertFacts is one turn's facts written as the worker writes
// them: single-valued sets alone, and with list operations (an add, a
// remove, a delete of another list key).
func BenchmarkUpsertFacts(b *testing.B) {
	s := storetest.New(b)
	ctx := context.Background()
	for _, bc := range []struct {
		name   string
		writes func(i int) []store.FactWrite
	}{
		{"singles", func(i int) []store.FactWrite {
			return []store.FactWrite{set("city", fmt.Sprint("c", i), i, "e"), set("job", fmt.Sprint("j", i), i, "e")}
		}},
		{"lists", func(i int) []store.FactWrite {
			return []store.FactWrite{set("city", fmt.Sprint("c", i), i, "e"), add("allergies", fmt.Sprint("a", i), i, "e"),
				remove("allergies", fmt.Sprint("a", i-1), i, "e"), del("pets", true, i, "e")}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				i++
				if _, err := s.UpsertFacts(ctx, bc.writes(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestHistoryOfOneCallNamesEachChange: in one call, a delete of one key
// does not lend its operation or turn to the other keys' changes.
func TestHistoryOfOneCallNamesEachChange(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{set("city", "Porto", 1, "e1"), add("pets", "Rex", 1, "e1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{del("city", false, 2, "e2"), set("car", "Golf", 2, "e3"),
		remove("pets", "rex", 2, "e4"), add("allergies", "soy", 2, "e5")}); err != nil {
		t.Fatal(err)
	}
	got, err := s.FactHistory(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	var entries []string
	for _, c := range got[2:] {
		entries = append(entries, c.Key+" "+c.Op+" "+c.EventID)
	}
	slices.Sort(entries)
	want := []string{"allergies add e5", "car set e3", "city delete e2", "pets remove e4"}
	if !slices.Equal(entries, want) {
		t.Fatalf("history of the call = %q, want %q", entries, want)
	}
}

// TestForgetAndResetCoverValueDeletes: a value delete's tombstone
// (fact_value_clears) goes with a forget and with a reset (a replay records
// it again), of the users named only.
func TestForgetAndResetCoverValueDeletes(t *testing.T) {
	ctx, s := setup(t)
	for _, user := range []string{"alice", "bob", "carol"} {
		if _, err := s.UpsertFacts(ctx, forUser(user, []store.FactWrite{delValue("city", "Berlin", 2, "e2")})); err != nil {
			t.Fatal(err)
		}
	}
	count := func(user string) int {
		t.Helper()
		var n int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM fact_value_clears WHERE user_id = $1`, user).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count("alice"); n != 1 {
		t.Fatalf("%d value deletes of alice, want 1", n)
	}
	if _, _, err := s.ResetMemory(ctx, []string{"alice"}); err != nil {
		t.Fatal(err)
	}
	if a, b := count("alice"), count("bob"); a != 0 || b != 1 {
		t.Fatalf("after alice's reset: %d value deletes of alice, %d of bob; want 0 and 1", a, b)
	}
	// With the tombstone gone, a replayed older statement is written again.
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{set("city", "Berlin", 1, "e1")}); err != nil {
		t.Fatal(err)
	}
	if got := values(t, ctx, s, "alice")["city"]; got != "Berlin" {
		t.Fatalf("after a reset: city = %q, want Berlin", got)
	}
	if _, _, err := s.ForgetUser(ctx, "bob", "bob", store.StreamPosition{}, store.RiverJobs{}); err != nil {
		t.Fatal(err)
	}
	if b, c := count("bob"), count("carol"); b != 0 || c != 1 {
		t.Fatalf("after bob's forget: %d value deletes of bob, %d of carol; want 0 and 1", b, c)
	}
	if _, _, err := s.ResetMemory(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if c := count("carol"); c != 0 {
		t.Fatalf("after a reset of all: %d value deletes of carol, want 0", c)
	}
}

// TestSetAfterClearOfAValueStampedAhead: a facts.set after the user's own
// facts.clear of a value from a turn stamped ahead of the clock (within the
// allowed skew) is stored, for a single-valued key and a list key alike;
// a turn's later delete still refuses it. Before, the clear took the value's
// time and refused every set of the key until the clock passed it (a race
// hunt: "location" set again right after its clear, refused for 4 minutes,
// with a reason naming a turn that never said so).
func TestSetAfterClearOfAValueStampedAhead(t *testing.T) {
	ctx, s := setup(t)
	ahead := time.Now().Add(4 * time.Minute)
	city, allergy := set("location", "Lisbon", 0, "e1"), add("allergies", "peanuts", 0, "e1")
	city.SourceAt, allergy.SourceAt = ahead, ahead
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{city, allergy}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"location", "allergies"} {
		if n, err := s.DeleteFact(ctx, "alice", key); err != nil || n != 1 {
			t.Fatalf("clear %s = %d, %v", key, n, err)
		}
	}
	f, stored, err := s.SetFact(ctx, "alice", "location", "Porto")
	if err != nil || !stored || f.Value != "Porto" {
		t.Fatalf("set location after its clear = %+v, %v, %v; want Porto stored", f, stored, err)
	}
	f, stored, err = s.SetFactValues(ctx, "alice", "allergies", []string{"eggs"})
	if err != nil || !stored || f.Value != "eggs" {
		t.Fatalf("set allergies after their clear = %+v, %v, %v; want eggs stored", f, stored, err)
	}
	// A turn stamped later still than the set deletes the key: a set now
	// is refused, as before.
	gone := del("location", false, 0, "e2")
	gone.SourceAt = ahead.Add(time.Minute)
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{gone}); err != nil {
		t.Fatal(err)
	}
	if _, stored, err := s.SetFact(ctx, "alice", "location", "Faro"); err != nil || stored {
		t.Fatalf("set under a later turn's delete: stored %v, %v; want refused", stored, err)
	}
}

// placed gives w its turn's place in the turn stream.
func placed(w store.FactWrite, seq uint64) store.FactWrite {
	w.Placed = store.StreamPosition{Seq: seq}
	return w
}

// TestSameTimeStatementsFollowTheStream: two statements of one fact
// stamped with the same time (second-precision timestamps, a correction
// within the second) are ordered by their turns' places in the stream,
// the later published winning, in either order of arrival, in one call or
// two. Event ids that sort the other way ("evt-9" after "evt-10") do not
// decide it.
func TestSameTimeStatementsFollowTheStream(t *testing.T) {
	ctx, s := setup(t)
	cases := []struct {
		name   string
		writes []store.FactWrite // in publication order
		want   map[string]string
	}{
		{"a correction of a single value", []store.FactWrite{
			placed(set("color", "red", 0, "evt-9"), 9), placed(set("color", "blue", 0, "evt-10"), 10)},
			map[string]string{"color": "blue"}},
		{"an item removed after it was added", []store.FactWrite{
			placed(add("likes", "jazz", 0, "evt-9"), 9), placed(remove("likes", "jazz", 0, "evt-10"), 10)},
			map[string]string{}},
		{"an item added again after it was removed", []store.FactWrite{
			placed(add("likes", "jazz", 0, "evt-8"), 8), placed(remove("likes", "jazz", 0, "evt-9"), 9),
			placed(add("likes", "Jazz", 0, "evt-10"), 10)},
			map[string]string{"likes": "Jazz"}},
	}
	for i, c := range cases {
		orders := map[string][][]store.FactWrite{"published": nil, "reversed": nil, "one call": {c.writes}}
		for _, w := range c.writes {
			orders["published"] = append(orders["published"], []store.FactWrite{w})
			orders["reversed"] = append([][]store.FactWrite{{w}}, orders["reversed"]...)
		}
		for name, calls := range orders {
			user := fmt.Sprintf("u%d-%s", i, strings.ReplaceAll(name, " ", "-"))
			for _, call := range calls {
				if _, err := s.UpsertFacts(ctx, forUser(user, call)); err != nil {
					t.Fatal(err)
				}
			}
			if got := values(t, ctx, s, user); !maps.Equal(got, c.want) {
				t.Errorf("%s, %s: facts = %q, want %q", c.name, name, got, c.want)
			}
		}
	}
}

// TestClearAfterARemovalStampedAhead: clearing a list key whose only item
// was removed by a turn stamped ahead (a device's clock minutes fast)
// deletes nothing, and a later statement of an item is stored: the
// removal's time is not a value's, so it does not push the clear past it.
func TestClearAfterARemovalStampedAhead(t *testing.T) {
	ctx, s := setup(t)
	now := time.Now()
	added, removed := add("likes", "jazz", 0, "e1"), remove("likes", "jazz", 0, "e2")
	added.SourceAt, removed.SourceAt = now.Add(-time.Minute), now.Add(3*time.Minute)
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{added, removed}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeleteFact(ctx, "alice", "likes"); err != nil || n != 0 {
		t.Fatalf("clear likes = %d, %v; want 0 deleted", n, err)
	}
	opera := add("likes", "opera", 0, "e3")
	opera.SourceAt = time.Now().Add(time.Second)
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{opera}); err != nil {
		t.Fatal(err)
	}
	if got := values(t, ctx, s, "alice"); got["likes"] != "opera" {
		t.Fatalf("likes after the clear = %q, want opera", got["likes"])
	}
}

// TestSetFactValuesHistorySourceAt: a facts.set of a list key records in
// its history entry the source time the fact holds, to the microsecond.
// The entry's time went through JSON with nanoseconds, which Postgres
// rounds where pgx truncates the row's, so about half of the writes had a
// history entry 1 µs later than their fact.
func TestSetFactValuesHistorySourceAt(t *testing.T) {
	ctx, s := setup(t)
	for i := range 20 {
		f, stored, err := s.SetFactValues(ctx, "alice", "allergies", []string{"nuts", fmt.Sprintf("item%d", i)})
		if err != nil || !stored {
			t.Fatalf("set values = %+v, %v, %v", f, stored, err)
		}
		h, err := s.FactHistory(ctx, "alice")
		if err != nil || len(h) == 0 {
			t.Fatalf("history = %v, %v", h, err)
		}
		last := h[len(h)-1]
		if last.SourceAt == nil || !last.SourceAt.Equal(f.SourceAt) {
			t.Fatalf("write %d: history source_at %v, fact source_at %v", i, last.SourceAt, f.SourceAt)
		}
	}
}
