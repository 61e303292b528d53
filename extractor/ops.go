package extractor

import (
	"strings"

	"golang.org/x/text/unicode/norm"

	"github.com/memoryd/memoryd/events"
)

// OpSet states a fact's value; it is what Result.Facts holds. It appears in
// the operations a model or the rules return, never in Result.Changes.
const OpSet FactOp = "set"

// factItem is one fact operation as an extractor found it, before
// resolveOps turns a turn's operations into Result.Facts and Changes. Key
// may be any spelling (it is normalised); Value is cleaned text.
type factItem struct {
	Op    FactOp
	Key   string
	Value string
}

// resolveOps resolves one turn's fact operations, in the order stated, into
// the values the turn sets and its other changes, deterministically:
//
//   - Keys are normalised (snakeKey) and mapped to the canonical vocabulary
//     (events.CanonicalFactKey), which also says whether a key is a list.
//   - On a single-valued key add is a set and remove a delete; the last
//     set or delete of the key wins.
//   - On a list key, add and remove change one item (identity: the value
//     lowercased, spaces collapsed), the last operation on an item winning.
//     A set makes the list exactly the items set (and added) in the turn;
//     a delete drops the whole list, and an add after it starts a new
//     list, as a set would (a delete and an add dated the same cannot both
//     be applied in order by the store).
//
// Items without a key, and sets or adds without a known value, are
// dropped. At most maxFacts keys are kept, the first stated, and at most
// maxFacts list items over all list keys, the first stated: a runaway model
// reply cannot flood the store.
func resolveOps(items []factItem) (map[string]string, []FactChange) {
	type listState struct {
		mode  FactOp   // "" (only adds/removes), OpSet (replace) or OpDelete
		order []string // item identities, first stated first
		value map[string]string
		op    map[string]FactOp // OpAdd or OpRemove
		del   string            // value of the delete, for history
	}
	type single struct {
		op    FactOp // OpSet or OpDelete
		value string
	}
	var keys []string
	listItems := 0
	singles := map[string]*single{}
	lists := map[string]*listState{}
	for _, it := range items {
		key, list := events.CanonicalFactKey(events.SnakeKey(it.Key))
		value := strings.TrimSpace(it.Value)
		if key == "" {
			continue
		}
		op := it.Op
		switch op {
		case OpSet, OpAdd, OpRemove, OpDelete:
		default:
			continue
		}
		known := value != "" && !isUnknownValue(strings.ToLower(value))
		if !list {
			switch op {
			case OpSet, OpAdd:
				op = OpSet
			case OpRemove, OpDelete:
				op = OpDelete
			default:
				continue
			}
			if op == OpSet && !known {
				continue
			}
			s, ok := singles[key]
			if !ok {
				if len(keys) == maxFacts {
					continue
				}
				keys = append(keys, key)
				s = &single{}
				singles[key] = s
			}
			s.op, s.value = op, value
			continue
		}
		// A list stated in one value ("peanuts, shellfish") is its items.
		var parts []string
		if op != OpDelete {
			if parts = SplitItems(value); !known || len(parts) == 0 {
				continue
			}
		}
		l, ok := lists[key]
		if !ok {
			if len(keys) == maxFacts {
				continue
			}
			keys = append(keys, key)
			l = &listState{value: map[string]string{}, op: map[string]FactOp{}}
			lists[key] = l
		}
		switch op {
		case OpDelete:
			l.mode, l.del, l.order = OpDelete, value, nil
			clear(l.value)
			clear(l.op)
			continue
		case OpSet:
			l.mode = OpSet
			op = OpAdd
		case OpAdd:
			if l.mode == OpDelete {
				l.mode = OpSet
			}
		}
		for _, v := range parts {
			id := ItemIdentity(v)
			if _, seen := l.op[id]; !seen {
				if listItems == maxFacts {
					continue
				}
				listItems++
				l.order = append(l.order, id)
			}
			l.op[id], l.value[id] = op, v
		}
	}

	facts := map[string]string{}
	var changes []FactChange
	for _, key := range keys {
		if s, ok := singles[key]; ok {
			if s.op == OpSet {
				facts[key] = s.value
			} else {
				changes = append(changes, FactChange{Op: OpDelete, Key: key, Value: s.value})
			}
			continue
		}
		l := lists[key]
		switch l.mode {
		case OpDelete:
			changes = append(changes, FactChange{Op: OpDelete, Key: key, Value: l.del})
		case OpSet:
			var present []string
			for _, id := range l.order {
				if l.op[id] == OpAdd {
					present = append(present, l.value[id])
				}
			}
			if len(present) == 0 {
				changes = append(changes, FactChange{Op: OpDelete, Key: key})
			} else {
				facts[key] = strings.Join(present, ", ")
			}
		default:
			for _, id := range l.order {
				changes = append(changes, FactChange{Op: l.op[id], Key: key, Value: l.value[id]})
			}
		}
	}
	return facts, changes
}

// ItemIdentity is what makes two items of a list the same item: the value
// in Unicode NFKC, lowercased, with runs of white space collapsed to one
// space, as the store identifies them ("ｐｅａｎｕｔｓ" is "peanuts").
func ItemIdentity(value string) string {
	return strings.Join(strings.Fields(strings.ToLower(norm.NFKC.String(value))), " ")
}

// SplitItems splits a list value into its items at commas and semicolons,
// trimmed; empty items and those saying nothing is known are dropped. A
// value written as a JSON array of strings (events.ListArray: a model
// quoting the list it was asked for) is its strings, each split so.
func SplitItems(value string) []string {
	if strs, _, ok := events.ListArray(value); ok {
		var items []string
		for _, a := range strs {
			items = append(items, SplitItems(a)...)
		}
		return items
	}
	var items []string
	for _, it := range strings.FieldsFunc(value, func(r rune) bool { return r == ',' || r == ';' }) {
		if it = strings.TrimSpace(it); it != "" && !isUnknownValue(strings.ToLower(it)) {
			items = append(items, it)
		}
	}
	return items
}
