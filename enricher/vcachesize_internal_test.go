package enricher

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// TestVectorCacheCountsWhatItHolds: the bytes an entry counts against
// --vector-cache-bytes are, within 15 %, the heap it holds (measured after
// a GC, over 20,000 entries). A many-users walk found the cache at 70 MiB
// of heap for its 48 MiB budget: an entry counted 256 bytes of overhead
// where it held about 360, and its slices grown by append up to twice
// their length. Not parallel: the heap is measured, and parallel tests
// run only beside each other.
func TestVectorCacheCountsWhatItHolds(t *testing.T) {
	for _, vectors := range []int{0, 1, 10} {
		c := newVectorCache(1 << 40)
		const n = 20000
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range n {
			uv := store.UserVectors{Generation: 1}
			for j := range vectors {
				uv.Vectors = append(uv.Vectors, store.UserVector{ContextID: int64(j), Dims: 64, Vector: make([]byte, 4+64), CreatedAt: time.Now(), Scope: "user"})
			}
			e, err := newUserVectors(fmt.Sprintf("user%07d", i), "nomic-embed-text", 64, uv)
			if err != nil {
				t.Fatal(err)
			}
			c.put(e)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		_, counted := c.size()
		held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		t.Logf("%d vectors a user: %d bytes an entry held, %d counted", vectors, held/n, counted/n)
		if counted < held*85/100 {
			t.Errorf("%d vectors a user: entries counted %d bytes and held %d", vectors, counted, held)
		}
		runtime.KeepAlive(c)
	}
}
