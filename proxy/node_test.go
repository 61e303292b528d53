package proxy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// nodeClient installs the openai npm package pinned by
// testdata/openai-node/package-lock.json into a cache directory (once; npm
// ci is skipped while the lock file is unchanged) and returns the directory
// holding client.mjs and node_modules.
func nodeClient(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed (needed for the openai npm client test): %v", err)
	}
	src := filepath.Join("testdata", "openai-node")
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "memoryd-test", "openai-node")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"package.json", "package-lock.json", "client.mjs"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stamp := filepath.Join(dir, "node_modules", ".memoryd-lock")
	if have, err := os.ReadFile(stamp); err == nil && bytes.Equal(have, lock) {
		return dir
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--cache", filepath.Join(dir, ".npm"))
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm could not install the openai client into %s (is the npm registry reachable?): %v\n%s", dir, err, out)
	}
	if err := os.WriteFile(stamp, lock, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestOpenAINodeClient: the real openai npm client streams through the
// proxy, its turn is remembered, a second conversation is enriched with it,
// models are listed, and a wrong key is its 401.
func TestOpenAINodeClient(t *testing.T) {
	t.Parallel()
	dir := nodeClient(t)
	e := newEnv(t, nil)
	run := func(mode, message string) map[string]any {
		t.Helper()
		cmd := exec.Command("node", "client.mjs", mode, message)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PROXY_URL="+e.url, "PROXY_KEY="+e.keys["alice"])
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node client.mjs %s: %v\n%s", mode, err, out)
		}
		var r map[string]any
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("node client.mjs %s printed %q: %v", mode, out, err)
		}
		return r
	}
	if r := run("stream", "I live in Lisbon"); r["text"] != replyText {
		t.Fatalf("streamed reply: %v", r)
	}
	e.waitProcessed(t, "alice", 1)
	if r := run("chat", "where do I live?"); r["text"] != replyText || r["total_tokens"] != float64(18) {
		t.Fatalf("reply: %v", r)
	}
	_, last := lastMessage(t, e.up.last(t))
	if !strings.Contains(string(last["content"]), "Lisbon") {
		t.Fatalf("the second conversation reached the upstream unenriched: %s", last["content"])
	}
	if r := run("models", ""); fmt.Sprint(r["models"]) != "[fake-model]" {
		t.Fatalf("models: %v", r)
	}
	if r := run("badkey", "hi"); r["status"] != float64(401) {
		t.Fatalf("a wrong key: %v", r)
	}
}
