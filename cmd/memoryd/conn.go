package main

import (
	"context"
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
	"github.com/memoryd/memoryd/store"
)

// connOptions are the connection settings shared by every command.
type connOptions struct {
	natsURL      string
	natsUser     string
	natsPassword string
	natsToken    string
	natsCreds    string
	natsNKey     string
	natsCA       string
	natsCert     string
	natsKey      string
	inboxPrefix  string
	databaseURL  string
	prefix       string
	stream       string
	logLevel     string
	logFormat    string
}

func (o *connOptions) register(f *flags) {
	f.String(&o.natsURL, "nats-url", nats.DefaultURL, "NATS server URL(s), comma separated")
	f.String(&o.natsUser, "nats-user", "", "NATS user name")
	f.Secret(&o.natsPassword, "nats-password", "NATS password")
	f.Secret(&o.natsToken, "nats-token", "NATS auth token")
	f.String(&o.natsCreds, "nats-creds", "", "NATS .creds file (JWT + NKey seed)")
	f.String(&o.natsNKey, "nats-nkey", "", "NATS NKey seed file")
	f.String(&o.natsCA, "nats-ca", "", "CA certificate file to verify the NATS server's TLS certificate")
	f.String(&o.natsCert, "nats-cert", "", "client certificate file for NATS TLS")
	f.String(&o.natsKey, "nats-key", "", "client key file for NATS TLS")
	f.String(&o.inboxPrefix, "inbox-prefix", "", "prefix of this connection's reply subjects, NATS's _INBOX when empty; a frontend's credential needs its own, e.g. _INBOX_alice_frontend")
	f.String(&o.databaseURL, "database-url", store.DefaultURL, "Postgres connection string")
	f.String(&o.prefix, "prefix", events.DefaultPrefix, "NATS subject prefix")
	f.String(&o.stream, "stream", events.DefaultStream, "JetStream stream holding the turns")
	f.String(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error (message bodies only at debug)")
	f.String(&o.logFormat, "log-format", "auto", "log format: auto (text on a terminal, JSON otherwise), text or json")
}

func (o *connOptions) logger(a *app) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q is not debug, info, warn or error", o.logLevel)
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
		return slog.New(&riverQuiet{Handler: tint.NewHandler(a.stderr, &tint.Options{Level: level, TimeFormat: time.TimeOnly, ReplaceAttr: readableDurations})}), nil
	case "json":
		return slog.New(&riverQuiet{Handler: slog.NewJSONHandler(a.stderr, &slog.HandlerOptions{Level: level, ReplaceAttr: readableDurations})}), nil
	}
	return nil, fmt.Errorf("--log-format %q is not auto, text or json", o.logFormat)
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (o *connOptions) streamConfig() events.StreamConfig {
	return events.StreamConfig{Prefix: o.prefix, Stream: o.stream}
}

// connectNATS connects with the configured credentials. The connection
// reconnects forever (a memory service outlives NATS restarts); the caller
// closes it.
func (o *connOptions) connectNATS(name string, logger *slog.Logger) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.Timeout(5 * time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				logger.Warn("nats disconnected", "error", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { logger.Info("nats reconnected", "url", nc.ConnectedUrlRedacted()) }),
	}
	if o.inboxPrefix != "" {
		// A frontend may subscribe only to its own inbox (docs/protocol.md).
		if strings.ContainsAny(o.inboxPrefix, "*> \t") || strings.HasPrefix(o.inboxPrefix, ".") || strings.HasSuffix(o.inboxPrefix, ".") {
			return nil, fmt.Errorf("--inbox-prefix %q: must be a subject without wildcards or spaces, not starting or ending with '.'", o.inboxPrefix)
		}
		opts = append(opts, nats.CustomInboxPrefix(o.inboxPrefix))
	}
	if o.natsUser != "" || o.natsPassword != "" {
		opts = append(opts, nats.UserInfo(o.natsUser, o.natsPassword))
	}
	if o.natsToken != "" {
		opts = append(opts, nats.Token(o.natsToken))
	}
	if o.natsCreds != "" {
		opts = append(opts, nats.UserCredentials(o.natsCreds))
	}
	if o.natsNKey != "" {
		opt, err := nats.NkeyOptionFromSeed(o.natsNKey)
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey: %w", err)
		}
		opts = append(opts, opt)
	}
	if o.natsCA != "" {
		opts = append(opts, nats.RootCAs(o.natsCA))
	}
	if o.natsCert != "" || o.natsKey != "" {
		opts = append(opts, nats.ClientCert(o.natsCert, o.natsKey))
	}
	nc, err := nats.Connect(o.natsURL, opts...)
	if err != nil {
		return nil, &natsConnectError{url: redactURL(o.natsURL), err: err}
	}
	return nc, nil
}

func (o *connOptions) jetStream(nc *nats.Conn) (jetstream.JetStream, error) {
	return jetstream.New(nc)
}

func (o *connOptions) openStore(ctx context.Context, createDB bool, logger *slog.Logger) (*store.Store, error) {
	return store.Open(ctx, store.Config{URL: o.databaseURL, CreateDatabase: createDB, Logger: logger})
}

type natsConnectError struct {
	url string
	err error
}

func (e *natsConnectError) Error() string {
	return fmt.Sprintf("cannot connect to NATS at %s: %v", e.url, e.err)
}
func (e *natsConnectError) Unwrap() error { return e.err }

// redactURL hides passwords in a (comma-separated list of) URL(s).
func redactURL(u string) string {
	parts := strings.Split(u, ",")
	for i, p := range parts {
		if pu, err := url.Parse(strings.TrimSpace(p)); err == nil {
			parts[i] = pu.Redacted()
		}
	}
	return strings.Join(parts, ",")
}

// explain turns the errors a newcomer will hit into one sentence with the fix.
func explain(err error) string {
	var (
		connErr *store.ConnectError
		natsErr *natsConnectError
		pgErr   *pgconn.PgError
		netErr  *net.OpError
	)
	switch {
	case errors.As(err, &connErr) && errors.As(err, &pgErr) && pgErr.Code == "3D000":
		return fmt.Sprintf("Postgres database %q does not exist; run 'memoryd migrate' (it creates it) or create it with createdb.", connErr.Database)
	case errors.As(err, &connErr) && errors.As(err, &pgErr) && (pgErr.Code == "28P01" || pgErr.Code == "28000"):
		return fmt.Sprintf("Postgres at %s:%d refused the user or password; check --database-url / MEMORYD_DATABASE_URL.", connErr.Host, connErr.Port)
	case errors.As(err, &connErr):
		return fmt.Sprintf("Postgres is not reachable at %s:%d; start it (on Debian: pg_ctlcluster 15 main start, or `make services`) or set --database-url / MEMORYD_DATABASE_URL.", connErr.Host, connErr.Port)
	case errors.As(err, &natsErr) && errors.Is(err, nats.ErrAuthorization):
		return fmt.Sprintf("NATS at %s refused the credentials; check --nats-user/--nats-password/--nats-token/--nats-creds.", natsErr.url)
	case errors.As(err, &natsErr) && (errors.Is(err, nats.ErrNoServers) || errors.As(err, &netErr)):
		return fmt.Sprintf("NATS is not reachable at %s; start nats-server with -js (or `make services`) or set --nats-url / MEMORYD_NATS_URL.", natsErr.url)
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return "the NATS server runs without JetStream; restart it with -js (nats-server -js)."
	}
	return err.Error()
}
