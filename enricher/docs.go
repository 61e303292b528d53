package enricher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/chunker"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/ranking"
	"github.com/memoryd/memoryd/store"
)

// DocStore is what the documents endpoints (memory.docs.*) read and write.
type DocStore interface {
	DeleteDocument(ctx context.Context, o store.Owner, collection, docID string, jobs ...store.RiverJobs) (bool, error)
	ListDocuments(ctx context.Context, o store.Owner, collection, after string, limit int) ([]store.DocumentInfo, string, error)
	SearchChunks(ctx context.Context, q store.ChunkQuery, rank store.ChunkRanker) ([]store.ChunkHit, error)
	SetDefaultCollections(ctx context.Context, user string, names []string) ([]string, error)
	DefaultCollections(ctx context.Context, user string) ([]string, error)
	InTx(ctx context.Context, fn func(pgx.Tx, *store.Store) error) error
}

// DocIndexer enqueues, in the put's transaction tx, the job that chunks a
// pending document (worker.Worker.EnqueueIndexDocument), returning its id.
type DocIndexer func(ctx context.Context, tx pgx.Tx, collectionID int64, docID, hash string) (int64, error)

// DefaultInlineChunkBytes is Config.InlineChunkBytes' default: documents up
// to this size are chunked in the put's request, larger ones by a job.
const DefaultInlineChunkBytes = 256 << 10

// ChunkDocument cuts a document under its collection's settings (package
// chunker): the store.Chunker of every put. A document whose source names
// source code or configuration, or that is a script (chunker.Language:
// "store.go", "app.py", "my.ini", a "#!" line) is cut as code,
// each chunk fenced with its language, so that enrich injects it as code
// (fenced code is written unescaped) where, read as Markdown, it was
// escaped as prose and a Python comment was a heading.
func ChunkDocument(c store.Collection, source, content string) ([]store.ChunkText, error) {
	cs, err := chunker.Split(content, chunker.Config{MaxTokens: c.ChunkTokens, Overlap: c.OverlapTokens, Code: chunker.Language(source, content)})
	if err != nil {
		// The text, or the collection's chunk settings, refused.
		return nil, store.InvalidDocument(err)
	}
	out := make([]store.ChunkText, len(cs))
	for i, ch := range cs {
		out[i] = store.ChunkText{HeadingPath: ch.Headings, Text: ch.Text, Start: ch.Start, End: ch.End}
	}
	return out, nil
}

// RankChunks orders a chunk search's candidates with package ranking, the
// heading path as the first field and the text as the second, and returns
// the best limit of those scoring at least threshold, Score set. Documents
// have no time: every chunk counts as new (recency 1), so a score means
// what a context item's does.
func RankChunks(c store.ChunkCandidates, threshold float64, limit int) []store.ChunkHit {
	if len(c.Matches) == 0 || limit < 1 {
		return []store.ChunkHit{}
	}
	at := time.Unix(0, 0)
	docs := make([]ranking.Doc, len(c.Matches))
	for i, m := range c.Matches {
		docs[i] = ranking.Doc{ID: int64(i), CreatedAt: at, QuestionLen: m.HeadingLen, AnswerLen: m.TextLen, Terms: rankingCounts(m.Terms)}
	}
	hits := ranking.Rank(ranking.Collection(c.Stats), docs, ranking.Query{At: at, Threshold: threshold, Limit: limit})
	out := make([]store.ChunkHit, len(hits))
	for i, h := range hits {
		out[i] = c.Matches[h.Doc].Hit
		out[i].Score = h.Score
	}
	return out
}

// ChunkRanker is the store.ChunkRanker of RankChunks(c, threshold, limit).
func ChunkRanker(threshold float64, limit int) store.ChunkRanker {
	return func(c store.ChunkCandidates) []store.ChunkHit { return RankChunks(c, threshold, limit) }
}

// docs answers memory.docs.* on a user's subjects and
// memory.shared.docs.* on a shared scope's.
type docs struct {
	store       DocStore
	index       DocIndexer        // nil: every document is chunked inline
	jobs        []store.RiverJobs // Config.DocJobs
	maxBytes    int
	maxTotal    int64 // Config.MaxDocsSize
	inlineBytes int
	shared      bool // the endpoints of a shared scope's subjects
	// hybrid makes search hybrid (dochybrid.go); nil: lexical.
	hybrid *hybrid
}

// owner checks the request's identity against the subject's token: the
// user, or on a shared scope's subjects the scope (its name is its token).
func (d docs) owner(token, userID string) (store.Owner, error) {
	if !d.shared {
		if err := checkUser(token, userID); err != nil {
			return store.Owner{}, err
		}
		return store.Owner{User: userID}, nil
	}
	if err := store.ValidName(userID); err != nil {
		return store.Owner{}, badRequest("user_id names the shared scope on its subjects: %v", err)
	}
	if userID != token {
		return store.Owner{}, badRequest("user_id %q (the shared scope) was sent to token %q", userID, token)
	}
	return store.Owner{Shared: userID}, nil
}

