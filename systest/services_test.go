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

// TestServicesScriptChecksTheConfiguredServers: `make demo` and `make test`
// first run scripts/services.sh, which checks the servers the MEMORYD_*
// URLs name. Before, it probed 127.0.0.1:5432 and :4222 whatever the URLs
// said: with the servers elsewhere it failed naming the wrong address, or
// started a second NATS nobody asked for.
func TestServicesScriptChecksTheConfiguredServers(t *testing.T) {
	t.Parallel()
	closed := closedPort(t)
	for _, tc := range []struct {
		name, env, want string
		code            int
	}{
		{"the test servers", "", "", 0},
		{"Postgres elsewhere", "MEMORYD_DATABASE_URL=postgres://postgres@127.0.0.1:" + closed + "/x?sslmode=disable",
			"PostgreSQL does not answer at 127.0.0.1:" + closed + " (from MEMORYD_DATABASE_URL", 1},
		{"NATS elsewhere", "MEMORYD_NATS_URL=nats://user:pw@127.0.0.1:" + closed,
			"NATS does not answer at 127.0.0.1:" + closed + " (from MEMORYD_NATS_URL", 1},
		{"a Unix socket is not probed", "MEMORYD_DATABASE_URL=postgres:///memoryd?host=/nonexistent", "", 0},
	} {
		cmd := exec.Command("bash", "../scripts/services.sh")
		// The test servers, wherever this run has them, plus the case's URL.
		cmd.Env = append(os.Environ(), "MEMORYD_SKIP_SERVICES=", "MEMORYD_TEST_DATABASE_URL="+storetest.BaseURL(),
			"MEMORYD_TEST_NATS_URL="+eventstest.URL(), "MEMORYD_DATABASE_URL=", "MEMORYD_NATS_URL=")
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
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
