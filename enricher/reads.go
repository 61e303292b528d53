package enricher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// MemoryReader is what the read tools need (search, facts.get, facts.list,
// facts.history, stats): explicit reads of one user's memory and counters.
type MemoryReader interface {
	// SearchCandidates and ContextTexts are a search's reads: ranking
	// first (lexical or hybrid), then the hits' texts.
	SearchCandidates(ctx context.Context, q store.SearchQuery) (store.Candidates, error)
	ContextTexts(ctx context.Context, userID string, items []store.ContextItem) ([]store.ContextItem, error)
	// StopWords caps a long query's keywords again (languageRecap).
	StopWords(ctx context.Context, userID string, words []string) (map[string]bool, error)
	Fact(ctx context.Context, userID, key string) (store.Fact, error)
	FactsAfter(ctx context.Context, userID string, afterSourceAt time.Time, afterKey string, limit int) ([]store.Fact, error)
	KeyHistory(ctx context.Context, q store.KeyHistoryQuery) ([]store.FactChange, int64, error)
	Stats(ctx context.Context, userID string) (store.UserStats, error)
	// CountUserEmbeddings counts the user's items without a vector of the
	// model, for stats.
	CountUserEmbeddings(ctx context.Context, userID, model string) (store.EmbeddingCount, error)
}

// maxListFacts is the most facts a facts.list page holds; fewer when they
// would be over the NATS payload limit.
const maxListFacts = 1000

// memoryReads answers the read tools.
type memoryReads struct {
	store MemoryReader
	// dailyCap is Config.DailyTokensPerUser, shown in stats.
	dailyCap int64
	// hybrid makes search hybrid (hybrid.go); nil: lexical.
	hybrid *hybrid
	// small is the service's, shared with enrich.
	small *smallUsers
	// logger is the service's.
	logger *slog.Logger
}

func (r memoryReads) search(token string, data []byte) (call, error) {
	// Since and Until shadow the embedded fields to tell a bound sent as
	// the zero time from an absent one (sentTime).
	var wire struct {
		events.SearchRequest
		Since sentTime `json:"since"`
		Until sentTime `json:"until"`
	}
	if err := decode(data, &wire); err != nil {
		return nil, err
	}
	req := wire.SearchRequest
	req.Since, req.Until = wire.Since.t, wire.Until.t
	if err := checkUser(token, req.UserID); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Query) == "" {
		return nil, badRequest("query is required")
	}
	if len(req.Query) > events.MaxMessageBytes {
		return nil, badRequest("query is %d bytes, over the %d byte limit", len(req.Query), events.MaxMessageBytes)
	}
	if err := checkScope(req.Scope); err != nil {
		return nil, err
	}
	if err := checkRange(wire.Since, wire.Until); err != nil {
		return nil, err
	}
	limit := events.DefaultSearchResults
	if req.MaxResults != nil {
		if limit = *req.MaxResults; limit < 1 || limit > events.MaxMaxResults {
			return nil, badRequest("max_results %d is not in 1..%d", limit, events.MaxMaxResults)
		}
	}
	return func(ctx context.Context) (any, error) {
		kws, over := keywords(req.Query)
		grammar := europeanGrammar(req.Query)
		if ks := withoutGrammar(grammar, kws); len(ks) > 0 {
			// As enrich: "qu'est-ce que j'ai dit sur le vélo" searched
			// est, que and dit as English words, found in every French
			// item. A query of grammar alone keeps its words.
			kws = ks
		}
		if over != nil {
			// A long query in another language than English keeps its
			// subject, as enrich's does (languageKeywords).
			capped, err := languageRecap(ctx, r.store, req.UserID, grammar, over)
			if err != nil {
				return nil, err
			}
			if capped[0] != nil {
				kws = capped[0]
			}
		}
		q := store.SearchQuery{UserID: req.UserID, Keywords: kws, Scope: req.Scope, Since: req.Since, Until: req.Until}
		// Rank first, then read the hits' texts: a heavy user's search
		// matched thousands of items of ~2 KB, all read to keep a few
		// (docs/performance.md, "A heavy user's candidates, pruned").
		read := func(ctx context.Context, q store.SearchQuery) ([]store.Fact, store.Candidates, error) {
			c, err := r.store.SearchCandidates(ctx, q)
			return nil, c, err
		}
		var (
			cands store.Candidates
			items []store.ContextItem
			err   error
		)
		// Search's budget (WriteTimeout) leaves the store ample time.
		if qv := r.hybrid.embed(ctx, req.UserID, req.Query, 0); qv != nil {
			var vec map[int64]float64
			if _, cands, vec, err = r.hybrid.recall(ctx, q, qv, limit, read); err != nil {
				return nil, err
			}
			items = fuse(cands, vec, time.Time{}, 0, limit)
		} else {
			if _, cands, items, _, err = PrunedRead(ctx, read, q, r.small.prune(q.UserID), time.Time{}, 0, limit); err != nil {
				return nil, err
			}
			// A search of no usable keyword ("?") reads nothing (no
			// round trip): its zero items count nothing.
			if q.Prunable() && cands.Stats.Items > 0 {
				r.small.record(q.UserID, cands.Stats.Items)
			}
		}
		if !cands.Texts {
			if items, err = r.store.ContextTexts(ctx, req.UserID, items); err != nil {
				return nil, err
			}
		}
		return searchResults{events.SearchReply{Results: wireItems(items)}}, nil
	}, nil
}

