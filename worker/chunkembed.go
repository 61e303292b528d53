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
//     (EnqueueMissingChunkEmbeddings): after a model change, the old
//     vectors keep serving until the new ones are saved.

// ChunkEmbedJobKind is River's kind of chunk embed jobs.
const ChunkEmbedJobKind = "memoryd_chunk_embed"

// ChunkEmbedArgs is the River job that embeds chunks From..To-1 of one
// document's content (by hash). It holds no text.
type ChunkEmbedArgs struct {
	CollectionID int64  `json:"collection_id"`
	DocID        string `json:"doc_id"`
	Hash         string `json:"hash"`
	From         int    `json:"from"`
	To           int    `json:"to"`
	// Model is the model the job embeds with, as EmbedArgs.Model.
	Model string `json:"model"`
}

// Kind is River's job kind.
func (ChunkEmbedArgs) Kind() string { return ChunkEmbedJobKind }

// InsertOpts puts chunk embed jobs on their model's queue.
func (a ChunkEmbedArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueEmbedFor(a.Model)}
}

// chunkEmbedParams cuts each document's chunks into jobs of at most jobSize
// chunks.
func chunkEmbedParams(docs []store.DocChunksRef, model string, jobSize int, opts *river.InsertOpts) []river.InsertManyParams {
	jobSize = max(jobSize, 1)
	var params []river.InsertManyParams
	for _, d := range docs {
		for from := 0; from < d.Chunks; from += jobSize {
			params = append(params, river.InsertManyParams{Args: ChunkEmbedArgs{CollectionID: d.CollectionID, DocID: d.DocID,
				Hash: d.Hash, From: from, To: min(from+jobSize, d.Chunks), Model: model}, InsertOpts: opts})
		}
	}
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
	if v.count != "" {
		if merr := river.MetadataSet(ctx, v.count, v.n); merr != nil {
			b.maxLockWaits, b.maxRateLimitWaits, b.maxQueueWaits = 0, 0, 0
			v = outcome(err, job.JobRow, false, b)
		}
	}
	level := c.w.logger.Warn
	switch {
	case errors.As(err, new(*otherModelError)):
		level = c.w.logger.Debug // as embedWorker's
	case v.final:
		level = c.w.logger.Error
	}
	level("chunk embedding failed; the chunks stay lexical-only until it succeeds", "job_id", job.ID, "attempt", job.Attempt,
		"outcome", v.label, "kind", embedding.KindOf(err).String(), "collection_id", job.Args.CollectionID,
		"chunks", job.Args.To-job.Args.From, "error", err)
	return &jobEnd{op: "embed chunks", label: v.label, river: v.river, cause: err}
}

// embedChunks embeds args's chunks that lack a current vector of the job's
// model, which must be the worker's, and returns how many it saved.
func (w *Worker) embedChunks(ctx context.Context, args ChunkEmbedArgs) (int, error) {
	s, emb := w.cfg.Store, w.cfg.Embedder
	model := emb.Model()
	if args.Model != "" && args.Model != model {
		return 0, &otherModelError{job: args.Model, worker: model}
	}
	targets, err := s.ChunkEmbeddingTargets(ctx, args.CollectionID, args.DocID, args.Hash, args.From, args.To, model)
	if err != nil || len(targets) == 0 {
		return 0, err
	}
	texts := make([]string, len(targets))
	for i, t := range targets {
		texts[i] = chunkEmbedText(t)
	}
	vs, err := w.embedTexts(ctx, "document chunks", texts, false)
	if vs == nil {
		return 0, err
	}
	writes := make([]store.ChunkEmbeddingWrite, 0, len(targets))
	for i, t := range targets {
		if vs[i] != nil {
			writes = append(writes, store.ChunkEmbeddingWrite{ChunkIndex: t.ChunkIndex, Dims: len(vs[i]), Vector: embedding.Encode(vs[i])})
		}
	}
	n, serr := s.SaveChunkEmbeddings(ctx, model, args.CollectionID, args.DocID, args.Hash, writes)
	if serr != nil {
		return int(n), serr
	}
	return int(n), err // nil, or the failure after some halves were embedded: retried for the rest
}