func checkCollection(name string) error {
	if name == "" {
		return badRequest("collection is required: the name of one of the user's collections")
	}
	if err := store.ValidName(name); err != nil {
		return badRequest("collection: %v", err)
	}
	return nil
}

// notFound maps a collection the caller may not read to a 404, naming it
// when the store does (as the caller named it, so it tells nothing of
// others'): of several names set as defaults, the user learns which one
// went (one a forget of the user deleted meanwhile, say).
func notFound(err error) error {
	if nc := (*store.NoCollectionError)(nil); errors.As(err, &nc) {
		return &events.ServiceError{Code: 404, Description: fmt.Sprintf("no collection %q (or not readable from this subject)", nc.Name)}
	}
	if errors.Is(err, store.ErrNoCollection) {
		return &events.ServiceError{Code: 404, Description: "no such collection (or not readable from this subject)"}
	}
	return err
}

// inTx runs fn in a transaction that holds the user's forget lock when the
// owner is a user (see forgetSafe): a put racing a forget is deleted by it
// or starts the new memory.
func (d docs) inTx(ctx context.Context, o store.Owner, fn func(tx pgx.Tx, q *store.Store) error) error {
	return d.store.InTx(ctx, func(tx pgx.Tx, q *store.Store) error {
		if o.User != "" {
			if _, err := q.LockUsers(ctx, []string{events.UserToken(o.User)}); err != nil {
				return err
			}
		}
		return fn(tx, q)
	})
}

func (d docs) put(token string, data []byte) (call, error) {
	var req events.DocsPutRequest
	if err := decodeWrite(data, &req); err != nil {
		return nil, err
	}
	o, err := d.owner(token, req.UserID)
	if err != nil {
		return nil, err
	}
	if err := checkCollection(req.Collection); err != nil {
		return nil, err
	}
	if req.Content == "" {
		return nil, badRequest("content is required")
	}
	if err := checkText("doc_id", req.DocID, store.MaxDocIDBytes); err != nil {
		return nil, err
	}
	if err := checkText("source", req.Source, store.MaxDocIDBytes); err != nil {
		return nil, err
	}
	if string(req.Metadata) == "null" {
		req.Metadata = nil // as absent
	}
	if len(req.Content) > d.maxBytes {
		return nil, badRequest("content is %d bytes, over the %d byte document limit (serve's --max-document-bytes): split the document, or raise the limit", len(req.Content), d.maxBytes)
	}
	if req.ChunkTokens != 0 || req.OverlapTokens != 0 {
		if req.OverlapTokens < 0 {
			return nil, badRequest("overlap_tokens %d is negative", req.OverlapTokens)
		}
		c := chunker.Config{MaxTokens: req.ChunkTokens}.WithDefaults()
		if err := c.Validate(); err != nil {
			return nil, badRequest("chunk_tokens: %v", err)
		}
		// An overlap over half a chunk is cut to half (documented) by the
		// store, of the collection's chunk: a put leaving chunk_tokens out
		// names an existing collection's overlap as it was created.
	}
	// largest is the largest chunk's tokens, of the last chunking (a
	// transaction tried again chunks again).
	largest := 0
	put := store.DocumentPut{Owner: o, Collection: req.Collection, ChunkTokens: req.ChunkTokens, OverlapTokens: req.OverlapTokens,
		DocID: req.DocID, Source: req.Source, Content: req.Content, Metadata: req.Metadata,
		Chunking: chunker.Chunking(cmp.Or(req.Source, req.DocID), req.Content),
		Chunk: func(c store.Collection, source, content string) ([]store.ChunkText, error) {
			cs, err := ChunkDocument(c, source, content)
			largest = 0
			for _, ch := range cs {
				largest = max(largest, chunkInjectionTokens(ch.Text))
			}
			return cs, err
		},
		MaxTotalBytes: d.maxTotal}
	later := d.index != nil && len(req.Content) > d.inlineBytes
	if later {
		put.Chunk = nil
		// Refused now as one chunked in the request is: its job would
		// mark it ready with no chunk, after an ok.
		// (Text that is not UTF-8 or holds NUL is the store's 400; code,
		// which has no Markdown headings, has text when it is not blank,
		// which the store checks.)
		source := cmp.Or(req.Source, req.DocID)
		if chunker.Language(source, req.Content) == "" && utf8.ValidString(req.Content) && !strings.Contains(req.Content, "\x00") && !chunker.HasText(req.Content) {
			return nil, putError(store.InvalidDocument(store.ErrNoText))
		}
	}
	return func(ctx context.Context) (any, error) {
		var (
			r   store.PutResult
			job int64
		)
		err := d.inTx(ctx, o, func(tx pgx.Tx, q *store.Store) (err error) {
			if r, err = q.PutDocument(ctx, put); err != nil {
				return err
			}
			// A pending document put again with the same content gets its
			// chunking job again: the last one may be lost (it ran out of
			// attempts), and a second job finds the document ready and
			// does nothing.
			if later && (!r.Unchanged || r.Status == store.DocPending) {
				job, err = d.index(ctx, tx, r.Collection.ID, r.DocID, r.Hash)
			}
			return err
		})
		if err != nil {
			return nil, putError(err)
		}
		return events.DocsPutReply{Collection: req.Collection, DocID: r.DocID, Hash: r.Hash, Unchanged: r.Unchanged,
			Status: r.Status, Searchable: r.Status == store.DocReady, Chunks: r.Chunks, JobID: job, LargestChunkTokens: largest}, nil
	}, nil
}

