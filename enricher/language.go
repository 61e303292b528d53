package enricher

import (
	"context"
	"fmt"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// languageTimeout bounds a language request (the endpoint's budget in
// place of Config.WriteTimeout): a change re-indexes every item of the
// user in one transaction, 1.4 s for 6,076 items on a quiet server, and
// past 5 s under load, where the write budget refused it (a user probe).
const languageTimeout = time.Minute

// maxQuotedLanguage bounds how much of a refused language the error
// quotes.
const maxQuotedLanguage = 40

// language answers memory.language: it reads the user's language, or sets
// it (events.TextSearchConfig maps it to a configuration; an unknown one is
// a 400 naming the field). The set runs under the user's forget lock, like
// the other direct writes, and re-indexes the user's items in the same
// transaction (store.SetLanguage).
func (w memoryWrites) language(token string, data []byte) (call, error) {
	var req events.LanguageRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	if err := checkUser(token, req.UserID); err != nil {
		return nil, err
	}
	lang := req.Language
	config, ok := "", true
	if lang != "" {
		if config, ok = events.TextSearchConfig(lang); !ok {
			if len(lang) > maxQuotedLanguage {
				// The precision counts runes: no character is cut in two.
				lang = fmt.Sprintf("%.*s...", maxQuotedLanguage, lang)
			}
			return nil, badRequest("language %q is not one memoryd accepts: a lower-case ISO 639-1 code, English name or \"simple\" from docs/protocol.md (Languages)", lang)
		}
	}
	return func(ctx context.Context) (any, error) {
		var (
			l store.Language
			n int64
		)
		err := w.forgetSafe(ctx, req.UserID, func(q *store.Store) (err error) {
			if config != "" {
				if n, err = q.SetLanguage(ctx, req.UserID, lang, config); err != nil {
					return err
				}
			}
			l, err = q.UserLanguage(ctx, req.UserID)
			return err
		})
		if err != nil {
			return nil, err
		}
		if l.Language == "" {
			l.Language = events.DefaultLanguage
		}
		return events.LanguageReply{Language: l.Language, Config: l.Config, Reindexed: n}, nil
	}, nil
}
