package main

import (
	"context"
	"fmt"

	"github.com/memoryd/memoryd/apikeys"
)

// runKeys manages the proxy's API key file.
func runKeys(ctx context.Context, a *cli, args []string) error {
	var file, user string
	f := newFlags("keys", `Usage: memoryd keys add --file F --user U

Generates a random API key for user U, appends its SHA-256 hash to the key
file F (created with mode 0600 when missing) and prints the key once: the
file never holds it, so it cannot be shown again. A running proxy reloads the
file on change. To revoke a key, delete its line.`)
	f.ArgString(&file, "file", "", "key file to append to (required)")
	f.ArgString(&user, "user", "", "user id the key stands for (required)")
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		if err := f.Parse(args); err != nil {
			return err
		}
		return f.usageErr("a subcommand is required: add")
	}
	if args[0] != "add" {
		return f.usageErr("unknown subcommand %q (want add)", args[0])
	}
	if err := f.Parse(args[1:]); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return f.usageErr("unexpected argument %q", f.Arg(0))
	}
	if file == "" || user == "" {
		return f.usageErr("--file and --user are required")
	}
	key, err := apikeys.Add(file, user)
	if err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, key)
	fmt.Fprintf(a.stderr, "added a key for %s to %s; it is shown only now\n", user, file)
	return nil
}
