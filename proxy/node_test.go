package proxy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/internal/nodetest"
)

// TestOpenAINodeClient: the real openai npm client streams through the
// proxy, its turn is remembered, a second conversation is enriched with it,
// models are listed, and a wrong key is its 401.
func TestOpenAINodeClient(t *testing.T) {
	t.Parallel()
	dir := nodetest.Install(t, filepath.Join("testdata", "openai-node"), "openai-node", "package.json", "package-lock.json", "client.mjs")
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
