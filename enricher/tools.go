package enricher

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

func (s *Service) search(token string, data []byte) (call, error) {
	var req events.SearchRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	if err := checkUser(token, req.UserID); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Query) == "" {
		return nil, badRequest("query is required")
	}
	if len(req.Query) > events.MaxMessageBytes {
		return nil, badRequest("query is %d bytes, over the %d byte limit", len(req.Query), events.MaxMessageBytes)
	}
	limit := events.DefaultSearchResults
	if req.MaxResults != nil {
		if limit = *req.MaxResults; limit < 1 || limit > events.MaxMaxResults {
			return nil, badRequest("max_results %d is not in 1..%d", limit, events.MaxMaxResults)
		}
	}
	return func(ctx context.Context) (any, error) {
		items, err := s.cfg.Store.SearchContext(ctx, store.SearchQuery{UserID: req.UserID, Keywords: Keywords(req.Query), Limit: limit})
		if err != nil {
			return nil, err
		}
		return events.SearchReply{Results: wireItems(items)}, nil
	}, nil
}

func (s *Service) storeContext(token string, data []byte) (call, error) {
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
	return func(ctx context.Context) (any, error) {
		var (
			id     int64
			stored bool
		)
		err := s.forgetSafe(ctx, req.UserID, func(q *store.Store) (err error) {
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

func (s *Service) clearContext(token string, data []byte) (call, error) {
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
	return func(ctx context.Context) (any, error) {
		n, err := s.cfg.Store.DeleteContext(ctx, store.ContextDelete{UserID: req.UserID, ID: req.ID, Question: req.Question, All: req.All})
		if err != nil {
			return nil, err
		}
		return events.DeletedReply{Deleted: n}, nil
	}, nil
}

func (s *Service) setFact(token string, data []byte) (call, error) {
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
	return func(ctx context.Context) (any, error) {
		var (
			f      store.Fact
			stored bool
		)
		err := s.forgetSafe(ctx, req.UserID, func(q *store.Store) (err error) {
			f, stored, err = q.SetFact(ctx, req.UserID, key, req.Value)
			return err
		})
		if err != nil {
			return nil, err
		}
		reply := events.SetFactReply{OK: stored, Fact: events.Fact{Key: f.Key, Value: f.Value, UpdatedAt: f.UpdatedAt.UTC()}}
		if !stored {
			reply.Reason = fmt.Sprintf("a turn stamped %s, later than this request, set %q; that value stays current",
				f.SourceAt.UTC().Format(time.RFC3339), key)
		}
		return reply, nil
	}, nil
}

func (s *Service) getFact(token string, data []byte) (call, error) {
	var req events.FactRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	key, err := checkKey(token, req.UserID, req.Key)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		f, err := s.cfg.Store.Fact(ctx, req.UserID, key)
		if errors.Is(err, store.ErrNotFound) {
			return nil, &events.ServiceError{Code: 404, Description: fmt.Sprintf("no fact %q", key)}
		}
		if err != nil {
			return nil, err
		}
		return events.Fact{Key: f.Key, Value: f.Value, UpdatedAt: f.UpdatedAt}, nil
	}, nil
}

func (s *Service) clearFact(token string, data []byte) (call, error) {
	var req events.FactRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	key, err := checkKey(token, req.UserID, req.Key)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		n, err := s.cfg.Store.DeleteFact(ctx, req.UserID, key)
		if err != nil {
			return nil, err
		}
		return events.DeletedReply{Deleted: n}, nil
	}, nil
}

func (s *Service) listFacts(token string, data []byte) (call, error) {
	req, err := decodeUser(token, data)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		facts, err := s.cfg.Store.Facts(ctx, req.UserID, maxListFacts)
		if err != nil {
			return nil, err
		}
		return events.FactsReply{Facts: wireFacts(facts)}, nil
	}, nil
}

func (s *Service) userStats(token string, data []byte) (call, error) {
	req, err := decodeUser(token, data)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		st, err := s.cfg.Store.Stats(ctx, req.UserID)
		if err != nil {
			return nil, err
		}
		return events.StatsReply{
			TurnsReceived:   st.TurnsReceived,
			TurnsProcessed:  st.TurnsProcessed,
			TurnsFailed:     st.TurnsFailed,
			TurnsPending:    st.TurnsPending,
			JobsPending:     st.TurnsPending,
			Facts:           st.Facts,
			ContextItems:    st.ContextItems,
			LastProcessedAt: st.LastProcessedAt,
			LLMUsage:        wireUsage(st.LLMUsage), // never nil: {} for a user without usage
		}, nil
	}, nil
}

// decodeUser decodes a request that names only the user, checking it
// against the subject's token.
func decodeUser(token string, data []byte) (events.UserRequest, error) {
	var req events.UserRequest
	if err := decode(data, &req); err != nil {
		return req, err
	}
	return req, checkUser(token, req.UserID)
}

// forgetSafe runs a direct write (store, facts.set) holding the user's
// forget lock shared: a forget running at the same time either waits for it
// and deletes what it wrote, or committed first, and the write then starts
// the new memory a write after a forget is documented to start. Without the
// lock, a write committing between the forget's deletes and its commit
// survived a forget that answered ok.
func (s *Service) forgetSafe(ctx context.Context, userID string, write func(q *store.Store) error) error {
	return s.cfg.Store.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
		if _, err := q.LockUsers(ctx, []string{events.UserToken(userID)}); err != nil {
			return err
		}
		return write(q)
	})
}
