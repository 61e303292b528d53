package enricher

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// ContextManager is what the context item endpoints need beyond
// MemoryWriter (memory.context.list, .get, .update, .delete): reads of one
// user's items by position and by id. Updates run through MemoryWriter's
// InTx, deletes through its DeleteContext.
type ContextManager interface {
	ListScopedContext(ctx context.Context, userID, scope string, after store.ContextCursor, limit int) ([]store.ContextItem, error)
	ContextByID(ctx context.Context, userID string, id int64) (store.ContextItem, error)
}

// contextItems answers the context item endpoints.
type contextItems struct {
	store  ContextManager
	writes memoryWrites
}

func (s *Service) contextItems() contextItems {
	return contextItems{store: s.cfg.Store, writes: s.writes}
}

func (c contextItems) list(token string, data []byte) (call, error) {
	var req events.ContextListRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	if err := checkUser(token, req.UserID); err != nil {
		return nil, err
	}
	limit := events.DefaultContextPage
	if req.Limit != nil {
		if limit = *req.Limit; limit < 1 || limit > events.MaxContextPage {
			return nil, badRequest("limit %d is not in 1..%d", limit, events.MaxContextPage)
		}
	}
	if err := checkScope(req.Scope); err != nil {
		return nil, err
	}
	var after store.ContextCursor
	if c := req.After; c != nil {
		if c.ID < 1 || c.CreatedAt.IsZero() {
			return nil, badRequest(`after must be a previous reply's "next": {"created_at", "id"}`)
		}
		after = store.ContextCursor{CreatedAt: c.CreatedAt, ID: c.ID}
	}
	return func(ctx context.Context) (any, error) {
		// One more than the page, to know whether a next page exists.
		items, err := c.store.ListScopedContext(ctx, req.UserID, req.Scope, after, limit+1)
		if err != nil {
			return nil, err
		}
		// Cut to the payload limit when sent (contextPage).
		return contextPage(wireItems(items), limit), nil
	}, nil
}

func (c contextItems) get(token string, data []byte) (call, error) {
	req, err := decodeItem(token, data)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		it, err := c.store.ContextByID(ctx, req.UserID, req.ID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, noItem(req.ID)
		}
		if err != nil {
			return nil, err
		}
		return wireItems([]store.ContextItem{it})[0], nil
	}, nil
}

func (c contextItems) update(token string, data []byte) (call, error) {
	var req events.ContextUpdateRequest
	if err := decodeWrite(data, &req); err != nil {
		return nil, err
	}
	if err := checkUser(token, req.UserID); err != nil {
		return nil, err
	}
	if req.ID <= 0 {
		return nil, contextIDError(req.ID)
	}
	if req.Question == nil && req.Answer == nil {
		return nil, badRequest(`set "question", "answer" or both to say what to change`)
	}
	if req.Question != nil {
		if strings.TrimSpace(*req.Question) == "" {
			return nil, badRequest("question cannot be empty")
		}
		if err := checkText("question", *req.Question, events.MaxQuestionBytes); err != nil {
			return nil, err
		}
	}
	if req.Answer != nil {
		if err := checkText("answer", *req.Answer, events.MaxAnswerBytes); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context) (any, error) {
		var it store.ContextItem
		err := c.writes.forgetSafe(ctx, req.UserID, func(q *store.Store) (err error) {
			it, err = q.UpdateContext(ctx, store.ContextUpdate{UserID: req.UserID, ID: req.ID, Question: req.Question, Answer: req.Answer, Check: pairExports})
			return err
		})
		var dup *store.DuplicateError
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, noItem(req.ID)
		case errors.As(err, &dup):
			return nil, &events.ServiceError{Code: 409, Description: fmt.Sprintf(
				"context item %d already holds this question and answer; nothing was changed (delete one of the two items to keep the other)", dup.ID)}
		case err != nil:
			return nil, err
		}
		return wireItems([]store.ContextItem{it})[0], nil
	}, nil
}

func (c contextItems) delete(token string, data []byte) (call, error) {
	req, err := decodeItem(token, data)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		n, err := c.writes.store.DeleteContext(ctx, store.ContextDelete{UserID: req.UserID, ID: req.ID})
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, noItem(req.ID)
		}
		return events.DeletedReply{Deleted: n}, nil
	}, nil
}

// checkScope checks a request's optional scope (issue 16 item 7) as a
// turn's is checked: "" is none.
func checkScope(scope string) error {
	return checkText("scope", scope, events.MaxScopeBytes)
}

// decodeItem decodes a request naming one context item.
func decodeItem(token string, data []byte) (events.ContextItemRequest, error) {
	var req events.ContextItemRequest
	if err := decode(data, &req); err != nil {
		return req, err
	}
	if err := checkUser(token, req.UserID); err != nil {
		return req, err
	}
	if req.ID <= 0 {
		return req, contextIDError(req.ID)
	}
	return req, nil
}

// noItem is the reply to an id the user has no item with; another user's
// item is answered the same way, so ids reveal nothing across users.
func noItem(id int64) error {
	return &events.ServiceError{Code: 404, Description: fmt.Sprintf("no context item %d", id)}
}

// contextIDError is the 400 of a request's id that names no context item:
// absent (0) or negative.
func contextIDError(id int64) error {
	if id == 0 {
		return badRequest("id is required: the context item's id (1 or more), as search, context.list and enrich's context give it")
	}
	return badRequest("id %d is not a context item id", id)
}
