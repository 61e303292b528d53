package enricher

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// MemoryWriter is what the write tools need (store, clear, facts.set,
// facts.clear): deletes, and a transaction for the direct writes.
type MemoryWriter interface {
	DeleteContext(ctx context.Context, d store.ContextDelete) (int64, error)
	DeleteFact(ctx context.Context, userID, key string) (int64, error)
	// InTx runs the direct writes (store, facts.set) in a transaction that
	// holds the user's forget lock (see forgetSafe).
	InTx(ctx context.Context, fn func(pgx.Tx, *store.Store) error) error
}

// memoryWrites answers the write tools. Each reply is sent after Postgres
// committed.
type memoryWrites struct {
	store MemoryWriter
}

func (w memoryWrites) storeContext(token string, data []byte) (call, error) {
	var req events.StoreRequest
	if err := decodeWrite(data, &req); err != nil {
		return nil, err
	}
	if err := checkUser(token, req.UserID); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Question) == "" {
		return nil, badRequest("question is required")
	}
	if err := checkText("question", req.Question, events.MaxQuestionBytes); err != nil {
		return nil, err
	}
	if err := checkText("answer", req.Answer, events.MaxAnswerBytes); err != nil {
		return nil, err
	}
	if err := pairExports(req.Question, req.Answer); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		var (
			id     int64
			stored bool
		)
		err := w.forgetSafe(ctx, req.UserID, func(q *store.Store) (err error) {
			id, stored, err = q.StoreContext(ctx, store.ContextWrite{
				UserID:     req.UserID,
				Question:   req.Question,
				Answer:     req.Answer,
				Provenance: store.Provenance{Extractor: "direct"},
			})
			return err
		})
		if err != nil {
			return nil, err
		}
		return events.StoreReply{ID: id, Stored: stored}, nil
	}, nil
}

func (w memoryWrites) clearContext(token string, data []byte) (call, error) {
	var req events.ClearRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	if err := checkUser(token, req.UserID); err != nil {
		return nil, err
	}
	switch {
	case req.ID < 0:
		return nil, badRequest("id %d is not a context item id", req.ID)
	case req.ID == 0 && strings.TrimSpace(req.Question) == "" && !req.All:
		return nil, badRequest(`set "id", "question", or "all": true to say what to forget`)
	case req.All && (req.ID != 0 || req.Question != ""):
		return nil, badRequest(`"all" cannot be combined with "id" or "question"`)
	}
	// The question is looked up: held to store's limits, a NUL or an
	// oversized one is a 400, not a clear of nothing (and a clear record).
	if err := checkText("question", req.Question, events.MaxQuestionBytes); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		n, err := w.store.DeleteContext(ctx, store.ContextDelete{UserID: req.UserID, ID: req.ID, Question: req.Question, All: req.All})
		if err != nil {
			return nil, err
		}
		return events.DeletedReply{Deleted: n}, nil
	}, nil
}

