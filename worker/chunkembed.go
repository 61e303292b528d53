package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/store"
)

// Chunk embedding (issue 19 with issue 17): every chunk of a knowledge base
// document gets a vector of the configured model, as context items do and
// on the same queue (the model's).
//
//   - The transaction that writes a document's chunks (a put chunked
//     inline, the document's index job) inserts their ChunkEmbedArgs jobs
//     through the store's chunk hook (chunkEmbedHook): chunks never exist
//     without their jobs. An unchanged re-put writes no chunks and so
//     enqueues nothing.
//   - A job embeds a range of one document's chunks, of the content it was
//     enqueued for: a job that a re-put overtook finds other content and
//     does nothing (the re-put enqueued its own). Failures go through
//     outcome like the context items' embed jobs.
//   - The embed sweep and `memoryd embed --backfill` enqueue jobs for every
//     ready document with a chunk lacking a vector of the current model
//     (EnqueueMissingChunkEmbeddings): after a model change, a chunk is
//     searched lexically until its vector of the new model is saved (the
//     old model's vectors stay stored but do not serve: a query embedded by
//     the new model cannot be compared with them).

// ChunkEmbedJobKind is River's kind of chunk embed jobs.
const ChunkEmbedJobKind = "memoryd_chunk_embed"

// ChunkEmbedArgs is the River job that embeds chunks From..To-1 of one
// document's content (by hash), and the ranges of More, in one request. It
// holds no text.
type ChunkEmbedArgs struct {
	CollectionID int64  `json:"collection_id"`
	DocID        string `json:"doc_id"`
	Hash         string `json:"hash"`
	From         int    `json:"from"`
	To           int    `json:"to"`
	// More are other documents' ranges, of the same collection: a job
	// holds up to its job size of chunks, so that small documents (a
	// knowledge base of one-paragraph entries) are embedded many to a
	// request. Absent in jobs enqueued before it, and in a job of one
	// document (DeleteDocument deletes those with their document).
	More []ChunkRange `json:"more,omitempty"`
	// Model is the model the job embeds with, as EmbedArgs.Model.
	Model string `json:"model"`
}

// ChunkRange is chunks From..To-1 of one document's content (by hash).
type ChunkRange struct {
	CollectionID int64  `json:"collection_id"`
	DocID        string `json:"doc_id"`
	Hash         string `json:"hash"`
	From         int    `json:"from"`
	To           int    `json:"to"`
}

// ranges are the chunk ranges a job embeds.
func (a ChunkEmbedArgs) ranges() []ChunkRange {
	first := ChunkRange{CollectionID: a.CollectionID, DocID: a.DocID, Hash: a.Hash, From: a.From, To: a.To}
	return append([]ChunkRange{first}, a.More...)
}

// chunks is how many chunks a job embeds at most.
func (a ChunkEmbedArgs) chunks() int {
	n := 0
	for _, r := range a.ranges() {
		n += r.To - r.From
	}
	return n
}

// Kind is River's job kind.
func (ChunkEmbedArgs) Kind() string { return ChunkEmbedJobKind }

// InsertOpts puts chunk embed jobs on their model's queue.
func (a ChunkEmbedArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueEmbedFor(a.Model)}
}

// chunkEmbedParams packs the documents' chunks, in order, into jobs of
// jobSize chunks (the last fewer): a large document's are cut into several
// jobs, small documents' of one collection share one. Never two
// collections': a job goes with its collection (a forget deletes the
// user's collections' jobs by their collection_id).
func chunkEmbedParams(docs []store.DocChunksRef, model string, jobSize int, opts *river.InsertOpts) []river.InsertManyParams {
	jobSize = max(jobSize, 1)
	var (
		params []river.InsertManyParams
		job    []ChunkRange
		n      int
	)
	flush := func() {
		if len(job) == 0 {
			return
		}
		a := ChunkEmbedArgs{CollectionID: job[0].CollectionID, DocID: job[0].DocID, Hash: job[0].Hash, From: job[0].From, To: job[0].To,
			More: job[1:], Model: model}
		if len(a.More) == 0 {
			a.More = nil
		}
		params = append(params, river.InsertManyParams{Args: a, InsertOpts: opts})
		job, n = nil, 0
	}
	for _, d := range docs {
		if len(job) > 0 && job[0].CollectionID != d.CollectionID {
			flush()
		}
		for from := 0; from < d.Chunks; {
			to := min(from+jobSize-n, d.Chunks)
			job = append(job, ChunkRange{CollectionID: d.CollectionID, DocID: d.DocID, Hash: d.Hash, From: from, To: to})
			n += to - from
			from = to
			if n == jobSize {
				flush()
			}
		}
	}
	flush()
	return params
}

