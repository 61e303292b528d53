package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/memoryd/memoryd/store"
)

// IndexDocumentJobKind is River's kind of the job that chunks a pending
// document (a knowledge base document too large to chunk in its put).
const IndexDocumentJobKind = "index_document"

// IndexDocumentArgs names the document and the content (by hash) the job
// chunks: a job for content a later put replaced finds another hash and
// does nothing (the later put enqueued its own), so a retried or stale job
// is harmless.
type IndexDocumentArgs struct {
	CollectionID int64  `json:"collection_id"`
	DocID        string `json:"doc_id"`
	Hash         string `json:"hash"`
	// After is the id of a running job of the same document and content
	// that a put found when it enqueued this one (0: none; absent in jobs
	// enqueued before it). That job may have read the document before the
	// put wrote it, found other content and done nothing, and be running
	// only until River marks it completed: the put's job must be another
	// (see insertIndexDocument).
	After int64 `json:"after,omitempty"`
}

// Kind is River's job kind.
func (IndexDocumentArgs) Kind() string { return IndexDocumentJobKind }

// indexDocumentJobs and chunkEmbedJobs are the document jobs' shapes for a
// forget, which deletes those of the user's own collections, and for a
// document's deletion (DocumentJobs).
var (
	indexDocumentJobs = store.RiverJobs{Kind: IndexDocumentJobKind, CollectionField: "collection_id", DocField: "doc_id"}
	chunkEmbedJobs    = store.RiverJobs{Kind: ChunkEmbedJobKind, CollectionField: "collection_id", DocField: "doc_id", MoreField: "more"}
)

// DocumentJobs are the shapes of the River jobs that name a document,
// for whoever deletes one (the docs.delete endpoint: enricher.Config.DocJobs)
// to delete them with it.
func DocumentJobs() []store.RiverJobs {
	return []store.RiverJobs{indexDocumentJobs, chunkEmbedJobs}
}

// InsertOpts puts the job on the extraction queue, once per document and
// content while one waits or runs: a client putting a pending document
// again (a retry, a re-sync) gets the waiting job's id rather than piling
// up jobs.
func (IndexDocumentArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueExtract, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled}}}
}

type indexDocumentWorker struct {
	river.WorkerDefaults[IndexDocumentArgs]
	w *Worker
}

func (x *indexDocumentWorker) Work(ctx context.Context, job *river.Job[IndexDocumentArgs]) error {
	chunk := x.w.cfg.ChunkDocument
	if chunk == nil {
		// A retry cannot help: the process was built without it.
		return river.JobCancel(errors.New("worker: Config.ChunkDocument is not set: cannot index documents"))
	}
	a := job.Args
	done, err := x.w.cfg.Store.IndexDocument(ctx, a.CollectionID, a.DocID, a.Hash, chunk)
	if err != nil {
		return err
	}
	x.w.logger.Debug("indexed document", "collection_id", a.CollectionID, "indexed", done)
	return nil
}

// EnqueueIndexDocument enqueues, in tx (the put's transaction, so that the
// job exists exactly when the pending document does), the job that chunks
// the document, and returns its id.
func (w *Worker) EnqueueIndexDocument(ctx context.Context, tx pgx.Tx, collectionID int64, docID, hash string) (int64, error) {
	return insertIndexDocument(ctx, w.river, tx, collectionID, docID, hash)
}

// insertIndexDocument inserts a document's chunking job with client, or
// returns the id of the job of the same document and content that waits
// (unique by arguments): that one reads the document after tx commits.
// A running one may not: it may have read it before tx wrote it (tx waited
// for its row lock), found other content (put between) and done nothing,
// and run on only until River marks it completed; the document would stay
// pending for good. So a job found running is followed by a job of its
// own (After), itself unique while it waits.
func insertIndexDocument(ctx context.Context, client *river.Client[pgx.Tx], tx pgx.Tx, collectionID int64, docID, hash string) (int64, error) {
	args := IndexDocumentArgs{CollectionID: collectionID, DocID: docID, Hash: hash}
	for range maxChainedIndexJobs {
		res, err := client.InsertTx(ctx, tx, args, nil)
		if err != nil {
			return 0, fmt.Errorf("enqueue document index: %w", err)
		}
		if !res.UniqueSkippedAsDuplicate || res.Job.State != rivertype.JobStateRunning {
			return res.Job.ID, nil
		}
		// Each time a later job (ids grow): the running ones are few.
		args.After = res.Job.ID
	}
	return 0, fmt.Errorf("enqueue document index: %d jobs of the same document running one behind the other", maxChainedIndexJobs)
}

// maxChainedIndexJobs bounds insertIndexDocument's walk over running jobs
// of one document (one each put that found one running: a handful at
// most, with the workers' concurrency).
const maxChainedIndexJobs = 16
