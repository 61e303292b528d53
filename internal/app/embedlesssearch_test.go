package app

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestWarnsOfEmbedlessSearch: a serve answering enrich without
// --embed-base-url beside running workers that embed says so at warn
// level (an operator's walk: one serve started without the variable
// answered a third of the requests by keywords only, said only at info);
// with no worker embedding, or with embeddings itself, it says nothing.
func TestWarnsOfEmbedlessSearch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	var logs bytes.Buffer
	a := &App{cfg: Config{}.withDefaults(), logger: slog.New(slog.NewTextHandler(&logs, nil))}
	a.warnEmbedlessSearch(ctx, s)
	if logs.Len() != 0 {
		t.Fatalf("warned with no worker embedding: %s", logs.String())
	}
	if err := s.RegisterProcess(ctx, "embedding", store.ProcessRecord{Extractor: "rules", EmbedModel: "nomic-embed-text"}); err != nil {
		t.Fatal(err)
	}
	a.warnEmbedlessSearch(ctx, s)
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "no --embed-base-url") || !strings.Contains(out, "nomic-embed-text") {
		t.Errorf("beside a worker embedding: %q", out)
	}
	logs.Reset()
	withEmbed := &App{cfg: Config{}.withDefaults(), logger: slog.New(slog.NewTextHandler(&logs, nil))}
	withEmbed.cfg.Embed.BaseURL = "http://127.0.0.1:11434/v1"
	withEmbed.warnEmbedlessSearch(ctx, s)
	if logs.Len() != 0 {
		t.Errorf("warned though it embeds itself: %s", logs.String())
	}
}
