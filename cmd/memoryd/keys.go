package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/memoryd/memoryd/apikeys"
)

// runKeys manages the API key file of the proxy and of mcp.
func runKeys(ctx context.Context, a *cli, args []string) error {
	var file, user, hash, key string
	f := newFlags("keys", `Usage: memoryd keys add --file F --user U
       memoryd keys list --file F
       memoryd keys revoke --file F [--user U] [--hash PREFIX | --key KEY]

add generates a random API key for user U, appends its SHA-256 hash to the
key file F (created with mode 0600 when missing) and prints the key once:
the file never holds it, so it cannot be shown again.
list prints each key's line number, user and hash (its first 16 hex digits
tell the keys of one user apart).
revoke deletes the keys that match: all of U's, the one whose hash starts
with PREFIX (as list prints it; at least 8 hex digits), or the one KEY is;
the file is rewritten in place (through a symlink, its target; its owner
and mode kept), other lines and comments as they were, under a lock that
add takes too. Keys given inline (--key-hashes, its variable) are not in
the file: neither listed nor revoked here.
A running proxy or mcp reloads the file on change.`)
	f.ArgString(&file, "file", "", "key file (required)")
	f.ArgString(&user, "user", "", "user id the key stands for (add: required)")
	f.ArgString(&hash, "hash", "", "revoke: the key whose hash starts with this (sha256:<hex> as list prints it, or the hex digits)")
	f.ArgString(&key, "key", "", "revoke: the key itself (mk-...)")
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		if err := f.Parse(args); err != nil {
			return err
		}
		return f.usageErr("a subcommand is required: add, list or revoke")
	}
	sub := args[0]
	switch sub {
	case "add", "list", "revoke":
	default:
		return f.usageErr("unknown subcommand %q (want add, list or revoke)", sub)
	}
	if err := f.Parse(args[1:]); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return f.usageErr("unexpected argument %q", f.Arg(0))
	}
	if file == "" {
		return f.usageErr("--file is required")
	}
	switch sub {
	case "list":
		if user != "" || hash != "" || key != "" {
			return f.usageErr("list takes --file only")
		}
		lines, err := apikeys.List(file)
		if err != nil {
			return err
		}
		for _, l := range lines {
			fmt.Fprintln(a.stdout, keyLine(l))
		}
		return nil
	case "revoke":
		if hash != "" && key != "" {
			return f.usageErr("--hash and --key name a key two ways: give one")
		}
		if key != "" {
			hash = apikeys.Hash(key)
		}
		if user == "" && hash == "" {
			return f.usageErr("revoke needs --user, --hash or --key")
		}
		gone, err := apikeys.Revoke(file, user, hash)
		if errors.Is(err, apikeys.ErrInvalid) {
			return f.usageErr("%v", err)
		}
		if err != nil {
			return err
		}
		for _, l := range gone {
			fmt.Fprintln(a.stdout, "revoked", keyLine(l))
		}
		return nil
	}
	if user == "" {
		return f.usageErr("add needs --user: the user id the key stands for")
	}
	if hash != "" || key != "" {
		return f.usageErr("--hash and --key are revoke's")
	}
	key, err := apikeys.Add(file, user)
	if errors.Is(err, apikeys.ErrInvalid) {
		return f.usageErr("%v", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, key)
	fmt.Fprintf(a.stderr, "added a key for %s to %s; it is shown only now\n", user, file)
	return nil
}

// keyLine shows a key of the file: its line, user and the start of its
// hash (16 hex digits tell a user's keys apart).
func keyLine(l apikeys.Line) string {
	return fmt.Sprintf("line %d  %s  %s…", l.Number, l.UserID, l.Hash[:len(apikeys.HashPrefix)+16])
}
