package enricher

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/attribute"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// Recaller is what enrich reads: in one call, the user's facts and the
// candidates for the context items relevant to a message, then the texts of
// the items ranking keeps.
type Recaller interface {
	Recall(ctx context.Context, q store.RecallQuery) ([]store.Fact, store.Candidates, error)
	ContextTexts(ctx context.Context, userID string, items []store.ContextItem) ([]store.ContextItem, error)
	// StopWords is asked only for a message whose keywords the cap cut
	// (languageKeywords).
	StopWords(ctx context.Context, userID string, words []string) (map[string]bool, error)
}

// enrichHandler answers enrich requests. Whatever Postgres does, exactly one
// reply goes out no later than Timeout after arrival: the store's answer if
// it comes in time, a degraded reply otherwise. A timer guards the bound
// even if a store call were to ignore its context.
func (s *Service) enrichHandler(ep endpoint) micro.Handler {
	st := s.stats[ep.name]
	return micro.HandlerFunc(func(req micro.Request) {
		received := time.Now()
		deadline := received.Add(s.cfg.Timeout)
		p, err := s.parseEnrich(subjectToken(req.Subject()), req.Data())
		if err != nil {
			s.replyError(req, ep, err)
			return
		}
		if p.optOut {
			s.publish(ep.name, req.Reply(), p.reply(received))
			return
		}
		reply := req.Reply()
		p.embedNanos = new(atomic.Int64)
		spanCtx, span := s.startSpan(req, ep.name, subjectToken(req.Subject()))
		var replied atomic.Bool
		mark := s.newAnswerMark()
		// answer sends r, degraded for why (a Degraded constant, "" when
		// the store answered; a reply that lost only its documents says so
		// itself).
		answer := func(r events.EnrichReply, why string) {
			if !replied.CompareAndSwap(false, true) {
				return
			}
			mark.answered()
			if span.IsRecording() {
				span.SetAttributes(attribute.Bool("memoryd.degraded", r.Degraded), attribute.Int("memoryd.facts", len(r.Facts)),
					attribute.Int("memoryd.context", len(r.Context)), attribute.Int("memoryd.tokens", r.Tokens))
			}
			code := 0
			defer func() { endSpan(span, code) }()
			took := time.Since(received)
			r.TookMS = millis(took)
			if r.Degraded && why == "" {
				why = DegradedDocuments
			}
			if s.cfg.Observer != nil {
				s.cfg.Observer.Enriched(took, time.Duration(p.embedNanos.Load()), why)
			}
			if r.Degraded {
				st.degraded.Add(1)
				s.logger.Warn(msgDegraded, "user_id", p.userID, "reason", r.Reason, "took_ms", r.TookMS)
			} else if s.logger.Enabled(context.Background(), slog.LevelDebug) {
				// Checked first: the arguments would be boxed on every
				// request even when debug is off.
				s.logger.Debug("enrich", "user_id", p.userID, "facts", len(r.Facts), "context", len(r.Context), "tokens", r.Tokens, "took_ms", r.TookMS)
			}
			code = s.publish(ep.name, reply, r)
		}
		timedOut := func() string { return fmt.Sprintf("memory store did not answer within %s", s.cfg.Timeout) }
		// read is the request once its message is read (analyze, on the
		// request goroutine); until then the guard's and the overload's
		// degraded replies list no keywords.
		var read atomic.Pointer[enrichParams]
		current := func() enrichParams {
			if a := read.Load(); a != nil {
				return *a
			}
			return p
		}
		s.dispatch(ep.lane, subjectToken(req.Subject()), deadline, mark, func() {
			if s.working != nil {
				s.working.EnrichWorking(true)
				defer s.working.EnrichWorking(false)
			}
			// ForRequest: a connection opened for this request is not
			// warmed first (store.Config.WarmStatements).
			ctx, cancel := context.WithDeadline(store.ForRequest(spanCtx), deadline)
			defer cancel()
			// The guard answers at the deadline even if the store call does
			// not return; it shares the context's timer.
			guard := context.AfterFunc(ctx, func() {
				if errors.Is(ctx.Err(), context.DeadlineExceeded) {
					answer(current().degraded(timedOut()), DegradedTimeout)
				}
			})
			defer guard()
			var late sync.WaitGroup
			defer late.Wait() // after the answer, before the slot is freed
			a := p.analyze()
			a.late = &late
			read.Store(&a)
			r, err := s.enrich(ctx, a)
			st.workCount.Add(1)
			st.workNanos.Add(int64(time.Since(received)))
			var bad *events.ServiceError
			switch {
			case err == nil:
				answer(r, "")
			case errors.As(err, &bad):
				// A request only the store can find bad (a collection the
				// user may not read) is the sender's to fix: an error, not a
				// degraded reply.
				if replied.CompareAndSwap(false, true) {
					mark.answered()
					s.replyError(req, ep, err)
					endSpan(span, bad.Code)
				}
			case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
				s.logger.Debug("enrich store timeout", "user_id", p.userID, "error", err)
				answer(a.degraded(timedOut()), DegradedTimeout)
				s.warm()
			default:
				s.logger.Error(msgStoreFailed, "user_id", p.userID, "error", err)
				answer(a.degraded("memory store unavailable"), DegradedStoreUnavailable)
				s.warm()
			}
		}, func() {
			answer(p.degraded("memoryd is overloaded"), DegradedOverloaded)
		})
	})
}

