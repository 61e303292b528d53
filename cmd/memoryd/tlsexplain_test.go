package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/internal/app"
	"github.com/memoryd/memoryd/store"
)

// TestExplainTLS: a TLS failure (a certificate this side refused, a remote
// alert, a TLS 1.3 close after the handshake, a server without TLS) is told
// as one, not as a server that is not reachable (a TLS walk: wrong host
// name, wrong CA and an expired client certificate all read "start the
// server on that port").
func TestExplainTLS(t *testing.T) {
	t.Parallel()
	pg := func(err error) error {
		return &store.ConnectError{Host: "db", Port: 5499, Database: "m", Err: err}
	}
	nt := func(err error) error { return &app.NATSConnectError{URL: "tls://n:4222", Err: err} }
	verify := func(err error) error {
		return fmt.Errorf("write failed: %w", &tls.CertificateVerificationError{Err: err})
	}
	alert := &net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"pg host", pg(verify(x509.HostnameError{Certificate: &x509.Certificate{}, Host: "10.0.0.1"})), "Postgres at db:5499: TLS failed: the server's certificate does not name the host"},
		{"pg CA", pg(verify(x509.UnknownAuthorityError{})), "not signed by a CA this side trusts"},
		{"pg expired", pg(verify(x509.CertificateInvalidError{Reason: x509.Expired})), "expired or not yet valid"},
		{"pg alert", pg(alert), "the server refused this side's TLS handshake (tls: bad certificate)"},
		{"pg no ssl", pg(errors.New("server refused TLS connection")), "does not accept TLS (ssl = off)"},
		{"pg hba", pg(&pgconn.PgError{Code: "28000", Message: `no pg_hba.conf entry for host "h", no encryption`}), "refused the connection: no pg_hba.conf entry"},
		{"pg password", pg(&pgconn.PgError{Code: "28P01"}), "refused the user or password"},
		{"pg down", pg(&net.OpError{Op: "dial", Err: errors.New("connection refused")}), "Postgres is not reachable at db:5499"},
		{"nats CA", nt(fmt.Errorf("%w: %w", nats.ErrTLS, verify(x509.UnknownAuthorityError{}))), "NATS at tls://n:4222: TLS failed: the server's certificate is not signed"},
		{"nats alert", nt(alert), "the server refused this side's TLS handshake"},
		{"nats closed", nt(fmt.Errorf("%w: connection closed by remote after TLS handshake: %w", nats.ErrTLS, errors.New("broken pipe"))), "it likely refused this side's client certificate"},
		{"nats no tls", nt(nats.ErrSecureConnWanted), "does not offer TLS"},
		{"nats auth", nt(nats.ErrAuthorization), "--nats-nkey"},
		// A password or token given by file is named too: a walk with
		// --nats-password-file was pointed at flags it had not used.
		{"nats auth file", nt(nats.ErrAuthorization), "--nats-password or --nats-password-file, --nats-token or --nats-token-file"},
		{"nats down", nt(&net.OpError{Op: "dial", Err: errors.New("connection refused")}), "NATS is not reachable"},
	} {
		if got := explain(c.err); !strings.Contains(got, c.want) {
			t.Errorf("%s: explain = %q, want it to contain %q", c.name, got, c.want)
		}
	}
}

// TestPGEnvShadowed: the libpq variables memoryd's default URL overrides
// are warned of; with a URL of one's own, nothing is said.
func TestPGEnvShadowed(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PGHOST": "h", "PGPASSWORD": "secret", "PGSSLMODE": "verify-full"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, url := range []string{"", store.DefaultURL} {
		w := pgEnvShadowed(url, lookup)
		if !strings.Contains(w, "PGHOST, PGSSLMODE are set") || strings.Contains(w, "PGPASSWORD") || strings.Contains(w, "secret") {
			t.Errorf("url %q: warning %q", url, w)
		}
	}
	if w := pgEnvShadowed("postgres://?pool_max_conns=6", lookup); w != "" {
		t.Errorf("own URL: warning %q", w)
	}
	if w := pgEnvShadowed("", func(string) (string, bool) { return "", false }); w != "" {
		t.Errorf("no PG variables: warning %q", w)
	}
}
