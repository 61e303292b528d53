package store_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// backendCPU returns the CPU time (user and system) the Postgres backend
// pid has used, from /proc (the server on this machine, clock ticks of
// 10 ms).
func backendCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Skipf("the backend's CPU time: %v (a server on another machine?)", err)
	}
	// The fields after the command (in parentheses, which may hold
	// spaces): utime and stime are the 14th and 15th of the line.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// clientCPU returns the CPU time this process has used.
func clientCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// statementCounter counts the statements a pool sends (BEGIN and COMMIT
// included).
type statementCounter struct{ n atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// BenchmarkAddUsageInASave: the usage part of an extraction's save, a
// transaction adding a job's calls' tokens (one user's, calls calls), with
// the calls' ids (AddCallUsageOn, what a save runs) or without
// (AddUsageOn, what it ran before ids), beside a day of ids recorded
// before (ids prefilled). Reports the statements a save sends for it.
//
//	go test -run '^$' -bench BenchmarkAddUsageInASave -benchtime 2000x ./store/
func BenchmarkAddUsageInASave(b *testing.B) {
	const prefilled = 200_000
	for _, calls := range []int{1, 8} {
		for _, ids := range []bool{false, true} {
			b.Run(fmt.Sprintf("calls=%d/ids=%v", calls, ids), func(b *testing.B) {
				ctx := context.Background()
				url := storetest.URL(b, storetest.New(b))
				cfg, err := pgxpool.ParseConfig(url)
				if err != nil {
					b.Fatal(err)
				}
				count := &statementCounter{}
				cfg.ConnConfig.Tracer = count
				cfg.MaxConns = 1 // one backend, whose CPU time is read
				pool, err := pgxpool.NewWithConfig(ctx, cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(pool.Close)
				s := store.New(pool)
				start := time.Now().Add(-12 * time.Hour)
				if _, err := pool.Exec(ctx, `INSERT INTO llm_usage_calls (call_id)
					SELECT (lpad(to_hex((extract(epoch FROM $1::timestamptz) * 1000)::bigint + i / 10), 12, '0')
						|| '7' || substr(md5(i::text), 1, 19))::uuid
					FROM generate_series(1, $2) AS i ON CONFLICT DO NOTHING`, start, prefilled); err != nil {
					b.Fatal(err)
				}
				if _, err := pool.Exec(ctx, `VACUUM ANALYZE llm_usage_calls`); err != nil {
					b.Fatal(err)
				}
				day := time.Now().UTC()
				one := store.TokenUsage{PromptTokens: 1000, CompletionTokens: 200, Extractions: 1}
				var pid int
				if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
					b.Fatal(err)
				}
				server0, client0 := backendCPU(b, pid), clientCPU()
				count.n.Store(0)
				b.ResetTimer()
				for range b.N {
					err := s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
						if !ids {
							return q.AddUsageOn(ctx, day, "m", map[string]store.TokenUsage{"alice": {
								PromptTokens: one.PromptTokens * int64(calls), CompletionTokens: one.CompletionTokens * int64(calls), Extractions: int64(calls)}})
						}
						cs := make([]store.UsageCall, calls)
						for i := range cs {
							cs[i] = store.UsageCall{ID: store.NewCallID(time.Now()), UserID: "alice", Used: one}
						}
						return q.AddCallUsageOn(ctx, day, "m", cs)
					})
					if err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				// BEGIN and COMMIT are not the usage's: a save has them anyway.
				b.ReportMetric(float64(count.n.Load())/float64(b.N)-2, "usage-stmts/save")
				// CPU time, not wall time: the machine is shared.
				b.ReportMetric(float64((backendCPU(b, pid)-server0).Microseconds())/float64(b.N), "server-cpu-µs/save")
				b.ReportMetric(float64((clientCPU()-client0).Microseconds())/float64(b.N), "client-cpu-µs/save")
			})
		}
	}
}