// enrichParams is a validated enrich request.
type enrichParams struct {
	userID  string
	message string
	// grammar is europeanGrammar(message): the grammar words its keywords
	// leave out, and their recap too.
	grammar map[string]bool
	// embedNanos is how long the query's embedding took, set while the
	// request runs and read by its reply (which the deadline's guard may
	// send from another goroutine).
	embedNanos *atomic.Int64
	// late, when set, counts the document searches enrich gave up at
	// their deadline and left running (documentsBy): the handler waits
	// for them after answering.
	late *sync.WaitGroup
	// qvec is the request's query vector, shared by its context and
	// documents reads (dochybrid.go); set by enrich.
	qvec     *queryVector
	keywords []string
	// factWords are the message's stop words when they are all it has
	// (keywords is then empty): facts are still selected by them, since
	// keyTopics reads "from" in "where am I from?" as hometown's topic and
	// stop words never match a fact's own words.
	factWords  []string
	maxResults int
	threshold  float64
	maxTokens  int
	at         time.Time
	format     string
	optOut     bool
	// facts is events.FactsRelevant or events.FactsAll.
	facts string
	// scope narrows the context items to one scope; "" is all.
	scope string
	// when is the message's time expression, if timed (see ParseTime);
	// timeKeywords are the keywords without it (timeKeywords).
	when         TimeExpr
	timed        bool
	timeKeywords []string
	// over and timeOver are the sets keywords and timeKeywords were capped
	// from, when the cap cut them (languageKeywords); else nil.
	over, timeOver *keywordSet
	// named are the message's short names (shortNames), read once with
	// its keywords for the steps that take stop words out.
	named map[string]bool
	// collections are the document collections to include chunks of
	// (none: no documents, and no documents field in the reply), at most
	// docsMaxResults chunks scoring docsThreshold or more.
	collections []string
	// defaultDocs: the request had no collections field, so the user's
	// default collections are searched (the reply has a documents field
	// when they gave chunks).
	defaultDocs    bool
	docsMaxResults int
	docsThreshold  float64
}

func (p enrichParams) reply(received time.Time) events.EnrichReply {
	r := events.EnrichReply{
		UserID:   p.userID,
		Facts:    []events.Fact{},
		Context:  []events.ContextItem{},
		Keywords: p.keywords,
		TookMS:   millis(time.Since(received)),
	}
	if len(p.collections) > 0 {
		r.Documents = []events.DocumentChunk{}
	}
	return r
}

func (p enrichParams) degraded(reason string) events.EnrichReply {
	r := p.reply(time.Now())
	r.Degraded, r.Reason = true, reason
	return r
}

