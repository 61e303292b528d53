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

	"github.com/memoryd/memoryd/store"
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
	writes := permutationWrites()
	apply := func(prefix string, calls [][]store.FactWrite) string {
		t.Helper()
		for _, call := range calls {
			renamed := slices.Clone(call)
			for i := range renamed {
				renamed[i].UserID = prefix + renamed[i].UserID
			}
			if _, err := s.UpsertFacts(ctx, renamed); err != nil {
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
	// What the writes mean, so that a rule broken the same way in every
	// order still fails.
	wantValues := map[string]string{"allergies": "Eggs, milk, Peanuts", "pets": "Luna, Max", "languages": "french, English, Portuguese",
		"city": "Madrid", "job": "teacher"}
	if got := values(t, ctx, s, "ref/alice"); !maps.Equal(got, wantValues) {
		t.Fatalf("facts = %q, want %q", got, wantValues)
	}
	if got := values(t, ctx, s, "ref/bob"); !maps.Equal(got, map[string]string{"allergies": "dust", "city": "Oslo"}) {
		t.Fatalf("bob's facts = %q", got)
	}
	rng := rand.New(rand.NewPCG(16, 1))
	for round := range 40 {
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
