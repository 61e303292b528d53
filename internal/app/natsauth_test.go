package app

import (
	"cmp"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/internal/secretfile"
	"github.com/memoryd/memoryd/internal/secretfile/secretfiletest"
)

// A NATS server that refuses memoryd's credentials for a while (its
// password changed in the server's configuration, reloaded or restarted,
// before memoryd was given the new one; a wrong configuration rolled back)
// does not close memoryd's connection for good: it keeps reconnecting and
// is back once the server takes its credentials again. Before, nats.go
// gave up after the second refusal in a row: a rotation walk's serve sat
// "not connected: CLOSED" with /healthz 200, never recovering, even after
// the server's configuration was rolled back, until it was restarted.
func TestNATSConnectionOutlivesRefusedCredentials(t *testing.T) {
	t.Parallel() // a nats-server and a connection of its own
	conf := filepath.Join(t.TempDir(), "nats.conf")
	setPassword := func(pw string) {
		t.Helper()
		text := fmt.Sprintf("authorization { users: [ { user: memoryd, password: %q } ] }\n", pw)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	setPassword("old")
	srv := eventstest.StartServer(t, func(port int) []string {
		return []string{"-a", "127.0.0.1", "-p", fmt.Sprint(port), "-c", conf}
	})
	var logs eventstest.SyncBuffer
	nc, err := NATSConfig{URL: srv.URL, User: "memoryd", Password: "old"}.Connect(slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	setPassword("new")
	srv.Restart(t)
	// nats.go closed the connection at the second refusal in a row:
	// after the third, it is still trying.
	eventstest.Eventually(t, "three refusals of the credentials", 20*time.Second, func() (bool, string) {
		n := strings.Count(logs.String(), MsgNATSRefused)
		return n >= 3 || nc.Status() == nats.CLOSED, fmt.Sprint(n, " refusals, ", nc.Status())
	})
	if st := nc.Status(); st == nats.CLOSED {
		t.Fatalf("connection %v after the server refused its credentials: it never reconnects", st)
	}

	setPassword("old")
	srv.Restart(t)
	eventstest.Eventually(t, "the connection back once the server takes its credentials", 20*time.Second, func() (bool, string) {
		return nc.IsConnected(), nc.Status().String()
	})
}

// A password or token given by file is read again at every reconnect: an
// operator who writes the new one to the file and then changes and
// reloads the server's configuration has memoryd reconnect with it at
// once, with no refusal and no restart (before, the password and token
// were read once, at start, and a rotation needed a restart of every
// memoryd process). A file that cannot be read at a reconnect leaves the
// last value read in use, with a warning.
func TestNATSCredentialFileRotatedWithoutRestart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server func(secret string) string // the server's authorization block
		config func(file string) NATSConfig
	}{
		{"password",
			func(pw string) string {
				return fmt.Sprintf("authorization { users: [ { user: memoryd, password: %q } ] }\n", pw)
			},
			func(file string) NATSConfig { return NATSConfig{User: "memoryd", PasswordFile: file} }},
		{"token",
			func(tok string) string { return fmt.Sprintf("authorization { token: %q }\n", tok) },
			func(file string) NATSConfig { return NATSConfig{TokenFile: file} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			conf, secret := filepath.Join(dir, "nats.conf"), filepath.Join(dir, "secret")
			write := func(path, text string) { secretfiletest.Replace(t, path, text) }
			write(conf, tc.server("first-secret"))
			write(secret, "first-secret\n") // echo's line break is not part of it
			srv := eventstest.StartServer(t, func(port int) []string {
				return []string{"-a", "127.0.0.1", "-p", fmt.Sprint(port), "-c", conf}
			})
			var logs eventstest.SyncBuffer
			cfg := tc.config(secret)
			cfg.URL = srv.URL
			nc, err := cfg.Connect(slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()

			write(secret, "second-secret")
			write(conf, tc.server("second-secret"))
			srv.Reload(t)
			// The reload drops the connection made with the first secret
			// (the server's "authorization violation", logged once); the
			// reconnect reads the second. Read once, the first secret was
			// refused at every reconnect.
			eventstest.Eventually(t, "reconnected with the rotated secret", 20*time.Second, func() (bool, string) {
				return nc.Stats().Reconnects >= 1 && nc.IsConnected(), fmt.Sprint(nc.Stats().Reconnects, " reconnects, ", nc.Status())
			})
			if err := nc.Flush(); err != nil {
				t.Fatalf("flush after the rotation: %v", err)
			}

			// The file gone at the next reconnect: the second secret, last
			// read, still connects.
			if err := os.Remove(secret); err != nil {
				t.Fatal(err)
			}
			before := nc.Stats().Reconnects
			srv.Restart(t)
			eventstest.Eventually(t, "reconnected after the restart with the file gone", 20*time.Second, func() (bool, string) {
				return nc.Stats().Reconnects > before && nc.IsConnected(), fmt.Sprint(nc.Stats().Reconnects-before, " reconnects, ", nc.Status())
			})
			if !strings.Contains(logs.String(), secretfile.MsgUnread) {
				t.Fatalf("no %q line for the missing file:\n%s", secretfile.MsgUnread, logs.String())
			}
		})
	}
}

// A credential file is checked at start, and given with its value it is
// refused: which of the two was meant cannot be known.
func TestNATSCredentialFileRefusals(t *testing.T) {
	dir := t.TempDir()
	empty, newline := filepath.Join(dir, "empty"), filepath.Join(dir, "newline")
	for path, text := range map[string]string{empty: "", newline: "\n"} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		cfg  NATSConfig
		want string
	}{
		{NATSConfig{User: "u", PasswordFile: filepath.Join(dir, "missing")}, "nats: NATSConfig.PasswordFile: nats password file: open " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{NATSConfig{User: "u", PasswordFile: empty}, "nats: NATSConfig.PasswordFile: nats password file: " + empty + " is empty"},
		{NATSConfig{TokenFile: newline}, "nats: NATSConfig.TokenFile: nats token file: " + newline + " is empty"},
		{NATSConfig{User: "u", Password: "p", PasswordFile: empty}, "nats: a password and a password file are both set; give one"},
		{NATSConfig{Token: "t", TokenFile: empty}, "nats: a token and a token file are both set; give one"},
		// nats.go would send the URL's credentials, never the file's.
		{NATSConfig{URL: "nats://127.0.0.1:2,nats://memoryd:pw@127.0.0.1:1", User: "memoryd", PasswordFile: empty},
			"nats: a URL holds a user name or token, and a password or token file is set: the URL's would be sent, never the file's; take the credentials out of the URL"},
		{NATSConfig{URL: "tok@127.0.0.1:1", TokenFile: empty},
			"nats: a URL holds a user name or token, and a password or token file is set: the URL's would be sent, never the file's; take the credentials out of the URL"},
	} {
		// Refused before connecting: the URL is never dialled.
		tc.cfg.URL = cmp.Or(tc.cfg.URL, "nats://127.0.0.1:1")
		nc, err := tc.cfg.Connect(slog.New(slog.DiscardHandler))
		if err == nil {
			nc.Close()
		}
		if err == nil || err.Error() != tc.want {
			t.Errorf("Connect(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