func (s *Service) parseEnrich(token string, data []byte) (enrichParams, error) {
	// At shadows the embedded field to tell the zero time sent from an
	// absent at (sentTime): only absent means now.
	var wire struct {
		events.EnrichRequest
		At sentTime `json:"at"`
	}
	if err := decode(data, &wire); err != nil {
		return enrichParams{}, err
	}
	req := wire.EnrichRequest
	req.At = wire.At.t
	if !req.At.IsZero() {
		// In its own offset, as the source dates are (datesIn): Go's
		// decoder takes an offset the host's zone uses at that instant for
		// that zone, so on a host set to a zone with summer time the days
		// of the message's time expressions moved with the host's rules,
		// not the user's (a -05:00 user's June 15 was New York's).
		req.At = req.At.In(datesIn(req.At))
	}
	if err := checkUser(token, req.UserID); err != nil {
		return enrichParams{}, err
	}
	p := enrichParams{
		userID:     req.UserID,
		message:    req.Message,
		maxResults: events.DefaultMaxResults,
		threshold:  events.DefaultThreshold,
		maxTokens:  events.DefaultMaxTokens,
		at:         req.At,
		format:     req.Format,
		facts:      req.Facts,
		optOut:     req.Memory != nil && !*req.Memory,
		keywords:   []string{},
		scope:      req.Scope,

		docsMaxResults: events.DefaultDocsMaxResults,
		docsThreshold:  events.DefaultDocsThreshold,
	}
	if strings.TrimSpace(req.Message) == "" {
		return p, badRequest("message is required")
	}
	var err error
	if err = checkScope(req.Scope); err != nil {
		return p, err
	}
	if len(req.Message) > events.MaxMessageBytes {
		return p, badRequest("message is %d bytes, over the %d byte limit", len(req.Message), events.MaxMessageBytes)
	}
	if req.MaxResults != nil {
		if p.maxResults = *req.MaxResults; p.maxResults < 1 || p.maxResults > events.MaxMaxResults {
			return p, badRequest("max_results %d is not in 1..%d", p.maxResults, events.MaxMaxResults)
		}
	}
	if req.Threshold != nil {
		// NaN cannot arrive in JSON; the range check still guards Go callers.
		if p.threshold = *req.Threshold; !(p.threshold >= 0 && p.threshold <= 1) {
			return p, badRequest("threshold %v is not in 0..1", p.threshold)
		}
	}
	if req.MaxTokens != nil {
		if p.maxTokens = *req.MaxTokens; p.maxTokens < 1 || p.maxTokens > events.MaxMaxTokens {
			return p, badRequest("max_tokens %d is not in 1..%d", p.maxTokens, events.MaxMaxTokens)
		}
	}
	if p.collections, err = checkCollections(req.Collections); err != nil {
		return p, err
	}
	p.defaultDocs = req.Collections == nil
	if req.DocsMaxResults != nil {
		if p.docsMaxResults = *req.DocsMaxResults; p.docsMaxResults < 1 || p.docsMaxResults > events.MaxMaxResults {
			return p, badRequest("docs_max_results %d is not in 1..%d", p.docsMaxResults, events.MaxMaxResults)
		}
	}
	if req.DocsThreshold != nil {
		if p.docsThreshold = *req.DocsThreshold; !(p.docsThreshold >= 0 && p.docsThreshold <= 1) {
			return p, badRequest("docs_threshold %v is not in 0..1", p.docsThreshold)
		}
	}
	if err = checkTime("at", wire.At); err != nil {
		return p, err
	}
	switch req.Format {
	case "":
		p.format = events.FormatInline
	case events.FormatInline, events.FormatSystem, events.FormatMarkdown:
	default:
		return p, badRequest("format %q is not inline, system or markdown", req.Format)
	}
	switch req.Facts {
	case "":
		p.facts = events.FactsRelevant
	case events.FactsRelevant, events.FactsAll:
	default:
		return p, badRequest("facts %q is not relevant or all", req.Facts)
	}
	return p, nil
}

// analyze reads the message: its keywords, grammar, stop words and time.
// Not in parseEnrich, which runs on the endpoint's delivery goroutine
// before the per-user limits: a 64 KiB message costs tens of milliseconds
// to read, and there every other user's enrich waited behind it (a
// security walk: 64 such requests of one frontend held another user's
// enrich 2.8 s). On the request's own goroutine, one user's messages
// wait for that user's slots.
func (p enrichParams) analyze() enrichParams {
	if !p.optOut {
		p.keywords, p.over, p.named = keywordsNamed(p.message, nil)
		p.grammar = europeanGrammar(p.message)
		p.keywords = withoutGrammar(p.grammar, p.keywords)
		if !slices.ContainsFunc(p.keywords, func(k string) bool { return !IsStopWord(k) || p.named[k] }) {
			// Stop words alone ("and what about the other one?"): search
			// falls back to them, enrich does not, since they would bring
			// whatever turns said "other" or "one" into the prompt.
			p.factWords, p.keywords = p.keywords, []string{}
		}
		if p.when, p.timed = ParseTime(p.message, p.at); p.timed {
			var smallTalk bool
			p.timeKeywords, p.timeOver, smallTalk = timeRestNamed(p.message, p.when, p.named)
			if smallTalk {
				// The rest only greets or thanks: "good morning, how are
				// you today?" is not a question about today.
				p.timed, p.keywords, p.timeKeywords, p.timeOver, p.factWords = false, []string{}, nil, nil, nil
			}
		}
	}
	return p
}

