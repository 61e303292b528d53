package enricher

import "testing"

// TestVectorCacheDropAt: the sweep drops an entry or a skip record only if
// it still holds the generation the sweep read before asking the store: an
// entry put meanwhile, of a newer generation, is current and stays, and
// the bytes it counts stay counted.
func TestVectorCacheDropAt(t *testing.T) {
	k := cacheKey{user: "a", model: "m"}
	c := newVectorCache(100)
	c.put(&userVectors{key: k, generation: 5, dims: 8, bytes: 10})
	c.markSkip("b", "m", 3)
	entries, skips := c.held()
	if len(entries) != 1 || entries[0] != (cachedAt{k, 5}) || len(skips) != 1 || skips[0].generation != 3 {
		t.Fatalf("held %v, %v", entries, skips)
	}
	c.put(&userVectors{key: k, generation: 7, dims: 8, bytes: 20}) // a request reloaded it meanwhile
	if c.dropAt(k, 5, false) {
		t.Fatal("dropped the entry put after the sweep read its generation")
	}
	if users, bytes := c.size(); users != 1 || bytes != 20 {
		t.Fatalf("size %d users %d bytes, want 1 and 20", users, bytes)
	}
	if !c.dropAt(k, 7, false) {
		t.Fatal("the entry of generation 7 was not dropped")
	}
	if users, bytes := c.size(); users != 0 || bytes != 0 {
		t.Fatalf("size %d users %d bytes after the drop, want 0 and 0", users, bytes)
	}
	if c.dropAt(cacheKey{user: "b", model: "m"}, 4, true) || !c.skipped("b", "m", 3) {
		t.Fatal("a skip record of another generation was dropped")
	}
	if !c.dropAt(cacheKey{user: "b", model: "m"}, 3, true) || c.skipped("b", "m", 3) {
		t.Fatal("the skip record was not dropped")
	}
}
