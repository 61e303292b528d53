package extractor

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/internal/secretfile/secretfiletest"
)

// An API key given by file (--llm-api-key-file) is read again when the
// file changes: after the provider's rotation, the key written to the
// file is sent from the next request on, without a restart (before, the
// key was read once, and a rotation took a restart of every serve). The
// old key the server quotes back while refusing it is hidden as the
// configured one is.
func TestLLMAPIKeyFileRotated(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "key")
	replace := func(text string) { secretfiletest.Replace(t, path, text) }
	replace("first-key-0123456789\n")
	srv := extractortest.NewServer(t)
	srv.SetKey("first-key-0123456789")
	// rotateDuring, when set, is written to the key file while a request
	// is answered: the reply then quotes a key that is no longer the
	// file's.
	var rotateDuring atomic.Pointer[string]
	l := newTestLLM(t, srv, func(c *LLMConfig) {
		c.APIKeyFile = path
		c.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := http.DefaultTransport.RoundTrip(r)
			if next := rotateDuring.Load(); next != nil {
				replace(*next)
			}
			return resp, err
		})}
	})
	ctx := context.Background()
	if _, err := l.Extract(ctx, testInput("I live in Lisbon")); err != nil {
		t.Fatalf("with the key the server takes: %v", err)
	}

	srv.SetKey("second-key-9876543210") // the provider rotated it
	_, err := l.Extract(ctx, testInput("I live in Porto"))
	if !IsUnreachable(err) || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "first-key") {
		t.Fatalf("with the old key: %v; want the server's 401, a refusal waited for as an outage, the key hidden", err)
	}

	replace("second-key-9876543210\n")
	if _, err := l.Extract(ctx, testInput("I live in Faro")); err != nil {
		t.Fatalf("after the key file was rotated: %v", err)
	}

	// Rotated again while a request with the second key is refused: the
	// key the reply quotes is the one sent, hidden though the file holds
	// another by then.
	srv.SetKey("third-key-5555555555")
	third := "third-key-5555555555"
	rotateDuring.Store(&third)
	_, err = l.Extract(ctx, testInput("I live in Braga"))
	if err == nil || strings.Contains(err.Error(), "second-key") {
		t.Fatalf("refused while the file changed: %v; want the key sent hidden", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A key file is refused with a key, and a file that holds none at start.
func TestLLMAPIKeyFileRefusals(t *testing.T) {
	t.Parallel()
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  LLMConfig
		want string
	}{
		{LLMConfig{APIKey: "k", APIKeyFile: empty}, "extractor: LLMConfig.APIKeyFile is set with APIKey; give one"},
		{LLMConfig{APIKeyFile: empty}, "extractor: LLMConfig.APIKeyFile: llm api key file: " + empty + " is empty"},
	} {
		tc.cfg.BaseURL, tc.cfg.Model = "http://127.0.0.1:1/v1", "m"
		if _, err := NewLLM(tc.cfg); err == nil || err.Error() != tc.want {
			t.Errorf("NewLLM(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
