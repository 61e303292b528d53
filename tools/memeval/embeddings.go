package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// With -embed-base-url, memoryd runs with embeddings: its items are embedded
// by the worker (memeval waits for all of them), and its enrich is hybrid.
// Two more rankers then stand beside it on the same items and questions:
// memoryd's lexical enrich (a second enrich service on the same store,
// without the embedder) and the vectors alone (the question's embedding
// against the user's item vectors, exact int8 cosine, no keywords, no
// time).

// startLexical starts an enrich service without embeddings on in's store
// and connection, under a prefix of its own, and returns its client.
func (in *instance) startLexical(ctx context.Context, logger *slog.Logger) (*events.Client, error) {
	st, err := in.app.Store(ctx)
	if err != nil {
		return nil, err
	}
	nc, err := in.app.Conn()
	if err != nil {
		return nil, err
	}
	svc, err := enricher.New(enricher.Config{Conn: nc, Store: st, Prefix: in.prefix + "lex", Timeout: 10 * time.Second, Logger: logger})
	if err != nil {
		return nil, err
	}
	if err := svc.Start(ctx); err != nil {
		return nil, err
	}
	in.lexical = svc // stopped by close before the app, whose connection it uses
	return events.NewClient(nc, in.prefix+"lex"), nil
}

// vectorRanker ranks a user's items by the cosine of their vector with the
// question's alone.
type vectorRanker struct {
	in  *instance
	emb *embedding.Client
}

func (vectorRanker) name() string { return "vector only" }

func (v vectorRanker) rank(ctx context.Context, h haystack, k int) ([][]string, error) {
	st, err := v.in.app.Store(ctx)
	if err != nil {
		return nil, err
	}
	user := v.in.userID(h)
	uv, err := st.UserVectors(ctx, user, v.emb.Model())
	if err != nil {
		return nil, err
	}
	eventIDs := map[int64]string{}
	for after := (store.ContextCursor{}); ; {
		page, err := st.ListContext(ctx, user, after, 1000)
		if err != nil {
			return nil, err
		}
		for _, it := range page {
			eventIDs[it.ID] = it.EventID
		}
		if len(page) < 1000 {
			break
		}
		last := page[len(page)-1]
		after = store.ContextCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	texts := make([]string, len(h.questions))
	for i, q := range h.questions {
		texts[i] = q.text
	}
	out := make([][]string, len(h.questions))
	if len(texts) == 0 {
		return out, nil
	}
	qs, err := v.emb.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	dims := len(qs[0])
	var ids []int64
	var stored [][]byte
	for _, e := range uv.Vectors {
		if e.Dims == dims {
			ids, stored = append(ids, e.ContextID), append(stored, e.Vector)
		}
	}
	if len(stored) == 0 {
		return out, nil
	}
	x, err := embedding.NewIndex(dims, stored)
	if err != nil {
		return nil, fmt.Errorf("user %s: %w", user, err)
	}
	for qi, q := range qs {
		for _, hit := range x.Search(embedding.Normalize(q), nil, embedding.SearchParams{K: k}).Hits {
			out[qi] = append(out[qi], eventIDs[ids[hit.I]])
		}
	}
	return out, nil
}
