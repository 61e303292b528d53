package app

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/worker"
)

// TestLLMWarningHidesPassword: the start-up warning about a model server
// that does not answer logs neither in its base_url nor in its error the
// password of a base URL, and says what extraction does meanwhile.
func TestLLMWarningHidesPassword(t *testing.T) {
	t.Parallel()
	addr := fmt.Sprintf("127.0.0.1:%d", eventstest.FreePort(t)) // released: refused
	out := startCheckLogs(t, "http://alice:pw-SECRET@"+addr+"/v1")
	if !strings.Contains(out, "does not answer") {
		t.Fatalf("no warning logged: %s", out)
	}
	if strings.Contains(out, "pw-SECRET") {
		t.Errorf("the warning logs the password: %s", out)
	}
	if !strings.Contains(out, "without spending attempts") || !strings.Contains(out, `"max_model_outage":"30m0s"`) {
		t.Errorf("the warning does not say extraction waits for the model: %s", out)
	}
}

// TestLLMStartCheckSaysWhatTheServerAnswered: the start-up check of the
// model server tells a server that answered from one that did not. Before,
// a server without a model list (404) or refusing the key (401) was logged
// as "does not answer", sending the operator to check that it runs.
func TestLLMStartCheckSaysWhatTheServerAnswered(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status            int
		path, level, want string
	}{
		{http.StatusNotFound, "/v1", "INFO", "lists no models"},
		// A base URL without /v1: the usual mistake, said as such.
		{http.StatusNotFound, "", "WARN", "usually ends in /v1"},
		{http.StatusMethodNotAllowed, "", "WARN", "usually ends in /v1"},
		{http.StatusUnauthorized, "/v1", "WARN", "refused the API key"},
		{http.StatusForbidden, "/v1", "WARN", "refused the API key"},
		{http.StatusInternalServerError, "/v1", "WARN", "answered the model list with an error"},
		// A gateway before a model server that is down: an outage, as
		// extraction treats it.
		{http.StatusBadGateway, "/v1", "WARN", "without spending attempts"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tt.status)
			_, _ = w.Write([]byte(`{"error":{"message":"no","type":"x"}}`))
		}))
		out := startCheckLogs(t, srv.URL+tt.path)
		srv.Close()
		if !strings.Contains(out, tt.want) || !strings.Contains(out, `"level":"`+tt.level+`"`) || strings.Contains(out, "does not answer") {
			t.Errorf("HTTP %d at %q: want %s %q, got %s", tt.status, tt.path, tt.level, tt.want, out)
		}
	}
}

