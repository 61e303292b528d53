package app

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestWarnsOfOtherExtractors: a serve starting beside live processes that
// extract with another extractor says so (an audit saw a rules serve take
// over a model serve's 20 jobs and extract them with the rules, without a
// word until replay refused to run); beside processes of its own
// extractor it says nothing.
func TestWarnsOfOtherExtractors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	rules := extractor.NewRules()
	if err := s.RegisterProcess(ctx, "same", store.ProcessRecord{Extractor: "rules"}); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	a := &App{cfg: Config{}.withDefaults(), logger: slog.New(slog.NewTextHandler(&logs, nil))}
	a.warnOtherExtractors(ctx, s, rules)
	if logs.Len() != 0 {
		t.Fatalf("warned beside a process of its own extractor: %s", logs.String())
	}
	if err := s.RegisterProcess(ctx, "other", store.ProcessRecord{Extractor: "llm qwen3"}); err != nil {
		t.Fatal(err)
	}
	a.warnOtherExtractors(ctx, s, rules)
	if out := logs.String(); !strings.Contains(out, "extract with another extractor") || !strings.Contains(out, `other_extractor="llm qwen3"`) {
		t.Errorf("beside a process extracting with a model: %q", out)
	}
}
