package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/lmittmann/tint"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/internal/app"
	"github.com/memoryd/memoryd/store"
)

// connOptions are the connection settings shared by every command.
type connOptions struct {
	nats        app.NATSConfig
	databaseURL string
	prefix      string
	stream      string
	logLevel    string
	logFormat   string
	// cmd is the command whose flags these are, for usage errors, and
	// flags the flags, which say where a setting came from.
	cmd   string
	flags *flags
	// pgEnvWarned is set once pgEnvShadowed was checked.
	pgEnvWarned bool
}

// usesDatabase reports whether the command connects to Postgres: the
// commands that talk to NATS only say so in --database-url's usage.
func (o *connOptions) usesDatabase() bool {
	if o.flags == nil {
		return true
	}
	f := o.flags.Lookup("database-url")
	return f != nil && !strings.HasPrefix(f.Usage, "not used")
}

// pgShadowedVars are the libpq variables memoryd's default database URL
// names the setting of.
var pgShadowedVars = []string{"PGHOST", "PGPORT", "PGUSER", "PGDATABASE", "PGSSLMODE"}

// pgEnvShadowed warns, when the database URL is memoryd's default (or
// empty, which is the default), of the libpq variables set that the
// default's own host, port, user, database and sslmode=disable override:
// pgx, as libpq, takes a variable only for what the URL leaves out. A TLS
// walk set PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE and PGSSLMODE
// for its TLS cluster, and migrate created and filled a "memoryd"
// database on 127.0.0.1:5432 without TLS instead, saying nothing.
// PGPASSWORD, PGPASSFILE and PGSSLROOTCERT, PGSSLCERT, PGSSLKEY are
// still read (the default names none of them).
func pgEnvShadowed(url string, lookup func(string) (string, bool)) string {
	if url != "" && url != store.DefaultURL {
		return ""
	}
	var set []string
	for _, v := range pgShadowedVars {
		if _, ok := lookup(v); ok {
			set = append(set, v)
		}
	}
	if len(set) == 0 {
		return ""
	}
	are, they := "are", "they are"
	if len(set) == 1 {
		are, they = "is", "it is"
	}
	return fmt.Sprintf("%s %s set, but memoryd's default --database-url (%s) names the host, port, user, database and sslmode itself, and wins: %s ignored; set --database-url / MEMORYD_DATABASE_URL, e.g. to 'postgres://?pool_max_conns=10' to take them from the PG variables",
		strings.Join(set, ", "), are, store.DefaultURL, they)
}

