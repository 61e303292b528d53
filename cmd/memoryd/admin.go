package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/memoryd/memoryd/internal/app"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

func runReplay(ctx context.Context, a *cli, args []string) (err error) {
	defer func() {
		err = ifUnconfirmed(err, "a database commit of the replay was not confirmed: its turns may be recorded and enqueued already; re-running replay is safe, it records each turn once")
	}()
	var (
		o                     serveOptions
		users, usersFile      string
		since                 string
		fromSeq               int
		reset, dryRun, noWork bool
		allowLoss             bool
	)
	f := newFlags("replay", fmt.Sprintf(`Usage: memoryd replay [--user U[,U...]] [--since RFC3339|DURATION | --from-seq N] [--reset [--allow-loss]] [--dry-run]

Rebuilds memory from the turn stream: every turn in scope goes through
extraction again. Turns are read in windows of up to %[4]d (or %[5]d MiB of
text), recorded grouped by user in transactions of at most %[1]d turns, and
split into extraction jobs of one user's --job-size turns (0: %[2]d with the
offline extractor, %[3]d with an LLM). --reset first deletes the facts and
context of the users in scope, all users when none is named, in one
transaction; fact history (the rebuilt facts add to it) and items written
through the memory tools (not in the stream) are kept. A --reset that would
delete memory extracted from turns whose events the stream no longer holds
(its retention limits dropped them, or they were deleted) is refused before
it deletes anything, naming how much: no replay could rebuild that memory;
--allow-loss resets anyway. Replaying twice gives
the same memory as once; an interrupted replay can be re-run. By default this
command also runs extraction workers until the replayed turns are done
(--no-work leaves that to serve).
--dry-run reads and counts the stream only: nothing is written or enqueued.
Replay reads up to the stream's last sequence when it starts, also when a
user is forgotten meanwhile; if it cannot read all of it, it exits non-zero
naming the stream sequences and the number of events it did not read.

Output: progress (every few seconds) and logs are log lines on stderr, in the
--log-format; the summary is printed on stdout.`, app.ReplayBatchSize, app.ReplayJobSizeRules, app.ReplayJobSizeLLM,
		worker.DefaultReplayWindow, worker.DefaultReplayWindowBytes>>20))
	o.register(f)
	f.Lookup("batch-size").Usage = fmt.Sprintf("not used by replay, which records at most %d turns per transaction", app.ReplayBatchSize)
	f.Lookup("job-size").Usage = fmt.Sprintf("turns per extraction job replay enqueues; 0 picks %d for the offline extractor and %d for an LLM (at most %d)",
		app.ReplayJobSizeRules, app.ReplayJobSizeLLM, app.ReplayBatchSize)
	f.ArgString(&users, "user", "", "comma-separated user ids to replay (default: all); an id holding a comma or edge spaces goes in --users-file")
	f.ArgString(&usersFile, "users-file", "", "file of user ids to replay, one a line, exactly as written (with --user: both)")
	f.ArgString(&since, "since", "", "replay turns stored since this time (RFC 3339), or this long ago (a duration: 90m, 2h)")
	f.ArgInt(&fromSeq, "from-seq", 0, "replay from this stream sequence")
	f.ArgBool(&reset, "reset", false, "delete the users' extracted facts and context first (a full replay: not with --since or --from-seq)")
	f.ArgBool(&allowLoss, "allow-loss", false, "with --reset: also delete memory extracted from turns whose events the stream no longer holds")
	f.ArgBool(&dryRun, "dry-run", false, "read and count only; write nothing")
	f.ArgBool(&noWork, "no-work", false, "only enqueue; let running serve processes extract")
	if err := f.Parse(args); err != nil {
		return err
	}
	switch {
	case fromSeq < 0:
		return f.usageErr("--from-seq %d is negative", fromSeq)
	case since != "" && fromSeq > 0:
		return f.usageErr("--since and --from-seq select the same thing two ways: give one")
	case reset && (since != "" || fromSeq > 0):
		// --reset deletes all the users' extracted memory; a partial replay
		// would rebuild only part of it.
		return f.usageErr("--reset rebuilds all of the users' memory and cannot be combined with --since or --from-seq")
	case allowLoss && !reset:
		return f.usageErr("--allow-loss only applies to --reset")
	case o.app.Worker.JobSize > app.ReplayBatchSize:
		// Before, it was cut to the most without a word.
		return f.usageErr("--job-size %d is above %d, the most turns replay records in one transaction (a job's turns are recorded together)", o.app.Worker.JobSize, app.ReplayBatchSize)
	}
	ro := app.ReplayOptions{Reset: reset, AllowLoss: allowLoss, DryRun: dryRun, FromSeq: uint64(fromSeq), Work: !noWork}
	if users != "" {
		for _, u := range strings.Split(users, ",") {
			if u = strings.TrimSpace(u); u != "" {
				ro.Users = append(ro.Users, u)
			}
		}
	}
	if usersFile != "" {
		data, err := os.ReadFile(usersFile)
		if err != nil {
			// A bad argument, as a misspelt flag: exit status 2.
			return f.usageErr("--users-file: %v", err)
		}
		for _, u := range strings.Split(string(data), "\n") {
			if u = strings.TrimSuffix(u, "\r"); u != "" {
				ro.Users = append(ro.Users, u)
			}
		}
		if len(ro.Users) == 0 {
			return f.usageErr("--users-file %s names no user", usersFile)
		}
	}
	if since != "" {
		// A time, or how long ago: an operator replaying the last hours
		// wrote "--since 5m" (a probe), which prune's durations suggest.
		t, err := time.Parse(time.RFC3339Nano, since)
		if err != nil {
			d, derr := time.ParseDuration(since)
			if derr != nil || d <= 0 {
				return f.usageErr("--since %q is neither an RFC 3339 time nor a duration ago (90m, 2h)", since)
			}
			t = time.Now().Add(-d)
		}
		ro.Since = t
	}
	svc, logger, err := o.newApp(f, a, "memoryd-replay")
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
		defer cancel()
		// The replay's outcome is its own error; a stop past
		// --shutdown-timeout hands running jobs back to River (a serve
		// runs them), which the operator should still hear of.
		if err := svc.Stop(stopCtx); err != nil {
			logger.Warn("replay: stopping its workers", "error", err, "shutdown_timeout", o.shutdownTimeout)
		}
	}()
	// Progress goes to the log (stderr), the summary to stdout, so that a
	// progress line is never drawn into the middle of a log line.
	// Reports come after each batch read and each transaction recorded (a
	// window's recording beside live work can take tens of seconds, read
	// already at total): one every progressEvery, and the first and last
	// of the recording after the last event read.
	ro.Progress = (&replayProgress{logger: logger, now: time.Now}).report
	p, err := svc.Replay(ctx, ro)
	var inc *worker.ReplayIncompleteError
	if errors.As(err, &inc) {
		// What was read is recorded and enqueued; say so, then fail with
		// what was not read.
		fmt.Fprintf(a.stdout, "incomplete: read %d of %d events (%d invalid, %d opted out, %d of forgotten users), %d turns enqueued for extraction; re-run replay to read the rest\n",
			p.Read, p.Total, p.Invalid, p.OptedOut, p.Forgotten, p.Enqueued)
	}
	if err != nil && p.Reset {
		// The users' memory is gone and not yet rebuilt: the one thing
		// the operator must know, whatever stopped the replay.
		fmt.Fprintf(a.stderr, "the reset deleted %d facts and %d context items and the replay stopped before reading everything back: "+
			"the users in scope have only what it rebuilt until you run memoryd replay again (with or without --reset)\n", p.Removed.Facts, p.Removed.Context)
	}
	if err != nil && ctx.Err() != nil && inc == nil {
		// Stopped (Ctrl-C, SIGTERM) before it read everything: the
		// operator knows why, and "replay: requeue turns: context
		// canceled" said it in the store's words (walk7).
		return fmt.Errorf("interrupted after reading %d of %d events (%d turns enqueued for extraction); re-running replay is safe", p.Read, p.Total, p.Enqueued)
	}
	if err != nil {
		return err
	}
	if dryRun {
		fmt.Fprintf(a.stdout, "dry run: read %d events (%d invalid, %d opted out); %d turns would be extracted again; nothing was written\n",
			p.Read, p.Invalid, p.OptedOut, p.Enqueued)
		sayNoneInScope(a, p, ro)
		if u := p.Unreplayable; u.Items > 0 {
			fmt.Fprintf(a.stdout, "a --reset would delete %d items of memory (of %d user(s)) extracted from %d recorded turns the stream no longer holds (recorded from sequences %d-%d): it is refused without --allow-loss\n",
				u.Items, u.Users, u.Turns, u.FirstSeq, u.LastSeq)
		} else if reset {
			// Said too when it passes: silence read as a check not made
			// (walk7).
			fmt.Fprintln(a.stdout, "a --reset would pass the loss check: every item of memory it would delete came from turns the stream still holds")
		}
		return nil
	}
	fmt.Fprintf(a.stdout, "read %s (%d invalid, %d opted out), %s enqueued for extraction in %s\n",
		app.Plural(int64(p.Read), "event", "events"), p.Invalid, p.OptedOut, plural(p.Enqueued, "turn", "turns"), p.Elapsed.Round(time.Millisecond))
	sayNoneInScope(a, p, ro)
	if p.Forgotten > 0 {
		fmt.Fprintf(a.stdout, "%d events skipped: a forget of their user covers them (one ran beside the replay, one's stream side did not finish, or the stream came back from a backup older than the forget); they stay forgotten, and %d are no longer in the stream (deleted now, or by the forget already)\n", p.Forgotten, p.ForgottenDeleted)
	}
	if rest := int(p.Read) - p.Invalid - p.OptedOut - p.Forgotten - p.Enqueued; rest > 0 {
		// So that the summary adds up.
		fmt.Fprintf(a.stdout, "%d events not enqueued again: their turn was already pending extraction (or, after --reset, extracted since the reset), or an earlier event had the same id (a retry, or a conflicting duplicate that ingest dead-lettered)\n", rest)
	}
	reportResets(a, p)
	if reset {
		fmt.Fprintf(a.stdout, "reset removed %s and %s\n", app.Plural(p.Removed.Facts, "fact", "facts"), app.Plural(p.Removed.Context, "context item", "context items"))
		if u := p.Unreplayable; u.Items > 0 {
			fmt.Fprintf(a.stdout, "of what it removed, %d items (of %d user(s)) came from %d recorded turns the stream no longer holds: they are gone for good (--allow-loss)\n",
				u.Items, u.Users, u.Turns)
		}
	}
	if noWork {
		return nil
	}
	start := time.Now()
	var lastLog time.Time
	// The turns it read, not those ingest records meanwhile: beside live
	// traffic and a model taking seconds, some of those are always pending.
	err = svc.WaitExtractedUpTo(ctx, ro.Users, p.EndSeq, func(n int64) {
		if n > 0 && time.Since(lastLog) >= progressEvery {
			logger.Info("replay extracting", "pending_turns", n)
			lastLog = time.Now()
		}
	})
	if err != nil && ctx.Err() != nil {
		// Not done, so not exit 0: a script running replay under a
		// timeout would take it for done.
		if reset {
			return errors.New("interrupted: every event is read back and the rest is enqueued; until a running serve has extracted it, the users in scope have only part of their memory; re-running replay is safe")
		}
		return errors.New("interrupted: the rest is enqueued and will be extracted by any running serve; re-running replay is safe")
	}
	if err != nil {
		// Everything is read back and enqueued (the reset's mark is
		// cleared): only the wait failed.
		fmt.Fprintln(a.stderr, "stopped waiting for the extraction: every event is read back and the rest is enqueued; a running serve extracts it (memoryd stats --user U shows a user's turns_pending); re-running replay is safe")
		return err
	}
	fmt.Fprintf(a.stdout, "replay done in %s\n", (p.Elapsed + time.Since(start)).Round(time.Millisecond))
	return nil
}