func (r memoryReads) getFact(token string, data []byte) (call, error) {
	var req events.FactRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	key, err := checkKey(token, req.UserID, req.Key)
	if err != nil {
		return nil, err
	}
	key, _ = listKey(key) // as facts.set stores it
	return func(ctx context.Context) (any, error) {
		f, err := r.store.Fact(ctx, req.UserID, key)
		if errors.Is(err, store.ErrNotFound) {
			return nil, &events.ServiceError{Code: 404, Description: fmt.Sprintf("no fact %q", key)}
		}
		if err != nil {
			return nil, err
		}
		return wireFact(f), nil
	}, nil
}

func (r memoryReads) listFacts(token string, data []byte) (call, error) {
	var req events.FactsListRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	if err := checkUser(token, req.UserID); err != nil {
		return nil, err
	}
	var after events.FactCursor
	if req.After != nil {
		if after = *req.After; after.Key == "" || after.SourceAt.IsZero() {
			return nil, badRequest(`after must be a previous reply's "next": {"source_at", "key"}`)
		}
		if err := checkText("after.key", after.Key, events.MaxFactKeyBytes); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context) (any, error) {
		// One more than the page, to know whether a next page exists.
		facts, err := r.store.FactsAfter(ctx, req.UserID, after.SourceAt, after.Key, maxListFacts+1)
		if err != nil {
			return nil, err
		}
		// Cut to the payload limit when sent (factsPage).
		return factsPage(wireFacts(facts), maxListFacts), nil
	}, nil
}

// factHistory answers facts.history: a page of one key's changes, newest
// first. A key never set has an empty history, not a 404: a cleared fact
// still has one.
func (r memoryReads) factHistory(token string, data []byte) (call, error) {
	var req events.FactHistoryRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	key, err := checkKey(token, req.UserID, req.Key)
	if err != nil {
		return nil, err
	}
	key, _ = listKey(key) // as facts.set stores it
	limit := events.DefaultHistoryResults
	if req.MaxResults != nil {
		if limit = *req.MaxResults; limit < 1 || limit > events.MaxHistoryResults {
			return nil, badRequest("max_results %d is not in 1..%d", limit, events.MaxHistoryResults)
		}
	}
	if req.Before < 0 {
		return nil, badRequest("before %d is negative", req.Before)
	}
	return func(ctx context.Context) (any, error) {
		changes, next, err := r.store.KeyHistory(ctx, store.KeyHistoryQuery{UserID: req.UserID, Key: key, Before: req.Before, Limit: limit})
		if err != nil {
			return nil, err
		}
		return historyPage{events.FactHistoryReply{Key: key, Changes: wireChanges(changes), NextBefore: next}}, nil
	}, nil
}

func (r memoryReads) userStats(token string, data []byte) (call, error) {
	req, err := decodeUser(token, data)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		st, err := r.store.Stats(ctx, req.UserID)
		if err != nil {
			return nil, err
		}
		reply := wireStats(st)
		reply.LLMDailyTokenCap = r.dailyCap
		if r.hybrid != nil {
			// The items hybrid search finds by their words only: an
			// operator saw them nowhere (a server refusing long texts, or
			// jobs given up while it was down).
			// The field is optional: a failed count leaves it out, and
			// the counts read above still answer. Before, it failed the
			// whole reply (TestStatsAnswerWithoutTheEmbeddingsCount).
			n, err := r.store.CountUserEmbeddings(ctx, req.UserID, r.hybrid.model)
			if err != nil {
				r.logger.WarnContext(ctx, "memory.stats answered without its embeddings count, which failed", "user_id", req.UserID, "embed_model", r.hybrid.model, "error", err)
			} else {
				reply.Embeddings = &events.EmbeddingStats{Model: r.hybrid.model, ItemsWithoutVector: max(n.Items-n.Embedded, 0), Refused: n.Refused}
			}
		}
		return reply, nil
	}, nil
}
