package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events/eventstest"
)

// While Start waits (here for another process's migration lock, as a second
// pod does while the first migrates), /healthz says the process is up and
// /readyz and /metrics say it is starting, at once. Before, the port was
// bound but nothing answered until Start was done: a liveness probe on
// /healthz killed a pod in the middle of a long migration.
func TestOpsAnswersWhileStarting(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	unmigrated(t, &cfg)
	// The lock another process migrating holds.
	other, err := pgx.Connect(context.Background(), strings.TrimSuffix(cfg.Store.URL, poolCap))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	if _, err := other.Exec(context.Background(), `SELECT pg_advisory_lock(hashtext('memoryd.migrate.' || current_schema()))`); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Ops.Addr = ln.Addr().String()
	_ = ln.Close()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- a.Start(context.Background()) }()
	t.Cleanup(func() { _ = a.Stop(context.Background()) })

	client := &http.Client{Timeout: 2 * time.Second}
	get := func(path string) (int, string, error) {
		resp, err := client.Get("http://" + cfg.Ops.Addr + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	// Until the port is bound, connections are refused.
	if ok, state := eventstest.Poll(30*time.Second, func() (bool, string) {
		code, _, err := get("/healthz")
		return code == http.StatusOK, "healthz: " + http.StatusText(code) + " " + errString(err)
	}); !ok {
		t.Fatalf("/healthz while Start waits for the migration lock: %s", state)
	}
	for _, path := range []string{"/readyz", "/metrics"} {
		if code, body, err := get(path); code != http.StatusServiceUnavailable || !strings.Contains(body, "start") {
			t.Errorf("%s while starting: %d %q %v; want a 503 saying it is starting", path, code, body, err)
		}
	}
	select {
	case err := <-started:
		t.Fatalf("Start returned while the migration lock was held: %v", err)
	default:
	}
	if _, err := other.Exec(context.Background(), `SELECT pg_advisory_unlock(hashtext('memoryd.migrate.' || current_schema()))`); err != nil {
		t.Fatal(err)
	}
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if code, body, err := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after Start: %d %q %v", code, body, err)
	}
	if code, body, _ := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "memoryd_") {
		t.Errorf("/metrics after Start: %d", code)
	}
}
