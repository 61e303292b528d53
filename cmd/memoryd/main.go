// Command memoryd gives chat frontends long-term memory: it consumes
// conversation turns from NATS JetStream, extracts facts and context into
// Postgres, and answers enrich requests over NATS.
//
// Usage: memoryd <command> [flags]. Run "memoryd help" for the commands and
// "memoryd <command> -h" for a command's flags, each with its MEMORYD_*
// environment variable and default.
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
)

// command is one subcommand of the binary.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, app *app, args []string) error
}

// app is what every command gets: its output streams.
type app struct {
	stdout io.Writer
	stderr io.Writer
}

func commands() []command {
	cmds := []command{
		{"serve", "run the ingest consumer, extraction workers and enrich service", runServe},
		{"migrate", "apply database migrations (River's and memoryd's) and exit", runMigrate},
		{"publish", "publish a turn event from flags or stdin JSON", runPublish},
		{"demo", "run memoryd end to end on the local defaults and show what it remembers", runDemo},
		{"failed", "list turns whose extraction failed", runFailed},
		{"retry-failed", "re-run extraction for failed turns", runRetryFailed},
		{"replay", "rebuild memory from the turn stream", runReplay},
		{"forget", "delete everything memoryd keeps about a user", runForget},
		{"config", "print the effective configuration (config print), secrets redacted", runConfig},
		{"schemas", "write the JSON Schemas of the wire contract", runSchemas},
		{"health", "probe a running serve's /readyz (for container healthchecks)", runHealth},
	}
	cmds = append(cmds, clientCommands()...)
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].name < cmds[j].name })
	return cmds
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, &app{stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, a *app, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(a.stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, a, args[1:])
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if err != nil {
			fmt.Fprintf(a.stderr, "memoryd %s: %s\n", c.name, explain(err))
			return 1
		}
		return 0
	}
	fmt.Fprintf(a.stderr, "memoryd: unknown command %q\n\n", args[0])
	usage(a.stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "memoryd: long-term memory for chat frontends (NATS JetStream -> River -> Postgres).")
	fmt.Fprintln(w, "\nUsage: memoryd <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-13s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'memoryd <command> -h' for a command's flags; each has a MEMORYD_* environment variable.")
}
