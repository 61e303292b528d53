package enricher

import (
	"container/list"
	"sync"
	"sync/atomic"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/store"
)

// DefaultVectorCacheBytes is Config.VectorCacheBytes' default: 48 MiB, the
// vectors of about 55,000 items of 768 dimensions (some 900 bytes each with
// their sign bits, id, time and scope), e.g. eleven users of 5,000 items.
const DefaultVectorCacheBytes = 48 << 20

// vectorCache keeps users' vectors in this process, so that a hybrid
// search scores them without reading them: least recently used users go
// first when the byte budget is full.
//
// Consistency. An entry holds the user's vectors as they were at one
// embedding generation (migrations/021: a per-user value, never reused,
// changed by triggers whenever a vector is saved or deleted or an item's
// text, scope or time changes). Every hybrid read of candidates reads the
// current generation in the same statement (store.SearchQuery.Hybrid), and
// its answer is used with an entry only when the two are equal, that is
// when no change to the user's vectors committed between them; otherwise
// the entry is read again (hybrid.recall). The check rides on the round
// trip the request makes anyway, so a hit costs no extra one, and unlike an
// invalidation message over NATS it cannot be missed (a lost message, a
// process that was partitioned, a write from another memoryd) nor arrive
// late: there is no staleness window to reason about.
type vectorCache struct {
	max int64

	mu    sync.Mutex
	used  int64
	order *list.List // of *userVectors, most recently used first
	byKey map[cacheKey]*list.Element
	// skip holds, for users whose vectors cannot be cached (over the whole
	// budget, or unindexable), the generation they were read at: until it
	// changes, their requests are ranked lexically rather than reading
	// every vector again on each one. At most maxSkips users.
	skip map[cacheKey]int64

	hits, misses atomic.Int64
}

// entryOverhead is what an entry holds besides its key's strings, its
// slices and its index: the userVectors, its list element, its map entry
// and the index's header. Measured (enricher tests, 20,000 entries of no
// vector): 361 bytes an entry where 256 were counted, with a 12-byte user
// id; a many-users walk's cache of 196,608 users took 70 MiB of heap for a
// 48 MiB budget.
const entryOverhead = 352

// maxSkips bounds vectorCache.skip; when full it starts again empty.
const maxSkips = 1024

// cacheKey names an entry: a user's vectors of a model (collection 0), or
// a document collection's (user "", dochybrid.go).
type cacheKey struct {
	user, model string
	collection  int64
}

// userVectors is one user's vectors of one model and dimension, at one
// generation. Immutable once built.
type userVectors struct {
	key        cacheKey
	generation int64
	dims       int
	// index is nil when the user has no vector of dims.
	index   *embedding.Index
	ids     []int64
	created []int64 // unix nanoseconds
	scopes  []string
	// docs and chunks name a collection's entry's vectors (ids, created
	// and scopes are then empty).
	docs   []string
	chunks []int32
	bytes  int64
	// otherDims counts the user's vectors left out for having other
	// dimensions than dims: the model behind the name changed.
	otherDims int
}

func newVectorCache(maxBytes int64) *vectorCache {
	return &vectorCache{max: maxBytes, order: list.New(), byKey: map[cacheKey]*list.Element{}, skip: map[cacheKey]int64{}}
}

// skipped reports whether the user's vectors were found uncacheable at
// generation.
func (c *vectorCache) skipped(user, model string, generation int64) bool {
	return c.skippedKey(cacheKey{user: user, model: model}, generation)
}

func (c *vectorCache) skippedKey(k cacheKey, generation int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.skip[k]
	return ok && g == generation
}

// markSkip records that the user's vectors cannot be cached at generation.
func (c *vectorCache) markSkip(user, model string, generation int64) {
	c.markSkipKey(cacheKey{user: user, model: model}, generation)
}

func (c *vectorCache) markSkipKey(k cacheKey, generation int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.skip) >= maxSkips {
		clear(c.skip)
	}
	c.skip[k] = generation
}

// get returns the user's entry of dims dimensions, or nil.
func (c *vectorCache) get(user, model string, dims int) *userVectors {
	return c.getKey(cacheKey{user: user, model: model}, dims)
}