func (o *connOptions) register(f *flags) {
	o.cmd, o.flags = f.Name(), f
	def := app.Defaults()
	f.String(&o.nats.URL, "nats-url", def.NATS.URL, "NATS server URL(s), comma separated")
	f.String(&o.nats.User, "nats-user", "", "NATS user name")
	f.Secret(&o.nats.Password, "nats-password", "NATS password")
	f.String(&o.nats.PasswordFile, "nats-password-file", "", "file holding the NATS password (instead of --nats-password), read again at every reconnect: a password rotated in the file is used without a restart")
	f.Secret(&o.nats.Token, "nats-token", "NATS auth token")
	f.String(&o.nats.TokenFile, "nats-token-file", "", "file holding the NATS auth token (instead of --nats-token), read again at every reconnect")
	f.String(&o.nats.Creds, "nats-creds", "", "NATS .creds file (JWT + NKey seed)")
	f.String(&o.nats.NKey, "nats-nkey", "", "NATS NKey seed file")
	f.String(&o.nats.CA, "nats-ca", "", "CA certificate file to verify the NATS server's TLS certificate")
	f.String(&o.nats.Cert, "nats-cert", "", "client certificate file for NATS TLS")
	f.String(&o.nats.Key, "nats-key", "", "client key file for NATS TLS")
	f.String(&o.nats.InboxPrefix, "inbox-prefix", "", "prefix of this connection's reply subjects, NATS's _INBOX when empty; a frontend's credential needs its own, e.g. _INBOX_alice_frontend")
	f.String(&o.databaseURL, "database-url", def.Store.URL, "Postgres connection string")
	f.String(&o.prefix, "prefix", def.Prefix, "NATS subject prefix")
	f.String(&o.stream, "stream", def.Stream, "JetStream stream holding the turns")
	f.String(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error (message bodies only at debug)")
	f.String(&o.logFormat, "log-format", "auto", "log format: auto (text on a terminal, JSON otherwise), text or json")
}

// config is the app configuration of the connection settings: a command
// named name (the NATS connection's name) that does not create the database.
// Its pool opens one connection at start, not the service's four kept
// ready: a command runs a few statements and exits, and each connection it
// opened and did not use cost the server a backend's start (some 30 ms of
// its CPU on a 2-core machine); more open as a command needs them. serve
// takes only the URL from here.
func (o *connOptions) config(name string, logger *slog.Logger) app.Config {
	n := o.nats
	n.Name = name
	return app.Config{Logger: logger, Prefix: o.prefix, Stream: o.stream, NATS: n, Store: store.Config{URL: o.databaseURL, MinConns: 1}}
}

// logger checks the connection options and returns the command's logger:
// it is the first use every command makes of them, so a bad --prefix or
// --stream is refused before anything connects, naming the flag.
func (o *connOptions) logger(a *cli) (*slog.Logger, error) {
	usage := func(format string, args ...any) error {
		if o.flags != nil {
			// Names the variable or file a setting came from.
			return o.flags.usageErr(format, args...)
		}
		return &usageError{cmd: o.cmd, err: fmt.Errorf(format, args...)}
	}
	// Empty (a variable set to nothing) is the default, as it always was.
	if err := events.CheckPrefix(o.prefix); o.prefix != "" && err != nil {
		return nil, usage("--prefix %q %v", o.prefix, err)
	}
	if err := events.CheckStream(o.stream); o.stream != "" && err != nil {
		return nil, usage("--stream %q %v", o.stream, err)
	}
	// Another database's URL read as key=value settings, and its
	// redaction mangled the message ("mysql:xxxxxx@..."; a first-start
	// walk). Only the scheme is named: the URL may hold a password.
	if scheme, _, ok := strings.Cut(o.databaseURL, "://"); ok && scheme != "postgres" && scheme != "postgresql" {
		return nil, usage("--database-url is a %s:// URL: memoryd needs a postgres:// (or postgresql://) URL, or key=value settings", scheme)
	}
	if err := checkNATSURL(o.nats.URL); err != nil {
		return nil, usage("--nats-url %v", err)
	}
	if o.nats.Password != "" && o.nats.PasswordFile != "" {
		return nil, usage("--nats-password and --nats-password-file are both set; give one")
	}
	if o.nats.Token != "" && o.nats.TokenFile != "" {
		return nil, usage("--nats-token and --nats-token-file are both set; give one")
	}
	if o.nats.Creds != "" && o.nats.NKey != "" {
		// nats.go's own words: "nats: user callback and nkey defined".
		return nil, usage("--nats-creds and --nats-nkey are both set: a .creds file holds its user's NKey seed already; give one of them")
	}
	if !o.pgEnvWarned && o.usesDatabase() {
		o.pgEnvWarned = true
		if w := pgEnvShadowed(o.databaseURL, os.LookupEnv); w != "" {
			fmt.Fprintf(a.stderr, "memoryd %s: warning: %s\n", o.cmd, w)
		}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, usage("--log-level %q is not debug, info, warn or error", o.logLevel)
	}
	format := o.logFormat
	if format == "auto" {
		format = "json"
		if f, ok := a.stderr.(*os.File); ok && isTerminal(f) {
			format = "text"
		}
	}
	switch format {
	case "text":
		// Colours and the time of day for a terminal; plain text and the
		// whole time for a file or journald, where the codes are noise and
		// the date is needed.
		opts := &tint.Options{Level: level, TimeFormat: time.TimeOnly, ReplaceAttr: readableDurations}
		if f, ok := a.stderr.(*os.File); !ok || !isTerminal(f) {
			opts.NoColor, opts.TimeFormat = true, time.RFC3339Nano
		}
		return slog.New(newRiverQuiet(tint.NewHandler(a.stderr, opts))), nil
	case "json":
		return slog.New(newRiverQuiet(slog.NewJSONHandler(a.stderr, &slog.HandlerOptions{Level: level, ReplaceAttr: readableDurations}))), nil
	}
	return nil, usage("--log-format %q is not auto, text or json", o.logFormat)
}

// checkNATSURL refuses a --nats-url that nats.go would dial at another
// address than the one meant, or cannot parse: "nats//127.0.0.1:4222" (a
// colon lost) dialed a host named "nats" and "127.0.0.1:4222:1" a port
// "1", both then reported as "NATS is not reachable" (walk7). It reads
// each comma-separated URL as nats.go does (nats:// when no scheme, 4222
// when no port). Only the host and path are echoed: a URL may hold a
// password (and none when an '@' follows them: they hold a piece of it).
//
// nats.go splits the list at every ',', one in a password too: the URL
// before it then ends inside the password, and what the parse reads as
// its host, port or path is a piece of it. So an entry followed by one
// holding an '@' is refused without quoting it.
func checkNATSURL(list string) error {
	entries := strings.Split(list, ",")
	for i, s := range entries {
		if err := checkNATSEntry(s); err != nil {
			for _, later := range entries[i+1:] {
				if strings.Contains(later, "@") {
					return fmt.Errorf("has a URL before one with a user or password that is not a URL such as nats://127.0.0.1:4222 (not quoted: it may end inside a password, as nats.go splits the list at every ','; a ',' in a user or password is written %%2C)")
				}
			}
			return err
		}
	}
	return nil
}

// checkNATSEntry is checkNATSURL for one URL of the list.
func checkNATSEntry(s string) error {
	if s = strings.TrimSpace(s); s == "" {
		return nil // nats.go skips empty entries
	}
	if !strings.Contains(s, "://") {
		s = "nats://" + s
	}
	_, rest, _ := strings.Cut(s, "://")
	if i := strings.IndexAny(rest, "/?#"); i >= 0 && strings.Contains(rest[i:], "@") {
		// An '@' after the end of the host: a '/', '?' or '#' in the
		// password ended it, and the port, host or path the parse
		// reads are pieces of the password.
		return errors.New("is not a URL such as nats://user:password@127.0.0.1:4222: a '/', '?', '#' or '@' in a user or password is written %2F, %3F, %23 or %40")
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL it quotes
		}
		// An invalid escape quotes the three characters from its '%',
		// which are the password's when it holds the '%'.
		var ee url.EscapeError
		if i := strings.LastIndex(rest, "@"); i >= 0 && errors.As(err, &ee) && strings.Contains(rest[:i], "%") {
			return errors.New("is not a URL such as nats://user:password@127.0.0.1:4222: a '%' in a user or password is written %25")
		}
		return fmt.Errorf("is not a URL such as nats://127.0.0.1:4222: %v", err)
	}
	hostPort := u.Host
	if u.Port() == "" {
		hostPort = strings.TrimSuffix(hostPort, ":") + ":4222"
	}
	if _, _, err := net.SplitHostPort(hostPort); err != nil {
		return fmt.Errorf("names no host and port to dial (%q); give scheme://host:port, such as nats://127.0.0.1:4222", u.Host)
	}
	// A websocket URL may have a path; nats.go ignores any other's.
	if u.Scheme != "ws" && u.Scheme != "wss" && strings.Trim(u.Path, "/") != "" {
		return fmt.Errorf("reads as host %q and path %q, and a NATS URL has no path: give scheme://host:port, such as nats://127.0.0.1:4222", u.Host, u.Path)
	}
	return nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// jetStream connects a command that uses JetStream alone (publish,
// deadletters), checking the options first; the context it returns ends
// with ctx or at the server's first refusal (endOnRefusal); close closes
// the connection.
func (o *connOptions) jetStream(ctx context.Context, a *cli, name string) (js jetstream.JetStream, jsCtx context.Context, close func(), err error) {
	logger, err := o.logger(a)
	if err != nil {
		return nil, nil, nil, err
	}
	nc, err := o.connectNATS(name, logger)
	if err != nil {
		return nil, nil, nil, err
	}
	if js, err = jetstream.New(nc); err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	jsCtx, cancel := endOnRefusal(ctx, nc)
	return js, jsCtx, func() { cancel(); nc.Close() }, nil
}

// endOnRefusal returns a context that ends with ctx or when the NATS
// server refuses nc something (a permissions violation). The server drops
// a refused request, or the subscription to its reply's inbox, without an
// answer: the command would wait out its timeout (--timeout, or 5 s for a
// JetStream API request) and then read as a memoryd or stream that does
// not answer. refusedByServer says what was refused. It replaces nc's
// error handler.
func endOnRefusal(ctx context.Context, nc *nats.Conn) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			cancel()
		}
	})
	return ctx, cancel
}

