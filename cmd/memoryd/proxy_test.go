package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/apikeys"
	"github.com/memoryd/memoryd/events/eventstest"
)

// TestKeysAdd: the printed key is the one the file's hash stands for, and
// the file holds no plaintext key.
func TestKeysAdd(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	out, errOut, code := runArgs(context.Background(), "keys", "add", "--file", file, "--user", "alice")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	key := strings.TrimSpace(out)
	set, err := apikeys.New(apikeys.Config{File: file})
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := set.Lookup(key); !ok || u != "alice" {
		t.Fatalf("printed key %q: lookup %q, %v", key, u, ok)
	}
	data, _ := os.ReadFile(file)
	if strings.Contains(string(data), key) {
		t.Fatal("the key file holds the key itself")
	}
	for _, args := range [][]string{{"keys"}, {"keys", "remove"}, {"keys", "add", "--user", "a"},
		{"keys", "revoke", "--file", file}, {"keys", "revoke", "--file", file, "--hash", "ab", "--key", key}, {"keys", "list", "--file", file, "--user", "a"},
		// Arguments apikeys refuses are usage errors too.
		{"keys", "revoke", "--file", file, "--hash", "54f4a5"}, {"keys", "revoke", "--file", file, "--hash", "not-hex-digits"},
		{"keys", "add", "--file", file, "--user", "Alice Smith"}, {"keys", "add", "--file", file, "--user", "alice "}} {
		if _, _, code := runArgs(context.Background(), args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}

	// The refusal names the flag missing (before: "--file and --user are
	// required" with --file given).
	if _, errOut, code := runArgs(context.Background(), "keys", "add", "--file", file); code != 2 || !strings.Contains(errOut, "add needs --user") {
		t.Errorf("keys add without --user: exit %d, %q; want 2 naming --user alone", code, errOut)
	}

	// list and revoke (before: deleting the line by hand, found by hashing
	// the key).
	second, _, code := runArgs(context.Background(), "keys", "add", "--file", file, "--user", "alice")
	if code != 0 {
		t.Fatal("second key not added")
	}
	out, _, code = runArgs(context.Background(), "keys", "list", "--file", file)
	if code != 0 || strings.Count(out, "alice  sha256:") != 2 {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	out, errOut, code = runArgs(context.Background(), "keys", "revoke", "--file", file, "--key", key)
	if code != 0 || !strings.Contains(out, "revoked line 1  alice") {
		t.Fatalf("revoke --key: exit %d\n%s%s", code, out, errOut)
	}
	if err := func() error { _, err := set.Reload(); return err }(); err != nil {
		t.Fatal(err)
	}
	if _, ok := set.Lookup(key); ok {
		t.Error("the revoked key is still found")
	}
	if u, ok := set.Lookup(strings.TrimSpace(second)); !ok || u != "alice" {
		t.Errorf("the other key of alice after revoking one: %q, %v", u, ok)
	}
	if _, _, code := runArgs(context.Background(), "keys", "revoke", "--file", file, "--key", key); code != 1 {
		t.Errorf("revoking a key no longer in the file: exit %d, want 1", code)
	}
}

// TestProxyCommand: bad settings are refused with the flag named; a proxy
// started with a key file serves until its context ends.
func TestProxyCommand(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("# ok\nmk-plain alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"proxy"}, 2, "--upstream is required"},
		{[]string{"proxy", "--upstream", "not a url"}, 2, `--upstream "not a url" is not an http or https URL`},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1"}, 2, "--keys"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--keys", bad}, 1, "line 2"},
		{[]string{"proxy", "--upstream", "ftp://x", "--trusted-user-header", "X-U"}, 2, "is not an http or https URL"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--max-request-bytes", "0"}, 2, "--max-request-bytes 0 is not a positive size"},
	} {
		_, errOut, code := runArgs(context.Background(), append(tc.args, "--nats-url", eventstest.URL())...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}

	keys := filepath.Join(dir, "keys")
	out, errOut, code := runArgs(context.Background(), "keys", "add", "--file", keys, "--user", "alice")
	if code != 0 {
		t.Fatal(errOut)
	}
	key := strings.TrimSpace(out)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr eventstest.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &cli{stdout: &stderr, stderr: &stderr}, []string{"proxy", "--upstream", "http://127.0.0.1:1/v1",
			"--keys", keys, "--listen", "127.0.0.1:0", "--nats-url", eventstest.URL(), "--log-format", "json", "--max-request-bytes", "1000"})
	}()
	addr := regexp.MustCompile(`listening on (http://\S+/v1)`)
	var base string
	eventstest.Eventually(t, "the proxy to listen", time.Minute, func() (bool, string) {
		m := addr.FindStringSubmatch(stderr.String())
		if m != nil {
			base = m[1]
		}
		return m != nil, stderr.String()
	})
	resp, err := http.Get(base + "/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /v1/models without a key: %s", resp.Status)
	}
	// --max-request-bytes bounds the body: 1,001 bytes are refused.
	body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 1001-len(`{"model":"m","messages":[{"role":"user","content":""}]}`)) + `"}]}`
	req, err := http.NewRequest(http.MethodPost, base+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(body) != 1001 || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a %d-byte chat request over --max-request-bytes 1000: %s, want 413", len(body), resp.Status)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("proxy exited %d after its context ended: %s", code, stderr.String())
	}
}

