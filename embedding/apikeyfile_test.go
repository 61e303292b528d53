package embedding_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/internal/secretfile/secretfiletest"
)

// An API key given by file (--embed-api-key-file) is read again when the
// file changes: the key written to the file after the provider's rotation
// is sent from the next request on, without a restart; the old one the
// server quotes back while refusing it is hidden as the configured one is.
func TestEmbedAPIKeyFileRotated(t *testing.T) {
	var (
		mu   sync.Mutex
		want = "first-key-0123456789"
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		key := want
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if sent, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); sent != key {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s"}}`, sent)
			return
		}
		fmt.Fprint(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.6,0.8]}],"model":"m"}`)
	}))
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "key")
	replace := func(text string) { secretfiletest.Replace(t, path, text) }
	replace("first-key-0123456789\n")
	// rotateDuring, when set, is written to the key file while a request
	// is answered: the reply then quotes a key that is no longer the
	// file's.
	var rotateDuring atomic.Pointer[string]
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if next := rotateDuring.Load(); next != nil {
			replace(*next)
		}
		return resp, err
	})}
	c, err := embedding.New(embedding.Config{BaseURL: srv.URL, APIKeyFile: path, HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Embed(ctx, []string{"hello"}); err != nil {
		t.Fatalf("with the key the server takes: %v", err)
	}

	mu.Lock()
	want = "second-key-9876543210" // the provider rotated it
	mu.Unlock()
	_, err = c.Embed(ctx, []string{"hello"})
	if err == nil || !strings.Contains(err.Error(), "status 401") || strings.Contains(err.Error(), "first-key") {
		t.Fatalf("with the old key: %v; want the server's 401, the key hidden", err)
	}

	replace("second-key-9876543210")
	if _, err := c.Embed(ctx, []string{"hello"}); err != nil {
		t.Fatalf("after the key file was rotated: %v", err)
	}

	// Rotated again while a request with the second key is refused: the
	// key the reply quotes is the one sent, hidden though the file holds
	// another by then.
	mu.Lock()
	want = "third-key-5555555555"
	mu.Unlock()
	third := "third-key-5555555555"
	rotateDuring.Store(&third)
	if _, err := c.Embed(ctx, []string{"hello"}); err == nil || strings.Contains(err.Error(), "second-key") {
		t.Fatalf("refused while the file changed: %v; want the key sent hidden", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
