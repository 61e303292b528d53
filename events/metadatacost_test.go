package events_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events"
)

// TestDecodeMetadataCostIsLinear: checking metadata for a key given twice
// costs a long key a bounded number of copies, not one per value under it.
// Before, every value's path was built eagerly: an 8 KiB key over an array
// of 3000 numbers (14 KiB of metadata, under its limit) allocated 58 MB.
func TestDecodeMetadataCostIsLinear(t *testing.T) {
	const turn = `{"id":"e1","user_id":"alice","user_message":"hi","timestamp":"2026-11-21T10:00:00Z","metadata":{"%k":[%v]}}`
	values := strings.TrimSuffix(strings.Repeat("0,", 3000), ",")
	allocated := func(key string) uint64 {
		event := []byte(strings.NewReplacer("%k", key, "%v", values).Replace(turn))
		if _, err := events.Decode(event); err != nil { // warm up
			t.Fatalf("decode: %v", err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := events.Decode(event); err != nil {
			t.Fatalf("decode: %v", err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	long := strings.Repeat("k", 8<<10)
	short, got := allocated("k"), allocated(long)
	if limit := short + 64*uint64(len(long)); got > limit {
		t.Errorf("decoding metadata with an %d byte key over 3000 values allocated %d bytes, want at most %d (%d with a 1 byte key, plus 64 copies of the key)", len(long), got, limit, short)
	}
}
