package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestMissingDatabaseNamesTheServer: a command refused for a database that
// does not exist names the server it asked, as the other connection
// refusals do: an ops walk's forget, run in a shell without
// MEMORYD_DATABASE_URL, asked the default server and was told only
// 'Postgres database "memoryd" does not exist; run memoryd migrate', which
// would have created an empty database there.
func TestMissingDatabaseNamesTheServer(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(storetest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	host := u.Host
	if u.Port() == "" {
		host += ":5432"
	}
	u.Path = "/memoryd_missing_" + strings.ToLower(t.Name())
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	_, errOut, code := runArgs(context.Background(), "forget", "--user", "alice", "--database-url", u.String(),
		"--nats-url", eventstest.URL(), "--prefix", prefix, "--stream", stream)
	want := fmt.Sprintf("does not exist at %s", host)
	if code != 1 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "MEMORYD_DATABASE_URL") {
		t.Fatalf("forget on a missing database: exit %d, stderr %q; want it to name %q and the setting", code, errOut, want)
	}
}
