package enricher

import (
	"hash/maphash"
	"sync"

	"github.com/memoryd/memoryd/store"
)

// smallUsers remembers which users had fewer than pruneMinItems items at
// their last keyword-only read, so that their next read is the plain
// statement rather than the pruned one: under pruneMinItems the pruned
// statement prunes nothing, yet costs its frequency and keep steps (a
// regression check on the realistic corpus: p50 1.28-1.30 ms plain
// against 1.36-1.39 ms pruned, in process, interleaved; the enrich/floor
// ratio went from 1.26 to 1.41 when enrich switched to it for everyone).
// Either statement gives the same hits (the pruned one reads the rest
// when it cannot tell), so a memory gone stale (a user who grew past the
// bound, or was forgotten) costs speed, never an answer. Users are held
// by a hash of their id under a per-process seed, not by the id: no
// forgotten user's id stays here. At most maxSmallUsers are held; past
// that the set starts again.
type smallUsers struct {
	seed maphash.Seed
	mu   sync.Mutex
	set  map[uint64]struct{}
}

// maxSmallUsers bounds smallUsers: 8 bytes a user and the map's overhead,
// a few MiB.
const maxSmallUsers = 1 << 17

func newSmallUsers() *smallUsers {
	return &smallUsers{seed: maphash.MakeSeed(), set: map[uint64]struct{}{}}
}

// prune returns the store.Prune of user's next keyword-only read: none
// for a user last seen under pruneMinItems items, ReadPrune otherwise
// (and for a user not seen yet).
func (s *smallUsers) prune(user string) store.Prune {
	h := maphash.String(s.seed, user)
	s.mu.Lock()
	_, small := s.set[h]
	s.mu.Unlock()
	if small {
		return store.Prune{}
	}
	return ReadPrune()
}

// record notes how many items user had at a read (store.ItemStats.Items;
// a read that found no usable keyword counts them too).
func (s *smallUsers) record(user string, items int) {
	h := maphash.String(s.seed, user)
	s.mu.Lock()
	defer s.mu.Unlock()
	if items >= pruneMinItems {
		delete(s.set, h)
		return
	}
	if len(s.set) >= maxSmallUsers {
		clear(s.set)
	}
	s.set[h] = struct{}{}
}