func (c *vectorCache) getKey(k cacheKey, dims int) *userVectors {
	e := c.lookup(k, dims)
	c.count(e != nil)
	return e
}

// lookup is getKey without counting a hit or a miss: for a caller that
// counts once it knows whether the entry is current (hybrid.recall).
func (c *vectorCache) lookup(k cacheKey, dims int) *userVectors {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.byKey[k]
	if el == nil || el.Value.(*userVectors).dims != dims {
		return nil
	}
	c.order.MoveToFront(el)
	return el.Value.(*userVectors)
}

// count counts a hit or a miss.
func (c *vectorCache) count(hit bool) {
	if hit {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
}

// put stores e, replacing the user's earlier entry, and evicts the least
// recently used users over the budget. An entry over the whole budget is
// not kept: put reports whether e was.
func (c *vectorCache) put(e *userVectors) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.byKey[e.key]; el != nil {
		c.used -= el.Value.(*userVectors).bytes
		c.order.Remove(el)
		delete(c.byKey, e.key)
	}
	delete(c.skip, e.key)
	if e.bytes > c.max {
		return false
	}
	c.byKey[e.key] = c.order.PushFront(e)
	c.used += e.bytes
	for c.used > c.max {
		last := c.order.Back()
		old := last.Value.(*userVectors)
		c.order.Remove(last)
		delete(c.byKey, old.key)
		c.used -= old.bytes
	}
	return true
}

// cachedAt is an entry's or a skip record's key and generation.
type cachedAt struct {
	key        cacheKey
	generation int64
}

// held returns the key and generation of every entry and every skip
// record.
func (c *vectorCache) held() (entries, skips []cachedAt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	entries = make([]cachedAt, 0, c.order.Len())
	for el := c.order.Front(); el != nil; el = el.Next() {
		e := el.Value.(*userVectors)
		entries = append(entries, cachedAt{e.key, e.generation})
	}
	skips = make([]cachedAt, 0, len(c.skip))
	for k, g := range c.skip {
		skips = append(skips, cachedAt{k, g})
	}
	return entries, skips
}

// dropAt removes k's entry (skip: its skip record) if it still holds
// generation, and reports whether it did: one put since holds another.
func (c *vectorCache) dropAt(k cacheKey, generation int64, skip bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if skip {
		if g, ok := c.skip[k]; ok && g == generation {
			delete(c.skip, k)
			return true
		}
		return false
	}
	el := c.byKey[k]
	if el == nil || el.Value.(*userVectors).generation != generation {
		return false
	}
	c.used -= el.Value.(*userVectors).bytes
	c.order.Remove(el)
	delete(c.byKey, k)
	return true
}

// size returns the users cached and their bytes.
func (c *vectorCache) size() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len(), c.used
}

// newUserVectors builds the entry of uv's vectors of dims dimensions.
// Vectors of other dimensions (of the model before the one behind its name
// changed) are left out: they cannot be compared with the query.
func newUserVectors(user, model string, dims int, uv store.UserVectors) (*userVectors, error) {
	e := &userVectors{key: cacheKey{user: user, model: model}, generation: uv.Generation, dims: dims}
	// Sized once, so that what an entry counts (bytes) is what it holds:
	// grown by append, the slices held up to twice their length.
	n := len(uv.Vectors)
	stored := make([][]byte, 0, n)
	e.ids, e.created, e.scopes = make([]int64, 0, n), make([]int64, 0, n), make([]string, 0, n)
	interned := map[string]string{}
	for _, v := range uv.Vectors {
		if v.Dims != dims {
			e.otherDims++
			continue
		}
		stored = append(stored, v.Vector)
		e.ids = append(e.ids, v.ContextID)
		e.created = append(e.created, v.CreatedAt.UnixNano())
		sc, ok := interned[v.Scope]
		if !ok {
			sc, interned[v.Scope] = v.Scope, v.Scope
		}
		e.scopes = append(e.scopes, sc)
	}
	e.bytes = entryOverhead + int64(len(user)+len(model)) + int64(cap(e.ids))*(8+8+16)
	if len(stored) > 0 {
		x, err := embedding.NewIndex(dims, stored)
		if err != nil {
			return nil, err
		}
		e.index = x
		e.bytes += int64(x.Bytes())
	}
	return e, nil
}
