package app

import "testing"

// TestSizeGaugesAppearTogether: a scrape during the first size report sees
// the four size gauges or none. Registered one by one, a scrape between
// the registrations saw the live and floor sizes without the time of the
// measure (a CI run).
func TestSizeGaugesAppearTogether(t *testing.T) {
	t.Parallel()
	for range 300 {
		m := newMetrics()
		done := make(chan struct{})
		go func() {
			defer close(done)
			m.Sized(100, 50, false)
		}()
		for stop := false; !stop; {
			select {
			case <-done:
				stop = true
			default:
			}
			families, err := m.reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, f := range families {
				switch f.GetName() {
				case "memoryd_db_live_bytes", "memoryd_db_floor_bytes", "memoryd_db_over_limit", "memoryd_db_size_measured_timestamp_seconds":
					n++
				}
			}
			if n != 0 && n != 4 {
				t.Fatalf("a scrape saw %d of the 4 size gauges", n)
			}
		}
	}
}