func (w memoryWrites) setFact(token string, data []byte) (call, error) {
	var req events.SetFactRequest
	if err := decodeWrite(data, &req); err != nil {
		return nil, err
	}
	key, err := checkKey(token, req.UserID, req.Key)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Value) == "" {
		return nil, badRequest("value is required (use facts.clear to delete a fact)")
	}
	if err := checkText("value", req.Value, events.MaxFactValueBytes); err != nil {
		return nil, err
	}
	// A list key (events vocabulary) holds items: the value is the whole
	// list, and an alias of a list key names the canonical key, so that
	// the items land where extraction adds and removes them. Other keys are
	// stored as sent.
	key, list := listKey(key)
	var items []string
	if list {
		if items, err = listItems(req.Value); err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return nil, badRequest("value holds no item (use facts.clear to delete a fact)")
		}
	}
	return func(ctx context.Context) (any, error) {
		var (
			f      store.Fact
			stored bool
		)
		err := w.forgetSafe(ctx, req.UserID, func(q *store.Store) (err error) {
			if list {
				f, stored, err = q.SetFactValues(ctx, req.UserID, key, items)
			} else {
				// Trimmed, as a key and list items are: "  Lisbon  "
				// stored its spaces, and matched no "Lisbon" said later.
				f, stored, err = q.SetFact(ctx, req.UserID, key, strings.TrimSpace(req.Value))
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		reply := events.SetFactReply{OK: stored, Fact: wireFact(f)}
		switch {
		case stored:
		case list:
			reply.Reason = fmt.Sprintf("a turn stamped later than this request changed %q; what it said stays current", key)
		case f.Key == "":
			// No value is current: a turn stamped later deleted the key.
			reply.Fact = events.Fact{Key: key}
			reply.Reason = fmt.Sprintf("a turn stamped later than this request said %q is no longer true; it stays deleted", key)
		default:
			reply.Reason = fmt.Sprintf("a turn stamped %s, later than this request, set %q; that value stays current",
				f.SourceAt.UTC().Format(time.RFC3339), key)
		}
		return reply, nil
	}, nil
}

// listKey returns the key a tool's key names and whether it is a list
// key: an alias of a list key (events vocabulary) names the canonical key,
// where extraction adds and removes the list's items, in every fact tool
// (set, get, clear, history); any other key is itself.
func listKey(key string) (string, bool) {
	if canonical, list := events.CanonicalFactKey(key); list {
		return canonical, true
	}
	return key, false
}

// listItems returns the items of a list key's value (splitItems), or,
// for a value written as a JSON array of strings (events.ListArray), its
// strings' items. A value in brackets that is no such array is a 400: it
// is a list mistyped, not items.
func listItems(v string) ([]string, error) {
	strs, bracketed, ok := events.ListArray(v)
	switch {
	case !bracketed:
		return splitItems(v), nil
	case !ok:
		return nil, badRequest(`value %s looks like a JSON array but is not one of strings: send the items separated by commas ("climbing, go") or as a JSON array of strings`, quoteShort(strings.TrimSpace(v)))
	}
	var items []string
	for _, a := range strs {
		items = append(items, splitItems(a)...)
	}
	return items, nil
}

// quoteShort quotes s, its first 40 bytes when longer, for an error.
func quoteShort(s string) string {
	if len(s) > 40 {
		i := 40
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		return strconv.Quote(s[:i]) + "…"
	}
	return strconv.Quote(s)
}

// splitItems splits a list key's value at commas and semicolons into its
// items, trimmed, empty ones dropped.
func splitItems(v string) []string {
	var items []string
	for _, it := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ';' }) {
		if it = strings.TrimSpace(it); it != "" {
			items = append(items, it)
		}
	}
	return items
}

func (w memoryWrites) clearFact(token string, data []byte) (call, error) {
	var req events.FactRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	key, err := checkKey(token, req.UserID, req.Key)
	if err != nil {
		return nil, err
	}
	// The store clears a list key's items with its fact.
	key, _ = listKey(key)
	return func(ctx context.Context) (any, error) {
		n, err := w.store.DeleteFact(ctx, req.UserID, key)
		if err != nil {
			return nil, err
		}
		return events.DeletedReply{Deleted: n}, nil
	}, nil
}

// forgetSafe runs a direct write (store, facts.set) holding the user's
// forget lock shared: a forget running at the same time either waits for it
// and deletes what it wrote, or committed first, and the write then starts
// the new memory a write after a forget is documented to start. Without the
// lock, a write committing between the forget's deletes and its commit
// survived a forget that answered ok.
func (w memoryWrites) forgetSafe(ctx context.Context, userID string, write func(q *store.Store) error) error {
	return w.store.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
		if _, err := q.LockUsers(ctx, []string{events.UserToken(userID)}); err != nil {
			return err
		}
		return write(q)
	})
}

// maxExportedPair bounds a stored pair's question and answer as JSON
// writes them (escapedLen): an item's export line must fit one import
// request (events.MaxImportRequestBytes, less room for the line's other
// fields and the request's header), or its backup could not be imported
// back. A turn's text fits by its own limit (512 KiB as JSON); only text
// stored directly, mostly control characters (6 bytes each as JSON), can
// be over.
const maxExportedPair = events.MaxImportRequestBytes - 16<<10

// pairExports refuses a pair whose export line no import could take.
func pairExports(question, answer string) error {
	if n := escapedLen(question) + escapedLen(answer); n > maxExportedPair {
		return badRequest("question and answer would take %d bytes in an export (a control character takes 6), over the %d an item's line may take to be imported back: leave out the control characters, or shorten the text", n, maxExportedPair)
	}
	return nil
}
