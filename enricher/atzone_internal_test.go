package enricher

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestAtZoneNotHosts: a request's at is read in its own UTC offset, whatever
// the zone of the host memoryd runs on. Go's time.Parse takes an offset the
// host's zone uses at that instant for that zone (America/New_York for
// -05:00 in November), so on a host set to New York a user of Bogotá
// (-05:00 all year) asking about June 15 got New York's June 15 (-04:00,
// summer time): an hour off, and a turn of 23:30 on June 15 in Bogotá was
// not found, where a UTC host found it. The source dates (datesIn) are
// already in the fixed offset; the ranges must be too.
//
// The host's zone is New York's in a process of its own (this test binary
// again, TZ set): setting time.Local in this one raced with the
// goroutines other tests leave running (pgxpool's, timers'), which read
// it (-count=3 beside a CI run: 2 of 3 failed, flake4).
func TestAtZoneNotHosts(t *testing.T) {
	if _, err := time.LoadLocation("America/New_York"); err != nil {
		t.Skip("no tzdata:", err)
	}
	if os.Getenv("MEMORYD_TEST_ATZONE_HOST") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAtZoneNotHosts$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "TZ=America/New_York", "MEMORYD_TEST_ATZONE_HOST=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestAtZoneNotHosts") {
			t.Fatalf("on a host in New York's zone: %v\n%s", err, out)
		}
		return
	}
	if name := time.Local.String(); name != "America/New_York" {
		t.Fatalf("host zone %s, want America/New_York (TZ)", name)
	}

	s := &Service{}
	for _, tt := range []struct {
		message, at  string
		since, until string
	}{
		// June 15 in -05:00, not in New York's summer -04:00.
		{"what did I do on June 15?", "2026-11-20T12:00:00-05:00", "2026-06-15T05:00:00Z", "2026-06-16T05:00:00Z"},
		// Yesterday in -05:00: the day before at's, 24 hours long.
		{"what did I say yesterday?", "2026-11-02T09:00:00-05:00", "2026-11-01T05:00:00Z", "2026-11-02T05:00:00Z"},
	} {
		p, err := s.parseEnrich("u", []byte(`{"user_id":"u","message":"`+tt.message+`","at":"`+tt.at+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		p = p.analyze()
		if !p.timed {
			t.Fatalf("%q: no range", tt.message)
		}
		if got := p.when.Since.UTC().Format(time.RFC3339); got != tt.since {
			t.Errorf("%q at %s: since %s, want %s (as on a UTC host)", tt.message, tt.at, got, tt.since)
		}
		if got := p.when.Until.UTC().Format(time.RFC3339); got != tt.until {
			t.Errorf("%q at %s: until %s, want %s (as on a UTC host)", tt.message, tt.at, got, tt.until)
		}
	}
}
