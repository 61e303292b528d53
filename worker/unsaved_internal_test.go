package worker

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/memoryd/memoryd/extractor"
)

// TestUnsavedResultsBound: results are taken once, by their job and input
// only, and the oldest are dropped past maxUnsaved.
func TestUnsavedResultsBound(t *testing.T) {
	u := newUnsavedResults()
	key := func(i int) [sha256.Size]byte { return sha256.Sum256([]byte{byte(i), byte(i >> 8)}) }
	for i := range maxUnsaved + 10 {
		u.keep(1, key(i), unsavedEntry{result: extractor.Result{Facts: map[string]string{"n": string(rune('a' + i%26))}}})
	}
	if len(u.entries) != maxUnsaved {
		t.Fatalf("%d results held, want the bound %d", len(u.entries), maxUnsaved)
	}
	if _, ok := u.take(1, key(0), true); ok {
		t.Error("the oldest result was still held past the bound")
	}
	if _, ok := u.take(2, key(maxUnsaved+9), true); ok {
		t.Error("a result was taken by another job")
	}
	if e, ok := u.take(1, key(maxUnsaved+9), true); !ok || e.result.Facts["n"] == "" {
		t.Errorf("the newest result = %+v, %v; want it", e, ok)
	}
	if _, ok := u.take(1, key(maxUnsaved+9), true); ok {
		t.Error("a result was taken twice")
	}
	// Keys of taken results do not pile up behind an old one.
	for i := range 3 * maxUnsaved {
		u.keep(3, key(i), unsavedEntry{})
		u.take(3, key(i), true)
	}
	if len(u.order) > 2*maxUnsaved+1 {
		t.Errorf("%d keys in order for %d results held", len(u.order), len(u.entries))
	}
}

// TestInputKey: the digest changes with anything the result depends on.
func TestInputKey(t *testing.T) {
	base := extractor.Input{UserID: "alice", Turn: extractor.Turn{UserMessage: "I live in Oslo."}, Facts: map[string]string{"name": "Alice"}}
	k, ok := inputKey(extractor.Info{Name: "llm", Model: "m"}, false, base)
	if !ok {
		t.Fatal("no key")
	}
	other := base
	other.Facts = map[string]string{"name": "Alicia"}
	for name, c := range map[string]struct {
		info extractor.Info
		over bool
		in   extractor.Input
	}{
		"model":  {extractor.Info{Name: "llm", Model: "m2"}, false, base},
		"prompt": {extractor.Info{Name: "llm", Model: "m", PromptVersion: "2"}, false, base},
		"over":   {extractor.Info{Name: "llm", Model: "m"}, true, base},
		"facts":  {extractor.Info{Name: "llm", Model: "m"}, false, other},
	} {
		if k2, _ := inputKey(c.info, c.over, c.in); k2 == k {
			t.Errorf("%s: same key", name)
		}
	}
	if k2, _ := inputKey(extractor.Info{Name: "llm", Model: "m"}, false, base); k2 != k {
		t.Error("the same input gave another key")
	}
}

// TestUnsavedResultsKeptAgainIsNewest: a result kept again for the same
// job and input (a job whose save waited twice: the common case) is the
// newest, not the oldest: with the bound reached, the next keep drops the
// oldest result held, not the one just kept again.
func TestUnsavedResultsKeptAgainIsNewest(t *testing.T) {
	u := newUnsavedResults()
	key := func(i int) [sha256.Size]byte { return sha256.Sum256([]byte{byte(i), byte(i >> 8)}) }
	for i := range maxUnsaved {
		u.keep(1, key(i), unsavedEntry{})
	}
	// The job of key 0 runs again, waits again, and keeps its result again.
	if _, ok := u.take(1, key(0), true); !ok {
		t.Fatal("key 0 not held")
	}
	u.keep(1, key(0), unsavedEntry{})
	// Another job's result past the bound drops the oldest: key 1.
	u.keep(2, key(maxUnsaved), unsavedEntry{})
	if len(u.entries) != maxUnsaved {
		t.Fatalf("%d results held, want %d", len(u.entries), maxUnsaved)
	}
	if _, ok := u.take(1, key(0), true); !ok {
		t.Error("the result kept again was dropped as the oldest")
	}
	if _, ok := u.take(1, key(1), true); ok {
		t.Error("the oldest result was kept past the bound")
	}
}

// TestUnsavedResultsSwept: results kept for runs that never came go once
// they are older than unsavedTTL (the heartbeat sweeps), and the offline
// extractor's are not kept at all.
func TestUnsavedResultsSwept(t *testing.T) {
	u := newUnsavedResults()
	key := sha256.Sum256([]byte("x"))
	u.keep(1, key, unsavedEntry{})
	u.sweep(time.Now())
	if len(u.entries) != 1 {
		t.Fatalf("%d results held after a sweep within the TTL, want 1", len(u.entries))
	}
	u.sweep(time.Now().Add(unsavedTTL + time.Second))
	if len(u.entries) != 0 || len(u.order) != 0 {
		t.Fatalf("%d results (%d slots) held past the TTL, want none", len(u.entries), len(u.order))
	}
	if _, keyed := inputKey(extractor.Info{Name: "rules", PromptVersion: "1"}, false, extractor.Input{UserID: "alice"}); keyed {
		t.Error("the offline extractor's result was keyed")
	}
}
