package store

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// giveWay is the pool's pgx tracer when Config.GiveWay is set: before a
// statement, a batch or a COPY is sent, the sending goroutine calls
// GiveWay, which may hold it back briefly while more urgent work (enrich)
// runs on the same server. A statement already running is not touched;
// only what has not started waits.
//
// Commits and rollbacks never wait: they end a transaction, release its
// locks and cost the server little CPU, so holding them back would only
// make other writers wait longer.
type giveWay func(ctx context.Context)

func (g giveWay) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if !endsTransaction(data.SQL) {
		g(ctx)
	}
	return ctx
}

func (giveWay) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (g giveWay) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	g(ctx)
	return ctx
}

func (giveWay) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (giveWay) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func (g giveWay) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	g(ctx)
	return ctx
}

func (giveWay) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

// endsTransaction reports whether sql is the statement pgx sends for a
// transaction's Commit or Rollback.
func endsTransaction(sql string) bool {
	return len(sql) <= len("rollback") && (strings.EqualFold(sql, "commit") || strings.EqualFold(sql, "rollback"))
}
