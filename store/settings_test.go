package store_test

import (
	"context"
	"testing"

	"github.com/memoryd/memoryd/store/storetest"
)

// AutovacuumOff says what SHOW says.
func TestAutovacuumOff(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := context.Background()
	var av, tc string
	if err := s.Pool().QueryRow(ctx, `SHOW autovacuum`).Scan(&av); err != nil {
		t.Fatal(err)
	}
	if err := s.Pool().QueryRow(ctx, `SHOW track_counts`).Scan(&tc); err != nil {
		t.Fatal(err)
	}
	off, err := s.AutovacuumOff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := av == "off" || tc == "off"; off != want {
		t.Fatalf("AutovacuumOff = %v with autovacuum %s, track_counts %s", off, av, tc)
	}
}