// chunkEmbedHook returns the store.ChunkHook (Store.SetChunkHook) that
// inserts, in the transaction that wrote a document's chunks, their embed
// jobs for each of the models models returns at the write (none: no job):
// at most jobSize chunks per job, each job running maxAttempts times (0:
// River's default).
func (e *Enqueuer) chunkEmbedHook(models func() []string, jobSize, maxAttempts int) (store.ChunkHook, error) {
	opts, err := e.embedOpts(sourceEmbedWrite, maxAttempts, false)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx, docs []store.DocChunksRef) error {
		var params []river.InsertManyParams
		for _, m := range models() {
			params = append(params, chunkEmbedParams(docs, m, jobSize, opts)...)
		}
		if len(params) == 0 {
			return nil
		}
		if err := e.store.WithTx(tx).RefreshClock(ctx); err != nil {
			return fmt.Errorf("enqueue chunk embedding: %w", err)
		}
		if _, err := e.client.InsertManyFastTx(ctx, tx, params); err != nil {
			return fmt.Errorf("enqueue chunk embedding: %w", err)
		}
		return nil
	}, nil
}

// EnqueueMissingChunkEmbeddings inserts chunk embed jobs for model for every
// ready document (of the collections user owns; of every collection, shared
// ones included, when empty) with a chunk lacking a current vector of it,
// and returns how many documents it found. A job with the same arguments
// that is waiting, retrying or running already is not inserted again.
func (e *Enqueuer) EnqueueMissingChunkEmbeddings(ctx context.Context, user, model string, jobSize, maxAttempts int) (int, error) {
	opts, err := e.embedOpts(sourceSweep, maxAttempts, true)
	if err != nil {
		return 0, err
	}
	const page = 500
	var n int
	for after := (store.DocCursor{}); ; {
		docs, err := e.store.MissingChunkEmbeddings(ctx, user, model, after, page)
		if err != nil {
			return n, fmt.Errorf("enqueue chunk embedding: %w", err)
		}
		if len(docs) == 0 {
			return n, nil
		}
		last := docs[len(docs)-1]
		after = store.DocCursor{CollectionID: last.CollectionID, DocID: last.DocID}
		n += len(docs)
		if err := e.store.RefreshClock(ctx); err != nil {
			return n, fmt.Errorf("enqueue chunk embedding: %w", err)
		}
		if _, err := e.client.InsertMany(ctx, chunkEmbedParams(docs, model, jobSize, opts)); err != nil {
			return n, fmt.Errorf("enqueue chunk embedding: %w", err)
		}
	}
}

// chunkEmbedText is what a chunk's vector is of: its heading path (what
// makes it understandable out of context), then its text.
func chunkEmbedText(t store.ChunkEmbeddingTarget) string {
	if len(t.HeadingPath) == 0 {
		return t.Text
	}
	return strings.Join(t.HeadingPath, " > ") + "\n" + t.Text
}

// chunkEmbedWorker is the River worker for ChunkEmbedArgs.
type chunkEmbedWorker struct {
	river.WorkerDefaults[ChunkEmbedArgs]
	w *Worker
}

