// Command memoryd gives chat frontends long-term memory: it consumes
// conversation turns from NATS JetStream, extracts facts and context into
// Postgres, and answers enrich requests over NATS.
//
// Usage: memoryd <command> [flags]. Run "memoryd help" for the commands and
// "memoryd <command> -h" for a command's flags, each with its default and,
// for settings, its MEMORYD_* environment variable. Exit status: 0 done,
// 1 failed (memoryd unavailable, a failure, or a refusal after part of the
// work was done), 2 bad command, flag, argument or input (refused by the
// command or by memoryd as malformed, nothing done).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/memoryd/memoryd/store"
)

// command is one subcommand of the binary.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, c *cli, args []string) error
}

// cli is what every command gets: its output streams.
type cli struct {
	stdin  io.Reader // nil: os.Stdin
	stdout io.Writer
	stderr io.Writer
}

// in is what the command reads as its stdin. A field, not a package
// variable, so that tests running in parallel each give their own.
func (a *cli) in() io.Reader {
	if a.stdin == nil {
		return os.Stdin
	}
	return a.stdin
}

func commands() []command {
	cmds := []command{
		{"serve", "run the ingest consumer, extraction workers and enrich service", runServe},
		{"migrate", "apply database migrations (River's and memoryd's) and exit", runMigrate},
		{"publish", "publish a turn event from flags or stdin JSON", runPublish},
		{"demo", "run memoryd end to end on the local defaults and show what it remembers", runDemo},
		{"failed", "list turns whose extraction failed", runFailed},
		{"deadletters", "list the turn events memoryd rejected, with the reason", runDeadLetters},
		{"retry-failed", "re-run extraction for failed turns", runRetryFailed},
		{"replay", "rebuild memory from the turn stream", runReplay},
		{"prune", "apply the size limits and the turn text retention once, as serve does periodically", runPrune},
		{"embed", "embed context items that have no vector of the model (--backfill)", runEmbed},
		{"forget", "delete everything memoryd keeps about a user", runForget},
		{"mcp", "serve a user's memory to agents as MCP tools (stdio, or streamable HTTP with API keys)", runMCP},
		{"docs", "put, list, delete or search knowledge base documents; grant reads of shared ones", runDocs},
		{"config", "print the effective configuration (config print), secrets redacted", runConfig},
		{"schemas", "write the JSON Schemas of the wire contract", runSchemas},
		{"proxy", "serve an OpenAI-compatible endpoint with memory in front of an upstream model server", runProxy},
		{"keys", "API keys for the proxy and mcp: keys add --file F --user U (prints the key once), keys list, keys revoke", runKeys},
		{"health", "probe a running serve's /readyz (for container healthchecks)", runHealth},
		{"version", "print memoryd's version, commit, newest schema migration and Go version", runVersion},
	}
	cmds = append(cmds, clientCommands()...)
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].name < cmds[j].name })
	return cmds
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals(signal.Ignored)...)
	code := run(ctx, &cli{stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

// stopSignals are the signals that stop memoryd cleanly: SIGINT, SIGTERM
// and SIGHUP (a terminal hang-up, or a config tool's "reload", stops it
// cleanly rather than killing it mid-job: memoryd reloads nothing), except
// SIGHUP when it was ignored when memoryd started (nohup, a supervisor
// that ignores it): asking for it would undo that, and a nohup'd serve
// would stop when its terminal closed.
func stopSignals(ignored func(os.Signal) bool) []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

func run(ctx context.Context, a *cli, args []string) int {
	if len(args) == 2 && args[0] == "help" {
		args = []string{args[1], "-h"} // memoryd help CMD is memoryd CMD -h
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(a.stdout)
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = append([]string{"version"}, args[1:]...)
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		for _, w := range strayEnv(os.Environ()) {
			fmt.Fprintf(a.stderr, "memoryd %s: warning: %s\n", c.name, w)
		}
		err := c.run(ctx, a, args[1:])
		var (
			help *helpRequest
			uerr *usageError
		)
		switch {
		case err == nil:
			return 0
		case errors.As(err, &help):
			help.flags.printUsage(a.stdout)
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, &uerr) && uerr.input:
			fmt.Fprintf(a.stderr, "memoryd %s: %s\n", c.name, flagNames(uerr.err.Error()))
			return 2
		case errors.As(err, &uerr):
			fmt.Fprintf(a.stderr, "memoryd %s: %s\nRun 'memoryd %s -h' for usage.\n", c.name, flagNames(uerr.err.Error()), uerr.cmd)
			return 2
		}
		fmt.Fprintf(a.stderr, "memoryd %s: %s\n", c.name, flagNames(failure(err)))
		return 1
	}
	fmt.Fprintf(a.stderr, "memoryd: unknown command %q\nRun 'memoryd help' for the commands.\n", args[0])
	return 2
}

// failure is what run prints for a command's err (exit 1): a write in
// doubt says what may have been done and what is safe to do, its
// command's hint or unconfirmedHint (explain's reading of the lost
// connection would not say it); anything else as explain reads it.
func failure(err error) string {
	if errors.Is(err, store.ErrCommitUnconfirmed) {
		return ifUnconfirmed(err, unconfirmedHint).Error()
	}
	return explain(err)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "memoryd: long-term memory for chat frontends (NATS JetStream -> River -> Postgres).")
	fmt.Fprintln(w, "\nUsage: memoryd <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-13s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'memoryd <command> -h' for a command's flags: settings have a MEMORYD_* environment")
	fmt.Fprintln(w, "variable, per-invocation arguments (--user, --message, --json, ...) do not.")
	fmt.Fprintln(w, "Exit status: 0 done, 1 failed or unavailable, 2 bad command, flag, argument or input (nothing done).")
}
