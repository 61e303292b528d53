package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/nats-io/nats.go"
)

// startTestEnricher runs the enrich service alone on its own schema and
// subject prefix, for the client commands to talk to; the test's cleanup
// stops it. Its writes get a minute, the --timeout the tests give the
// commands: an import request of half a MiB (TestExportImportCommands,
// TestImportFileCutShortWritesNothing) took past the 5s default in each of
// the client's 3 sends under -race at load 8-10 on 2 cores, an exit 1 where
// the test wanted 0 or 2. No test here relies on that default (the
// enricher package's hung-store tests do, with their own service).
func startTestEnricher(t *testing.T) (*nats.Conn, string, *store.Store) {
	t.Helper()
	nc := eventstest.Conn(t)
	prefix, _ := eventstest.Names(t, nc)
	st := storetest.New(t)
	svc, err := enricher.New(enricher.Config{Conn: nc, Store: st, Prefix: prefix,
		Timeout: 10 * time.Second, WriteTimeout: time.Minute, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	return nc, prefix, st
}