// factKeywords are the words facts are selected by: the keywords, or
// when the message is stop words alone, those (factWords).
func (p enrichParams) factKeywords() []string {
	if len(p.keywords) == 0 {
		return p.factWords
	}
	return p.keywords
}

// enrich assembles an enrich reply: the memory relevant to the request,
// fitted to its token budget and formatted for injection.
func (s *Service) enrich(ctx context.Context, p enrichParams) (events.EnrichReply, error) {
	p.qvec = &queryVector{}
	// Here, not in relevant: the documents' search reads p.keywords too,
	// and the reply's keywords are the ones searched (a review).
	p = s.languageKeywords(ctx, p)
	facts, items, keywords, docDefaults, err := s.relevant(ctx, p)
	if err != nil {
		return events.EnrichReply{}, err
	}
	// Reserves without their texts stay out until the budget drops an
	// item (below).
	reserves := untextedReserves(items, p.maxResults)
	all := items
	if reserves {
		items = items[:p.maxResults]
	}
	chunks := []events.DocumentChunk{}
	var docsLost string // why the documents are left out of a reply that keeps the rest
	// A request naming no collections searches the user's defaults; the
	// recall said whether there are any, so most users (none) pay no
	// round trip for documents.
	if len(p.collections) > 0 || (p.defaultDocs && docDefaults) {
		// The document search gets what is left of the budget but a
		// reserve, so that when it is slow or fails (tables locked by a
		// VACUUM FULL, an index being rebuilt) the facts and memories
		// already read still go out: before, such a reply was degraded
		// and empty.
		dctx, cancel := withReserve(ctx, s.cfg.Timeout/docsReserveShare)
		chunks, err = s.documentsBy(dctx, p)
		cancel()
		var bad *events.ServiceError
		switch {
		case err == nil:
		case errors.As(err, &bad):
			return events.EnrichReply{}, err
		case dctx.Err() != nil:
			chunks, docsLost = []events.DocumentChunk{}, fmt.Sprintf("document search did not answer within %s; facts and memories only", s.cfg.Timeout)
		default:
			s.logger.Error(msgStoreFailed, "user_id", p.userID, "what", "documents", "error", err)
			chunks, docsLost = []events.DocumentChunk{}, "document search unavailable; facts and memories only"
		}
	}
	cache := cleanCache{}
	build := func(maxTokens int) events.EnrichReply {
		r := p.reply(time.Now())
		if docsLost != "" {
			r.Degraded, r.Reason = true, docsLost
		}
		r.Keywords = keywords
		var docs []events.DocumentChunk
		r.Facts, r.Context, docs, r.Injection, r.Tokens = injectCached(cache, datesIn(p.at), p.format, maxTokens, p.maxResults, wireFacts(facts), wireItems(items), chunks)
		if r.Documents != nil || len(docs) > 0 {
			r.Documents = docs
		}
		return r
	}
	r := build(p.maxTokens)
	if reserves && len(r.Context) < p.maxResults {
		// An item too large for the budget: its place goes to the next
		// ranked, whose texts are read now (a third round trip, for
		// such requests only). Failing that, the reply stands as is.
		if more, err := s.recall.ContextTexts(ctx, p.userID, all[p.maxResults:]); err != nil {
			s.logger.Warn(msgStoreFailed, "user_id", p.userID, "what", "reserve texts", "error", err)
		} else {
			items = append(all[:p.maxResults:p.maxResults], more...)
			r = build(p.maxTokens)
		}
	}
	// The reply holds the budget's text twice (the injection and the
	// lists), JSON-escaped: one over the NATS max payload would never be
	// sent. Such a reply is built again with a lower budget, dropping the
	// lowest-ranked entries as a smaller max_tokens would: scaled by how
	// far over it is (a few rounds, each measured without encoding the
	// texts: enrichLen), then none (fitBudget). The headroom is for took_ms, set when sent.
	return s.fitBudget(r, p.maxTokens, s.maxReply()-enrichHeadroom, build), nil
}

