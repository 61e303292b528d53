package systest

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestServicesScriptChecksTheConfiguredServers: `make demo` first runs
// scripts/services.sh, which checks the servers MEMORYD_DATABASE_URL and
// MEMORYD_NATS_URL name; `make test` runs `scripts/services.sh test`, which
// checks MEMORYD_TEST_DATABASE_URL's and MEMORYD_TEST_NATS_URL's. Before, it probed 127.0.0.1:5432 and :4222 whatever the URLs
// said: with the servers elsewhere it failed naming the wrong address, or
// started a second NATS nobody asked for.
func TestServicesScriptChecksTheConfiguredServers(t *testing.T) {
	t.Parallel()
	closed := closedPort(t)
	db, nats := storetest.BaseURL(), eventstest.URL()
	for _, tc := range []struct {
		name string
		mode string   // the script's argument: "test" for make test
		env  []string // besides every MEMORYD_*_URL emptied
		want string
		code int
	}{
		{"the test servers", "test", []string{"MEMORYD_TEST_DATABASE_URL=" + db, "MEMORYD_TEST_NATS_URL=" + nats}, "", 0},
		{"the servers memoryd uses", "", []string{"MEMORYD_DATABASE_URL=" + db, "MEMORYD_NATS_URL=" + nats}, "", 0},
		{"Postgres elsewhere", "", []string{"MEMORYD_DATABASE_URL=postgres://postgres@127.0.0.1:" + closed + "/x?sslmode=disable", "MEMORYD_NATS_URL=" + nats},
			"PostgreSQL does not answer at 127.0.0.1:" + closed + " (from MEMORYD_DATABASE_URL)", 1},
		{"NATS elsewhere", "", []string{"MEMORYD_DATABASE_URL=" + db, "MEMORYD_NATS_URL=nats://user:p@ss@127.0.0.1:" + closed},
			"NATS does not answer at 127.0.0.1:" + closed + " (from MEMORYD_NATS_URL)", 1},
		{"a test server elsewhere", "test", []string{"MEMORYD_TEST_DATABASE_URL=" + db, "MEMORYD_TEST_NATS_URL=nats://[::1]:" + closed},
			"NATS does not answer at [::1]:" + closed + " (from MEMORYD_TEST_NATS_URL)", 1},
		// make test reads only the test servers, make demo only memoryd's:
		// one of the other pair down fails neither.
		{"make test, memoryd's server down", "test", []string{"MEMORYD_TEST_DATABASE_URL=" + db, "MEMORYD_TEST_NATS_URL=" + nats,
			"MEMORYD_DATABASE_URL=postgres://postgres@127.0.0.1:" + closed + "/x", "MEMORYD_NATS_URL=nats://127.0.0.1:" + closed}, "", 0},
		{"make demo, a test server down", "", []string{"MEMORYD_DATABASE_URL=" + db, "MEMORYD_NATS_URL=" + nats,
			"MEMORYD_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:" + closed + "/x", "MEMORYD_TEST_NATS_URL=nats://127.0.0.1:" + closed}, "", 0},
		{"a key=value connection string", "", []string{"MEMORYD_DATABASE_URL=host=127.0.0.1 port=" + closed + " dbname=x", "MEMORYD_NATS_URL=" + nats},
			"PostgreSQL does not answer at 127.0.0.1:" + closed + " (from MEMORYD_DATABASE_URL)", 1},
		{"NATS without a scheme", "", []string{"MEMORYD_DATABASE_URL=" + db, "MEMORYD_NATS_URL=127.0.0.1:" + closed},
			"NATS does not answer at 127.0.0.1:" + closed + " (from MEMORYD_NATS_URL)", 1},
		{"a port in the query", "", []string{"MEMORYD_DATABASE_URL=postgres://postgres@127.0.0.1/x?sslmode=disable&port=" + closed, "MEMORYD_NATS_URL=" + nats},
			"PostgreSQL does not answer at 127.0.0.1:" + closed + " (from MEMORYD_DATABASE_URL)", 1},
		{"a socket in the query is not probed", "", []string{"MEMORYD_DATABASE_URL=postgres://postgres@127.0.0.1:" + closed + "/x?host=/nonexistent", "MEMORYD_NATS_URL=" + nats}, "", 0},
		{"a key=value socket is not probed", "", []string{"MEMORYD_DATABASE_URL=host=/nonexistent dbname=x", "MEMORYD_NATS_URL=" + nats}, "", 0},
		{"a Unix socket is not probed", "", []string{"MEMORYD_DATABASE_URL=postgres:///memoryd?host=/nonexistent", "MEMORYD_NATS_URL=" + nats}, "", 0},
	} {
		args := []string{"../scripts/services.sh"}
		if tc.mode != "" {
			args = append(args, tc.mode)
		}
		cmd := exec.Command("bash", args...)
		// Every URL named by the case; none left unset, so that no case
		// probes (or starts) the local default servers.
		cmd.Env = append(os.Environ(), "MEMORYD_SKIP_SERVICES=", "MEMORYD_DATABASE_URL=", "MEMORYD_NATS_URL=",
			"MEMORYD_TEST_DATABASE_URL=", "MEMORYD_TEST_NATS_URL=")
		cmd.Env = append(cmd.Env, tc.env...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code || !strings.Contains(string(out), tc.want) || (tc.want == "" && len(out) > 0) {
			t.Errorf("%s: exit %d, output %q; want exit %d saying %q", tc.name, code, out, tc.code, tc.want)
		}
	}
}

// closedPort is a local TCP port nothing listens on (just released).
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	return port
}
