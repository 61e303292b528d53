package store

import (
	"context"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// rereadFiles returns the pool's BeforeConnect: for each new connection it
// parses url again, so that what pgx reads from files when it parses a
// connection string is read again, as libpq does for each connection: the
// password from the password file (PGPASSFILE, ~/.pgpass, passfile=) and
// the TLS files (sslrootcert, sslcert, sslkey). Before, they were read
// once at start: an operator who rotated the role's password and wrote
// the new one in the password file, or renewed the client certificate
// (cert-manager), saw memoryd go on for as long as its connections lived
// (up to pgxpool's hour) and then fail every new one (28P01, or "connection
// requires a valid client certificate") until it was restarted, although
// the files on disk were right.
//
// A file that cannot be read or parsed now (a missing file, a certificate
// and key that do not match while they are being replaced) keeps what was
// read last, logged once per distinct error; so does a password file
// that has no entry for the connection now. The environment (PGPASSWORD,
// PGSSLCERT, ...) is the process's and does not change.
func rereadFiles(url string, logger *slog.Logger) func(context.Context, *pgx.ConnConfig) error {
	var (
		mu      sync.Mutex
		lastErr string
		// last is the last configuration parsed without error: what
		// the files held when they were last read whole.
		last *pgconn.Config
	)
	return func(_ context.Context, cc *pgx.ConnConfig) error {
		fresh, err := pgxpool.ParseConfig(url)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			if msg := err.Error(); msg != lastErr {
				lastErr = msg
				logger.Warn("postgres: cannot read the connection's files again (password file, TLS certificate or key); new connections use those last read", "error", err)
			}
		case !sameTarget(&cc.Config, &fresh.ConnConfig.Config):
			// A service file edited to name another server, role or
			// database: what it holds is not this connection's. Kept
			// as read last until a restart.
			const msg = "postgres: the connection's files now name another host, role or database; new connections keep those started with until a restart"
			if lastErr != msg {
				lastErr = msg
				logger.Warn(msg, "host", fresh.ConnConfig.Host, "user", fresh.ConnConfig.User, "database", fresh.ConnConfig.Database)
			}
		default:
			if lastErr != "" {
				lastErr = ""
				logger.Info("postgres: the connection's files read again")
			}
			if last != nil && fresh.ConnConfig.Password == "" {
				// The password file has no entry now (being
				// rewritten): keep the last password read.
				fresh.ConnConfig.Password = last.Password
			}
			last = &fresh.ConnConfig.Config
		}
		if last != nil {
			refreshFromFiles(&cc.Config, last)
		}
		return nil
	}
}

// refreshFromFiles copies into cc what fresh read from files, when fresh
// names the same hosts, role and database (it does, but for a service
// file edited to name others: that server's or role's password is not
// sent to cc's, which keeps what it had until a restart): the password
// when fresh has one, and the TLS configurations.
func refreshFromFiles(cc, fresh *pgconn.Config) {
	if !sameTarget(cc, fresh) {
		return
	}
	if fresh.Password != "" {
		cc.Password = fresh.Password
	}
	cc.TLSConfig = fresh.TLSConfig
	for i, fb := range fresh.Fallbacks {
		cc.Fallbacks[i].TLSConfig = fb.TLSConfig
	}
}

// sameTarget reports whether a and b connect as the same role to the same
// database on the same hosts (sameHosts).
func sameTarget(a, b *pgconn.Config) bool {
	return a.User == b.User && a.Database == b.Database && sameHosts(a, b)
}

// sameHosts reports whether a and b try the same hosts, ports and TLS
// modes in the same order.
func sameHosts(a, b *pgconn.Config) bool {
	if a.Host != b.Host || a.Port != b.Port || (a.TLSConfig == nil) != (b.TLSConfig == nil) || len(a.Fallbacks) != len(b.Fallbacks) {
		return false
	}
	for i := range a.Fallbacks {
		x, y := a.Fallbacks[i], b.Fallbacks[i]
		if x.Host != y.Host || x.Port != y.Port || (x.TLSConfig == nil) != (y.TLSConfig == nil) {
			return false
		}
	}
	return true
}
