package store

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// poolTracer is the pool's pgx tracer when Config.GiveWay or
// Config.Committed is set.
//
// GiveWay: before a statement, a batch or a COPY is sent, the sending
// goroutine calls it, and it may hold the statement back briefly while
// more urgent work (enrich) runs on the same server. A statement already
// running is not touched; only what has not started waits. Commits and
// rollbacks never wait: they end a transaction, release its locks and cost
// the server little CPU, so holding them back would only make other
// writers wait longer.
//
// Committed: after a statement, batch or COPY succeeded and left its
// connection outside a transaction (a commit, or a statement that ran on
// its own), the sending goroutine calls it.
type poolTracer struct {
	giveWay   func(ctx context.Context)
	committed func(ctx context.Context)
}

func (p poolTracer) before(ctx context.Context) {
	if p.giveWay != nil {
		p.giveWay(ctx)
	}
}

func (p poolTracer) after(ctx context.Context, conn *pgx.Conn, err error) {
	if p.committed != nil && err == nil && conn.PgConn().TxStatus() == 'I' {
		p.committed(ctx)
	}
}

func (p poolTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if !endsTransaction(data.SQL) {
		p.before(ctx)
	}
	return ctx
}

func (p poolTracer) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	p.after(ctx, conn, data.Err)
}

func (p poolTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	p.before(ctx)
	return ctx
}

func (poolTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (p poolTracer) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchEndData) {
	p.after(ctx, conn, data.Err)
}

func (p poolTracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	p.before(ctx)
	return ctx
}

func (p poolTracer) TraceCopyFromEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceCopyFromEndData) {
	p.after(ctx, conn, data.Err)
}

// endsTransaction reports whether sql is the statement pgx sends for a
// transaction's Commit or Rollback.
func endsTransaction(sql string) bool {
	return len(sql) <= len("rollback") && (strings.EqualFold(sql, "commit") || strings.EqualFold(sql, "rollback"))
}
