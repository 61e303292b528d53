package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/memoryd/memoryd/migrations"
	"github.com/memoryd/memoryd/worker"
)

func runReplay(ctx context.Context, a *app, args []string) error {
	var (
		o                     serveOptions
		users, since          string
		fromSeq               int
		reset, dryRun, noWork bool
	)
	f := newFlags("replay", `Usage: memoryd replay [--user U[,U...]] [--since RFC3339 | --from-seq N] [--reset] [--dry-run]

Rebuilds memory from the turn stream: every turn in scope goes through
extraction again (batched into jobs). --reset first deletes the derived memory
(facts, history, context) of the users in scope, all users when none is named,
in one transaction. Replaying twice gives the same memory as once; an
interrupted replay can be re-run. By default this command also runs extraction
workers until the replayed turns are done (--no-work leaves that to serve).`)
	o.register(f)
	f.String(&users, "user", "", "comma-separated user ids to replay (default: all)")
	f.String(&since, "since", "", "replay turns stored since this time (RFC 3339)")
	f.Int(&fromSeq, "from-seq", 0, "replay from this stream sequence")
	f.Bool(&reset, "reset", false, "delete the users' derived memory first")
	f.Bool(&dryRun, "dry-run", false, "read and count only; write nothing")
	f.Bool(&noWork, "no-work", false, "only enqueue; let running serve processes extract")
	if err := f.Parse(args); err != nil {
		return err
	}
	cfg := worker.ReplayConfig{Prefix: o.conn.prefix, Stream: o.conn.stream, Reset: reset, DryRun: dryRun, FromSeq: uint64(max(fromSeq, 0)),
		JobSize: o.effectiveJobSize(10, 100)}
	if users != "" {
		for _, u := range strings.Split(users, ",") {
			if u = strings.TrimSpace(u); u != "" {
				cfg.Users = append(cfg.Users, u)
			}
		}
	}
	if since != "" {
		t, err := time.Parse(time.RFC3339Nano, since)
		if err != nil {
			return fmt.Errorf("--since %q is not RFC 3339", since)
		}
		cfg.Since = t
	}
	logger, err := o.conn.logger(a)
	if err != nil {
		return err
	}
	s, err := o.conn.openStore(ctx, o.createDB, logger)
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.Migrate(ctx, migrations.FS, logger); err != nil {
		return err
	}
	nc, err := o.conn.connectNATS("memoryd-replay", logger)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := o.conn.jetStream(nc)
	if err != nil {
		return err
	}
	if !dryRun && !noWork {
		ext, err := o.llm.extractor()
		if err != nil {
			return err
		}
		w, err := worker.New(worker.Config{Conn: nc, Store: s, Extractor: ext, Logger: logger, Prefix: o.conn.prefix,
			Stream: o.conn.stream, Workers: o.workers, MaxAttempts: o.maxAttempts, DisableIngest: true})
		if err != nil {
			return err
		}
		if err := w.Start(ctx); err != nil {
			return err
		}
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
			defer cancel()
			_ = w.Stop(stopCtx)
		}()
	}
	cfg.JetStream, cfg.Store, cfg.Logger = js, s, logger
	cfg.Progress = func(p worker.ReplayProgress) {
		fmt.Fprintf(a.stdout, "\rread %d/%d events  %.0f/s  eta %s   ", p.Read, p.Total, p.Rate(), p.ETA().Round(time.Second))
	}
	p, err := worker.Replay(ctx, cfg)
	fmt.Fprintln(a.stdout)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "read %d events (%d invalid, %d opted out), %d turns enqueued for extraction in %s\n",
		p.Read, p.Invalid, p.OptedOut, p.Enqueued, p.Elapsed.Round(time.Millisecond))
	if reset && !dryRun {
		fmt.Fprintf(a.stdout, "reset removed %d facts, %d history rows, %d context items\n", p.Removed.Facts, p.Removed.FactHistory, p.Removed.Context)
	}
	if dryRun || noWork {
		return nil
	}
	start := time.Now()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		n, err := s.PendingTurns(ctx, cfg.Users)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "\rextracting: %d turns pending   ", n)
		if n == 0 {
			fmt.Fprintf(a.stdout, "\nreplay done in %s\n", (p.Elapsed + time.Since(start)).Round(time.Millisecond))
			return nil
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(a.stdout, "\ninterrupted: the rest is enqueued and will be extracted by any running serve; re-running replay is safe")
			return nil
		case <-tick.C:
		}
	}
}

func runForget(ctx context.Context, a *app, args []string) error {
	var (
		o    connOptions
		user string
	)
	f := newFlags("forget", `Usage: memoryd forget --user U

Deletes everything memoryd keeps about a user: facts, fact history, context,
turns, pending jobs, and the user's events in the turn and dead-letter
streams, so that no replay can bring them back. Prints the counts as JSON.`)
	o.register(f)
	f.String(&user, "user", "", "the user id to forget (required)")
	if err := f.Parse(args); err != nil {
		return err
	}
	if user == "" {
		return fmt.Errorf("--user is required")
	}
	s, err := openQuiet(ctx, &o, a)
	if err != nil {
		return err
	}
	defer s.Close()
	logger, _ := o.logger(a)
	nc, err := o.connectNATS("memoryd-forget", logger)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := o.jetStream(nc)
	if err != nil {
		return err
	}
	res, err := worker.Forget(ctx, js, s, o.prefix, o.stream, user)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

func runConfig(_ context.Context, a *app, args []string) error {
	if len(args) == 0 || args[0] != "print" {
		return fmt.Errorf("usage: memoryd config print [serve flags]")
	}
	var o serveOptions
	f := newFlags("config print", `Usage: memoryd config print [--config FILE] [serve flags]

Prints the effective serve configuration (flags, then MEMORYD_* variables,
then the configuration file, then defaults), one "key: value  # source" line
each, with secrets and URL passwords redacted. The output is a valid
memoryd.yaml.`)
	o.register(f)
	if err := f.Parse(args[1:]); err != nil {
		return err
	}
	var names []string
	f.VisitAll(func(fl *flag.Flag) {
		if fl.Name != "config" {
			names = append(names, fl.Name)
		}
	})
	sort.Strings(names)
	for _, name := range names {
		v := f.Lookup(name).Value.String()
		switch {
		case f.secrets[name] && v != "":
			v = "xxxxx"
		case strings.Contains(v, "://"):
			v = redactURL(v)
		}
		fmt.Fprintf(a.stdout, "%s: %q  # %s\n", strings.ReplaceAll(name, "-", "_"), v, f.source[name])
	}
	return nil
}