// connectNATS connects a command that needs only NATS.
func (o *connOptions) connectNATS(name string, logger *slog.Logger) (*nats.Conn, error) {
	n := o.nats
	n.Name = name
	return n.Connect(logger)
}

// checkInbox makes sure nc's credential may receive replies on its inbox
// prefix, for a command that serves others (proxy, mcp): refused, every
// request it sent would go out and be done, and the command would wait
// out its timeout, report memoryd as not answering and count a published
// turn as failed. The server answers a refused subscription before the
// flush's PONG, so the flush tells.
func checkInbox(nc *nats.Conn) error {
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return fmt.Errorf("subscribe to the reply inbox: %w", err)
	}
	defer sub.Unsubscribe()
	if err := nc.FlushTimeout(10 * time.Second); err != nil {
		return fmt.Errorf("check the reply inbox: %w", err)
	}
	if err := nc.LastError(); errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), inbox) {
		return fmt.Errorf("this NATS credential may not receive replies on its inbox %s (%v): set --inbox-prefix (MEMORYD_INBOX_PREFIX) to the one its permissions allow, e.g. _INBOX_proxy; see docs/operations.md, \"Confining a frontend to its users\"", inbox, err)
	}
	return nil
}

// newApp assembles a command's app on the connection settings; the caller
// stops it.
func (o *connOptions) newApp(a *cli, name string) (*app.App, error) {
	logger, err := o.logger(a)
	if err != nil {
		return nil, err
	}
	return app.New(o.config(name, logger))
}

