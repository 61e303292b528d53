package store

import (
	"testing"
	"time"
)

// TestParseURLBoundsConnecting: without connect_timeout in the URL a new
// connection gets DefaultConnectTimeout (before: none, and a Postgres that
// accepted connections and never answered held serve's start forever);
// the URL's own wins.
func TestParseURLBoundsConnecting(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want time.Duration
	}{
		{"postgres://u@127.0.0.1:5432/db?sslmode=disable", DefaultConnectTimeout},
		{"postgres://u@127.0.0.1:5432/db?sslmode=disable&connect_timeout=3", 3 * time.Second},
		{"host=127.0.0.1 user=u dbname=db", DefaultConnectTimeout},
		// 0 is no bound, as in libpq: asked for, not overridden.
		{"postgres://u@127.0.0.1:5432/db?sslmode=disable&connect_timeout=0", 0},
		{"host=127.0.0.1 user=u dbname=db connect_timeout=0", 0},
	} {
		pc, err := parseURL(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := pc.ConnConfig.ConnectTimeout; got != tc.want {
			t.Errorf("%s: connect timeout %v, want %v", tc.url, got, tc.want)
		}
	}
}