// fitBudget is r, built with maxTokens, or when it is over limit bytes
// encoded, built again (build) with lower budgets until it fits: scaled by
// how far over it is, a few rounds, then none.
func (s *Service) fitBudget(r events.EnrichReply, maxTokens, limit int, build func(maxTokens int) events.EnrichReply) events.EnrichReply {
	if enrichBound(r) <= limit {
		return r // nearly every reply: no encoding to measure it
	}
	budget := maxTokens
	for round := 0; ; round++ {
		size := enrichLen(r)
		if size <= limit || budget == 0 {
			break // an empty reply over the limit is publish's 413
		}
		next := min(int(float64(min(budget, r.Tokens))*float64(limit)/float64(size)*0.9), budget-1)
		if round == 4 {
			next = 0
		}
		budget = max(next, 0)
		r = build(budget)
		s.logger.Debug("enrich budget lowered to fit the payload limit", "max_tokens", maxTokens, "budget", budget, "bytes", size, "max_payload", limit+enrichHeadroom)
	}
	return r
}

// documentsBy is s.documents(ctx, p), given up when ctx ends (ctx.Err)
// rather than when the search returns: a statement past its context is
// cancelled on the server only after the enrich pool's cancel delay
// (store.Config.CancelOnServer: 50 ms), longer than the reserve the
// reply without documents is left (25 ms of the default timeout), so
// waiting for it let the deadline's guard answer first, degraded and
// empty. The search left running is waited for in p.late, after the
// reply, so that the request's slot still covers its connection.
func (s *Service) documentsBy(ctx context.Context, p enrichParams) ([]events.DocumentChunk, error) {
	type result struct {
		chunks []events.DocumentChunk
		err    error
	}
	if p.late == nil {
		// No one to wait for a search left running (benchmarks): it is
		// waited for here.
		return s.documents(ctx, p)
	}
	done := make(chan result, 1)
	p.late.Add(1)
	go func() {
		defer p.late.Done()
		c, err := s.documents(ctx, p)
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		return r.chunks, r.err
	case <-ctx.Done():
		select {
		case r := <-done: // returned as the deadline passed: kept
			return r.chunks, r.err
		default:
		}
		return nil, ctx.Err()
	}
}

// docsReserveShare: the document search leaves 1/docsReserveShare of the
// enrich timeout (25 ms of the default 250) to build and send the reply
// without documents when it runs out of time.
const docsReserveShare = 10

// withReserve is ctx with a deadline reserve earlier than ctx's own (none
// when ctx has none).
func withReserve(ctx context.Context, reserve time.Duration) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, d.Add(-reserve))
}

// enrichBound is at least the bytes r takes as a reply, counted without
// encoding it: each string as escapedLen counts it, and a generous bound
// for every entry's field names, numbers and times (enrichEntryBytes).
// enrich encodes a reply to measure it only when this bound is over the
// limit.
func enrichBound(r events.EnrichReply) int {
	n := enrichEntryBytes + escapedLen(r.UserID) + escapedLen(r.Injection) + escapedLen(r.Reason)
	for _, k := range r.Keywords {
		n += 3 + escapedLen(k)
	}
	for _, f := range r.Facts {
		n += enrichEntryBytes + escapedLen(f.Key) + escapedLen(f.Value) + escapedLen(f.EventID) + escapedLen(f.ConversationID)
	}
	for _, c := range r.Context {
		n += enrichEntryBytes + escapedLen(c.Question) + escapedLen(c.Answer) + escapedLen(c.EventID) + escapedLen(c.ConversationID)
	}
	for _, d := range r.Documents {
		n += enrichEntryBytes + escapedLen(d.Collection) + escapedLen(d.DocumentID) + escapedLen(d.Source) + escapedLen(d.Text)
		for _, h := range d.HeadingPath {
			n += 3 + escapedLen(h)
		}
	}
	return n
}

// enrichEntryBytes bounds what an enrich reply's entry (a fact, a context
// item, a document chunk, the reply's own fields) takes besides its
// strings: field names, quotes, numbers and times, about 150 bytes for the
// longest.
const enrichEntryBytes = 320

// enrichHeadroom is kept below the max payload for took_ms's digits.
const enrichHeadroom = 64

