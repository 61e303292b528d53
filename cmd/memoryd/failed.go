package main

import (
	"context"
	"fmt"

	"github.com/memoryd/memoryd/internal/app"
)

// failedCommand parses the flags shared by the commands over failed turns and
// runs do on an open store.
func failedCommand(ctx context.Context, a *cli, args []string, name, usage string, defLimit int, more func(*flags),
	do func(ctx context.Context, svc *app.App, user string, limit int) error) error {
	var (
		o     connOptions
		user  string
		limit int
	)
	f := newFlags(name, usage)
	o.register(f)
	f.ArgString(&user, "user", "", "only this user's turns")
	f.ArgInt(&limit, "limit", defLimit, "most turns")
	if more != nil {
		more(f)
	}
	if err := f.Parse(args); err != nil {
		return err
	}
	if limit < 1 {
		return f.usageErr("--limit %d is not a positive number", limit)
	}
	svc, err := o.newApp(a, "memoryd-"+name)
	if err != nil {
		return err
	}
	defer svc.Stop(context.WithoutCancel(ctx))
	return do(ctx, svc, user, limit)
}

func runFailed(ctx context.Context, a *cli, args []string) error {
	return failedCommand(ctx, a, args, "failed", "Usage: memoryd failed [--user U] [--limit N]\n\nLists turns whose extraction failed, with the last error.", 100, nil,
		func(ctx context.Context, svc *app.App, user string, limit int) error {
			turns, err := svc.Failed(ctx, user, limit)
			if err != nil {
				return err
			}
			for _, t := range turns {
				fmt.Fprintf(a.stdout, "%s\tuser=%s\tattempts=%d\t%s\n", t.EventID, t.UserID, t.Attempts, t.LastError)
			}
			if len(turns) == limit {
				// As many as the limit: the total may be larger, and an
				// operator reading "100 failed turn(s)" would take it
				// for the total.
				fmt.Fprintf(a.stdout, "%d failed turn(s) listed, the --limit: there may be more\n", len(turns))
				return nil
			}
			fmt.Fprintf(a.stdout, "%d failed turn(s)\n", len(turns))
			return nil
		})
}

func runRetryFailed(ctx context.Context, a *cli, args []string) error {
	var includeCrashed bool
	return failedCommand(ctx, a, args, "retry-failed", "Usage: memoryd retry-failed [--user U] [--limit N] [--include-crashed]\n\nSets failed turns back to pending and enqueues their extraction again; a running 'memoryd serve' picks them up. Turns the model server went down with (twice) are left failed unless --include-crashed: each would bring it down again.", 1000,
		func(f *flags) {
			f.ArgBool(&includeCrashed, "include-crashed", false, "also the turns the model server went down with (their error begins \"the model server went down with this turn's request\"); retry them once the server no longer crashes on them")
		},
		func(ctx context.Context, svc *app.App, user string, limit int) error {
			n, crashed, err := svc.RetryFailed(ctx, user, limit, includeCrashed)
			if err != nil {
				// Its connection lost during the commit: the turns may
				// be pending with their jobs, or still failed. A run
				// again takes those still failed: if these were set
				// back, others, up to --limit of them.
				return ifUnconfirmed(err, "the retry's database commit was not confirmed: its turns may be pending already; memoryd failed lists those still failed, which a run again retries (up to --limit of them: other turns, if these were set back)")
			}
			fmt.Fprintf(a.stdout, "%d failed turn(s) re-enqueued\n", n)
			if crashed > 0 {
				fmt.Fprintf(a.stdout, "%d turn(s) left failed: the model server went down with their requests; look at its log, then retry them with --include-crashed\n", crashed)
			}
			return nil
		})
}
