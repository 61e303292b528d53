package worker

import (
	"context"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
)

// jobUsage is the tokens a run of a job spent on model calls and has not
// stored yet, by the turn each call was for. save stores it in the
// transaction that stores the calls' results (and then empties it);
// flushUsage stores what is left on every other way out, since tokens spent
// on a call that failed or whose results were not stored count too.
type jobUsage struct {
	model string
	turns []store.Turn
	used  []store.TokenUsage
}

// add counts one model call's tokens for turn t (a burst's: its newest).
func (u *jobUsage) add(t store.Turn, used extractor.Usage) {
	if used.PromptTokens == 0 && used.CompletionTokens == 0 {
		return
	}
	u.turns = append(u.turns, t)
	u.used = append(u.used, storeUsage(used))
}

func (u *jobUsage) len() int {
	if u == nil {
		return 0
	}
	return len(u.turns)
}

func (u *jobUsage) reset() {
	if u != nil {
		u.turns, u.used = u.turns[:0], u.used[:0]
	}
}

// addUsage adds spent (by user, from keepRemembered) in q's transaction.
func addUsage(ctx context.Context, q *store.Store, model string, day time.Time, spent map[string]store.TokenUsage) error {
	return q.AddUsageOn(ctx, day, model, spent)
}

// flushUsage stores what usage still holds, each call's tokens on their own
// (store.AddTurnUsage: unless a forget covers the turn), also when ctx is
// done (the tokens were spent), bounded. Losing a count is better than
// failing the job over it. After an error the user's other calls are
// dropped (they would wait and fail alike), and every call left when the
// database is out of reach; another user's are still stored: in a legacy
// job holding several users' turns, one user's lock wait (a forget) lost
// the others' counts. It returns the turns whose calls' tokens it could
// not store.
func (e *extractWorker) flushUsage(ctx context.Context, usage *jobUsage) (unstored map[store.TurnKey]bool) {
	type loss struct {
		calls int
		err   error
	}
	var lost map[string]*loss // by user, in the order met
	var users []string
	for i, t := range usage.turns {
		if l, ok := lost[t.UserID]; ok {
			l.calls++
			unstored[t.Key()] = true
			continue
		}
		// Bounded: a wait behind a forget or a dead connection must not
		// hold the job past its timeout or its process's lease.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), afterCancelTimeout)
		_, err := e.w.cfg.Store.AddTurnUsage(uctx, events.UserToken(t.UserID), t.Placed, t.UserID, usage.model, e.w.spendDay(), usage.used[i])
		cancel()
		if err == nil {
			continue
		}
		if dbUnreachable(err) {
			// Once a job, for the calls left: the next would wait and
			// fail alike (a walk logged a line a turn, 338 in 30 s,
			// each waiting up to afterCancelTimeout).
			e.w.logger.Warn("cannot record token usage", "user_id", t.UserID, "calls", len(usage.turns)-i, "error", err)
			if unstored == nil {
				unstored = make(map[store.TurnKey]bool)
			}
			for _, t := range usage.turns[i:] {
				unstored[t.Key()] = true
			}
			break
		}
		if lost == nil {
			lost, unstored = make(map[string]*loss), make(map[store.TurnKey]bool)
		}
		lost[t.UserID] = &loss{calls: 1, err: err}
		unstored[t.Key()] = true
		users = append(users, t.UserID)
	}
	for _, user := range users {
		e.w.logger.Warn("cannot record token usage", "user_id", user, "calls", lost[user].calls, "error", lost[user].err)
	}
	usage.reset()
	return unstored
}
