package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/memoryd/memoryd/agenttools"
	"github.com/memoryd/memoryd/apikeys"
	"github.com/memoryd/memoryd/events"
)

// runMCP serves a user's memory to agents as MCP tools, over stdio for one
// --user or over streamable HTTP (--listen) for the users of API keys.
func runMCP(ctx context.Context, a *cli, args []string) error {
	var (
		conn            connOptions
		cfg             agenttools.Config
		keysFile        string
		keyHashes       string
		shutdownTimeout time.Duration
	)
	f := newFlags("mcp", `Usage: memoryd mcp --user U                      (stdio, one user)
       memoryd mcp --listen ADDR --keys FILE        (streamable HTTP, the user of each bearer key)

Serves a user's memory to agents over the Model Context Protocol: tools to
search, store, list and delete memories and to get, set, list and clear
facts, and the resource memoryd://facts. Over stdio (an agent starts
'memoryd mcp --user U' itself) every call acts for --user; over HTTP every
request needs 'Authorization: Bearer <key>' with a key of --keys ('memoryd
keys add' creates keys) and acts for that key's user; others get 401. No tool
argument names a user. A running 'memoryd serve' answers the calls.`)
	conn.register(f)
	f.Lookup("database-url").Usage = "not used: this command talks to memoryd over NATS only"
	f.ArgString(&cfg.User, "user", "", "stdio: the user every call acts for")
	f.CommandEnvs("mcp") // MEMORYD_MCP_LISTEN, ... (commandEnvs)
	f.String(&cfg.Listen, "listen", "", "serve streamable HTTP on this address, e.g. 127.0.0.1:8765 (empty: stdio)")
	f.String(&keysFile, "keys", "", "HTTP: API key file, lines 'sha256:<hex> <user_id>' (memoryd keys add); reloaded on change")
	f.Secret(&keyHashes, "key-hashes", "HTTP: more key lines in the --keys format, separated by ';'")
	f.Duration(&cfg.Timeout, "timeout", agenttools.DefaultTimeout, "how long one tool call waits for memoryd's reply, its turn among the user's calls in parallel included")
	f.Duration(&shutdownTimeout, "shutdown-timeout", 30*time.Second, "HTTP: how long requests in flight may take to finish on SIGINT/SIGTERM")
	if err := f.Parse(args); err != nil {
		return err
	}
	switch {
	case f.NArg() > 0:
		return f.usageErr("unexpected argument %q", f.Arg(0))
	case cfg.Listen == "" && cfg.User == "":
		return f.usageErr("--user is required over stdio (or give --listen and --keys for HTTP)")
	case cfg.Listen != "" && cfg.User != "":
		return f.usageErr("--user is for stdio: over HTTP (--listen) each request's user is its API key's")
	case cfg.Listen != "" && keysFile == "" && keyHashes == "":
		return f.usageErr("--keys (or --key-hashes) is required with --listen")
	case cfg.Listen == "" && (keysFile != "" || keyHashes != ""):
		return f.usageErr("--keys is for HTTP: give --listen too (over stdio the user is --user)")
	case cfg.Timeout <= 0 || shutdownTimeout <= 0:
		return f.usageErr("--timeout and --shutdown-timeout must be positive")
	}
	logger, err := conn.logger(a)
	if err != nil {
		return err
	}
	if cfg.Listen != "" {
		keys, err := apikeys.New(apikeys.Config{File: keysFile, Text: keyHashes, Logger: logger})
		if err != nil {
			return err
		}
		if keys.Len() == 0 {
			logger.Warn("no API keys: every request is refused until keys are added (memoryd keys add)", "file", keysFile)
		}
		keys.Start()
		defer keys.Stop()
		cfg.Keys = keys
	}
	nc, err := conn.connectNATS("memoryd-mcp", logger)
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := checkInbox(nc); err != nil {
		return err
	}
	cfg.Client, cfg.Logger, cfg.Version = events.NewClient(nc, conn.prefix), logger, version
	srv, err := agenttools.New(cfg)
	if err != nil {
		return err
	}
	if cfg.Listen == "" {
		return srv.ServeStdio(ctx)
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "memoryd mcp: listening on http://%s/ (streamable HTTP)\n", srv.Addr())
	select {
	case <-ctx.Done():
	case err := <-srv.Done():
		return err
	}
	logger.Info("shutting down", "timeout", shutdownTimeout)
	stopCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Stop(stopCtx); errors.Is(err, agenttools.ErrCallsCut) {
		// As serve: what the deadline cut is said, and the stop is done.
		logger.Warn("stopped past --shutdown-timeout", "error", err)
	} else if err != nil {
		return err
	}
	if err := <-srv.Done(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	logger.Info("stopped")
	return nil
}