// TestLLMStartCheckNamesTheKeyFile: a key refused at start is said to be
// fixed in the file it came from, read again when it changes, not by
// --llm-api-key and a restart (a key-rotation walk with
// --llm-api-key-file was told to set --llm-api-key).
func TestLLMStartCheckNamesTheKeyFile(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"message":"no","type":"x"}}`))
	}))
	defer srv.Close()
	keyFile := filepath.Join(t.TempDir(), "llm-key")
	if err := os.WriteFile(keyFile, []byte("old-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := startCheckLogsConfig(t, extractor.LLMConfig{BaseURL: srv.URL + "/v1", Model: "m", APIKeyFile: keyFile})
	if !strings.Contains(out, "refused the API key") || !strings.Contains(out, "--llm-api-key-file holds one it takes") || strings.Contains(out, "MEMORYD_LLM_API_KEY)") {
		t.Errorf("key file refused at start: want the file named, got %s", out)
	}
	if out := startCheckLogs(t, srv.URL+"/v1"); !strings.Contains(out, "--llm-api-key (MEMORYD_LLM_API_KEY) is one it takes") {
		t.Errorf("key refused at start: want --llm-api-key named, got %s", out)
	}
}

// startCheckLogs runs the start-up check of the LLM extractor at baseURL
// and returns what it logged, as JSON lines.
func startCheckLogs(t *testing.T, baseURL string) string {
	t.Helper()
	return startCheckLogsModel(t, baseURL, "m")
}

// startCheckLogsModel is startCheckLogs with model as --llm-model.
func startCheckLogsModel(t *testing.T, baseURL, model string) string {
	t.Helper()
	return startCheckLogsConfig(t, extractor.LLMConfig{BaseURL: baseURL, Model: model})
}

// startCheckLogsConfig is startCheckLogs with the LLM's configuration lc.
func startCheckLogsConfig(t *testing.T, lc extractor.LLMConfig) string {
	t.Helper()
	cfg := Config{LLM: lc}.withDefaults()
	llm, err := extractor.NewLLM(cfg.LLM)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	a := &App{cfg: cfg, logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	a.logExtractor(context.Background(), llm)
	return logs.String()
}

// A job size over the batch size (a memoryd.yaml shared with replay) is
// cut to the batch size, and serve says so at start: it was cut silently.
func TestJobSizeOverTheBatchIsSaid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		jobSize, batch int
		warned         bool
	}{
		{1000, 100, true},
		{100, 100, false},
		{0, 100, false},
		{20, 100, false},
	} {
		a, err := New(Config{Worker: worker.Config{JobSize: tc.jobSize, BatchSize: tc.batch}})
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		a.logger = slog.New(slog.NewJSONHandler(&logs, nil))
		a.logJobSize(context.Background())
		warned := strings.Contains(logs.String(), `"job_size":1000,"batch_size":100`)
		if warned != tc.warned || a.cfg.Worker.JobSize > tc.batch {
			t.Errorf("job size %d, batch %d: job size used %d, logs %q; want at most the batch, warned %v", tc.jobSize, tc.batch, a.cfg.Worker.JobSize, logs.String(), tc.warned)
		}
	}
}

// TestLLMStartCheckNamesAModelNotListed: when the model server's list does
// not hold --llm-model, the start-up check warns, naming the model and a
// few it lists, and does not fail (some servers serve aliases they do not
// list); a model it lists, or Ollama's name without its ":latest" tag, is
// not warned about. Before, a mistyped model was first told by the first
// turn's failure.
func TestLLMStartCheckNamesAModelNotListed(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"qwen2.5:7b","object":"model"},{"id":"llama3:latest","object":"model"},` +
			`{"id":"a","object":"model"},{"id":"b","object":"model"},{"id":"c","object":"model"},{"id":"d","object":"model"}]}`))
	}))
	defer srv.Close()
	for _, tt := range []struct {
		model  string
		warned bool
	}{
		{"qwen2.5:7b", false},
		{"llama3", false},
		{"llama3:latest", false},
		{"qwen2.5:7B-typo", true},
	} {
		out := startCheckLogsModel(t, srv.URL+"/v1", tt.model)
		warned := strings.Contains(out, "does not list the model")
		if warned != tt.warned {
			t.Errorf("model %q: warned %v, want %v: %s", tt.model, warned, tt.warned, out)
		}
		if warned && (!strings.Contains(out, `"level":"WARN"`) || !strings.Contains(out, `"model":"`+tt.model+`"`) ||
			!strings.Contains(out, `"some_listed":["qwen2.5:7b","llama3:latest","a","b","c"]`) || !strings.Contains(out, "--llm-model")) {
			t.Errorf("model %q: the warning does not name the model, --llm-model and a few listed: %s", tt.model, out)
		}
	}
}

// TestLLMStartCheckSuggestsTheTagPulled: a model named without the tag
// pulled (Ollama's "qwen3", which is "qwen3:latest", where "qwen3:8b" was
// pulled: a local-model walk's first start) is answered with the listed
// models of that name, whatever their place in a long list, which the
// first five (some_listed) may not reach.
func TestLLMStartCheckSuggestsTheTagPulled(t *testing.T) {
	t.Parallel()
	var list strings.Builder
	for i := range 20 {
		fmt.Fprintf(&list, `{"id":"model%d:latest","object":"model"},`, i)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[` + list.String() + `{"id":"qwen3:8b","object":"model"},{"id":"Qwen3:32b","object":"model"},{"id":"qwen3-coder:30b","object":"model"}]}`))
	}))
	defer srv.Close()
	out := startCheckLogsModel(t, srv.URL+"/v1", "qwen3")
	if !strings.Contains(out, "does not list the model") || !strings.Contains(out, `"same_name":["qwen3:8b","Qwen3:32b"]`) {
		t.Errorf("the warning does not name the listed models of that name: %s", out)
	}
	// None of that name: no such list.
	if out := startCheckLogsModel(t, srv.URL+"/v1", "mistral"); !strings.Contains(out, "does not list the model") || strings.Contains(out, "same_name") {
		t.Errorf("model mistral: %s", out)
	}
}