// progressEvery spaces replay's progress log lines.
const progressEvery = 2 * time.Second

// replayProgress logs a replay's progress reports: one every
// progressEvery, and the first and last of the recording after the last
// event read.
type replayProgress struct {
	logger       *slog.Logger
	now          func() time.Time
	lastProgress time.Time
	readAll      bool
	recordedAll  bool
}

func (r *replayProgress) report(p worker.ReplayProgress) {
	readAll := p.Read >= p.Total
	// Everything read is recorded: Recorded, not Enqueued, which leaves
	// out the turns already pending extraction (a backlog, a replay run
	// again), so the last report was never forced with any.
	last := readAll && !r.recordedAll && p.Recorded+p.Invalid+p.OptedOut >= int(p.Read)
	first := readAll && !r.readAll
	if r.now().Sub(r.lastProgress) < progressEvery && !first && !last {
		return
	}
	r.readAll = r.readAll || readAll
	r.recordedAll = r.recordedAll || last
	r.lastProgress = r.now()
	r.logger.Info("replay progress", "read", p.Read, "total", p.Total, "enqueued", p.Enqueued, "events_per_second", int(p.Rate()), "eta", p.ETA().Round(time.Second))
}

func runForget(ctx context.Context, a *cli, args []string) error {
	var (
		o    connOptions
		user string
	)
	f := newFlags("forget", `Usage: memoryd forget --user U

Deletes everything memoryd keeps about a user: facts, fact history, context,
turns, their extraction jobs (waiting or finished), token usage, language,
their own document collections, and the user's events in the turn and
dead-letter streams, so that no replay can bring them back. Prints the
counts as JSON.`)
	o.register(f)
	f.ArgString(&user, "user", "", "the user id to forget (required)")
	if err := f.Parse(args); err != nil {
		return err
	}
	if user == "" {
		return f.usageErr("--user is required")
	}
	svc, err := o.newApp(a, "memoryd-forget")
	if err != nil {
		return err
	}
	defer svc.Stop(context.WithoutCancel(ctx))
	res, err := svc.Forget(ctx, user)
	if err != nil {
		if nc, cerr := svc.Conn(); cerr == nil {
			if perr := refusedByServer(nc); perr != nil {
				// Refused before the transaction (reading the stream's
				// state) nothing is deleted; after it, the memory is gone
				// and the stream's events are left: either way a forget
				// run again completes it.
				return fmt.Errorf("%w (refused before its database transaction, the forget deleted nothing; after it, the memory is gone but the user's events are still in the stream: either way run it again with memoryd's credential, which is allowed the stream's API)", perr)
			}
		}
		if db := (*worker.DatabaseSideError)(nil); errors.As(err, &db) {
			if errors.Is(err, store.ErrCommitUnconfirmed) {
				// Its connection lost during the commit: the memory
				// may be gone, the stream's events still there.
				return ifUnconfirmed(err, "the forget's database commit was not confirmed: the memory may be deleted already; run it again to complete it")
			}
			// Postgres went away mid-lock, a lock wait past its
			// attempts: a walk's user read only "forget: lock users:
			// unexpected EOF".
			return fmt.Errorf("%w (the forget did not finish and deleted nothing; it is safe to run again)", err)
		}
		return err
	}
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

func runConfig(_ context.Context, a *cli, args []string) error {
	if len(args) == 0 || args[0] != "print" {
		return &usageError{cmd: "config print", err: errors.New("the only action is print: memoryd config print [serve flags]")}
	}
	var o serveOptions
	f := newFlags("config print", `Usage: memoryd config print [--config FILE] [serve flags]

Prints the effective serve configuration (flags, then MEMORYD_* variables,
then the configuration file, then defaults), one "key: value  # source" line
each, with secrets and URL passwords redacted. The output is a valid
memoryd.yaml once the redacted secrets are put back (or their lines left
out and the secrets set by their variables).`)
	o.register(f)
	var role string
	registerRole(f, &role)
	if err := f.Parse(args[1:]); err != nil {
		return err
	}
	r, err := parseRole(f, role)
	if err != nil {
		return err
	}
	// What serve would refuse is refused here too, naming the flag: the
	// app checks its configuration without connecting to anything.
	o.app.Role = r
	if _, _, err := o.newApp(f, a, "memoryd"); err != nil {
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
		case strings.Contains(v, "://"), strings.Contains(v, "="):
			v = app.RedactURL(v) // a URL, or a keyword/value connection string
		}
		fmt.Fprintf(a.stdout, "%s: %q  # %s\n", strings.ReplaceAll(name, "-", "_"), v, f.source[name])
	}
	return nil
}

