package worker

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestFollowerSaysWhenOtherModelsChange: a worker that embeds says once
// which other models running workers embed with, not again when its own
// model's process registers or the list's order changes, and says when no
// other model is left (an embeddings walk: the line came twice at start,
// and not at all when the other model's serve stopped).
func TestFollowerSaysWhenOtherModelsChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	var logs bytes.Buffer
	f := &EmbedFollower{cfg: EmbedFollowerConfig{Store: s, Own: "m2", Logger: slog.New(slog.NewTextHandler(&logs, nil))}.withDefaults()}
	step := func(what string, change func() error, want string) {
		t.Helper()
		logs.Reset()
		if err := change(); err != nil {
			t.Fatal(err)
		}
		if err := f.refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(logs.String(), "msg="); (want == "") != (got == 0) || want != "" && !strings.Contains(logs.String(), want) {
			t.Errorf("%s: logged %q, want %q", what, logs.String(), want)
		}
	}
	register := func(id, model string) func() error {
		return func() error { return s.RegisterProcess(ctx, id, store.ProcessRecord{EmbedModel: model}) }
	}
	step("the old model's serve running", register("old", "m1"), "other_models=[m1]")
	step("this process registers its own model", register("own", "m2"), "")
	step("read again, nothing changed", func() error { return nil }, "")
	step("the old model's serve stops", func() error { return s.EndProcess(ctx, "old") }, "no other running worker embeds with another model now")
	step("read again", func() error { return nil }, "")
}
