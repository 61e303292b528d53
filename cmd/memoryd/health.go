package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"strings"
	"syscall"
	"time"
)

// runHealth probes a readiness URL: the container image has no curl, so its
// healthcheck calls the binary itself.
func runHealth(ctx context.Context, a *cli, args []string) error {
	var url, addr string
	f := newFlags("health", `Usage: memoryd health [--url URL]

Exits 0 when URL (a running serve's, proxy's or mcp's /readyz) answers
200, 1 otherwise.
serve has no HTTP endpoint unless started with --http (off by default),
e.g. memoryd serve --http 127.0.0.1:9090. Without --url it probes the
address serve's --http setting gives (memoryd.yaml's http, MEMORYD_HTTP).`)
	f.ArgString(&url, "url", "http://127.0.0.1:9090/readyz", "readiness URL to probe; serve's --http address alone (127.0.0.1:9090, or a URL without a path) probes its /readyz")
	f.String(&addr, "http", "", "serve's --http address, probed when --url is not given (the same setting as serve's, so memoryd.yaml's http applies)")
	if err := f.Parse(args); err != nil {
		return err
	}
	if f.source["url"] == "default" && addr != "" {
		url = addr
	}
	// serve's --http value as written (127.0.0.1:9090, :9090) is an address.
	if !strings.Contains(url, "://") {
		if strings.HasPrefix(url, ":") {
			url = "127.0.0.1" + url
		}
		url = "http://" + url
	}
	if u, err := neturl.Parse(url); err == nil && (u.Path == "" || u.Path == "/") && u.RawQuery == "" {
		u.Path = "/readyz"
		url = u.String()
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("nothing listens at %s: serve answers there only when started with --http (off by default), e.g. memoryd serve --http 127.0.0.1:9090; proxy and mcp at their --listen address, while they run", url)
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// The body says why (`{"nats":"not connected: RECONNECTING"}`).
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if b := strings.TrimSpace(string(body)); b != "" {
			return fmt.Errorf("%s answered %s: %s", url, resp.Status, b)
		}
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	fmt.Fprintln(a.stdout, "ready")
	return nil
}