// raiseLimit says which limit to raise for a connection Postgres refused
// with msg (53300): a role's or a database's CONNECTION LIMIT, which
// managed services set per role and which raising max_connections leaves
// as it is, or else the server's max_connections.
func raiseLimit(msg string) string {
	for _, kind := range []string{"role", "database"} {
		if name, ok := strings.CutPrefix(msg, "too many connections for "+kind+" "); ok {
			// Quoted by Postgres as "%s", a quote in the name not doubled.
			if n, ok := strings.CutPrefix(name, `"`); ok && len(n) > 0 && strings.HasSuffix(n, `"`) {
				name = `"` + strings.ReplaceAll(n[:len(n)-1], `"`, `""`) + `"`
			}
			return fmt.Sprintf("raise the %s's limit (ALTER %s %s CONNECTION LIMIT ...)", kind, strings.ToUpper(kind), name)
		}
	}
	return "raise the server's max_connections"
}

// explain turns the errors a newcomer will hit into one sentence with the fix.
func explain(err error) string {
	var (
		connErr  *store.ConnectError
		natsErr  *app.NATSConnectError
		pgErr    *pgconn.PgError
		netErr   *net.OpError
		parseErr *pgconn.ParseConfigError
	)
	switch {
	case errors.As(err, &connErr) && errors.As(err, &pgErr) && pgErr.Code == "3D000":
		// The server named: a shell without the URL's variable asks the
		// default one, where migrate would create an empty database.
		return fmt.Sprintf("Postgres database %q does not exist at %s:%d; check --database-url / MEMORYD_DATABASE_URL, or run 'memoryd migrate' (it creates it) or create it with createdb.", connErr.Database, connErr.Host, connErr.Port)
	case errors.As(err, &connErr) && errors.As(err, &pgErr) && pgErr.Code == "28P01":
		return fmt.Sprintf("Postgres at %s:%d refused the user or password; check --database-url / MEMORYD_DATABASE_URL.", connErr.Host, connErr.Port)
	case errors.As(err, &connErr) && errors.As(err, &pgErr) && pgErr.Code == "28000":
		// Not always a password: pg_hba.conf's "no encryption" (sslmode
		// disable against hostssl lines), a client certificate missing or
		// refused (a TLS walk was told "user or password" for both).
		return fmt.Sprintf("Postgres at %s:%d refused the connection: %s; check the user, sslmode and client certificate (sslcert, sslkey) in --database-url / MEMORYD_DATABASE_URL against the server's pg_hba.conf.", connErr.Host, connErr.Port, pgErr.Message)
	case errors.As(err, &connErr) && errors.As(err, &pgErr) && pgErr.Code == "53300":
		// Reachable but full: saying "not reachable" would send the
		// operator after the wrong problem.
		return fmt.Sprintf("Postgres at %s:%d has no free connection (%s); close other clients, lower the pools (pool_max_conns in --database-url, --enrich-max-conns) or %s.", connErr.Host, connErr.Port, pgErr.Message, raiseLimit(pgErr.Message))
	case errors.As(err, &pgErr) && pgErr.Code == "3F000":
		// Migrating with a search_path (the docs' one schema per
		// deployment) whose schema was never created.
		return fmt.Sprintf("the Postgres search_path names no schema that exists (%s); create it first (CREATE SCHEMA ...) or fix search_path in --database-url / MEMORYD_DATABASE_URL.", pgErr.Message)
	case errors.As(err, &pgErr) && pgErr.Code == "25006":
		return "the Postgres database is read-only (a standby, or default_transaction_read_only = on for the database or role); point --database-url / MEMORYD_DATABASE_URL at the primary, or turn the setting off."
	case errors.As(err, &connErr) && errors.As(err, &pgErr):
		// The server (or a pooler in front of it) answered, and refused:
		// "not reachable" sent a PgBouncer walk's operator after the
		// wrong problem (query_wait_timeout, an unsupported parameter).
		return fmt.Sprintf("Postgres at %s:%d refused the connection: %s (SQLSTATE %s); check the server's (or its pooler's) log and settings.", connErr.Host, connErr.Port, pgErr.Message, pgErr.Code)
	case errors.Is(err, store.ErrSharedSessions):
		return "the connections to Postgres share one session: a pooler in transaction mode is in front of it (PgBouncer: set pool_mode = session for memoryd's database), or connect to Postgres directly."
	case errors.As(err, &connErr) && tlsCause(err) != "":
		// The server answered: "not reachable; start it" sent a TLS
		// walk's operator after the wrong problem.
		return fmt.Sprintf("Postgres at %s:%d: TLS failed: %s; check sslmode, sslrootcert, sslcert and sslkey in --database-url / MEMORYD_DATABASE_URL.", connErr.Host, connErr.Port, tlsCause(err))
	case errors.As(err, &parseErr) && strings.Contains(err.Error(), "failed to configure TLS"):
		return fmt.Sprintf("--database-url's TLS files cannot be used: %v; check sslrootcert, sslcert, sslkey and sslpassword (an encrypted key must be PKCS#1, \"BEGIN RSA PRIVATE KEY\", with sslpassword: pgx cannot decrypt a PKCS#8 \"BEGIN ENCRYPTED PRIVATE KEY\"; convert it with openssl rsa -traditional, or decrypt it).", errors.Unwrap(parseErr))
	case errors.As(err, &connErr) && timedOut(err):
		// Something accepted the connection, or the packets go nowhere:
		// "start it" would send the operator after the wrong problem.
		return fmt.Sprintf("Postgres at %s:%d did not answer in time (a server that hangs, or a firewall dropping the packets); check the server and the network, or --database-url / MEMORYD_DATABASE_URL.", connErr.Host, connErr.Port)
	case errors.As(err, &connErr) && connErr.Port == 5432:
		return fmt.Sprintf("Postgres is not reachable at %s:%d; start it (on Debian: pg_ctlcluster 15 main start, or `make services`) or set --database-url / MEMORYD_DATABASE_URL.", connErr.Host, connErr.Port)
	case errors.As(err, &connErr):
		// Not the default port: Debian's default cluster is not the one
		// (a Postgres walk: a cluster on 5441 was told to start "15 main").
		return fmt.Sprintf("Postgres is not reachable at %s:%d; start the server on that port or set --database-url / MEMORYD_DATABASE_URL.", connErr.Host, connErr.Port)
	case errors.As(err, &natsErr) && errors.Is(err, nats.ErrAuthorization):
		return fmt.Sprintf("NATS at %s refused the credentials; check --nats-user, --nats-password or --nats-password-file, --nats-token or --nats-token-file, --nats-nkey, --nats-creds.", natsErr.URL)
	case errors.As(err, &natsErr) && tlsCause(err) != "":
		return fmt.Sprintf("NATS at %s: TLS failed: %s; check --nats-ca, --nats-cert and --nats-key, and the host name in --nats-url.", natsErr.URL, tlsCause(err))
	case errors.As(err, &natsErr) && errors.Is(err, nats.ErrSecureConnWanted):
		return fmt.Sprintf("NATS at %s does not offer TLS, which --nats-ca/--nats-cert/--nats-key or a tls:// URL ask for; enable TLS in the server's configuration (a tls block) or drop those settings.", natsErr.URL)
	case errors.As(err, &natsErr) && (errors.Is(err, nats.ErrNoServers) || errors.As(err, &netErr)):
		return fmt.Sprintf("NATS is not reachable at %s; start nats-server with -js (or `make services`) or set --nats-url / MEMORYD_NATS_URL.", natsErr.URL)
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		// Newer nats-servers (2.15.2) answer an account with "jetstream:
		// enabled" on a server without JetStream itself (Debian's
		// /etc/nats-server.conf with the docs' accounts example appended)
		// so; 2.9.10 does not answer it at all (ErrJetStreamNoAnswer).
		return "the NATS server runs without JetStream; restart it with -js (nats-server -js), or give its configuration file a top-level jetstream block (an account's \"jetstream: enabled\" needs it)."
	case errors.Is(err, events.ErrJetStreamNoAnswer):
		return "the NATS server's JetStream API did not answer in time: the server may run without JetStream (start it with -js, or give its configuration file a top-level jetstream block: an account's \"jetstream: enabled\" needs it), or be overloaded, or, in a JetStream cluster, have no stream leader for now (an election after a node was lost, or fewer than a majority of the replicas up: run it again once the cluster has one); `nats account info` with memoryd's credentials tells (" + err.Error() + ")."
	}
	return err.Error()
}

