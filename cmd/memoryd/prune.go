package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/memoryd/memoryd/internal/app"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

func runPrune(ctx context.Context, a *cli, args []string) error {
	var (
		o      serveOptions
		asJSON bool
	)
	f := newFlags("prune", `Usage: memoryd prune [--max-db-size SIZE] [--max-context-per-user N] [--turn-retention D] [--json]

Applies the size limits and the turn text retention once, as a serve does
at start and every --prune-interval (give it the serve's settings: the
same flags), and prints what it removed. Over --max-db-size, the vectors
of embedding models that neither --embed-model (with --embed-base-url) nor
a running serve's workers use go first (a serve of --role enrich records
no model), then the text of processed turns within their retention (the
stream keeps it; turns processed in the last hour and those waiting for
the model after a spend cap keep theirs), then the oldest context items,
never more than the excess. A limit below what pruning can reach is
refused before anything is pruned, and a prune that could not reach its
limit exits 1. One prune runs at a time on a database: this one
waits for a serve's to end. It neither creates nor migrates the database.
--json prints the whole report (the prune job's recorded output); sizes
are measured only with --max-db-size: without it, its "before" and
"after" are null.`)
	o.register(f)
	f.ArgBool(&asJSON, "json", false, "print the report as JSON")
	if err := f.Parse(args); err != nil {
		return err
	}
	svc, _, err := o.newApp(f, a, "memoryd-prune")
	if err != nil {
		return err
	}
	defer svc.Stop(context.WithoutCancel(ctx))
	rep, err := svc.Prune(ctx)
	if err != nil {
		return ifUnconfirmed(startErr(err), "the prune's database commit was not confirmed: part of it may be done; running it again is safe, it prunes only what is still over the limits or past the retention")
	}
	if msg := store.VacuumDeniedMessage(rep.VacuumRole, rep.VacuumDenied); msg != "" {
		fmt.Fprintln(a.stderr, "memoryd prune: warning: "+msg)
	}
	if asJSON {
		if err := printJSON(a.stdout, rep); err != nil {
			return err
		}
	} else {
		printPrune(a, rep)
	}
	return pruneError(rep, svc.Config().Worker.MaxDBSize)
}

// pruneError is what a prune's report makes the command fail with, if
// anything: a limit under the floor, or the size still over the limit,
// told apart by why.
func pruneError(rep worker.PruneReport, limit int64) error {
	if limit > 0 && rep.After.FloorBytes > limit {
		return errors.New((&worker.SizeFloorError{Limit: limit, Floor: rep.After.FloorBytes}).Describe("--max-db-size"))
	}
	switch {
	case rep.OverLimit && rep.ContextSpared:
		return errors.New("still over --max-db-size: deleting every context item would not reach it, so none was deleted for size (the text of turns pending or failed extraction, or stored in the last hour, stays, with facts, fact history and documents; the last hour's is cleared once it is an hour old); raise the limit if it stays over for more than an hour")
	case rep.OverLimit:
		// Context was deleted (or was held by writes), but memory written
		// while it pruned left it over: not the floor; the next prune
		// goes on. Said as the floor, an operator raised a limit that
		// was fine.
		return fmt.Errorf("still over --max-db-size after deleting %d context items for size (memory was written, or items held, while it pruned); run it again", rep.RemovedForSize)
	}
	return nil
}

// printPrune writes a prune's report in a few lines.
func printPrune(a *cli, rep worker.PruneReport) {
	fmt.Fprintf(a.stdout, "removed %s for size and %d over the per-user cap; cleared the text of %s (%d bytes)\n",
		app.Plural(int64(rep.RemovedForSize), "context item", "context items"), rep.RemovedForCap, app.Plural(int64(rep.TurnTextsCleared), "turn", "turns"), rep.TurnTextBytes)
	if rep.TurnTextsClearedForSize > 0 {
		fmt.Fprintf(a.stdout, "cleared the text of %s (%d bytes) for size, before any context item: the stream keeps it, a replay writes it back\n",
			app.Plural(rep.TurnTextsClearedForSize, "more turn", "more turns"), rep.TurnTextBytesForSize)
	}
	if rep.VectorsRemoved+rep.ChunkVectorsRemoved > 0 {
		fmt.Fprintf(a.stdout, "deleted %s and %s of embedding models no running process uses\n",
			app.Plural(rep.VectorsRemoved, "item vector", "item vectors"), app.Plural(rep.ChunkVectorsRemoved, "chunk vector", "chunk vectors"))
	}
	if rep.After.RealBytes > 0 {
		fmt.Fprintf(a.stdout, "live size %d bytes before, %d after (the floor pruning cannot go under: %d)\n", rep.Before.LiveBytes, rep.After.LiveBytes, rep.After.FloorBytes)
	}
}