// reportResets says what a finished replay left of resets that have not
// read the stream back (store.ResetMark): those it completed, and on
// stderr, each left, whose users have only part of their memory.
func reportResets(a *cli, p worker.ReplayProgress) {
	if p.Completed > 0 {
		fmt.Fprintf(a.stdout, "completed %d earlier replay --reset that had not read the stream back\n", p.Completed)
	}
	for _, m := range p.Unfinished {
		fmt.Fprintf(a.stderr, "a replay --reset of %s at %s has not read the stream back (it is running, or it stopped): "+
			"those users have only part of their memory until memoryd replay reads it again (with the same --user, or none for every user)\n",
			resetScope(m), shownTime(m.StartedAt))
	}
}

// resetScope names a reset's users for a message.
func resetScope(m store.ResetMark) string {
	switch m.Users {
	case 0:
		return "every user"
	case 1:
		return "1 user"
	}
	return fmt.Sprintf("%d users", m.Users)
}

// sayNoneInScope says why a replay read no event, when it read none: a
// bare "read 0 events" left an operator to guess whether the user id, the
// sequence or the time was wrong (an ops walk).
func sayNoneInScope(a *cli, p worker.ReplayProgress, ro app.ReplayOptions) {
	if p.Read > 0 {
		return
	}
	var why string
	switch {
	case p.EndSeq == 0:
		why = "the stream holds no event"
	case ro.FromSeq > p.EndSeq:
		why = fmt.Sprintf("--from-seq %d is past the stream's last sequence, %d", ro.FromSeq, p.EndSeq)
	case len(ro.Users) == 0 && ro.Since.IsZero():
		why = fmt.Sprintf("no event in the stream from sequence %d to its last, %d", max(ro.FromSeq, 1), p.EndSeq)
	default:
		// The selections together, as the replay read them: one named
		// alone said the stream held nothing since --since where it held
		// events of other users than those named.
		why = fmt.Sprintf("the stream (last sequence %d) holds no event", p.EndSeq)
		if len(ro.Users) > 0 {
			why += " of the user(s) named"
		}
		if ro.FromSeq > 1 {
			why += fmt.Sprintf(" from sequence %d", ro.FromSeq)
		}
		if !ro.Since.IsZero() {
			why += " stored since " + ro.Since.UTC().Format(time.RFC3339)
		}
		if len(ro.Users) > 0 {
			why += ": ids match exactly, case and spaces included (memoryd stats --user U shows what was recorded of one)"
		}
	}
	fmt.Fprintf(a.stdout, "nothing to replay: %s\n", why)
}