// timedOut reports whether err is a wait that ran out (a deadline, a
// network timeout), not a refusal.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// tlsCause says why a TLS handshake failed, or "" when err is no TLS
// failure: this side refused the server's certificate (its host name, its
// CA, its dates), the server refused this side's (a remote TLS alert: a
// client certificate missing, expired or from a CA it does not trust), or
// a Postgres server without TLS refused it (sslmode require or verify-*).
func tlsCause(err error) string {
	var (
		hostErr  x509.HostnameError
		caErr    x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		verifyEr *tls.CertificateVerificationError
		opErr    *net.OpError
		recErr   tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &hostErr):
		return fmt.Sprintf("the server's certificate does not name the host connected to (%v)", hostErr.Error())
	case errors.As(err, &caErr):
		return "the server's certificate is not signed by a CA this side trusts (the CA file given, or the system's when none is)"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return fmt.Sprintf("the server's certificate is expired or not yet valid (%v)", invalid.Error())
	case errors.As(err, &invalid):
		return fmt.Sprintf("the server's certificate is not valid (%v)", invalid.Error())
	case errors.As(err, &verifyEr):
		return fmt.Sprintf("the server's certificate could not be verified (%v)", verifyEr.Err)
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		// crypto/tls reports an alert the peer sent as a *net.OpError,
		// which read as "not reachable" before.
		return fmt.Sprintf("the server refused this side's TLS handshake (%v): a client certificate missing, expired, or not signed by a CA the server trusts", opErr.Err)
	case errors.Is(err, nats.ErrTLS) && strings.Contains(err.Error(), "after TLS handshake"):
		// TLS 1.3: the server checks the client's certificate after the
		// client's side of the handshake is done, and closes.
		return "the server closed the connection right after the TLS handshake: it likely refused this side's client certificate (missing, expired, or not signed by a CA the server trusts)"
	case errors.Is(err, nats.ErrTLS):
		return err.Error()
	case errors.As(err, &recErr):
		return "the server does not speak TLS on that port"
	case strings.Contains(err.Error(), "server refused TLS connection"):
		// pgconn's plain error: the server has ssl = off.
		return "the server does not accept TLS (ssl = off); turn ssl on in postgresql.conf, or lower sslmode to prefer or disable"
	}
	return ""
}