// codeDocsCap is the error code of a put refused by the documents cap.
const codeDocsCap = 507

// putError makes a put's validation errors (the store checks what it
// keeps: ids, metadata, text) 400s, and the documents cap's refusal a 507
// naming the cap and the document's size. Not the total: the cap is shared
// by every user and shared scope, and the total would tell one tenant how
// much all the others store.
func putError(err error) error {
	if ce, ok := errors.AsType[*store.DocsCapError](err); ok {
		return &events.ServiceError{Code: codeDocsCap, Description: fmt.Sprintf(
			"documents cap reached: this %d byte document does not fit under the documents cap (serve's --max-docs-size) of %d bytes, which all users' documents share",
			ce.Size, ce.Cap)}
	}
	if errors.Is(err, store.ErrNoText) {
		// What to do, not only why: a file of "#" comments named as
		// Markdown (a conf file, a script) is taken under its name.
		return badRequest("%s: %s", strings.TrimPrefix(err.Error(), "put document: "), noTextAdvice)
	}
	if errors.Is(err, store.ErrInvalidDocument) {
		return badRequest("%s", strings.TrimPrefix(err.Error(), "put document: "))
	}
	return err
}

// noTextAdvice follows the 400 of a document of headings only.
const noTextAdvice = `add text under its headings, or, when its "#" lines are comments (configuration, a script), ` +
	`put it under a name that says its language, an extension such as .conf, .ini, .sh or .py ` +
	`(docs/protocol.md, "docs.put", lists the names)`

func (d docs) delete(token string, data []byte) (call, error) {
	var req events.DocsDeleteRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	o, err := d.owner(token, req.UserID)
	if err != nil {
		return nil, err
	}
	if err := checkCollection(req.Collection); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.DocID) == "" {
		return nil, badRequest("doc_id is required")
	}
	if err := checkText("doc_id", req.DocID, store.MaxDocIDBytes); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		var ok bool
		err := d.inTx(ctx, o, func(_ pgx.Tx, q *store.Store) (err error) {
			ok, err = q.DeleteDocument(ctx, o, req.Collection, req.DocID, d.jobs...)
			return err
		})
		if err != nil {
			return nil, err
		}
		return events.DocsDeleteReply{Deleted: ok}, nil
	}, nil
}

func (d docs) list(token string, data []byte) (call, error) {
	var req events.DocsListRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	o, err := d.owner(token, req.UserID)
	if err != nil {
		return nil, err
	}
	if err := checkCollection(req.Collection); err != nil {
		return nil, err
	}
	// After is a doc id (a page's Next).
	if err := checkText("after", req.After, store.MaxDocIDBytes); err != nil {
		return nil, err
	}
	limit := req.Limit
	if limit == 0 {
		limit = events.DefaultDocsListLimit
	}
	if limit < 1 || limit > events.MaxDocsListLimit {
		return nil, badRequest("limit %d is not in 1..%d", req.Limit, events.MaxDocsListLimit)
	}
	return func(ctx context.Context) (any, error) {
		ds, next, err := d.store.ListDocuments(ctx, o, req.Collection, req.After, limit)
		if err != nil {
			return nil, notFound(err)
		}
		out := make([]events.DocumentInfo, len(ds))
		for i, x := range ds {
			out[i] = events.DocumentInfo{DocID: x.DocID, Source: x.Source, Hash: x.Hash, Metadata: x.Metadata, Size: x.Size,
				Status: x.Status, Chunks: x.Chunks, CreatedAt: x.CreatedAt, UpdatedAt: x.UpdatedAt}
		}
		return docsPage{events.DocsListReply{Documents: out, Next: next}}, nil
	}, nil
}

