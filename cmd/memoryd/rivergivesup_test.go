package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/memoryd/memoryd/store/storetest"
)

// cutProxy forwards TCP connections to Postgres until cut: then it closes
// the ones open and every new one at once, as a server that went away.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			cut := p.cut
			p.mu.Unlock()
			if cut {
				c.Close()
				continue
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// lineWriter passes on each log line whose level is set, as a JSON
// handler writes one record a call.
type lineWriter struct{ lines chan []byte }

func (w lineWriter) Write(p []byte) (int, error) {
	select {
	case w.lines <- bytes.Clone(p):
	default:
	}
	return len(p), nil
}

type blockArgs struct{}

func (blockArgs) Kind() string { return "memoryd_test_block" }

type blockWorker struct {
	river.WorkerDefaults[blockArgs]
	started chan struct{}
	release chan struct{}
}

func (w *blockWorker) Work(ctx context.Context, _ *river.Job[blockArgs]) error {
	w.started <- struct{}{}
	select {
	case <-w.release:
	case <-ctx.Done():
	}
	return nil
}

// TestRiverCompleterGivesUpOnlyATry: with Postgres gone while a job
// finishes, River's batch completer logs "giving up" after its retries,
// and this process's log handler makes it a warning; once Postgres is back
// the same completer writes the job completed, without a restart: it gave
// up one try, not for good.
func TestRiverCompleterGivesUpOnlyATry(t *testing.T) {
	t.Parallel()
	url := storetest.Migrated(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	host, port, _ := net.SplitHostPort(proxy.ln.Addr().String())
	p, _ := strconv.Atoi(port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
	cfg.MaxConns = 4
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	lines := make(chan []byte, 4096)
	logger := slog.New(newRiverQuiet(slog.NewJSONHandler(lineWriter{lines}, &slog.HandlerOptions{Level: slog.LevelInfo}))).With("component", "river")
	w := &blockWorker{started: make(chan struct{}, 1), release: make(chan struct{})}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:  logger,
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1}},
		Workers: workers,
	})
	if err != nil {
		t.Fatal(err)
	}
	completed, unsubscribe := client.Subscribe(river.EventKindJobCompleted)
	defer unsubscribe()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(context.WithoutCancel(ctx))
	if _, err := client.Insert(ctx, blockArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.started:
	case <-ctx.Done():
		t.Fatal("the job never started")
	}

	proxy.setCut(true)
	close(w.release)
	for gaveUp := false; !gaveUp; {
		select {
		case line := <-lines:
			var rec struct{ Level, Msg string }
			if err := json.Unmarshal(line, &rec); err != nil {
				t.Fatal(err)
			}
			if rec.Msg == riverCompleterGivesUp {
				if rec.Level != "WARN" {
					t.Fatalf("logged %s", line)
				}
				gaveUp = true
			}
		case <-ctx.Done():
			t.Fatalf("River's completer never logged %q: River renamed it?", riverCompleterGivesUp)
		}
	}

	proxy.setCut(false)
	select {
	case ev := <-completed:
		if ev.Job.Kind != (blockArgs{}).Kind() {
			t.Fatalf("completed %s", ev.Job.Kind)
		}
	case <-ctx.Done():
		t.Fatal("the job was never written completed after Postgres came back")
	}
}