// enrichLen is replyLen(r), counted rather than encoded: r with its long
// texts (the injection, facts' values, items' questions and answers,
// chunks' texts) emptied is encoded, and their escaped lengths added
// (escapedLen; the emptied strings' quotes are in the encoding). A reply lowered to fit was encoded once a round, up
// to a megabyte each, before the encoding that sends it.
func enrichLen(r events.EnrichReply) int {
	n := escapedLen(r.Injection)
	r.Injection = ""
	// Clones: r's slices are the reply's. Nil stays nil (null), empty
	// stays empty ([]).
	r.Facts = slices.Clone(r.Facts)
	for i := range r.Facts {
		n += escapedLen(r.Facts[i].Value)
		r.Facts[i].Value = ""
	}
	r.Context = slices.Clone(r.Context)
	for i := range r.Context {
		n += escapedLen(r.Context[i].Question) + escapedLen(r.Context[i].Answer)
		r.Context[i].Question, r.Context[i].Answer = "", ""
	}
	r.Documents = slices.Clone(r.Documents)
	for i := range r.Documents {
		n += escapedLen(r.Documents[i].Text)
		r.Documents[i].Text = ""
	}
	return n + replyLen(r)
}

// replyLen is how many bytes v takes as a reply.
func replyLen(v any) int {
	var buf bytes.Buffer
	if err := encodeReply(&buf, v); err != nil {
		return 0 // publish answers the error
	}
	return buf.Len()
}

// relevant is enrich's read of memory: of the user's most recently set
// facts (at most Config.MaxFacts), those selectFacts chooses for the
// request (core and relevant facts, or all), and the context items matching the
// request's keywords, best first, none under its threshold, at most its
// max_results; one snapshot, so that a turn's context never shows without
// the facts committed with it. It returns the keywords the items were
// searched with, and whether the user has default document collections
// (store.Candidates.DocDefaults, from the same read). How candidates are
// found and ranked is decided behind this call alone.
//
// A message with a time expression (ParseTime, against the request's at)
// first reads the items created in its range only, searched with the
// message's keywords less the expression's words (and talkWords); a
// message that asks nothing else ("what did we talk about yesterday?")
// gets items spread over the range (store.SearchQuery.Latest), newest
// first, each with score 1 (they match all it asked; the threshold does
// not apply). When nothing in the range
// qualifies, the words that expressed the range are not searched for: they
// said when, not what ("what did I say today?" must not bring a March item
// that says "today"). A message that asks something else is answered from
// a second read, of all the user's items, with those other keywords; one
// that asks nothing else gets no items (facts still come, from the first
// read).
//
// With Config.Embedder, the message is embedded (within EmbedTimeout, once,
// and only for a ranked read) and each ranked read is hybrid (hybrid.go):
// the vector side keeps to the same scope and range, and its picks are read
// in the same statement. A failed embedding leaves the request lexical,
// never degraded.
func (s *Service) relevant(ctx context.Context, p enrichParams) ([]store.Fact, []store.ContextItem, []string, bool, error) {
	if p.qvec == nil {
		p.qvec = &queryVector{}
	}
	vector := func() []float32 { return s.queryVector(ctx, p) }
	if p.timed {
		q := store.SearchQuery{UserID: p.userID, Keywords: p.timeKeywords, Scope: p.scope, Since: p.when.Since, Until: p.when.Until}
		timeOnly := len(p.timeKeywords) == 0
		if timeOnly {
			q.Latest = p.maxResults
		} else {
			q.Until = AfterMargin(p.when)
		}
		var (
			facts    []store.Fact
			items    []store.ContextItem
			defaults bool
			err      error
		)
		if timeOnly {
			var cands store.Candidates
			facts, cands, err = s.recall.Recall(ctx, store.RecallQuery{SearchQuery: q, MaxFacts: s.cfg.MaxFacts, FirstFacts: CoreFactKeys})
			items, defaults = newest(cands, p.maxResults), cands.DocDefaults
		} else {
			// Every match in the range is admitted, whatever its score, as
			// the range's items are for a question about a time alone: the
			// question named both the time and the word. Scored against
			// the whole memory, an item of the range holding a word the
			// memory often says fell under the threshold, and the search
			// without the range answered with other months' items (a
			// review: "what pizza did I have yesterday?" got October's).
			inRange := p
			inRange.threshold = 0
			facts, items, defaults, err = s.ranked(ctx, q, vector(), inRange)
		}
		if err != nil {
			return nil, nil, nil, false, err
		}
		if len(items) > 0 || timeOnly {
			return selectFacts(p.facts, p.factKeywords(), facts), items, p.timeKeywords, defaults, nil
		}
	}
	keywords := p.keywords
	if p.timed {
		keywords = p.timeKeywords
	}
	facts, items, defaults, err := s.ranked(ctx, store.SearchQuery{UserID: p.userID, Keywords: keywords, Scope: p.scope}, vector(), p)
	if err != nil {
		return nil, nil, nil, false, err
	}
	return selectFacts(p.facts, p.factKeywords(), facts), items, keywords, defaults, nil
}

