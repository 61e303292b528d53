package worker

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
)

// unsavedResults holds, in this process, the extractions a job's run made
// and could not store because it had to wait (a lock behind a forget or
// another job, the database out of reach), for the job's next run: the
// next run finds the same input (the same turns, earlier turns and facts,
// extractor and prompt) and takes the result instead of asking the model
// again. Before, each such wait cost a model call a turn, and an outage
// that let reads through cost one a snooze (up to 9 a turn in
// maxDBOutage).
//
// A result is reused only for the very input it was made from, so reusing
// it is a model call that answered as the first did. It is kept with the
// tokens of its call that flushUsage dropped (a wait for the user's lock),
// which its reuse then stores with it; tokens that were stored, or that
// wait in the usage backlog (the database out of reach), are not counted
// again. A run in another process (River hands
// the job to any) asks the model as before; what it left here ages out.
type unsavedResults struct {
	mu      sync.Mutex
	entries map[unsavedKey]unsavedEntry
	order   []unsavedSlot // oldest first: the bound drops the oldest
	seq     uint64        // numbers the keeps, for order's slots
}

// unsavedSlot is a place in unsavedResults.order: the key of a result
// and the number of its keep, live while the entry held under key is
// still the one that keep made. A result taken and kept again (a job
// whose save waited twice) has a later slot and its earlier one is dead:
// with the key alone, the bound dropped the newest result as the oldest.
type unsavedSlot struct {
	key unsavedKey
	seq uint64
}

// live reports whether s names the entry held under its key.
func (u *unsavedResults) live(s unsavedSlot) (unsavedEntry, bool) {
	e, ok := u.entries[s.key]
	return e, ok && e.seq == s.seq
}

// unsavedKey is a job and the digest of an extraction's input (inputKey).
type unsavedKey struct {
	job   int64
	input [sha256.Size]byte
}

type unsavedEntry struct {
	at     time.Time // monotonic: when it was kept
	seq    uint64    // the number of its keep (unsavedSlot)
	result extractor.Result
	batch  extractor.BatchResult
	// call is the id of the call whose tokens the result keeps (its
	// Usage, when not zero), so that they count once.
	call store.CallID
}

const (
	// maxUnsaved bounds the results kept: a few KB each, and a wait of
	// every running job of a busy process keeps one a turn.
	maxUnsaved = 4096
	// unsavedTTL is how long a result waits for its job's next run: past
	// the longest wait (maxDBOutage's last snooze is a minute; lock waits
	// 30 s), the job ran elsewhere or ended.
	unsavedTTL = 10 * time.Minute
)

func newUnsavedResults() *unsavedResults {
	return &unsavedResults{entries: make(map[unsavedKey]unsavedEntry)}
}

// inputKey digests what an extraction's result depends on: the extractor
// (info), whether it ran over a spend cap, and its input (an
// extractor.Input or extractor.BatchInput). ok is false, and nothing is
// kept, for an extractor of no model, and when the input cannot be encoded
// (it can: plain strings and maps).
func inputKey(info extractor.Info, over bool, input any) (key [sha256.Size]byte, ok bool) {
	if info.Model == "" {
		// The offline extractor (rules): asking it again costs nothing
		// (no call, no tokens), and digesting every turn's facts does.
		return key, false
	}
	b, err := json.Marshal(struct {
		Info  extractor.Info
		Over  bool
		Input any
	}{info, over, input})
	if err != nil {
		return key, false
	}
	return sha256.Sum256(b), true
}

// keep holds the result of job's extraction of the input digested as
// input (inputKey), replacing one held for it.
func (u *unsavedResults) keep(job int64, input [sha256.Size]byte, e unsavedEntry) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := time.Now()
	u.seq++
	e.at, e.seq = now, u.seq
	k := unsavedKey{job, input}
	// A result held for k already (kept again without being taken) moves
	// to the end: its earlier slot dies with the new number.
	u.entries[k] = e
	u.order = append(u.order, unsavedSlot{k, u.seq})
	u.trim(now)
}

// sweep drops the results kept longer than unsavedTTL ago.
func (u *unsavedResults) sweep(now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.trim(now)
}

// trim drops the oldest results past the bound, and the stale at the
// front; u.mu is held.
func (u *unsavedResults) trim(now time.Time) {
	drop := 0
	for drop < len(u.order) {
		old, ok := u.live(u.order[drop])
		if ok && len(u.entries) <= maxUnsaved && now.Sub(old.at) < unsavedTTL {
			break
		}
		if ok {
			delete(u.entries, u.order[drop].key)
		}
		drop++
	}
	// A reslice, not a copy to the front: a copy moved every slot at
	// every keep (TestUnsavedResultsBound took 23-44 s under -race). The
	// dropped slots' memory goes when an append outgrows the array.
	u.order = u.order[drop:]
	if len(u.order) > 2*maxUnsaved {
		// Slots of results taken pile up behind an old one still held.
		live := u.order[:0]
		for _, s := range u.order {
			if _, ok := u.live(s); ok {
				live = append(live, s)
			}
		}
		u.order = live
	}
}

// take returns and forgets the result held for job's extraction of the
// input digested as input, if one is, and fresh; none without a digest
// (keyed false, inputKey's ok: the offline extractor's every turn), and
// without taking the lock.
func (u *unsavedResults) take(job int64, input [sha256.Size]byte, keyed bool) (unsavedEntry, bool) {
	if !keyed {
		return unsavedEntry{}, false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	k := unsavedKey{job, input}
	e, ok := u.entries[k]
	if !ok {
		return e, false
	}
	delete(u.entries, k) // its slot stays in order, dead, until it comes to the front
	return e, time.Since(e.at) < unsavedTTL
}
