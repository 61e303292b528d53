package worker

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestModelRecoveryHeldBack: the server's answer after a failure is told
// at info at most once every modelToldEvery, the ones between at debug
// (a gateway failing for a moment every few seconds); an answer with no
// failure before it is not told.
func TestModelRecoveryHeldBack(t *testing.T) {
	e := raceSetup(t)
	logs := new(eventstest.SyncBuffer)
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: "http://127.0.0.1:9/v1", Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(Config{Conn: e.js.Conn(), Store: storetest.New(t), Extractor: llm, Prefix: e.prefix, Stream: e.stream,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	told := func() []string {
		var levels []string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, msgModelAnswersAgain) {
				levels = append(levels, l[strings.Index(l, "level=")+6:strings.Index(l, " msg=")])
			}
		}
		return levels
	}
	w.modelAnswered()
	w.modelWaiting()
	w.modelAnswered()
	w.modelAnswered()
	w.modelFailing()
	w.modelAnswered()
	// As if the line at info were modelToldEvery ago.
	w.modelToldAt.Add(-int64(modelToldEvery + time.Second))
	w.modelWaiting()
	w.modelAnswered()
	if got, want := strings.Join(told(), ","), "INFO,DEBUG,INFO"; got != want {
		t.Errorf("the recoveries were told at %s, want %s:\n%s", got, want, logs)
	}
}
