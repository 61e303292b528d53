package store

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memoryd/memoryd/internal/certtest"
)

// A password rotated in the password file is used by the next new
// connection (a rotation walk: pgx read the file once, at start, and every
// new connection failed 28P01 once the old ones were gone, until a restart).
func TestRereadFilesPassword(t *testing.T) {
	dir := t.TempDir()
	pass := filepath.Join(dir, "pgpass")
	write := func(pw string) {
		t.Helper()
		// Replaced whole, as an operator or a secret mount does.
		tmp := pass + ".tmp"
		if err := os.WriteFile(tmp, []byte("127.0.0.1:5499:db:mem:"+pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, pass); err != nil {
			t.Fatal(err)
		}
	}
	write("old")
	url := "postgres://mem@127.0.0.1:5499/db?sslmode=disable&pool_max_conns=2&passfile=" + pass
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if pcfg.ConnConfig.Password != "old" {
		t.Fatalf("parsed password %q, want old", pcfg.ConnConfig.Password)
	}
	before := rereadFiles(url, slog.New(slog.NewTextHandler(io.Discard, nil)))

	write("new")
	cc := pcfg.ConnConfig.Copy()
	if err := before(context.Background(), cc); err != nil {
		t.Fatal(err)
	}
	if cc.Password != "new" {
		t.Errorf("new connection's password %q, want new", cc.Password)
	}

	// A file without the entry (being rewritten) keeps the last password.
	if err := os.WriteFile(pass, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cc = pcfg.ConnConfig.Copy()
	if err := before(context.Background(), cc); err != nil {
		t.Fatal(err)
	}
	if cc.Password != "new" {
		t.Errorf("with the entry gone, password %q, want new kept", cc.Password)
	}
}

// A client certificate renewed on disk is presented by the next new
// connection; one that cannot be read keeps the previous one.
func TestRereadFilesClientCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	first := certtest.SelfSigned(t, certFile, keyFile, "first")
	url := "postgres://mem@127.0.0.1:5499/db?sslmode=require&sslcert=" + certFile + "&sslkey=" + keyFile
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	before := rereadFiles(url, slog.New(slog.NewTextHandler(io.Discard, nil)))
	presented := func() []byte {
		t.Helper()
		cc := pcfg.ConnConfig.Copy()
		if err := before(context.Background(), cc); err != nil {
			t.Fatal(err)
		}
		if cc.TLSConfig == nil || len(cc.TLSConfig.Certificates) != 1 || len(cc.TLSConfig.Certificates[0].Certificate) == 0 {
			t.Fatal("no client certificate in the connection's TLS configuration")
		}
		return cc.TLSConfig.Certificates[0].Certificate[0]
	}
	if got := presented(); !bytes.Equal(got, first) {
		t.Fatal("first connection does not present the first certificate")
	}
	second := certtest.SelfSigned(t, certFile, keyFile, "second")
	if got := presented(); !bytes.Equal(got, second) {
		t.Error("after renewal, a new connection does not present the renewed certificate")
	}
	// A key that does not match the certificate (half replaced) keeps the
	// one read before.
	certtest.SelfSigned(t, filepath.Join(dir, "other.crt"), keyFile, "third")
	if got := presented(); !bytes.Equal(got, second) {
		t.Error("with a mismatched key on disk, the last good certificate is not kept")
	}
}

// A connection string whose files name another server or role now (a
// service file edited to point elsewhere) does not lend that server's
// password to the configured one: the connection keeps its host, user and
// password until a restart takes the new configuration whole.
func TestRereadFilesOtherServer(t *testing.T) {
	dir := t.TempDir()
	svc := filepath.Join(dir, "pg_service.conf")
	write := func(host, user, pw string) {
		t.Helper()
		text := "[mem]\nhost=" + host + "\nport=5499\ndbname=db\nuser=" + user + "\npassword=" + pw + "\nsslmode=disable\n"
		if err := os.WriteFile(svc, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("127.0.0.1", "mem", "old")
	url := "service=mem servicefile=" + svc
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	before := rereadFiles(url, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, c := range []struct{ host, user, pw, want string }{
		{"127.0.0.1", "mem", "rotated", "rotated"},
		{"10.9.9.9", "mem", "elsewhere", "rotated"},
		{"127.0.0.1", "other", "others", "rotated"},
	} {
		write(c.host, c.user, c.pw)
		cc := pcfg.ConnConfig.Copy()
		if err := before(context.Background(), cc); err != nil {
			t.Fatal(err)
		}
		if cc.Host != "127.0.0.1" || cc.User != "mem" || cc.Password != c.want {
			t.Errorf("service file naming %s@%s: connection %s@%s with password %q, want mem@127.0.0.1 with %q",
				c.user, c.host, cc.User, cc.Host, cc.Password, c.want)
		}
	}
}
