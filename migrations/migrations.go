// Package migrations holds memoryd's numbered SQL schema migrations. Files are
// named NNN_description.sql and applied in order, each in its own transaction,
// by store.Migrate; River's own tables are migrated there too, via rivermigrate.
package migrations

import "embed"

// FS holds the migration files.
//
//go:embed *.sql
var FS embed.FS