func (d docs) search(token string, data []byte) (call, error) {
	var req events.DocsSearchRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	o, err := d.owner(token, req.UserID)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Query) == "" {
		return nil, badRequest("query is required")
	}
	if len(req.Query) > events.MaxMessageBytes {
		return nil, badRequest("query is %d bytes, over the %d byte limit", len(req.Query), events.MaxMessageBytes)
	}
	if len(req.Collections) > events.MaxDocsCollections {
		return nil, badRequest("collections names %d collections, over %d", len(req.Collections), events.MaxDocsCollections)
	}
	limit := events.DefaultSearchResults
	if req.MaxResults != nil {
		if limit = *req.MaxResults; limit < 1 || limit > events.MaxMaxResults {
			return nil, badRequest("max_results %d is not in 1..%d", limit, events.MaxMaxResults)
		}
	}
	threshold := 0.0
	if req.Threshold != nil {
		if threshold = *req.Threshold; !(threshold >= 0 && threshold <= 1) {
			return nil, badRequest("threshold %v is not in 0..1", threshold)
		}
	}
	return func(ctx context.Context) (any, error) {
		// One embedding of the query (nil: lexical), for the hybrid
		// search of dochybrid.go.
		qv := d.hybrid.embed(ctx, o.User+o.Shared, req.Query, 0)
		hits, err := d.hybrid.searchChunks(ctx, d.store, store.ChunkQuery{Reader: o, Collections: req.Collections, Keywords: Keywords(req.Query)},
			qv, threshold, limit)
		if err != nil {
			return nil, notFound(err)
		}
		out := make([]events.DocChunk, len(hits))
		for i, h := range hits {
			out[i] = events.DocChunk{Collection: h.Collection, DocID: h.DocumentID, Source: h.Source, HeadingPath: h.HeadingPath,
				ChunkIndex: h.ChunkIndex, Text: h.Text, Start: h.Start, End: h.End, Score: h.Score}
		}
		return events.DocsSearchReply{Chunks: out}, nil
	}, nil
}

// defaults reads or sets the user's default collections.
func (d docs) defaults(token string, data []byte) (call, error) {
	var req events.DocsDefaultsRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	o, err := d.owner(token, req.UserID)
	if err != nil {
		return nil, err
	}
	set := req.Collections != nil
	names, err := checkCollections(req.Collections)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		var out []string
		if set {
			// Under the forget lock, as a put: a set racing a forget of
			// the user is deleted by it or comes after.
			err = d.inTx(ctx, o, func(_ pgx.Tx, q *store.Store) (err error) {
				out, err = q.SetDefaultCollections(ctx, o.User, names)
				return err
			})
		} else {
			out, err = d.store.DefaultCollections(ctx, o.User)
		}
		if err != nil {
			return nil, notFound(err)
		}
		return events.DocsDefaultsReply{Collections: out}, nil
	}, nil
}

// docsEndpoints are the documents endpoints: on a user's subjects, and on
// a shared scope's (<prefix>.shared.docs.<op>.<scope>), which take the same
// requests (their schemas are the user's, see schemaName).
func (s *Service) docsEndpoints() []endpoint {
	var eps []endpoint
	for _, shared := range []bool{false, true} {
		d := docs{store: s.cfg.Store, index: s.cfg.DocIndexer, jobs: s.cfg.DocJobs, maxBytes: s.cfg.MaxDocumentBytes, maxTotal: s.cfg.MaxDocsSize,
			inlineBytes: s.cfg.InlineChunkBytes, shared: shared, hybrid: s.hybrid}
		name, subject, whose := "docs_", "docs.", "the user's"
		if shared {
			name, subject, whose = "shared_docs_", "shared.docs.", "a shared scope's"
		}
		eps = append(eps,
			endpoint{name: name + "put", subject: subject + "put", description: "store a document in one of " + whose + " collections (chunked for search)", lane: s.toolLane, handle: d.put},
			endpoint{name: name + "delete", subject: subject + "delete", description: "delete a document of one of " + whose + " collections", lane: s.toolLane, handle: d.delete},
			endpoint{name: name + "list", subject: subject + "list", description: "list the documents of one of " + whose + " collections, paged", lane: s.toolLane, handle: d.list},
			endpoint{name: name + "search", subject: subject + "search", description: "search the chunks of " + whose + " collections (and, for a user, the shared ones granted)", lane: s.searchLane, handle: d.search})
		if !shared {
			eps = append(eps, endpoint{name: name + "defaults", subject: subject + "defaults", description: "read or set the collections enrich searches when a request names none", lane: s.toolLane, handle: d.defaults})
		}
	}
	return eps
}

// schemaName is the name of an endpoint's schemas: a shared scope's
// documents endpoint takes its user counterpart's.
func schemaName(endpoint string) string { return strings.TrimPrefix(endpoint, "shared_") }
