package main

import (
	"context"
	"fmt"

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
a running serve uses go first, then the oldest context items, never more
than the excess. One prune runs at a time on a database: this one waits
for a serve's to end. --json prints the whole report (the prune job's
recorded output).`)
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
		return startErr(err)
	}
	if asJSON {
		return printJSON(a.stdout, rep)
	}
	printPrune(a, rep)
	return nil
}

// printPrune writes a prune's report in a few lines.
func printPrune(a *cli, rep worker.PruneReport) {
	fmt.Fprintf(a.stdout, "removed %d context items for size and %d over the per-user cap; cleared the text of %d turns (%d bytes)\n",
		rep.RemovedForSize, rep.RemovedForCap, rep.TurnTextsCleared, rep.TurnTextBytes)
	if rep.VectorsRemoved+rep.ChunkVectorsRemoved > 0 {
		fmt.Fprintf(a.stdout, "deleted %d item vectors and %d chunk vectors of embedding models no running process uses\n", rep.VectorsRemoved, rep.ChunkVectorsRemoved)
	}
	if rep.After.RealBytes > 0 {
		fmt.Fprintf(a.stdout, "live size %d bytes before, %d after (the floor pruning cannot go under: %d)\n", rep.Before.LiveBytes, rep.After.LiveBytes, rep.After.FloorBytes)
	}
	if rep.OverLimit {
		fmt.Fprintln(a.stderr, "still over --max-db-size: pruning spares context when deleting all of it would not be enough; raise the limit or shorten --turn-retention")
	}
}
