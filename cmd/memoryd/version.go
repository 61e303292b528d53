package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/memoryd/memoryd/migrations"
	"github.com/memoryd/memoryd/store"
)

// commit is the VCS revision memoryd was built from, for builds without Go's
// VCS stamp (a source archive, a Docker build without .git):
//
//	go build -ldflags "-X main.commit=$(git rev-parse HEAD)" ./cmd/memoryd
//
// When empty, the revision Go stamped into the binary is reported.
var commit string

// unstamped is the commit of a binary that carries none, with why: `go run`
// (the README's way to run memoryd) never stamps one, nor does a build with
// -buildvcs=false (some machines' GOFLAGS) or outside a git checkout.
const unstamped = "unknown (not stamped: go run, -buildvcs=false or no git checkout; go build or go install in a checkout stamps it)"

// buildCommit returns the revision and whether the working tree had local
// changes: commit when set at link time, else Go's vcs.revision and
// vcs.modified build settings, else unstamped.
func buildCommit() (rev string, modified bool) {
	if commit != "" {
		return commit, false
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return unstamped, false
	}
	rev = unstamped
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return rev, modified
}

func runVersion(_ context.Context, a *cli, args []string) error {
	f := newFlags("version", "Usage: memoryd version   (or memoryd --version)\n\nPrints memoryd's version, the commit it was built from (\"modified\" when the\nworking tree had local changes), the newest schema migration it knows\n(docs/operations.md, \"Upgrading\", is keyed by it) and the Go version and\nplatform.")
	if err := f.Parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return f.usageErr("version takes no arguments, got %q", f.Args())
	}
	rev, modified := buildCommit()
	if modified {
		rev += " (modified)"
	}
	schema, err := store.NewestMigration(migrations.FS)
	if err != nil {
		return fmt.Errorf("reading the embedded migrations: %w", err)
	}
	// The version string is the same across releases; the newest migration
	// tells them apart where an upgrade needs it (docs/operations.md, "Upgrading").
	fmt.Fprintf(a.stdout, "memoryd %s\ncommit  %s\nschema  %03d\ngo      %s %s/%s\n", version, rev, schema, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