// AfterMargin is the end of a question's range r widened by its own
// length, for a question that asks about something in the range: people
// tell of what they did after they did it ("what movie did I watch on 1
// May?" of a turn of 2 May, "yesterday"; "in March" of one of April, "last
// month"), and a range ending where the event did shut the telling out.
// The margin was chosen by leave-one-conversation-out cross-validation
// over the dev sets among 0.25, 0.5, 1 and 2 lengths (docs/quality.md,
// "Questions about a time"). A range open at either end is left as it is.
// The length is counted on the clock of r's zone, so that a day is a day
// when daylight saving time begins or ends ("on 8 March" reaches through
// 9 March, not to its 23:00; "on 1 November" through 2 November, not to
// 01:00 on the 3rd). It is exported for memeval's cross-validation, which
// reads the candidates enrich ranks (tools/memeval/cv.go).
func AfterMargin(r TimeExpr) time.Time {
	if r.Since.IsZero() || r.Until.IsZero() || !r.Since.Before(r.Until) {
		return r.Until
	}
	loc := r.Until.Location()
	wall := func(t time.Time) time.Time {
		t = t.In(loc)
		return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
	}
	s, u := wall(r.Since), wall(r.Until)
	e := u.Add(u.Sub(s))
	end := time.Date(e.Year(), e.Month(), e.Day(), e.Hour(), e.Minute(), e.Second(), e.Nanosecond(), loc)
	if !end.After(r.Until) {
		// A clock that went back over the whole margin (an hour's range
		// ending as daylight saving time does): the plain length.
		end = r.Until.Add(r.Until.Sub(r.Since))
	}
	return end
}

// languageKeywords caps again, without the stop words of the user's
// language (store.StopWords), the keywords of a message the first cap cut
// (more than store.MaxKeywords words that are not English stop words): a
// German or Spanish message's grammar words took the places of its
// subject ("Meine Mutter hat Diabetes. ..." lost "mutter" and "diabetes"
// to "ich", "und", "nicht", ... in a multilingual audit). One read, for
// such messages only; when it fails, the first cap stands.
func (s *Service) languageKeywords(ctx context.Context, p enrichParams) enrichParams {
	if p.over == nil && p.timeOver == nil {
		return p
	}
	capped, err := languageRecap(ctx, s.recall, p.userID, p.grammar, p.over, p.timeOver)
	if err != nil {
		s.logger.Warn("reading the stop words of the user's language failed; the keywords stay as capped", "error", err)
		return p
	}
	if capped[0] != nil {
		p.keywords = capped[0]
	}
	if capped[1] != nil {
		p.timeKeywords = askedWords(capped[1], p.named)
	}
	p.over, p.timeOver = nil, nil
	return p
}

// stopWordReader is what languageRecap reads (*store.Store has it).
type stopWordReader interface {
	StopWords(ctx context.Context, userID string, words []string) (map[string]bool, error)
}

// languageRecap caps each of sets (nil ones skipped) again without the
// stop words of the user's language, in one read of them; a nil result is
// a set left as its first cap had it.
//
// grammar (europeanGrammar: the grammar words of the European language the
// message is written in, nil for another) are stop words too, whatever the
// user's language: without them, the recap of a long French message from a
// user with no language set brought back the est, que and mon that
// withoutEuropeanGrammar had left out of its first cap.
func languageRecap(ctx context.Context, r stopWordReader, userID string, grammar map[string]bool, sets ...*keywordSet) ([][]string, error) {
	var words []string
	seen := map[string]bool{}
	for _, set := range sets {
		if set != nil {
			for _, w := range set.candidates() {
				if !seen[w] {
					seen[w] = true
					words = append(words, w)
				}
			}
		}
	}
	out := make([][]string, len(sets))
	if len(words) == 0 {
		return out, nil
	}
	stops, err := r.StopWords(ctx, userID, words)
	if err != nil {
		return nil, err
	}
	if len(grammar) > 0 && stops == nil {
		stops = map[string]bool{}
	}
	for w := range grammar {
		stops[w] = true
	}
	for i, set := range sets {
		if set != nil {
			out[i] = set.recap(stops)
		}
	}
	return out, nil
}

