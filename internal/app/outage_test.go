package app

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestThroughOutage: a wait's check that fails is "not yet" until its
// errors have lasted the bound with no success between; a success starts
// the count again; a cancelled context ends it at once.
func TestThroughOutage(t *testing.T) {
	t.Parallel()
	down := errors.New("FATAL: terminating connection due to administrator command (SQLSTATE 57P01)")
	type step struct {
		at   time.Duration // the clock when the check runs
		done bool
		err  error
	}
	for _, tt := range []struct {
		name    string
		steps   []step
		wantErr string // of the last step; "" none
		done    bool
	}{
		{"a blip, then done", []step{{0, false, down}, {time.Second, false, down}, {2 * time.Second, true, nil}}, "", true},
		{"down past the bound", []step{{0, false, down}, {time.Minute, false, down}, {2 * time.Minute, false, down}}, "database did not answer for 2m0s: FATAL", false},
		{"up between two outages", []step{{0, false, down}, {90 * time.Second, false, nil}, {100 * time.Second, false, down}, {3 * time.Minute, false, down}}, "", false},
		{"within the bound", []step{{0, false, down}, {119 * time.Second, false, down}}, "", false},
		// Postgres refusing the statement itself: no outage to wait out.
		{"a missing table", []step{{0, false, &pgconn.PgError{Code: "42P01", Message: `relation "turns" does not exist`}}}, "turns", false},
		{"shutting down", []step{{0, false, &pgconn.PgError{Code: "57P01"}}, {time.Second, true, nil}}, "", true},
	} {
		var clock time.Duration
		i := 0
		check := func() (bool, error) { s := tt.steps[i]; i++; return s.done, s.err }
		f := throughOutage(context.Background(), check, 2*time.Minute, func() time.Time { return time.Unix(0, 0).Add(clock) }, slog.New(slog.DiscardHandler))
		var done bool
		var err error
		for _, s := range tt.steps {
			clock = s.at
			done, err = f()
		}
		if done != tt.done || (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: done %v, err %v; want done %v, err %q", tt.name, done, err, tt.done, tt.wantErr)
		}
	}
	// Cancelled: the error is returned at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := throughOutage(ctx, func() (bool, error) { return false, context.Canceled }, time.Hour, time.Now, slog.New(slog.DiscardHandler))
	if _, err := f(); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
