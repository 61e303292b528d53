package proxy_test

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/proxy"
)

// TestUpstream404IsLogged: an upstream answering 404 to the chat request
// (an --upstream without its /v1, or a model the server lacks) is relayed
// unchanged, and logged with the URL asked and the model, so that the
// operator learns which: before, the chat app showed "404 page not found"
// and the proxy's log said nothing (a walk); and with the user, whose app
// it was (before, the line named none: a walk).
func TestUpstream404IsLogged(t *testing.T) {
	t.Parallel()
	logs := &eventstest.SyncBuffer{}
	e := newEnv(t, func(c *proxy.Config) { c.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	e.up.setMode("404")
	req, err := http.NewRequest(http.MethodPost, e.url+"/chat/completions", strings.NewReader(`{"model":"llama3.1","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.keys["alice"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "404 page not found") {
		t.Fatalf("the client got %s %q, want the upstream's 404 as it was", resp.Status, body)
	}
	out := logs.String()
	if !strings.Contains(out, "404") || !strings.Contains(out, e.up.URL()+"/chat/completions") || !strings.Contains(out, "model=llama3.1") || !strings.Contains(out, "/v1") {
		t.Errorf("the log does not say the upstream answered 404 to its URL for model llama3.1, with the /v1 hint:\n%s", out)
	}
	// Whose chat it was, as every other per-request warning says: a model
	// one user's app asks for that the server lacks is found by the user.
	if !strings.Contains(out, "user_id=alice") {
		t.Errorf("the 404's log line does not name the user (user_id=alice):\n%s", out)
	}
}
