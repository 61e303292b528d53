package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/internal/app"
	"github.com/memoryd/memoryd/migrations"
	"github.com/memoryd/memoryd/store"
)

// env is the servers and the things membench created on them.
type env struct {
	o       *options
	admin   *pgx.Conn
	nc      *nats.Conn
	js      jetstream.JetStream
	tmp     string
	bin     string
	mu      sync.Mutex
	schemas []string // dropped at cleanup
	streams []string // deleted at cleanup
	keep    string   // schema kept on purpose
}

func newEnv(ctx context.Context, o *options) (*env, error) {
	e := &env{o: o}
	// The database (by default the test suite's) is created when missing,
	// as serve does, so a fresh server needs no setup.
	s, err := store.Open(ctx, store.Config{URL: o.dbURL, MaxConns: 1, CreateDatabase: true, Logger: quietLogger()})
	if err != nil {
		return nil, err
	}
	s.Close()
	// Through the pool's parser: a URL capped with pool_max_conns is
	// refused by pgx.Connect, which sends the parameter as a setting.
	pcfg, err := pgxpool.ParseConfig(o.dbURL)
	if err != nil {
		return nil, fmt.Errorf("database url %s: %w", app.RedactURL(o.dbURL), err)
	}
	if e.admin, err = pgx.ConnectConfig(ctx, pcfg.ConnConfig); err != nil {
		return nil, fmt.Errorf("connect to Postgres at %s: %w", app.RedactURL(o.dbURL), err)
	}
	if e.nc, err = nats.Connect(o.natsURL, nats.Name("membench")); err != nil {
		e.admin.Close(ctx)
		return nil, fmt.Errorf("connect to NATS at %s: %w", o.natsURL, err)
	}
	if e.js, err = jetstream.New(e.nc, jetstream.WithPublishAsyncMaxPending(4096)); err != nil {
		e.cleanup()
		return nil, err
	}
	if e.tmp, err = os.MkdirTemp("", "membench-"); err != nil {
		e.cleanup()
		return nil, err
	}
	return e, nil
}

// schemaURL returns o.dbURL with search_path set to schema.
func (e *env) schemaURL(schema string) string {
	sep := "?"
	if strings.Contains(e.o.dbURL, "?") {
		sep = "&"
	}
	return e.o.dbURL + sep + "search_path=" + schema
}

// newSchema creates an empty schema with memoryd's migrations applied and
// returns its connection string.
func (e *env) newSchema(ctx context.Context, name string) (string, error) {
	if _, err := e.admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create schema %s: %w", name, err)
	}
	e.mu.Lock()
	e.schemas = append(e.schemas, name)
	e.mu.Unlock()
	url := e.schemaURL(name)
	s, err := store.Open(ctx, store.Config{URL: url, MaxConns: 2, Logger: quietLogger()})
	if err != nil {
		return "", err
	}
	defer s.Close()
	if _, err := s.Migrate(ctx, migrations.FS, quietLogger()); err != nil {
		return "", err
	}
	return url, nil
}

// addStream records a stream (and its dead-letter stream) for deletion.
func (e *env) addStream(name string) {
	e.mu.Lock()
	e.streams = append(e.streams, name, events.DeadLetterStream(name))
	e.mu.Unlock()
}

func (e *env) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if e.js != nil {
		for _, s := range e.streams {
			_ = e.js.DeleteStream(ctx, s)
		}
	}
	if e.nc != nil {
		e.nc.Close()
	}
	if e.admin != nil {
		for _, s := range e.schemas {
			if s == e.keep {
				logf("kept schema %s (rerun with --schema %s; drop it with DROP SCHEMA %s CASCADE)", s, s, s)
				continue
			}
			if _, err := e.admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE"); err != nil {
				logf("drop schema %s: %v", s, err)
			}
		}
		e.admin.Close(ctx)
	}
	if e.tmp != "" {
		_ = os.RemoveAll(e.tmp)
	}
}

// memoryd returns the memoryd binary, building it on first use.
func (e *env) memoryd(ctx context.Context) (string, error) {
	if e.o.memorydBin != "" {
		return e.o.memorydBin, nil
	}
	if e.bin != "" {
		return e.bin, nil
	}
	bin := filepath.Join(e.tmp, "memoryd")
	logf("building memoryd")
	// Built in memoryd's own module (the tools module's replace points at
	// it), whose go.sum covers the binary's dependencies.
	dir, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/memoryd/memoryd").Output()
	if err != nil {
		return "", fmt.Errorf("locate memoryd's module: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/memoryd")
	cmd.Dir = strings.TrimSpace(string(dir))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/memoryd: %w", err)
	}
	e.bin = bin
	return bin, nil
}

// procStatus reads kB fields (VmHWM, VmRSS) of /proc/<pid>/status.
func procStatus(pid int) map[string]int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || !strings.HasPrefix(k, "Vm") {
			continue
		}
		var n int64
		if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &n); err == nil {
			out[k] = n
		}
	}
	return out
}

// machineNotes describes the machine and servers for the table.
func machineNotes() string {
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(strings.SplitN(string(data), "\n", 2)[0], "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB RAM", float64(kb)/(1<<20))
		}
	}
	return fmt.Sprintf("%d CPUs (%s)%s, %s/%s, %s", runtime.NumCPU(), cpu, mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}
