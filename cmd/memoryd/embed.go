package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/memoryd/memoryd/internal/app"
	"github.com/memoryd/memoryd/store"
)

func runEmbed(ctx context.Context, a *cli, args []string) (err error) {
	defer func() {
		err = ifUnconfirmed(err, "a database commit of the backfill was not confirmed: part of it may be done; re-running the backfill is safe, it enqueues only what still lacks a vector")
	}()
	var (
		o              serveOptions
		user           string
		backfill, noWk bool
		retryRefused   bool
		dims           int
	)
	f := newFlags("embed", `Usage: memoryd embed --backfill [--user U] [--no-work] [--dims N] [--retry-refused]

Embeds the context items and the document chunks that have no vector of
the configured model (--embed-base-url, --embed-model): those stored before
embedding was turned on, those whose jobs gave up while the server was
down, and all of them after a model change (the old model's vectors do
not serve: until then those items are found lexically; a prune over
--max-db-size deletes them before any memory). With --user, the user's items and the chunks of the user's own
collections; without, every user's and every collection's, shared ones
included. It enqueues the
embed jobs, then, by default, runs embed workers in this process (embed
jobs only: extraction jobs are the serves', whose extractor they need) and
waits until
every item in scope that existed when it started has a vector (what
arrives meanwhile is embedded by its own jobs; --no-work leaves the jobs to running serve
processes and returns at once). Running it twice is safe: a job already
waiting for the same items is not enqueued again. It first embeds one test
text: a server that refuses it (an unknown --embed-model) or, unless
--no-work, does not answer ends the command with nothing enqueued.

--dims N is for when the model behind the --embed-model name changed (an
Ollama tag pulled anew, a LiteLLM alias pointed elsewhere): the embed jobs
then refuse its replies, whose dimensions differ from those of the
vectors stored under the name, and log the N to use. --dims N first
embeds one text to check that the server's vectors have N dimensions
(refused otherwise, nothing recorded), records N as the model's
dimensions (for every user: --user limits only what this run enqueues),
and the backfill embeds every item and chunk anew whose vector has others.

An item or document chunk whose text the embeddings server refused as
input (over the model's context, alone and by every shorter start
tried) is recorded as refused for the model and left out, by this
command as by the hourly sweep, until its text or the model changes
(--dims N forgets those recorded before the dimensions last changed,
the old model's, and keeps the new model's): each sweep sent it again
before. --retry-refused forgets those refusals first and sends them
again (after the server was given a longer context).

Output: progress and logs are log lines on stderr; the summary is printed on
stdout.`)
	o.register(f)
	f.ArgBool(&backfill, "backfill", false, "enqueue embed jobs for every item and document chunk without a vector of the model (required)")
	f.ArgString(&user, "user", "", "only this user's items and own collections (default: all users and collections)")
	f.ArgBool(&noWk, "no-work", false, "only enqueue; let running serve processes embed")
	f.ArgInt(&dims, "dims", 0, "record N as the model's dimensions and re-embed every vector of others (the model behind the name changed)")
	f.ArgBool(&retryRefused, "retry-refused", false, "send again the items whose text the server refused before (left out otherwise)")
	if err := f.Parse(args); err != nil {
		return err
	}
	if !backfill {
		return f.usageErr("say what to do: --backfill")
	}
	if o.app.Embed.BaseURL == "" {
		return f.usageErr("--embed-base-url is required: embedding is off without it")
	}
	if dims < 0 {
		return f.usageErr("--dims must be positive, not %d", dims)
	}
	svc, logger, err := o.newApp(f, a, "memoryd-embed")
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
		defer cancel()
		_ = svc.Stop(stopCtx)
	}()
	start := time.Now()
	// What exists before the backfill enqueues (mark) is what it waits
	// for: beside a serve that ingests, new items arrive all the time,
	// and their own jobs embed them.
	var (
		docs          int
		refused       int64
		refusedChunks int64
		forgot        bool
		mark          store.EmbeddingMark
	)
	n, err := svc.EmbedBackfill(ctx, app.EmbedOptions{User: user, Work: !noWk, Documents: &docs, Dims: dims, RetryRefused: retryRefused,
		Refused: &refused, RefusedChunks: &refusedChunks, Forgot: &forgot, Mark: &mark})
	if errors.Is(err, app.ErrEmbeddingOff) {
		return f.usageErr("--embed-base-url is required: embedding is off without it")
	}
	if err != nil {
		return err
	}
	model := svc.Config().Embed.StoredModel()
	// Enqueued, or their jobs already waiting (a retry's backoff) made to
	// run now: none is sent twice.
	fmt.Fprintf(a.stdout, "%s without a %s vector to embed (enqueued, or their waiting jobs run now)\n", plural(n, "item", "items"), model)
	fmt.Fprintf(a.stdout, "%s with chunks without a %s vector to embed (enqueued, or their waiting jobs run now)\n", plural(docs, "document", "documents"), model)
	switch {
	case refused > 0 && forgot:
		// Said, so that the operator sees the flag did something.
		why := "--retry-refused"
		if !retryRefused {
			why = "--dims: the model behind the name changed"
		}
		fmt.Fprintf(a.stdout, "%s the embeddings server refused before sent again (%s)\n", plural(int(refused), "item", "items"), why)
	case refused > 0:
		fmt.Fprintf(a.stdout, "%s the embeddings server refused before left out (--retry-refused sends them again)\n", plural(int(refused), "item", "items"))
	}
	switch {
	case refusedChunks > 0 && forgot:
		fmt.Fprintf(a.stdout, "%s the embeddings server refused before sent again\n", plural(int(refusedChunks), "document chunk", "document chunks"))
	case refusedChunks > 0:
		fmt.Fprintf(a.stdout, "%s the embeddings server refused before left out (--retry-refused sends them again)\n", plural(int(refusedChunks), "document chunk", "document chunks"))
	}
	if noWk || n+docs == 0 {
		return nil
	}
	var lastLog time.Time
	err = svc.WaitEmbedded(ctx, user, mark, func(c, ch store.EmbeddingCount) {
		if time.Since(lastLog) >= progressEvery {
			logger.Info("embedding", "model", model, "embedded", c.Embedded, "items", c.Items, "chunks_embedded", ch.Embedded, "chunks", ch.Items)
			lastLog = time.Now()
		}
	})
	if err != nil && ctx.Err() != nil {
		// Only a serve embedding with this model runs these jobs.
		flags := "--embed-model " + svc.Config().Embed.Model
		if d := svc.Config().Embed.Dimensions; d > 0 {
			flags += fmt.Sprintf(" --embed-dimensions %d", d)
		}
		return fmt.Errorf("interrupted: the rest is enqueued for a serve running with %s to embed; re-running the backfill is safe", flags)
	}
	var ne *app.NotEmbeddedError
	if errors.As(err, &ne) && !forgot && ne.Items == ne.Refused && ne.Refused <= refused &&
		ne.Chunks == ne.ChunksRefused && ne.ChunksRefused <= refusedChunks {
		// Only the items and chunks refused before, which this backfill
		// left out (said above), lack a vector: it embedded what it
		// enqueued.
		// Before, it exited 1 for them, though a backfill with nothing
		// else to embed exited 0, and no run would send them again.
		err = nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "embedding done in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// plural is n with the noun's singular or plural form.
func plural(n int, one, many string) string { return app.Plural(int64(n), one, many) }
