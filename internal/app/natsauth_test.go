package app

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/events/eventstest"
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
