package worker

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
)

// knownFacts is a user's current facts as an extraction is shown them
// (extractor.Input.Facts, ordered by Input.FactKeys): read once per job,
// then updated with what each turn of the job extracted, so that a later
// turn of the job sees what an earlier one changed, as it will be stored.
type knownFacts struct {
	values map[string]string
	order  []string // the keys, most recently stated first
}

// loadKnownFacts reads the current facts of user, leaving out those last
// stated by one of turns (user's, maybe none): a turn is not its
// own context. This matters when turns are extracted again (after a spend
// cap, in a replay): shown its own earlier extraction as current, a model
// would rightly call it unchanged and leave it out of the reply, and the
// re-extraction, which replaces the earlier one, would lose it.
func loadKnownFacts(ctx context.Context, s *store.Store, user string, turns []store.Turn) (*knownFacts, error) {
	facts, err := s.Facts(ctx, user, 0) // most recently stated first
	if err != nil {
		return nil, err
	}
	own := make(map[string]bool, len(turns))
	for _, t := range turns {
		own[t.EventID] = true
	}
	// A list's row names its newest item's turn; leaving the whole list out
	// for it would hide the items earlier turns stated, and a model that
	// then states the list whole would replace them. So a list is shown
	// without the items of turns alone.
	var lists map[string][]string
	for _, f := range facts {
		if _, list := events.CanonicalFactKey(f.Key); list && lists == nil {
			items, err := s.ListItems(ctx, user)
			if err != nil {
				return nil, err
			}
			lists = make(map[string][]string)
			for _, it := range items {
				if !own[it.EventID] {
					lists[it.Key] = append(lists[it.Key], it.Value)
				}
			}
		}
	}
	k := &knownFacts{values: make(map[string]string, len(facts)), order: make([]string, 0, len(facts))}
	for _, f := range facts {
		value := f.Value
		if _, list := events.CanonicalFactKey(f.Key); list {
			if _, hasItems := lists[f.Key]; hasItems || own[f.EventID] {
				// A list kept in items (its row is rebuilt from them),
				// or a value stated by turns alone (adopted as items).
				value = strings.Join(lists[f.Key], ", ")
			}
		} else if own[f.EventID] {
			continue
		}
		if value == "" {
			continue
		}
		k.values[f.Key] = value
		k.order = append(k.order, f.Key)
	}
	return k, nil
}

// input returns the facts and their order for an extractor input: copies,
// so that apply cannot change what an extraction still reads.
func (k *knownFacts) input() (facts map[string]string, order []string) {
	return maps.Clone(k.values), slices.Clone(k.order)
}

// apply records what one turn extracted: the values it set, the items it
// added to or removed from lists, the keys it deleted. Touched keys become
// the most recent. It approximates the store's resolution (by source time)
// for one job's turns, which are in time order; only the prompt reads it.
func (k *knownFacts) apply(res extractor.Result) {
	for _, key := range slices.Sorted(maps.Keys(res.Facts)) {
		k.set(key, res.Facts[key])
	}
	for _, c := range res.Changes {
		switch c.Op {
		case extractor.OpDelete:
			delete(k.values, c.Key)
			k.order = slices.DeleteFunc(k.order, func(s string) bool { return s == c.Key })
		case extractor.OpAdd, extractor.OpRemove:
			if _, list := events.CanonicalFactKey(c.Key); !list {
				continue // extractors never make these on single-valued keys
			}
			var items []string
			found := false
			for _, it := range extractor.SplitItems(k.values[c.Key]) {
				if extractor.ItemIdentity(it) == extractor.ItemIdentity(c.Value) {
					found = true
					if c.Op == extractor.OpRemove {
						continue
					}
				}
				items = append(items, it)
			}
			if c.Op == extractor.OpAdd && !found {
				items = append(items, c.Value)
			}
			if len(items) == 0 {
				delete(k.values, c.Key)
				k.order = slices.DeleteFunc(k.order, func(s string) bool { return s == c.Key })
				continue
			}
			k.set(c.Key, strings.Join(items, ", "))
		}
	}
}

// set records key's value as the most recent.
func (k *knownFacts) set(key, value string) {
	k.values[key] = value
	k.order = slices.DeleteFunc(k.order, func(s string) bool { return s == key })
	k.order = slices.Insert(k.order, 0, key)
}

// priorTurnsOf returns, for each of turns (one job's), the earlier turns of
// its conversation that an extraction gets as read-only context: at most
// priorTurns, oldest first, from the conversation's processed turns before
// the job's first turn of it (one query per conversation) and the job's own
// earlier turns of it. A turn without a conversation gets none.
func priorTurnsOf(ctx context.Context, s *store.Store, turns []store.Turn) ([][]extractor.Turn, error) {
	type conv struct{ user, id string }
	first := map[conv]store.Turn{}
	for _, t := range turns {
		c := conv{t.UserID, t.ConversationID}
		if f, ok := first[c]; t.ConversationID != "" && (!ok || t.TurnAt.Before(f.TurnAt)) {
			first[c] = t
		}
	}
	stored := make(map[conv][]store.Turn, len(first))
	for c, f := range first {
		prior, err := s.PriorConversationTurns(ctx, c.user, c.id, f.TurnAt, priorTurns)
		if err != nil {
			return nil, err
		}
		stored[c] = prior
	}
	out := make([][]extractor.Turn, len(turns))
	for i, t := range turns {
		if t.ConversationID == "" {
			continue
		}
		c := conv{t.UserID, t.ConversationID}
		prior := slices.Clone(stored[c])
		for _, o := range turns {
			if o.UserID == t.UserID && o.ConversationID == t.ConversationID && o.TurnAt.Before(t.TurnAt) {
				prior = append(prior, o)
			}
		}
		slices.SortStableFunc(prior, func(a, b store.Turn) int {
			return cmp.Or(a.TurnAt.Compare(b.TurnAt), strings.Compare(a.EventID, b.EventID))
		})
		prior = slices.CompactFunc(prior, func(a, b store.Turn) bool { return a.EventID == b.EventID })
		if len(prior) > priorTurns {
			prior = prior[len(prior)-priorTurns:] // the most recent matter most
		}
		for _, p := range prior {
			out[i] = append(out[i], extractorTurn(p))
		}
	}
	return out, nil
}