// reserveShare is how many times max_results items ranked reads, the
// rest reserves for those the token budget drops.
const reserveShare = 2

// ranked reads q's candidates with the user's facts and ranks them for p:
// lexically (Rank), or, with a query vector qv, fused with the vector side
// (hybrid.go); then, unless the candidates came with them, it reads the
// texts of the items kept (a second round trip, of a few items: see
// store.ContextTexts). Items are ranked up to reserveShare times
// max_results: the first max_results are those a ranking of that many
// gives, the rest reserves. It also returns the candidates' DocDefaults.
func (s *Service) ranked(ctx context.Context, q store.SearchQuery, qv []float32, p enrichParams) ([]store.Fact, []store.ContextItem, bool, error) {
	read := func(ctx context.Context, q store.SearchQuery) ([]store.Fact, store.Candidates, error) {
		return s.recall.Recall(ctx, store.RecallQuery{SearchQuery: q, MaxFacts: s.cfg.MaxFacts, FirstFacts: CoreFactKeys})
	}
	var (
		facts []store.Fact
		cands store.Candidates
		items []store.ContextItem
		err   error
	)
	// Ranked past max_results, as reserves: an item the token budget
	// drops (a long pasted turn) leaves its place to the next, not empty
	// (injectDocs keeps max_results at most).
	reserve := p.maxResults * reserveShare
	if qv == nil {
		facts, cands, items, _, err = prunedRead(ctx, read, q, s.small.prune(q.UserID), p.at, p.threshold, p.maxResults, reserve)
		if err != nil {
			return nil, nil, false, err
		}
		if q.Prunable() {
			s.small.record(q.UserID, cands.Stats.Items)
		}
		// The read's exact top max_results first; the reserves are the
		// next of its candidates, those a pruned read's bound shows to
		// rank there among every candidate (an item holding only the
		// lexemes it skipped could outrank the others).
		for len(items) > p.maxResults && !ExactRead(cands, items, p.threshold, len(items)) {
			items = items[:len(items)-1]
		}
	} else {
		var vec map[int64]float64
		if facts, cands, vec, err = s.hybrid.recall(ctx, q, qv, p.maxResults, read); err != nil {
			return nil, nil, false, err
		}
		items = fuse(cands, vec, p.at, p.threshold, reserve)
	}
	if !cands.Texts {
		// The first max_results' texts; the reserves' only when the
		// budget drops one (enrich, untextedReserves). Read with them, the
		// second round trip of every request shipped twice the text
		// (membench on real conversations: p50 2.37 ms became 2.95).
		n := min(len(items), p.maxResults)
		head, err := s.recall.ContextTexts(ctx, q.UserID, items[:n])
		if err != nil {
			return nil, nil, false, err
		}
		items = append(head, items[n:]...)
	}
	return facts, items, cands.DocDefaults, nil
}

// untextedReserves reports whether items past max results are reserves
// whose texts are not read yet (ranked): a stored item's question is never
// empty.
func untextedReserves(items []store.ContextItem, maxResults int) bool {
	return len(items) > maxResults && items[maxResults].Question == ""
}

// newest returns the items of a question about a time alone, each with
// score 1: the candidates' picks (the first limit, store.SearchQuery.Latest)
// newest first (ties: the higher id first), then the reserves after them,
// newest first too, which injectDocs takes in place of a pick the token
// budget drops. The result is never nil.
func newest(c store.Candidates, limit int) []store.ContextItem {
	items := make([]store.ContextItem, 0, len(c.Matches))
	for _, m := range c.Matches {
		items = append(items, m.Item)
	}
	byTime := func(x, y store.ContextItem) int {
		if n := y.CreatedAt.Compare(x.CreatedAt); n != 0 {
			return n
		}
		return cmp.Compare(y.ID, x.ID)
	}
	picks := min(len(items), limit)
	slices.SortFunc(items[:picks], byTime)
	slices.SortFunc(items[picks:], byTime)
	for i := range items {
		items[i].Score = 1
	}
	return items
}

func millis(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