// TestProxyAndMCPEnvAreTheirOwn: proxy and mcp read --listen, --keys and
// --key-hashes from variables of their own, so one environment can hold
// both; the proxy still reads the shared names its docs first promised
// (MEMORYD_KEYS, ...), with a deprecation warning, and mcp never does.
func TestProxyAndMCPEnvAreTheirOwn(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-keys")
	nats := []string{"--nats-url", eventstest.URL()}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
		want []string // in stderr
	}{
		{"proxy reads MEMORYD_PROXY_KEYS", map[string]string{"MEMORYD_PROXY_KEYS": missing},
			[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1"}, 1, []string{"no-such-keys"}},
		{"proxy ignores MEMORYD_MCP_KEYS", map[string]string{"MEMORYD_MCP_KEYS": missing},
			[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1"}, 2, []string{"--keys (or --key-hashes) is required"}},
		{"proxy reads the deprecated MEMORYD_KEYS and says so", map[string]string{"MEMORYD_KEYS": missing},
			[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1"}, 1, []string{"no-such-keys", "MEMORYD_KEYS is deprecated: set MEMORYD_PROXY_KEYS"}},
		{"proxy prefers MEMORYD_PROXY_KEY_HASHES", map[string]string{"MEMORYD_PROXY_KEY_HASHES": "sha256:" + strings.Repeat("ab", 32) + " alice;bad", "MEMORYD_KEY_HASHES": "bad"},
			[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1"}, 1, []string{"line 2"}},
		{"mcp reads MEMORYD_MCP_LISTEN", map[string]string{"MEMORYD_MCP_LISTEN": "127.0.0.1:0"},
			[]string{"mcp"}, 2, []string{"--keys (or --key-hashes) is required with --listen"}},
		{"mcp ignores MEMORYD_PROXY_LISTEN", map[string]string{"MEMORYD_PROXY_LISTEN": "127.0.0.1:0"},
			[]string{"mcp"}, 2, []string{"--user is required over stdio"}},
		{"mcp ignores the proxy's old MEMORYD_LISTEN", map[string]string{"MEMORYD_LISTEN": "127.0.0.1:0", "MEMORYD_KEYS": missing},
			[]string{"mcp"}, 2, []string{"--user is required over stdio"}},
		{"mcp reads MEMORYD_MCP_KEYS", map[string]string{"MEMORYD_MCP_KEYS": missing},
			[]string{"mcp", "--listen", "127.0.0.1:0"}, 1, []string{"no-such-keys"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, errOut, code := runArgs(context.Background(), append(tc.args, nats...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tc.code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q lacks %q", errOut, w)
				}
			}
		})
	}
}

// TestProxyRefusesOTLPEndpointAsAFlag: a bad --otlp-endpoint (here one
// with credentials, which the exporter would drop) is a bad flag, as in
// serve: exit 2 naming --otlp-endpoint, without the password, and before
// connecting, so a NATS that is not there does not hide it.
func TestProxyRefusesOTLPEndpointAsAFlag(t *testing.T) {
	_, errOut, code := runArgs(context.Background(), "proxy", "--upstream", "http://127.0.0.1:1/v1", "--trusted-user-header", "X-User",
		"--listen", "127.0.0.1:0", "--nats-url", "nats://127.0.0.1:1", "--otlp-endpoint", "https://alice:pw-SECRET@collector:4318")
	if code != 2 || !strings.Contains(errOut, "--otlp-endpoint") || !strings.Contains(errOut, "carries credentials") || strings.Contains(errOut, "pw-SECRET") {
		t.Errorf("exit %d, stderr %q; want 2 naming --otlp-endpoint, without the password", code, errOut)
	}
}