// Work embeds the job's chunks that still lack a current vector and saves
// the vectors; a failure is decided by outcome, as an embed job's.
func (c *chunkEmbedWorker) Work(ctx context.Context, job *river.Job[ChunkEmbedArgs]) error {
	n, err := c.w.embedChunks(ctx, job.Args)
	if err == nil {
		c.w.logger.Debug("embedded document chunks", "job_id", job.ID, "collection_id", job.Args.CollectionID, "chunks", n)
		return nil
	}
	b := c.w.budget()
	v := outcome(err, job.JobRow, errors.Is(ctx.Err(), context.Canceled), b)
	v = countSnooze(ctx, job.JobRow, err, v, b)
	if v.waitsForServer() {
		c.w.embedWaiting(err)
	}
	level, msg := embedFailureLog(v, err, "chunk embedding failed; the chunks stay lexical-only until it succeeds")
	c.w.logger.Log(ctx, level, msg, "job_id", job.ID, "attempt", job.Attempt,
		"outcome", v.label, "kind", embedKindName(err), "collection_id", job.Args.CollectionID,
		"chunks", job.Args.chunks(), "error", err)
	return &jobEnd{op: "embed chunks", label: v.label, river: v.river, cause: err}
}

// embedChunks embeds args's chunks that lack a current vector of the job's
// model, which must be the worker's, in one request (embedTexts splits
// it as it must), and returns how many it saved. A range whose document
// changed or went meanwhile has no targets.
func (w *Worker) embedChunks(ctx context.Context, args ChunkEmbedArgs) (int, error) {
	s, emb := w.cfg.Store, w.cfg.Embedder
	model := emb.Model()
	if args.Model != "" && args.Model != model {
		return 0, &otherModelError{job: args.Model, worker: model}
	}
	ranges := args.ranges()
	targets := make([][]store.ChunkEmbeddingTarget, len(ranges))
	var texts []string
	for i, r := range ranges {
		ts, err := s.ChunkEmbeddingTargets(ctx, r.CollectionID, r.DocID, r.Hash, r.From, r.To, model)
		if err != nil {
			return 0, err
		}
		targets[i] = ts
		for _, t := range ts {
			texts = append(texts, chunkEmbedText(t))
		}
	}
	if len(texts) == 0 {
		return 0, nil
	}
	// gaveUp marks the chunks refused alone (and by every start tried),
	// recorded as refused after the vectors are saved, as the context
	// items' (Worker.embed): before, the sweep sent them again each hour.
	gaveUp := make([]bool, len(texts))
	vs, err := w.embedTexts(ctx, "document chunks", texts, false, gaveUp)
	if err != nil {
		err = refusedAll(err, vs, gaveUp)
	}
	saved, k := 0, 0
	var refused [][]store.ChunkEmbeddingTarget
	for i, r := range ranges {
		writes := make([]store.ChunkEmbeddingWrite, 0, len(targets[i]))
		var rs []store.ChunkEmbeddingTarget
		for _, t := range targets[i] {
			if vs != nil && vs[k] != nil {
				writes = append(writes, store.ChunkEmbeddingWrite{ChunkIndex: t.ChunkIndex, Sum: t.Sum, Dims: len(vs[k]), Vector: embedding.Encode(vs[k])})
			}
			if gaveUp[k] {
				rs = append(rs, t)
			}
			k++
		}
		refused = append(refused, rs)
		if len(writes) == 0 {
			continue
		}
		n, serr := s.SaveChunkEmbeddings(ctx, model, r.CollectionID, r.DocID, r.Hash, writes)
		saved += int(n)
		if serr != nil {
			return saved, serr
		}
	}
	recorded := 0
	for i, r := range ranges {
		n, rerr := s.SaveChunkEmbeddingRefusals(ctx, model, r.CollectionID, r.DocID, r.Hash, refused[i])
		if rerr != nil {
			return saved, rerr
		}
		recorded += int(n)
	}
	if recorded > 0 {
		w.logger.Info("recorded document chunks whose text the embeddings server refused; the embed sweep and backfill skip them until their document's content or the model changes (memoryd embed --backfill --retry-refused sends them again)",
			"model", model, "chunks", recorded)
	}
	return saved, err // nil, or the failure after some halves were embedded: retried for the rest
}
