package main

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/memoryd/memoryd/store"
)

// TestExplainFullPostgresNamesTheLimit: a connection refused for want of
// slots (53300) names the limit that was reached, as Postgres's message
// does: the server's max_connections, or a role's or a database's
// CONNECTION LIMIT (managed services set a role's), whose fix raising
// max_connections is not (an operator's walk with a dedicated role was
// told to raise max_connections for its role's limit).
func TestExplainFullPostgresNamesTheLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		msg, want, unwanted string
	}{
		{"sorry, too many clients already", "max_connections", "CONNECTION LIMIT"},
		{"remaining connection slots are reserved for non-replication superuser connections", "max_connections", "CONNECTION LIMIT"},
		{`too many connections for role "memoryd_app"`, `ALTER ROLE "memoryd_app" CONNECTION LIMIT`, "max_connections"},
		{`too many connections for database "memoryd"`, `ALTER DATABASE "memoryd" CONNECTION LIMIT`, "max_connections"},
		// Postgres quotes the name without doubling a quote in it: the
		// advice quotes it as SQL does.
		{`too many connections for role "we"ird"`, `ALTER ROLE "we""ird" CONNECTION LIMIT`, "max_connections"},
	} {
		err := &store.ConnectError{Host: "127.0.0.1", Port: 5432, Database: "memoryd", Err: &pgconn.PgError{Severity: "FATAL", Code: "53300", Message: c.msg}}
		got := explain(err)
		if !strings.Contains(got, "has no free connection") || !strings.Contains(got, c.want) || strings.Contains(got, c.unwanted) {
			t.Errorf("53300 %q explained as %q; want %q and no %q", c.msg, got, c.want, c.unwanted)
		}
	}
}
